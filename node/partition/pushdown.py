"""Queries of one partition table split over its sub-tables: each sub-table answers a
partial query where it is served, this node merges the answers.

:func:`plan` takes a single SELECT over one partition table whose items are group keys or
count/sum/min/max/avg of an expression, with WHERE, GROUP BY (time buckets too), ORDER BY
of outputs (a projection may also order by columns it does not select, carried along
hidden) and LIMIT/OFFSET. Each owner runs the partial query with its own SQL engine
(projection, WHERE, buckets, GROUP BY and partial aggregates: avg as sum and count; for a
projection, its ORDER BY and LIMIT + OFFSET as a top-k), and :func:`run` merges the partial
answers with one more query over them (sums of counts and sums, min of mins, max of maxes,
avg = sum / count, then the ORDER BY and LIMIT). Where one sub-table holds every row the
query reads, it answers the query itself. Column names and types are those DataFusion gives
the query over the table as one (planned over no rows). Any other query is scanned
(:mod:`node.partition.dataset`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import datafusion
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.lru import Lru
from node.partition.parts import Part
from node.partition.tables import PartitionTable
from node.sql import functions
from node.sql.lexer import Kind, Token
from node.sql.provider import ScanRecord

#: The aggregates merged from partial ones.
AGGREGATES = frozenset(("COUNT", "SUM", "MIN", "MAX", "AVG"))
#: Words that end the select list or a clause, at parenthesis depth 0.
_CLAUSES = frozenset(("FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET"))
#: Words that put a query beyond what is pushed down.
_REFUSED = frozenset((
    "SELECT", "DISTINCT", "OVER", "HAVING", "JOIN", "UNION", "INTERSECT", "EXCEPT", "WITH",
    "WINDOW", "QUALIFY", "VALUES", "LATERAL", "UNNEST", "FILTER",
))  # fmt: skip
#: Words that end an expression and so are no alias written without AS.
_NOT_ALIASES = frozenset(("NULL", "END", "TRUE", "FALSE", "ASC", "DESC", "FIRST", "LAST"))

#: The ORDER BY directions read.
_DIRECTIONS: tuple[list[str], ...] = (
    [], ["ASC"], ["DESC"], ["NULLS", "FIRST"], ["NULLS", "LAST"], ["ASC", "NULLS", "FIRST"],
    ["ASC", "NULLS", "LAST"], ["DESC", "NULLS", "FIRST"], ["DESC", "NULLS", "LAST"],
)  # fmt: skip
#: Where the sub-table's name goes in a partial query.
_TABLE = "\x00TABLE\x00"
#: The name the partial answers are merged under.
PARTS = "__parts"


def _dq(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# -- reading the query ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Item:
    text: str
    #: The expression's tokens, compared to find the same expression elsewhere.
    key: tuple[tuple[str, str], ...]
    alias: str | None
    #: An aggregate of the merged kinds: its function and its argument's text.
    aggregate: tuple[str, str] | None


@dataclass(frozen=True)
class _Order:
    #: The output column (``__o<i>``) or hidden input column (``__h<i>``) it sorts by.
    column: str
    direction: str

    @property
    def descending(self) -> bool:
        return "DESC" in self.direction.upper().split()

    @property
    def nulls_first(self) -> bool:
        """Where nulls go: as written, else DataFusion's default (first when descending)."""
        words = self.direction.upper().split()
        return "FIRST" in words if "NULLS" in words else self.descending

    @property
    def sql(self) -> str:
        return f"{_dq(self.column)} {self.direction}".rstrip()


@dataclass(frozen=True)
class Merging:
    """The merge as Arrow kernels do it, beside the SQL form (:attr:`Pushdown.final`)."""

    #: Each output: ``("GROUP", j)`` for group key j, else an aggregate's function and the
    #: item's position; None for a projection (the outputs are the partials' own).
    outputs: tuple[tuple[str, int], ...] | None
    groups: int
    visible: int
    orders: tuple[_Order, ...]
    limit: int | None
    offset: int | None


class _Tokens:
    """A query's tokens with its text, cut into spans at parenthesis depth 0. Text taken
    from it names the sub-table (:data:`_TABLE`) where the query qualifies a column with
    the partition table's name."""

    def __init__(self, sql: str, tokens: Sequence[Token], table: str) -> None:
        self.sql = sql
        self.tokens = tokens
        depth = 0
        self.depth: list[int] = []
        for t in tokens:
            if t.kind is Kind.SYMBOL and t.text == ")":
                depth -= 1
            self.depth.append(depth)
            if t.kind is Kind.SYMBOL and t.text == "(":
                depth += 1
        self.swap = {
            i
            for i, t in enumerate(tokens[:-1])
            if t.identifier == table
            and tokens[i + 1].kind is Kind.SYMBOL
            and tokens[i + 1].text == "."
        }

    def text(self, start: int, stop: int, *, also: frozenset[int] = frozenset()) -> str:
        swap = self.swap | also
        if not any(start <= i < stop for i in swap):
            return self.sql[self.tokens[start].pos : self.tokens[stop].pos].strip()
        out = []
        for i in range(start, stop):
            piece = self.sql[self.tokens[i].pos : self.tokens[i + 1].pos]
            if i in swap:
                token = piece.rstrip()
                piece = _TABLE + piece[len(token) :]
            out.append(piece)
        return "".join(out).strip()

    def key(self, start: int, stop: int) -> tuple[tuple[str, str], ...]:
        return tuple(
            (t.kind, t.upper if t.kind is Kind.WORD else t.text) for t in self.tokens[start:stop]
        )

    def split(self, start: int, stop: int) -> list[tuple[int, int]]:
        """``[start, stop)`` cut at the commas of depth 0."""
        out, first = [], start
        for i in range(start, stop):
            t = self.tokens[i]
            if self.depth[i] == 0 and t.kind is Kind.SYMBOL and t.text == ",":
                out.append((first, i))
                first = i + 1
        out.append((first, stop))
        return out

    def closing(self, i: int) -> int:
        """The ``)`` matching the ``(`` at ``i``."""
        want = self.depth[i]
        for j in range(i + 1, len(self.tokens)):
            t = self.tokens[j]
            if t.kind is Kind.SYMBOL and t.text == ")" and self.depth[j] == want:
                return j
        return len(self.tokens) - 1

    def calls_aggregate(self, start: int, stop: int) -> bool:
        return any(
            self.tokens[i].is_word(*AGGREGATES)
            and i + 1 < stop
            and self.tokens[i + 1].kind is Kind.SYMBOL
            and self.tokens[i + 1].text == "("
            for i in range(start, stop)
        )


def _item(q: _Tokens, start: int, stop: int) -> _Item | None:
    tokens = q.tokens
    if tokens[stop - 1].text == "*" and (stop - start == 1 or tokens[stop - 2].text == "."):
        return None  # every column: scanned instead
    alias = None
    if stop - start >= 3 and tokens[stop - 2].is_word("AS"):
        alias, stop = tokens[stop - 1].identifier, stop - 2
    elif (
        stop - start >= 2
        and tokens[stop - 1].kind in (Kind.WORD, Kind.QUOTED)
        and tokens[stop - 1].upper not in _NOT_ALIASES
        and (tokens[stop - 2].kind is not Kind.SYMBOL or tokens[stop - 2].text == ")")
        and not tokens[stop - 2].is_word("IS", "NOT", "AND", "OR", "AS", "CASE", "ELSE", "THEN")
    ):
        alias, stop = tokens[stop - 1].identifier, stop - 1
    if (
        alias is None
        and stop - start >= 2
        and tokens[stop - 1].kind is Kind.WORD
        and tokens[stop - 2].kind is not Kind.SYMBOL
        and tokens[stop - 1].upper not in _NOT_ALIASES
    ):
        return None  # two words in a row: a form this reading does not know
    aggregate = None
    first = tokens[start]
    if (
        first.is_word(*AGGREGATES)
        and stop - start >= 3
        and tokens[start + 1].text == "("
        and q.closing(start + 1) == stop - 1
    ):
        arg_start, arg_stop = start + 2, stop - 1
        if arg_stop <= arg_start or q.calls_aggregate(arg_start, arg_stop):
            return None
        aggregate = (first.upper, q.text(arg_start, arg_stop))
    elif q.calls_aggregate(start, stop):
        return None  # an expression over aggregates: not merged from partial ones
    return _Item(q.text(start, stop), q.key(start, stop), alias, aggregate)


@dataclass(frozen=True)
class Pushdown:
    """A query of one partition table, split: :meth:`partial` for each sub-table, then
    :attr:`final` over their answers (registered as :data:`PARTS`), named and typed as
    :attr:`names_sql` over the table is."""

    table: str
    #: The partial query, :data:`_TABLE` where the sub-table's name goes.
    template: str
    final: str
    names_sql: str
    #: The query itself over a sub-table: the answer when the others hold none of its rows.
    whole_template: str
    merging: Merging

    def partial(self, sub_table: str) -> str:
        return self.template.replace(_TABLE, _dq(sub_table))

    def whole(self, sub_table: str) -> str:
        return self.whole_template.replace(_TABLE, _dq(sub_table))


def plan(sql: str, tokens: Sequence[Token], table: str, columns: Sequence[str]) -> Pushdown | None:
    """The pushdown of ``sql`` (``tokens``), a query reading partition table ``table`` (of
    ``columns``) once, or None when its shape is not one that splits (it is then scanned)."""
    q = _Tokens(sql, tokens, table)
    if not tokens or not tokens[0].is_word("SELECT") or tokens[1].is_word("DISTINCT", "ALL"):
        return None
    if any(t.is_word(*_REFUSED) for t in tokens[1:]):
        return None
    clauses: dict[str, int] = {}
    for i, t in enumerate(tokens):
        if q.depth[i] == 0 and t.is_word(*_CLAUSES):
            if t.upper in clauses:
                return None
            clauses[t.upper] = i
    end = len(tokens) - 1  # the END token
    if tokens[end].kind is not Kind.END or "FROM" not in clauses:
        return None
    order = sorted(clauses.values())

    def span(word: str) -> tuple[int, int] | None:
        at = clauses.get(word)
        if at is None:
            return None
        later = [i for i in order if i > at]
        return at, later[0] if later else end

    # FROM <table> [[AS] alias]
    f0, f1 = span("FROM")  # type: ignore[misc]
    source = tokens[f0 + 1 : f1]
    if not source or source[0].identifier != table or len(source) > 3:
        return None
    if len(source) == 3 and not source[1].is_word("AS"):
        return None
    if len(source) == 2 and source[1].kind not in (Kind.WORD, Kind.QUOTED):
        return None
    aliased = len(source) > 1
    items = []
    for s, e in q.split(1, f0):
        item = _item(q, s, e)
        if item is None:
            return None
        items.append(item)
    where = span("WHERE")
    where_sql = "" if where is None else " " + q.text(where[0], where[1])
    # The sub-table is not aliased as the table: its owner would take that name for the
    # partition table and read it as well.
    from_sql = " FROM " + _TABLE
    if aliased:
        from_sql += " " + q.text(f0 + 2, f1)

    group = span("GROUP")
    group_keys: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    if group is not None:
        if not tokens[group[0] + 1].is_word("BY"):
            return None
        for s, e in q.split(group[0] + 2, group[1]):
            if q.calls_aggregate(s, e):
                return None
            if e - s == 1 and tokens[s].kind is Kind.NUMBER:
                k = int(tokens[s].text) - 1 if tokens[s].text.isdigit() else -1
                if not 0 <= k < len(items) or items[k].aggregate is not None:
                    return None
                group_keys.append((items[k].text, items[k].key))
                continue
            name = tokens[s].identifier if e - s == 1 else None
            named = [it for it in items if name is not None and it.alias == name]
            if named and name not in columns:
                group_keys.append((named[0].text, named[0].key))
            else:
                group_keys.append((q.text(s, e), q.key(s, e)))
    aggregating = group is not None or any(it.aggregate for it in items)

    # LIMIT n [OFFSET m] / OFFSET m
    limit = offset = None
    for word in ("LIMIT", "OFFSET"):
        got = span(word)
        if got is None:
            continue
        s, e = got
        if e - s != 2 or tokens[s + 1].kind is not Kind.NUMBER or not tokens[s + 1].text.isdigit():
            return None
        value = int(tokens[s + 1].text)
        if word == "LIMIT":
            limit = value
        else:
            offset = value

    hidden: list[str] = []
    orders: list[_Order] = []
    ordering = span("ORDER")
    if ordering is not None:
        if not tokens[ordering[0] + 1].is_word("BY"):
            return None
        for s, e in q.split(ordering[0] + 2, ordering[1]):
            d = e
            while d > s and tokens[d - 1].is_word("ASC", "DESC", "NULLS", "FIRST", "LAST"):
                d -= 1
            if d == s:
                return None
            direction = q.text(d, e) if d < e else ""
            ref = _order_ref(q, s, d, items, columns, aggregating, hidden)
            if ref is None:
                return None
            orders.append(_Order(ref, direction))
    if any(o.direction.upper().split() not in _DIRECTIONS for o in orders):
        return None

    names_sql = f"SELECT {', '.join(_named(it) for it in items)} FROM {_dq(table)}"
    if aliased:
        names_sql += " " + q.text(f0 + 2, f1)
    if group is not None:
        names_sql += " " + q.text(group[0], group[1])
    names_sql = names_sql.replace(_TABLE, _dq(table))
    whole = q.text(0, end, also=frozenset((f0 + 1,)))
    order_sql = ""
    if orders:
        order_sql = " ORDER BY " + ", ".join(o.sql for o in orders)
    tail = "" if limit is None else f" LIMIT {limit}"
    tail += "" if offset is None else f" OFFSET {offset}"

    if not aggregating:
        outputs = [f"{it.text} AS {_dq(f'__o{i}')}" for i, it in enumerate(items)]
        outputs += [f"{_dq(c)} AS {_dq(f'__h{j}')}" for j, c in enumerate(hidden)]
        partial_tail = ""
        if orders:
            partial_tail = order_sql
        if limit is not None:
            partial_tail += f" LIMIT {limit + (offset or 0)}"
        template = f"SELECT {', '.join(outputs)}{from_sql}{where_sql}{partial_tail}"
        visible = ", ".join(_dq(f"__o{i}") for i in range(len(items)))
        final = f"SELECT {visible} FROM {_dq(PARTS)}{order_sql}{tail}"
        merging = Merging(None, 0, len(items), tuple(orders), limit, offset)
        return Pushdown(table, template, final, names_sql, whole, merging)

    # Every item is an aggregate or one of the GROUP BY expressions.
    group_index = {key: j for j, (_, key) in enumerate(group_keys)}
    partial_out = [f"{text} AS {_dq(f'__g{j}')}" for j, (text, _) in enumerate(group_keys)]
    final_out = []
    merged: list[tuple[str, int]] = []
    for i, it in enumerate(items):
        out = _dq(f"__o{i}")
        if it.aggregate is None:
            j = group_index.get(it.key)
            if j is None:
                return None
            final_out.append(f"{_dq(f'__g{j}')} AS {out}")
            merged.append(("GROUP", j))
            continue
        fn, arg = it.aggregate
        merged.append((fn, i))
        if arg.upper().startswith(("DISTINCT ", "ALL ")):
            return None
        total, counted = _dq(f"__a{i}_s"), _dq(f"__a{i}_c")
        if fn == "AVG":
            partial_out += [f"sum({arg}) AS {total}", f"count({arg}) AS {counted}"]
            final_out.append(
                f"CAST(sum({total}) AS DOUBLE) / CAST(NULLIF(sum({counted}), 0) AS DOUBLE) AS {out}"
            )
        elif fn == "COUNT":
            partial_out.append(f"count({arg}) AS {counted}")
            final_out.append(f"sum({counted}) AS {out}")
        else:
            merge = "sum" if fn == "SUM" else fn.lower()
            partial_out.append(f"{fn.lower()}({arg}) AS {total}")
            final_out.append(f"{merge}({total}) AS {out}")
    group_sql = ""
    if group_keys:
        # By the output names: a single time bucket so grouped is a shape the owner answers
        # without DataFusion (node/sql/direct.py).
        group_sql = " GROUP BY " + ", ".join(_dq(f"__g{j}") for j in range(len(group_keys)))
    template = f"SELECT {', '.join(partial_out)}{from_sql}{where_sql}{group_sql}"
    final = f"SELECT {', '.join(final_out)} FROM {_dq(PARTS)}{group_sql}{order_sql}{tail}"
    merging = Merging(tuple(merged), len(group_keys), len(items), tuple(orders), limit, offset)
    return Pushdown(table, template, final, names_sql, whole, merging)


def _named(item: _Item) -> str:
    return item.text if item.alias is None else f"{item.text} AS {_dq(item.alias)}"


def _order_ref(
    q: _Tokens,
    start: int,
    stop: int,
    items: list[_Item],
    columns: Sequence[str],
    aggregating: bool,
    hidden: list[str],
) -> str | None:
    """What an ORDER BY expression sorts by: an output column (by position, alias or the
    same expression), or, in a projection, a column of the table not selected (carried as
    a hidden column)."""
    tokens = q.tokens
    if stop - start == 1 and tokens[start].kind is Kind.NUMBER:
        k = int(tokens[start].text) - 1 if tokens[start].text.isdigit() else -1
        return f"__o{k}" if 0 <= k < len(items) else None
    name = tokens[start].identifier if stop - start == 1 else None
    for i, it in enumerate(items):
        if name is not None and it.alias == name:
            return f"__o{i}"
    key = q.key(start, stop)
    for i, it in enumerate(items):
        if it.key == key:
            return f"__o{i}"
    if not aggregating and name is not None and name in columns:
        if name not in hidden:
            hidden.append(name)
        return f"__h{hidden.index(name)}"
    return None


# -- running a pushdown --------------------------------------------------------------------------

_NAMES: Lru[str, pa.Schema] = Lru(256)
_NAMES_LOCK = threading.Lock()


def result_schema(push: Pushdown, table: PartitionTable) -> pa.Schema:
    """The names and types of the query's answer, as DataFusion plans it over the table with
    no rows (kept per select list and table definition)."""
    spec = table.spec
    key = f"{spec.name}:{spec.table_id}:{spec.created_ms}:{spec.schema.version}:{push.names_sql}"
    with _NAMES_LOCK:
        known = _NAMES.get(key)
    if known is not None:
        return known
    ctx = datafusion.SessionContext()
    functions.register(ctx, [])
    empty = pa.Table.from_batches([], table.spec.schema.arrow())
    ctx.from_arrow(empty, name=_dq(push.table))
    schema = ctx.sql(push.names_sql).schema()
    with _NAMES_LOCK:
        _NAMES.put(key, schema)
    return schema


def merge(push: Pushdown, partials: Sequence[pa.Table], schema: pa.Schema) -> pa.Table:
    """The answer from the sub-tables' ``partials`` (of one schema), as ``schema``."""
    parts = pa.concat_tables(partials, promote_options="permissive")
    merged = _merged(push.merging, parts)
    if merged is not None:
        return _as(merged, schema)
    ctx = datafusion.SessionContext()
    if parts.num_rows == 0:
        parts = pa.Table.from_batches([pa.RecordBatch.from_pylist([], parts.schema)])
    ctx.from_arrow(parts, name=_dq(PARTS))
    return _as(ctx.sql(push.final).to_arrow_table(), schema)


#: Sort keys Arrow orders as DataFusion does (floats are left out: NaN goes elsewhere).
def _sortable(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_integer(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_boolean(t)
    )


def _merged(m: Merging, parts: pa.Table) -> pa.Table | None:
    """The merge with Arrow kernels: a DataFusion session, plan and run cost a few ms, the
    kernels over a few partial answers a fraction of one. None where their answer could
    differ from DataFusion's (NaN in a float column, which min, max and sorts place
    otherwise; a float sort key): the SQL merge then runs."""
    for col in parts.columns:
        if pa.types.is_floating(col.type) and pc.any(pc.is_nan(col)).as_py():
            return None
    table = parts if m.outputs is None else _aggregated(m, parts)
    if any(not _sortable(table.column(o.column).type) for o in m.orders):
        return None
    start = m.offset or 0
    stop = None if m.limit is None else start + m.limit
    if m.orders:
        keys: list[Any] = [
            (
                o.column,
                "descending" if o.descending else "ascending",
                "at_start" if o.nulls_first else "at_end",
            )
            for o in m.orders
        ]
        order = pc.sort_indices(table, options=pc.SortOptions(sort_keys=keys))
        table = table.take(order[start:stop])
    elif start or stop is not None:
        table = table.slice(start, None if stop is None else stop - start)
    return table.select([f"__o{i}" for i in range(m.visible)])


#: How each aggregate's partial values (``__a<i>_s`` or ``__a<i>_c``) are merged.
_MERGED = {"SUM": ("_s", "sum"), "MIN": ("_s", "min"), "MAX": ("_s", "max"), "COUNT": ("_c", "sum")}


def _aggregated(m: Merging, parts: pa.Table) -> pa.Table:
    """The partial aggregates of ``parts`` merged per group, as the outputs ``__o<i>``."""
    assert m.outputs is not None
    needed: list[Any] = []  # (column, function) pairs
    for fn, i in m.outputs:
        for kind in ["SUM", "COUNT"] if fn == "AVG" else [fn] if fn in _MERGED else []:
            suffix, how = _MERGED[kind]
            needed.append((f"__a{i}{suffix}", how))
    keys = [f"__g{j}" for j in range(m.groups)]
    merged: dict[str, pa.ChunkedArray[Any] | pa.Array[Any]] = {}
    if keys:
        grouped = parts.group_by(keys, use_threads=False).aggregate(needed)
        merged = {name: grouped.column(name) for name in grouped.column_names}
    else:
        for c, how in dict.fromkeys(needed):
            merged[f"{c}_{how}"] = pa.array([getattr(pc, how)(parts.column(c))])
    outputs: dict[str, Any] = {}
    for i, (fn, at) in enumerate(m.outputs):
        if fn == "GROUP":
            outputs[f"__o{i}"] = merged[f"__g{at}"]
        elif fn == "AVG":
            counted = pc.cast(merged[f"__a{at}_c_sum"], pa.float64())
            total = pc.cast(merged[f"__a{at}_s_sum"], pa.float64())
            none = pa.scalar(None, pa.float64())
            outputs[f"__o{i}"] = pc.divide(
                total, pc.if_else(pc.equal(counted, pa.scalar(0.0)), none, counted)
            )
        else:
            suffix, how = _MERGED[fn]
            outputs[f"__o{i}"] = merged[f"__a{at}{suffix}_{how}"]
    return pa.table(outputs)


def _as(answer: pa.Table, schema: pa.Schema) -> pa.Table:
    """``answer`` under the names and types of ``schema`` (column by column)."""
    return pa.Table.from_arrays(
        [answer.column(i).cast(f.type) for i, f in enumerate(schema)],
        schema=pa.schema([f.with_nullable(True) for f in schema]),
    )


def run(
    push: Pushdown, table: PartitionTable, parts: Sequence[Part], scans: list[ScanRecord]
) -> pa.Table:
    """``push`` over the sub-tables ``parts``: each partial query where its sub-table is
    served, in parallel, then merged here; the query itself where one sub-table holds every
    row it reads."""
    schema = result_schema(push, table)
    subs = [p.table for p in parts]
    if len(parts) == 1:
        (answer,) = table.gather(subs, lambda p: p.query(push.whole(p.table)))
        scans.append(
            ScanRecord(
                parts[0].table,
                None,
                lambda: None,
                owner=parts[0].owner,
                rows_received=answer.num_rows,
            )
        )
        return _as(answer, schema)
    partials = table.gather(subs, lambda p: p.query(push.partial(p.table)))
    for part, got in zip(parts, partials, strict=True):
        scans.append(
            ScanRecord(
                part.table,
                None,
                lambda: None,
                owner=part.owner,
                rows_received=got.num_rows,
            )
        )
    return merge(push, partials, schema)
