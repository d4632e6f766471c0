"""TLS of the servers (HTTP, gRPC, Arrow Flight) from PEM files: a certificate chain and its
key, and optionally a CA whose client certificates are required (mutual TLS)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

import grpc

from gnomon.errors import InvalidArgument


def _read(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InvalidArgument(f"cannot read the {what} {path!r}: {e.strerror}") from None


@dataclass(frozen=True)
class ServerTls:
    """PEM ``cert`` (chain) and ``key`` files; with ``client_ca``, clients must present a
    certificate that CA signed."""

    cert: str
    key: str
    client_ca: str | None = None

    def __post_init__(self) -> None:
        # Read once now, so a missing or unreadable file stops the start with its name.
        self.pem()

    def pem(self) -> tuple[bytes, bytes, bytes | None]:
        return (
            _read(self.cert, "TLS certificate (tls_cert)"),
            _read(self.key, "TLS key (tls_key)"),
            None if self.client_ca is None else _read(self.client_ca, "client CA (tls_client_ca)"),
        )

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as e:
            raise InvalidArgument(
                f"TLS certificate {self.cert!r} and key {self.key!r} do not load: {e}"
            ) from None
        if self.client_ca is not None:
            ctx.load_verify_locations(self.client_ca)
            ctx.verify_mode = ssl.CERT_REQUIRED
        return ctx

    def grpc_credentials(self) -> grpc.ServerCredentials:
        cert, key, ca = self.pem()
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
        )

    def flight_options(self) -> dict[str, Any]:
        """The keyword arguments of a pyarrow Flight server serving over this TLS."""
        cert, key, ca = self.pem()
        options: dict[str, Any] = {"tls_certificates": [(cert, key)]}
        if ca is not None:
            options.update(verify_client=True, root_certificates=ca)
        return options
