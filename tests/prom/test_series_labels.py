"""A selector's series labels (node/prom/series.py): read with the samples the first time a
series is seen, then kept by (metric, tsid) so later selectors read only tsid, time and value;
a series new to a selector, or a matcher on any label, still answers as reading every row
would."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.prom import series
from node.prom.series import Matcher, MatchOp
from node.sql.result import QueryResult
from tests.sql.runner import Session

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000


class Recorded:
    """SQL run on an embedded engine, each statement kept."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.statements: list[str] = []

    def __call__(self, sql: str) -> QueryResult:
        self.statements.append(sql)
        return self.session.sql.execute(sql)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Recorded]:
    session = Session(str(tmp_path))
    session.sql.execute(
        "CREATE TABLE up (`timestamp` timestamp NOT NULL, job string TAG, instance string TAG, "
        "value double, TIMESTAMP KEY(`timestamp`))"
    )
    series._LABELS.clear()
    yield Recorded(session)
    series._LABELS.clear()
    session.engine.close()


def _insert(run: Recorded, job: str, instance: str | None, *values: float) -> None:
    rows = ", ".join(
        f"({T0 + i * 15_000}, '{job}', {'NULL' if instance is None else repr(instance)}, {v})"
        for i, v in enumerate(values)
    )
    run(f"INSERT INTO up (`timestamp`, job, instance, value) VALUES {rows}")


def _select(run: Recorded, *matchers: Matcher) -> list[tuple[dict[str, str], list[float]]]:
    got = series.select(run, [Matcher("__name__", MatchOp.EQ, "up"), *matchers], T0, T0 + 60_000)
    return [
        (labels, got.values[got.offsets[i] : got.offsets[i + 1]].tolist())
        for i, labels in enumerate(got.labels)
    ]


def _tag_reads(run: Recorded) -> int:
    return sum("`job`" in s for s in run.statements if s.startswith("SELECT"))


def test_labels_are_read_once_then_kept(run: Recorded) -> None:
    _insert(run, "api", "a", 1.0, 2.0)
    _insert(run, "api", None, 5.0)
    first = _select(run)
    assert sorted((lb.get("instance", ""), v) for lb, v in first) == [
        ("", [5.0]),
        ("a", [1.0, 2.0]),
    ]
    assert _tag_reads(run) == 1
    assert sorted(map(str, _select(run))) == sorted(map(str, first))
    assert _tag_reads(run) == 1  # the second read took the samples alone

    # A series new to it: every row's tags read again, the answer as complete.
    _insert(run, "db", "b", 7.0)
    third = _select(run)
    assert _tag_reads(run) == 2
    assert {lb["job"] for lb, _ in third} == {"api", "db"}


@pytest.mark.parametrize(
    ("matcher", "instances"),
    [
        (Matcher("instance", MatchOp.NEQ, "a"), ["", "b"]),
        (Matcher("instance", MatchOp.RE, "a|b"), ["a", "b"]),
        (Matcher("instance", MatchOp.NRE, ".+"), [""]),
        (Matcher("job", MatchOp.EQ, "db"), ["b"]),
        (Matcher("zone", MatchOp.EQ, ""), ["", "a", "b"]),  # a label no series has is ""
    ],
)
def test_matchers_keep_the_same_series_with_labels_known_or_not(
    run: Recorded, matcher: Matcher, instances: list[str]
) -> None:
    _insert(run, "api", "a", 1.0)
    _insert(run, "api", None, 2.0)
    _insert(run, "db", "b", 3.0)
    cold = sorted(lb.get("instance", "") for lb, _ in _select(run, matcher))
    _select(run)  # every series known now
    warm = sorted(lb.get("instance", "") for lb, _ in _select(run, matcher))
    assert cold == warm == instances
