"""Error → wire status mapping shared by the servers."""

from __future__ import annotations

from gnomon.errors import GnomonError, Status


def message_of(e: BaseException) -> str:
    if isinstance(e, GnomonError):
        return e.message
    return f"internal error: {type(e).__name__}: {e}"


def http_status(e: BaseException) -> int:
    """The HTTP status of an error: the gnomon Status code itself (400, 404, 409, 413, ...);
    419 (a lost race, retryable) is reported as 409 Conflict, which HTTP clients know."""
    if not isinstance(e, GnomonError):
        return 500
    if e.status is Status.CONFLICT:
        return 409
    return int(e.status)


def horaedb_code(e: BaseException) -> int:
    """The ``ResponseHeader.code`` HoraeDB would send: 400 for a bad request, else 500. HoraeDB
    reports planning failures such as an unknown table as 500 too, and its SDKs treat any code
    but 200 as failure, so finer codes would only differ from what its users expect; a
    refusal of the caller's grants is 403."""
    if isinstance(e, GnomonError) and e.status in (Status.INVALID_ARGUMENT, Status.TOO_LARGE):
        return 400
    if isinstance(e, GnomonError) and e.status in _AUTH:
        return int(e.status)  # HoraeDB has none; an SDK shows the code with the message
    return 500


_AUTH = (Status.UNAUTHENTICATED, Status.PERMISSION_DENIED)
