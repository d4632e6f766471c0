"""The PostgreSQL protocol benchmark at tiny scale against a real server: both clients
answer every query and fetch every row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import pgwire

pytestmark = pytest.mark.integration


def test_tiny_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert pgwire.main(["--rows", "300", "--queries", "5", "--scratch", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["rows"] == 300
    assert set(doc["point_p50_ms"]) == set(doc["fetch_rows_per_s"]) == {"pg", "http", "postgres"}
    assert all(v > 0 for v in doc["fetch_rows_per_s"].values())
    assert doc["postgres_version"].split(".")[0].isdigit()
    assert doc["point_p50_vs_http"] > 0 and doc["fetch_time_vs_http"] > 0
