"""The small-writes benchmark at tiny scale against real servers: every row sent is stored
and counted, and the report names each system's durability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import small_writes
from bench.tsbs.influx import influxd_path
from bench.tsbs.system import SystemUnavailable

pytestmark = pytest.mark.integration


def test_gnomon_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = small_writes.run([1, 3], 6, tmp_path, ["gnomon"])
    # Six rows per client count plus one warm-up row per client.
    assert doc["rows_stored"] == {"gnomon": 6 + 1 + 6 + 3}
    assert set(doc["rows_per_s"]["gnomon"]) == {"1", "3"}
    assert all(rate > 0 for rate in doc["rows_per_s"]["gnomon"].values())
    assert "ratio_gnomon_to_influxdb" not in doc
    assert "fdatasync" in small_writes.table(doc)

    assert small_writes.main(["--clients", "2", "--rows", "2", "--systems", "gnomon",
                              "--scratch", str(tmp_path)]) == 0  # fmt: skip
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(last)["rows_stored"] == {"gnomon": 4}


def test_beside_influxdb(tmp_path: Path) -> None:
    try:
        influxd_path()
    except SystemUnavailable as e:
        pytest.skip(f"InfluxDB cannot be installed here: {e}")
    doc = small_writes.run([2], 4, tmp_path, ["gnomon", "influxdb"])
    assert doc["rows_stored"] == {"gnomon": 6, "influxdb": 6}
    assert set(doc["ratio_gnomon_to_influxdb"]) == {"2"}
    assert "wal-fsync-delay" in small_writes.table(doc)
