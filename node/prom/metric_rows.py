"""Series on their way into metric tables: each series' labels checked as Prometheus checks
them, its samples gathered per metric into one :class:`TableRows` (see labels.py)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.engine.schema import ColumnType
from node.ingest.rows import TableRows
from node.prom.labels import (
    LABEL_NAME,
    MAX_LABEL_VALUE_BYTES,
    METRIC_NAME,
    METRIC_NAME_SYNTAX,
    NOT_LABELS,
    VALUE_COLUMN,
)


class Label(Protocol):
    """A label: the remote-write message's, or any pair with these fields."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...


def metric_name(labels: Sequence[Label]) -> str:
    """The series' metric name, once its labels (sorted by name) are checked."""
    name = ""
    previous = ""
    for i, label in enumerate(labels):
        if i and label.name <= previous:
            what = "repeated" if label.name == previous else "not sorted by name"
            raise InvalidArgument(f"series labels are {what} at {label.name!r}")
        previous = label.name
        if label.name == METRIC_NAME:
            name = label.value
        elif not LABEL_NAME.fullmatch(label.name):
            raise InvalidArgument(f"invalid label name {label.name!r}")
        elif label.name in NOT_LABELS:
            raise InvalidArgument(
                f"label name {label.name!r} is reserved: it names a column of every metric's table"
            )
        if len(label.value.encode()) > MAX_LABEL_VALUE_BYTES:
            raise InvalidArgument(
                f"label {label.name!r}: value of {len(label.value.encode())} bytes is longer "
                f"than {MAX_LABEL_VALUE_BYTES}"
            )
    if not name:
        raise InvalidArgument("a series has no metric name (label __name__)")
    if not METRIC_NAME_SYNTAX.fullmatch(name):
        raise InvalidArgument(f"invalid metric name {name!r}")
    return name


#: A series as stored: its metric and its tags (name, value), in label order, empty values
#: left out (they are NULL).
Tags = tuple[tuple[str, str], ...]


def series_of(labels: Sequence[Label]) -> tuple[str, Tags]:
    """The metric and tags of a series, once its labels are checked (:func:`metric_name`)."""
    name = metric_name(labels)
    return name, tuple((x.name, x.value) for x in labels if x.name != METRIC_NAME and x.value)


class Metric:
    """The rows of one metric, column by column: each row's series (an index into the
    metric's series), time and value; a tag column is made at the end by taking each row's
    series' value, so nothing is done per row and tag."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._index: dict[Tags, int] = {}
        self._tags: list[Tags] = []
        self.series: list[int] = []
        self.timestamps: list[int] = []
        self.values: list[float] = []

    def series_id(self, tags: Tags) -> int:
        """The index of the series of ``tags`` (its first sample makes it)."""
        found = self._index.get(tags)
        if found is None:
            found = self._index[tags] = len(self._tags)
            self._tags.append(tags)
        return found

    def table_rows(self) -> TableRows:
        rows = TableRows(self.name)
        rows.timestamps = self.timestamps
        of_row = np.array(self.series, dtype=np.int32)
        names = dict.fromkeys(name for tags in self._tags for name, _ in tags)
        by_series = [dict(tags) for tags in self._tags]
        for name in names:
            values = pa.array([t.get(name) for t in by_series], pa.string())
            rows.column(name, is_tag=True, type=ColumnType.STRING).built = values.take(of_row)
        col = rows.column(VALUE_COLUMN, is_tag=False, type=ColumnType.DOUBLE)
        col.built = pa.array(np.array(self.values, dtype=np.float64))
        return rows


class MetricRows:
    """The rows of one request, per metric."""

    def __init__(self) -> None:
        self._metrics: dict[str, Metric] = {}

    def metric(self, name: str) -> Metric:
        found = self._metrics.get(name)
        if found is None:
            found = self._metrics[name] = Metric(name)
        return found

    def add(
        self, labels: Sequence[Label], timestamps: Iterable[int], values: Iterable[float]
    ) -> None:
        """One series' samples; its labels are checked (InvalidArgument) even if it has
        none."""
        name, tags = series_of(labels)
        metric = self.metric(name)
        series = metric.series_id(tags)
        before = len(metric.timestamps)
        metric.timestamps.extend(timestamps)
        metric.values.extend(values)
        metric.series.extend([series] * (len(metric.timestamps) - before))

    def tables(self) -> list[TableRows]:
        return [m.table_rows() for m in self._metrics.values() if m.timestamps]
