"""Hypothesis strategies for hostile input: text that looks enough like SQL, line protocol,
HTTP headers, gRPC write payloads, Flight tickets, Arrow IPC streams and Prometheus remote
writes to get past the first check, mixed with what does not (control characters, huge
numbers, unbalanced quotes, deep nesting, cut or overwritten IPC messages, invalid series in
well-formed protobuf, protobuf or snappy cut short)."""

from __future__ import annotations

import gzip
import json
from typing import Any, Literal

import cramjam
import pyarrow as pa
from google.protobuf.message import DecodeError
from hypothesis import assume
from hypothesis import strategies as st

from gnomon.proto import prometheus_pb2, storage_pb2
from node.prom.labels import MAX_LABEL_VALUE_BYTES, METRIC_NAME_SYNTAX
from node.prom.wire import snappy
from tests.prom.conftest import STALE, write_request

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


def varint(n: int) -> bytes:
    """``n`` (not negative) as a protobuf varint."""
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


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


# -- Arrow IPC bodies of do_put ------------------------------------------------------------------

#: An IPC message as Flight carries it: the flatbuffer header and the body.
Message = tuple[bytes, bytes]

_TIMESTAMPS = st.integers(-(2**62), 2**62)
#: Column types, each with the values a column of it may hold: the table's own types, types it
#: casts from, and nested ones it does not take.
_COLUMN_TYPES: list[tuple[pa.DataType, st.SearchStrategy[Any]]] = [
    (pa.string(), st.text(max_size=5)),
    (pa.large_string(), st.text(max_size=5)),
    (pa.binary(), st.binary(max_size=5)),
    (pa.float64(), st.floats(allow_nan=True, allow_infinity=True)),
    (pa.float32(), st.floats(width=32)),
    (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    (pa.uint64(), st.integers(0, 2**64 - 1)),
    (pa.int8(), st.integers(-128, 127)),
    (pa.bool_(), st.booleans()),
    (pa.date32(), st.integers(-(2**31), 2**31 - 1)),
    (pa.timestamp("ms"), _TIMESTAMPS),
    (pa.timestamp("ns"), _TIMESTAMPS),
    (pa.timestamp("s", tz="UTC"), st.integers(-(2**40), 2**40)),
    (pa.list_(pa.string()), st.lists(st.text(max_size=3), max_size=2)),
    (pa.struct([("x", pa.int64())]), st.fixed_dictionaries({"x": st.integers(0, 9)})),
    (
        pa.map_(pa.string(), pa.int64()),
        st.lists(st.tuples(st.text(max_size=3), st.integers(0, 9)), max_size=2),
    ),
]


@st.composite
def _ipc_column(draw: st.DrawFn, rows: int) -> pa.Array[Any]:
    """A column of ``rows`` rows: plain, with nulls, dictionary-encoded, or a dictionary whose
    indexes point past it (Arrow builds such a one unchecked, as a hostile client would)."""
    kind = draw(st.sampled_from(["plain", "nulls", "dictionary", "bad dictionary"]))
    if kind == "nulls":
        return pa.nulls(rows, draw(st.sampled_from([t for t, _ in _COLUMN_TYPES])))
    if kind == "bad dictionary":
        indexes = draw(st.lists(st.integers(-3, 9), min_size=rows, max_size=rows))
        words = draw(st.lists(st.text(max_size=3), max_size=2))
        return pa.DictionaryArray.from_arrays(
            pa.array(indexes, pa.int32()), pa.array(words, pa.string()), safe=False
        )
    type_, values = draw(st.sampled_from(_COLUMN_TYPES))
    column = pa.array(draw(st.lists(values, min_size=rows, max_size=rows)), type_)
    dictionary = kind == "dictionary" and not pa.types.is_nested(type_)
    encoded: pa.Array[Any] = column.dictionary_encode() if dictionary else column
    return encoded


@st.composite
def _ipc_tables(draw: st.DrawFn) -> pa.Table:
    """Tables shaped mostly like the playground's (host, v, ts), with columns missing, extra,
    repeated, or of another type."""
    rows = draw(st.integers(0, 4))
    names = draw(
        st.lists(
            st.one_of(st.sampled_from(["host", "v", "ts", "tsid", "nope"]), st.text(max_size=4)),
            max_size=5,
        )
        | st.just(["host", "v", "ts"])
    )
    return pa.Table.from_arrays([draw(_ipc_column(rows)) for _ in names], names=names)


def ipc_messages(
    table: pa.Table, compression: Literal["lz4", "zstd"] | None, chunk_rows: int
) -> list[Message]:
    """``table`` as the IPC messages of a stream: the schema, dictionaries, record batches."""
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table, max_chunksize=chunk_rows)
    return [
        (m.metadata.to_pybytes(), b"" if m.body is None else m.body.to_pybytes())
        for m in pa.ipc.MessageReader.open_stream(sink.getvalue())
    ]


#: Values a length or offset field of a header may be set to: past any body, negative, huge.
_LENGTHS = st.sampled_from([2**31, 2**32 + 1, 2**40, 2**62, 2**63 - 1, -1, -(2**63)])


@st.composite
def _mutated(draw: st.DrawFn, messages: list[Message], foreign: list[Message]) -> list[Message]:
    """``messages`` with a few hostile changes: cut short, bytes overwritten, a 64-bit field
    (lengths, offsets, row counts) set huge or negative, messages dropped, repeated, swapped,
    replaced by garbage, or taken from another stream (a batch of another schema)."""
    out = list(messages)
    for _ in range(draw(st.integers(0, 3))):
        if not out:
            break
        i = draw(st.integers(0, len(out) - 1))
        header, body = out[i]
        change = draw(
            st.sampled_from(
                ["cut", "byte", "length", "drop", "repeat", "swap", "garbage", "foreign"]
            )
        )
        if change == "cut":
            part = draw(st.sampled_from(["header", "body"]))
            data = header if part == "header" else body
            cut = data[: draw(st.integers(0, max(0, len(data) - 1)))]
            out[i] = (cut, body) if part == "header" else (header, cut)
        elif change == "byte" and header:
            at = draw(st.integers(0, len(header) - 1))
            out[i] = (header[:at] + bytes([draw(st.integers(0, 255))]) + header[at + 1 :], body)
        elif change == "length" and len(header) >= 8:
            # Headers align their 64-bit fields to 8 bytes.
            at = 8 * draw(st.integers(0, len(header) // 8 - 1))
            value = draw(_LENGTHS).to_bytes(8, "little", signed=True)
            out[i] = (header[:at] + value + header[at + 8 :], body)
        elif change == "drop":
            del out[i]
        elif change == "repeat":
            out.insert(i, out[i])
        elif change == "swap":
            j = draw(st.integers(0, len(out) - 1))
            out[i], out[j] = out[j], out[i]
        elif change == "garbage":
            out[i] = (draw(st.binary(max_size=64)), draw(st.binary(max_size=64)))
        elif change == "foreign" and foreign:
            out.insert(i, draw(st.sampled_from(foreign)))
    return out


#: Put descriptors: mostly a plain put to the playground, so most streams reach the write.
_PUT_SPECS = st.one_of(
    st.just({"table": PLAYGROUND}),
    st.fixed_dictionaries({"table": st.sampled_from([SEED, "fuzz_other", ""])}),
    st.fixed_dictionaries(
        {"table": st.just(PLAYGROUND)},
        optional={
            "ingest": st.booleans(),
            "revision": st.integers(-1, 3),
            "forwarded_from": st.text(max_size=4),
            "x": _SCALARS,
        },
    ),
)


@st.composite
def ipc_puts(draw: st.DrawFn) -> tuple[bytes, list[Message]]:
    """A ``do_put``: its descriptor (a put spec, mostly for the playground the fuzzing user may
    write, or bytes) and its IPC stream, valid, of a hostile schema, or mutated."""
    plain = draw(st.integers(0, 3)) > 0
    descriptor = draw(
        st.just(json.dumps({"table": PLAYGROUND}).encode())
        if plain
        else st.one_of(_PUT_SPECS.map(lambda d: json.dumps(d).encode()), st.binary(max_size=20))
    )
    compression: Literal["lz4", "zstd"] | None = draw(st.sampled_from([None, "lz4", "zstd"]))
    chunk_rows = draw(st.integers(1, 3))
    messages = ipc_messages(draw(_ipc_tables()), compression, chunk_rows)
    foreign = ipc_messages(draw(_ipc_tables()), compression, chunk_rows)
    return descriptor, draw(_mutated(messages, foreign))


# -- Prometheus remote-write bodies ---------------------------------------------------------------

#: Metric names a body's series take: new tables, the seeded table and the metadata table (so
#: a body taken by mistake would show), and any the syntax allows.
_METRICS = st.one_of(
    st.sampled_from(["fuzz_rw", "fuzz_rw_other", SEED, "prometheus_metadata"]),
    st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,30}", fullmatch=True),
)
_LABEL_NAMES = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: n not in ("tsid", "timestamp", "value")
)
#: Label values: text of any kind, up to a few characters past Prometheus's usual sizes.
_LABEL_VALUES = st.text(max_size=20)
#: Sample values: every float, Prometheus's staleness marker (a NaN of its own bits) among them.
_SAMPLE_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([float("nan"), float("inf"), float("-inf"), STALE]),
)
_SAMPLES = st.lists(
    st.tuples(st.integers(-(2**63), 2**63 - 1), _SAMPLE_VALUES), min_size=0, max_size=4
)


@st.composite
def _good_labels(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Labels Prometheus would send: valid, unique and sorted by name."""
    labels = draw(st.dictionaries(_LABEL_NAMES, _LABEL_VALUES, max_size=4))
    labels["__name__"] = draw(_METRICS)
    return sorted(labels.items())


@st.composite
def _bad_labels(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Labels that make a series, and so its request, invalid."""
    labels = draw(_good_labels())
    fault = draw(
        st.sampled_from(
            [
                "unsorted",
                "repeated",
                "empty name",
                "no name",
                "bad metric name",
                "colon",
                "long metric name",
                "bad label name",
                "reserved label",
                "long value",
                "wide value",
                "too many labels",
            ]
        )
    )
    if fault == "unsorted":
        extra = draw(_LABEL_NAMES.filter(lambda n: n not in dict(labels)))
        return sorted([*labels, (extra, draw(_LABEL_VALUES))], reverse=True)
    if fault == "repeated":
        at = draw(st.integers(0, len(labels) - 1))
        return [*labels[: at + 1], (labels[at][0], draw(_LABEL_VALUES)), *labels[at + 1 :]]
    name = labels.pop(next(i for i, (k, _) in enumerate(labels) if k == "__name__"))[1]
    if fault == "no name":
        return labels
    if fault == "empty name":
        name = ""
    elif fault == "bad metric name":
        invalid = st.text(min_size=1, max_size=8).filter(
            lambda n: not METRIC_NAME_SYNTAX.fullmatch(n)
        )
        name = draw(invalid)
    elif fault == "colon":
        name = f"{name}:rate5m"  # Prometheus's, but no table's
    elif fault == "long metric name":
        name = "m" * draw(st.integers(256, 70_000))
    elif fault == "bad label name":
        labels.append((draw(st.sampled_from(["", "1a", "a-b", "é", "a b", "__x\x00"])), "v"))
    elif fault == "reserved label":
        labels.append((draw(st.sampled_from(["tsid", "timestamp", "value"])), "1"))
    elif fault == "long value":
        labels.append(("zz_long", "x" * draw(st.integers(MAX_LABEL_VALUE_BYTES + 1, 200_000))))
    elif fault == "wide value":
        # Under the limit in characters, over it in UTF-8 bytes.
        labels.append(("zz_wide", "é" * (MAX_LABEL_VALUE_BYTES // 2 + 1)))
    elif fault == "too many labels":
        labels.extend((f"l{i:03}", "v") for i in range(600))
    return sorted([*labels, ("__name__", name)])


#: Past this decompressed size a body is too large for any server (and for the checks here).
_MAX_DECOMPRESSED = 1 << 28


def _is_request(data: bytes) -> bool:
    """Whether ``data`` is a WriteRequest as protobuf reads it (whatever its series say)."""
    try:
        prometheus_pb2.WriteRequest().ParseFromString(data)
    except DecodeError:
        return False
    return True


def _decodes(body: bytes) -> bool:
    """Whether ``body`` is a snappy block of a WriteRequest."""
    try:
        if cramjam.snappy.decompress_raw_len(body) > _MAX_DECOMPRESSED:
            return False
        data = bytes(cramjam.snappy.decompress_raw(body))
    except cramjam.DecompressionError:
        return False
    return _is_request(data)


@st.composite
def _invalid_requests(draw: st.DrawFn) -> bytes:
    """A WriteRequest with valid series (NaN, infinite values, times anywhere in int64) and
    at least one invalid one among them, maybe with metric metadata."""
    good = draw(st.lists(st.tuples(_good_labels(), _SAMPLES), max_size=3))
    # With a sample each: a metric that is no table (too long, ':', too many labels) is
    # refused as its rows reach their table, and a series without samples has none.
    bad = draw(st.lists(st.tuples(_bad_labels(), _SAMPLES.filter(bool)), min_size=1, max_size=2))
    series = draw(st.permutations([*good, *bad]))
    metadata = prometheus_pb2.WriteRequest(
        metadata=[
            prometheus_pb2.MetricMetadata(
                metric_family_name=draw(_METRICS), type="COUNTER", help="h"
            )
            for _ in range(draw(st.integers(0, 2)))
        ]
    )
    return write_request(series) + metadata.SerializeToString()


#: A label value put in a request, then overwritten with as many bytes that are no UTF-8.
_MARKER = "UTF8MARK"


@st.composite
def _unparsable(draw: st.DrawFn) -> bytes:
    """Protobuf that is no WriteRequest: a request cut short, overwritten, or given a field
    that cannot be read (a length past the end, an endless varint, an open group, a string
    that is no UTF-8)."""
    data = draw(_invalid_requests())
    fault = draw(st.sampled_from(["cut", "byte", "length", "varint", "group", "utf8"]))
    if fault == "cut":
        data = data[: draw(st.integers(1, max(1, len(data) - 1)))]
    elif fault == "byte":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
    elif fault == "length":
        data += b"\x0a\xff\xff\xff\xff\x07" + draw(st.binary(max_size=8))
    elif fault == "varint":
        data += b"\x10" + b"\xff" * 10 + b"\x01"
    elif fault == "group":
        data += b"\x0b"
    else:
        marked = write_request([({"__name__": "fuzz_rw", "job": _MARKER}, [(1, 1.0)])])
        data += marked.replace(_MARKER.encode(), b"\xff" * len(_MARKER))
    assume(not _is_request(data))
    return data


@st.composite
def _bad_snappy(draw: st.DrawFn) -> bytes:
    """A request not in snappy's block format: cut, overwritten, with a length preamble that
    lies, in snappy's framed format, gzip, or not compressed at all."""
    data = draw(_invalid_requests())
    packed = snappy(data)
    fault = draw(st.sampled_from(["cut", "byte", "preamble", "framed", "gzip", "plain"]))
    if fault == "cut":
        body = packed[: draw(st.integers(0, len(packed) - 1))]
    elif fault == "byte":
        at = draw(st.integers(0, len(packed) - 1))
        body = packed[:at] + bytes([draw(st.integers(0, 255))]) + packed[at + 1 :]
    elif fault == "preamble":
        # The preamble is the decompressed length as a varint; put another one in front.
        claimed = draw(st.sampled_from([0, 1, len(data) - 1, len(data) + 1, 2**32 - 1]))
        body = varint(claimed) + packed[len(varint(len(data))) :]
    elif fault == "framed":
        body = bytes(cramjam.snappy.compress(data))
    elif fault == "gzip":
        body = gzip.compress(data)
    else:
        body = data
    assume(not _decodes(body))
    return body


#: Remote-write bodies no server may take: invalid series, bad protobuf, bad snappy, bytes.
remote_write_bodies = st.one_of(
    _invalid_requests().map(snappy),
    _unparsable().map(snappy),
    _bad_snappy(),
    st.binary(max_size=300).filter(lambda b: not _decodes(b)),
)
