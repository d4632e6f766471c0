"""The latest buckets of a bucketed aggregation under an upper time bound (``GROUP BY bucket
ORDER BY bucket DESC LIMIT n``, TSBS's groupby-orderby-limit) are read from the n buckets up
to the bound first, and from the whole range when some of those are empty: answers as
DuckDB's over the same rows, whichever was read."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from node.backends import open_standalone
from node.sql.executor import SqlExecutor

pytestmark = pytest.mark.unit

MINUTE = 60_000
#: Minutes 0-29 and 40-59 hold rows, 30-39 none: a window reaching into the gap comes
#: short and the whole range is read.
MINUTES = [m for m in range(60) if not 30 <= m < 40]


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqlExecutor, Any]]:
    engine = open_standalone(
        str(tmp_path_factory.mktemp("window") / "db"), compaction_threads=0, gc_interval_s=0
    )
    sql = SqlExecutor(engine)
    sql.execute(
        "CREATE TABLE m (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts)) "
        "WITH (segment_duration='20m', num_rows_per_row_group='64')"
    )
    rng = random.Random(7)
    keys = [
        (h, m * MINUTE + s * 10_000) for h in ("a", "b", "c") for m in MINUTES for s in range(6)
    ]
    rng.shuffle(keys)
    for i, part in enumerate((keys[: len(keys) // 2], keys[len(keys) // 2 :])):
        engine.write(
            "m",
            pa.table(
                {
                    "host": [h for h, _ in part],
                    "v": pa.array([round(rng.uniform(0, 100), 2) for _ in part], pa.float64()),
                    "ts": pa.array([t for _, t in part], pa.timestamp("ms")),
                }
            ),
        )
        if i == 0:
            engine.flush("m")  # the rest stays in the memtable
    con = duckdb.connect()
    con.register("m", sql.execute("SELECT host, v, ts FROM m").table())
    yield sql, con
    engine.close()


def _query(bucket: str, bounds: list[str], limit: int) -> str:
    return (
        f"SELECT {bucket} AS b, max(v) AS hi_v, min(v) AS lo_v, count(*) AS n, avg(v) AS mean "
        f"FROM m WHERE {' AND '.join(bounds)} GROUP BY b ORDER BY b DESC LIMIT {limit}"
    )


def _ours(hi: str, limit: int, lo: str = "") -> str:
    bounds = [f"ts {b}" for b in (hi, lo) if b]
    return _query("date_bin(INTERVAL '1 minute', ts)", bounds, limit)


def _duckdb(hi: str, limit: int, lo: str = "") -> str:
    """The same query as DuckDB compares a timestamp with integer milliseconds."""
    bounds = []
    for b in (hi, lo):
        if b:
            op, value = b.split()
            bounds.append(f"ts {op} make_timestamp({int(value) * 1000})")
    return _query("time_bucket(INTERVAL '1 minute', ts)", bounds, limit)


@pytest.mark.parametrize(
    ("hi", "limit", "lo"),
    [
        (f"< {50 * MINUTE}", 5, ""),  # inside the dense minutes: the window is the answer
        (f"<= {50 * MINUTE}", 5, ""),  # the bound's own minute holds one row more
        (f"< {50 * MINUTE + 30_000}", 5, ""),  # a bound inside a minute: a partial bucket
        (f"< {42 * MINUTE}", 5, ""),  # reaches into the empty minutes: read whole
        (f"< {45 * MINUTE}", 100, ""),  # more buckets asked than there are
        (f"< {50 * MINUTE}", 5, f">= {47 * MINUTE + 20_000}"),  # a lower bound inside too
        (f"< {90 * MINUTE}", 3, ""),  # past the data: the window is empty
    ],
)
def test_latest_buckets_answer_as_duckdb(
    both: tuple[SqlExecutor, Any], hi: str, limit: int, lo: str
) -> None:
    sql, con = both
    route = sql.execute("EXPLAIN " + _ours(hi, limit, lo)).table().column("plan")[0].as_py()
    assert "bucketed aggregation" in route
    got = [tuple(r.values()) for r in sql.execute(_ours(hi, limit, lo)).table().to_pylist()]
    want = [tuple(r) for r in con.execute(_duckdb(hi, limit, lo)).fetchall()]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[:4] == w[:4]
        assert g[4] == pytest.approx(w[4])


def test_the_window_reads_few_rows_and_a_short_one_reads_all(
    both: tuple[SqlExecutor, Any],
) -> None:
    sql, _ = both
    narrow = sql.execute(_ours(f"< {50 * MINUTE}", 5))
    whole = sql.execute(_ours(f"< {50 * MINUTE}", 100))
    assert narrow.table().num_rows == 5
    (few,) = narrow.scans
    (every,) = whole.scans
    assert few.stats.row_groups_read < every.stats.row_groups_read
