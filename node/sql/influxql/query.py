"""InfluxQL statements run through gnomon's SQL: a ``SELECT`` translated into one SQL query over
the measurement's table, its rows cut into InfluxDB's series and filled as ``fill(...)`` asks;
``SHOW`` statements answered from the catalog."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.sql.influxql.syntax import AGGREGATES, Call, Select, Show, Token, duration_ns, unquote
from node.sql.result import QueryResult


class SqlRunner(Protocol):
    """Runs one SQL statement (the node's SQL executor)."""

    def __call__(self, sql: str, /) -> QueryResult: ...


#: The most time buckets one series may be filled to (InfluxDB's max-select-buckets idea).
MAX_BUCKETS = 1_000_000


def _q(name: str) -> str:
    """A name quoted for gnomon's SQL."""
    return "`" + name.replace("`", "``") + "`"


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass
class Schema:
    """What InfluxQL needs of a measurement's table."""

    time: str
    tags: list[str]
    fields: list[str]


def describe(run: SqlRunner, measurement: str) -> Schema:
    rows = run(f"DESCRIBE {_q(measurement)}").table().to_pylist()
    times = [r["name"] for r in rows if r["type"] == "timestamp" and r["is_primary"]]
    tags = [r["name"] for r in rows if r["is_tag"]]
    fields = [r["name"] for r in rows if not r["is_tag"] and r["name"] not in (*times, "tsid")]
    return Schema(times[0] if times else "time", tags, fields)


@dataclass
class TimeRange:
    """The time bounds a WHERE clause puts on every row, in nanoseconds [lo, hi)."""

    lo: int | None = None
    hi: int | None = None


def _time_value(tokens: list[Token], now_ns: int) -> tuple[int, int]:
    """A time expression at the head of ``tokens`` in nanoseconds, and how many tokens it
    took: ``now()`` [+- duration], a duration (``1439828400000ms``), an integer (ns) or an
    RFC3339 string."""
    if tokens and tokens[0].word == "NOW":
        if len(tokens) < 3 or tokens[1].text != "(" or tokens[2].text != ")":
            raise InvalidArgument("InfluxQL: now takes no arguments: now()")
        value, used = now_ns, 3
        while (
            len(tokens) > used + 1 and tokens[used].text in "+-" and tokens[used + 1].kind == "dur"
        ):
            sign = 1 if tokens[used].text == "+" else -1
            value += sign * duration_ns(tokens[used + 1].text)
            used += 2
        return value, used
    if not tokens:
        raise InvalidArgument("InfluxQL: a time comparison needs a value")
    tok = tokens[0]
    if tok.kind == "dur":
        return duration_ns(tok.text), 1
    if tok.kind == "num" and tok.text.isdigit():
        return int(tok.text), 1
    if tok.kind == "str":
        text = unquote(tok)
        try:
            at = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgument(f"InfluxQL: {text!r} is not an RFC3339 time") from None
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        return int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000, 1
    raise InvalidArgument(f"InfluxQL: {tok.text!r} is not a time")


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "!=": "!=", "<>": "<>"}


def translate_where(tokens: list[Token], schema: Schema, now_ns: int) -> tuple[str, TimeRange]:
    """The WHERE clause as SQL, and the time range it keeps (from comparisons of ``time``
    joined by AND alone: under an OR no bound is certain)."""
    out: list[str] = []
    bounds = TimeRange()
    under_or = _under_or(tokens)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.text in ("=~", "!~"):
            raise InvalidArgument("InfluxQL: regular expressions are not supported")
        is_time = tok.kind in ("id", "qid") and unquote(tok).lower() == "time" and tok.word != "NOW"
        if is_time and i + 1 < len(tokens) and tokens[i + 1].text in _FLIP:
            op = tokens[i + 1].text
            value, used = _time_value(tokens[i + 2 :], now_ns)
            ms = value // 1_000_000
            out.append(f"{_q(schema.time)} {op} to_timestamp_millis({ms})")
            if not under_or[i]:
                _narrow(bounds, op, value)
            i += 2 + used
            continue
        if tok.kind in ("id", "qid") and tok.word not in ("AND", "OR", "NOT", "TRUE", "FALSE"):
            out.append(_q(unquote(tok)))
        elif tok.kind == "str":
            out.append(_sql_string(unquote(tok)))
        elif tok.kind == "dur":
            raise InvalidArgument(f"InfluxQL: a duration ({tok.text}) compares with time only")
        else:
            out.append(tok.text)
        i += 1
    return " ".join(out), bounds


def _under_or(tokens: list[Token]) -> list[bool]:
    """For each token, whether a parenthesised group holding it (or the whole clause) joins
    its terms with OR: ``(host = 'a' OR host = 'b') AND time > 1s`` bounds time."""
    stack = [0]  # the ids of the groups enclosing the current token, the clause first
    ors: set[int] = set()
    enclosing: list[tuple[int, ...]] = []
    for tok in tokens:
        if tok.text == "(":
            stack.append(len(enclosing) + 1)
        enclosing.append(tuple(stack))
        if tok.word == "OR":
            ors.add(stack[-1])
        if tok.text == ")" and len(stack) > 1:
            stack.pop()
    return [any(g in ors for g in groups) for groups in enclosing]


def _narrow(bounds: TimeRange, op: str, ns: int) -> None:
    if op in (">", ">="):
        lo = ns + 1 if op == ">" else ns
        bounds.lo = lo if bounds.lo is None else max(bounds.lo, lo)
    elif op in ("<", "<="):
        hi = ns + 1 if op == "<=" else ns
        bounds.hi = hi if bounds.hi is None else min(bounds.hi, hi)
    elif op == "=":
        _narrow(bounds, ">=", ns)
        _narrow(bounds, "<=", ns)


@dataclass
class Column:
    """One output column of a SELECT: its name and the SQL computing it."""

    name: str
    sql: str


def _columns(stmt: Select, schema: Schema) -> tuple[list[Column], bool]:
    """The value columns a SELECT answers (after ``time``), and whether it aggregates."""
    calls = [i for i in stmt.items if isinstance(i.target, Call)]
    if calls and len(calls) != len(stmt.items):
        raise InvalidArgument(
            "InfluxQL: mixing aggregate functions and raw fields or tags is not supported"
        )
    known = {*schema.tags, *schema.fields}
    cols: list[Column] = []
    t = _q(schema.time)
    for item in stmt.items:
        target = item.target
        if isinstance(target, Call):
            make = AGGREGATES[target.func]
            if target.arg == "*":
                cols.extend(
                    Column(f"{target.func}_{f}", make(_q(f), t)) for f in sorted(schema.fields)
                )
                continue
            if target.arg not in schema.fields:
                raise InvalidArgument(
                    f"InfluxQL: {target.func}() takes a field of {stmt.measurement!r}; "
                    f"{target.arg!r} is not one"
                )
            cols.append(Column(item.alias or target.func, make(_q(target.arg), t)))
        elif target == "*":
            cols.extend(Column(n, _q(n)) for n in sorted(known))
        elif target == "time":
            continue  # every answer starts with time
        else:
            if target not in known:
                raise InvalidArgument(
                    f"InfluxQL: {target!r} is neither a field nor a tag of {stmt.measurement!r}"
                )
            cols.append(Column(item.alias or target, _q(target)))
    return _dedupe(cols), bool(calls)


def _dedupe(cols: list[Column]) -> list[Column]:
    """InfluxDB names a repeated column ``max``, ``max_1``, ``max_2``..."""
    seen: dict[str, int] = {}
    out = []
    for c in cols:
        n = seen.get(c.name, 0)
        seen[c.name] = n + 1
        out.append(Column(c.name if n == 0 else f"{c.name}_{n}", c.sql))
    return out


@dataclass
class Series:
    name: str
    tags: dict[str, str]
    columns: list[str]
    values: list[list[Any]]

    def json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name}
        if self.tags:
            doc["tags"] = self.tags
        doc["columns"] = self.columns
        doc["values"] = self.values
        return doc


def _epoch_ns(table: pa.Table, name: str) -> list[int]:
    ns = table.column(name).cast(pa.timestamp("ns")).cast(pa.int64()).to_pylist()
    return [0 if v is None else v for v in ns]


def run_select(stmt: Select, run: SqlRunner, now_ns: int) -> list[Series]:
    schema = describe(run, stmt.measurement)
    cols, aggregate = _columns(stmt, schema)
    if stmt.bucket_ns is not None and not aggregate:
        raise InvalidArgument("InfluxQL: GROUP BY time() needs an aggregate function")
    group = sorted(schema.tags) if stmt.group_all_tags else stmt.group_tags
    for tag in group:
        if tag not in schema.tags:
            raise InvalidArgument(f"InfluxQL: {tag!r} is not a tag of {stmt.measurement!r}")
    where, bounds = translate_where(stmt.where, schema, now_ns)
    t = _q(schema.time)
    select = [f"{c.sql} AS {_q(f'_v{i}')}" for i, c in enumerate(cols)]
    select += [f"{_q(g)} AS {_q(f'_g{i}')}" for i, g in enumerate(group)]
    keys = [_q(f"_g{i}") for i in range(len(group))]
    if aggregate and stmt.bucket_ns is not None:
        step_ms = max(stmt.bucket_ns // 1_000_000, 1)
        origin_ms = stmt.offset_ns // 1_000_000
        time_sql = (
            f"date_bin(INTERVAL '{step_ms} milliseconds', {t}, to_timestamp_millis({origin_ms}))"
        )
        select.append(f"{time_sql} AS `_time`")
        keys.append("`_time`")
    elif not aggregate:
        select.append(f"{t} AS `_time`")
    sql = f"SELECT {', '.join(select)} FROM {_q(stmt.measurement)}"
    if where:
        sql += f" WHERE {where}"
    if aggregate and keys:
        sql += f" GROUP BY {', '.join(keys)}"
    if not aggregate or stmt.bucket_ns is not None:
        sql += " ORDER BY `_time`"
    table = run(sql).table()
    values = [table.column(f"_v{i}").to_pylist() for i in range(len(cols))]
    tags = [table.column(f"_g{i}").to_pylist() for i in range(len(group))]
    if "_time" in table.column_names:
        times = _epoch_ns(table, "_time")
    else:
        times = [bounds.lo or 0] * table.num_rows
    by_series: dict[tuple[str, ...], list[list[Any]]] = {}
    for r in range(table.num_rows):
        key = tuple("" if tags[g][r] is None else str(tags[g][r]) for g in range(len(group)))
        by_series.setdefault(key, []).append([times[r], *(v[r] for v in values)])
    series = []
    for key in sorted(by_series):
        rows = by_series[key]
        if stmt.bucket_ns is not None:
            rows = _filled(rows, stmt, bounds)
        if stmt.descending:
            rows.reverse()
        rows = rows[stmt.offset :]
        if stmt.limit is not None:
            rows = rows[: stmt.limit]
        if rows:
            series.append(
                Series(
                    stmt.measurement,
                    dict(zip(group, key, strict=True)),
                    ["time", *(c.name for c in cols)],
                    rows,
                )
            )
    return series


def _filled(rows: list[list[Any]], stmt: Select, bounds: TimeRange) -> list[list[Any]]:
    """``rows`` (one per bucket that has rows, in time order) with the buckets between the
    time bounds that have none filled as ``fill()`` says. Without a bound, the first (or
    last) bucket with rows is where filling starts (or ends)."""
    if stmt.fill == "none":
        return rows
    assert stmt.bucket_ns is not None
    step, origin = stmt.bucket_ns, stmt.offset_ns

    def bucket(ns: int) -> int:
        return (ns - origin) // step * step + origin

    first = bucket(bounds.lo) if bounds.lo is not None else rows[0][0]
    last = bucket(bounds.hi - 1) if bounds.hi is not None else rows[-1][0]
    count = (last - first) // step + 1
    if count > MAX_BUCKETS:
        raise InvalidArgument(
            f"InfluxQL: GROUP BY time() would make {count} buckets (at most {MAX_BUCKETS}); "
            "narrow the time range or widen the interval"
        )
    have = {r[0]: r for r in rows}
    width = len(rows[0]) - 1
    out: list[list[Any]] = []
    for at in range(first, last + 1, step):
        row = have.get(at)
        if row is not None:
            out.append(row)
        elif stmt.fill == "previous" and out:
            out.append([at, *out[-1][1:]])
        elif isinstance(stmt.fill, float):
            number: Any = int(stmt.fill) if stmt.fill.is_integer() else stmt.fill
            out.append([at, *([number] * width)])
        else:
            out.append([at, *([None] * width)])
    if stmt.fill == "linear":
        _interpolate(out, have)
    return out


def _interpolate(rows: list[list[Any]], have: dict[int, list[Any]]) -> None:
    """Fill each gap between two buckets with values on the straight line between them."""
    known = [i for i, r in enumerate(rows) if r[0] in have]
    for a, b in itertools.pairwise(known):
        for col in range(1, len(rows[a])):
            lo, hi = rows[a][col], rows[b][col]
            if not isinstance(lo, int | float) or not isinstance(hi, int | float):
                continue
            for i in range(a + 1, b):
                rows[i][col] = lo + (hi - lo) * (i - a) / (b - a)


def _tables(run: SqlRunner) -> list[str]:
    return sorted(str(n) for n in run("SHOW TABLES").table().column(0).to_pylist())


def run_show(stmt: Show, run: SqlRunner) -> list[Series]:
    if stmt.what == "MEASUREMENTS":
        names = _tables(run)
        return [Series("measurements", {}, ["name"], [[n] for n in names])] if names else []
    measurements = [stmt.measurement] if stmt.measurement else _tables(run)
    out = []
    for m in measurements:
        schema = describe(run, m)
        if stmt.what == "TAG KEYS":
            rows = [[t] for t in sorted(schema.tags)]
            if rows:
                out.append(Series(m, {}, ["tagKey"], rows))
        else:
            types = {r["name"]: r["type"] for r in run(f"DESCRIBE {_q(m)}").table().to_pylist()}
            rows = [[f, _field_type(types[f])] for f in sorted(schema.fields)]
            if rows:
                out.append(Series(m, {}, ["fieldKey", "fieldType"], rows))
    return out


def _field_type(sql_type: str) -> str:
    if sql_type in ("double", "float"):
        return "float"
    if sql_type in ("boolean", "bool"):
        return "boolean"
    if "int" in sql_type:
        return "integer"
    return "string"
