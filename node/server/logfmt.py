"""One JSON object per log line, with the ``extra`` fields of the call as keys, so the
servers' structured fields (table, rpc, status, error...) survive into the log."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

#: Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=repr, ensure_ascii=False)


def configure(level: str = "INFO") -> None:
    """Send every gnomon log record to stderr as JSON lines at ``level``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
