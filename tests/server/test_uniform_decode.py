"""The column-wise decoder of uniform HoraeDB writes gives exactly what the value-by-value
decoder gives, and hands every other request to it."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gnomon.errors import InvalidArgument
from gnomon.proto import storage_pb2 as pb
from node.ingest import horaedb
from node.ingest.uniform import decode_uniform

pytestmark = pytest.mark.unit

TAGS = ["host", "region"]
FIELDS = ["a", "b", "c"]


def _value(kind: str, v: Any) -> pb.Value:
    return pb.Value(**{kind: v})


def _request(
    entries: list[tuple[list[str], list[tuple[int, list[tuple[int, Any, str]]]]]],
) -> pb.WriteTableRequest:
    req = pb.WriteTableRequest(table="t", tag_names=TAGS, field_names=FIELDS)
    for tags, groups in entries:
        req.entries.append(
            pb.WriteSeriesEntry(
                tags=[
                    pb.Tag(name_index=i, value=_value("string_value", t))
                    for i, t in enumerate(tags)
                ],
                field_groups=[
                    pb.FieldGroup(
                        timestamp=ts,
                        fields=[pb.Field(name_index=i, value=_value(k, v)) for i, v, k in fields],
                    )
                    for ts, fields in groups
                ],
            )
        )
    return req


def _decode(req: pb.WriteTableRequest, *, fast: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(horaedb, "decode_uniform", lambda _: None)
        try:
            return horaedb.decode_table_request(req).arrow("timestamp")
        except InvalidArgument as e:
            return ("error", e.message)


def _uniform(n_entries: int, n_groups: int, t0: int = 1_700_000_000_000) -> pb.WriteTableRequest:
    return _request(
        [
            (
                [f"h{e}", "eu"],
                [
                    (
                        t0 + 10_000 * g,
                        [(i, float(e * 100 + g) + i / 7, "float64_value") for i in range(3)],
                    )
                    for g in range(n_groups)
                ],
            )
            for e in range(n_entries)
        ]
    )


def test_uniform_request_is_decoded_column_wise_and_equal(monkeypatch: pytest.MonkeyPatch) -> None:
    req = _uniform(5, 40)
    assert decode_uniform(req) is not None
    fast = _decode(req, fast=True, monkeypatch=monkeypatch)
    assert isinstance(fast, pa.Table) and fast.num_rows == 200
    assert fast.equals(_decode(req, fast=False, monkeypatch=monkeypatch))


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.entries[1].field_groups[3].fields[1].value.CopyFrom(_value("int64_value", 3)),
        lambda r: r.entries[0].field_groups[2].fields.pop(),
        lambda r: setattr(r.entries[2].field_groups[0], "timestamp", 0),
        lambda r: setattr(r.entries[2].field_groups[0], "timestamp", 5),  # shorter varint
        lambda r: setattr(r.entries[0].field_groups[0].fields[2], "name_index", 7),
        lambda r: setattr(r.entries[0].field_groups[0].fields[2], "name_index", 0),
    ],
)
def test_any_irregular_request_takes_the_general_path(
    change: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    req = _uniform(3, 6)
    change(req)
    assert decode_uniform(req) is None
    fast = _decode(req, fast=True, monkeypatch=monkeypatch)
    slow = _decode(req, fast=False, monkeypatch=monkeypatch)
    assert fast == slow if isinstance(slow, tuple) else fast.equals(slow)


_field = st.tuples(
    st.integers(0, 4),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from(["float64_value", "float64_value", "float64_value", "int64_value"]),
).map(lambda f: (f[0], int(f[1]) if f[2] == "int64_value" and abs(f[1]) < 2**62 else f[1],
                 f[2] if abs(f[1]) < 2**62 else "float64_value"))  # fmt: skip
_group = st.tuples(st.integers(-(2**40), 2**45), st.lists(_field, max_size=4))
_entry = st.tuples(
    st.lists(st.sampled_from(["x", "y"]), min_size=0, max_size=2), st.lists(_group, max_size=4)
)


@settings(max_examples=150, deadline=None)
# A field used before any tag: columns come in order of first use either way.
@example([([], [(1, [(0, 0.0, "float64_value")])]), (["x"], [(1, [(0, 0.0, "float64_value")])])])
@given(st.lists(_entry, max_size=4))
def test_both_decoders_agree_on_any_request(entries: Any) -> None:
    req = _request(entries)
    with pytest.MonkeyPatch.context() as m:
        fast = _decode(req, fast=True, monkeypatch=m)
        slow = _decode(req, fast=False, monkeypatch=m)
    if isinstance(slow, tuple) or isinstance(fast, tuple):
        assert fast == slow
    else:
        assert fast.equals(slow)
