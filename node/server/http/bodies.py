"""Reading request bodies: JSON, line protocol, gzip, and the parameters that say how."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

from gnomon.errors import InvalidArgument, TooLarge
from node.server.http.answers import ARROW_STREAM

#: The one database gnomon has (HoraeDB's default schema).
DATABASE = "public"


def json_body(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"request body is not valid JSON: {e}") from None
    except RecursionError:
        # The parser recurses once per nesting level: ``[[[[...`` exhausts the stack.
        raise InvalidArgument("request body is not valid JSON: nested too deeply") from None


def max_rows(doc: Mapping[str, Any]) -> int | None:
    """The ``max_rows`` of a /sql body: the most rows of a query's answer to send (a shell
    shows that many); None when it asks for them all."""
    value = doc.get("max_rows")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(f'"max_rows" must be a whole number from 0, got {value!r}')
    return value


def wants_arrow(params: Mapping[str, list[str]], accept: str) -> bool:
    """Whether a /sql client asks for Arrow: ``?format=arrow`` (or ``json``), else an Accept
    header naming the Arrow stream type."""
    fmt = params.get("format", [""])[-1].lower()
    if fmt not in ("", "json", "arrow"):
        raise InvalidArgument(f"unknown format {fmt!r}: use json or arrow")
    return fmt == "arrow" or (not fmt and ARROW_STREAM in accept)


def check_database(params: Mapping[str, list[str]]) -> None:
    db = params.get("db", [DATABASE])[-1]
    if db and db != DATABASE:
        raise InvalidArgument(
            f"database {db!r} does not exist: gnomon has one database, {DATABASE!r}"
        )


def line_protocol_text(body: bytes, params: Mapping[str, list[str]]) -> tuple[str, str]:
    """A line-protocol write's text and precision, once its database is checked."""
    check_database(params)
    try:
        text = body.decode()
    except UnicodeDecodeError as e:
        raise InvalidArgument(f"line protocol body is not UTF-8: {e}") from None
    return text, params.get("precision", ["ns"])[-1] or "ns"


def _gunzip(data: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as e:
        raise InvalidArgument(f"request body is not valid gzip: {e}") from None
    if len(out) > limit:
        raise TooLarge(
            f"decompressed request body exceeds the limit of {limit} bytes; split it into "
            "smaller requests"
        )
    return out


def decoded(body: bytes, encoding: str, limit: int) -> bytes:
    """The request body as sent before its Content-Encoding (identity or gzip)."""
    if encoding == "gzip":
        return _gunzip(body, limit)
    if encoding not in ("identity", ""):
        raise InvalidArgument(f"unsupported Content-Encoding {encoding!r}: use gzip")
    return body


def too_large(limit: int, length: int | None = None) -> TooLarge:
    if length is None:
        return TooLarge(
            f"request body exceeds the limit of {limit} bytes; split it into smaller requests"
        )
    return TooLarge(
        f"request body of {length} bytes exceeds the limit of {limit} bytes; "
        "split it into smaller requests"
    )
