"""The HoraeDB-compatible gRPC service ``storage.StorageService``: Route, Write, StreamWrite,
SqlQuery and StreamSqlQuery, so the published ``horaedb-client`` SDKs work against gnomon.

As HoraeDB does, every RPC ends with gRPC status OK and reports its outcome in the response
header as an HTTP status code (200, 400, 500) with the error text. PromRemoteQuery and PromQuery
are not served: gRPC answers them UNIMPLEMENTED.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import pyarrow as pa

from gnomon.error_codes import horaedb_code, http_status, message_of
from gnomon.errors import InvalidArgument, MovedPartway, NotOwner
from gnomon.metrics import Registry
from gnomon.proto import common_pb2, storage_pb2
from gnomon.tls import ServerTls
from node.cluster.forward import forwarded_from
from node.cluster.ingest_forward import SentPart, outcome
from node.cluster.router import MISDIRECTED, LocalRouter, Router, through_moves, where_served
from node.ingest.horaedb import decode_table_request
from node.ingest.writer import Ingestor
from node.partition.ingest import split_request
from node.partition.tables import Partitions
from node.security.context import may_know
from node.server import sql_response
from node.server.arrow_wire import DEFAULT_COMPRESS_MIN_BYTES, encode_payload
from node.server.forwarding import DATABASE, Forwarded, ask_owner
from node.server.listen import bind_failed, check_free
from node.server.reads import READ_HEADER, wants_follower
from node.server.sql_response import EncodedSqlResponse
from node.sql import naming
from node.sql.cancel import Queries
from node.sql.result import QueryResult

log = logging.getLogger("gnomon.grpc")

SERVICE = "storage.StorageService"
_MAX_UINT32 = 2**32 - 1
#: Parts of writes (tables at different owners) sent at once, over all requests: one pool,
#: not one per request (a write of one owner's tables runs in its caller's thread).
_PARTS = futures.ThreadPoolExecutor(16, thread_name_prefix="gnomon-write-part")

Req = TypeVar("Req")
Resp = TypeVar("Resp")


def _ok() -> common_pb2.ResponseHeader:
    return common_pb2.ResponseHeader(code=200)


def _error(e: BaseException, *, forwarded: bool = False) -> common_pb2.ResponseHeader:
    """The header reporting ``e``; on a ``forwarded`` call "not owner" is MISDIRECTED, so the
    node that forwarded it looks for the owner again."""
    # A forwarded write stored in part is no misdirection: sent again it would be stored
    # twice.
    misdirected = isinstance(e, NotOwner) and not isinstance(e, MovedPartway)
    code = MISDIRECTED if forwarded and misdirected else horaedb_code(e)
    return common_pb2.ResponseHeader(code=code, error=message_of(e))


def _check_database(has_context: bool, context: storage_pb2.RequestContext) -> None:
    if not has_context or not context.database:
        raise InvalidArgument("Database is not set")
    if context.database != DATABASE:
        raise InvalidArgument(
            f"Schema not found, schema:{context.database} (gnomon has one database, {DATABASE!r})"
        )


class StorageService:
    """The RPC implementations; :meth:`handler` exposes them to a grpc server. Queries run
    under ``queries`` (their time limit, cancelled when the call ends early)."""

    def __init__(
        self,
        ingestor: Ingestor,
        execute: Callable[[str], QueryResult],
        metrics: Registry,
        *,
        router: Router | None = None,
        compress_min_bytes: int = DEFAULT_COMPRESS_MIN_BYTES,
        queries: Queries | None = None,
        partitions: Partitions | None = None,
        execute_follower: Callable[[str], QueryResult] | None = None,
    ) -> None:
        """``execute_follower``: runs queries asking for follower reads (``gnomon-read``
        metadata; default ``execute``)."""
        self.ingestor = ingestor
        self.execute_follower = execute_follower or execute
        #: Writes naming a partition table are split into its sub-tables' first.
        self.partitions = partitions
        self.execute = execute
        self.metrics = metrics
        self.router: Router = router or LocalRouter()
        self.compress_min_bytes = compress_min_bytes
        self.queries = queries or Queries()

    # -- RPCs ------------------------------------------------------------------------------------

    def route(self, req: storage_pb2.RouteRequest) -> storage_pb2.RouteResponse:
        """The endpoint of each table's owner; tables without one are left out, and the SDK
        sends them to the address its user gave."""
        resp = storage_pb2.RouteResponse(header=_ok())
        try:
            routes = self.router.route([t for t in req.tables if may_know(t)])
        except Exception as e:
            self._log_failure("Route", e)
            return storage_pb2.RouteResponse(header=_error(e))
        for table in req.tables:
            endpoint = routes.get(table)
            if endpoint:
                host, _, port = endpoint.rpartition(":")
                resp.routes.add(table=table, endpoint=storage_pb2.Endpoint(ip=host, port=int(port)))
        return resp

    def _write_local(self, req: storage_pb2.WriteRequest) -> int:
        # Every table is checked before any is changed: a refused request writes nothing
        # (HoraeDB keeps the tables written before the first bad one).
        return self.ingestor.write_all([decode_table_request(t) for t in req.table_requests])

    def _write_tables(self, req: storage_pb2.WriteRequest, forwarded: bool) -> int:
        """Write the tables served here, and send the others to their owners (in parallel),
        unless the request was forwarded already: then everything is written here or
        refused, never forwarded twice. A part meeting "not owner" (nothing written there)
        is sent where its tables are served now, alone: the parts stored are not written
        again (:func:`~node.cluster.router.where_served`)."""
        _check_database(req.HasField("context"), req.context)
        if self.partitions is not None:
            req = split_request(req, self.partitions)
        if forwarded:
            return self._write_here(req)
        context = req.context

        def place(tables: Sequence[storage_pb2.WriteTableRequest]) -> list[list[_Placed]]:
            remote = self.router.remote([t.table for t in tables])
            groups: dict[str, list[_Placed]] = {}
            for t in tables:
                owner = remote.get(t.table, "")
                groups.setdefault(owner, []).append(_Placed(owner, t))
            return list(groups.values())

        running = where_served(
            list(req.table_requests),
            place,
            functools.partial(self._write_part, context),
            item_of=lambda p: p.table,
            name_of=lambda p: p.table.table,
            partway=lambda e: e.rows,
            moved=self.router.owner_moved,
            submit=_PARTS.submit,
        )
        return outcome(
            [SentPart(g[0].owner or "this node", [p.table.table for p in g], f) for g, f in running]
        )

    def _write_part(self, context: storage_pb2.RequestContext, part: list[_Placed]) -> int:
        req = storage_pb2.WriteRequest(table_requests=[p.table for p in part])
        req.context.CopyFrom(context)
        owner = part[0].owner
        return self._forward_write(req, owner) if owner else self._write_here(req)

    def _write_here(self, req: storage_pb2.WriteRequest) -> int:
        try:
            return self._write_local(req)
        except NotOwner as e:
            # Nothing was written (the ingestor checks every table is served here first).
            self.router.owner_moved(e)
            raise

    def _forward_write(self, req: storage_pb2.WriteRequest, owner: str) -> int:
        forwarder = self.router.forwarder
        if forwarder is None:
            raise NotOwner(f"tables of this request are served by {owner}", owner=owner)
        resp = forwarder.write(owner, req)
        if resp.header.code == MISDIRECTED:
            raise NotOwner(f"{resp.header.error} (at {owner})")
        if resp.header.code != 200:
            raise Forwarded(resp.header.code, f"{resp.header.error} (at {owner})")
        return int(resp.success)

    def write(
        self, req: storage_pb2.WriteRequest, context: grpc.ServicerContext | None = None
    ) -> storage_pb2.WriteResponse:
        forwarded = _was_forwarded(context)
        try:
            written = self._write_tables(req, forwarded)
        except Exception as e:
            self._log_failure("Write", e)
            return storage_pb2.WriteResponse(header=_error(e, forwarded=forwarded))
        self.metrics.rows_written.inc("grpc", amount=written)
        return storage_pb2.WriteResponse(header=_ok(), success=min(written, _MAX_UINT32))

    def stream_write(
        self, requests: Iterator[storage_pb2.WriteRequest]
    ) -> storage_pb2.WriteResponse:
        total = 0
        for req in requests:
            resp = self.write(req)
            if resp.header.code != 200:
                return resp
            total += resp.success
        return storage_pb2.WriteResponse(header=_ok(), success=min(total, _MAX_UINT32))

    def _query(
        self, req: storage_pb2.SqlQueryRequest, context: grpc.ServicerContext | None
    ) -> QueryResult:
        _check_database(req.HasField("context"), req.context)
        if not req.sql.strip():
            raise InvalidArgument("sql is empty")
        left = None if context is None else context.time_remaining()
        # A call that ended: its query leaves the queue (or stops at its next check).
        probe = None if context is None else (lambda: not context.is_active())
        with self.queries.running(timeout_s=left, probe=probe) as token:
            # Called when the RPC ends, however: a cancelled call or a passed deadline stops
            # the query at its next check instead of running it for nobody.
            if context is not None:
                context.add_callback(
                    functools.partial(token.cancel, "the call was cancelled or its deadline passed")
                )
            return self._executor(context)(req.sql)

    def _executor(self, context: grpc.ServicerContext | None) -> Callable[[str], QueryResult]:
        metadata = () if context is None else context.invocation_metadata() or ()
        read = next((v for k, v in metadata if k == READ_HEADER), None)
        return self.execute_follower if wants_follower(read) else self.execute

    def _sql_error(
        self, req: storage_pb2.SqlQueryRequest, e: Exception, *, forwarded: bool = False
    ) -> EncodedSqlResponse:
        self._log_failure("SqlQuery", e, sql=req.sql)
        header = _error(e, forwarded=forwarded)
        header.error = f"{header.error}, sql:{req.sql}"
        return sql_response.encode_message(storage_pb2.SqlQueryResponse(header=header))

    def sql_query(
        self, req: storage_pb2.SqlQueryRequest, context: grpc.ServicerContext | None = None
    ) -> EncodedSqlResponse:
        forwarded = _was_forwarded(context)

        def answer() -> EncodedSqlResponse:
            try:
                return self._answer(self._query(req, context))
            except NotOwner as e:
                if forwarded:
                    raise
                owner = e.owner
                data = ask_owner(self.router, e, req)
            header = sql_response.decode(data).header
            if header.code == MISDIRECTED:
                raise NotOwner(f"{header.error} (at {owner})")
            return EncodedSqlResponse(header, data)

        try:
            return answer() if forwarded else through_moves(answer, self.router)
        except Exception as e:
            return self._sql_error(req, e, forwarded=forwarded)

    def _answer(self, result: QueryResult) -> EncodedSqlResponse:
        """The response carrying ``result``: its affected rows, or its rows as Arrow."""
        if result.is_query:
            return self._rows(_named(result))
        return sql_response.encode_message(
            storage_pb2.SqlQueryResponse(
                header=_ok(), affected_rows=min(result.affected_rows or 0, _MAX_UINT32)
            )
        )

    def _rows(self, table: pa.Table) -> EncodedSqlResponse:
        batches, zstd = encode_payload(table, self.compress_min_bytes)
        return sql_response.encode(_ok(), batches, zstd)

    def stream_sql_query(
        self, req: storage_pb2.SqlQueryRequest, context: grpc.ServicerContext | None = None
    ) -> Iterator[EncodedSqlResponse]:
        """One response per record batch of the result (each a complete IPC stream), or one
        response with the affected rows or the error."""
        try:
            result = self._query(req, context)
            if not result.is_query:
                yield self._answer(result)
                return
        except Exception as e:
            yield self._sql_error(req, e)
            return
        sent = False
        for batch in _named(result).to_batches():
            if batch.num_rows == 0:
                continue
            try:
                answer = self._rows(pa.Table.from_batches([batch]))
            except Exception as e:
                yield self._sql_error(req, e)
                return
            sent = True
            yield answer
        if not sent:
            yield sql_response.encode(_ok(), [], False)

    # -- plumbing --------------------------------------------------------------------------------

    def _log_failure(self, rpc: str, e: BaseException, **extra: Any) -> None:
        fields = {"rpc": rpc, "code": horaedb_code(e), "error": message_of(e), **extra}
        # Only failures of the server itself deserve a traceback; a missing table is the
        # client's mistake even though HoraeDB reports it as 500.
        if http_status(e) == 500:
            log.error("request failed", extra=fields, exc_info=e)
        else:
            log.info("request rejected", extra=fields)

    def _timed_unary(
        self, rpc: str, fn: Callable[[Req, grpc.ServicerContext], Resp]
    ) -> Callable[[Req, grpc.ServicerContext], Resp]:
        def call(request: Req, context: grpc.ServicerContext) -> Resp:
            start = time.perf_counter()
            resp = fn(request, context)
            header = getattr(resp, "header", None)
            code = header.code if header is not None else 200
            self.metrics.observe_request("grpc", rpc, code, time.perf_counter() - start)
            return resp

        return call

    def _timed_stream(
        self, rpc: str, fn: Callable[[Req, grpc.ServicerContext], Iterator[Resp]]
    ) -> Callable[[Req, grpc.ServicerContext], Iterator[Resp]]:
        def call(request: Req, context: grpc.ServicerContext) -> Iterator[Resp]:
            start = time.perf_counter()
            code = 200
            for resp in fn(request, context):
                header = getattr(resp, "header", None)
                if header is not None and header.code != 200:
                    code = header.code
                yield resp
            self.metrics.observe_request("grpc", rpc, code, time.perf_counter() - start)

        return call

    def handler(self) -> grpc.GenericRpcHandler:
        s = storage_pb2
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "Route": grpc.unary_unary_rpc_method_handler(
                self._timed_unary("Route", _without_context(self.route)),
                request_deserializer=s.RouteRequest.FromString,
                response_serializer=s.RouteResponse.SerializeToString,
            ),
            "Write": grpc.unary_unary_rpc_method_handler(
                self._timed_unary("Write", self.write),
                request_deserializer=s.WriteRequest.FromString,
                response_serializer=s.WriteResponse.SerializeToString,
            ),
            "StreamWrite": grpc.stream_unary_rpc_method_handler(
                self._timed_unary("StreamWrite", _without_context(self.stream_write)),
                request_deserializer=s.WriteRequest.FromString,
                response_serializer=s.WriteResponse.SerializeToString,
            ),
            "SqlQuery": grpc.unary_unary_rpc_method_handler(
                self._timed_unary("SqlQuery", self.sql_query),
                request_deserializer=s.SqlQueryRequest.FromString,
                response_serializer=_encoded,
            ),
            "StreamSqlQuery": grpc.unary_stream_rpc_method_handler(
                self._timed_stream("StreamSqlQuery", self.stream_sql_query),
                request_deserializer=s.SqlQueryRequest.FromString,
                response_serializer=_encoded,
            ),
        }
        return grpc.method_handlers_generic_handler(SERVICE, handlers)


def _without_context(fn: Callable[[Req], Resp]) -> Callable[[Req, grpc.ServicerContext], Resp]:
    def call(request: Req, context: grpc.ServicerContext) -> Resp:
        return fn(request)

    return call


def _encoded(response: EncodedSqlResponse) -> bytes:
    return response.data


def _named(result: QueryResult) -> pa.Table:
    """The rows of ``result`` under the names HoraeDB gives its columns, which the HoraeDB
    SDKs read them by (:mod:`node.sql.naming`)."""
    return naming.horaedb(result.table(), result.expressions)


def _was_forwarded(context: grpc.ServicerContext | None) -> bool:
    return context is not None and forwarded_from(context.invocation_metadata()) is not None


@dataclass(frozen=True)
class _Placed:
    """One table's part of a write, and the node serving it ("" for this one)."""

    owner: str
    table: storage_pb2.WriteTableRequest


def _address(bind: str, port: int) -> str:
    return f"[{bind}]:{port}" if ":" in bind else f"{bind}:{port}"


class GrpcServer:
    """A grpcio server running :class:`StorageService` on a thread pool."""

    def __init__(
        self,
        service: StorageService,
        *,
        bind: str = "127.0.0.1",
        port: int = 8831,
        max_workers: int = 32,
        max_message_bytes: int = 256 * 1024**2,
        port_setting: str = "grpc_port",
        extra_handlers: Sequence[grpc.GenericRpcHandler] = (),
        interceptors: Sequence[grpc.ServerInterceptor] = (),
        tls: ServerTls | None = None,
    ) -> None:
        """``extra_handlers``: other services on the same port (a cluster node's shard
        control); ``interceptors`` see every call of them all (authentication)."""
        self.service = service
        self.bind = bind
        self._requested_port = port
        self.port = port
        self.port_setting = port_setting
        self.tls = tls
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="gnomon-grpc"),
            handlers=[service.handler(), *extra_handlers],
            interceptors=list(interceptors),
            options=[
                # grpcio's default 4 MiB receive limit would reject writes HoraeDB accepts.
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", -1),
                # The SDK pings every 600 s even when idle; allow that without GOAWAY.
                ("grpc.http2.min_ping_interval_without_data_ms", 60_000),
                ("grpc.keepalive_permit_without_calls", 1),
                # gRPC binds with SO_REUSEPORT by default: a second server on the same port
                # would start and take half the connections (and writes) silently.
                ("grpc.so_reuseport", 0),
            ],
        )

    def start(self) -> int:
        """Bind and serve; returns the port (useful when 0 asked for a free one). Unavailable,
        naming the port and its setting, when it cannot listen there."""
        port, setting = self._requested_port, self.port_setting
        check_free("gRPC", self.bind, port, setting)
        try:
            address = _address(self.bind, port)
            if self.tls is None:
                self.port = self._server.add_insecure_port(address)
            else:
                self.port = self._server.add_secure_port(address, self.tls.grpc_credentials())
        except RuntimeError:
            raise bind_failed("gRPC", self.bind, port, setting, "bind failed") from None
        self._server.start()
        log.info("gRPC server listening", extra={"address": _address(self.bind, self.port)})
        return self.port

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting RPCs; those in flight get ``grace_s`` seconds to finish."""
        self._server.stop(grace_s).wait(grace_s + 1.0)
        log.info("gRPC server stopped", extra={"port": self.port})
