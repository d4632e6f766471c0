"""One deterministic data set both Prometheus and gnomon are given: counters (one with a
reset), gauges, a classic histogram, an info metric and a series that stops."""

from __future__ import annotations

import numpy as np

from tests.prom.conftest import Series

#: The first sample's time (seconds) and the data set's span.
T0 = 1_700_000_000
INTERVAL_S = 15
SAMPLES = 240  # an hour
BUCKETS = ("0.05", "0.1", "0.25", "0.5", "1", "+Inf")


def _times(count: int = SAMPLES) -> list[int]:
    return [(T0 + i * INTERVAL_S) * 1000 for i in range(count)]


def series() -> list[Series]:
    rng = np.random.default_rng(7)
    out: list[Series] = []
    times = _times()
    for job, instance in (("api", "a:80"), ("api", "b:80"), ("db", "c:5432")):
        for code in ("200", "500"):
            counts = np.cumsum(rng.integers(0, 20 if code == "200" else 3, SAMPLES)).astype(float)
            if instance == "b:80" and code == "200":
                counts[120:] -= counts[119]  # a restart: the counter starts again
            labels = {
                "__name__": "http_requests_total",
                "job": job,
                "instance": instance,
                "code": code,
            }
            out.append((labels, list(zip(times, counts.tolist(), strict=True))))
        out.append(
            (
                {
                    "__name__": "info_metric",
                    "instance": instance,
                    "version": "2" if job == "api" else "1",
                },
                [(t, 1.0) for t in times],
            )
        )
    for room in ("r1", "r2", "r3"):
        temps = 20 + np.cumsum(rng.normal(0, 0.5, SAMPLES))
        out.append(
            (
                {"__name__": "temperature", "room": room},
                list(zip(times, temps.round(3).tolist(), strict=True)),
            )
        )
    for job in ("api", "db"):
        per_bucket = rng.integers(0, 10, (SAMPLES, len(BUCKETS)))
        cumulative = np.cumsum(np.cumsum(per_bucket, axis=1), axis=0).astype(float)
        for b, le in enumerate(BUCKETS):
            labels = {"__name__": "latency_seconds_bucket", "job": job, "le": le}
            out.append((labels, list(zip(times, cumulative[:, b].tolist(), strict=True))))
    half = _times(SAMPLES // 2)
    out.append(({"__name__": "gone", "job": "x"}, [(t, 3.0) for t in half]))
    return out


def openmetrics(data: list[Series]) -> str:
    """``data`` as OpenMetrics text (what promtool backfills), metric by metric."""
    lines: list[str] = []
    by_metric: dict[str, list[Series]] = {}
    for labels, samples in data:
        assert isinstance(labels, dict)
        by_metric.setdefault(labels["__name__"], []).append((labels, samples))
    for name, group in by_metric.items():
        for labels, samples in group:
            assert isinstance(labels, dict)
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
            for t, v in samples:
                lines.append(f"{name}{{{text}}} {v!r} {t / 1000:.3f}")
    return "\n".join(lines) + "\n# EOF\n"
