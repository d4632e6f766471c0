"""Executing SQL against the engine: gnomon's own statements are interpreted here, queries
run on DataFusion over the engine's tables (with projection and filter pushdown)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import datafusion
import pyarrow as pa

from gnomon.errors import GnomonError, InvalidArgument, NotFound
from node.engine.engine import Engine
from node.engine.options import UpdateMode
from node.engine.schema import TSID, ColumnType
from node.sql import ddl, direct, functions
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
from node.sql.lexer import Kind, Token, tokenize
from node.sql.parser import parse
from node.sql.prescan import Prescan, analyse
from node.sql.provider import EngineDataset, ScanRecord
from node.sql.result import QueryResult

_DF_NOT_FOUND = re.compile(r"table '(?:[\w]+\.)*([^']+)' not found", re.IGNORECASE)


class _LiteralFilterPushdown(Exception):
    """DataFusion simplified a pushed-down filter to a literal (``host = 'a' AND host = 'b'``
    is ``false``) and then failed to hand it to the dataset: its pyarrow form is a
    ``BooleanScalar``, which is no ``Expression`` and cannot be combined with one."""


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


class _DictionaryUnsupported(Exception):
    """A DataFusion function has no implementation for dictionary-encoded input (such as
    approx_distinct); the query runs again with plain string tags."""


@dataclass(frozen=True)
class _Mode:
    """How a query's tables reach DataFusion. Without ``pushdown`` each table is a view with
    a LIMIT over its dataset, which keeps DataFusion from pushing filters into the scan (the
    way around :class:`_LiteralFilterPushdown`); ``in_memory`` lets small scans be read up
    front; ``dictionary_tags`` hands string tags over dictionary encoded."""

    pushdown: bool = True
    in_memory: bool = True
    dictionary_tags: bool = True


class _QueryContext:
    """The tables one query reads, registered on a fresh DataFusion session."""

    def __init__(self, engine: Engine, mode: _Mode) -> None:
        self.engine = engine
        self.mode = mode
        self._ctx: datafusion.SessionContext | None = None
        self.scans: list[ScanRecord] = []
        self.errors: list[GnomonError] = []
        self._registered: set[str] = set()
        #: Whether a table was registered as rows read up front.
        self.in_memory = False
        #: The rows of the table read up front, by registered name.
        self.rows: dict[str, pa.Table] = {}
        #: What the query is when of a shape :mod:`node.sql.direct` answers without DataFusion
        #: (used when its table was read up front).
        self.direct: direct.Direct | None = None

    @property
    def ctx(self) -> datafusion.SessionContext:
        """The query's DataFusion session, made when first needed (a query answered without
        DataFusion never pays for one), holding the rows read up front."""
        if self._ctx is None:
            self._ctx = datafusion.SessionContext()
            functions.register(self._ctx, self.errors)
            for name, rows in self.rows.items():
                self._ctx.from_arrow(rows, name=_dq(name))
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
        if (
            prescan is not None
            and self.mode.in_memory
            and not prescan.stops_early
            and self._register_small(name, prescan)
        ):
            return
        dataset = EngineDataset(
            self.engine,
            table,
            version=version,
            timestamp_ms=timestamp_ms,
            scans=self.scans,
            errors=self.errors,
            bounds=None if prescan is None else prescan.bounds,
            dictionary_tags=self.mode.dictionary_tags,
        )
        # DataFusion reads the name as SQL (unquoted folds to lower case): quote it.
        if self.mode.pushdown:
            self.ctx.register_dataset(_dq(name), dataset)
        else:
            raw = _dq(f"__scan_{len(self._registered)}")
            self.ctx.register_dataset(raw, dataset)
            view = self.ctx.sql(f"SELECT * FROM {raw} LIMIT {2**63 - 1}")
            self.ctx.register_view(_dq(name), view)

    def _register_small(self, name: str, prescan: Prescan) -> bool:
        scan = self.engine.plan_scan(
            prescan.table,
            columns=prescan.columns,
            bounds=prescan.bounds,
            dictionary_tags=self.mode.dictionary_tags,
        )
        if scan.estimated_rows() * len(scan.columns) > SMALL_SCAN_VALUES:
            return False
        # Only the columns the query names: an error naming the others (an unknown column,
        # whose message lists the valid ones) makes the query run again streamed.
        rows = scan.to_table()
        if self._ctx is not None:
            self._ctx.from_arrow(rows, name=_dq(name))
        self.in_memory = True
        self.rows[name] = rows
        self.scans.append(
            ScanRecord(
                prescan.table,
                scan.columns,
                lambda: scan.filter,
                scan.stats,
            )
        )
        return True


class SqlExecutor:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def execute(self, sql: str) -> QueryResult:
        stmt = parse(sql)
        return self.run(stmt)

    def run(self, stmt: Statement) -> QueryResult:
        match stmt:
            case Query(sql, tokens):
                return self._query(sql, tokens)
            case Explain(query, analyze):
                return self._explain(query, analyze)
            case Insert():
                return self._insert(stmt)
            case Delete(table, where):
                return self._delete(table, where)
            case CreateTable():
                schema, options = ddl.schema_of(stmt)
                self.engine.create_table(
                    stmt.name, schema, options, if_not_exists=stmt.if_not_exists
                )
                return QueryResult.affected(0)
            case DropTable(name, if_exists):
                self.engine.drop_table(name, if_exists=if_exists)
                return QueryResult.affected(0)
            case AlterAddColumns(table, columns):
                self.engine.alter_table(table, add_columns=[ddl.to_column(c) for c in columns])
                return QueryResult.affected(0)
            case AlterModifySetting(table, options):
                self.engine.alter_table(table, options=options)
                return QueryResult.affected(0)
            case ShowTables(like):
                names = self.engine.list_tables()
                if like is not None:
                    rx = _like_regex(like)
                    names = [n for n in names if rx.match(n)]
                return QueryResult.rows(pa.table({"Tables": pa.array(names, pa.string())}))
            case ShowCreateTable(name):
                info = self.engine.describe(name)
                return QueryResult.rows(
                    pa.table({"Table": [name], "Create Table": [ddl.show_create(info)]})
                )
            case Describe(name):
                return QueryResult.rows(ddl.describe(self.engine.describe(name)))
        raise InvalidArgument(f"unsupported statement {type(stmt).__name__}")

    # -- queries ---------------------------------------------------------------------------------

    def _prepare(
        self, sql: str, mode: _Mode, tokens: Sequence[Token] = ()
    ) -> tuple[_QueryContext, str]:
        """Register the tables ``sql`` mentions and rewrite what DataFusion does not accept:
        time-travel clauses (``t VERSION AS OF n`` / ``t TIMESTAMP AS OF '...'``) become
        registered names, and integer milliseconds compared with a timestamp column (as
        HoraeDB allows: ``ts >= 1700000000000``) become timestamps. A query reading no table
        but one tells the engine the columns it may read and, reading it once, the bounds of
        its WHERE clause (:mod:`node.sql.prescan`); in ``in_memory`` mode a small such scan
        is read up front, once for all the query's uses of the table."""
        qc = _QueryContext(self.engine, mode)
        tables = set(self.engine.list_tables())
        tokens = tokens or tokenize(sql)
        mentioned = [n for n in (t.identifier for t in tokens) if n is not None and n in tables]
        ts_columns = {
            c.name
            for name in mentioned
            for c in self.engine.describe(name).schema.columns
            if c.type is ColumnType.TIMESTAMP
        }
        edits: list[tuple[int, int, str]] = []
        plain: list[str] = []
        n_travel = 0
        for i, t in enumerate(tokens):
            name = t.identifier
            if name is None:
                continue
            if (
                i + 4 < len(tokens)
                and tokens[i + 1].is_word("VERSION", "TIMESTAMP")
                and tokens[i + 2].is_word("AS")
                and tokens[i + 3].is_word("OF")
            ):
                if name not in tables:
                    raise NotFound(f"table {name!r} does not exist")
                lit = tokens[i + 4]
                n_travel += 1
                alias = f"__travel_{n_travel}"
                if tokens[i + 1].is_word("VERSION"):
                    if lit.kind is not Kind.NUMBER or not lit.text.isdigit():
                        raise InvalidArgument("VERSION AS OF takes a version number")
                    qc.register(alias, name, version=int(lit.text))
                else:
                    qc.register(alias, name, timestamp_ms=_timestamp_ms(lit))
                following = tokens[i + 5]
                has_alias = (
                    following.is_word("AS")
                    or following.kind is Kind.QUOTED
                    or (following.kind is Kind.WORD and not following.is_word(*_CLAUSE_WORDS))
                )
                text = _dq(alias) if has_alias else f"{_dq(alias)} AS {_dq(name)}"
                edits.append((t.pos, following.pos, text + " "))
            elif name in tables:
                plain.append(name)
            elif name in ts_columns:
                edits.extend(_timestamp_literals(tokens, i))
        prescan = None
        if n_travel == 0 and len(set(plain)) == 1:
            schema = self.engine.describe(plain[0]).schema
            prescan = analyse(tokens, plain[0], schema, mentions=len(plain))
            qc.direct = direct.plan(tokens, plain[0], schema, exact_where=prescan.exact)
        for name in plain:
            qc.register(name, name, prescan=prescan)
        out: list[str] = []
        last = 0
        for begin, stop, text in sorted(edits):
            out.append(sql[last:begin])
            out.append(text)
            last = stop
        out.append(sql[last:])
        return qc, "".join(out)

    def _collect(self, qc: _QueryContext, sql: str) -> pa.Table:
        try:
            return _plain(qc.ctx.sql(sql).to_arrow_table())
        except GnomonError:
            raise
        except Exception as e:  # DataFusion reports every failure as a plain Exception
            if qc.errors:
                raise qc.errors[0] from None
            if qc.in_memory:
                raise _StreamInstead from e
            if qc.mode.pushdown and "BooleanScalar" in str(e):
                raise _LiteralFilterPushdown from e
            if qc.mode.dictionary_tags and "Dictionary(" in str(e):
                raise _DictionaryUnsupported from e
            raise _translate(e) from None

    def _run(
        self, sql: str, prefix: str = "", tokens: Sequence[Token] = ()
    ) -> tuple[_QueryContext, pa.Table]:
        """Runs ``prefix`` + the prepared ``sql``; when DataFusion cannot push a filter it
        simplified to a literal, runs it again with filters evaluated above the scans, when
        it cannot take dictionary-encoded tags, with plain ones, and when it fails on tables
        read up front, streamed. An EXPLAIN (a ``prefix``) shows the streaming plan, never
        one over rows read up front."""
        mode = _Mode(in_memory=not prefix)
        for _ in range(3):  # each retry turns one of the three features off
            qc, rewritten = self._prepare(sql, mode, tokens)
            if qc.direct is not None and len(qc.rows) == 1:
                (rows,) = qc.rows.values()
                return qc, _plain(direct.run(qc.direct, rows))
            try:
                return qc, self._collect(qc, prefix + rewritten)
            except _StreamInstead:
                mode = replace(mode, in_memory=False)
            except _LiteralFilterPushdown:
                mode = replace(mode, pushdown=False)
            except _DictionaryUnsupported:
                mode = replace(mode, dictionary_tags=False)
        qc, rewritten = self._prepare(sql, mode, tokens)
        return qc, self._collect(qc, prefix + rewritten)

    def _query(self, sql: str, tokens: Sequence[Token] = ()) -> QueryResult:
        qc, table = self._run(sql, tokens=tokens)
        result = QueryResult.rows(table)
        result.scans = qc.scans
        return result

    def _explain(self, query: str, analyze: bool) -> QueryResult:
        qc, plan = self._run(query, "EXPLAIN ANALYZE " if analyze else "EXPLAIN ")
        rows = {name: plan.column(name).to_pylist() for name in plan.column_names}
        for scan in qc.scans:
            s = scan.stats
            rows.setdefault("plan_type", []).append("gnomon_scan")
            rows.setdefault("plan", []).append(
                f"table={scan.table} projection={scan.columns} filter={scan.filter} "
                f"ssts_read={s.ssts_read}/{s.ssts_total} "
                f"row_groups_read={s.row_groups_read}/{s.row_groups_total} "
                f"row_groups_located={s.row_groups_located} "
                f"memtable_slices={s.memtable_slices} merged_components={s.merged_components}"
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
        schema = self.engine.describe(stmt.table).schema
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
        written = self.engine.write(stmt.table, pa.table(dict(zip(columns, arrays, strict=True))))
        return QueryResult.affected(written)

    def _delete(self, table: str, where: str | None) -> QueryResult:
        schema = self.engine.describe(table).schema
        keys = [k for k in schema.primary_key if not (k == TSID and schema.has_tsid)]
        if schema.has_tsid:
            keys = schema.tags + keys
        select = f"SELECT {', '.join(_dq(k) for k in keys)} FROM {_dq(table)}"
        if where is not None:
            select += f" WHERE {where}"
        _, matched = self._run(select)
        if matched.num_rows == 0:
            return QueryResult.affected(0)
        info = self.engine.describe(table)
        if where is not None and info.options.update_mode is UpdateMode.APPEND:
            self._check_whole_keys(table, keys, where, matched.num_rows)
        return QueryResult.affected(self.engine.delete_rows(table, matched))

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


_CLAUSE_WORDS = (
    "WHERE", "GROUP", "ORDER", "LIMIT", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "ON",
    "UNION", "HAVING", "WINDOW", "EXCEPT", "INTERSECT", "OFFSET", "NATURAL", "QUALIFY",
)  # fmt: skip
_COMPARISONS = ("=", "<", ">", "<=", ">=", "<>", "!=")


def _number_span(tokens: Sequence[Token], i: int) -> tuple[int, int, str] | None:
    """An integer literal (optionally negative) starting at token ``i``: (start, end, text)."""
    t = tokens[i]
    sign = ""
    if t.kind is Kind.SYMBOL and t.text == "-" and i + 1 < len(tokens):
        sign, i = "-", i + 1
    n = tokens[i]
    if n.kind is Kind.NUMBER and n.text.isdigit():
        return t.pos, n.pos + len(n.text), sign + n.text
    return None


def _number_list(tokens: Sequence[Token], k: int) -> list[tuple[int, int, str]]:
    """The integer literals of ``( n, n, ... )`` opening at token ``k``; a list holding
    anything else (a subquery, an expression) is left alone as a whole."""

    def symbol(j: int, text: str) -> bool:
        return j < len(tokens) and tokens[j].kind is Kind.SYMBOL and tokens[j].text == text

    if not symbol(k, "("):
        return []
    spans: list[tuple[int, int, str]] = []
    j = k + 1
    while j < len(tokens):
        span = _number_span(tokens, j)
        if span is None:
            return []
        spans.append(span)
        j += 2 if span[2].startswith("-") else 1
        if symbol(j, ")"):
            return spans
        if not symbol(j, ","):
            return []
        j += 1
    return []


def _timestamp_literals(tokens: Sequence[Token], i: int) -> list[tuple[int, int, str]]:
    """Edits wrapping integer literals compared with the timestamp column at token ``i``."""
    spans: list[tuple[int, int, str]] = []
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if nxt is not None and nxt.kind is Kind.SYMBOL and nxt.text in _COMPARISONS:
        span = _number_span(tokens, i + 2)
        if span:
            spans.append(span)
    elif nxt is not None and (
        nxt.is_word("BETWEEN")
        or (nxt.is_word("NOT") and i + 2 < len(tokens) and tokens[i + 2].is_word("BETWEEN"))
    ):
        k = i + 2 if nxt.is_word("BETWEEN") else i + 3  # the first bound
        first = _number_span(tokens, k)
        if first:
            spans.append(first)
            j = k + (2 if first[2].startswith("-") else 1)
            if j < len(tokens) and tokens[j].is_word("AND"):
                second = _number_span(tokens, j + 1)
                if second:
                    spans.append(second)
    elif nxt is not None and (
        nxt.is_word("IN")
        or (nxt.is_word("NOT") and i + 2 < len(tokens) and tokens[i + 2].is_word("IN"))
    ):
        spans.extend(_number_list(tokens, i + 2 if nxt.is_word("IN") else i + 3))
    if i >= 2 and tokens[i - 1].kind is Kind.SYMBOL and tokens[i - 1].text in _COMPARISONS:
        prev = tokens[i - 2]
        if prev.kind is Kind.NUMBER and prev.text.isdigit():
            neg = i >= 3 and tokens[i - 3].kind is Kind.SYMBOL and tokens[i - 3].text == "-"
            start = tokens[i - 3].pos if neg else prev.pos
            spans.append((start, prev.pos + len(prev.text), ("-" if neg else "") + prev.text))
    return [(a, b, f"to_timestamp_millis({text})") for a, b, text in spans]


def _dq(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _timestamp_ms(t: Token) -> int:
    if t.kind is Kind.NUMBER and t.text.isdigit():
        return int(t.text)
    if t.kind is Kind.STRING:
        try:
            return _parse_ts(t.text)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    raise InvalidArgument(
        f"TIMESTAMP AS OF takes milliseconds or a timestamp string like '2024-01-01 00:00:00', "
        f"not {t.text!r}"
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
            ms = [_parse_ts(v) if isinstance(v, str) else v for v in values]
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


def _parse_ts(text: str) -> int:
    return int(pa.scalar(text).cast(pa.timestamp("ms")).cast(pa.int64()).as_py())


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


def _translate(e: Exception) -> GnomonError:
    text = str(e)
    m = _DF_NOT_FOUND.search(text)
    if m:
        return NotFound(f"table {m.group(1)!r} does not exist")
    return InvalidArgument(text.removeprefix("DataFusion error: "))
