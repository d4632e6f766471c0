"""SQL functions gnomon adds to DataFusion's own (which already has date_bin and
approx_distinct): HoraeDB's time_bucket and thetasketch_distinct (of numbers), and the
PostgreSQL functions of :mod:`node.sql.pg_functions`."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import datafusion
import numpy as np
import pyarrow as pa

from gnomon.errors import GnomonError, InvalidArgument
from node.engine.options import parse_duration_ms
from node.sql import pg_functions

_ISO = re.compile(
    r"^P(?:(?P<y>\d+)Y)?(?:(?P<mo>\d+)M)?(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?"
    r"(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+)S)?)?$",
    re.IGNORECASE,
)
_UNIT_MS = {"w": 604_800_000, "d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000}
_OFFSET = re.compile(r"^(?P<sign>[+-])(?P<h>\d{2}):?(?P<m>\d{2})$")
#: time_bucket's arguments after the period, as HoraeDB takes them: the input's format (for
#: string input; gnomon's input is a timestamp), the time zone, the output's format (HoraeDB
#: answers a timestamp whatever it says).
EXTRA_ARGUMENTS = 3


def _period(text: str) -> tuple[int, int]:
    """A period as (months, milliseconds): 'P1M' and 'P1Y' are calendar months; the other
    units are fixed lengths."""
    m = _ISO.match(text.strip())
    if m and any(m.groupdict().values()):
        parts = {k: int(v) for k, v in m.groupdict().items() if v}
        months = parts.pop("y", 0) * 12 + parts.pop("mo", 0)
        if months and parts:
            raise InvalidArgument(
                f"time_bucket period {text!r}: months or years cannot mix with other units"
            )
        ms = sum(n * _UNIT_MS[k] for k, n in parts.items())
    else:
        try:
            months, ms = 0, parse_duration_ms(text)
        except InvalidArgument:
            raise InvalidArgument(
                f"invalid time_bucket period {text!r}: use e.g. 'PT1M', 'PT1H', 'P1D', 'P1M' "
                "or '5m'"
            ) from None
    if months <= 0 and ms <= 0:
        raise InvalidArgument(f"time_bucket period {text!r} must be positive")
    return months, ms


def offset_ms(zone: str) -> int:
    """A time zone given as a fixed offset ('+0800', '-05:30', 'UTC', 'Z'), in ms."""
    if zone.strip().upper() in ("", "UTC", "Z"):
        return 0
    m = _OFFSET.match(zone.strip())
    if m is None:
        raise InvalidArgument(f"invalid time zone {zone!r}: use an offset like '+0800' or 'UTC'")
    ms = (int(m["h"]) * 60 + int(m["m"])) * 60_000
    return -ms if m["sign"] == "-" else ms


def _time_bucket(ts: pa.Array[Any], period: pa.Array[Any], zone: str = "") -> pa.Array[Any]:
    """Start of the period each timestamp falls in: fixed periods aligned to the epoch, months
    and years to the calendar, both in ``zone`` (UTC by default)."""
    months, ms = _period(str(period[0].as_py()))
    shift = offset_ms(zone)
    values = ts.cast(pa.timestamp("ms")).cast(pa.int64())
    local = values.fill_null(0).to_numpy() + shift
    if months:
        month = local.astype("datetime64[ms]").astype("datetime64[M]").astype(np.int64)
        start = (np.floor_divide(month, months) * months).astype("datetime64[M]")
        floored = start.astype("datetime64[ms]").astype(np.int64)
    else:
        floored = np.floor_divide(local, ms) * ms
    mask = values.is_null().to_numpy(zero_copy_only=False) if values.null_count else None
    return pa.array(floored - shift, pa.int64(), mask=mask).cast(pa.timestamp("ms"))


def bucket_name(arguments: int) -> str:
    """The name time_bucket is registered under for a call of so many arguments (a
    function registered with DataFusion has one signature)."""
    return "time_bucket" if arguments <= 2 else f"time_bucket_{arguments}"


class DistinctCount(datafusion.Accumulator):
    """HoraeDB's thetasketch_distinct: the number of distinct non-null values. HoraeDB
    estimates it with a theta sketch, exact up to its 4096 entries; this count is exact at
    any size (the values of one group are held while it is aggregated)."""

    def __init__(self) -> None:
        self._values: set[Any] = set()

    def update(self, *values: pa.Array[Any]) -> None:
        self._values.update(values[0].drop_null().to_pylist())

    def merge(self, states: list[pa.Array[Any]]) -> None:
        for held in states[0].to_pylist():
            self._values.update(held or ())

    def state(self) -> list[pa.Scalar[Any]]:
        return [pa.scalar(list(self._values), pa.list_(pa.float64()))]

    def evaluate(self) -> pa.Scalar[Any]:
        return pa.scalar(len(self._values), pa.uint64())


def _bucket(ts: pa.Array[Any], period: pa.Array[Any], *extra: pa.Array[Any]) -> pa.Array[Any]:
    if len(ts) == 0:
        # DataFusion calls it on batches of no rows too (with several input partitions),
        # where the period and zone arguments have no first value.
        return pa.array([], pa.timestamp("ms"))
    zone = str(extra[1][0].as_py() or "") if len(extra) >= 2 else ""
    return _time_bucket(ts, period, zone)


def _bucket_inputs(arguments: int) -> list[pa.DataType]:
    return [pa.timestamp("ms"), *[pa.string()] * (arguments - 1)]


#: gnomon's scalar functions: (function, argument types, result type, name).
_SCALARS: tuple[tuple[Callable[..., pa.Array[Any]], list[pa.DataType], pa.DataType, str], ...] = (
    *(
        (_bucket, _bucket_inputs(n), pa.timestamp("ms"), bucket_name(n))
        for n in range(2, 3 + EXTRA_ARGUMENTS)
    ),
    *pg_functions.SCALARS,
)


def register(ctx: datafusion.SessionContext, errors: list[GnomonError] | None = None) -> None:
    """Add gnomon's functions to ``ctx``. Errors they raise are also appended to ``errors``:
    DataFusion would hand them back flattened into text, Python traceback included."""

    def reporting(fn: Callable[..., pa.Array[Any]]) -> Callable[..., pa.Array[Any]]:
        def call(*args: pa.Array[Any]) -> pa.Array[Any]:
            try:
                return fn(*args)
            except GnomonError as e:
                if errors is not None:
                    errors.append(e)
                raise

        return call

    for fn, inputs, output, name in _SCALARS:
        ctx.register_udf(datafusion.udf(reporting(fn), inputs, output, "immutable", name=name))
    ctx.register_udaf(
        datafusion.udaf(
            DistinctCount,
            [pa.float64()],
            pa.uint64(),
            [pa.list_(pa.float64())],
            "immutable",
            name="thetasketch_distinct",
        )
    )
