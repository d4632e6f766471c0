"""The decoded column chunk cache (node/engine/sst/decoded.py): what it keeps, what it gives
back, what it drops, and that scans through it answer as the files say."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gnomon.errors import InvalidArgument
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.sst.decoded import DecodedChunks
from node.sql.executor import SqlExecutor
from tests.engine.conftest import flushed_hosts_table

pytestmark = pytest.mark.unit


@pytest.fixture
def sst(tmp_path: Path) -> str:
    path = str(tmp_path / "f.parquet")
    table = pa.table(
        {
            "host": [f"h{i % 3}" for i in range(40)],
            "v": [float(i) for i in range(40)],
            "n": list(range(40)),
        }
    )
    pq.write_table(table, path, row_group_size=10)
    return path


def _read(
    cache: DecodedChunks, path: str, rgs: list[int], cols: list[str], **kw: object
) -> list[pa.Table]:
    return list(cache.read("f", path, rgs, cols, **kw))  # type: ignore[arg-type]


def test_row_groups_come_back_in_the_order_asked_with_the_files_values(sst: str) -> None:
    cache = DecodedChunks(1 << 20)
    tables = _read(cache, sst, [3, 1], ["n", "v"])
    assert [t.column_names for t in tables] == [["n", "v"], ["n", "v"]]
    assert tables[0].column("n").to_pylist() == list(range(30, 40))
    assert tables[1].column("v").to_pylist() == [float(i) for i in range(10, 20)]
    assert (cache.hits, cache.misses) == (0, 4)


def test_a_second_read_decodes_only_what_it_lacks(sst: str) -> None:
    cache = DecodedChunks(1 << 20)
    _read(cache, sst, [0, 1], ["n"])
    (t0, t2) = _read(cache, sst, [0, 2], ["n", "v"])
    assert (cache.hits, cache.misses) == (1, 5)
    assert t0.column("n").to_pylist() == list(range(10))
    assert t2.column("v").to_pylist() == [float(i) for i in range(20, 30)]


def test_dictionary_and_plain_strings_are_kept_apart(sst: str) -> None:
    cache = DecodedChunks(1 << 20)
    (plain,) = _read(cache, sst, [0], ["host"])
    (encoded,) = _read(cache, sst, [0], ["host"], dictionary=("host",))
    assert plain.schema.field("host").type == pa.string()
    assert pa.types.is_dictionary(encoded.schema.field("host").type)
    assert encoded.column("host").cast(pa.string()).equals(plain.column("host"))
    assert cache.hits == 0


def test_least_recently_used_chunks_go_first_within_the_budget(sst: str) -> None:
    one = _read(DecodedChunks(1 << 20), sst, [0], ["n"])[0].column("n").nbytes
    cache = DecodedChunks(2 * one)
    _read(cache, sst, [0, 1], ["n"])
    _read(cache, sst, [0], ["n"])  # 0 is now the most recently used
    _read(cache, sst, [2], ["n"])  # pushes out 1
    assert cache.bytes <= 2 * one
    hits = cache.hits
    _read(cache, sst, [0, 2], ["n"])
    assert cache.hits == hits + 2
    _read(cache, sst, [1], ["n"])
    assert cache.hits == hits + 2


def test_forgotten_files_and_a_zero_budget_keep_nothing(sst: str) -> None:
    cache = DecodedChunks(1 << 20)
    _read(cache, sst, [0, 1], ["n", "v"])
    assert cache.bytes > 0
    cache.forget("f")
    assert cache.bytes == 0
    _read(cache, sst, [0], ["n"])
    assert cache.hits == 0
    none = DecodedChunks(0)
    _read(none, sst, [0], ["n"])
    _read(none, sst, [0], ["n"])
    assert (none.hits, none.bytes) == (0, 0)


def test_no_columns_still_count_rows(sst: str) -> None:
    (t,) = _read(DecodedChunks(1 << 20), sst, [2], [])
    assert (t.num_rows, t.num_columns) == (10, 0)


def test_chunks_come_as_numpy_arrays_where_numpy_holds_them_as_arrow_does(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "g.parquet")
    table = pa.table(
        {
            "host": [f"h{i % 3}" for i in range(20)],
            "n": pa.array([None if i == 15 else i for i in range(20)], pa.int64()),
            "ts": pa.array(range(1000, 1020), pa.timestamp("ms")),
        }
    )
    pq.write_table(table, path, row_group_size=10)
    cache = DecodedChunks(1 << 20)
    (first, second) = list(cache.arrays("g", path, [0, 1], ["ts", "n", "host"]))
    # Timestamps as integers of their unit; strings, and a chunk holding a null, as None.
    assert first[0] is not None and first[0].dtype == np.int64
    assert first[0].tolist() == list(range(1000, 1010))
    assert first[1] is not None and first[1].tolist() == list(range(10))
    assert (first[2], second[1]) == (None, None)
    # Made once per chunk held, and dropped with it.
    (again, _) = list(cache.arrays("g", path, [0, 1], ["ts", "n", "host"]))
    assert again[0] is first[0] and cache.hits == 6
    cache.forget("g")
    (fresh,) = list(cache.arrays("g", path, [0], ["ts"]))
    assert fresh[0] is not first[0] and fresh[0] is not None
    assert fresh[0].tolist() == first[0].tolist()


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="capacity"):
        DecodedChunks(-1)


def test_scans_read_again_from_the_cache_and_say_so_in_stats(tmp_path: Path) -> None:
    engine = open_standalone(str(tmp_path / "db"), compaction_threads=0, gc_interval_s=0)
    try:
        SqlExecutor(engine).execute(
            "CREATE TABLE m (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
        )
        for k in range(2):
            engine.write(
                "m",
                pa.table(
                    {
                        "host": ["a", "b"] * 50,
                        "v": [float(i + 100 * k) for i in range(100)],
                        "ts": pa.array([i + 100 * k for i in range(100)], pa.timestamp("ms")),
                    }
                ),
            )
            engine.flush()
        first = engine.read_all("m").sort_by("ts")
        assert first.column("v").to_pylist() == [float(i) for i in range(200)]
        before = engine.stats().decoded_cache
        assert before.misses > 0 and before.bytes > 0
        again = engine.read_all("m").sort_by("ts")
        after = engine.stats().decoded_cache
        assert again.equals(first)
        assert after.misses == before.misses and after.hits > before.hits
        engine.compact("m")
        assert engine.read_all("m").sort_by("ts").equals(first)
    finally:
        engine.close()


def test_dropped_caches_make_the_next_scan_decode_again(quiet: Engine) -> None:
    # What benchmarks of cold reads rely on: nothing of the files stays in memory.
    engine = quiet
    first = flushed_hosts_table(engine)
    kept = engine.stats().decoded_cache
    assert kept.bytes > 0
    engine._sst_files.drop_caches()
    dropped = engine.stats().decoded_cache
    assert dropped.bytes == 0
    assert engine.read_all("m").sort_by("ts").equals(first)
    again = engine.stats().decoded_cache
    assert again.hits == dropped.hits and again.misses > dropped.misses
    assert again.bytes == kept.bytes


def test_reads_not_worth_keeping_leave_the_cache_as_it_was(sst: str) -> None:
    cache = DecodedChunks(1000)
    assert cache.worth_keeping(250) and not cache.worth_keeping(251)
    list(cache.read("f", sst, [0, 1], ["n"], keep=False))
    assert (cache.bytes, cache.misses) == (0, 2)


def test_a_scan_larger_than_a_quarter_of_the_budget_keeps_nothing(tmp_path: Path) -> None:
    engine = open_standalone(
        str(tmp_path / "db"), compaction_threads=0, gc_interval_s=0, decoded_cache_bytes=64_000
    )
    try:
        SqlExecutor(engine).execute(
            "CREATE TABLE m (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts)) "
            "WITH (num_rows_per_row_group='100')"
        )
        n = 5000
        engine.write(
            "m",
            pa.table(
                {
                    "host": ["a", "b"] * (n // 2),
                    "v": [float(i) for i in range(n)],
                    "ts": pa.array(range(n), pa.timestamp("ms")),
                }
            ),
        )
        engine.flush()
        assert engine.read_all("m").num_rows == n  # about 100 kB decoded: not kept
        assert engine.stats().decoded_cache.bytes == 0
        few = engine.read_all("m", time_range=(0, 100))  # one row group: kept
        assert few.num_rows == 100
        assert engine.stats().decoded_cache.bytes > 0
    finally:
        engine.close()


def test_row_groups_decoded_together_are_kept_in_buffers_of_their_own(sst: str) -> None:
    cache = DecodedChunks(1 << 20)
    tables = _read(cache, sst, [0, 1, 2, 3], ["n", "host"])
    assert [t.column("n").to_pylist() for t in tables] == [
        list(range(i * 10, i * 10 + 10)) for i in range(4)
    ]
    for t in tables:
        (values,) = t.column("n").chunks
        # Ten int64 values: a slice of the 40 decoded together would hold a 320-byte buffer.
        data = values.buffers()[1]
        assert data is not None and data.size < 320
    # A second read finds every chunk.
    misses = cache.misses
    assert _read(cache, sst, [2, 0], ["host", "n"])[1].column("n").to_pylist() == list(range(10))
    assert cache.misses == misses
