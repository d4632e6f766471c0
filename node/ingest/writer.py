"""Writing decoded rows into the engine, creating tables and adding columns on the way as
HoraeDB does with ``auto_create_table`` on.

A missing table is created with ``tsid uint64`` and ``timestamp timestamp`` (primary key
``(tsid, timestamp)``) followed by the request's tags and fields in alphabetical order, all
nullable, tags as TAG columns, each typed by its values. Names an existing table lacks are
added as nullable columns (ALTER TABLE ADD COLUMN, in alphabetical order) before the write.
Values must have exactly the type of their column: there is no widening, as in HoraeDB.

A request is checked whole before anything changes: every table's rows are typed against the
table's schema (or the one it would get), every value converted, every new schema built (which
applies the column limit); only then are tables created, columns added and rows written. A
request refused for what it holds changes nothing.

A small write to a table written through the ingestor before, adding no column, goes as
Python values (node.engine.plain), whose few Python steps cost less than Arrow's fixed costs.
Other small writes of one table that arrive together are written as one (see
:class:`_Combiner`): one conversion, one WAL record and one memtable insert for all of them,
acknowledged once that record is durable. A server's event loop may start a write without
blocking (:meth:`Ingestor.start_write_all`) and answer it once its record is durable.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import pyarrow as pa

from gnomon.errors import InvalidArgument, MovedPartway, NotFound, NotOwner, Unavailable
from gnomon.names import check_table_name
from node.engine.batch import conform
from node.engine.engine import Engine
from node.engine.plain import PlainRows
from node.engine.schema import TSID, Column, ColumnType, Schema
from node.engine.table import Logged, Table
from node.ingest.rows import TableRows
from node.security.context import authorize
from node.security.principal import Privilege
from node.tables import IngestTables, local

log = logging.getLogger("gnomon.ingest")

#: Name of the timestamp column of auto-created tables (HoraeDB's default).
TIMESTAMP_COLUMN = "timestamp"
#: Writes of up to this many rows are combined with concurrent ones to the same table; larger
#: ones go alone, as they gain little from sharing a conversion. Rows, not bytes, are counted:
#: an Arrow table's size costs a small write more to ask than its rows take to combine.
COMBINE_MAX_ROWS = 256
#: Writes of up to this many rows to a table they add no column to are written as Python
#: values (node.engine.plain) when they can be, and concurrent ones joined up to it. Bodies
#: the vectorised decoders read (48 lines of line protocol or more, uniform gRPC requests)
#: arrive as Arrow arrays and stay Arrow; below that, plain values cost less at every size
#: measured (one line 48 against 165 us of CPU, 40 lines 306 against 465). The bound keeps
#: the rows whose series ids Python hashes one by one (node.engine.tsid) to a few hundred.
PLAIN_MAX_ROWS = 256
#: Most rows one combined write carries (a group past the engine's size limit is refused and
#: written one write at a time, like any group the engine refuses).
COMBINED_MAX_ROWS = 65_536


@dataclass
class _Plan:
    """What writing one table's rows takes, found without changing anything."""

    rows: TableRows
    #: The table's schema once the DDL below is done.
    schema: Schema
    #: The rows as Arrow, every value converted to its column's type.
    data: pa.Table
    create: bool = False
    add: list[Column] = field(default_factory=list)


class Ingestor:
    """Writes :class:`TableRows` to ``tables`` (an engine is taken as
    :class:`~node.tables.LocalTables`); thread-safe."""

    def __init__(self, tables: IngestTables | Engine, *, auto_create: bool = True) -> None:
        self.tables: IngestTables = local(tables)
        self.auto_create = auto_create
        # Serialises the schema changes this node makes on behalf of writes, so concurrent
        # writers of a new table or column agree on one definition instead of racing.
        self._ddl_lock = threading.Lock()
        self._combiners: dict[str, _Combiner[pa.Table]] = {}
        #: Per table name: the table object plain writes go to, and their combiner.
        self._plain_combiners: dict[str, tuple[Table, _Combiner[PlainRows]]] = {}
        self._combiners_lock = threading.Lock()
        #: The tables written to here, by name, for writes started without blocking (asking
        #: the engine for a table it has not open may ask the cluster's meta service).
        self._tables: dict[str, Table] = {}

    def write(self, rows: TableRows) -> int:
        """Write ``rows`` to their table; returns how many rows were written."""
        return self.write_all([rows])

    def write_all(self, tables: Sequence[TableRows]) -> int:
        """Write the rows of every table of one request; returns how many rows were written.
        Nothing is created, altered or written unless every table's rows are acceptable."""
        direct = self._known(tables)
        plain = None if direct is None else _plain(direct[1])
        if direct is not None and plain is not None:
            return self._plain_combiner(direct[0]).write(plain)
        plans = self._plan(tables)
        if any(p.create or p.add for p in plans):
            with self._ddl_lock:
                # Planned again under the lock: another writer may have changed a table since.
                plans = self._plan(tables)
                self._admit(plans)
                for plan in plans:
                    self._apply_ddl(plan)
            # A table just created may have been placed on another node: all are served
            # here, or NotOwner before any is written (the caller sends them on).
            for plan in plans:
                self.tables.table(plan.rows.table)
        elif len(plans) > 1:
            self._admit(plans)
        written = 0
        done: list[str] = []
        for k, plan in enumerate(plans):
            if not plan.data.num_rows:
                continue
            try:
                written += self._write(plan)
            except NotOwner as e:
                # A shard moving between two tables' writes: say what was stored.
                if not done:
                    raise
                rest = {p.rows.table for p in plans[k:]}
                if rest.isdisjoint(done):
                    raise MovedPartway(e, written=done, rows=written) from e
                # A table named twice, stored in part: no table list can say what was.
                raise Unavailable(
                    f"{e.message}; the write was stored in part (the rows of "
                    f"{', '.join(map(repr, done))} before it) and is not acknowledged",
                    retryable=False,
                ) from e
            done.append(plan.rows.table)
        for plan in plans:
            known = self._tables.get(plan.rows.table)
            if known is None or known.closed:
                # Kept for the next write's fast path; a table let go of since it was written
                # is not, and its rows were written all the same: NotOwner here would tell
                # the caller nothing was, and the rows would be written again elsewhere.
                with contextlib.suppress(NotOwner):
                    self._tables[plan.rows.table] = self.tables.table(plan.rows.table)
        return written

    def start_write_all(self, tables: Sequence[TableRows]) -> Logged | None:
        """Start writing the rows of one request without blocking (see Table.start_write):
        acknowledged once the returned write's WAL ticket settles. None, with nothing done,
        if that cannot be done here: rows of several tables, of a table not yet written
        through this ingestor or lacking columns, of a table waiting for flushes, or a WAL
        whose appends block."""
        known = self._known(tables)
        if known is None:
            return None
        table, plan = known
        plain = _plain(plan)
        if plain is not None:
            return table.start_write_rows(plain)
        return table.start_write(plan.rows.arrow(plan.schema.timestamp_key))

    def _known(self, tables: Sequence[TableRows]) -> tuple[Table, _Plan] | None:
        """The table of a request writing one table, written through this ingestor before,
        and the request's plan checked against it (without its Arrow data); None if the
        request writes several tables, another one, or columns the table lacks."""
        if len(tables) != 1:
            return None
        rows = tables[0]
        table = self._tables.get(rows.table)
        if table is None or table.closed:
            return None
        authorize(Privilege.WRITE, [rows.table])
        plan = self._checked(rows, table.info.schema)
        if plan.add:
            return None
        return table, plan

    # -- checking ---------------------------------------------------------------------------------

    def _plan(self, tables: Sequence[TableRows]) -> list[_Plan]:
        """One plan per table, in order; a table named twice sees the schema the earlier
        plan gives it."""
        planned: dict[str, Schema | None] = {}
        plans = []
        for rows in tables:
            if rows.table not in planned:
                planned[rows.table] = self._schema(rows.table)
                # Creating a table by writing to it needs write on the database.
                creates = [None] if planned[rows.table] is None else []
                authorize(Privilege.WRITE, [rows.table, *creates])
            plan = self._plan_one(rows, planned[rows.table])
            planned[rows.table] = plan.schema
            plans.append(plan)
        return plans

    def _schema(self, table: str) -> Schema | None:
        try:
            return self.tables.describe(table).schema
        except NotFound:
            if not self.auto_create:
                raise NotFound(f"Table not found, table:{table}") from None
            return None

    def _plan_one(self, rows: TableRows, schema: Schema | None) -> _Plan:
        plan = self._checked(rows, schema)
        plan.data = rows.arrow(plan.schema.timestamp_key)
        return plan

    def _checked(self, rows: TableRows, schema: Schema | None) -> _Plan:
        """The plan of ``rows`` checked against ``schema`` (None: the table does not exist),
        without its Arrow data."""
        if schema is None:
            # The engine checks the name too, but only once the request's earlier tables
            # are created: a refusal then would leave them behind.
            check_table_name(rows.table)
        try:
            if schema is None:
                plan = _Plan(rows, _new_schema(rows), pa.table({}), create=True)
            else:
                missing = sorted(name for name in rows.columns if not schema.has_column(name))
                add = [_column(rows, name) for name in missing]
                plan = _Plan(rows, schema.with_columns(add) if add else schema, pa.table({}))
                plan.add = add
            _check(rows, plan.schema)
        except InvalidArgument as e:
            if e.message.startswith("table "):
                raise
            raise InvalidArgument(f"table {rows.table!r}: {e.message}") from None
        return plan

    def _admit(self, plans: list[_Plan]) -> None:
        """Whether the engine will take each plan's rows (NOT NULL columns, keys, size), asked
        before a schema change or a write of another table would make a refusal partial. A
        lone write to an unchanged table needs no asking: the engine checks before it logs."""
        for plan in plans:
            if plan.data.num_rows:
                conform(
                    plan.rows.table,
                    plan.schema,
                    plan.data,
                    max_bytes=self.tables.max_write_bytes,
                    tsid=False,  # computed, never refused: the engine does it as it writes
                )

    # -- changing ---------------------------------------------------------------------------------

    def _apply_ddl(self, plan: _Plan) -> None:
        table = plan.rows.table
        if plan.create:
            info = self.tables.create_table(table, plan.schema, if_not_exists=True)
            if info.schema == plan.schema:
                log.info("auto-created table", extra={"table": table, "columns": info.schema.names})
        if plan.add:
            schema = self.tables.describe(table).schema
            new = [c for c in plan.add if not schema.has_column(c.name)]
            if new:
                self.tables.alter_table(table, add_columns=new)
                log.info(
                    "added columns on write",
                    extra={"table": table, "columns": [c.name for c in new]},
                )

    def _write(self, plan: _Plan) -> int:
        # Rows whose series their reader numbered convert at little cost alone, and their
        # tsids come from those series only as long as they are not joined with others.
        if plan.data.num_rows > COMBINE_MAX_ROWS or plan.rows.series is not None:
            return self.tables.write(plan.rows.table, plan.data, series=plan.rows.series)
        table = plan.rows.table
        with self._combiners_lock:
            combiner = self._combiners.get(table)
            if combiner is None:
                combiner = self._combiners[table] = _Combiner(
                    functools.partial(self.tables.write, table), _concat, COMBINED_MAX_ROWS
                )
        return combiner.write(plan.data)

    def _plain_combiner(self, table: Table) -> _Combiner[PlainRows]:
        """The combiner of plain writes to ``table`` (a table reopened gets a new one)."""
        with self._combiners_lock:
            held = self._plain_combiners.get(table.name)
            if held is None or held[0] is not table:
                held = self._plain_combiners[table.name] = (
                    table,
                    _Combiner(table.write_rows, PlainRows.join, PLAIN_MAX_ROWS),
                )
        return held[1]


def _concat(tables: list[pa.Table]) -> pa.Table:
    return pa.concat_tables(tables, promote_options="default")


class _Rows(Protocol):
    """What a combiner writes: an Arrow table or plain rows."""

    @property
    def num_rows(self) -> int: ...


D = TypeVar("D", bound=_Rows)


class _Waiting(Generic[D]):
    """One write queued in a combiner. Its ``wake`` lock is held from the start; whoever
    releases it either answered the write (``done``, with ``written`` or ``error``) or
    hands its writer the lead."""

    __slots__ = ("data", "done", "error", "wake", "written")

    def __init__(self, data: D) -> None:
        self.data = data
        self.written = 0
        self.error: BaseException | None = None
        self.done = False
        self.wake = threading.Lock()
        self.wake.acquire()


class _Combiner(Generic[D]):
    """Concurrent small writes of one table, written as one (``join`` makes one write of
    several, None if it cannot; ``write`` writes one durably, at most ``max_rows`` rows
    joined).

    The first writer to find no write of the table in progress leads: it takes what is queued,
    writes it with one engine write (whose WAL record is durable when it returns), answers
    each writer of the group and hands the lead to the first writer queued meanwhile, if any.
    Without this each request paid the conversion, series ids, WAL record and memtable insert
    alone, under the interpreter lock, and fsyncs stopped being shared once that work outlasted
    one fsync. Writers are woken one by one (no condition shared by all): with dozens waiting,
    waking every one at each group's end cost more than the write itself. A group the engine
    refuses is written again one write at a time, so each writer gets the answer its own rows
    earn.
    """

    def __init__(
        self, write: Callable[[D], int], join: Callable[[list[D]], D | None], max_rows: int
    ) -> None:
        self._write = write
        self._join = join
        self._max_rows = max_rows
        self._lock = threading.Lock()
        self._queue: list[_Waiting[D]] = []
        self._leading = False

    def write(self, data: D) -> int:
        waiting = _Waiting(data)
        with self._lock:
            self._queue.append(waiting)
            follow, self._leading = self._leading, True
        if follow:
            waiting.wake.acquire()
        if not waiting.done:
            self._lead()
        if waiting.error is not None:
            raise waiting.error
        return waiting.written

    def _lead(self) -> None:
        """Write one group from the queue (the leader's own write is in it), answer it and
        pass the lead on."""
        with self._lock:
            group = self._take()
        try:
            self._write_group(group)
        finally:
            for waiting in group:
                waiting.done = True
            with self._lock:
                successor = self._queue[0] if self._queue else None
                self._leading = successor is not None
            for waiting in group:
                waiting.wake.release()
            if successor is not None:
                successor.wake.release()

    def _take(self) -> list[_Waiting[D]]:
        rows = 0
        for i, waiting in enumerate(self._queue):
            rows += waiting.data.num_rows
            if i and rows > self._max_rows:
                group, self._queue = self._queue[:i], self._queue[i:]
                return group
        group, self._queue = self._queue, []
        return group

    def _write_group(self, group: list[_Waiting[D]]) -> None:
        if len(group) > 1:
            try:
                combined = self._join([w.data for w in group])
                if combined is not None:
                    self._write(combined)
            except InvalidArgument:
                pass  # some write of the group is refused: each is answered on its own below
            except BaseException as e:
                for waiting in group:
                    waiting.error = e
                return
            else:
                if combined is not None:
                    for waiting in group:
                        waiting.written = waiting.data.num_rows
                    return
        for waiting in group:
            try:
                waiting.written = self._write(waiting.data)
            except BaseException as e:
                waiting.error = e


def _plain(plan: _Plan) -> PlainRows | None:
    """The rows of ``plan`` as Python values, if few enough and they can be (see
    node.engine.plain)."""
    if plan.rows.num_rows > PLAIN_MAX_ROWS:
        return None
    return plan.rows.plain(plan.schema.timestamp_key)


def _new_schema(rows: TableRows) -> Schema:
    if rows.num_rows == 0:
        raise InvalidArgument(
            f"table {rows.table!r} does not exist and a write without rows cannot create it"
        )
    columns = [Column(TIMESTAMP_COLUMN, ColumnType.TIMESTAMP, nullable=False)]
    for name in sorted(rows.columns):
        if name in (TIMESTAMP_COLUMN, TSID):
            raise InvalidArgument(
                f"table {rows.table!r}: {name!r} cannot be a tag or field name: it is a "
                "column every auto-created table has"
            )
        columns.append(_column(rows, name))
    return Schema.build(columns, timestamp_key=TIMESTAMP_COLUMN)


def _column(rows: TableRows, name: str) -> Column:
    col = rows.columns[name]
    return Column(name, col.type, is_tag=col.is_tag)


def _check(rows: TableRows, schema: Schema) -> None:
    """Every column of ``rows`` must match the table's column in kind (tag or field) and
    type, and must not be the timestamp or the computed tsid."""
    for name, col in rows.columns.items():
        if name == schema.timestamp_key or (name == TSID and schema.has_tsid):
            raise InvalidArgument(
                f"table {rows.table!r}: {name!r} is the table's "
                f"{'timestamp' if name == schema.timestamp_key else 'series id'} column and "
                "cannot be written as a tag or field"
            )
        target = schema.column(name)
        if target.is_tag != col.is_tag:
            raise InvalidArgument(
                f"table {rows.table!r}: column {name!r} is a "
                f"{'tag' if target.is_tag else 'field'} but was written as a "
                f"{'tag' if col.is_tag else 'field'}"
            )
        if target.type is not col.type:
            raise InvalidArgument(
                f"Value type is not same, table:{rows.table}, column:{name}, "
                f"expected:{target.type.value}, given:{col.type.value}"
            )
