"""What the HTTP server answers: a status, a body and its type, written as one HTTP/1.1
message with gnomon's headers. Errors are JSON ``{"code": <HTTP status>, "message": ...}``."""

from __future__ import annotations

import email.utils
import functools
import json
import time
from http import HTTPStatus
from typing import Any

#: The media type of an Arrow IPC stream (what ``/sql?format=arrow`` answers).
ARROW_STREAM = "application/vnd.apache.arrow.stream"
#: The header of an Arrow answer cut to the ``max_rows`` its request asked for: how many rows
#: the whole answer had (a JSON answer says it as ``total_rows``).
TOTAL_ROWS_HEADER = "Gnomon-Total-Rows"
#: Answers up to this size go out in one write, headers and body copied together; larger ones
#: as headers then body, without the copy.
ONE_WRITE_BYTES = 256 * 1024
#: Reason phrases by status code (an HTTPStatus lookup per answer costs more than a dict's).
_PHRASES = {int(status): status.phrase for status in HTTPStatus}


class Response:
    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        status: int,
        body: bytes | memoryview = b"",
        content_type: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}


def json_answer(status: int, obj: Any) -> Response:
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)
    return Response(status, body.encode(), "application/json; charset=utf-8")


def error(status: int, message: str) -> Response:
    return json_answer(status, {"code": status, "message": message})


#: The answer to a write (it has no body), shared.
NO_CONTENT = Response(204)


def head(resp: Response, date: str, close: bool) -> bytes:
    """The status line and headers of ``resp``."""
    lines = [f"HTTP/1.1 {resp.status} {_PHRASES[resp.status]}", "Server: gnomon", f"Date: {date}"]
    if resp.content_type:
        lines.append(f"Content-Type: {resp.content_type}")
    lines.extend(f"{name}: {value}" for name, value in resp.headers.items())
    if resp.status != 204:
        lines.append(f"Content-Length: {len(resp.body)}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@functools.lru_cache(maxsize=4)
def no_content_head(date: str, close: bool) -> bytes:
    """The whole answer to a write (most answers are), built once a second."""
    return head(NO_CONTENT, date, close)


@functools.lru_cache(maxsize=2)
def _date_of(second: int) -> str:
    return email.utils.formatdate(second, usegmt=True)


def http_date() -> str:
    """The Date header's value, formatted once a second."""
    return _date_of(int(time.time()))
