"""The HoraeDB cases runner's own logic (no server): which SHOW CREATE TABLE answers it
counts with the documented HoraeDB bug of a default TTL."""

from __future__ import annotations

import pytest

from bench.horaedb_cases import ERROR_PREFIX, DefaultTtl, statements

pytestmark = pytest.mark.unit

SQL = """\
CREATE TABLE `plain` (c1 int, t timestamp NOT NULL, TIMESTAMP KEY(t)) ENGINE = Analytic;
CREATE TABLE `kept` (c1 int, t timestamp NOT NULL, TIMESTAMP KEY(t)) WITH (enable_ttl='false');
CREATE TABLE `plain` (c1 int, t timestamp NOT NULL, TIMESTAMP KEY(t)) WITH (ttl='7d');
show create table `plain`;
show create table `kept`;
DROP TABLE `plain`;
CREATE TABLE `plain` (c1 int, t timestamp NOT NULL, TIMESTAMP KEY(t)) WITH (TTL = '7d');
show create table `plain`;
DROP TABLE `plain`;
CREATE TABLE IF NOT EXISTS `plain` (c1 int, t timestamp NOT NULL, TIMESTAMP KEY(t));
SHOW CREATE TABLE plain;
show create table `never_made`;
"""

DEFAULT = (
    "Table,Create Table,\nString(\"x\"),String(\"CREATE ... WITH(enable_ttl='true', ttl='7d')\")"
)
KEPT = (
    "Table,Create Table,\nString(\"x\"),String(\"CREATE ... WITH(enable_ttl='false', ttl='7d')\")"
)
OK = "affected_rows: 0"
FAILED = f"{ERROR_PREFIX}, err: table already exists"


def test_only_tables_created_without_a_ttl_option_showing_the_default_are_bugs() -> None:
    answers = [OK, OK, FAILED, DEFAULT, KEPT, OK, OK, DEFAULT, OK, OK, DEFAULT, DEFAULT]
    ttl = DefaultTtl()
    found = [ttl.bug(s, a) for s, a in zip(statements(SQL), answers, strict=True)]
    shows = [i for i, s in enumerate(statements(SQL)) if s.text.upper().startswith("SHOW")]
    # The failed CREATE with a TTL left the first one in effect; a CREATE naming TTL in any
    # case and spacing is no bug; an answer showing no TTL is none; an unknown table neither.
    assert [found[i] for i in shows] == ["Default TTL", None, None, "Default TTL", None]
    assert [f for i, f in enumerate(found) if i not in shows] == [None] * 7
