"""pgjdbc, the driver DBeaver (and most Java tools) reach PostgreSQL with, unmodified (Debian's
package, `make pgjdbc`), run by a small Java program (jdbc/Probe.java) that asks what
DBeaver's navigator asks through it: the schemas, the tables and a table's columns from
DatabaseMetaData, whose queries read pg_catalog, then a prepared query. Answers are compared
with SHOW TABLES, DESCRIBE and the same query over HTTP /sql."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.pgwire.conftest import PgRunning

pytestmark = pytest.mark.integration

DRIVER = Path("/usr/share/java/postgresql.jar")
SOURCE = Path(__file__).parent / "jdbc" / "Probe.java"
QUERY = "SELECT host, cores FROM cpu WHERE cores > ? ORDER BY host"


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not DRIVER.is_file() or shutil.which("javac") is None:
        pytest.fail("pgjdbc and a JDK are installed by `make pgjdbc` (make test runs it)")
    classes = tmp_path_factory.mktemp("jdbc")
    subprocess.run(["javac", "-d", str(classes), str(SOURCE)], check=True, timeout=120)
    return classes


def _ask(pg: PgRunning, classes: Path, table: str) -> dict[str, list[dict[str, str]]]:
    done = subprocess.run(
        [
            "java",
            "-cp",
            f"{classes}:{DRIVER}",
            "Probe",
            f"jdbc:postgresql://127.0.0.1:{pg.pg_port}/gnomon?connectTimeout=10",
            "gnomon",
            "",
            table,
            QUERY,
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers: dict[str, list[dict[str, str]]] = {}
    for line in done.stdout.splitlines():
        what, *cells = line.split("\t")
        if cells != ["end"]:
            answers.setdefault(what, []).append(dict(c.split("=", 1) for c in cells))
    return answers


def test_dbeavers_navigator_through_pgjdbc(pg: PgRunning, probe: Path) -> None:
    answers = _ask(pg, probe, "cpu")
    assert answers["product"] == [{"name": "PostgreSQL", "version": "15.0 (gnomon)"}]
    assert [s["table_schem"] for s in answers["schemas"]] == [
        "information_schema",
        "pg_catalog",
        "public",
    ]
    tables = [(t["table_schem"], t["table_name"], t["table_type"]) for t in answers["tables"]]
    shown = sorted(r["Tables"] for r in pg.http_rows("SHOW TABLES"))
    assert tables == [("public", name, "TABLE") for name in shown]
    described = pg.http_rows("DESCRIBE cpu")
    columns = answers["columns"]
    assert [c["column_name"] for c in columns] == [r["name"] for r in described]
    # java.sql.Types: BIGINT -5, BIT -7, DOUBLE 8, NUMERIC 2, TIMESTAMP 93, VARCHAR 12.
    assert {c["column_name"]: (c["type_name"], c["data_type"]) for c in columns} == {
        "tsid": ("numeric", "2"),
        "ts": ("timestamp", "93"),
        "host": ("text", "12"),
        "usage": ("float8", "8"),
        "cores": ("int8", "-5"),
        "up": ("bool", "-7"),
    }
    assert [c["is_nullable"] for c in columns] == [
        "NO" if not r["is_nullable"] else "YES" for r in described
    ]
    over_http = pg.http_rows(QUERY.replace("?", "4"))
    assert answers["query"] == [{"host": r["host"], "cores": str(r["cores"])} for r in over_http]
    assert len(answers["query"]) == 2


def test_an_unknown_table_has_no_columns(pg: PgRunning, probe: Path) -> None:
    assert "columns" not in _ask(pg, probe, "nope")
