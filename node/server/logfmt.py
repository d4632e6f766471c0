"""One JSON object per log line, with the ``extra`` fields of the call as keys, so the
servers' structured fields (table, rpc, status, error...) survive into the log."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

#: Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Every record as one line of valid JSON, whatever its message and fields hold: quotes
    and newlines escaped, values JSON lacks (NaN, bytes, objects, dicts with other keys than
    strings) as their text. An extra field never replaces ts, level, logger or msg."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                doc.setdefault(key, value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        try:
            return json.dumps(doc, default=repr, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):  # a non-finite float, a key JSON cannot have
            return json.dumps({k: _text(v) for k, v in doc.items()}, ensure_ascii=False)


def _text(value: object) -> object:
    return value if isinstance(value, str | int | bool) or value is None else repr(value)


def configure(level: str = "INFO") -> None:
    """Send every gnomon log record to stderr as JSON lines at ``level``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
