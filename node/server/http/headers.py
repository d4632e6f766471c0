"""A request's headers as the parser hands them over, and the bounds on them."""

from __future__ import annotations

from typing import overload

#: Most request headers taken, and longest header line, as the standard library allows.
MAX_HEADERS = 100
MAX_HEADER_LINE = 65536
#: Most bytes of one request's head (request line and headers) held while it is parsed.
MAX_HEAD_BYTES = MAX_HEADERS * MAX_HEADER_LINE


class RequestHeaders:
    """A request's headers by name, whatever its case. A repeated header answers its first
    value."""

    def __init__(self, fields: list[list[str]]) -> None:
        self._values: dict[str, list[str]] = {}
        for name, value in fields:
            self._values.setdefault(name.lower(), []).append(value)

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._values.get(name.lower())
        return values[0] if values else default
