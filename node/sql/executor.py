"""Executing SQL against this node's tables (:class:`~node.tables.SqlTables`, the engine
behind the table-source seam): gnomon's own statements are interpreted here, queries run on
DataFusion over the tables (with projection and filter pushdown), and over tables of other
nodes (:class:`~node.sql.provider.RemoteTables`) when a query reads tables of more than one
node."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.cluster.router import move_pauses
from node.engine.engine import Engine
from node.engine.options import UpdateMode
from node.engine.schema import TSID, ColumnType, Schema
from node.partition.parts import by_owner
from node.partition.tables import (
    PartitionedCatalog,
    Partitions,
    PartMoved,
    standalone_partitions,
)
from node.security.context import authorize, visible
from node.security.principal import Privilege
from node.sql import (
    cancel,
    ddl,
    generators,
    modes,
    pushdown,
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
from node.sql.lexer import Token, check_size, tokenize
from node.sql.parser import parse, resolve, statement_text
from node.sql.privileges import authorize_query, authorize_statement
from node.sql.provider import (
    NoRemoteTables,
    RemoteTable,
    RemoteTables,
    ScanRecord,
)
from node.sql.result import QueryResult
from node.sql.session import CatalogChanged, QueryContext, dq, plain
from node.sql.splits import Splits
from node.tables import SqlTables, local

T = TypeVar("T")


def _settled(attempt: Callable[[bool], T]) -> T:
    """``attempt(True)``, and when it met a table its analysis did not know
    (:class:`CatalogChanged`), ``attempt(False)``, which finds the query again from its text
    (the table just met known now, a partition table's query splitting over its
    sub-tables); a second change is the caller's to retry."""
    try:
        return attempt(True)
    except CatalogChanged:
        pass
    try:
        return attempt(False)
    except CatalogChanged:
        raise InvalidArgument(
            "the tables of this query changed while it was planned; try again"
        ) from None


class SqlExecutor:
    """Runs statements on ``tables`` (an engine is taken as :class:`~node.tables.LocalTables`);
    tables not served here are found in ``remote`` as a query plans; partition tables are those of
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
        self._splits = Splits(self.partitions)

    def _answer_here(self, sql: str, unions: Mapping[str, Sequence[str]]) -> pa.Table:
        """The answer of ``sql``, a query of tables served here (a share of a partition
        table's query, ``unions`` naming the sub-tables answering it together); NotOwner for
        a table served elsewhere."""
        return self.execute(sql, unions).table()

    def execute(self, sql: str, unions: Mapping[str, Sequence[str]] | None = None) -> QueryResult:
        """The result of ``sql``; a query reading a name of ``unions`` (a table served here)
        reads the rows of the tables it maps to (served here, of that table's schema), each
        scanned as the query asks of that one."""
        token = cancel.current()
        if token is not None:
            token.check_statement(sql)
        # A query of a shape seen before runs on the analysis kept for it, untokenized.
        text = statement_text(sql)
        kept = self._analyses.bound(text, self.catalog)
        if kept is not None:
            analysis, tokens = kept
            return self._query(text, tokens, analysis, unions=unions or {})
        return self.run(parse(sql), unions)

    def run(
        self, stmt: Statement, unions: Mapping[str, Sequence[str]] | None = None
    ) -> QueryResult:
        """Run ``stmt``; a query reads the tables of other nodes from there, or goes whole
        to the one node serving them all (NotOwner naming it); ``unions`` as
        :meth:`execute` takes them, for a query alone."""
        stmt = self._resolved(stmt)
        authorize_statement(stmt)
        if unions and not isinstance(stmt, Query):
            raise InvalidArgument("only a query reads a union of tables")
        match stmt:
            case Query(sql, tokens):
                return self._query(sql, tokens, unions=unions or {})
            case Explain(query, analyze):
                return self._explain(query, analyze)
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
                names = visible(n for n, _ in self.catalog.shown_tables())
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
            return replace(stmt, name=self._table_name(stmt.name))
        table = self._table_name(stmt.table)
        if isinstance(stmt, Insert) and stmt.columns is not None:
            names = self.catalog.describe(table).schema.names
            return replace(stmt, table=table, columns=[resolve(c, names) for c in stmt.columns])
        return replace(stmt, table=table)

    def _schema_of(self, name: str) -> Schema:
        """The schema of the table ``name``, here or where another node serves it."""
        if name not in self.catalog.list_tables():
            remote = self.remote.find([name]).get(name)
            if remote is not None:
                return remote.schema
        return self.catalog.describe(name).schema

    def _table_name(self, name: str) -> str:
        """The table ``name`` means (:func:`node.sql.parser.resolve`): among the tables here,
        else among the database's (in a cluster, those other nodes serve too), so every node
        finds the same one."""
        here = self.catalog.list_tables()
        if name in here or name.lower() in here:
            return resolve(name, here)
        return resolve(name, [n for n, _ in self.catalog.shown_tables()])

    # -- queries ---------------------------------------------------------------------------------

    def _prepare(
        self,
        analysis: Analysis,
        tokens: Sequence[Token],
        mode: modes.Mode,
        found: Mapping[str, RemoteTable],
        unions: Mapping[str, Sequence[str]],
        *,
        narrow: bool = False,
    ) -> QueryContext:
        """Register the tables of a query (``tokens``, of ``analysis``' shape): the tables it
        travels to under their registered names, the others as they are, and those of other
        nodes an earlier plan of it found (``found``); any other table it reads is found as
        it plans (:class:`~node.sql.session.QueryTables`). A query reading no table but one
        tells the engine the columns it may read and the bounds of its WHERE clause
        (:mod:`node.sql.prescan`); in ``in_memory`` mode a small such scan is read up front,
        once for all the query's uses of the table. With ``narrow``, a fast path's narrower
        window is read instead (:meth:`FastPath.window`; ``qc.enough`` says how many rows
        its answer needs to stand)."""
        qc = QueryContext(self.tables, mode, self.partitions, self.remote, unions)
        qc.known = analysis.tables
        if analysis.system:
            ids = dict(self.catalog.shown_tables())
            listed = [(n, ids[n]) for n in visible(ids)]
            qc.views = {view: view.rows(listed, self._schema_of) for view in system.named(tokens)}
        for name, table in found.items():
            qc.register_remote(name, table)
        for t in analysis.travel:
            literal = tokens[t.literal_at]
            if t.version:
                qc.register(t.alias, t.table, version=int(literal.text))
            else:
                qc.register(t.alias, t.table, timestamp_ms=timestamp_ms(literal))
        bounds = None
        # A query whose FROM is its one table alone reads no other: its prescan holds.
        if analysis.prescan is not None:
            bounds = analysis.prescan.bind(tokens, dictionary_tags=mode.dictionary_tags)
            if bounds.exact and analysis.fast is not None:
                qc.fast = analysis.fast.bind(tokens)
            if qc.fast is not None:
                # The bounds decide the WHERE clause's columns: only the answer's are read.
                bounds = bounds.reading(qc.fast.reads)
                window = qc.fast.window(bounds.bounds) if narrow else None
                if window is not None:
                    narrowed, qc.enough = window
                    bounds = bounds.within(narrowed)
        for name in analysis.plain:
            qc.register(name, name, prescan=bounds)
        return qc

    def _run(
        self,
        sql: str,
        prefix: str = "",
        tokens: Sequence[Token] = (),
        analysis: Analysis | None = None,
        unions: Mapping[str, Sequence[str]] | None = None,
    ) -> tuple[QueryContext, pa.Table]:
        """Runs ``prefix`` + ``sql`` as DataFusion takes it (:meth:`Analysis.rewrite`), its
        tables handed over as :mod:`node.sql.modes` decides from the query. An EXPLAIN (a
        ``prefix``) shows the streaming plan, never one over rows read up front. With an
        ``analysis``, ``tokens`` are those :meth:`Analyses.bound` made. Long ORs of one
        column's values reach DataFusion as IN lists (:func:`rewrite.in_lists`). Tables of
        other nodes, found as the query plans, are read from there; a later run of the same
        query registers them up front."""
        check_size(sql)
        generators.check(sql)
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
        # A single SELECT of one table works no longer between two batches than its scans
        # take to hand them over (each checking the query's token): its answer is not
        # awaited (:mod:`node.sql.drain`).
        shape = analysis.prescan
        awaited = bool(prefix) or shape is None or not shape.single
        found: dict[str, RemoteTable] = {}

        def answer(mode: modes.Mode, narrow: bool = True) -> tuple[QueryContext, pa.Table]:
            qc = self._prepare(
                analysis, tokens, mode, found, unions or {}, narrow=narrow and mode.in_memory
            )
            fast = qc.answer
            if fast is None and qc.fast is not None and len(qc.rows) == 1:
                (rows,) = qc.rows.values()
                fast = qc.fast.answer(rows)
            if qc.enough is not None and (fast is None or fast.num_rows < qc.enough):
                # Only a whole answer read over the narrowed window stands; DataFusion
                # never sees its rows.
                return answer(mode, narrow=False)
            if fast is not None:
                return qc, plain(fast)
            try:
                if (
                    mode.pushdown
                    and analysis.equates_twice
                    and qc.literal_filter(rewritten(), depth)
                ):
                    return answer(replace(mode, pushdown=False))
                return qc, qc.collect(rewritten(), depth, named, awaited=awaited)
            finally:
                found.update(qc.found)

        return answer(modes.Mode(in_memory=not prefix, dictionary_tags=not analysis.plain_tags))

    def _query(
        self,
        sql: str,
        tokens: Sequence[Token] = (),
        analysis: Analysis | None = None,
        *,
        unions: Mapping[str, Sequence[str]],
    ) -> QueryResult:
        """The answer of a query; one reading a partition table whose sub-table is moving
        runs again where it is now, after growing pauses."""
        authorize_query(sql, self.catalog.list_tables(), tokens)
        if unions:
            authorize(Privilege.READ, {t: None for union in unions.values() for t in union})
        for pause in move_pauses():
            try:
                return self._query_once(sql, tokens, analysis, unions)
            except PartMoved as e:
                self.partitions.parts.moved(e.cause)
            time.sleep(pause)
        return self._query_once(sql, tokens, analysis, unions)

    def _query_once(
        self,
        sql: str,
        tokens: Sequence[Token],
        analysis: Analysis | None,
        unions: Mapping[str, Sequence[str]],
    ) -> QueryResult:
        def attempt(kept: bool) -> QueryResult:
            found, bound = (analysis, tokens) if kept else (None, ())
            pushed = None if unions else self._pushed_down(sql, found)
            if pushed is not None:
                return pushed
            qc, table = self._run(sql, tokens=bound, analysis=found, unions=unions)
            token = cancel.current()
            if token is not None:
                token.check_result(table.nbytes)
            result = QueryResult.rows(table)
            result.scans = qc.scans
            result.expressions = qc.expressions
            return result

        return _settled(attempt)

    def _pushed_down(self, sql: str, analysis: Analysis | None) -> QueryResult | None:
        """The answer of a query reading one partition table alone, once, in a shape that
        splits into queries of its sub-tables run where they are served
        (:func:`node.sql.pushdown.plan`); None for any other query."""
        split = self._splits.of(sql, analysis)
        if split is None:
            return None
        table, push, parts = split.table, split.push, split.parts
        scans: list[ScanRecord] = []
        result = QueryResult.rows(pushdown.run(push, table, parts, scans))
        result.scans = scans
        return result

    def _explain_split(self, query: str, analyze: bool) -> QueryResult | None:
        """EXPLAIN of a query split over a partition table's sub-tables: the query each
        owner runs (``gnomon_partial``: its sub-tables, answering it over their union, and
        which node: ``here`` for this one) and the merge here (``gnomon_merge``); with
        ANALYZE, run, with the rows each owner sent."""
        split = self._splits.of(query)
        if split is None:
            return None
        table, push, parts = split.table, split.push, split.parts
        groups = by_owner(parts)
        received: dict[str, int] = {}
        if analyze:
            scans: list[ScanRecord] = []
            pushdown.run(push, table, parts, scans)
            received = {s.table: s.rows_received for s in scans}
            # Grouped as they ran: a sub-table moving meanwhile regroups them.
            located = {p.table: p for p in parts}
            groups = [[located[t] for t in s.tables] for s in scans]
        whole = len(groups) == 1
        plans = [("gnomon_route", "partition split: a partial query at each owner, merged here")]
        for group in groups:
            sent, _ = pushdown.asked(push, group, whole=whole)
            first = group[0].table
            rows = f" rows_received={received[first]}" if first in received else ""
            plans.append(
                (
                    "gnomon_partial",
                    f"sub_tables={','.join(p.table for p in group)} "
                    f"owner={group[0].owner or 'here'}{rows} query={sent}",
                )
            )
        plans.append(("gnomon_merge", "the one owner's answer as it is" if whole else push.final))
        return QueryResult.rows(
            pa.table({"plan_type": [t for t, _ in plans], "plan": [p for _, p in plans]})
        )

    def _explain(self, query: str, analyze: bool) -> QueryResult:
        authorize_query(query, self.catalog.list_tables())
        return _settled(lambda _: self._explain_once(query, analyze))

    def _explain_once(self, query: str, analyze: bool) -> QueryResult:
        prefix = "EXPLAIN ANALYZE " if analyze else "EXPLAIN "
        split = self._explain_split(query, analyze)
        if split is not None:
            return split
        qc, plan = self._run(query, prefix)
        rows = {name: plan.column(name).to_pylist() for name in plan.column_names}
        # Which route answers it: DataFusion's plan above is what runs only without a fast
        # path (or when the fast path declines the rows it reads).
        route = "DataFusion" if qc.fast is None else qc.fast.route
        rows = {
            "plan_type": ["gnomon_route", *rows.get("plan_type", [])],
            "plan": [route, *rows.get("plan", [])],
        }
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
                f"located={str(s.located).lower()} latest={str(s.latest).lower()}"
            )
        if not analyze:
            tables = sorted(qc.table_names())
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
        select = f"SELECT {', '.join(dq(k) for k in keys)} FROM {dq(table)}"
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
        on = " AND ".join(f"(t.{dq(k)} IS NOT DISTINCT FROM d.{dq(k)})" for k in keys)
        cols = ", ".join(dq(k) for k in keys)
        _, counted = self._run(
            f"SELECT count(*) AS n FROM {dq(table)} AS t JOIN "
            f"(SELECT DISTINCT {cols} FROM {dq(table)} WHERE {where}) AS d ON {on}"
        )
        sharing = int(counted.column("n")[0].as_py())
        if sharing != matched:
            raise InvalidArgument(
                f"DELETE on APPEND table {table!r}: the WHERE matches {matched} of the "
                f"{sharing} rows sharing its keys ({', '.join(keys)}); a deletion removes every "
                f"row of a key, so narrow the WHERE to whole keys; nothing was deleted"
            )


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


def _like_regex(pattern: str) -> re.Pattern[str]:
    out = []
    for ch in pattern:
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("^" + "".join(out) + "$", re.DOTALL)
