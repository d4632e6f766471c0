"""Refusing a listening port already taken, in one line naming the port and the setting that
picks it, before a server library fails with its own, vaguer words (gRPC logs a bind
failure and raises "Failed to bind"; Flight raises "Server did not start properly")."""

from __future__ import annotations

import errno
import socket

from gnomon.errors import Unavailable


def listen_error(what: str, bind: str, port: int, setting: str, cause: OSError) -> Unavailable:
    """The error refusing to serve ``what`` on ``bind``:``port``, naming ``setting`` (the
    config key; the flag is the same with dashes)."""
    flag = "--" + setting.replace("_", "-")
    if cause.errno == errno.EADDRINUSE:
        return Unavailable(f"{what} port {port} on {bind} is in use (set {flag} / {setting})")
    return Unavailable(
        f"cannot listen for {what} on {bind} port {port}: {cause.strerror or cause} "
        f"(set --bind / bind or {flag} / {setting})"
    )


def check_free(what: str, bind: str, port: int, setting: str) -> None:
    """Raise :func:`listen_error` unless ``bind``:``port`` can be listened on now. Port 0
    (any free one) always can."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the servers bind: a port whose old connections linger in TIME_WAIT is free,
        # one another socket listens on is not (even one listening with SO_REUSEPORT).
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind, port))
        except OSError as e:
            raise listen_error(what, bind, port, setting, e) from None


def bind_failed(what: str, bind: str, port: int, setting: str, detail: str) -> Unavailable:
    """The error for a server library's own failure to listen, which says little: the
    probe's diagnosis when the port is taken (another process took it after
    :func:`check_free`), else ``detail``."""
    check_free(what, bind, port, setting)
    return listen_error(what, bind, port, setting, OSError(0, detail))
