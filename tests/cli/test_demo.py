"""The demo loads into a table of its own, once: `make run` (`gnomon standalone --demo`) and
`gnomon demo` never replace rows a user wrote, in ``cpu`` or anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gnomon_app.cli import DEMO_TABLE, main
from node.backends import open_standalone
from node.engine.revisions import Revisions
from node.sql.executor import SqlExecutor
from tests.cli.conftest import start_demo

pytestmark = pytest.mark.integration

CPU = (
    "CREATE TABLE cpu (host string TAG, usage_user double, ts timestamp NOT NULL, "
    "TIMESTAMP KEY(ts))"
)


def test_demo_loads_and_queries(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "demo")
    result = CliRunner().invoke(
        main, ["demo", "--data-dir", data_dir, "--hosts", "6", "--hours", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "loaded 4,320 rows" in result.output
    assert "host_" in result.output
    with open_standalone(data_dir) as e:
        assert e.read_all(DEMO_TABLE).num_rows == 6 * 2 * 360


def test_demo_keeps_a_users_cpu_table_and_loads_once(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "demo")
    with open_standalone(data_dir) as e:
        sql = SqlExecutor(e)
        sql.execute(CPU)
        sql.execute("INSERT INTO cpu (host, usage_user, ts) VALUES ('mine', 1.5, 1000)")
    args = ["demo", "--data-dir", data_dir, "--hosts", "3", "--hours", "1"]
    first = CliRunner().invoke(main, args)
    again = CliRunner().invoke(main, args)
    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert "loaded 1,080 rows" in first.output
    assert "already loaded" in again.output and "loaded 1,080" not in again.output
    with open_standalone(data_dir) as e:
        assert e.read_all("cpu").column("host").to_pylist() == ["mine"]
        assert e.read_all(DEMO_TABLE).num_rows == 3 * 360


def test_a_cut_short_load_is_loaded_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A load interrupted (Ctrl-C) before its revision is committed leaves nothing visible,
    and the next start loads the whole demo instead of keeping half of it."""
    data_dir = str(tmp_path / "demo")
    args = ["demo", "--data-dir", data_dir, "--hosts", "3", "--hours", "2"]

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(Revisions, "commit", interrupted)
        assert CliRunner().invoke(main, args).exit_code != 0
    with open_standalone(data_dir) as e:
        assert e.read_all(DEMO_TABLE).num_rows == 0
    result = CliRunner().invoke(main, args)
    assert "loaded 2,160 rows" in result.output, result.output
    with open_standalone(data_dir) as e:
        assert e.read_all(DEMO_TABLE).num_rows == 3 * 2 * 360
        assert e.revisions.open_revisions(DEMO_TABLE) == []


def test_make_run_twice_keeps_what_a_user_wrote_to_cpu(tmp_path: Path) -> None:
    data_dir = tmp_path / "standalone"
    first = start_demo(data_dir, tmp_path / "first.log")
    try:
        for stmt in (CPU, "INSERT INTO cpu (host, usage_user, ts) VALUES ('mine', 1.5, 1000)"):
            status, body = first.sql(stmt)
            assert status == 200, body
    finally:
        first.stop()
    second = start_demo(data_dir, tmp_path / "second.log")
    try:
        status, body = second.sql("SELECT host, usage_user FROM cpu")
        assert status == 200 and body["rows"] == [{"host": "mine", "usage_user": 1.5}], body
        status, body = second.sql(f"SELECT count(*) AS n FROM {DEMO_TABLE}")
        assert status == 200 and body["rows"] == [{"n": 100 * 24 * 360}], body
    finally:
        second.stop()
    assert "already loaded" in (tmp_path / "second.log").read_text()


def test_help_lists_commands() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "demo" in result.output
