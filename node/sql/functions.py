"""SQL functions gnomon adds to DataFusion's own (which already has date_bin and
approx_distinct)."""

from __future__ import annotations

import re
from typing import Any

import datafusion
import numpy as np
import pyarrow as pa

from gnomon.errors import GnomonError, InvalidArgument
from node.engine.options import parse_duration_ms

_ISO = re.compile(
    r"^P(?:(?P<w>\d+)W)?(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+)S)?)?$",
    re.IGNORECASE,
)
_UNIT_MS = {"w": 604_800_000, "d": 86_400_000, "h": 3_600_000, "m": 60_000, "s": 1000}


def period_ms(text: str) -> int:
    """An ISO-8601 period ('PT1H', 'P1D') or a short duration ('1h', '30s') in ms."""
    m = _ISO.match(text.strip())
    if m and any(m.groupdict().values()):
        ms = sum(int(v) * _UNIT_MS[k] for k, v in m.groupdict().items() if v)
    else:
        try:
            ms = parse_duration_ms(text)
        except InvalidArgument:
            raise InvalidArgument(
                f"invalid time_bucket period {text!r}: use e.g. 'PT1M', 'PT1H', 'P1D' or '5m'"
            ) from None
    if ms <= 0:
        raise InvalidArgument(f"time_bucket period {text!r} must be positive")
    return ms


def _time_bucket(ts: pa.Array[Any], period: pa.Array[Any]) -> pa.Array[Any]:
    """Start of the period each timestamp falls in (periods aligned to the epoch)."""
    ms = period_ms(str(period[0].as_py()))
    values = ts.cast(pa.timestamp("ms")).cast(pa.int64())
    floored = np.floor_divide(values.fill_null(0).to_numpy(), ms) * ms
    mask = values.is_null().to_numpy(zero_copy_only=False) if values.null_count else None
    return pa.array(floored, pa.int64(), mask=mask).cast(pa.timestamp("ms"))


def register(ctx: datafusion.SessionContext, errors: list[GnomonError] | None = None) -> None:
    """Add gnomon's functions to ``ctx``. Errors they raise are also appended to ``errors``:
    DataFusion would hand them back flattened into text, Python traceback included."""

    def time_bucket(ts: pa.Array[Any], period: pa.Array[Any]) -> pa.Array[Any]:
        try:
            return _time_bucket(ts, period)
        except GnomonError as e:
            if errors is not None:
                errors.append(e)
            raise

    ctx.register_udf(
        datafusion.udf(
            time_bucket,
            [pa.timestamp("ms"), pa.string()],
            pa.timestamp("ms"),
            "immutable",
            name="time_bucket",
        )
    )
