"""A standalone gnomon server for the benchmark, started as a subprocess on loopback ports it
picks (and reports) with its data in a scratch directory, and its clients: HoraeDB ``Write``
over gRPC (requests pre-serialised, sent through a raw channel, so the client does no
per-point work), InfluxDB line protocol over HTTP, and SQL queries over HTTP or gRPC
``SqlQuery`` (Arrow IPC answers either way)."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

import grpc
import pyarrow as pa

from bench.common import standalone_argv
from bench.tsbs.cpu_only import FIELDS, TAGS
from bench.tsbs.serving import HttpClient, Process, disk_bytes, http_ok, wait_until
from bench.tsbs.system import Dialect, Workload, loaded, settle_size
from gnomon.proto import storage_pb2
from node.server import sql_response
from node.server.arrow_wire import decode_payload
from node.server.http import ARROW_STREAM

SERVICE = "/storage.StorageService/"
#: Settings of the benchmark table. Rows per Parquet row group: HoraeDB's default, about a
#: dozen series' worth, so each row group's series directory lets a query on a few hosts skip
#: most row groups (with gnomon's default of 65,536 nearly every row group holds nearly every
#: host). Segment duration: TSBS's own chunk interval for TimescaleDB (InfluxDB's shard groups
#: are 7 days): a host's rows of 12 hours sit together in one or two row groups, instead of
#: one per 2-hour window. Both measured best of the values tried (2048/8192/65536 rows;
#: 2h/12h/1d) on this workload. Cold windows are not merged (``compaction_full_after``): one
#: file per 12 h window sped up the per-host queries by 15-25% and slowed the scans over all
#: hosts by up to 45% (a file spanning the whole window leaves no time to prune), and the
#: replaced files stay on disk while versions are kept for time travel.
TABLE_OPTIONS = {"num_rows_per_row_group": "8192", "segment_duration": "12h"}
DATABASE = "public"
_MAX_MESSAGE = 512 * 1024**2
#: How the benchmark's queries reach gnomon: its HTTP SQL API answering Arrow (as InfluxDB is
#: queried over its HTTP API), or the HoraeDB gRPC SqlQuery. On this benchmark's machines a
#: Python gRPC call costs about 1 ms more than an HTTP one (a gRPC server hands each call
#: from its completion queue to a worker pool).
QUERY_APIS = ("http", "grpc")
#: How long after an answer the server's record of it is first looked for.
RECORD_WAIT_S = 0.02


class GnomonError(RuntimeError):
    """gnomon answered a write or query with an error header."""


class GnomonServer:
    """``gnomon standalone`` with its data under ``root``; the WAL is fsynced before each
    acknowledgement (the default), as InfluxDB does with ``wal-fsync-delay = 0s``."""

    name = "gnomon"

    def __init__(
        self, root: Path, decoded_cache_bytes: int | None = None, query_api: str = "http"
    ) -> None:
        if query_api not in QUERY_APIS:
            raise ValueError(f"query_api {query_api!r}: choose among {', '.join(QUERY_APIS)}")
        self.root = root
        self.decoded_cache_bytes = decoded_cache_bytes
        self.query_api = query_api
        cache = (
            []
            if decoded_cache_bytes is None
            else ["--decoded-cache-bytes", str(decoded_cache_bytes)]
        )
        root.mkdir(parents=True, exist_ok=True)
        self.process, ports = Process.start_gnomon(
            standalone_argv(
                root / "data",
                extra=[
                    *("--max-request-bytes", str(_MAX_MESSAGE)),
                    # Answers travel uncompressed, as InfluxDB's do to a client that does not
                    # ask for gzip (ours does not): zstd would cost both ends about 1.5 ms per
                    # MB on a loopback link it cannot speed up.
                    *("--compress-min-bytes", str(_MAX_MESSAGE)),
                    *cache,
                ],
            ),
            log=root / "gnomon.log",
        )
        self.http_port, self.grpc_port = ports["http"], ports["grpc"]
        base = f"http://127.0.0.1:{self.http_port}"
        wait_until(lambda: http_ok(f"{base}/health"), timeout_s=30, what="gnomon /health")
        self._http = HttpClient(self.http_port)
        self._local = threading.local()

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.process.pid,)

    def _channel(self) -> grpc.Channel:
        # One channel per client thread, as separate TSBS workers would have.
        channel: grpc.Channel | None = getattr(self._local, "channel", None)
        if channel is None:
            channel = grpc.insecure_channel(
                f"127.0.0.1:{self.grpc_port}",
                options=[
                    ("grpc.max_send_message_length", _MAX_MESSAGE),
                    ("grpc.max_receive_message_length", _MAX_MESSAGE),
                ],
            )
            self._local.channel = channel
        return channel

    def create_cpu_table(self) -> None:
        """The table the writes would auto-create, created first (:func:`cpu_table`)."""
        self.query(cpu_table())

    def write_grpc(self, request: bytes) -> None:
        """One serialised HoraeDB ``WriteRequest``."""
        call = self._channel().unary_unary(
            SERVICE + "Write",
            request_serializer=lambda b: b,
            response_deserializer=storage_pb2.WriteResponse.FromString,
        )
        resp = call(request, timeout=300)
        if resp.header.code != 200:
            raise GnomonError(f"gnomon Write: {resp.header.code} {resp.header.error}")

    def write_line_protocol(self, body: bytes) -> None:
        self._http.post(f"/influxdb/v1/write?db={DATABASE}&precision=ms", body)

    def query(self, sql: str) -> pa.Table:
        """The answer to ``sql`` through the :attr:`query_api`."""
        return self.query_http(sql) if self.query_api == "http" else self.query_grpc(sql)

    def query_http(self, sql: str) -> pa.Table:
        """``POST /sql?format=arrow``: one Arrow IPC stream."""
        body, content_type = self._http.post_typed(
            "/sql?format=arrow", json.dumps({"query": sql}).encode()
        )
        if not content_type.startswith(ARROW_STREAM):
            return pa.table({})  # a statement: affected_rows only
        return pa.ipc.open_stream(body).read_all()

    def query_grpc(self, sql: str) -> pa.Table:
        """HoraeDB ``SqlQuery``. The response is read in place, as a native SDK would:
        protobuf would copy the Arrow payload twice more."""
        call = self._channel().unary_unary(
            SERVICE + "SqlQuery",
            request_serializer=storage_pb2.SqlQueryRequest.SerializeToString,
            response_deserializer=sql_response.decode,
        )
        resp = call(
            storage_pb2.SqlQueryRequest(
                context=storage_pb2.RequestContext(database=DATABASE), tables=["cpu"], sql=sql
            ),
            timeout=300,
        )
        if resp.header.code != 200:
            raise GnomonError(f"gnomon SqlQuery: {resp.header.code} {resp.header.error}")
        if resp.batches is None:
            return pa.table({})  # a statement: affected_rows only
        return decode_payload(resp.batches, resp.compressed)

    def metrics(self) -> dict[str, float]:
        """The server's Prometheus samples, by series (``name{labels}``)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/metrics", timeout=30) as r:
            text = r.read().decode()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                series, _, value = line.rpartition(" ")
                samples[series] = float(value)
        return samples

    def query_time(self) -> tuple[int, float]:
        """Queries answered through :attr:`query_api` and the seconds the server spent on
        them, as it measures them (from the request read to the answer written)."""
        endpoint = 'endpoint="/sql"' if self.query_api == "http" else 'endpoint="SqlQuery"'
        count, seconds = 0, 0.0
        for k, v in self.metrics().items():
            if endpoint in k and k.startswith("gnomon_request_duration_seconds_count{"):
                count += int(v)
            elif endpoint in k and k.startswith("gnomon_request_duration_seconds_sum{"):
                seconds += v
        return count, seconds

    def seconds_since(self, before: tuple[int, float], *, timeout_s: float = 5.0) -> float:
        """Seconds spent on the one query answered since :meth:`query_time` gave ``before``
        (waiting for the server to record it: over HTTP it does so after answering).
        The first look waits :data:`RECORD_WAIT_S`: a /metrics request arriving while the
        answering thread still records its time would take the interpreter lock from it
        and lengthen the very time it reads."""
        time.sleep(RECORD_WAIT_S)
        deadline = time.monotonic() + timeout_s
        count, seconds = self.query_time()
        while count <= before[0] and time.monotonic() < deadline:
            time.sleep(0.005)
            count, seconds = self.query_time()
        return seconds - before[1]

    def stored_rows(self) -> int:
        return int(self.query("SELECT count(*) FROM cpu").column(0)[0].as_py())

    def disk_bytes(self) -> int:
        return disk_bytes(self.root / "data")

    def disk_bytes_by_part(self) -> dict[str, int]:
        """Bytes on disk per top-level part of the data directory (``sst``, ``wal``, ...)."""
        data = self.root / "data"
        return {p.name: disk_bytes(p) for p in sorted(data.iterdir()) if p.is_dir()}

    def peak_rss(self) -> int | None:
        return self.process.peak_rss

    def stop(self) -> None:
        self.process.stop()


class GnomonKind:
    """gnomon loaded over its native HoraeDB gRPC write (its figure, and the copy queried) and
    over InfluxDB line protocol."""

    name = "gnomon"
    dialect: Dialect | None = "gnomon"
    loaders = ("gnomon-grpc", "gnomon-line-protocol")
    encodings = ("gnomon-grpc", "line-protocol")

    def __init__(self, decoded_cache_bytes: int | None = None, query_api: str = "http") -> None:
        self.decoded_cache_bytes = decoded_cache_bytes
        self.query_api = query_api

    def unavailable(self) -> str | None:
        return None

    def install(self) -> None:
        """Nothing: it is this checkout."""

    def load(self, loader: str, where: Path, work: Workload) -> tuple[GnomonServer, float]:
        server = GnomonServer(where, self.decoded_cache_bytes, self.query_api)
        server.create_cpu_table()
        if loader == "gnomon-grpc":
            return loaded(server, server.write_grpc, work.payloads["gnomon-grpc"], work.workers)
        return loaded(
            server, server.write_line_protocol, work.payloads["line-protocol"], work.workers
        )

    def settle(self, system: GnomonServer, quiet_s: float) -> GnomonServer:
        """Restarted (a graceful stop flushes every memtable to Parquet SSTs, so queries then
        read SSTs) and left until compaction is done."""
        system.stop()
        restarted = GnomonServer(system.root, self.decoded_cache_bytes, self.query_api)
        settle_size(restarted, quiet_s)
        return restarted


def cpu_table() -> str:
    """The CREATE TABLE of the table the writes would auto-create (same columns, same
    order), with :data:`TABLE_OPTIONS`."""
    columns = ["timestamp timestamp NOT NULL"] + [
        f"{name} {'string TAG' if name in TAGS else 'double'}" for name in sorted(TAGS + FIELDS)
    ]
    options = ", ".join(f"{k}='{v}'" for k, v in TABLE_OPTIONS.items())
    return f"CREATE TABLE cpu ({', '.join(columns)}, TIMESTAMP KEY(timestamp)) WITH ({options})"
