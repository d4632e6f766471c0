"""Executing SQL against this node's tables (:class:`~node.tables.SqlTables`, the engine
behind the table-source seam): gnomon's own statements are interpreted here, queries run on
DataFusion over the tables (with projection and filter pushdown), and over tables of other
nodes (:class:`~node.sql.provider.RemoteTables`) when a query reads tables of more than one
node."""

from __future__ import annotations

import contextvars
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

import datafusion
import pyarrow as pa

from gnomon.errors import GnomonError, InvalidArgument, NotOwner, UnknownTable
from node.engine.engine import Engine
from node.engine.options import UpdateMode
from node.engine.scan import ScanRequest
from node.engine.schema import TSID, ColumnType
from node.partition import pushdown
from node.partition.dataset import PartitionDataset
from node.partition.tables import (
    PartitionedCatalog,
    Partitions,
    PartitionTable,
    PartMoved,
    move_pauses,
    standalone_partitions,
)
from node.security.context import visible
from node.security.statements import authorize_query, authorize_statement
from node.sql import (
    cancel,
    ddl,
    fastpath,
    functions,
    modes,
    naming,
    prescan,
    rewrite,
    system,
)
from node.sql.analysis import Analyses, Analysis, parse_timestamp, timestamp_ms
from node.sql.ast import (
    AlterAddColumns,
    AlterModifySetting,
    CreateTable,
    Delete,
    Describe,
    DropTable,
    Explain,
    Insert,
    Query,
    ShowCreateTable,
    ShowTables,
    Statement,
)
from node.sql.lexer import MAX_EXPRESSION_DEPTH, Token, check_size, tokenize
from node.sql.parser import parse, resolve, statement_text
from node.sql.prescan import Prescan
from node.sql.provider import (
    EngineDataset,
    NoRemoteTables,
    RemoteTable,
    RemoteTables,
    ScanRecord,
)
from node.sql.result import QueryResult
from node.tables import SqlTables, local

_DF_NOT_FOUND = re.compile(r"table '(?:[\w]+\.)*([^']+)' not found", re.IGNORECASE)

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


#: Runs of a query that met a table not open here: each finds it opened here (made through
#: another node since) or served elsewhere, with the query's other tables of other nodes.
RESOLVE_ATTEMPTS = 3

Remote = Mapping[str, RemoteTable]

#: A query reading one table whose pruned scan reads at most this many values (rows x
#: columns, about 64 MiB of 8-byte values) has it read before DataFusion runs and handed to
#: it in memory: DataFusion's dataset path costs about a millisecond per query (scanner
#: set-up, threads, a Python iterator), most of a point query's time, and gives DataFusion
#: no row counts, so it cannot pick the smaller side of a join to build. Larger scans
#: stream, keeping memory bounded.
SMALL_SCAN_VALUES = 8_000_000


class _StreamInstead(Exception):
    """DataFusion failed on a table read up front, which has only the columns the query
    names; the streamed table has all of them, and DataFusion's error then names them."""


class _QueryContext:
    """The tables one query reads, registered on a fresh DataFusion session."""

    def __init__(self, tables: SqlTables, mode: modes.Mode, partitions: Partitions) -> None:
        self.tables = tables
        self.mode = mode
        self.partitions = partitions
        self._ctx: datafusion.SessionContext | None = None
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
        self.fast: fastpath.FastPath | None = None
        #: The answer, when the fast path gave one as the table was read.
        self.answer: pa.Table | None = None
        #: DataFusion's own name of each answer column named by its SELECT item's text.
        self.expressions: dict[str, str] = {}
        #: The rows of ``system.public.tables``, when the query reads it.
        self.system_tables: pa.Table | None = None

    @property
    def ctx(self) -> datafusion.SessionContext:
        """The query's DataFusion session, made when first needed (a query answered without
        DataFusion never pays for one), holding the rows read up front."""
        if self._ctx is None:
            self._ctx = _session()
            functions.register(self._ctx, self.errors)
            for name, rows in self.rows.items():
                self._ctx.from_arrow(rows, name=_dq(name))
            if self.system_tables is not None:
                system.register(self._ctx, self.system_tables)
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
        if name != table:
            self.names[name] = table
        partition = self.partitions.find(table)
        if partition is not None:
            if version is not None or timestamp_ms is not None:
                raise InvalidArgument(
                    f"table {table!r} is a partition table: VERSION / TIMESTAMP AS OF is not "
                    "supported on partition tables yet"
                )
            parts = partition.reading(None if prescan is None else prescan.bounds)
            self._register_dataset(
                name,
                table,
                PartitionDataset(partition, parts, scans=self.scans, errors=self.errors),
            )
            return
        if (
            prescan is not None
            and self.mode.in_memory
            and not prescan.stops_early
            and self._register_small(name, prescan)
        ):
            return
        request = ScanRequest(table) if prescan is None else prescan.request
        request = replace(
            request,
            version=version,
            timestamp_ms=timestamp_ms,
            dictionary_tags=self.mode.dictionary_tags,
        )
        dataset = EngineDataset(self.tables, request, scans=self.scans, errors=self.errors)
        self._register_dataset(name, table, dataset)

    def register_remote(self, name: str, table: RemoteTable) -> None:
        """Register ``name``, served by another node, read from there."""
        if name not in self._registered:
            self._registered.add(name)
            self._register_dataset(name, name, table.dataset(self.scans, self.errors))

    def _register_dataset(self, name: str, table: str, dataset: Any) -> None:
        self.datasets = True
        # DataFusion reads the name as SQL (unquoted folds to lower case): quote it.
        if self.mode.pushdown:
            self.ctx.register_dataset(_dq(name), dataset)
        else:
            scan_name = f"__scan_{len(self._registered)}"
            self.names[scan_name] = table
            raw = _dq(scan_name)
            self.ctx.register_dataset(raw, dataset)
            view = self.ctx.sql(f"SELECT * FROM {raw} LIMIT {2**63 - 1}")
            self.ctx.register_view(_dq(name), view)

    def _register_small(self, name: str, prescan: Prescan) -> bool:
        # The engine's own scan (a local reader's): its estimate and located reads are the
        # point of reading up front.
        scan = self.tables.scan(replace(prescan.request, dictionary_tags=self.mode.dictionary_tags))
        if scan.estimated_rows() * len(scan.columns) > SMALL_SCAN_VALUES:
            return False
        self.in_memory = True
        self.scans.append(
            ScanRecord(prescan.request.table, scan.columns, lambda: scan.filter, scan.stats)
        )
        if self.fast is not None and self.fast.located:
            # A located read's arrays answered as read: no tables in between.
            arrays = scan.located_arrays()
            if arrays is not None:
                self.answer = self.fast.answer(arrays)
                if self.answer is not None:
                    return True
        # Only the columns the query names: an error naming the others (an unknown column,
        # whose message lists the valid ones) makes the query run again streamed.
        rows = scan.to_table()
        if self._ctx is not None:
            self._ctx.from_arrow(rows, name=_dq(name))
        self.rows[name] = rows
        return True


class SqlExecutor:
    """Runs statements on ``tables`` (an engine is taken as :class:`~node.tables.LocalTables`);
    tables not served here are looked up in ``remote``; partition tables are those of
    ``partitions`` (by default kept beside a standalone engine's catalog, every sub-table
    local)."""

    def __init__(
        self,
        tables: SqlTables | Engine,
        remote: RemoteTables | None = None,
        partitions: Partitions | None = None,
    ) -> None:
        self.tables: SqlTables = local(tables)
        self.remote = remote or NoRemoteTables()
        self.partitions = partitions or standalone_partitions(self.tables)
        self.partitions.bind(self._answer_here)
        #: The tables as statements name them: partition tables are tables of their own.
        self.catalog = PartitionedCatalog(self.tables, self.partitions)
        self._analyses = Analyses()

    def _answer_here(self, sql: str) -> pa.Table:
        """The answer of ``sql``, a query of tables served here (a sub-table's share of a
        partition table's query); NotOwner for a table served elsewhere."""
        return self.execute(sql).table()

    def execute(self, sql: str) -> QueryResult:
        token = cancel.current()
        if token is not None:
            token.check_statement(sql)
        remote: Remote = {}
        for _ in range(RESOLVE_ATTEMPTS):
            try:
                return self._execute(sql, remote)
            except UnknownTable as e:
                remote = self._resolve(sql, e.table, remote)
        return self._execute(sql, remote)

    def _resolve(self, sql: str, name: str, remote: Remote) -> Remote:
        """After the query ``sql`` met ``name``, not open here: ``remote`` when the table was
        opened now (its shard is served here, it was made through another node since), else
        the tables of the query served elsewhere. Raises NotOwner naming the owner (servers
        forward the query there) when that one node serves every table the query reads,
        which is cheaper than reading them here, or when the table is served elsewhere but
        cannot be read from here (such as with time travel); NotFound if it does not
        exist."""
        if name in remote:
            raise NotOwner(
                f"table {name!r} is served by {remote[name].owner}", owner=remote[name].owner
            )
        try:
            self.catalog.describe(name)
            return remote
        except NotOwner as elsewhere:
            local = set(self.tables.list_tables())
            named = [n for t in tokenize(sql) if (n := t.identifier) is not None]
            found = self.remote.find(list(dict.fromkeys(n for n in named if n not in local)))
            reads_local = any(n in local for n in named)
            if name not in found or (
                not reads_local and len({t.owner for t in found.values()}) == 1
            ):
                raise elsewhere from None
            return found

    def _execute(self, sql: str, remote: Remote) -> QueryResult:
        # A query of a shape seen before runs on the analysis kept for it, untokenized.
        text = statement_text(sql)
        kept = self._analyses.bound(text, self.catalog)
        if kept is not None:
            analysis, tokens = kept
            return self._query(text, tokens, analysis, remote)
        return self.run(parse(sql), remote)

    def run(self, stmt: Statement, remote: Remote | None = None) -> QueryResult:
        """Run ``stmt``; a query reads the tables of other nodes in ``remote`` from there."""
        stmt = self._resolved(stmt)
        authorize_statement(stmt)
        match stmt:
            case Query(sql, tokens):
                return self._query(sql, tokens, remote=remote or {})
            case Explain(query, analyze):
                return self._explain(query, analyze, remote or {})
            case Insert():
                return self._insert(stmt)
            case Delete(table, where):
                return self._delete(table, where)
            case CreateTable():
                schema, options = ddl.schema_of(stmt)
                if stmt.partition_by is not None and stmt.partitions is not None:
                    self.partitions.create(
                        stmt.name,
                        schema,
                        options,
                        [resolve(k, schema.names) for k in stmt.partition_by],
                        stmt.partitions,
                        if_not_exists=stmt.if_not_exists,
                    )
                else:
                    self.catalog.create_table(
                        stmt.name, schema, options, if_not_exists=stmt.if_not_exists
                    )
                return QueryResult.affected(0)
            case DropTable(name, if_exists):
                self.catalog.drop_table(name, if_exists=if_exists)
                return QueryResult.affected(0)
            case AlterAddColumns(table, columns):
                self.catalog.alter_table(table, add_columns=[ddl.to_column(c) for c in columns])
                return QueryResult.affected(0)
            case AlterModifySetting(table, options):
                self.catalog.alter_table(table, options=options)
                return QueryResult.affected(0)
            case ShowTables(like):
                names = visible(self.catalog.shown_tables())
                if like is not None:
                    rx = _like_regex(like)
                    names = [n for n in names if rx.match(n)]
                return QueryResult.rows(pa.table({"Tables": pa.array(names, pa.string())}))
            case ShowCreateTable(name):
                info = self.catalog.describe(name)
                partition = self.partitions.find(name)
                clause = None if partition is None else partition.spec.clause()
                return QueryResult.rows(
                    pa.table({"Table": [name], "Create Table": [ddl.show_create(info, clause)]})
                )
            case Describe(name):
                return QueryResult.rows(ddl.describe(self.catalog.describe(name)))
        raise InvalidArgument(f"unsupported statement {type(stmt).__name__}")

    def _resolved(self, stmt: Statement) -> Statement:
        """``stmt`` with the table it names, and the columns of it an INSERT names, as
        :func:`node.sql.parser.resolve` finds them."""
        if isinstance(stmt, CreateTable | Query | Explain | ShowTables):
            return stmt
        if isinstance(stmt, DropTable | ShowCreateTable | Describe):
            return replace(stmt, name=resolve(stmt.name, self.catalog.list_tables()))
        table = resolve(stmt.table, self.catalog.list_tables())
        if isinstance(stmt, Insert) and stmt.columns is not None:
            names = self.catalog.describe(table).schema.names
            return replace(stmt, table=table, columns=[resolve(c, names) for c in stmt.columns])
        return replace(stmt, table=table)

    # -- queries ---------------------------------------------------------------------------------

    def _prepare(
        self, analysis: Analysis, tokens: Sequence[Token], mode: modes.Mode, remote: Remote
    ) -> _QueryContext:
        """Register the tables of a query (``tokens``, of ``analysis``' shape): the tables it
        travels to under their registered names, the others as they are, and those of other
        nodes (``remote``, which the analysis does not see) read from there. A query
        reading no table but one tells the engine the columns it may read and the bounds
        of its WHERE clause (:mod:`node.sql.prescan`); in ``in_memory`` mode a small such
        scan is read up front, once for all the query's uses of the table."""
        qc = _QueryContext(self.tables, mode, self.partitions)
        if analysis.system:
            shown = visible(self.catalog.shown_tables())
            qc.system_tables = system.tables_rows(self.catalog.describe(n) for n in shown)
        for name, table in remote.items():
            qc.register_remote(name, table)
        for t in analysis.travel:
            literal = tokens[t.literal_at]
            if t.version:
                qc.register(t.alias, t.table, version=int(literal.text))
            else:
                qc.register(t.alias, t.table, timestamp_ms=timestamp_ms(literal))
        bounds = None
        # The analysis took a query of one local table and remote ones for one of that
        # table alone: its prescan and plan do not hold.
        if analysis.prescan is not None and not remote:
            bounds = analysis.prescan.bind(tokens)
            if bounds.exact and analysis.fast is not None:
                qc.fast = analysis.fast.bind(tokens)
            if qc.fast is not None:
                # The bounds decide the WHERE clause's columns: only the answer's are read.
                bounds = replace(bounds, request=replace(bounds.request, columns=qc.fast.reads))
        for name in analysis.plain:
            qc.register(name, name, prescan=bounds)
        return qc

    def _collect(
        self, qc: _QueryContext, sql: str, depth: int, named: frozenset[str] = frozenset()
    ) -> pa.Table:
        """The answer of ``sql``; DataFusion's names of the columns ``named`` by their
        SELECT item's text are kept in ``qc.expressions``."""
        ctx = qc.ctx

        def answer() -> pa.Table:
            df = ctx.sql(sql)
            qc.expressions = naming.expression_names(df.logical_plan(), named)
            return df.to_arrow_table()

        try:
            return _plain(answer() if depth <= INLINE_DEPTH else _DEEP.call(answer))
        except GnomonError:
            raise
        except Exception as e:  # DataFusion reports every failure as a plain Exception
            if qc.errors:
                raise qc.errors[0] from None
            if qc.in_memory:
                raise _StreamInstead from e
            raise _translate(e, qc.names) from None

    def _run(
        self,
        sql: str,
        prefix: str = "",
        tokens: Sequence[Token] = (),
        analysis: Analysis | None = None,
        remote: Remote | None = None,
    ) -> tuple[_QueryContext, pa.Table]:
        """Runs ``prefix`` + ``sql`` as DataFusion takes it (:meth:`Analysis.rewrite`), its
        tables handed over as :mod:`node.sql.modes` decides from the query; when it fails on
        tables read up front (which hold only the columns the query names), streamed, for
        DataFusion's error in terms of the whole tables. An EXPLAIN (a
        ``prefix``) shows the streaming plan, never one over rows read up front. With an
        ``analysis``, ``tokens`` are those :meth:`Analyses.bound` made. Long ORs of one
        column's values reach DataFusion as IN lists (:func:`rewrite.in_lists`). Tables of
        other nodes are read from there (``remote``)."""
        remote = remote or {}
        check_size(sql)
        if analysis is None:
            tokens = tokens or tokenize(sql)
            flat = rewrite.in_lists(sql, tokens)
            if flat is not None:
                sql, tokens = flat, tokenize(flat)
            analysis = self._analyses.of(sql, tokens, self.catalog)
            positioned = tokens
        else:
            positioned = ()  # the bound tokens' positions are the kept analysis's
        rewrite.check_constants(tokens, analysis.constants)
        depth = analysis.depth

        def rewritten() -> str:
            return prefix + analysis.rewrite(sql, positioned or tokenize(sql))

        named = frozenset[str]()
        if analysis.unnamed and not prefix:
            named = analysis.item_names(sql, positioned or tokenize(sql))

        def answer(mode: modes.Mode) -> tuple[_QueryContext, pa.Table]:
            qc = self._prepare(analysis, tokens, mode, remote)
            if qc.answer is not None:
                return qc, _plain(qc.answer)
            if qc.fast is not None and len(qc.rows) == 1:
                (rows,) = qc.rows.values()
                fast = qc.fast.answer(rows)
                if fast is not None:
                    return qc, _plain(fast)
            if (
                mode.pushdown
                and analysis.equates_twice
                and qc.datasets
                and self._literal_filter(qc, rewritten(), depth)
            ):
                return answer(replace(mode, pushdown=False))
            return qc, self._collect(qc, rewritten(), depth, named)

        mode = modes.Mode(in_memory=not prefix, dictionary_tags=not analysis.plain_tags)
        try:
            return answer(mode)
        except _StreamInstead:
            return answer(replace(mode, in_memory=False))

    def _literal_filter(self, qc: _QueryContext, sql: str, depth: int) -> bool:
        """Whether DataFusion's plan of ``sql`` hands a dataset a literal filter (see
        :mod:`node.sql.modes`); a query it cannot plan fails when it runs, not here."""
        ctx = qc.ctx

        def planned() -> bool:
            try:
                plan = ctx.sql(sql).optimized_logical_plan()
            except Exception:  # DataFusion reports every failure as a plain Exception
                return False
            return modes.literal_scan_filter(plan)

        return planned() if depth <= INLINE_DEPTH else _DEEP.call(planned)

    def _query(
        self,
        sql: str,
        tokens: Sequence[Token] = (),
        analysis: Analysis | None = None,
        remote: Remote | None = None,
    ) -> QueryResult:
        """The answer of a query; one reading a partition table whose sub-table is moving
        runs again where it is now, after growing pauses."""
        authorize_query(sql, [*self.catalog.list_tables(), *(remote or {})], tokens)
        for pause in move_pauses():
            try:
                return self._query_once(sql, tokens, analysis, remote)
            except PartMoved as e:
                self.partitions.parts.moved(e.cause)
            time.sleep(pause)
        return self._query_once(sql, tokens, analysis, remote)

    def _query_once(
        self,
        sql: str,
        tokens: Sequence[Token],
        analysis: Analysis | None,
        remote: Remote | None,
    ) -> QueryResult:
        pushed = self._pushed_down(sql)
        if pushed is not None:
            return pushed
        qc, table = self._run(sql, tokens=tokens, analysis=analysis, remote=remote)
        token = cancel.current()
        if token is not None:
            token.check_result(table.nbytes)
        result = QueryResult.rows(table)
        result.scans = qc.scans
        result.expressions = qc.expressions
        return result

    def _pushed_down(self, sql: str) -> QueryResult | None:
        """The answer of a query reading one partition table alone, once, in a shape that
        splits into queries of its sub-tables run where they are served
        (:func:`node.partition.pushdown.plan`); None for any other query."""
        names = self.partitions.names()
        lowered = sql.lower()
        if not any(n.lower() in lowered for n in names):
            return None
        tokens = tokenize(sql)
        known = set(names)
        # Columns qualified by the table's name (``cpu.host``) are no further reads of it.
        mentioned = [
            n
            for i, t in enumerate(tokens)
            if (n := t.identifier) in known and tokens[i + 1].text != "."
        ]
        if len(set(mentioned)) != 1:
            return None
        table = self.partitions.find(mentioned[0])
        if table is None:
            return None
        return _pushed(table, sql, tokens, len(mentioned))

    def _explain(self, query: str, analyze: bool, remote: Remote) -> QueryResult:
        prefix = "EXPLAIN ANALYZE " if analyze else "EXPLAIN "
        authorize_query(query, [*self.catalog.list_tables(), *remote])
        qc, plan = self._run(query, prefix, remote=remote)
        rows = {name: plan.column(name).to_pylist() for name in plan.column_names}
        for scan in qc.scans:
            s = scan.stats
            rows.setdefault("plan_type", []).append("gnomon_scan")
            if scan.owner:
                # Read at its owner, whose scan_stats under the scan id tell what it read.
                rows.setdefault("plan", []).append(
                    f"table={scan.table} projection={scan.columns} filter={scan.filter} "
                    f"owner={scan.owner} scan_id={scan.scan_id} "
                    f"rows_received={scan.rows_received}"
                )
                continue
            rows.setdefault("plan", []).append(
                f"table={scan.table} projection={scan.columns} filter={scan.filter} "
                f"ssts_read={s.ssts_read}/{s.ssts_total} "
                f"row_groups_read={s.row_groups_read}/{s.row_groups_total} "
                f"row_groups_located={s.row_groups_located} "
                f"memtable_slices={s.memtable_slices} merged_components={s.merged_components} "
                f"located={str(s.located).lower()}"
            )
        if not analyze:
            tables = sorted({n for n in qc.ctx.catalog().schema().names()})
            rows.setdefault("plan_type", []).append("gnomon_tables")
            rows.setdefault("plan", []).append(", ".join(tables))
        result = QueryResult.rows(pa.table(rows))
        result.scans = qc.scans
        return result

    # -- writes ----------------------------------------------------------------------------------

    def _insert(self, stmt: Insert) -> QueryResult:
        schema = self.catalog.describe(stmt.table).schema
        columns = stmt.columns or [c for c in schema.names if not (c == TSID and schema.has_tsid)]
        if stmt.columns is None and any(len(r) != len(columns) for r in stmt.rows):
            raise InvalidArgument(
                f"INSERT INTO {stmt.table!r} without a column list needs {len(columns)} values "
                f"per row ({', '.join(columns)})"
            )
        if len(set(columns)) != len(columns):
            raise InvalidArgument(f"INSERT column list repeats a column: {columns}")
        arrays = []
        for j, name in enumerate(columns):
            col = schema.column(name)
            arrays.append(_column_array(name, col.type, [r[j] for r in stmt.rows]))
        rows = pa.table(dict(zip(columns, arrays, strict=True)))
        partition = self.partitions.find(stmt.table)
        if partition is not None:
            return QueryResult.affected(partition.write(rows))
        return QueryResult.affected(self.tables.write(stmt.table, rows))

    def _delete(self, table: str, where: str | None) -> QueryResult:
        if self.partitions.find(table) is not None:
            raise InvalidArgument(
                f"table {table!r} is a partition table: DELETE is not supported on partition "
                "tables yet"
            )
        schema = self.tables.describe(table).schema
        keys = [k for k in schema.primary_key if not (k == TSID and schema.has_tsid)]
        if schema.has_tsid:
            keys = schema.tags + keys
        select = f"SELECT {', '.join(_dq(k) for k in keys)} FROM {_dq(table)}"
        if where is not None:
            select += f" WHERE {where}"
        _, matched = self._run(select)
        if matched.num_rows == 0:
            return QueryResult.affected(0)
        info = self.tables.describe(table)
        if where is not None and info.options.update_mode is UpdateMode.APPEND:
            self._check_whole_keys(table, keys, where, matched.num_rows)
        return QueryResult.affected(self.tables.delete_rows(table, matched))

    def _check_whole_keys(self, table: str, keys: list[str], where: str, matched: int) -> None:
        """An APPEND table may hold several rows under one key, and a deletion removes a key
        with all its rows; refuse a WHERE that picks only some of them rather than delete rows
        it did not match."""
        on = " AND ".join(f"(t.{_dq(k)} IS NOT DISTINCT FROM d.{_dq(k)})" for k in keys)
        cols = ", ".join(_dq(k) for k in keys)
        _, counted = self._run(
            f"SELECT count(*) AS n FROM {_dq(table)} AS t JOIN "
            f"(SELECT DISTINCT {cols} FROM {_dq(table)} WHERE {where}) AS d ON {on}"
        )
        sharing = int(counted.column("n")[0].as_py())
        if sharing != matched:
            raise InvalidArgument(
                f"DELETE on APPEND table {table!r}: the WHERE matches {matched} of the "
                f"{sharing} rows sharing its keys ({', '.join(keys)}); a deletion removes every "
                f"row of a key, so narrow the WHERE to whole keys; nothing was deleted"
            )


def _pushed(
    table: PartitionTable, sql: str, tokens: Sequence[Token], mentions: int
) -> QueryResult | None:
    schema = table.spec.schema
    shape = prescan.shape(tokens, table.name, schema, mentions=mentions)
    if not shape.single:
        return None
    push = pushdown.plan(sql, tokens, table.name, schema.names)
    if push is None:
        return None
    parts = table.reading(shape.bind(tokens).bounds)
    scans: list[ScanRecord] = []
    result = QueryResult.rows(pushdown.run(push, table, parts, scans))
    result.scans = scans
    return result


def _session() -> datafusion.SessionContext:
    """A DataFusion session whose operators hold at most the running query's memory budget
    (a query over it fails with DataFusion's 'Resources exhausted' instead of growing), the
    budget reserved in the server's memory budget first."""
    token = cancel.current()
    budget = None if token is None else token.limits.memory_bytes
    if token is None or budget is None:
        return datafusion.SessionContext()
    token.memory.pool(budget)
    return datafusion.SessionContext(
        runtime=datafusion.RuntimeEnvBuilder().with_greedy_memory_pool(budget)
    )


def _dq(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _column_array(name: str, typ: ColumnType, values: list[Any]) -> pa.Array[Any]:
    target = typ.arrow()
    for v in values:
        problem = ddl.unsafe_literal(typ, v)
        if problem is not None:
            raise InvalidArgument(
                f"column {name!r} ({typ.value}): invalid value in INSERT: {problem}"
            )
    try:
        if typ is ColumnType.TIMESTAMP:
            # Literal rows of one statement: a per-value conversion is fine here.
            ms = [parse_timestamp(v) if isinstance(v, str) else v for v in values]
            return pa.array(ms, pa.int64()).cast(target)
        if typ is ColumnType.DATE and any(isinstance(v, str) for v in values):
            return pa.array(values, pa.string()).cast(target)
        return pa.array(values, target)
    except (
        pa.ArrowInvalid,
        pa.ArrowTypeError,
        pa.ArrowNotImplementedError,
        TypeError,
        OverflowError,
    ) as e:
        raise InvalidArgument(
            f"column {name!r} ({typ.value}): invalid value in INSERT: {e}"
        ) from None


def _plain(table: pa.Table) -> pa.Table:
    """``table`` with dictionary-encoded columns (string tags reach DataFusion so) decoded:
    results keep the table's own column types."""
    for i, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            plain = field.with_type(field.type.value_type)
            table = table.set_column(i, plain, table.column(i).cast(field.type.value_type))
    return table


def _like_regex(pattern: str) -> re.Pattern[str]:
    out = []
    for ch in pattern:
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("^" + "".join(out) + "$", re.DOTALL)


def _translate(e: Exception, names: dict[str, str]) -> GnomonError:
    """A DataFusion failure as a gnomon error, in the terms of the query: without the
    layers DataFusion wraps a message in (its optimizer rules' names among them), Python
    tracebacks, or the names gnomon registers tables under (``names``: a time-travel
    clause's, a scan's under a view)."""
    text = str(e)
    m = _DF_NOT_FOUND.search(text)
    if m:
        return UnknownTable(names.get(m.group(1), m.group(1)))
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
    (re.compile(r"\bdatafusion\.public\."), ""),
    (re.compile(r"\bmanifest_(?:commits|versions|heads)\b"), "the table manifest"),
)
#: Names gnomon registers tables under for its own use.
_INTERNAL_NAME = re.compile(r"__(?:scan|travel)_\d+")
