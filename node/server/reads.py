"""Which copy of a table a query reads: its leader's (the default: the newest data) or a
follower's (a moment behind, taking the load off the leader). HTTP ``/sql`` takes it as the
body's ``"read"`` field, gRPC ``SqlQuery`` as the ``gnomon-read`` metadata; a node that follows
no shard of the query's tables reads its leader's tables as usual."""

from __future__ import annotations

from gnomon.errors import InvalidArgument

#: The gRPC metadata key naming the read preference.
READ_HEADER = "gnomon-read"


def wants_follower(value: object) -> bool:
    """Whether a request's read preference (None when not given) asks for follower reads."""
    if value is None or value == "leader":
        return False
    if value == "follower":
        return True
    raise InvalidArgument(f"read must be 'leader' or 'follower', not {value!r}")
