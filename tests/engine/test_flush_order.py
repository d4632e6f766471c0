"""The order a flush or a staged batch writes rows in: rows already in (timestamp, seq) order
are ordered by a radix sort of (window, series) codes, and that order must be the one the sort
comparing every key gives, whatever the primary key, update mode or deletions: the rows of
each window must be what pyarrow's sort of every key column, then resolving the sorted rows,
gives (windows found by searching the timestamps, empty ones and negative times included)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from node.engine import flush
from node.engine.options import TableOptions, UpdateMode
from node.engine.rows import resolve_versions
from node.engine.schema import KIND, SEQ, Column, ColumnType, Schema
from node.engine.tsid import tsid_of

pytestmark = pytest.mark.unit


def _schema(primary_key: list[str] | None) -> Schema:
    return Schema.build(
        [
            Column("host", ColumnType.STRING, is_tag=True),
            Column("v", ColumnType.DOUBLE),
            Column("ts", ColumnType.TIMESTAMP, nullable=False),
        ],
        timestamp_key="ts",
        primary_key=primary_key,
    )


def _rows(
    schema: Schema,
    n: int,
    hosts: int,
    *,
    in_time_order: bool,
    seed: int,
    span_ms: int = 10_000,
    first_ms: int = 0,
    one_seq: bool = False,
) -> pa.Table:
    rng = np.random.default_rng(seed)
    ts = rng.integers(first_ms, first_ms + span_ms, n)
    seq = np.full(n, 7, np.uint64) if one_seq else rng.integers(0, 50, n).astype(np.uint64)
    if in_time_order:
        order = np.lexsort((seq, ts))
        ts, seq = ts[order], seq[order]
    host = pa.array([f"h{i}" for i in rng.integers(0, hosts, n)])
    columns: dict[str, Any] = {
        "host": host,
        "v": rng.random(n),
        "ts": pa.array(ts, pa.timestamp("ms")),
        SEQ: pa.array(seq),
        KIND: pa.array(rng.integers(0, 2, n).astype(np.uint8)),
    }
    if schema.has_tsid:
        columns["tsid"] = tsid_of({"host": host}, ["host"], n)
    return pa.table(columns).select(schema.storage_arrow().names).cast(schema.storage_arrow())


@pytest.mark.parametrize("primary_key", [None, ["host", "ts"], ["ts", "host"]])
@pytest.mark.parametrize("mode", list(UpdateMode))
@pytest.mark.parametrize("in_time_order", [True, False])
@pytest.mark.parametrize(("n", "hosts"), [(2, 1), (500, 7), (5000, 300)])
def test_rows_in_time_order_are_ordered_as_the_full_sort_orders_them(
    monkeypatch: pytest.MonkeyPatch,
    primary_key: list[str] | None,
    mode: UpdateMode,
    in_time_order: bool,
    n: int,
    hosts: int,
) -> None:
    schema = _schema(primary_key)
    rows = _rows(schema, n, hosts, in_time_order=in_time_order, seed=n + hosts)
    options = TableOptions(segment_duration_ms=1000, update_mode=mode)
    ts = rows.column("ts").cast(pa.int64()).to_numpy()
    radix = flush._series_order(rows, schema, ts, 1000)
    # Used exactly where the rows come in time order under a key ending with the timestamp.
    assert (radix is not None) == (in_time_order and primary_key != ["ts", "host"])
    got = flush.split_sorted_by_window(rows, schema, options)
    assert got == _sorted_then_resolved(rows, schema, options)
    monkeypatch.setattr(flush, "_series_order", lambda *_: None)
    assert flush.split_sorted_by_window(rows, schema, options) == got


def _sorted_then_resolved(
    rows: pa.Table, schema: Schema, options: TableOptions
) -> list[tuple[int, pa.Table]]:
    """The reference: every column sorted by (window, key, seq) with pyarrow's sort, each
    window's sorted rows resolved whole."""
    seg = options.segment_duration_ms
    windows = np.floor_divide(rows.column("ts").cast(pa.int64()).to_numpy(), seg)
    keyed = rows.append_column("__w", pa.array(windows))
    names = ["__w", *schema.primary_key, SEQ]
    ordered = keyed.take(pc.sort_indices(keyed, sort_keys=[(k, "ascending") for k in names]))
    out = []
    for w in np.unique(windows):
        part = ordered.filter(pc.equal(ordered.column("__w"), w)).drop_columns(["__w"])
        part = resolve_versions(
            part,
            schema.primary_key,
            dedup=options.update_mode is UpdateMode.OVERWRITE,
            keep_markers=True,
        )
        if part.num_rows:
            out.append((int(w) * seg, part))
    return out


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(1, 400),
    hosts=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
    in_time_order=st.booleans(),
    primary_key=st.sampled_from([None, ["host", "ts"], ["ts", "host"]]),
    mode=st.sampled_from(list(UpdateMode)),
    span_ms=st.integers(1, 50_000),
    first_ms=st.integers(-20_000, 20_000),
    one_seq=st.booleans(),
)
def test_windows_equal_the_rows_sorted_by_every_key_column(
    n: int,
    hosts: int,
    seed: int,
    in_time_order: bool,
    primary_key: list[str] | None,
    mode: UpdateMode,
    span_ms: int,
    first_ms: int,
    one_seq: bool,
) -> None:
    schema = _schema(primary_key)
    rows = _rows(
        schema,
        n,
        hosts,
        in_time_order=in_time_order,
        seed=seed,
        span_ms=span_ms,
        first_ms=first_ms,
        one_seq=one_seq,
    )
    options = TableOptions(segment_duration_ms=1000, update_mode=mode)
    got = flush.split_sorted_by_window(rows, schema, options)
    assert got == _sorted_then_resolved(rows, schema, options)


def test_too_many_series_for_16_bit_codes_take_the_full_sort() -> None:
    schema = _schema(None)
    rows = _rows(schema, 20_000, 10_000, in_time_order=True, seed=1)
    ts = rows.column("ts").cast(pa.int64()).to_numpy()
    # 10 windows of up to 10,000 series: more pairs than 16 bits hold.
    assert flush._series_order(rows, schema, ts, 1000) is None
