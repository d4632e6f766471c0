"""Statements that met "not owner" answered by the owner, for every server.

gRPC SqlQuery passes the owner's serialised answer on as it is; HTTP ``/sql`` (and anything
else that runs SQL through :func:`forwarding`) gets it back as a :class:`QueryResult`, its
columns under gnomon's names again (the owner's gRPC answer has HoraeDB's,
:mod:`node.sql.naming`). The statement travels to the owner over gRPC marked
``forwarded-from``, so it is never forwarded again there.
"""

from __future__ import annotations

from collections.abc import Callable

from gnomon.errors import GnomonError, NotOwner, Status
from gnomon.proto import storage_pb2
from node.cluster.router import MISDIRECTED, Router, through_moves
from node.server import sql_response
from node.server.arrow_wire import decode_payload
from node.sql import naming
from node.sql.result import QueryResult

#: The one schema (HoraeDB "database") gnomon has.
DATABASE = "public"


class Forwarded(GnomonError):
    """The owner a request was forwarded to refused it: its answer, passed on."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        # The owner's refusal of the request or of its caller is passed on as such (a client
        # must not retry it); anything else there may pass, so it is worth a retry here.
        refusals = (Status.INVALID_ARGUMENT, Status.UNAUTHENTICATED, Status.PERMISSION_DENIED)
        self.status = next((s for s in refusals if s == code), Status.UNAVAILABLE)


def ask_owner(router: Router, error: NotOwner, request: storage_pb2.SqlQueryRequest) -> bytes:
    """The serialised answer of the owner ``error`` names; ``error`` itself where there is
    no owner to ask."""
    router.owner_moved(error)
    forwarder = router.forwarder
    if forwarder is None or not error.owner:
        raise error
    return forwarder.sql_query(error.owner, request)


def forwarding(
    execute: Callable[[str], QueryResult], router: Router
) -> Callable[[str], QueryResult]:
    """``execute``, with statements about tables served elsewhere run by their owner (and
    tables on their way to another home waited for)."""

    def once(sql: str) -> QueryResult:
        try:
            return execute(sql)
        except NotOwner as e:
            request = storage_pb2.SqlQueryRequest(sql=sql)
            request.context.database = DATABASE
            answer = sql_response.decode(ask_owner(router, e, request))
            owner = e.owner
        if answer.header.code == MISDIRECTED:
            raise NotOwner(f"{answer.header.error} (at {owner})")
        if answer.header.code != 200:
            raise Forwarded(answer.header.code, f"{answer.header.error} (at {owner})")
        if answer.batches is None:
            return QueryResult.affected(answer.affected_rows or 0)
        # The owner answered over gRPC, under HoraeDB's names: gnomon's again.
        return QueryResult.rows(naming.restored(decode_payload(answer.batches, answer.compressed)))

    def run(sql: str) -> QueryResult:
        return through_moves(lambda: once(sql), router)

    return run
