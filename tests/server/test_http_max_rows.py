"""`POST /sql` with `max_rows`: a query answers its first rows only, in JSON or Arrow, with
how many rows the whole answer had (what `gnomon sql` asks for, so a large answer is not
sent to show a screenful)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tests.server.conftest import Running, gnomon

pytestmark = pytest.mark.integration

__all__ = ["gnomon"]

ROWS = 50


@pytest.fixture(scope="module")
def counted(gnomon: Running) -> Running:
    lines = "\n".join(f"counted,k=k{i} v={i}i {i}" for i in range(ROWS))
    status, _, body = gnomon.request("POST", "/influxdb/v1/write?precision=ms", lines.encode())
    assert status == 204, body
    return gnomon


def _post(
    server: Running, doc: dict[str, object], query: str = ""
) -> tuple[int, dict[str, str], bytes]:
    return server.request("POST", f"/sql{query}", json.dumps(doc).encode())


@pytest.mark.parametrize("most", [0, 7, ROWS, ROWS + 1])
def test_json_rows_are_cut_and_counted(counted: Running, most: int) -> None:
    status, _, body = _post(
        counted, {"query": "SELECT v FROM counted ORDER BY v", "max_rows": most}
    )
    answer = json.loads(body)
    assert status == 200, answer
    assert [r["v"] for r in answer["rows"]] == list(range(min(most, ROWS)))
    assert answer["total_rows"] == ROWS


def test_arrow_rows_are_cut_and_counted(counted: Running) -> None:
    doc = {"query": "SELECT v FROM counted ORDER BY v", "max_rows": 3}
    status, headers, body = _post(counted, doc, "?format=arrow")
    assert status == 200, body
    assert pa.ipc.open_stream(body).read_all().column("v").to_pylist() == [0, 1, 2]
    assert {k.lower(): v for k, v in headers.items()}["gnomon-total-rows"] == str(ROWS)


def test_without_max_rows_every_row_is_sent_uncounted(counted: Running) -> None:
    status, _, body = _post(counted, {"query": "SELECT v FROM counted"})
    assert status == 200 and json.loads(body).keys() == {"rows"}
    assert len(json.loads(body)["rows"]) == ROWS


@pytest.mark.parametrize("most", [-1, 1.5, "10", True])
def test_a_bad_max_rows_is_refused(counted: Running, most: object) -> None:
    status, _, body = _post(counted, {"query": "SELECT v FROM counted", "max_rows": most})
    assert status == 400, body
    assert "max_rows" in json.loads(body)["message"]
