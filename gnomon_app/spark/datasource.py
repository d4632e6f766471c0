"""The ``gnomon`` PySpark data source (Python Data Source API of pyspark 4): reads a table
over Arrow Flight, one Spark partition per (table or sub-table, owner, time split) of one
snapshot each owner holds for the job, each task reading from the owner, with filter pushdown;
writes a DataFrame as one revision of the table at its owner, or of each sub-table of a
partition table at the sub-table's owner (reserve on the driver, stage in the tasks, publish on
commit, cancel on abort). On a cluster, ``endpoint`` may name any node.

Read options: ``endpoint`` (host:port of a node's Flight endpoint), ``table``,
``versionAsOf`` (a manifest version) or ``timestampAsOf`` (ms since the epoch, or an ISO-8601
time; UTC if it names no zone), ``maxSplits`` (default 64) and ``minSplitRows`` (default
1000000): the scan is cut into time splits of about equal rows, as many as these allow.
Columns are pruned by giving a schema with fewer columns
(``spark.read.format("gnomon").schema("host string, v double")``) since Python data sources
get no pruning call from Spark. ``scanId`` names the scan on the nodes: each owner's
``scan_stats`` of it reports what it read. ``leaseSeconds`` (default 600): how long an owner
holds its snapshot after the plan or a task's last read. ``plan``: splits planned already
(``gnomon_app.spark.hybrid``), read instead of planning. ``read``: ``leader`` (default) or
``follower``: each part of the table is read from one of its followers where it has some (a
moment behind the leader, taking the load off it).

Write options: ``endpoint``, ``table``; with ``mode("overwrite")``, ``overwriteFrom`` /
``overwriteTo`` bound the replaced time range (ms or ISO-8601; default all time);
``leaseSeconds`` (default 600: running tasks renew it, and it must cover the stages before
the write's; a job whose driver and tasks all vanished is cancelled that long after, and
holds back later revisions until then),
``commitWaitSeconds`` (how long the commit waits for earlier revisions to publish, default
300).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from gnomon.errors import Conflict, GnomonError, InvalidArgument, NotFound
from gnomon.flight.client import FlightClient, PutStream
from gnomon.flight.ticket import ScanSpec
from gnomon_app.spark import planning
from gnomon_app.spark.planning import Split

log = logging.getLogger("gnomon_app.spark")

#: Catalog column type -> (Spark type, the Arrow type Spark exchanges it as). Unsigned
#: integers widen to the next signed type (uint64 to a 20-digit decimal).
_TYPES: dict[str, tuple[DataType, pa.DataType]] = {
    "timestamp": (TimestampType(), pa.timestamp("us", tz="UTC")),
    "double": (DoubleType(), pa.float64()),
    "float": (FloatType(), pa.float32()),
    "string": (StringType(), pa.string()),
    "varbinary": (BinaryType(), pa.binary()),
    "boolean": (BooleanType(), pa.bool_()),
    "date": (DateType(), pa.date32()),
    "int8": (ByteType(), pa.int8()),
    "int16": (ShortType(), pa.int16()),
    "int32": (IntegerType(), pa.int32()),
    "int64": (LongType(), pa.int64()),
    "uint8": (ShortType(), pa.int16()),
    "uint16": (IntegerType(), pa.int32()),
    "uint32": (LongType(), pa.int64()),
    "uint64": (DecimalType(20, 0), pa.decimal128(20, 0)),
}
#: The implicit series id (tables without a PRIMARY KEY): computed by the node, not shown.
_TSID = "tsid"


def register(spark: Any) -> None:
    """Register the ``gnomon`` format on a session and enable the filter pushdown it uses
    (Spark refuses a reader with ``pushFilters`` unless that setting is on)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(GnomonDataSource)


def follower_reads(read: str | None) -> bool:
    """Whether the ``read`` option (None: not given) allows follower reads."""
    if read in (None, "leader", "follower"):
        return read == "follower"
    raise InvalidArgument(f"gnomon data source: read must be 'leader' or 'follower', not {read!r}")


def _require(options: Any, key: str) -> str:
    value = options.get(key)
    if not value:
        raise InvalidArgument(f"gnomon data source: option {key!r} is required")
    return str(value)


def _ms(value: str) -> int:
    """Milliseconds since the epoch from an integer or an ISO-8601 time (UTC if naive)."""
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"invalid time {value!r}: expected ms or ISO-8601") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return int(t.timestamp() * 1000)


@dataclass(frozen=True)
class _Column:
    name: str
    type: str
    nullable: bool


def table_schema(endpoint: str, table: str, where: planning.Route | None = None) -> dict[str, Any]:
    """The table's schema (the catalog's JSON form) as its owner (a partition table's first
    sub-table's) has it."""
    where = where or planning.route(endpoint, table)
    part, owner = where.parts[0]
    with FlightClient(owner) as client:
        schema: dict[str, Any] = client.describe(part)["schema"]
    return schema


def columns_of(schema: dict[str, Any]) -> list[_Column]:
    """The columns Spark sees (the implicit series id hidden)."""
    implicit = schema["primary_key"][0] == _TSID and any(
        c["name"] == _TSID for c in schema["columns"]
    )
    return [
        _Column(c["name"], c["type"], bool(c.get("nullable", True)))
        for c in schema["columns"]
        if not (implicit and c["name"] == _TSID)
    ]


def _columns(endpoint: str, table: str, where: planning.Route | None = None) -> list[_Column]:
    return columns_of(table_schema(endpoint, table, where))


def spark_schema(columns: Sequence[_Column]) -> StructType:
    return StructType([StructField(c.name, _TYPES[c.type][0], c.nullable) for c in columns])


def _spark_arrow(schema: StructType, types: dict[str, str]) -> pa.Schema:
    return pa.schema(
        [pa.field(f.name, _TYPES[types[f.name]][1], nullable=f.nullable) for f in schema.fields]
    )


class GnomonDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "gnomon"

    def _columns(self) -> list[_Column]:
        return _columns(_require(self.options, "endpoint"), _require(self.options, "table"))

    def schema(self) -> StructType:
        return spark_schema(self._columns())

    def reader(self, schema: StructType) -> DataSourceReader:
        return GnomonReader(self.options, schema, {c.name: c.type for c in self._columns()})

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return GnomonWriter(self.options, schema, overwrite)


# -- reading -------------------------------------------------------------------------------------


class GnomonSplit(InputPartition):  # type: ignore[misc]
    """One (table or sub-table, owner, time split) of the scan: the ticket and its owner."""

    def __init__(self, split: Split) -> None:
        super().__init__(split.ticket)
        self.split = split


def _filter_value(value: Any, column_type: str) -> tuple[bool, Any]:
    """(pushable, value in the wire form of ``gnomon.flight.ticket``)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        micros = round(value.timestamp() * 1_000_000)
        # Only whole milliseconds: the node stores ms and compares exactly.
        return micros % 1000 == 0, micros // 1000
    if isinstance(value, dt.date):
        return True, value.isoformat()
    if isinstance(value, decimal.Decimal):
        return value == value.to_integral_value(), int(value)
    if isinstance(value, bytes | bytearray) or column_type == "varbinary":
        return False, None
    return True, value


class GnomonReader(DataSourceReader):  # type: ignore[misc]
    def __init__(self, options: Any, schema: StructType, types: dict[str, str]) -> None:
        self.endpoint = _require(options, "endpoint")
        self.table = _require(options, "table")
        self.types = types
        self.columns = [f.name for f in schema.fields]
        for c in self.columns:
            if c not in types:
                raise NotFound(f"table {self.table!r} has no column {c!r}")
        self.arrow_schema = _spark_arrow(schema, types)
        version = options.get("versionAsOf")
        timestamp = options.get("timestampAsOf")
        self.version = int(version) if version is not None else None
        self.timestamp_ms = _ms(str(timestamp)) if timestamp is not None else None
        self.max_splits = int(options.get("maxSplits", 64))
        self.min_split_rows = int(options.get("minSplitRows", 1_000_000))
        self.scan_id = options.get("scanId")
        self.lease_ms = int(float(options.get("leaseSeconds", 600)) * 1000)
        self.follower = follower_reads(options.get("read"))
        planned = options.get("plan")
        self.planned = (
            None if planned is None else [Split.from_json(s) for s in json.loads(planned)]
        )
        self.filters: list[tuple[str, str, Any]] = []

    def _convert(self, f: Filter) -> tuple[str, str, Any] | None:
        negated = isinstance(f, Not)
        # Every filter class but Not has ``attribute``; the comparisons also ``value``.
        inner: Any = f.child if isinstance(f, Not) else f
        if len(inner.attribute) != 1 or inner.attribute[0] not in self.types:
            return None
        name = inner.attribute[0]
        kind = self.types[name]
        if isinstance(inner, IsNull | IsNotNull):
            null = isinstance(inner, IsNull) != negated
            return (name, "is_null" if null else "is_not_null", None)
        ops: dict[type, tuple[str, str]] = {
            EqualTo: ("=", "!="),
            GreaterThan: (">", "<="),
            GreaterThanOrEqual: (">=", "<"),
            LessThan: ("<", ">="),
            LessThanOrEqual: ("<=", ">"),
        }
        if isinstance(inner, In) and not negated:
            converted = [_filter_value(v, kind) for v in inner.value]
            if not all(ok for ok, _ in converted) or any(v is None for _, v in converted):
                return None
            return (name, "in", [v for _, v in converted])
        names = ops.get(type(inner))
        if names is None:
            return None
        ok, value = _filter_value(inner.value, kind)
        if not ok or value is None:
            return None
        return (name, names[1] if negated else names[0], value)

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            converted = self._convert(f)
            if converted is None:
                yield f
            else:
                self.filters.append(converted)

    def _spec(self) -> ScanSpec:
        return ScanSpec(
            table=self.table,
            columns=self.columns,
            filters=self.filters,
            version=self.version,
            timestamp_ms=self.timestamp_ms,
            max_splits=self.max_splits,
            min_split_rows=self.min_split_rows,
            scan_id=self.scan_id,
            lease_ms=self.lease_ms,
        )

    def partitions(self) -> Sequence[InputPartition]:
        # Each owner holds its snapshot for the job; a task's read renews the lease, so only
        # a job idle for leaseSeconds loses it.
        splits = self.planned
        if splits is None:
            splits = planning.plan(self.endpoint, self._spec(), follower=self.follower).splits
        return [GnomonSplit(s) for s in splits]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        import pyarrow.flight as flight

        assert isinstance(partition, GnomonSplit)
        # The filters Spark pushed to this reader and the columns it wants, whoever planned.
        spec = replace(
            ScanSpec.from_json(partition.split.ticket), columns=self.columns, filters=self.filters
        )
        endpoint = flight.FlightEndpoint(spec.to_json(), [])
        with planning.client(partition.split.owner, follower=partition.split.follower) as client:
            for batch in client.read(endpoint):
                # Vectorised casts to the types Spark exchanges (µs UTC timestamps, widened
                # unsigned integers).
                yield batch.cast(self.arrow_schema) if batch.schema != self.arrow_schema else batch


# -- writing -------------------------------------------------------------------------------------


@dataclass
class GnomonCommit(WriterCommitMessage):  # type: ignore[misc]
    """What a task attempt that finished staged: its rows and, by the index of the
    revision, the attempt it staged them as (only tables or sub-tables it sent rows to)."""

    rows: int
    attempts: dict[int, str]


@dataclass(frozen=True)
class _Revision:
    """The job's revision of one table or sub-table, reserved at its owner."""

    table: str
    owner: str
    revision: int


class GnomonWriter(DataSourceArrowWriter):  # type: ignore[misc]
    """Created on the driver, which reserves the job's revision at the owner of the table
    (of each sub-table, for a partition table, whose rows the tasks split by its key as the
    node does); pickled to the tasks, which stage their rows at the owners.

    Spark's commit protocol: a task may run more than once (a failed attempt is retried, a
    slow one speculated), and an attempt failing midway has staged rows already. Each
    attempt stages as its own id, the commit messages reaching the driver name the attempts
    that count, and the driver's commit publishes theirs only."""

    def __init__(self, options: Any, schema: StructType, overwrite: bool) -> None:
        self.endpoint = _require(options, "endpoint")
        self.table = _require(options, "table")
        where = planning.route(self.endpoint, self.table)
        columns = {c.name: c for c in _columns(self.endpoint, self.table, where)}
        for f in schema.fields:
            if f.name not in columns:
                raise NotFound(f"table {self.table!r} has no column {f.name!r}")
        self.key = where.key
        missing = [k for k in self.key or () if k not in schema.names]
        if missing:
            raise InvalidArgument(
                f"partition table {self.table!r}: the rows written lack its key {missing}"
            )
        # Spark's Arrow types -> the catalog's (timestamps truncated to ms, unsigned narrowed).
        target = {
            "timestamp": pa.timestamp("ms"),
            **{k: pa.type_for_alias(k) for k in ("uint8", "uint16", "uint32", "uint64")},
        }
        self.target = pa.schema(
            [
                pa.field(f.name, target.get(columns[f.name].type, _TYPES[columns[f.name].type][1]))
                for f in schema.fields
            ]
        )
        self.commit_wait_s = float(options.get("commitWaitSeconds", 300))
        self.lease_s = float(options.get("leaseSeconds", 600))
        time_range: tuple[int | None, int | None] | None = None
        if overwrite:
            lo, hi = options.get("overwriteFrom"), options.get("overwriteTo")
            time_range = (
                None if lo is None else _ms(str(lo)),
                None if hi is None else _ms(str(hi)),
            )
        job = f"spark-{uuid.uuid4().hex[:12]}"
        self.revisions: list[_Revision] = []
        try:
            for part, owner in where.parts:
                with FlightClient(owner) as client:
                    revision = client.reserve(
                        part,
                        mode="overwrite" if overwrite else "append",
                        time_range=time_range,
                        owner=job,
                        lease_ms=int(self.lease_s * 1000),
                    )
                self.revisions.append(_Revision(part, owner, revision))
        except BaseException:
            self.abort([])
            raise

    def _parts(self, batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[int, pa.RecordBatch]]:
        """Each batch (cast to the catalog's types) or, for a partition table, each sub-table's
        rows of it, with the index of its revision."""
        rule = None
        if self.key is not None:
            # Imported only for partition tables: plain writes keep the workers' imports light.
            from node.partition.rule import KeyRule

            rule = KeyRule(tuple(self.key), len(self.revisions))
        for b in batches:
            b = b.cast(self.target, safe=False) if b.schema != self.target else b
            if rule is None:
                yield 0, b
                continue
            keys = {k: b.column(k) for k in rule.columns}
            for part, rows in rule.groups(rule.of(keys, b.num_rows)).items():
                yield part, b.take(pa.array(rows))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> GnomonCommit:  # type: ignore[override]
        # While the task runs (its input may take long to compute), it keeps the revisions'
        # leases: only a job whose every task and driver vanished lets them expire.
        done = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(done,), daemon=True)
        beat.start()
        attempt = uuid.uuid4().hex
        try:
            rows, staged = self._stage(iterator, attempt)
        finally:
            done.set()
            beat.join(timeout=10)
        return GnomonCommit(rows, dict.fromkeys(staged, attempt))

    def _stage(self, iterator: Iterator[pa.RecordBatch], attempt: str) -> tuple[int, list[int]]:
        """Send the task's rows to the owners as they come: one stream per table or
        sub-table, all open at once, so every owner receives (and stages) while the task
        still reads its input, and none waits for another's rows. Returns the rows sent and
        the indexes of the revisions they went to."""
        with contextlib.ExitStack() as stack:
            streams: dict[int, PutStream] = {}
            for i, b in self._parts(iterator):
                stream = streams.get(i)
                if stream is None:
                    r = self.revisions[i]
                    client = stack.enter_context(FlightClient(r.owner))
                    stream = stack.enter_context(
                        client.open_put(r.table, self.target, revision=r.revision, attempt=attempt)
                    )
                    streams[i] = stream
                stream.write(b)
            for stream in streams.values():
                stream.end()
            return sum(stream.finish() for stream in streams.values()), list(streams)

    def _heartbeat(self, done: threading.Event) -> None:
        while not done.wait(self.lease_s / 4):
            for r in self.revisions:
                try:
                    with FlightClient(r.owner) as client:
                        client.action("heartbeat", table=r.table, revision=r.revision)
                except GnomonError as e:  # the put reports what matters
                    log.warning("revision heartbeat failed", extra={"error": e.message})
                    return

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        # Only the attempts whose messages reached the driver count: what other attempts
        # staged (failed midway, or beaten by a speculative copy) is dropped by the owners.
        attempts: list[list[str]] = [[] for _ in self.revisions]
        for m in messages:
            if not isinstance(m, GnomonCommit):
                # Publishing without it would drop that task's rows without a word: the job
                # fails instead, and Spark's abort cancels its revisions.
                raise Conflict(f"a task of the job sent no gnomon commit message ({m!r})")
            for i, attempt in m.attempts.items():
                attempts[i].append(attempt)

        # A partition table's sub-tables publish at once, each at its owner: the moment a
        # reader could see some of the job's sub-tables and not the others is as short as
        # the owners make it, though not none (see the README: no commit spans owners).
        def one(i: int) -> tuple[_Revision, str]:
            r = self.revisions[i]
            with FlightClient(r.owner) as client:
                state = client.commit(
                    r.table, r.revision, wait_s=self.commit_wait_s, attempts=attempts[i]
                )
            return r, state

        with futures.ThreadPoolExecutor(max_workers=min(16, len(self.revisions))) as pool:
            committed = list(pool.map(one, range(len(self.revisions))))
        for r, state in committed:
            if state != "latest":
                log.warning(
                    "revision committed but not yet visible: an earlier one is still being written",
                    extra={"table": r.table, "revision": r.revision, "state": state},
                )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        for r in self.revisions:
            # NotFound: already cancelled (its lease ran out).
            with FlightClient(r.owner) as client, contextlib.suppress(NotFound):
                client.abort(r.table, r.revision)
