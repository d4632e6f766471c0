"""The compaction node's HTTP endpoint: ``GET /metrics`` (Prometheus text) and ``GET /health``,
over TLS when the node has a certificate. A small threaded server of the standard library: a
few scrapes a minute is all it serves."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gnomon.metrics import Registry
from gnomon.tls import ServerTls
from node.server.listen import listen_error


class MetricsServer:
    def __init__(
        self, metrics: Registry, *, bind: str, port: int, tls: ServerTls | None = None
    ) -> None:
        registry = metrics

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics":
                    body = registry.render().encode()
                    kind = "text/plain; version=0.0.4; charset=utf-8"
                elif self.path == "/health":
                    body, kind = b'{"status":"ok"}', "application/json"
                else:
                    self.send_error(404, f"no such path {self.path}: /metrics or /health")
                    return
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None

        try:
            self._server = ThreadingHTTPServer((bind, port), Handler)
        except OSError as e:
            raise listen_error("HTTP", bind, port, "http_port", e) from None
        self._server.daemon_threads = True
        if tls is not None:
            # The handshake is made by the request's thread at its first read, not by the
            # accepting one, which a slow client would hold up.
            self._server.socket = tls.ssl_context().wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="gnomon-compaction-http", daemon=True
        )

    def start(self) -> int:
        self._thread.start()
        return self.port

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
