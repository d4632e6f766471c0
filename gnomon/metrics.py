"""A small metrics registry rendered in the Prometheus text exposition format (version 0.0.4):
counters and histograms with labels, plus gauges (and counters kept elsewhere) read from
callbacks when scraped."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Sequence

#: Request latency buckets in seconds: 1 ms .. 60 s.
LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

Labels = tuple[str, ...]
#: A gauge callback yields (label values, value) pairs.
GaugeFn = Callable[[], Iterable[tuple[Labels, float]]]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _num(v: float) -> str:
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


class Counter:
    def __init__(self, name: str, help: str, labels: Sequence[str]) -> None:
        self.name = name
        self.help = help
        self.label_names = tuple(labels)
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(labels, 0.0)

    def total(self, where: Callable[[Labels], bool] = lambda _labels: True) -> float:
        """The sum over the label values ``where`` accepts."""
        with self._lock:
            return sum(v for k, v in self._values.items() if where(k))

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} counter"]
        out += [f"{self.name}{_labels(self.label_names, k)} {_num(v)}" for k, v in items]
        return out


class Histogram:
    def __init__(
        self,
        name: str,
        help: str,
        labels: Sequence[str],
        buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> None:
        self.name = name
        self.help = help
        self.label_names = tuple(labels)
        self.buckets = tuple(sorted(buckets))
        # Per label set: count per bucket (non-cumulative, last slot is +Inf), sum.
        self._series: dict[Labels, tuple[list[int], list[float]]] = {}
        self._lock = threading.Lock()

    def observe(self, value: float, *labels: str) -> None:
        i = bisect.bisect_left(self.buckets, value)
        with self._lock:
            series = self._series.get(labels)
            if series is None:
                series = self._series[labels] = ([0] * (len(self.buckets) + 1), [0.0])
            series[0][i] += 1
            series[1][0] += value

    def render(self) -> list[str]:
        with self._lock:
            items = sorted((k, (list(c), s[0])) for k, (c, s) in self._series.items())
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        for key, (counts, total) in items:
            running = 0
            for bound, n in zip(self.buckets, counts, strict=False):
                running += n
                le = _labels(self.label_names, key, f'le="{_num(bound)}"')
                out.append(f"{self.name}_bucket{le} {running}")
            running += counts[-1]
            inf = _labels(self.label_names, key, 'le="+Inf"')
            out.append(f"{self.name}_bucket{inf} {running}")
            out.append(f"{self.name}_sum{_labels(self.label_names, key)} {_num(total)}")
            out.append(f"{self.name}_count{_labels(self.label_names, key)} {running}")
        return out


class Gauge:
    """Figures read from ``fn`` when scraped; ``kind`` "counter" for counts only growing."""

    def __init__(
        self, name: str, help: str, labels: Sequence[str], fn: GaugeFn, kind: str = "gauge"
    ) -> None:
        self.name = name
        self.help = help
        self.label_names = tuple(labels)
        self.fn = fn
        self.kind = kind

    def render(self) -> list[str]:
        out = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        out += [f"{self.name}{_labels(self.label_names, k)} {_num(v)}" for k, v in self.fn()]
        return out


class Registry:
    """The metrics of one server process. The standard ones every endpoint records are
    created here; :meth:`gauge` adds figures read when scraped."""

    def __init__(self) -> None:
        self._metrics: list[Counter | Histogram | Gauge] = []
        self.requests = self.counter(
            "gnomon_requests_total",
            "Requests served, by protocol, endpoint and status code.",
            ["protocol", "endpoint", "code"],
        )
        self.latency = self.histogram(
            "gnomon_request_duration_seconds",
            "Time to serve a request, by protocol and endpoint.",
            ["protocol", "endpoint"],
        )
        self.rows_written = self.counter(
            "gnomon_rows_written_total",
            "Rows written through the servers, by protocol.",
            ["protocol"],
        )
        self.connections_refused = self.counter(
            "gnomon_connections_refused_total",
            "New connections refused (HTTP before any request is read, gRPC and Flight at each "
            "call on them), by protocol and the limit that refused them.",
            ["protocol", "limit"],
        )
        self.request_bytes = self.counter(
            "gnomon_request_bytes_total",
            "Bytes of request bodies received, by protocol.",
            ["protocol"],
        )

    def counter(self, name: str, help: str, labels: Sequence[str]) -> Counter:
        c = Counter(name, help, labels)
        self._metrics.append(c)
        return c

    def histogram(self, name: str, help: str, labels: Sequence[str]) -> Histogram:
        h = Histogram(name, help, labels)
        self._metrics.append(h)
        return h

    def gauge(self, name: str, help: str, labels: Sequence[str], fn: GaugeFn) -> Gauge:
        g = Gauge(name, help, labels, fn)
        self._metrics.append(g)
        return g

    def counted(self, name: str, help: str, labels: Sequence[str], fn: GaugeFn) -> Gauge:
        """A counter whose counts are kept elsewhere, read from ``fn`` when scraped."""
        g = Gauge(name, help, labels, fn, kind="counter")
        self._metrics.append(g)
        return g

    def observe_request(self, protocol: str, endpoint: str, code: int, seconds: float) -> None:
        self.requests.inc(protocol, endpoint, str(code))
        self.latency.observe(seconds, protocol, endpoint)

    def render(self) -> str:
        lines: list[str] = []
        for m in self._metrics:
            lines += m.render()
        return "\n".join(lines) + "\n"


class Tally:
    """How many times each of ``kinds`` happened since start (for ``/metrics``)."""

    def __init__(self, kinds: tuple[str, ...]) -> None:
        self._counts = dict.fromkeys(kinds, 0)
        self._lock = threading.Lock()

    def count(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
