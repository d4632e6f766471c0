"""gnomon's errors as SQLSTATE codes: by class where the class says more, else by status, so
an owner's refusal passed on by another node reads as it does at the owner."""

from __future__ import annotations

import pytest

from gnomon.errors import (
    Cancelled,
    DeadlineExceeded,
    GnomonError,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Status,
    UnknownTable,
)
from node.server.forwarding import Forwarded
from node.server.pgwire.sqlstate import sqlstate

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (PermissionDenied("user 'u' may not read table 't'"), "42501"),
        (Forwarded(int(Status.PERMISSION_DENIED), "may not write to table 't' (at n1)"), "42501"),
        (Forwarded(int(Status.INVALID_ARGUMENT), "bad SQL (at n1)"), "42601"),
        (Forwarded(int(Status.INTERNAL), "broke (at n1)"), "53000"),
        (UnknownTable("table 'x' not found"), "42P01"),
        (NotFound("table 'x' not found"), "42P01"),
        (NotFound("user 'x' not found"), "42704"),
        (InvalidArgument("bad"), "42601"),
        (Cancelled("cancelled"), "57014"),
        (DeadlineExceeded("too slow"), "57014"),
        (GnomonError("broke"), "XX000"),
        (ValueError("not ours"), "XX000"),
    ],
)
def test_an_error_reads_as_its_sqlstate(error: BaseException, code: str) -> None:
    assert sqlstate(error) == code
