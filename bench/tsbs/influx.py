"""InfluxDB 1.x for the benchmark: installed from the Debian package when ``influxd`` is
missing, run on loopback ports with its data and config in a scratch directory, written
through its HTTP ``/write`` and queried through ``/query``.

The config is complete and passed with ``-config``: without it influxd silently merges the
system config. Both listeners are on loopback; reporting, the ``_internal`` monitor store and
the HTTP/query logs are off; the cold durations are short so that the settled (compacted)
size can be measured minutes, not hours, after the load.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.tsbs.serving import HttpClient, Process, disk_bytes, http_ok, wait_until
from bench.tsbs.system import (
    Dialect,
    Workload,
    apt_binary,
    apt_unavailable,
    loaded,
    settle_size,
)
from testkit.procs import on_free_ports

DATABASE = "benchmark"

_CONFIG = """\
reporting-enabled = false
bind-address = "127.0.0.1:{backup_port}"

[meta]
  dir = "{root}/meta"
  logging-enabled = false

[data]
  dir = "{root}/data"
  wal-dir = "{root}/wal"
  index-version = "inmem"
  wal-fsync-delay = "0s"
  query-log-enabled = false
  cache-snapshot-write-cold-duration = "5s"
  compact-full-write-cold-duration = "10s"
  trace-logging-enabled = false

[coordinator]
  log-queries-after = "0s"

[monitor]
  store-enabled = false

[http]
  enabled = true
  bind-address = "127.0.0.1:{http_port}"
  auth-enabled = false
  log-enabled = false
  suppress-write-log = true
  pprof-enabled = false
  max-body-size = 0
  max-row-limit = 0

[continuous_queries]
  enabled = false

[subscriber]
  enabled = false
"""


def influxd_path(*, install: bool = True) -> str:
    """The influxd binary, installing the Debian package ``influxdb`` when it is missing;
    raises :class:`system.SystemUnavailable`."""
    return apt_binary("influxd", "influxdb", install=install)


class InfluxServer:
    """One influxd with its data under ``root``."""

    name = "influxdb"

    def __init__(self, root: Path, *, binary: str | None = None) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        config = root / "influxdb.conf"
        binary = binary or influxd_path()

        def start(ports: tuple[int, ...]) -> Process:
            http_port, backup_port = ports
            config.write_text(
                _CONFIG.format(root=root, backup_port=backup_port, http_port=http_port)
            )
            process = Process([binary, "-config", str(config)], log=root / "influxd.log")
            for port in ports:
                process.wait_for_port(port, timeout_s=60)
            return process

        self.process, (self.http_port, _) = on_free_ports(start, count=2)
        self.base = f"http://127.0.0.1:{self.http_port}"
        self.http = HttpClient(self.http_port)
        wait_until(lambda: http_ok(f"{self.base}/ping"), timeout_s=30, what="influxd /ping")
        self._post("/query", {"q": f"CREATE DATABASE {DATABASE}"})

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.process.pid,)

    def _post(self, path: str, params: dict[str, str], body: bytes = b"") -> bytes:
        return self.http.post(f"{path}?{urllib.parse.urlencode(params)}", body)

    def write(self, body: bytes) -> None:
        """One line-protocol request (millisecond timestamps)."""
        self._post("/write", {"db": DATABASE, "precision": "ms"}, body)

    def query(self, influxql: str) -> pa.Table:
        """The result as one table: ``time`` (ms), the series' tags, then the value columns
        in select order, every series stacked."""
        raw = self._post("/query", {"db": DATABASE, "epoch": "ms", "q": influxql})
        return result_table(json.loads(raw))

    def stored_rows(self) -> int:
        answer = self.query("SELECT count(usage_user) FROM cpu")
        return int(answer.column("count")[0].as_py()) if answer.num_rows else 0

    def disk_bytes(self) -> int:
        return disk_bytes(self.root / "data") + disk_bytes(self.root / "wal")

    def peak_rss(self) -> int | None:
        return self.process.peak_rss

    def stop(self) -> None:
        self.process.stop()


class InfluxKind:
    name = "influxdb"
    dialect: Dialect | None = "influxql"
    loaders = ("influxdb",)
    encodings = ("line-protocol",)

    def unavailable(self) -> str | None:
        return apt_unavailable("influxd", "influxdb")

    def install(self) -> None:
        influxd_path()

    def load(self, loader: str, where: Path, work: Workload) -> tuple[InfluxServer, float]:
        server = InfluxServer(where)
        return loaded(server, server.write, work.payloads["line-protocol"], work.workers)

    def settle(self, system: InfluxServer, quiet_s: float) -> InfluxServer:
        """Cache snapshots written and compacted."""
        settle_size(system, quiet_s)
        return system


def result_table(doc: dict[str, Any]) -> pa.Table:
    """InfluxDB's JSON answer as an Arrow table. Raises on an error in the answer. Values
    that are whole numbers come back as JSON integers; they become floats here."""
    results = doc.get("results", [])
    for r in results:
        if "error" in r:
            raise RuntimeError(f"influxdb: {r['error']}")
    series = [s for r in results for s in r.get("series", [])]
    if not series:
        return pa.table({"time": pa.array([], pa.int64())})
    tag_names = sorted({k for s in series for k in s.get("tags", {})})
    names = series[0]["columns"]
    cols: dict[str, list[Any]] = {n: [] for n in [*tag_names, *names]}
    for s in series:
        tags = s.get("tags", {})
        for row in s["values"]:
            for n in tag_names:
                cols[n].append(tags.get(n))
            for n, v in zip(names, row, strict=True):
                cols[n].append(float(v) if isinstance(v, int) and n != "time" else v)
    return pa.table({n: pa.array(v) for n, v in cols.items()})
