"""The names of a query's answer columns, per protocol.

gnomon names a column as DataFusion does (``sum(t.v)``), except an unnamed SELECT item
holding a literal, which it names by its text (``1``, ``time_bucket(t, 'PT1H')``;
:func:`node.sql.rewrite.unnamed_items`). HTTP ``/sql``, Arrow Flight and the other gnomon
interfaces answer with those names.

HoraeDB's gRPC SqlQuery answers with the names HoraeDB's DataFusion gave: the expression's
own name (``Int64(1)``, ``t.v % Int64(3)``, ``time_bucket(t.ts,Utf8("PT1H"))``), built-in
aggregate functions in upper case (``SUM(t.v)``, ``COUNT(DISTINCT t.a)``), and the group
columns of a query grouping under one DISTINCT aggregate qualified (``t.host``). The HoraeDB SDKs
read columns by those names, so gRPC answers with them (:func:`horaedb`): a program written
for HoraeDB reads its columns unchanged. Each renamed column keeps gnomon's name in its
field metadata, so a node that receives such an answer for another interface (a forwarded
statement) names it gnomon's way again (:func:`restored`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

import pyarrow as pa

#: Field metadata holding gnomon's name of a column the HoraeDB naming renamed.
GNOMON_NAME = b"gnomon.name"

#: DataFusion's built-in aggregate functions, which the DataFusion of HoraeDB's SQL layer
#: named in upper case (``SUM``, ``COUNT``); DataFusion 55 names them in lower case, and
#: user-defined aggregates (``thetasketch_distinct``) in lower case in both.
_AGGREGATES = (
    "count", "sum", "min", "max", "avg", "median", "approx_distinct", "approx_median",
    "approx_percentile_cont", "approx_percentile_cont_with_weight", "array_agg",
    "first_value", "last_value", "stddev", "stddev_pop", "var", "var_pop", "covar",
    "covar_pop", "corr", "bit_and", "bit_or", "bit_xor", "bool_and", "bool_or", "grouping",
)  # fmt: skip
#: A call of one of :data:`_AGGREGATES`, of time_bucket under another name, or a quoted
#: text (skipped: a literal's value or a quoted name is never a call).
_CALL_OR_QUOTED = re.compile(
    r'"(?:[^"\\]|\\.)*"|\'(?:[^\']|\'\')*\'|(?<![\w.])(?:('
    + "|".join(_AGGREGATES)
    + r")|(time_bucket)_\d+)\(",
)


def expression_names(plan: Any, named: Collection[str], sql: str) -> dict[str, str]:
    """DataFusion's own name of each answer column gnomon named by its SELECT item's text
    (``named``), from the query's logical ``plan``: the aliases of the outermost SELECT
    list, found by following the first input down to the first projection. With them, for
    a query ``sql`` grouping under one DISTINCT aggregate, the qualified name of each
    group column it selects (see :func:`_single_distinct`)."""
    distinct = "distinct" in sql.lower()
    if not named and not distinct:
        return {}
    node = plan
    while node.to_variant().__class__.__name__ != "Projection":
        inputs = node.inputs()
        if not inputs:
            return {}
        node = inputs[0]
    qualify = distinct and _single_distinct(node)
    found: dict[str, str] = {}
    for expr in node.to_variant().projections():
        variant = expr.to_variant()
        kind = variant.__class__.__name__
        if kind == "Alias" and variant.alias() in named:
            found[variant.alias()] = variant.expr().schema_name()
        elif qualify and kind == "Column" and expr.schema_name() != variant.name():
            found[variant.name()] = expr.schema_name()
    return found


#: An aggregate over DISTINCT arguments, as DataFusion names it: ``count(DISTINCT t.a)``.
_DISTINCT_CALL = re.compile(r"^\w+\(DISTINCT (.*)\)$")


def _single_distinct(projection: Any) -> bool:
    """Whether ``projection`` selects from a grouping whose aggregates all take DISTINCT
    the same arguments. HoraeDB's DataFusion rewrote such a query into two groupings
    (``single_distinct_aggregation_to_group_by``) whose outer one named each group column
    by its qualified name (``issue302.t``), and the answer kept that name."""
    node = projection.inputs()[0]
    while node.to_variant().__class__.__name__ == "Filter":  # HAVING
        node = node.inputs()[0]
    variant = node.to_variant()
    if variant.__class__.__name__ != "Aggregate" or not variant.group_by_exprs():
        return False
    calls = [_DISTINCT_CALL.match(e.schema_name()) for e in variant.aggregate_exprs()]
    return bool(calls) and all(calls) and len({m.group(1) for m in calls if m}) == 1


def horaedb_name(name: str) -> str:
    """DataFusion 55's name of an expression as HoraeDB's DataFusion wrote it: built-in
    aggregate functions in upper case, and time_bucket under its own name where gnomon
    registered it by its count of arguments (:func:`node.sql.functions.bucket_name`)."""

    def upper(m: re.Match[str]) -> str:
        if m.group(1) is not None:
            return m.group(1).upper() + "("
        if m.group(2) is not None:
            return m.group(2) + "("
        return m.group(0)

    return _CALL_OR_QUOTED.sub(upper, name)


def horaedb(table: pa.Table, expressions: Mapping[str, str]) -> pa.Table:
    """``table`` with HoraeDB's column names; ``expressions`` holds DataFusion's name of
    each column gnomon named by its text (:attr:`QueryResult.expressions`)."""
    fields = []
    for f in table.schema:
        name = horaedb_name(expressions.get(f.name, f.name))
        if name != f.name:
            meta = {**_metadata(f.metadata), GNOMON_NAME: f.name}
            f = f.with_name(name).with_metadata(meta)
        fields.append(f)
    return _with_fields(table, fields)


def restored(table: pa.Table) -> pa.Table:
    """``table``, an answer :func:`horaedb` named, with gnomon's names again."""
    fields = []
    for f in table.schema:
        meta = _metadata(f.metadata)
        original = meta.pop(GNOMON_NAME, None)
        if original is not None:
            name = original.decode() if isinstance(original, bytes) else original
            f = f.with_name(name).remove_metadata()
            if meta:
                f = f.with_metadata(meta)
        fields.append(f)
    return _with_fields(table, fields)


def _with_fields(table: pa.Table, fields: list[pa.Field[Any]]) -> pa.Table:
    if all(f.equals(g, check_metadata=True) for f, g in zip(fields, table.schema, strict=True)):
        return table
    schema = pa.schema(fields, _metadata(table.schema.metadata) or None)
    return pa.Table.from_arrays(table.columns, schema=schema)


def _metadata(meta: Mapping[bytes, bytes] | None) -> dict[bytes | str, bytes | str]:
    return {k: v for k, v in (meta or {}).items()}
