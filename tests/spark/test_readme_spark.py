"""The README's Spark snippet, as written (ports aside), against `gnomon standalone --demo`: it
makes its Spark session, reads the demo table with pushed-down filters and writes one host's
rows into the table the README creates just before."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cli.conftest import Demo, start_demo
from tests.docs.readme import Ports, blocks

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    root = tmp_path_factory.mktemp("readme-spark")
    running = start_demo(root / "data", root / "server.log")
    yield running
    running.stop()


def test_the_readme_spark_snippet(
    demo: Demo, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ports = Ports(demo.http_port, demo.grpc_port, demo.flight_port)
    found = blocks()
    at = next(i for i, b in enumerate(found) if b.lang == "python" and "gnomon_app.spark" in b.text)
    # The shell block right before it creates the table the snippet writes to.
    for cmd in found[at - 1].commands():
        subprocess.run(
            ["bash", "-c", ports.apply(cmd)], check=True, capture_output=True, timeout=60
        )
    # Nothing given: the snippet makes its session (Spark hands it the one this test module
    # runs, which the fixture stops).
    names: dict[str, Any] = {}
    exec(compile(ports.apply(found[at].text), "README.md", "exec"), names)
    assert names["spark"] is spark
    shown = capsys.readouterr().out
    assert "us-east-1" in shown and "avg(usage_user)" in shown, shown  # host_1's region
    status, body = demo.sql("SELECT count(*) AS n, min(hostname) AS h FROM host_1_cpu")
    assert status == 200 and body["rows"] == [{"n": 24 * 360, "h": "host_1"}], body
