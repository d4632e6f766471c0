"""The HTTP API of a real standalone gnomon: /sql, InfluxDB line-protocol writes, /health,
/metrics, /openapi.json, errors and the request size limit."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from gnomon.metrics import Registry
from node.backends import open_standalone
from node.ingest.writer import Ingestor
from node.server.http import ONE_WRITE_BYTES, HttpApp, HttpServer
from node.server.prom import openapi as prometheus
from node.sql.result import QueryResult
from tests.server.conftest import MAX_REQUEST_BYTES, Running

pytestmark = pytest.mark.integration

LP_HEADERS = {"Content-Type": "text/plain"}


def test_sql_round_trip(gnomon: Running) -> None:
    status, body = gnomon.sql(
        "CREATE TABLE h_demo (name string TAG, value double, payload varbinary, "
        "t timestamp NOT NULL, TIMESTAMP KEY(t)) ENGINE=Analytic WITH (enable_ttl='false')"
    )
    assert (status, body) == (200, {"affected_rows": 0})
    status, body = gnomon.sql(
        "INSERT INTO h_demo (t, name, value) VALUES (1651737067000, 'horaedb', 100), "
        "(1651737068000, 'other', 1.5)"
    )
    assert (status, body) == (200, {"affected_rows": 2})
    status, body = gnomon.sql("SELECT t, name, value, payload FROM h_demo WHERE value > 10")
    assert status == 200
    # Timestamps are integer milliseconds, as HoraeDB renders them.
    assert body == {
        "rows": [{"t": 1651737067000, "name": "horaedb", "value": 100.0, "payload": None}]
    }
    status, body = gnomon.sql("SELECT count(*) AS n FROM h_demo WHERE name = 'nobody'")
    assert body == {"rows": [{"n": 0}]}
    status, body = gnomon.sql("SHOW TABLES LIKE 'h_demo'")
    assert body == {"rows": [{"Tables": "h_demo"}]}


def test_line_protocol_write_then_query(gnomon: Running) -> None:
    lines = (
        'h_cpu,host=a,dc=eu usage=0.5,state="ok",n=3i,up=true 1700000000000\n'
        "h_cpu,host=b usage=1.5 1700000001000\n"
        "# a comment line\n"
        "h_mem,host=a free=10u 1700000000000\n"
    )
    status, _, body = gnomon.request(
        "POST", "/influxdb/v1/write?db=public&precision=ms", lines.encode(), LP_HEADERS
    )
    assert (status, body) == (204, b"")
    status, body = gnomon.sql("SELECT * FROM h_cpu ORDER BY timestamp")
    assert status == 200
    first, second = body["rows"]
    assert list(first) == ["tsid", "timestamp", "dc", "host", "n", "state", "up", "usage"]
    assert first | {"tsid": 0} == {
        "tsid": 0,
        "timestamp": 1700000000000,
        "dc": "eu",
        "host": "a",
        "n": 3,
        "state": "ok",
        "up": True,
        "usage": 0.5,
    }
    assert second["host"] == "b" and second["dc"] is None and second["usage"] == 1.5
    status, body = gnomon.sql("SELECT free FROM h_mem")
    assert body == {"rows": [{"free": 10}]}

    # gzip-encoded and chunked bodies, seconds precision, a new field added on the way.
    gz = gzip.compress(b"h_cpu,host=c usage=2.5,extra=1 1700000002\n")
    status, _, _ = gnomon.request(
        "POST",
        "/influxdb/v1/write?precision=s",
        gz,
        {**LP_HEADERS, "Content-Encoding": "gzip"},
    )
    assert status == 204
    conn = http.client.HTTPConnection("127.0.0.1", gnomon.http_port, timeout=30)
    conn.putrequest("POST", "/influxdb/v1/write?precision=s")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    chunk = b"h_cpu,host=d usage=3.5 1700000003\n"
    conn.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk))
    assert conn.getresponse().status == 204
    conn.close()
    status, body = gnomon.sql("SELECT host, extra FROM h_cpu WHERE timestamp >= 1700000002000")
    assert sorted((r["host"], r["extra"]) for r in body["rows"]) == [("c", 1.0), ("d", None)]


def test_line_protocol_errors(gnomon: Running) -> None:
    status, _, body = gnomon.request(
        "POST", "/influxdb/v1/write?precision=ms", b"h_bad v=1 1\nh_bad v=oops 2\n", LP_HEADERS
    )
    assert status == 400
    err = json.loads(body)
    assert err["code"] == 400 and err["message"].startswith("line 2: invalid field value")
    status, _, body = gnomon.request(
        "POST", "/influxdb/v1/write?precision=fortnight", b"h_bad v=1", LP_HEADERS
    )
    assert status == 400 and "invalid precision" in json.loads(body)["message"]
    status, _, body = gnomon.request("POST", "/influxdb/v1/write?db=other", b"x v=1", LP_HEADERS)
    assert status == 400 and "database 'other' does not exist" in json.loads(body)["message"]
    # The table's usage is a float, whichever of this module's tests made it first.
    status, _, _ = gnomon.request(
        "POST", "/influxdb/v1/write?precision=ms", b"h_cpu,host=a usage=1.0 4", LP_HEADERS
    )
    assert status == 204
    status, _, body = gnomon.request(
        "POST", "/influxdb/v1/write?precision=ms", b"h_cpu,host=a usage=1i 5", LP_HEADERS
    )
    assert status == 400 and "Value type is not same" in json.loads(body)["message"]


def test_sql_errors(gnomon: Running) -> None:
    status, body = gnomon.sql("SELEC nothing")
    assert status == 400 and body["code"] == 400 and "syntax error" in body["message"]
    status, body = gnomon.sql("SELECT * FROM no_such_table")
    assert status == 404 and "'no_such_table' does not exist" in body["message"]
    status, body = gnomon.sql(
        "CREATE TABLE h_dup (v double, t timestamp NOT NULL, TIMESTAMP KEY(t))"
    )
    status, body = gnomon.sql(
        "CREATE TABLE h_dup (v double, t timestamp NOT NULL, TIMESTAMP KEY(t))"
    )
    assert status == 409 and "already exists" in body["message"]
    status, _, raw = gnomon.request("POST", "/sql", b"{not json", {})
    assert status == 400 and "not valid JSON" in json.loads(raw)["message"]
    status, _, raw = gnomon.request("POST", "/sql", b'{"sql": "SELECT 1"}', {})
    assert status == 400 and '{"query": "<sql>"}' in json.loads(raw)["message"]


def test_request_size_limit(gnomon: Running) -> None:
    big = b"h_big v=1 1\n" * (MAX_REQUEST_BYTES // 12 + 100)
    status, headers, body = gnomon.request("POST", "/influxdb/v1/write", big, LP_HEADERS)
    assert status == 413
    assert "exceeds the limit" in json.loads(body)["message"]
    assert headers.get("Connection") == "close"
    # A body that only grows past the limit once decompressed is refused too.
    status, _, body = gnomon.request(
        "POST", "/influxdb/v1/write", gzip.compress(big), {"Content-Encoding": "gzip"}
    )
    assert status == 413
    status, _ = gnomon.sql("SELECT 1")
    assert status == 200


def test_keep_alive_connection_serves_several_requests(gnomon: Running) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", gnomon.http_port, timeout=30)
    for _ in range(3):
        conn.request("POST", "/sql", body=b'{"query": "SELECT 1 AS one"}')
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read()) == {"rows": [{"one": 1}]}
    conn.close()


def test_health_metrics_openapi_and_unknown_paths(gnomon: Running) -> None:
    status, _, body = gnomon.request("GET", "/health")
    assert (status, json.loads(body)) == (200, {"status": "ok"})
    gnomon.sql("SELECT 1")
    status, headers, body = gnomon.request("GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    assert 'gnomon_requests_total{protocol="http",endpoint="/sql",code="200"}' in text
    assert 'gnomon_request_duration_seconds_bucket{protocol="http",endpoint="/sql",le="+Inf"}' in (
        text
    )
    assert "# TYPE gnomon_request_duration_seconds histogram" in text
    for name in (
        "gnomon_tables",
        "gnomon_memtable_size",
        "gnomon_table_ssts",
        "gnomon_pending_flushes",
        "gnomon_decoded_cache",
        "gnomon_sst_file_cache",
    ):
        assert f"# TYPE {name} gauge" in text
    assert 'gnomon_sst_file_cache{unit="capacity_bytes"}' in text
    status, _, body = gnomon.request("GET", "/openapi.json")
    spec = json.loads(body)
    assert spec["openapi"].startswith("3.")
    assert set(spec["paths"]) == {
        "/sql",
        "/influxdb/v1/write",
        "/influxdb/v1/query",
        "/health",
        "/metrics",
        "/openapi.json",
        "/route/{table}",
        "/api/cluster",
        *prometheus.PATHS,
    }
    status, _, body = gnomon.request("GET", "/nope")
    assert status == 404 and json.loads(body)["code"] == 404
    status, headers, body = gnomon.request("GET", "/sql")
    assert status == 405 and "accepts POST" in json.loads(body)["message"]
    assert headers["Allow"] == "POST"


def test_garbage_request_line_does_not_kill_the_server(gnomon: Running) -> None:
    with socket.create_connection(("127.0.0.1", gnomon.http_port), timeout=10) as s:
        s.sendall(b"BREW /pot HTTP/1.1\r\n\r\n")
        # The server closes the connection after a protocol error: read up to that.
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 501")
    assert json.loads(body)["code"] == 501
    status, _, _ = gnomon.request("GET", "/health")
    assert status == 200


def _exchange(port: int, request: bytes) -> list[tuple[bytes, bytes]]:
    """Sends raw ``request`` bytes and reads until the server closes: each answer's head and
    body (bodies split by Content-Length)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    answers = []
    while data:
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        answers.append((head, rest[:length]))
        data = rest[length:]
    return answers


def test_request_headers_are_parsed_strictly_and_answered_in_json(gnomon: Running) -> None:
    query = b'{"query": "SELECT 2 AS two"}'
    # A folded header line continues the one before; two requests on one connection.
    folded = (
        b"POST /sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"X-Note: first\r\n  second\r\nContent-Length: %d\r\n\r\n%s" % (len(query), query)
    )
    closing = b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"
    (first, second) = _exchange(gnomon.http_port, folded + closing)
    assert first[0].startswith(b"HTTP/1.1 200") and json.loads(first[1]) == {"rows": [{"two": 2}]}
    assert second[0].startswith(b"HTTP/1.1 200") and b"Connection: close" in second[0]
    for request, status, words in [
        (b"GET /health HTTP/1.1\r\nno colon here\r\n\r\n", b"400", "Malformed header"),
        (b"GET /health HTTP/1.1\r\n" + b"X-A: 1\r\n" * 101 + b"\r\n", b"431", "100 headers"),
        (b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", b"431", "too long"),
        (b"GET /health HTTP/2.0\r\n\r\n", b"505", "HTTP version"),
        (b"GET /health\r\n\r\n", b"400", "Bad request syntax"),
    ]:
        ((head, body),) = _exchange(gnomon.http_port, request)
        assert head.startswith(b"HTTP/1.1 " + status), head
        assert json.loads(body)["code"] == int(status) and words in json.loads(body)["message"]
    # HTTP/1.0 closes after the answer unless asked to keep the connection.
    ((head, body),) = _exchange(gnomon.http_port, b"GET /health HTTP/1.0\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"Connection: close" in head
    assert gnomon.request("GET", "/health")[0] == 200


def test_sql_answers_arrow_when_asked(gnomon: Running) -> None:
    status, _ = gnomon.sql(
        "CREATE TABLE h_arrow (host string TAG, v double, t timestamp NOT NULL, TIMESTAMP KEY(t))"
    )
    assert status == 200
    status, _ = gnomon.sql(
        "INSERT INTO h_arrow (t, host, v) VALUES (1000, 'a', 1.5), (2000, 'b', 2.5)"
    )
    assert status == 200
    query = json.dumps({"query": "SELECT host, v, t FROM h_arrow ORDER BY t"}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", gnomon.http_port, timeout=30)
    asks = [("/sql?format=arrow", {}), ("/sql", {"Accept": "application/vnd.apache.arrow.stream"})]
    for target, headers in asks:
        conn.request("POST", target, body=query, headers=headers)
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Type") == "application/vnd.apache.arrow.stream"
        table = pa.ipc.open_stream(resp.read()).read_all()
        assert table.to_pylist() == [
            {"host": "a", "v": 1.5, "t": datetime(1970, 1, 1, 0, 0, 1)},
            {"host": "b", "v": 2.5, "t": datetime(1970, 1, 1, 0, 0, 2)},
        ]
        assert table.schema.field("t").type == pa.timestamp("ms")
    # No rows: the stream still carries the schema.
    empty = json.dumps({"query": "SELECT v FROM h_arrow WHERE host = 'nobody'"}).encode()
    conn.request("POST", "/sql?format=arrow", body=empty)
    resp = conn.getresponse()
    table = pa.ipc.open_stream(resp.read()).read_all()
    assert (table.num_rows, table.column_names) == (0, ["v"])
    # Statements still answer JSON; an unknown format is refused without losing the
    # connection (the body was read).
    insert = json.dumps({"query": "INSERT INTO h_arrow (t, host, v) VALUES (3000, 'c', 1)"})
    conn.request("POST", "/sql?format=arrow", body=insert.encode())
    resp = conn.getresponse()
    assert json.loads(resp.read()) == {"affected_rows": 1}
    conn.request("POST", "/sql?format=csv", body=query)
    resp = conn.getresponse()
    assert resp.status == 400 and "unknown format 'csv'" in json.loads(resp.read())["message"]
    conn.request("POST", "/sql?format=json", body=query, headers={"Accept": "*/*"})
    resp = conn.getresponse()
    assert [r["host"] for r in json.loads(resp.read())["rows"]] == ["a", "b", "c"]
    conn.close()


def test_responses_are_not_held_back_by_nagle(tmp_path: Path) -> None:
    """Large answers go out as headers then body; without TCP_NODELAY the body of each answer
    on a keep-alive connection would wait for the client's delayed ACK."""
    rows = 100_000  # about 1 MB of JSON: written in two parts

    def execute(sql: str) -> QueryResult:
        return QueryResult.rows(pa.table({"x": [1] if sql == "SELECT 1" else range(rows)}))

    with open_standalone(str(tmp_path / "data"), wal_sync="never") as engine:
        app = HttpApp(
            ingestor=Ingestor(engine),
            execute=execute,
            metrics=Registry(),
            max_body_bytes=1024,
            healthy=lambda: True,
        )
        server = HttpServer(app, port=0)
        port = server.start()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("POST", "/sql", body=b'{"query": "SELECT 1"}')
            assert json.loads(conn.getresponse().read()) == {"rows": [{"x": 1}]}
            conn.request("POST", "/sql", body=b'{"query": "SELECT x"}')
            answer = conn.getresponse().read()
            assert len(answer) > ONE_WRITE_BYTES
            assert [r["x"] for r in json.loads(answer)["rows"]] == list(range(rows))
            assert server._server is not None
            with server._server.connections_lock:
                (accepted,) = server._server.connections
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
            conn.close()
        finally:
            server.stop(grace_s=1.0)
