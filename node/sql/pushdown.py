"""Queries of one partition table split over its sub-tables: each node serving some of
them answers a partial query over their union, this node merges the answers.

:func:`plan` takes a single SELECT over one partition table whose items are group keys or
count/sum/min/max/avg of an expression, with WHERE, GROUP BY (time buckets too), ORDER BY
of outputs (a projection may also order by columns it does not select, carried along
hidden) and LIMIT/OFFSET. It reads the query's tree (:mod:`node.sql.select`: its clauses,
FROM, items, WHERE terms, keys and LIMIT) and takes the text of the expressions the tree
holds as spans of tokens. Each owner runs the partial query once with its own SQL engine
over the union of the sub-tables it serves (projection, WHERE, buckets, GROUP BY and partial
aggregates: avg as sum and count; for a projection, its ORDER BY and LIMIT + OFFSET as a
top-k), and :func:`run` merges the partial answers with one more query over them (sums of
counts and sums, min of mins, max of maxes, avg = sum / count, then the ORDER BY and LIMIT).
Where one node serves every sub-table the query reads, it answers the query itself. Column
names and types are those DataFusion gives the query over the table as one (planned over no
rows). Any other query is scanned (:mod:`node.sql.partition_dataset`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import datafusion
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.lru import Lru
from node.partition.parts import Part
from node.partition.tables import PartitionTable
from node.sql import functions, rewrite, select
from node.sql.lexer import Kind, Token
from node.sql.provider import ScanRecord

#: The aggregates merged from partial ones.
AGGREGATES = frozenset(("COUNT", "SUM", "MIN", "MAX", "AVG"))
#: Words that put a query beyond what is pushed down wherever they are (the tree's names
#: hold every word, folded to lower case) and that the tree holds inside opaque
#: expressions: DISTINCT or ALL, windows, aggregate filters, UNNEST. What the tree marks
#: (nested queries, HAVING, WINDOW, QUALIFY, joins) it declines by the tree.
_REFUSED = frozenset(("distinct", "all", "over", "filter", "unnest"))
#: Words that end an expression and so are no alias written without AS.
_NOT_ALIASES = frozenset(("NULL", "END", "TRUE", "FALSE", "ASC", "DESC", "FIRST", "LAST"))
#: Where the sub-table's name goes in a partial query.
_TABLE = "\x00TABLE\x00"
#: A literal's slot in a planned query's SQL (:func:`_slot`).
_SLOT = re.compile("\x00L([0-9]+)\x00")


def _slot(k: int) -> str:
    """Where the query's ``k``-th literal goes in a planned pushdown's SQL."""
    return f"\x00L{k}\x00"


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
    descending: bool
    #: NULLS FIRST (True) or LAST (False) as written; None when unstated.
    nulls: bool | None

    @property
    def nulls_first(self) -> bool:
        """Where nulls go: as written, else DataFusion's default (first when descending)."""
        return self.descending if self.nulls is None else self.nulls

    @property
    def sql(self) -> str:
        text = _dq(self.column) + (" DESC" if self.descending else "")
        if self.nulls is not None:
            text += " NULLS FIRST" if self.nulls else " NULLS LAST"
        return text


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
    """A query's tokens with its text. Text taken from it names the sub-table
    (:data:`_TABLE`) where the query qualifies a column with the partition table's name,
    and has a slot (:func:`_slot`) where each literal of ``literals_at`` was written. The
    literals whose values the plan depends on (a LIMIT, an ordinal, an expression compared
    with another) are noted in ``read``."""

    def __init__(
        self, sql: str, tokens: Sequence[Token], table: str, literals_at: Sequence[int]
    ) -> None:
        self.sql = sql
        self.tokens = tokens
        self.table = table
        self.slots = {at: k for k, at in enumerate(literals_at)}
        self.read: set[int] = set()

    def text(self, start: int, stop: int, *, also: int | None = None) -> str:
        """The text of ``tokens[start:stop]``, the sub-table named at ``also`` too."""
        tokens, sql = self.tokens, self.sql
        edits = []
        for i in range(start, stop):
            t = tokens[i]
            if i in self.slots:
                edits.append((t.pos, t.pos + len(rewrite.raw(t, sql)), _slot(self.slots[i])))
            elif i == also or (
                t.identifier == self.table
                and tokens[i + 1].kind is Kind.SYMBOL
                and tokens[i + 1].text == "."
            ):
                edits.append((t.pos, t.pos + len(sql[t.pos : tokens[i + 1].pos].rstrip()), _TABLE))
        out = []
        done = tokens[start].pos
        for begin, end, text in edits:
            out.append(sql[done:begin])
            out.append(text)
            done = end
        out.append(sql[done : tokens[stop].pos])
        return "".join(out).strip()

    def value(self, at: int) -> str:
        """The text of the token ``at``, a value the plan depends on."""
        self.read.add(at)
        return self.tokens[at].text

    def key(self, start: int, stop: int) -> tuple[tuple[str, str], ...]:
        """What tells ``tokens[start:stop]`` from other expressions (two with the same key
        are the same expression); its literals' values are among them."""
        self.read.update(i for i in range(start, stop) if i in self.slots)
        return tuple(
            (t.kind, t.upper if t.kind is Kind.WORD else t.text) for t in self.tokens[start:stop]
        )

    def calls_aggregate(self, start: int, stop: int) -> bool:
        return any(
            self.tokens[i].is_word(*AGGREGATES)
            and i + 1 < stop
            and self.tokens[i + 1].kind is Kind.SYMBOL
            and self.tokens[i + 1].text == "("
            for i in range(start, stop)
        )


def _item(q: _Tokens, item: select.Item) -> _Item | None:
    """What the pushdown reads of a SELECT item of the tree: its text, an alias written
    without AS (the tree reads those written with it), the aggregate it is."""
    tokens = q.tokens
    start, stop = item.span
    if tokens[stop - 1].text == "*" and (stop - start == 1 or tokens[stop - 2].text == "."):
        return None  # every column: scanned instead
    alias = item.alias
    if alias is None and stop - start >= 3 and tokens[stop - 2].is_word("AS"):
        return None  # AS and no name
    if (
        alias is None
        and stop - start >= 2
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
    if first.is_word(*AGGREGATES) and stop - start >= 3 and select.wrapped(tokens, start + 1, stop):
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


@dataclass(frozen=True)
class Planned:
    """The pushdown of every query of one shape (the same tokens but for the values of
    their literals) whose literals at ``depends`` are those it was planned with: its SQL
    holds a slot where each literal goes (:meth:`bind`)."""

    pushdown: Pushdown
    #: The literals (by their order among the query's) whose values the plan depends on,
    #: with those values.
    depends: tuple[tuple[int, str], ...]

    def holds_for(self, literals: Sequence[Token]) -> bool:
        return all(literals[k].text == text for k, text in self.depends)

    def bind(self, literals: Sequence[Token], sql: str) -> Pushdown:
        """The pushdown of ``sql``, a query of the shape whose literals are ``literals``."""
        texts = [rewrite.raw(t, sql) for t in literals]

        def filled(template: str) -> str:
            return _SLOT.sub(lambda m: texts[int(m.group(1))], template)

        p = self.pushdown
        return replace(
            p,
            template=filled(p.template),
            final=filled(p.final),
            names_sql=filled(p.names_sql),
            whole_template=filled(p.whole_template),
        )


def plan(
    sql: str,
    tokens: Sequence[Token],
    query: select.Select,
    table: str,
    columns: Sequence[str],
    literals_at: Sequence[int] = (),
) -> Planned | None:
    """The pushdown of ``sql`` (``tokens``, its tree ``query``), a query reading partition
    table ``table`` (of ``columns``) once, with a slot for each literal at ``literals_at``
    (among ``tokens``), or None when its shape is not one that splits (it is then
    scanned)."""
    q = _Tokens(sql, tokens, table, literals_at)
    pushdown = _plan(q, query, columns)
    if pushdown is None:
        return None
    order = {at: k for k, at in enumerate(literals_at)}
    depends = tuple(sorted((order[at], tokens[at].text) for at in q.read if at in order))
    return Planned(pushdown, depends)


def _plan(q: _Tokens, query: select.Select, columns: Sequence[str]) -> Pushdown | None:
    table, tokens = q.table, q.tokens
    source = query.from_alone(table)
    if source is None or query.other or not _REFUSED.isdisjoint(query.names):
        return None
    if any(term.span[0] == term.span[1] for term in query.where):
        return None  # a WHERE clause missing a term: DataFusion says so
    items = []
    for written in query.items:
        item = _item(q, written)
        if item is None:
            return None
        items.append(item)
    # The terms as written, joined by AND; the tree opened parentheses around terms, so a
    # term it holds opaque (an OR, say) is closed in them again where there are several.
    where_sql = " AND ".join(
        q.text(*term.span)
        if term.test is not None or len(query.where) == 1
        else f"({q.text(*term.span)})"
        for term in query.where
    )
    where_sql = where_sql and " WHERE " + where_sql
    # The sub-table is not aliased as the table: its owner would take that name for the
    # partition table and read it as well.
    alias_sql = "" if source.alias is None else " AS " + _dq(source.alias)
    from_sql = " FROM " + _TABLE + alias_sql

    group_keys: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for s, e in query.group_spans:
        if q.calls_aggregate(s, e):
            return None
        if e - s == 1 and tokens[s].kind is Kind.NUMBER:
            ordinal = q.value(s)
            k = int(ordinal) - 1 if ordinal.isdigit() else -1
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
    aggregating = bool(query.group_spans) or any(it.aggregate for it in items)
    limit = None if query.limit_at is None else int(q.value(query.limit_at))
    offset = None if query.offset_at is None else int(q.value(query.offset_at))

    hidden: list[str] = []
    orders: list[_Order] = []
    for key in query.order_by:
        s, e = key.span
        if e == s:
            return None
        ref = _order_ref(q, s, e, items, columns, aggregating, hidden)
        if ref is None:
            return None
        orders.append(_Order(ref, key.descending, key.nulls_first))

    names_sql = f"SELECT {', '.join(_named(it) for it in items)} FROM {_dq(table)}{alias_sql}"
    if query.group_spans:
        names_sql += " GROUP BY " + ", ".join(q.text(s, e) for s, e in query.group_spans)
    names_sql = names_sql.replace(_TABLE, _dq(table))
    end = len(tokens) - 1  # the END token, after any semicolons
    while end > 0 and tokens[end - 1].kind is Kind.SYMBOL and tokens[end - 1].text == ";":
        end -= 1
    whole = q.text(0, end, also=source.at)
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
        ordinal = q.value(start)
        k = int(ordinal) - 1 if ordinal.isdigit() else -1
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
    """``push`` over the sub-tables ``parts``: each node serving some of them answers one
    partial query over the union of those (:func:`asked`), in parallel, merged here; the
    query itself where one node serves every sub-table the query reads."""
    schema = result_schema(push, table)
    every = len(parts)

    def answer(group: list[Part]) -> tuple[bool, pa.Table]:
        whole = len(group) == every
        sql, union = asked(push, group, whole=whole)
        return whole, group[0].query(sql, union)

    answers = table.gather_by_owner([p.table for p in parts], answer)
    owners = {p.table: p.owner for p in parts}
    for subs, (_, got) in answers:
        scans.append(
            ScanRecord(
                subs[0],
                None,
                lambda: None,
                owner=owners[subs[0]],
                rows_received=got.num_rows,
                union=subs if len(subs) > 1 else (),
            )
        )
    if len(answers) == 1 and answers[0][1][0]:
        return _as(answers[0][1][1], schema)
    return merge(push, [got for _, (_, got) in answers], schema)


def asked(push: Pushdown, group: Sequence[Part], *, whole: bool) -> tuple[str, list[str]]:
    """What the node serving ``group`` (sub-tables of one owner) runs: the query itself
    (``whole``: they hold every row it reads) or its partial query, naming the first
    sub-table, which reads the union of the group's (none: one sub-table alone)."""
    first = group[0].table
    sql = push.whole(first) if whole else push.partial(first)
    return sql, [p.table for p in group] if len(group) > 1 else []
