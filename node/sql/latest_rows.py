"""Whether a query needs only each series' newest row of its table: "the last point of every
host", written as the join of the table with its newest timestamp per group. Such a query
reads the table's latest rows (the engine's latest-rows scan: a few rows per series and SST)
instead of every row.

Read from DataFusion's optimized logical plan of the query, once per query shape. It holds
for a table every scan of which, with no filter, feeds one side of an inner or semi join
whose other side is the newest timestamp per group of the same table's tags
(``SELECT g, ..., max(ts) FROM t GROUP BY g, ...``, renamed or not), the join equating
each group tag and the timestamp with that newest timestamp, with no other join condition.

Correct because a row kept by such a join has the newest timestamp of its group, which is at
least the newest of its own series: it is its series' newest row (in OVERWRITE mode one row
per series and timestamp; the caller asks for that mode). And the newest timestamp of a
group is the newest of its series' newest rows. So both sides, and the join, are the same
over the latest rows as over every row, and so is whatever the plan does with the join.
"""

from __future__ import annotations

from typing import Any

import datafusion
import pyarrow.dataset as ds
from datafusion.common import RexType

from node.engine.schema import Schema

#: Plan nodes a join side may pass through between its scan and the join.
_PASSING = ("SubqueryAlias", "Projection")
#: Plan nodes that may pass the join's rows on to the answer.
_ABOVE = ("Sort", "Limit", "Projection", "SubqueryAlias", "Filter", "Distinct")


def applies(sql: str, table: str, schema: Schema) -> bool:
    """Whether the query ``sql`` (as DataFusion takes it), reading no table but ``table``
    (registered under that name), needs only its series' newest rows (see the module)."""
    ctx = datafusion.SessionContext(datafusion.SessionConfig().with_information_schema(False))
    # A dataset gives no statistics: over rows in memory the optimizer would fold an
    # aggregate of no rows (a count(*)) into a constant, and the plan would hide that scan.
    ctx.register_dataset(table, ds.dataset(schema.arrow().empty_table()))
    try:
        plan = ctx.sql(sql).optimized_logical_plan()
    except Exception:  # DataFusion reports every failure as a plain Exception
        return False  # the query fails when it runs, as it would have
    return _over_latest_join(plan, schema)


def _over_latest_join(node: Any, schema: Schema) -> bool:
    """Whether ``node`` is a latest-rows join, or passes on (sorted, filtered, limited,
    projected) the rows of one, holding no subquery, which would read the table anew."""
    variant = node.to_variant()
    kind = type(variant).__name__
    if kind == "Join":
        return _latest_join(variant, schema)
    if kind not in _ABOVE or not all(map(_reads_nothing, _expressions(variant, kind))):
        return False
    inputs = node.inputs()
    return len(inputs) == 1 and _over_latest_join(inputs[0], schema)


def _expressions(variant: Any, kind: str) -> list[Any]:
    if kind == "Projection":
        return list(variant.projections())
    if kind == "Sort":
        return [key.expr() for key in variant.sort_exprs()]
    if kind == "Filter":
        return [variant.predicate()]
    return []


def _reads_nothing(expr: Any) -> bool:
    """Whether ``expr`` is made of columns, literals and calls alone (no subquery)."""
    name = expr.variant_name()
    if name in ("Column", "Literal"):
        return True
    if name == "Alias":
        return _reads_nothing(expr.to_variant().expr())
    if expr.rex_type() != RexType.Call:
        return False
    try:
        operands = expr.rex_call_operands()
    except Exception:  # an expression the bindings cannot take apart: taken as unsafe
        return False
    return all(map(_reads_nothing, operands))


def _latest_join(join: Any, schema: Schema) -> bool:
    """Whether ``join`` keeps the rows of one side at the newest timestamp per group of tags
    the other side computes (both straight from scans of the table)."""
    kind = str(join.join_type())
    if join.filter() is not None or kind not in ("Inner", "LeftSemi", "RightSemi"):
        return False
    on = [(_name(a), _name(b)) for a, b in join.on()]
    if any(a is None or b is None for a, b in on):
        return False
    left, right = join.left(), join.right()
    sides = {"LeftSemi": [(left, right, False)], "RightSemi": [(right, left, True)]}.get(
        kind, [(left, right, False), (right, left, True)]
    )
    for rows, newest, swapped in sides:
        pairs = [(b, a) if swapped else (a, b) for a, b in on]
        if _joined_at_newest(rows, newest, pairs, schema):
            return True
    return False


def _joined_at_newest(rows: Any, newest: Any, pairs: list[tuple[Any, Any]], schema: Schema) -> bool:
    row_columns = _passed_to_scan(rows)
    grouped = _newest_per_group(newest, schema)
    if row_columns is None or grouped is None:
        return False
    groups, newest_name = grouped
    ts_key = schema.timestamp_key
    equated = {(row_columns.get(a), b) for a, b in pairs}
    wanted = {(g, g_out) for g, g_out in groups.items()} | {(ts_key, newest_name)}
    return wanted <= equated


def _passed_to_scan(node: Any) -> dict[str, str] | None:
    """The names of the columns ``node`` outputs, mapped to the columns of the filterless
    scan they are, when it is one through renaming alone; None otherwise."""
    chain, node = _descend(node)
    scan = node.to_variant()
    if type(scan).__name__ != "TableScan" or scan.filters() or scan.fetch() is not None:
        return None
    return _through(chain, {name: name for _, name in scan.projection()})


def _newest_per_group(node: Any, schema: Schema) -> tuple[dict[str, str], str] | None:
    """For a side computing ``max(ts)`` per group of tags (no other aggregate) over a
    filterless scan of the table: each group tag mapped to its output name, and the newest
    timestamp's output name. None otherwise."""
    chain, node = _descend(node)
    aggregate = node.to_variant()
    if type(aggregate).__name__ != "Aggregate":
        return None
    (below,) = node.inputs()
    columns = _passed_to_scan(below)
    if columns is None:
        return None
    groups: dict[str, str] = {}
    for expr in aggregate.group_by_exprs():
        name = _name(expr)
        if name is None or columns.get(name) not in schema.tags:
            return None
        groups[name] = columns[name]
    aggregates = aggregate.aggregate_exprs()
    if len(aggregates) != 1 or type(aggregates[0].to_variant()).__name__ != "AggregateFunction":
        return None
    agg = aggregates[0]
    call = agg.to_variant()
    args = call.args()
    if (
        call.aggregate_type().lower() != "max"
        or len(args) != 1
        or columns.get(_name(args[0]) or "") != schema.timestamp_key
    ):
        return None
    out = _through(chain, {name: name for name in groups} | {agg.schema_name(): agg.schema_name()})
    if out is None:
        return None
    by_source = {source: name for name, source in out.items()}
    newest = by_source.get(agg.schema_name())
    if newest is None or any(g not in by_source for g in groups):
        return None
    return {groups[g]: by_source[g] for g in groups}, newest


def _descend(node: Any) -> tuple[list[Any], Any]:
    """The aliases and projections from ``node`` down (outermost first), and the node
    below them."""
    chain = []
    while type(node.to_variant()).__name__ in _PASSING:
        chain.append(node.to_variant())
        (node,) = node.inputs()
    return chain, node


def _through(chain: list[Any], names: dict[str, str]) -> dict[str, str] | None:
    """``names`` (output name -> source) as the projections of ``chain`` pass them up, when
    each only renames; None otherwise."""
    for variant in reversed(chain):
        if type(variant).__name__ != "Projection":
            continue
        renamed: dict[str, str] = {}
        for expr in variant.projections():
            out, inner = _renamed(expr)
            if inner is None or inner not in names:
                return None
            renamed[out] = names[inner]
        names = renamed
    return names


def _renamed(expr: Any) -> tuple[str, str | None]:
    """A projection's output name and the input column it is, if it is one (renamed or
    not)."""
    variant = expr.to_variant()
    if type(variant).__name__ == "Alias":
        return variant.alias(), _name(variant.expr())
    name = _name(expr)
    return (expr.schema_name() if name is None else name), name


def _name(expr: Any) -> str | None:
    variant = expr.to_variant()
    return variant.name() if type(variant).__name__ == "Column" else None
