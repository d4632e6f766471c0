"""Who a request acts as, and what its grants let it do.

Privileges are ordered: ``admin`` includes ``write``, which includes ``read``. A grant gives
one privilege on one table of a database, or on every table of it (table ``*``). A grant on a
partition table covers its sub-tables (``__<table>_<i>``), which statements never name but
writes and queries reach through it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from gnomon.errors import InvalidArgument

#: The one database gnomon has (HoraeDB's default schema).
DATABASE = "public"
#: A grant's table standing for every table of its database, those made later included.
EVERY_TABLE = "*"

_SUB_TABLE = re.compile(r"^__(.+)_\d+$")


class Privilege(IntEnum):
    """What a grant allows, each level including the ones below it: ``read`` (queries, SHOW,
    DESCRIBE, Flight reads), ``write`` (INSERT, DELETE, line protocol, gRPC and Flight
    writes, Spark revisions; creating a table by writing to it needs ``write`` on the
    database), ``admin`` (CREATE, ALTER and DROP TABLE)."""

    READ = 1
    WRITE = 2
    ADMIN = 3

    @classmethod
    def parse(cls, text: str) -> Privilege:
        try:
            return cls[text.upper()]
        except KeyError:
            raise InvalidArgument(
                f"unknown privilege {text!r}: one of read, write, admin"
            ) from None

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Grant:
    user: str
    database: str
    table: str
    privilege: Privilege

    def covers(self, privilege: Privilege, database: str, table: str | None) -> bool:
        """Whether this grant allows ``privilege`` on ``table`` (None: the database as a
        whole, as creating a table needs)."""
        if self.database != database or self.privilege < privilege:
            return False
        if self.table == EVERY_TABLE:
            return True
        if table is None:
            return False
        if self.table == table:
            return True
        sub = _SUB_TABLE.match(table)
        return sub is not None and sub.group(1) == self.table


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: a user (with ``via`` saying how it proved it: password,
    token) or another node of the cluster (a superuser, see :data:`CLUSTER`)."""

    name: str
    superuser: bool = False
    grants: tuple[Grant, ...] = ()
    via: str = "password"

    def allows(self, privilege: Privilege, table: str | None, database: str = DATABASE) -> bool:
        return self.superuser or any(g.covers(privilege, database, table) for g in self.grants)

    def allows_everywhere(self, privilege: Privilege, database: str = DATABASE) -> bool:
        """Whether ``privilege`` is allowed on every table (so no per-table check is needed)."""
        return self.allows(privilege, None, database)


#: Another node of the cluster, proven by the cluster secret: it forwards calls whose
#: statements its own node already authorised, or acts for the meta service.
CLUSTER = Principal("cluster", superuser=True, via="cluster secret")
