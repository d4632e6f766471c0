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


class _Metric:
    """The rows of one metric, gathered series by series: tags filled a series at a time,
    values made one Arrow array at the end."""

    def __init__(self, name: str) -> None:
        self.rows = TableRows(name)
        self.values: list[float] = []

    def add(
        self, labels: Sequence[Label], timestamps: Iterable[int], values: Iterable[float]
    ) -> None:
        rows = self.rows
        start = rows.num_rows
        rows.timestamps.extend(timestamps)
        self.values.extend(values)
        count = rows.num_rows - start
        for label in labels:
            if label.name != METRIC_NAME and label.value:
                col = rows.column(label.name, is_tag=True, type=ColumnType.STRING)
                col.fill(start, count, label.value)

    def table_rows(self) -> TableRows:
        col = self.rows.column(VALUE_COLUMN, is_tag=False, type=ColumnType.DOUBLE)
        col.built = pa.array(np.array(self.values, dtype=np.float64))
        return self.rows


class MetricRows:
    """The rows of one request, per metric."""

    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}

    def add(
        self, labels: Sequence[Label], timestamps: Iterable[int], values: Iterable[float]
    ) -> None:
        """One series' samples; its labels are checked (InvalidArgument) even if it has
        none."""
        name = metric_name(labels)
        metric = self._metrics.get(name)
        if metric is None:
            metric = self._metrics[name] = _Metric(name)
        metric.add(labels, timestamps, values)

    def tables(self) -> list[TableRows]:
        return [m.table_rows() for m in self._metrics.values() if m.rows.num_rows]
