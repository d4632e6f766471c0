"""One query's DataFusion session (:class:`QueryContext`): the tables it reads registered
as datasets DataFusion streams from or as rows read up front, its answer collected on a
thread with stack enough for its depth, and DataFusion's failures told in gnomon's terms
(:func:`translate`). :mod:`node.sql.executor` decides what to register and how
(:mod:`node.sql.modes`).

Every other table the plan reads is resolved as DataFusion plans it, by the session's own
schema (:class:`QueryTables`): DataFusion asks it for each table the statement names, so
gnomon never guesses which words are tables. A table open here, a partition table, or one
another node serves (read over Flight, found through the route cache) becomes a table
provider then; a name no table has is recorded, and the query fails naming it. Once planned,
a query whose every table one other node serves goes there whole (:class:`NotOwner`): it
runs next to its data, planned once more there."""

from __future__ import annotations

import contextvars
import functools
import os
import re
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

import datafusion
import pyarrow as pa
import pyarrow.compute as pc
from datafusion.catalog import SchemaProvider, Table

from gnomon.errors import GnomonError, InvalidArgument, NotFound, NotOwner, UnknownTable
from node.engine.scan import Scan, ScanRequest
from node.engine.sst.reader import LocatedArrays
from node.partition.tables import Partitions
from node.security.context import authorize
from node.security.principal import Privilege
from node.sql import cancel, drain, functions, modes, naming, system
from node.sql.fastpath import FastPath
from node.sql.lexer import MAX_EXPRESSION_DEPTH
from node.sql.partition_dataset import PartitionDataset
from node.sql.prescan import Prescan
from node.sql.provider import EngineDataset, RemoteTable, RemoteTables, ScanRecord
from node.tables import PLANNING, SqlTables

T = TypeVar("T")

# DataFusion plans a query recursively, on the thread that calls it, and runs it on its own
# (Tokio) threads, whose native stack is 2 MiB unless RUST_MIN_STACK says otherwise. A level
# of expression took 1 to 2 KiB of either in measurements (a 1,000-deep chain failed with a
# 1 MiB stack and passed with 2 MiB); the deepest admitted query
# (:data:`node.sql.lexer.MAX_EXPRESSION_DEPTH`) gets 64 KiB a level, room for costlier kinds
# of expression. The servers' request threads have the platform's default stack (8 MiB on
# Linux, but configurable below that) and are made by servers that know nothing of SQL:
# rather than a stack size set for every thread of the process at startup, a query deeper
# than :data:`INLINE_DEPTH` is planned and run on one of a few threads made here with
# :data:`DEEP_STACK_BYTES`. Shallow queries, nearly all of them, stay on the request's
# thread and pay no hand-over.

#: Native stack of the threads deep queries run on, and of DataFusion's runtime threads.
DEEP_STACK_BYTES = 64 * 1024 * MAX_EXPRESSION_DEPTH
#: Expression depth up to which a query runs on the calling thread (at most a few hundred
#: KiB of stack).
INLINE_DEPTH = 64
# Read by Rust once, when DataFusion starts its runtime at the first query: this module is
# imported before any query runs. A setting from the environment is kept.
os.environ.setdefault("RUST_MIN_STACK", str(DEEP_STACK_BYTES))


class _DeepStack:
    """A few threads with a big native stack for DataFusion calls on deep queries (one at a
    time per thread: their number also bounds how much CPU such queries take at once)."""

    def __init__(self, workers: int = 2) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gnomon-sql-deep")
        self._lock = threading.Lock()

    def call(self, fn: Callable[[], T]) -> T:
        # The pool makes its threads in submit(): the stack size, which is process-wide,
        # is set only around it. The caller's context (its cancellation token) goes along.
        context = contextvars.copy_context()
        with self._lock:
            previous = threading.stack_size(DEEP_STACK_BYTES)
            try:
                future = self._pool.submit(context.run, fn)
            finally:
                threading.stack_size(previous)
        return future.result()


_DEEP = _DeepStack()


def at_depth(depth: int, fn: Callable[[], T]) -> T:
    """``fn()`` (a DataFusion call on a query ``depth`` deep), on the calling thread or,
    deeper than :data:`INLINE_DEPTH`, on one with a big native stack."""
    return fn() if depth <= INLINE_DEPTH else _DEEP.call(fn)


#: A query reading one table whose pruned scan reads at most this many values (rows x
#: columns, about 64 MiB of 8-byte values) has it read before DataFusion runs and handed to
#: it in memory: DataFusion's dataset path costs about a millisecond per query (scanner
#: set-up, threads, a Python iterator), most of a point query's time, and gives DataFusion
#: no row counts, so it cannot pick the smaller side of a join to build. Larger scans
#: stream, keeping memory bounded.
SMALL_SCAN_VALUES = 8_000_000


class CatalogChanged(Exception):
    """A query failed to plan after finding a table open here, or a partition table, that
    its analysis did not know (made through another node since it was found, or met here
    for the first time): found again, the analysis knows it."""


class QueryTables(SchemaProvider):  # type: ignore[misc]
    """The default schema of one query's DataFusion session: the tables registered before
    it plans, and every other table DataFusion asks for resolved then by ``resolve`` (a
    table, or None for a name no table has, which is kept in ``missing``). DataFusion asks
    from inside its runtime: ``resolve`` must not call the session."""

    def __init__(self, resolve: Callable[[str], Table | None]) -> None:
        self._resolve = resolve
        self._tables: dict[str, Table] = {}
        self.missing: list[str] = []

    def table_names(self) -> set[str]:
        return set(self._tables)

    def table(self, name: str) -> Table | None:
        found = self._tables.get(name)
        if found is None and name not in self.missing:
            found = self._resolve(name)
            if found is None:
                self.missing.append(name)
            else:
                self._tables[name] = found
        return found

    def table_exist(self, name: str) -> bool:
        return name in self._tables

    def register_table(self, name: str, table: Any) -> None:
        self._tables[name] = table if isinstance(table, Table) else Table(table)

    def deregister_table(self, name: str, cascade: bool = False) -> None:
        self._tables.pop(name, None)


class QueryContext:
    """The tables one query reads, registered on a fresh DataFusion session, or found as it
    plans (``remote``: those other nodes serve); a name of ``unions`` reads the rows of
    every table it maps to, scanned alike."""

    def __init__(
        self,
        tables: SqlTables,
        mode: modes.Mode,
        partitions: Partitions,
        remote: RemoteTables,
        unions: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.tables = tables
        self.mode = mode
        self.partitions = partitions
        self.remote = remote
        #: Names of tables served here that read the rows of several (sub-tables of one
        #: partition table answering one partial query together), each among its own.
        self.unions = unions or {}
        self._ctx: datafusion.SessionContext | None = None
        self._schema: QueryTables | None = None
        #: The nodes serving the remote tables the query reads, and whether it reads a
        #: table here (or a partition table, whose parts may be anywhere).
        self.owners: set[str] = set()
        self.here = False
        #: The remote tables found as the query planned, by name.
        self.found: dict[str, RemoteTable] = {}
        #: The tables the query's analysis knew (:attr:`Analysis.tables`), and whether one
        #: it did not know was found here as it planned.
        self.known: Collection[str] = ()
        self.learned = False
        self.scans: list[ScanRecord] = []
        self.errors: list[GnomonError] = []
        self._registered: set[str] = set()
        #: The tables behind the names registered for gnomon's own use (a time-travel
        #: clause's, a scan's under a view), for error messages.
        self.names: dict[str, str] = {}
        #: Whether a table was registered as rows read up front, and whether one was
        #: registered as a dataset DataFusion streams from.
        self.in_memory = False
        self.datasets = False
        #: The rows of the table read up front, by registered name.
        self.rows: dict[str, pa.Table] = {}
        #: The fast path answering the query without DataFusion (:mod:`node.sql.fastpath`),
        #: asked when its table was read up front.
        self.fast: FastPath | None = None
        #: The answer, when the fast path gave one as the table was read.
        self.answer: pa.Table | None = None
        #: The rows a fast path's answer over a narrowed window needs to stand (None: the
        #: query's whole bounds were read).
        self.enough: int | None = None
        #: DataFusion's own name of each answer column named by its SELECT item's text.
        self.expressions: dict[str, str] = {}
        #: The rows of each view of the catalog the query reads.
        self.views: dict[system.View, pa.Table] = {}

    @property
    def ctx(self) -> datafusion.SessionContext:
        """The query's DataFusion session, made when first needed (a query answered without
        DataFusion never pays for one), holding the rows read up front."""
        if self._ctx is None:
            self._ctx = new_session()
            self._schema = QueryTables(self._resolve)
            self._ctx.catalog().register_schema("public", self._schema)
            functions.register(self._ctx, self.errors)
            for name, rows in self.rows.items():
                self._ctx.from_arrow(rows, name=dq(name))
            if self.views:
                system.register(self._ctx, self.views)
        return self._ctx

    def register(
        self,
        name: str,
        table: str,
        *,
        version: int | None = None,
        timestamp_ms: int | None = None,
        prescan: Prescan | None = None,
    ) -> None:
        """Register ``table`` as ``name``: a dataset DataFusion streams from, or, in
        ``in_memory`` mode and for a small enough ``prescan``, the rows that scan reads."""
        if name in self._registered:
            return
        self._registered.add(name)
        self.here = True
        if name != table:
            self.names[name] = table
        partition = self.partitions.find(table)
        if partition is not None:
            if version is not None or timestamp_ms is not None:
                raise InvalidArgument(
                    f"table {table!r} is a partition table: VERSION / TIMESTAMP AS OF is not "
                    "supported on partition tables yet"
                )
            self._register_dataset(name, table, self._partition_dataset(table, prescan))
            return
        union = self._union(table)
        if version is not None or timestamp_ms is not None:
            if len(union) > 1:
                raise InvalidArgument("a union of tables does not travel in time")
            # A table travelling in time is read where it is served: the whole query goes
            # there when another node serves it (NotOwner).
            self._locate(table)
        if (
            prescan is not None
            and self.mode.in_memory
            and not prescan.stops_early
            and self._register_small(name, prescan, union)
        ):
            return
        # A prescan's request asks for tags as the mode says; a table travelling in time has
        # none.
        request = (
            ScanRequest(
                table,
                version=version,
                timestamp_ms=timestamp_ms,
                dictionary_tags=self.mode.dictionary_tags,
            )
            if prescan is None
            else prescan.request
        )
        dataset = EngineDataset(
            self.tables, request, scans=self.scans, errors=self.errors, union=union
        )
        self._register_dataset(name, table, dataset)

    def register_remote(self, name: str, table: RemoteTable) -> None:
        """Register ``name``, served by another node, read from there (found as an earlier
        plan of the query was made)."""
        if name not in self._registered:
            self._registered.add(name)
            self._note_remote(name, table)
            self._register_dataset(name, name, table.dataset(self.scans, self.errors))

    def _partition_dataset(self, table: str, prescan: Prescan | None) -> PartitionDataset:
        partition = self.partitions.find(table)
        assert partition is not None
        parts = partition.reading(None if prescan is None else prescan.bounds)
        return PartitionDataset(partition, parts, scans=self.scans, errors=self.errors)

    def _union(self, table: str) -> list[str]:
        """The tables ``table`` reads: those :attr:`unions` maps it to (served here, of its
        schema; NotOwner naming the node serving one that is not), else none."""
        union = list(self.unions.get(table, ()))
        if not union:
            return []
        if table not in union:
            raise InvalidArgument(f"a union read as {table!r} must hold that table")
        schema = self.tables.schema(table).arrow()
        for other in union:
            if self.tables.schema(other).arrow() != schema:
                raise InvalidArgument(
                    f"a union read as {table!r} holds {other!r}, of another schema"
                )
        return union

    def _locate(self, table: str) -> None:
        """Nothing when ``table`` is open here (or was opened now: created through another
        node since its shard opened here); NotOwner naming the node serving it, or
        UnknownTable."""
        try:
            self.tables.schema(table)
        except NotFound:
            raise UnknownTable(table) from None

    def _resolve(self, name: str) -> Table | None:
        """A table the plan reads that was not registered before it: one open here or a
        partition table, streamed; one another node serves, read from there (the caller
        may read it, authorised here as the tables registered before were); None for a
        name no table has, or when finding it failed (the error is kept for the query)."""
        try:
            if self.partitions.find(name) is not None:
                self.learned = self.learned or name not in self.known
                dataset: Any = self._partition_dataset(name, None)
            else:
                try:
                    self._locate(name)
                except NotOwner as moved:
                    remote = self.remote.find([name]).get(name)
                    if remote is None:
                        # Served elsewhere, but no other node's copy is known (a route still
                        # naming this node, which just let go of it; a shard between
                        # leaders): the query meets "not owner" and is tried again where
                        # the table is, never answered "does not exist".
                        self.errors.append(moved)
                        return None
                    authorize(Privilege.READ, [name])
                    self._note_remote(name, remote)
                    return Table(remote.dataset(self.scans, self.errors))
                except UnknownTable:
                    return None
                self.learned = self.learned or name not in self.known
                request = ScanRequest(name, dictionary_tags=self.mode.dictionary_tags)
                dataset = EngineDataset(
                    self.tables,
                    request,
                    scans=self.scans,
                    errors=self.errors,
                    union=self._union(name),
                )
        except GnomonError as e:
            self.errors.append(e)
            return None
        self.here = self.datasets = True
        return Table(dataset)

    def _note_remote(self, name: str, table: RemoteTable) -> None:
        self.found[name] = table
        self.owners.add(table.owner)
        self.datasets = True

    def table_names(self) -> set[str]:
        """The names of the tables the session holds, registered or found as it planned."""
        return set() if self._schema is None else self._schema.table_names()

    def forward_to(self) -> str | None:
        """The node to run the planned query at, when another node serves every table it
        reads; None to run it here."""
        if self.here or self.views or len(self.owners) != 1:
            return None
        return next(iter(self.owners))

    def _register_dataset(self, name: str, table: str, dataset: Any) -> None:
        self.datasets = True
        # DataFusion reads the name as SQL (unquoted folds to lower case): quote it.
        if self.mode.pushdown:
            self.ctx.register_dataset(dq(name), dataset)
        else:
            scan_name = f"__scan_{len(self._registered)}"
            self.names[scan_name] = table
            raw = dq(scan_name)
            self.ctx.register_dataset(raw, dataset)
            view = self.ctx.sql(f"SELECT * FROM {raw} LIMIT {2**63 - 1}")
            self.ctx.register_view(dq(name), view)

    def _register_small(self, name: str, prescan: Prescan, union: Sequence[str]) -> bool:
        """Whether the rows of ``prescan`` (of each table of ``union`` when it holds any)
        were small enough to read up front, and were."""
        # The engine's own scans (a local reader's): their estimates and located reads are
        # the point of reading up front.
        requests = [replace(prescan.request, table=t) for t in union] or [prescan.request]
        scans = [self.tables.scan(r) for r in requests]
        width = len(scans[0].columns)
        if sum(scan.estimated_rows() for scan in scans) * width > SMALL_SCAN_VALUES:
            return False
        self.in_memory = True
        for request, scan in zip(requests, scans, strict=True):
            filtered = functools.partial(_filter, scan)
            self.scans.append(ScanRecord(request.table, scan.columns, filtered, scan.stats))
        if self.fast is not None and self.fast.located:
            # Located reads' arrays answered as read (a union's one after the other): no
            # tables in between.
            reads = []
            for scan in scans:
                located = scan.located_arrays()
                if located is None:
                    break
                reads.append(located)
            else:
                self.answer = self.fast.answer(LocatedArrays.joined(reads))
                if self.answer is not None:
                    return True
        read = [scan.to_table() for scan in scans]
        rows = read[0] if len(read) == 1 else pa.concat_tables(read)
        self.rows[name] = rows
        if self._ctx is not None:
            self._ctx.from_arrow(rows, name=dq(name))
        return True

    def collect(
        self,
        sql: str,
        depth: int,
        named: frozenset[str] = frozenset(),
        *,
        awaited: bool = True,
    ) -> pa.Table:
        """The answer of ``sql``, collected batch by batch (:func:`node.sql.drain.collect`;
        ``awaited``: it may work long between two batches); DataFusion's names of the
        columns ``named`` by their SELECT item's text are kept in ``self.expressions``."""

        def answer() -> pa.Table:
            df = self.plan(sql)
            owner = self.forward_to()
            if owner is not None:
                raise NotOwner(f"the tables of this query are served by {owner}", owner=owner)
            self.expressions = naming.expression_names(df.logical_plan(), named, sql)
            return drain.collect(df, awaited=awaited)

        try:
            return plain(at_depth(depth, answer))
        except GnomonError:
            raise
        except Exception as e:  # DataFusion reports every failure as a plain Exception
            raise self.failure(e, sql) from None

    def plan(self, sql: str) -> datafusion.DataFrame:
        """DataFusion's plan of ``sql``, its tables found as it plans."""
        PLANNING.count("plans")
        return self.ctx.sql(sql)

    def failure(self, e: Exception, sql: str) -> Exception:
        """What a DataFusion failure of the query ``sql`` is in gnomon's terms: an error of
        gnomon's raised in a callback, the first table named that no node serves, the query
        sent to the one node serving every table it reads (which plans it knowing their
        schemas: integers compared with their timestamps), a run with the tables it met here
        known (:class:`CatalogChanged`), or DataFusion's own message translated, worded over
        the tables read up front as they are (:meth:`_worded`)."""
        if self.errors:
            return self.errors[0]
        if self._schema is not None and self._schema.missing:
            return UnknownTable(self.names.get(self._schema.missing[0], self._schema.missing[0]))
        owner = self.forward_to()
        if owner is not None:
            return NotOwner(f"the tables of this query are served by {owner}", owner=owner)
        if self.learned:
            return CatalogChanged()
        return translate(self._worded(e, sql), self.names)

    def _worded(self, e: Exception, sql: str) -> Exception:
        """``e`` as DataFusion words it planning ``sql`` over the whole tables read up front:
        those rows hold the columns the query names only, so an unknown column's message
        would list those alone. Planned again over no rows, with every column, only to word
        the failure; nothing runs again."""
        if not self.rows:
            return e
        ctx = self.ctx
        for name, rows in self.rows.items():
            whole = whole_schema(rows.schema, self.tables.schema(self.names.get(name, name)).names)
            ctx.deregister_table(dq(name))
            # One batch of no rows: DataFusion takes the schema of a table from its batches.
            ctx.from_arrow(pa.RecordBatch.from_pylist([], whole), name=dq(name))
        try:
            ctx.sql(sql)
        except Exception as again:  # DataFusion reports every failure as a plain Exception
            return again
        return e

    def literal_filter(self, sql: str, depth: int) -> bool:
        """Whether DataFusion's plan of ``sql`` hands a dataset a literal filter (see
        :mod:`node.sql.modes`); a query it cannot plan fails when it runs, not here."""
        if not self.datasets:
            return False

        def planned() -> bool:
            try:
                plan = self.plan(sql).optimized_logical_plan()
            except Exception:  # DataFusion reports every failure as a plain Exception
                return False
            return modes.literal_scan_filter(plan)

        return at_depth(depth, planned)


def _filter(scan: Scan) -> pc.Expression | None:
    return scan.filter


def new_session() -> datafusion.SessionContext:
    """A DataFusion session whose operators hold at most the running query's memory budget
    (a query over it fails with DataFusion's 'Resources exhausted' instead of growing), the
    budget reserved in the server's memory budget first."""
    token = cancel.current()
    budget = None if token is None else token.limits.memory_bytes
    # DataFusion's information_schema would list only the tables a query registered:
    # gnomon's (node.sql.system) lists the catalog's.
    config = datafusion.SessionConfig().with_information_schema(False)
    if token is None or budget is None:
        return datafusion.SessionContext(config)
    token.memory.pool(budget)
    return datafusion.SessionContext(
        config, runtime=datafusion.RuntimeEnvBuilder().with_greedy_memory_pool(budget)
    )


def whole_schema(read: pa.Schema, names: Sequence[str]) -> pa.Schema:
    """The schema of rows read up front (``read``: the columns a query names) with every
    other column of its table (``names``, in the table's order), null-typed."""
    return pa.schema([read.field(n) if n in read.names else pa.field(n, pa.null()) for n in names])


def dq(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def plain(table: pa.Table) -> pa.Table:
    """``table`` with dictionary-encoded columns (string tags reach DataFusion so) decoded:
    results keep the table's own column types."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            plain = field.with_type(field.type.value_type)
            table = table.set_column(i, plain, table.column(i).cast(field.type.value_type))
    return table


def translate(e: Exception, names: dict[str, str]) -> GnomonError:
    """A DataFusion failure as a gnomon error, in the terms of the query: without the
    layers DataFusion wraps a message in (its optimizer rules' names among them), Python
    tracebacks, or the names gnomon registers tables under (``names``: a time-travel
    clause's, a scan's under a view)."""
    text = str(e)
    if "Resources exhausted" in text:
        return cancel.over_memory(text.split("Resources exhausted:", 1)[-1].strip().splitlines()[0])
    if _DF_RECURSION.search(text):
        return InvalidArgument(
            "query too complex: nested deeper than the SQL parser's limit of 50 levels "
            "(a parenthesis takes one, a subquery two)"
        )
    for pattern, by in _DF_NOISE:
        text = pattern.sub(by, text)
    text = _INTERNAL_NAME.sub(lambda m: names.get(m.group(0), "the table"), text)
    return InvalidArgument(text.strip())


_DF_RECURSION = re.compile(r"RecursionLimitExceeded")
#: What is dropped from (or rephrased in) DataFusion's messages.
_DF_NOISE = (
    (re.compile(r"Traceback \(most recent call last\):\n(?:[ \t].*\n)*"), ""),
    (re.compile(r"Optimizer rule '[^']*' failed\s*(?:caused by\s*)?"), ""),
    (re.compile(r"(?:DataFusion|Arrow|Internal) error: "), ""),
    (
        re.compile(r"\s*This issue was likely caused by a bug in DataFusion's code.*", re.S),
        "",
    ),
    (re.compile(r"\bdatafusion\.(?:public\.)?"), ""),
    (re.compile(r"\bmanifest_(?:commits|versions|heads)\b"), "the table manifest"),
)
#: Names gnomon registers tables under for its own use.
_INTERNAL_NAME = re.compile(r"__(?:scan|travel)_\d+")
