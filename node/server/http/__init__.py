"""gnomon's HTTP server: ``POST /sql`` (HoraeDB-compatible JSON or Arrow), InfluxDB 1.x's
``/influxdb/v1/write`` and ``/influxdb/v1/query``, ``GET /route/{table}``, ``GET /health``,
``GET /metrics`` (Prometheus text) and ``GET /openapi.json``.

Requests are parsed by httptools (llhttp, the parser uvicorn uses): request line, headers,
Content-Length and chunked bodies, pipelining and keep-alive are its. Connections are served
by one asyncio event loop on a thread of its own; what blocks (SQL, writes) runs on a thread
pool, so the loop keeps reading (and notices a client that leaves mid-query). Errors are JSON
``{"code": <HTTP status>, "message": ...}``, protocol errors included.

Modules: ``app`` (what the endpoints do), ``routes`` (which endpoint, and the work that
answers it), ``bodies`` (JSON, line protocol, gzip), ``writes`` (small writes batched on the
loop), ``connection`` (one client connection), ``answers`` (the messages written back),
``headers``, ``server`` (the loop, the listening socket, stopping).

Why not a whole server library (measured by ``bench/http_server.py`` against aiohttp's
low-level server and uvicorn with httptools, see docs/benchmarks.md): aiohttp's parser refuses
HTTP/1.1 requests without a Host header and folded header lines, which clients of the
hand-written server sent; uvicorn writes every response header name in lower case, takes any
number of headers of any length, and answers every malformed request with one plain-text 400.
When a client half-closes its connection, both drop the answers still being made (aiohttp
every one). Both cost about twice as much per request.
"""

from node.server.http.answers import ARROW_STREAM, ONE_WRITE_BYTES, Response
from node.server.http.app import HttpApp
from node.server.http.server import HttpServer

__all__ = ["ARROW_STREAM", "ONE_WRITE_BYTES", "HttpApp", "HttpServer", "Response"]
