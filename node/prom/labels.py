"""How Prometheus series map onto gnomon tables, as HoraeDB maps them: one table per metric
name, each label but ``__name__`` a string TAG column, the sample's time in ``timestamp`` and
its value in the DOUBLE column ``value``."""

from __future__ import annotations

import re

from node.engine.schema import TSID
from node.ingest.writer import TIMESTAMP_COLUMN

METRIC_NAME = "__name__"
VALUE_COLUMN = "value"
#: Columns of a metric's table that are not labels.
NOT_LABELS = frozenset({TSID, TIMESTAMP_COLUMN, VALUE_COLUMN})
#: Prometheus's label name syntax (metric names may also hold ``:``).
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
METRIC_NAME_SYNTAX = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
#: Longest label value stored: Prometheus sets no bound by default; a value this long is a
#: client's mistake rather than a label, and every row of its series would repeat it.
MAX_LABEL_VALUE_BYTES = 64 * 1024
