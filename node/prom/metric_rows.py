"""Series on their way into metric tables: each series' labels checked as Prometheus checks
them, its samples gathered per metric into one :class:`TableRows` (see labels.py)."""

from __future__ import annotations

import threading
from array import array
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.engine.schema import ColumnType
from node.engine.tsid import tsid_of
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


class MetricSeries:
    """The series of one metric known to a :class:`Series` generation, numbered from 0,
    their tags held as one column per tag name so that the tags of any rows are a take of
    each column by the rows' series, and so are their tsids."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self._columns: dict[str, list[str | None]] = {}
        self._arrays: dict[str, pa.Array[Any]] = {}
        #: Each series' tsid in a table of these tags (in schema order) and tsid rule.
        self._tsids: dict[tuple[tuple[str, ...], bool], np.ndarray[Any, np.dtype[np.uint64]]] = {}
        self._tsids_lock = threading.Lock()

    def add(self, tags: Tags) -> int:
        """A new series of ``tags``: its number. Called under the generation's lock."""
        number = self.count
        for name, value in tags:
            column = self._columns.get(name)
            if column is None:
                column = self._columns[name] = [None] * number
            column.append(value)
        for column in self._columns.values():
            if len(column) == number:
                column.append(None)
        # Counted last: a reader taking the series below the count finds every column full.
        self.count = number + 1
        return number

    def tsids(
        self, tags: Sequence[str], *, untagged_zero: bool
    ) -> np.ndarray[Any, np.dtype[np.uint64]]:
        """Each series' tsid in a table of ``tags``, hashed as the engine hashes rows
        (:func:`tsid_of`, each row's from its own tags alone) once per series: the first
        time a table's tags are asked for, then for the series added since."""
        key = (tuple(tags), untagged_zero)
        with self._tsids_lock:
            known = self._tsids.get(key)
            start = 0 if known is None else known.size
            count = self.count
            if known is not None and start == count:
                return known
            columns = {name: self._column(name, count).slice(start, count - start) for name in tags}
            new = tsid_of(columns, tags, count - start, untagged_zero=untagged_zero).to_numpy()
            known = new if known is None else np.concatenate([known, new])
            self._tsids[key] = known
            return known

    def tag_columns(self, series: np.ndarray[Any, np.dtype[np.int32]]) -> dict[str, pa.Array[Any]]:
        """Each tag's values for rows of ``series`` (numbers this metric gave out)."""
        return {
            name: self._column(name, len(values)).take(series)
            for name, values in list(self._columns.items())
        }

    def _column(self, name: str, count: int) -> pa.Array[Any]:
        """Tag ``name``'s value of each series, the first ``count`` at least (all null for a
        tag no series of this metric has), kept as Arrow until more series arrive."""
        values = self._columns.get(name)
        if values is None:
            return pa.nulls(count, pa.string())
        array = self._arrays.get(name)
        if array is None or len(array) < count:
            array = self._arrays[name] = pa.array(list(values), pa.string())
        return array


class Series:
    """The series a server has been sent, by their labels' wire bytes and by their checked
    tags, so a series is read and checked once; bounded by starting a new generation when
    full (a request keeps the generation it started with)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lock = threading.Lock()
        self.by_bytes: dict[bytes, tuple[MetricSeries, int]] = {}
        self._by_tags: dict[tuple[str, Tags], int] = {}
        self._metrics: dict[str, MetricSeries] = {}
        self.size = 0

    def of_tags(self, metric: str, tags: Tags) -> tuple[MetricSeries, int]:
        """The series of checked ``tags`` of ``metric``, numbered on first sight."""
        with self.lock:
            known = self._metrics.get(metric)
            if known is None:
                known = self._metrics[metric] = MetricSeries(metric)
            number = self._by_tags.get((metric, tags))
            if number is None:
                number = self._by_tags[(metric, tags)] = known.add(tags)
                self.size += 1
            return known, number

    def of_labels(self, labels: Sequence[Label]) -> tuple[MetricSeries, int]:
        """The series of ``labels``, checked (InvalidArgument) when first seen."""
        return self.of_tags(*series_of(labels))


class SeriesCache:
    """The current :class:`Series` generation of a server."""

    def __init__(self, limit: int = 200_000) -> None:
        self._current = Series(limit)

    def current(self) -> Series:
        series = self._current
        if series.size >= series.limit:
            series = self._current = Series(series.limit)
        return series


class _Rows:
    """One metric's rows of a request: each row's series, time and value."""

    def __init__(self, metric: MetricSeries) -> None:
        self.metric = metric
        # Typed arrays: appended to as lists are, read by numpy without a conversion.
        self.series = array("i")
        self.timestamps = array("q")
        self.values = array("d")

    def extend(
        self,
        series: np.ndarray[Any, np.dtype[np.int32]],
        timestamps: np.ndarray[Any, np.dtype[np.int64]],
        values: np.ndarray[Any, np.dtype[np.float64]],
    ) -> None:
        self.series.frombytes(series.astype(np.int32, copy=False).tobytes())
        self.timestamps.frombytes(timestamps.astype(np.int64, copy=False).tobytes())
        self.values.frombytes(values.astype(np.float64, copy=False).tobytes())

    def table_rows(self) -> TableRows:
        rows = TableRows(self.metric.name)
        rows.timestamps = self.timestamps
        of_row = np.frombuffer(self.series, dtype=np.int32)
        rows.series = _RowSeries(self.metric, of_row)
        for name, values in self.metric.tag_columns(of_row).items():
            rows.column(name, is_tag=True, type=ColumnType.STRING).built = values
        col = rows.column(VALUE_COLUMN, is_tag=False, type=ColumnType.DOUBLE)
        col.built = pa.array(np.frombuffer(self.values, dtype=np.float64))
        return rows


class _RowSeries:
    """One request's rows of a metric as the engine's :class:`KnownSeries`."""

    def __init__(self, metric: MetricSeries, of_row: np.ndarray[Any, np.dtype[np.int32]]) -> None:
        self._metric = metric
        self._of_row = of_row

    def tsids(self, tags: Sequence[str], *, untagged_zero: bool) -> pa.Array[Any]:
        tsids: pa.Array[Any] = pa.array(
            self._metric.tsids(tags, untagged_zero=untagged_zero)[self._of_row]
        )
        return tsids


class MetricRows:
    """The rows of one request, per metric, its series numbered by ``series`` (a generation
    of the server's, or one of the request's own)."""

    def __init__(self, series: Series | None = None) -> None:
        self.series = series or Series(limit=0)
        self._metrics: dict[str, _Rows] = {}

    def rows_of(self, metric: MetricSeries) -> _Rows:
        found = self._metrics.get(metric.name)
        if found is None:
            found = self._metrics[metric.name] = _Rows(metric)
        return found

    def add(
        self, labels: Sequence[Label], timestamps: Iterable[int], values: Iterable[float]
    ) -> None:
        """One series' samples; its labels are checked (InvalidArgument) even if it has
        none."""
        metric, number = self.series.of_labels(labels)
        rows = self.rows_of(metric)
        before = len(rows.timestamps)
        rows.timestamps.extend(timestamps)
        rows.values.extend(values)
        rows.series.extend([number] * (len(rows.timestamps) - before))

    def tables(self) -> list[TableRows]:
        return [m.table_rows() for m in self._metrics.values() if m.timestamps]
