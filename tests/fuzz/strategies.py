"""Hypothesis strategies for hostile input: text that looks enough like SQL, line protocol,
HTTP headers, gRPC write payloads and Flight tickets to get past the first check, mixed with
what does not (control characters, huge numbers, unbalanced quotes, deep nesting)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from gnomon.proto import storage_pb2

#: Tables the fuzzing user may read (the seeded one) and change (its playground), and some it
#: may not touch.
SEED, PLAYGROUND = "fuzz_seed", "fuzz_play"
TABLES = (SEED, PLAYGROUND, "fuzz_other", "system.public.tables", "information_schema.tables")

_WEIRD = st.sampled_from(
    [
        "\x00",
        "\u202e",
        "\ud7ff",
        "💥",
        "\\",
        "'",
        '"',
        "`",
        ";",
        "--",
        "/*",
        "*/",
        "\n",
        "\t",
        "\r\n",
        " ",
        ",",
        "=",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "$1",
        "?",
        "%s",
        "\\u0000",
    ]
)
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["1e309", "-0", "0x7fffffffffffffff", "9" * 60, "NaN", "inf", "1.", ".e1"]),
)
_IDENTIFIERS = st.one_of(
    st.sampled_from(TABLES),
    st.sampled_from(["host", "v", "ts", "tsid", "*", "time", "nonexistent"]),
    st.text(min_size=1, max_size=12),
)
_SQL_WORDS = st.sampled_from(
    [
        "SELECT",
        "FROM",
        "WHERE",
        "GROUP",
        "BY",
        "ORDER",
        "LIMIT",
        "OFFSET",
        "HAVING",
        "JOIN",
        "ON",
        "AND",
        "OR",
        "NOT",
        "IN",
        "BETWEEN",
        "LIKE",
        "IS",
        "NULL",
        "CASE",
        "WHEN",
        "THEN",
        "ELSE",
        "END",
        "AS",
        "DISTINCT",
        "UNION",
        "ALL",
        "EXPLAIN",
        "ANALYZE",
        "SHOW",
        "TABLES",
        "DESCRIBE",
        "CREATE",
        "TABLE",
        "DROP",
        "ALTER",
        "ADD",
        "COLUMN",
        "INSERT",
        "INTO",
        "VALUES",
        "DELETE",
        "TIMESTAMP",
        "KEY",
        "TAG",
        "ENGINE",
        "WITH",
        "count",
        "sum",
        "avg",
        "min",
        "max",
        "date_bin",
        "date_trunc",
        "now()",
        "interval",
        "cast",
        "string",
        "double",
        "bigint",
        "timestamp",
        "uint64",
        "boolean",
        "EXISTS",
        "IF",
        "PRIMARY",
        "DICTIONARY",
    ]
)
_TOKEN = st.one_of(
    _SQL_WORDS,
    _IDENTIFIERS,
    _NUMBERS,
    _WEIRD,
    st.text(max_size=8).map(lambda t: "'" + t + "'"),
)


@st.composite
def _select(draw: st.DrawFn) -> str:
    """A query over the seeded table with fuzzed expressions: reaches the planner."""
    expr = " ".join(draw(st.lists(_TOKEN, min_size=1, max_size=6)))
    where = " ".join(draw(st.lists(_TOKEN, max_size=6)))
    tail = draw(st.sampled_from(["", " LIMIT 5", " ORDER BY ts", " GROUP BY host"]))
    return f"SELECT {expr} FROM {SEED}" + (f" WHERE {where}" if where else "") + tail


def _nested(depth: int) -> str:
    return "SELECT " + "(" * depth + "1" + ")" * depth


#: Statements: token soup, fuzzed queries over real tables, deep nesting, long text.
sql_statements = st.one_of(
    st.lists(_TOKEN, max_size=25).map(" ".join),
    _select(),
    st.integers(min_value=50, max_value=5000).map(_nested),
    st.text(max_size=200),
    st.sampled_from(["SELECT 'a' || ", "SELECT * FROM " * 200, ";" * 500, "SHOW TABLES;;;;"]),
)

#: Bodies of POST /sql: JSON of the right shape and of wrong ones, and bytes that are no JSON.
sql_bodies = st.one_of(
    sql_statements.map(lambda q: json.dumps({"query": q}).encode()),
    st.builds(
        lambda q, extra: json.dumps({"query": q, **extra}).encode(),
        sql_statements,
        st.dictionaries(
            st.sampled_from(["timeout_s", "read", "format", "query", "x"]),
            st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=5), st.booleans()),
            max_size=3,
        ),
    ),
    st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=10,
    ).map(lambda doc: json.dumps(doc).encode()),
    st.binary(max_size=300),
    st.just(b"[" * 100_000),
)

_LP_NAME = st.one_of(st.sampled_from([PLAYGROUND, SEED, "fuzz_new"]), st.text(max_size=10))
_LP_VALUE = st.one_of(
    _NUMBERS,
    _NUMBERS.map(lambda n: n + "i"),
    _NUMBERS.map(lambda n: n + "u"),
    st.sampled_from(["t", "f", "true", "FALSE", '""', '"\\"', '"a\\nb"']),
    st.text(max_size=8).map(lambda t: '"' + t + '"'),
    st.text(max_size=6),
)


@st.composite
def _line(draw: st.DrawFn) -> str:
    tags = draw(st.lists(st.tuples(st.text(max_size=6), st.text(max_size=6)), max_size=3))
    fields = draw(st.lists(st.tuples(st.text(max_size=6), _LP_VALUE), max_size=3))
    time = draw(st.one_of(st.just(""), _NUMBERS))
    head = draw(_LP_NAME) + "".join(f",{k}={v}" for k, v in tags)
    return f"{head} {','.join(f'{k}={v}' for k, v in fields)} {time}".rstrip()


#: Line protocol bodies: plausible lines with hostile parts, and raw text.
line_protocol = st.one_of(
    st.lists(_line(), min_size=1, max_size=5).map("\n".join),
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
)

_HEADER_NAMES = st.sampled_from(
    [
        "Authorization",
        "Content-Type",
        "Content-Encoding",
        "Accept",
        "Accept-Encoding",
        "gnomon-read",
        "X-Forwarded-For",
        "Transfer-Encoding",
        "Expect",
        "Cookie",
    ]
)
_HEADER_VALUES = st.one_of(
    st.sampled_from(
        [
            "Basic",
            "Basic !!!",
            "Basic " + "QQ==" * 50,
            "Bearer gnm_",
            "Bearer gnm_0123456789abcdef.x",
            "Cluster",
            "Cluster x",
            "gzip",
            "zstd",
            "deflate",
            "application/json",
            "text/plain",
            "application/x-protobuf",
            "chunked",
            "100-continue",
            "*/*",
            "follower",
        ]
    ),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=120),
)
#: Request headers (names the server reads, with hostile values); header values are
#: printable ASCII, as http.client sends no other.
headers = st.dictionaries(_HEADER_NAMES, _HEADER_VALUES, max_size=4)

_VALUES: list[st.SearchStrategy[Any]] = [
    st.floats(allow_nan=True, allow_infinity=True).map(
        lambda f: storage_pb2.Value(float64_value=f)
    ),
    st.text(max_size=20).map(lambda s: storage_pb2.Value(string_value=s)),
    st.integers(-(2**63), 2**63 - 1).map(lambda i: storage_pb2.Value(int64_value=i)),
    st.integers(-(2**31), 2**31 - 1).map(lambda i: storage_pb2.Value(int8_value=i)),
    st.booleans().map(lambda b: storage_pb2.Value(bool_value=b)),
    st.binary(max_size=10).map(lambda b: storage_pb2.Value(varbinary_value=b)),
    st.integers(0, 2**64 - 1).map(lambda i: storage_pb2.Value(uint64_value=i)),
    st.just(storage_pb2.Value()),
]
_VALUE = st.one_of(*_VALUES)
_INDEX = st.integers(0, 6)


@st.composite
def write_requests(draw: st.DrawFn) -> storage_pb2.WriteRequest:
    """gRPC writes with names, indexes, values and timestamps out of range or inconsistent."""
    req = storage_pb2.WriteRequest()
    req.context.database = draw(st.sampled_from(["public", "", "other", "\x00"]))
    for _ in range(draw(st.integers(0, 3))):
        table = req.table_requests.add()
        table.table = draw(_LP_NAME)
        table.tag_names.extend(draw(st.lists(st.text(max_size=6), max_size=3)))
        table.field_names.extend(draw(st.lists(st.text(max_size=6), max_size=3)))
        for _ in range(draw(st.integers(0, 3))):
            entry = table.entries.add()
            for _ in range(draw(st.integers(0, 3))):
                entry.tags.add(name_index=draw(_INDEX), value=draw(_VALUE))
            for _ in range(draw(st.integers(0, 3))):
                group = entry.field_groups.add(timestamp=draw(st.integers(-(2**63), 2**63 - 1)))
                for _ in range(draw(st.integers(0, 3))):
                    group.fields.add(name_index=draw(_INDEX), value=draw(_VALUE))
    return req


@st.composite
def sql_requests(draw: st.DrawFn) -> storage_pb2.SqlQueryRequest:
    req = storage_pb2.SqlQueryRequest(
        sql=draw(sql_statements), tables=draw(st.lists(_IDENTIFIERS, max_size=3))
    )
    req.context.database = draw(st.sampled_from(["public", "", "other"]))
    return req


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
_FILTER = st.tuples(
    st.sampled_from(["host", "v", "ts", "tsid", "nope", ""]),
    st.sampled_from(["=", "!=", "<", "in", "is_null", "like", ""]),
    st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3)),
).map(list)
_TICKET_DOCS = st.fixed_dictionaries(
    {"table": st.one_of(st.sampled_from(TABLES), st.text(max_size=8))},
    optional={
        "columns": st.one_of(st.none(), st.lists(_IDENTIFIERS, max_size=4), st.text(max_size=4)),
        "filters": st.lists(_FILTER, max_size=3),
        "time_range": st.lists(st.one_of(st.none(), st.integers()), max_size=3),
        "predicate": st.text(max_size=40),
        "version": st.one_of(st.integers(), st.text(max_size=4)),
        "timestamp_ms": st.integers(),
        "limit": st.integers(),
        "extra": _SCALARS,
    },
)

#: ``do_get`` tickets: scan and query forms with fuzzed fields, other JSON, raw bytes.
tickets = st.one_of(
    _TICKET_DOCS.map(lambda d: json.dumps(d).encode()),
    sql_statements.map(lambda q: json.dumps({"query": q}).encode()),
    st.binary(max_size=200),
    st.just(b"{" * 50_000),
)
