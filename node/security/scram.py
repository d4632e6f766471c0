"""SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks it: the verifier an account keeps
beside its scrypt hash, and the server's side of one exchange.

A verifier (salt, iteration count, StoredKey, ServerKey; PostgreSQL's 4096 iterations of
PBKDF2-HMAC-SHA-256) checks a client's proof without the password ever crossing the
connection, so SCRAM is safe without TLS, unlike a cleartext password. The server offers
only ``SCRAM-SHA-256``, no channel binding: it takes the gs2 header ``n,,`` (the client
binds nothing) and ``y,,`` (the client could, but was offered no ``-PLUS`` mechanism, which
is what libpq sends over TLS).

A malformed message raises InvalidArgument (a protocol violation), a wrong proof
Unauthenticated.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import stringprep
import unicodedata
from dataclasses import dataclass

from gnomon.errors import InvalidArgument, Unauthenticated

MECHANISM = "SCRAM-SHA-256"
#: PostgreSQL's default: verifiers made here and by ``CREATE ROLE ... PASSWORD`` cost the same.
ITERATIONS = 4096
_SALT_BYTES = 16
_NONCE_BYTES = 18
#: The gs2 headers accepted; the client echoes its header base64-encoded in client-final.
_GS2_HEADERS = ("n,,", "y,,")


@dataclass(frozen=True)
class Verifier:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _salted_password(password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", _prepared(password), salt, iterations)


def verifier(password: str, salt: bytes | None = None, iterations: int = ITERATIONS) -> Verifier:
    """The verifier of ``password`` (``salt`` None: a random one)."""
    salt = secrets.token_bytes(_SALT_BYTES) if salt is None else salt
    salted = _salted_password(password, salt, iterations)
    return Verifier(
        salt,
        iterations,
        hashlib.sha256(_hmac(salted, b"Client Key")).digest(),
        _hmac(salted, b"Server Key"),
    )


def mock_verifier(key: bytes, user: str) -> Verifier:
    """A verifier for a user who does not exist, derived from ``key`` and the name: a salt
    that changed from one attempt to the next would tell that nobody is there, and nobody
    without ``key`` can answer its StoredKey."""

    def derive(label: bytes) -> bytes:
        return _hmac(key, label + b"\x00" + user.encode())

    return Verifier(derive(b"salt")[:_SALT_BYTES], ITERATIONS, derive(b"stored"), derive(b"server"))


def client_proof(password: str, salt: bytes, iterations: int, auth_message: bytes) -> bytes:
    """The ClientProof a client sends for ``auth_message`` (the client-first-message-bare,
    the server-first-message and the client-final-message without its proof, joined by
    commas)."""
    client_key = _hmac(_salted_password(password, salt, iterations), b"Client Key")
    signature = _hmac(hashlib.sha256(client_key).digest(), auth_message)
    return bytes(a ^ b for a, b in zip(client_key, signature, strict=True))


class ServerExchange:
    """The server's side of one exchange against ``verifier``: :meth:`first` answers the
    client-first-message with the server-first-message, :meth:`final` checks the
    client-final-message's proof and answers the server-final-message."""

    def __init__(self, verifier: Verifier, server_nonce: str | None = None) -> None:
        self.verifier = verifier
        self._server_nonce = server_nonce or _b64(secrets.token_bytes(_NONCE_BYTES))
        self._gs2 = ""
        self._nonce = ""
        self._auth_prefix = ""

    def first(self, message: bytes) -> bytes:
        text = _text(message)
        flag, authzid, bare = _split_gs2(text)
        attributes = _attributes(bare)
        if len(attributes) < 2 or attributes[0][0] != "n" or attributes[1][0] != "r":
            raise _malformed("the client-first-message must begin with n= and r=")
        if any(name == "m" for name, _ in attributes):
            raise InvalidArgument("SCRAM mandatory extensions (m=) are not supported")
        if authzid:
            raise InvalidArgument("SCRAM authorization identities (a=) are not supported")
        # The user is the StartupMessage's, as in PostgreSQL: n= is ignored (libpq sends none).
        client_nonce = attributes[1][1]
        if not client_nonce or not all("!" <= c <= "~" for c in client_nonce):
            raise _malformed("the client nonce is not printable ASCII")
        self._gs2 = f"{flag},,"
        self._nonce = client_nonce + self._server_nonce
        v = self.verifier
        server_first = f"r={self._nonce},s={_b64(v.salt)},i={v.iterations}"
        self._auth_prefix = f"{bare},{server_first},"
        return server_first.encode()

    def final(self, message: bytes) -> bytes:
        if not self._nonce:
            raise _malformed("a client-final-message before the client-first-message")
        without_proof, sep, proof_text = _text(message).rpartition(",p=")
        if not sep:
            raise _malformed("the client-final-message has no proof (p=) last")
        attributes = _attributes(without_proof)
        if len(attributes) < 2 or attributes[0][0] != "c" or attributes[1][0] != "r":
            raise _malformed("the client-final-message must begin with c= and r=")
        if _unb64(attributes[0][1]) != self._gs2.encode():
            raise _malformed("the channel binding (c=) is not the gs2 header sent first")
        if attributes[1][1] != self._nonce:
            raise _malformed("the nonce (r=) is not the one the server answered")
        proof = _unb64(proof_text)
        if len(proof) != len(self.verifier.stored_key):
            raise _malformed(f"the proof is {len(proof)} bytes, not 32")
        auth_message = (self._auth_prefix + without_proof).encode()
        signature = _hmac(self.verifier.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self.verifier.stored_key):
            raise Unauthenticated("wrong user name or password")
        return f"v={_b64(_hmac(self.verifier.server_key, auth_message))}".encode()


def _malformed(detail: str) -> InvalidArgument:
    return InvalidArgument(f"malformed SCRAM message: {detail}")


def _text(message: bytes) -> str:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("not UTF-8") from None
    if any(c < " " or c == "\x7f" for c in text):
        raise _malformed("a control character")
    return text


def _split_gs2(text: str) -> tuple[str, str, str]:
    """The gs2 header's channel binding flag and authorisation identity, and the rest."""
    parts = text.split(",", 2)
    if len(parts) != 3:
        raise _malformed("no gs2 header")
    flag, authzid, bare = parts
    if flag.startswith("p="):
        raise InvalidArgument(
            f"the client asked for channel binding, but the server offered {MECHANISM} only"
        )
    if f"{flag},," not in _GS2_HEADERS:
        raise _malformed(f"gs2 channel binding flag {flag!r}, expected 'n' or 'y'")
    if authzid and not authzid.startswith("a="):
        raise _malformed("the gs2 header's second field is not an a=")
    return flag, authzid, bare


def _attributes(text: str) -> list[tuple[str, str]]:
    """``name=value`` attributes separated by commas, in order."""
    out = []
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or len(name) != 1 or not name.isalpha():
            raise _malformed(f"attribute {part[:40]!r} is not a letter, '=' and a value")
        out.append((name, value))
    return out


def _unb64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or a character that is not ASCII
        raise _malformed("invalid base64") from None


def _prepared(password: str) -> bytes:
    """The password as SCRAM hashes it: SASLprep'd (RFC 4013) as PostgreSQL and its clients
    do, ASCII left as it is, and one SASLprep refuses used as it is: PostgreSQL's rules,
    which libpq, asyncpg and pg8000 follow, so they all derive the same keys."""
    if password.isascii():
        return password.encode()
    try:
        return _saslprep(password).encode()
    except ValueError:
        return password.encode()


def _saslprep(text: str) -> str:
    mapped = "".join(
        " " if stringprep.in_table_c12(c) else c for c in text if not stringprep.in_table_b1(c)
    )
    prepared = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    prohibited = (
        stringprep.in_table_a1,
        stringprep.in_table_c12,
        stringprep.in_table_c21_c22,
        stringprep.in_table_c3,
        stringprep.in_table_c4,
        stringprep.in_table_c5,
        stringprep.in_table_c6,
        stringprep.in_table_c7,
        stringprep.in_table_c8,
        stringprep.in_table_c9,
    )
    if not prepared or any(check(c) for c in prepared for check in prohibited):
        raise ValueError("prohibited by SASLprep")
    if any(stringprep.in_table_d1(c) for c in prepared) and (
        any(stringprep.in_table_d2(c) for c in prepared)
        or not stringprep.in_table_d1(prepared[0])
        or not stringprep.in_table_d1(prepared[-1])
    ):
        raise ValueError("prohibited by SASLprep's bidirectional rule")
    return prepared
