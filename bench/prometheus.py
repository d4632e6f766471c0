"""Prometheus remote write and a PromQL dashboard: gnomon beside Prometheus 2.42.

The same samples go to a standalone gnomon and to a Prometheus: ``--series`` series (half
counters ``http_requests_total``, a tenth gauges ``memory_usage_bytes``, the rest the buckets
of the histogram ``request_duration_seconds``) every 15 s for ``--hours``, ending now. They
are sent as Prometheus sends them: snappy-compressed WriteRequests of ``--batch`` samples, one
sample per series entry, by ``--senders`` concurrent senders that each own a share of the
series (Prometheus's shards) and send it in time order. Every body is encoded before the
clock starts; ingest is timed into gnomon first, then into Prometheus, and both are checked to
hold every sample; before that, each server answers one remote write of a metric of its own,
timed apart as its cold first write (gnomon loads its compiled body walk on first use, which
would otherwise fall inside the timed ingest). Then ten typical dashboard panels (rates, sums
by label, error ratios, histogram quantiles, topk, ``*_over_time``) are asked of both with
``/api/v1/query_range`` over the last ``--range-hours`` of the data at ``--step-s``: once to
warm, then ``--repeats`` times in turn, the median kept; each panel's answers must have the
same series on both.

Peers' setup: gnomon writes its WAL without fsync (``--wal-sync never``) as Prometheus does
(it syncs a WAL segment when it is full, not per write). Prometheus 2.42 (Debian's package)
runs with its remote-write receiver on and an out-of-order window as long as the data: a
sender that falls more than an hour behind the others would otherwise have its samples
refused as out of bounds, where gnomon takes them. Both wait, idle, before the queries.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import numpy as np

from bench.common import standalone_argv
from bench.tsbs.serving import wait_quiet
from gnomon.proto import prometheus_pb2
from gnomon_app.devcluster.procs import Server
from node.prom.wire import snappy, unsnappy
from testkit import prometheus as prom_server
from testkit.debian import PackageUnavailable
from testkit.prometheus import WRITE_HEADERS

INTERVAL_S = 15
#: Series per instance: 5 handlers x 5 codes of the counter, 5 areas of the gauge, 2 handlers
#: x 10 buckets of the histogram.
PER_INSTANCE = 50
HANDLERS = ("/api", "/login", "/search", "/upload", "/health")
CODES = ("200", "201", "404", "500", "503")
AREAS = ("heap", "stack", "cache", "buffers", "mapped")
BUCKETS = ("0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "+Inf")
JOBS = 4
#: A sample's bytes after its series' fixed prefix: the value's 8 bytes, the timestamp's key
#: and its 6-byte varint (times from 2^35 to 2^42 ms, 1971 to 2109, take 6 bytes).
TAIL = 15
TS_BYTES = 6
PANELS = {
    "requests_total": "sum(rate(http_requests_total[5m]))",
    "requests_by_job": "sum by (job) (rate(http_requests_total[5m]))",
    "requests_by_code": "sum by (code) (rate(http_requests_total[5m]))",
    "errors_per_series": 'rate(http_requests_total{code="500"}[5m])',
    "error_ratio_by_job": 'sum by (job) (rate(http_requests_total{code=~"5.."}[5m]))'
    " / sum by (job) (rate(http_requests_total[5m]))",
    "latency_p90": "histogram_quantile(0.9, sum by (le) (rate("
    "request_duration_seconds_bucket[5m])))",
    "latency_p99_by_job": "histogram_quantile(0.99, sum by (job, le) (rate("
    "request_duration_seconds_bucket[5m])))",
    "top5_instances": "topk(5, sum by (instance) (rate(http_requests_total[5m])))",
    "memory_avg_10m": "avg_over_time(memory_usage_bytes[10m])",
    "memory_max_by_instance": "max by (instance) (memory_usage_bytes)",
}
METRICS = ("http_requests_total", "memory_usage_bytes", "request_duration_seconds_bucket")
QUIET_TIMEOUT_S = 120.0


@dataclass
class Samples:
    """Every series' labels and its samples: ``values[series, step]`` at ``times_ms[step]``."""

    labels: list[dict[str, str]]
    times_ms: np.ndarray[Any, np.dtype[np.int64]]
    values: np.ndarray[Any, np.dtype[np.float64]]

    @property
    def count(self) -> int:
        return int(self.values.size)


def make_samples(series: int, hours: float, end_ms: int, seed: int = 7) -> Samples:
    """``series`` series (a multiple of PER_INSTANCE) over ``hours`` ending at ``end_ms``."""
    rng = np.random.default_rng(seed)
    steps = int(hours * 3600 / INTERVAL_S)
    end_ms -= end_ms % (INTERVAL_S * 1000)
    times = end_ms - INTERVAL_S * 1000 * np.arange(steps - 1, -1, -1, dtype=np.int64)
    labels: list[dict[str, str]] = []
    blocks: list[np.ndarray[Any, np.dtype[np.float64]]] = []
    for i in range(series // PER_INSTANCE):
        host = {"instance": f"host-{i:04}:9100", "job": f"job{i % JOBS}"}
        labels += [
            {"__name__": "http_requests_total", **host, "handler": h, "code": c}
            for h in HANDLERS
            for c in CODES
        ]
        # Requests per second: many succeed, few fail, as a dashboard's error ratio expects.
        rates = np.array(
            [rng.uniform(1, 50) if c.startswith("2") else rng.uniform(0, 1) for c in CODES]
        )
        lam = np.tile(rates, len(HANDLERS))[:, None] * INTERVAL_S
        blocks.append(np.cumsum(rng.poisson(lam, (lam.size, steps)), axis=1).astype(float))
        labels += [{"__name__": "memory_usage_bytes", **host, "area": a} for a in AREAS]
        walk = np.cumsum(rng.normal(0, 1e6, (len(AREAS), steps)), axis=1)
        blocks.append(1e9 + walk)
        labels += [
            {"__name__": "request_duration_seconds_bucket", **host, "handler": h, "le": le}
            for h in HANDLERS[:2]
            for le in BUCKETS
        ]
        per_bucket = rng.poisson(5, (2, steps, len(BUCKETS)))
        cumulative = np.cumsum(np.cumsum(per_bucket, axis=2), axis=1).astype(float)
        blocks.append(cumulative.transpose(0, 2, 1).reshape(2 * len(BUCKETS), steps))
    return Samples(labels, times, np.concatenate(blocks))


class Encoder:
    """WriteRequests of any samples, one series entry per sample, as Prometheus sends them:
    each series' entry up to its sample is the same bytes every time, so a request is those
    prefixes and the samples' bytes laid out by numpy."""

    def __init__(self, samples: Samples) -> None:
        self.samples = samples
        prefixes = [self._prefix(labels) for labels in samples.labels]
        self.length = np.array([len(p) for p in prefixes], dtype=np.int64)
        self.start = np.cumsum(self.length) - self.length
        self.flat = np.frombuffer(b"".join(prefixes), dtype=np.uint8)
        times = samples.times_ms
        if times.size and not (times.min() >= 2**35 and times.max() < 2**42):
            raise ValueError("sample times must take a 6-byte varint (1971 to 2109)")
        shifts = 7 * np.arange(TS_BYTES, dtype=np.int64)
        varints = ((times[:, None] >> shifts) & 0x7F).astype(np.uint8)
        varints[:, :-1] |= 0x80
        self.varints = varints

    @staticmethod
    def _prefix(labels: dict[str, str]) -> bytes:
        """A one-series WriteRequest's bytes up to its sample's value (a value and time that
        protobuf writes out in full, as it leaves zeros out)."""
        ts = prometheus_pb2.TimeSeries(
            labels=[prometheus_pb2.Label(name=k, value=v) for k, v in sorted(labels.items())],
            samples=[prometheus_pb2.Sample(value=0.5, timestamp=2**40)],
        )
        data = prometheus_pb2.WriteRequest(timeseries=[ts]).SerializeToString()
        return data[:-TAIL]

    def encode(
        self,
        series: np.ndarray[Any, np.dtype[np.int64]],
        steps: np.ndarray[Any, np.dtype[np.int64]],
    ) -> bytes:
        """The WriteRequest of the samples (series[i], steps[i]), in that order."""
        n = series.size
        length = self.length[series]
        ends = np.cumsum(length + TAIL)
        starts = ends - length - TAIL
        out = np.empty(int(ends[-1]), dtype=np.uint8)
        # Each prefix byte's place within its prefix, then copied from the flat prefixes.
        within = np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
        out[np.repeat(starts, length) + within] = self.flat[
            np.repeat(self.start[series], length) + within
        ]
        tail = np.empty((n, TAIL), dtype=np.uint8)
        tail[:, :8] = self.samples.values[series, steps].astype("<f8").view(np.uint8).reshape(n, 8)
        tail[:, 8] = 0x10  # field 2 (timestamp), varint
        tail[:, 9:] = self.varints[steps]
        out[(starts + length)[:, None] + np.arange(TAIL)] = tail
        return out.tobytes()


def sender_bodies(samples: Samples, senders: int, batch: int) -> list[list[bytes]]:
    """Per sender, its snappy-compressed requests in order: sender k owns every senders-th
    series and sends them a time step after another, ``batch`` samples a request."""
    encoder = Encoder(samples)
    steps = samples.times_ms.size
    out = []
    for k in range(senders):
        owned = np.arange(k, len(samples.labels), senders, dtype=np.int64)
        total = owned.size * steps
        bodies = []
        for first in range(0, total, batch):
            entry = np.arange(first, min(total, first + batch), dtype=np.int64)
            data = encoder.encode(owned[entry % owned.size], entry // owned.size)
            bodies.append(snappy(data))
        out.append(bodies)
    _check_encoding(samples, out[0][0], senders)
    return out


def _check_encoding(samples: Samples, body: bytes, senders: int) -> None:
    """The first request read back by protobuf holds the samples it was made of."""
    req = prometheus_pb2.WriteRequest.FromString(unsnappy(body, len(body) * 100))
    first = req.timeseries[0]
    got = {label.name: label.value for label in first.labels}
    if got != samples.labels[0] or len(first.samples) != 1:
        raise AssertionError(f"encoded series {got} is not {samples.labels[0]}")
    last = req.timeseries[-1]
    n = len(req.timeseries) - 1
    owned = np.arange(0, len(samples.labels), senders)
    series, step = owned[n % owned.size], n // owned.size
    want = (int(samples.times_ms[step]), float(samples.values[series, step]))
    if (last.samples[0].timestamp, last.samples[0].value) != want:
        raise AssertionError(f"encoded sample {last.samples[0]} is not {want}")


class Client:
    """One server's HTTP API over a kept-alive connection."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def call(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        try:
            self.conn.request(method, path, body=body, headers=headers or {})
            resp = self.conn.getresponse()
            return resp.status, resp.read()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            raise

    def query(self, path: str, **params: str) -> dict[str, Any]:
        status, body = self.call("GET", f"{path}?{urlencode(params)}")
        if status != 200:
            raise RuntimeError(f"{path} {params} -> {status}: {body[:500]!r}")
        data: dict[str, Any] = json.loads(body)["data"]
        return data


def first_write(client: Client, timestamp_ms: int) -> float:
    """Seconds a fresh server takes to answer its first remote write (one sample of a metric
    outside the data set, at ``timestamp_ms``, the data's first time: a later one would put
    all of the data behind Prometheus's head, into its out-of-order path): what a server
    loads on first use (gnomon: its compiled body walk) is paid here, before ingest is
    timed, and reported as the cold figure."""
    request = prometheus_pb2.WriteRequest()
    series = request.timeseries.add()
    series.labels.add(name="__name__", value="bench_first_write")
    series.samples.add(value=1.0, timestamp=timestamp_ms)
    t0 = time.perf_counter()
    status, answer = client.call(
        "POST", "/api/v1/write", snappy(request.SerializeToString()), WRITE_HEADERS
    )
    if status != 204:
        raise RuntimeError(f"remote write -> {status}: {answer[:500]!r}")
    return time.perf_counter() - t0


def ingest(port: int, bodies: list[list[bytes]]) -> float:
    """Seconds to send every sender's requests, the senders concurrent."""

    def send(mine: list[bytes]) -> None:
        client = Client(port)
        for body in mine:
            status, answer = client.call("POST", "/api/v1/write", body, WRITE_HEADERS)
            if status != 204:
                raise RuntimeError(f"remote write -> {status}: {answer[:500]!r}")

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(bodies), thread_name_prefix="sender") as pool:
        for f in [pool.submit(send, mine) for mine in bodies]:
            f.result()
    return time.perf_counter() - t0


def stored(client: Client, samples: Samples) -> int:
    """How many samples of the data set a server holds: each metric's sum of
    count_over_time over the whole span, at its end."""
    span_s = INTERVAL_S * samples.times_ms.size
    end = str(int(samples.times_ms[-1]) / 1000)
    total = 0
    for metric in METRICS:
        data = client.query(
            "/api/v1/query", query=f"sum(count_over_time({metric}[{span_s}s]))", time=end
        )
        total += sum(int(float(s["value"][1])) for s in data["result"])
    return total


def _shape(data: dict[str, Any]) -> tuple[frozenset[tuple[tuple[str, str], ...]], int]:
    """An answer's series (their labels) and its count of points."""
    result = data["result"]
    series = frozenset(tuple(sorted(s["metric"].items())) for s in result)
    return series, sum(len(s["values"]) for s in result)


def dashboard(
    clients: dict[str, Client], params: dict[str, str], repeats: int
) -> dict[str, dict[str, Any]]:
    """Per panel: each server's median seconds and the shape of its answer (the same series
    and as many points on both, or the panel does not agree)."""
    out: dict[str, dict[str, Any]] = {}
    for name, query in PANELS.items():
        times: dict[str, list[float]] = {server: [] for server in clients}
        shapes = {
            server: _shape(c.query("/api/v1/query_range", query=query, **params))
            for server, c in clients.items()
        }
        for turn in range(repeats):
            order = list(clients) if turn % 2 == 0 else list(reversed(clients))
            for server in order:
                t0 = time.perf_counter()
                clients[server].query("/api/v1/query_range", query=query, **params)
                times[server].append(time.perf_counter() - t0)
        out[name] = {
            "query": query,
            "seconds": {s: round(statistics.median(t), 5) for s, t in times.items()},
            "series": {s: len(shape[0]) for s, shape in shapes.items()},
            "points": {s: shape[1] for s, shape in shapes.items()},
            "agree": len(set(shapes.values())) == 1,
        }
    return out


@contextmanager
def servers(root: Path, hours: float) -> Iterator[tuple[dict[str, Client], list[int], str]]:
    """gnomon and Prometheus started, each with its client; their pids; Prometheus's
    version."""
    binary, _ = prom_server.find_binaries()
    (root / "prometheus").mkdir()
    window_m = int(hours * 60) + 60
    config = f"global: {{}}\nstorage:\n  tsdb:\n    out_of_order_time_window: {window_m}m\n"
    gnomon, ports = Server.start_gnomon(
        standalone_argv(root / "gnomon", wal_sync="never"),
        log=root / "gnomon.log",
    )
    try:
        with prom_server.running(
            binary, root / "prometheus", config, ["--web.enable-remote-write-receiver"]
        ) as prom:
            clients = {"gnomon": Client(ports["http"]), "prometheus": Client(prom.port)}
            version = clients["prometheus"].query("/api/v1/status/buildinfo")["version"]
            yield clients, [gnomon.pid, prom.pid], str(version)
    finally:
        gnomon.stop()


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    samples = make_samples(args.series, args.hours, int(time.time() * 1000))
    bodies = sender_bodies(samples, args.senders, args.batch)
    encode_s = time.perf_counter() - t0
    body_bytes = sum(len(b) for mine in bodies for b in mine)
    end_s = int(samples.times_ms[-1]) // 1000
    range_s = min(int(args.range_hours * 3600), INTERVAL_S * (samples.times_ms.size - 1))
    params = {"start": str(end_s - range_s), "end": str(end_s), "step": str(args.step_s)}
    with servers(root, args.hours) as (clients, pids, version):
        ingest_s = {}
        first_s = {}
        held = {}
        for name, client in clients.items():
            first_s[name] = first_write(client, int(samples.times_ms[0]))
            ingest_s[name] = ingest(client.port, bodies)
            wait_quiet(pids, window_s=1.0, timeout_s=QUIET_TIMEOUT_S)
            held[name] = stored(client, samples)
        panels = dashboard(clients, params, args.repeats)
    rate = {name: samples.count / s for name, s in ingest_s.items()}
    ratios = [p["seconds"]["gnomon"] / p["seconds"]["prometheus"] for p in panels.values()]
    return {
        "bench": "prometheus",
        "prometheus_version": version,
        "series": len(samples.labels),
        "samples": samples.count,
        "requests": sum(len(mine) for mine in bodies),
        "batch": args.batch,
        "senders": args.senders,
        "body_bytes": body_bytes,
        "encode_s": round(encode_s, 2),
        "first_write_s": {k: round(v, 3) for k, v in first_s.items()},
        "ingest_s": {k: round(v, 3) for k, v in ingest_s.items()},
        "ingest_samples_per_s": {k: round(v) for k, v in rate.items()},
        "stored": held,
        "ingest_vs_prometheus": round(rate["gnomon"] / rate["prometheus"], 3),
        "range": params,
        "panels": panels,
        "panels_agree": all(p["agree"] for p in panels.values()),
        "panel_ratio_median": round(statistics.median(ratios), 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--series", type=int, default=1000, help=f"Series written (a multiple of {PER_INSTANCE})."
    )
    parser.add_argument("--hours", type=float, default=24.0, help="Hours of samples, every 15 s.")
    parser.add_argument("--batch", type=int, default=2000, help="Samples per remote write.")
    parser.add_argument("--senders", type=int, default=4, help="Concurrent senders.")
    parser.add_argument(
        "--range-hours", type=float, default=6.0, help="The dashboard's time range."
    )
    parser.add_argument("--step-s", type=int, default=60, help="The dashboard's step.")
    parser.add_argument("--repeats", type=int, default=5, help="Timed runs of each panel.")
    parser.add_argument("--scratch", default=None, help="Where the data directories go.")
    args = parser.parse_args(argv)
    if args.series < PER_INSTANCE or args.series % PER_INSTANCE:
        parser.error(f"--series must be a positive multiple of {PER_INSTANCE}")
    if args.hours * 3600 < 2 * INTERVAL_S or args.range_hours <= 0:
        parser.error("--hours must cover two samples and --range-hours be positive")
    if min(args.batch, args.senders, args.step_s, args.repeats) < 1:
        parser.error("batch, senders, step and repeats must be positive")
    try:
        with tempfile.TemporaryDirectory(prefix="prometheus-", dir=args.scratch) as scratch:
            doc = run(args, Path(scratch))
    except PackageUnavailable as e:
        print(f"Prometheus is not available: {e}", file=sys.stderr)
        return 2
    print(
        f"{doc['samples']:,} samples ({doc['series']} series) in {doc['requests']} requests of "
        f"{doc['batch']}, {doc['senders']} senders, {doc['body_bytes'] / 1e6:.1f} MB; "
        f"encoded in {doc['encode_s']} s"
    )
    for name in ("gnomon", "prometheus"):
        print(
            f"ingest {name}: {doc['ingest_samples_per_s'][name]:,} samples/s "
            f"({doc['ingest_s'][name]} s), {doc['stored'][name]:,} stored"
        )
    print(f"ingest gnomon / prometheus: {doc['ingest_vs_prometheus']}")
    for name, panel in doc["panels"].items():
        secs = panel["seconds"]
        print(
            f"panel {name}: gnomon {secs['gnomon'] * 1000:.1f} ms, prometheus "
            f"{secs['prometheus'] * 1000:.1f} ms, series {panel['series']['gnomon']}/"
            f"{panel['series']['prometheus']}{'' if panel['agree'] else ' DISAGREE'}"
        )
    print(f"panel time gnomon / prometheus, median: {doc['panel_ratio_median']}")
    print(json.dumps(doc, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
