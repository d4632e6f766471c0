"""The single error tree of gnomon.

Every error raised on purpose by gnomon code derives from :class:`GnomonError`, which carries a
status code (used by the servers to pick a wire status) and a ``retryable`` hint (a caller may
repeat the same request and expect it to succeed). Messages name what they are about: the table,
column, key, path or shard.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum


class Status(IntEnum):
    """Wire-neutral status codes; servers map them to gRPC / HTTP statuses."""

    INVALID_ARGUMENT = 400
    UNAUTHENTICATED = 401
    PERMISSION_DENIED = 403
    NOT_FOUND = 404
    ALREADY_EXISTS = 409
    CONFLICT = 419
    TOO_LARGE = 413
    CORRUPTED = 422
    UNAVAILABLE = 503
    DEADLINE_EXCEEDED = 504
    INTERNAL = 500


class GnomonError(Exception):
    """Root of all gnomon errors."""

    status: Status = Status.INTERNAL
    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable


class InvalidArgument(GnomonError):
    """The request itself is wrong: bad schema, bad batch, bad option, bad SQL."""

    status = Status.INVALID_ARGUMENT


class SchemaMismatch(InvalidArgument):
    """Data does not fit a schema: unknown field, missing key part, wrong type."""


class Unauthenticated(GnomonError):
    """The caller is not known: no credentials, a wrong password, an unknown, expired or
    revoked token."""

    status = Status.UNAUTHENTICATED


class PermissionDenied(GnomonError):
    """The caller is known but its grants do not cover what it asked for."""

    status = Status.PERMISSION_DENIED


class NotFound(GnomonError):
    status = Status.NOT_FOUND


class UnknownTable(NotFound):
    """A statement names a table this node does not know; ``table`` is its name (a cluster
    node asks where it lives before giving up)."""

    def __init__(self, table: str) -> None:
        super().__init__(f"table {table!r} does not exist")
        self.table = table


class AlreadyExists(GnomonError):
    status = Status.ALREADY_EXISTS


class TooLarge(InvalidArgument):
    status = Status.TOO_LARGE


class Conflict(GnomonError):
    """A concurrent change won; repeating the operation on fresh state may succeed."""

    status = Status.CONFLICT
    retryable = True


class Corrupted(GnomonError):
    """Stored bytes fail their checks (CRC, magic number, footer)."""

    status = Status.CORRUPTED


class Unavailable(GnomonError):
    """A dependency (disk, store, remote service) cannot serve right now."""

    status = Status.UNAVAILABLE
    retryable = True


class Closed(GnomonError):
    """The component was closed; no more requests are accepted."""

    status = Status.UNAVAILABLE


class Cancelled(GnomonError):
    """Work was stopped before it finished: its caller went away or the server is stopping."""

    status = Status.UNAVAILABLE


class DeadlineExceeded(Cancelled):
    """Work ran past its time limit and was stopped."""

    status = Status.DEADLINE_EXCEEDED


class NotLeader(Unavailable):
    """A meta instance that is not the leader got a request only the leader serves; ``leader``
    is the leader's endpoint when known, so the caller can go there."""

    def __init__(self, message: str, *, leader: str = "") -> None:
        super().__init__(message)
        self.leader = leader


class NotOwner(Unavailable):
    """This node does not serve the shard a request needs (never opened here, closed, or moved
    away); ``owner`` names the node that does when known. Callers refresh their route and go
    there."""

    def __init__(self, message: str, *, owner: str = "", shard_id: int | None = None) -> None:
        super().__init__(message)
        self.owner = owner
        self.shard_id = shard_id


class MovedPartway(NotOwner):
    """A request writing several tables stored the rows of ``written`` (``rows`` in all)
    before another of its tables was found moving. Only the tables not written may be sent
    on: the request again whole would store those rows twice."""

    def __init__(self, cause: NotOwner, *, written: Sequence[str], rows: int) -> None:
        super().__init__(
            f"{cause.message}; the rows of {', '.join(map(repr, written))} were written before it",
            owner=cause.owner,
            shard_id=cause.shard_id,
        )
        self.written = frozenset(written)
        self.rows = rows


class Fenced(NotOwner):
    """A newer owner of the shard holds a later epoch (or this node's lease lapsed): the
    change was refused so a deposed owner can never commit or acknowledge."""
