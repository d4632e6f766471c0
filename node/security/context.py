"""The caller a request acts as, and the authorisation checks made where statements and
writes are planned (the SQL executor, the ingestor, the Flight service), so every interface
gives the same answer.

A server with authentication on authenticates each request and runs it under
:func:`acting_as`; what runs without a principal is the process's own work (the demo loader,
tests embedding an engine) or a server without authentication, and is not checked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import TypeVar

from gnomon.errors import PermissionDenied
from node.security.principal import CLUSTER, DATABASE, Principal, Privilege

T = TypeVar("T")

_current: ContextVar[Principal | None] = ContextVar("gnomon_principal", default=None)


def current() -> Principal | None:
    return _current.get()


def on_behalf_of() -> str | None:
    """The user a call this node makes to another for the current request acts for (None:
    no user, as when authentication is off or the request came from the cluster itself)."""
    principal = _current.get()
    return None if principal is None or principal is CLUSTER else principal.name


@contextlib.contextmanager
def acting_as(principal: Principal | None) -> Iterator[None]:
    reset = _current.set(principal)
    try:
        yield
    finally:
        _current.reset(reset)


def run_as(principal: Principal | None, fn: Callable[[], T]) -> Callable[[], T]:
    """``fn`` run as ``principal`` wherever it is called (a pool thread does not inherit the
    caller's context)."""

    def call() -> T:
        with acting_as(principal):
            return fn()

    return call


def authorize(privilege: Privilege, tables: Iterable[str | None]) -> None:
    """PermissionDenied unless the current caller has ``privilege`` on every table named
    (None: the database, as creating a table by writing to it needs)."""
    principal = _current.get()
    if principal is None or principal.superuser:
        return
    for table in tables:
        if not principal.allows(privilege, table):
            what = f"table {table!r}" if table is not None else f"database {DATABASE!r}"
            raise PermissionDenied(
                f"user {principal.name!r} may not {_VERB[privilege]} {what} "
                f"(needs {privilege.label}; ask an admin: gnomon admin grants add)"
            )


def visible(tables: Iterable[str]) -> list[str]:
    """The ``tables`` the current caller may read (what SHOW TABLES lists)."""
    principal = _current.get()
    if principal is None or principal.allows_everywhere(Privilege.READ):
        return list(tables)
    return [t for t in tables if principal.allows(Privilege.READ, t)]


def may_know(table: str) -> bool:
    """Whether the current caller may learn that ``table`` exists and where it lives: one
    with no privilege on it is answered as if it did not."""
    principal = _current.get()
    # Every grant includes read.
    return principal is None or principal.superuser or principal.allows(Privilege.READ, table)


def reads_everything() -> bool:
    """Whether the current caller may read every table (no per-table check is needed)."""
    principal = _current.get()
    return principal is None or principal.allows_everywhere(Privilege.READ)


_VERB = {Privilege.READ: "read", Privilege.WRITE: "write to", Privilege.ADMIN: "change"}
