"""The example pipeline runs end to end against a standalone server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO, Node

pytestmark = pytest.mark.integration


@pytest.mark.long
def test_spark_pipeline_example(node: Node) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "examples" / "spark_pipeline.py"),
            "--http",
            node.http,
            "--flight",
            node.flight,
            "--hosts",
            "5",
            "--hours",
            "6",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary == {"raw_rows": 5 * 6 * 360, "hourly_rows": 5 * 6, "samples_aggregated": 10800}
