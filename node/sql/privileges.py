"""What each SQL statement needs: the privilege and the tables it is checked on, asked by the
SQL executor where it plans the statement (so HTTP, gRPC and Flight queries get one answer).

A query needs ``read`` on every table it names; the names are found among its tokens, so a
column spelled like a table also asks for that table (a refusal, never a leak).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from node.security.context import authorize, reads_everything
from node.security.principal import Privilege
from node.sql.ast import (
    AlterAddColumns,
    AlterModifySetting,
    CreateTable,
    Delete,
    Describe,
    DropTable,
    Insert,
    ShowCreateTable,
    Statement,
)
from node.sql.lexer import Token, tokenize


def authorize_statement(stmt: Statement) -> None:
    """PermissionDenied unless the caller may run ``stmt`` (queries: see
    :func:`authorize_query`; SHOW TABLES lists what the caller may read)."""
    match stmt:
        case Insert(table=table) | Delete(table=table):
            authorize(Privilege.WRITE, [table])
        case CreateTable(name=table) | DropTable(name=table):
            authorize(Privilege.ADMIN, [table])
        case AlterAddColumns(table=table) | AlterModifySetting(table=table):
            authorize(Privilege.ADMIN, [table])
        case ShowCreateTable(name=table) | Describe(name=table):
            authorize(Privilege.READ, [table])


def authorize_query(sql: str, tables: Iterable[str], tokens: Sequence[Token] = ()) -> None:
    """PermissionDenied unless the caller may read every one of ``tables`` (the catalog's)
    that the query ``sql`` names, in any case of its letters."""
    if reads_everything():
        return
    by_folded: dict[str, list[str]] = {}
    for t in tables:
        by_folded.setdefault(t.lower(), []).append(t)
    named: dict[str, None] = {}
    for token in tokens or tokenize(sql):
        name = token.identifier
        if name is not None:
            named.update(dict.fromkeys(by_folded.get(name.lower(), ())))
    authorize(Privilege.READ, named)
