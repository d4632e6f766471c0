"""The Prometheus benchmark at tiny scale against a real gnomon and a real Prometheus 2.42:
both store every sample sent, and every panel gets the same series from both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import prometheus
from testkit.prometheus import prometheus_binaries

pytestmark = pytest.mark.integration


def test_tiny_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prometheus_binaries()
    argv = ["--series", "50", "--hours", "0.5", "--batch", "500", "--senders", "2"]
    argv += ["--scratch", str(tmp_path)]
    assert prometheus.main([*argv, "--range-hours", "0.25", "--repeats", "1"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert doc["samples"] == 50 * 120
    assert doc["stored"] == {"gnomon": doc["samples"], "prometheus": doc["samples"]}
    assert doc["ingest_vs_prometheus"] > 0 and doc["panel_ratio_median"] > 0
    assert set(doc["panels"]) == set(prometheus.PANELS)
    for name, panel in doc["panels"].items():
        assert panel["agree"], (name, panel)
        assert panel["series"]["gnomon"] > 0, name
