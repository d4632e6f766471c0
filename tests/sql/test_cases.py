"""The file-based SQL cases (tests/sql/cases/*.sql; the format is described in runner.py),
one test per file, plus checks of the runner itself."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import node.sql.session as session_module
from tests.sql import runner

pytestmark = pytest.mark.unit

CASE_FILES = sorted(runner.CASES_DIR.glob("*.sql"))


@pytest.mark.parametrize("streamed", [False, True], ids=["in-memory", "streamed"])
@pytest.mark.parametrize("path", CASE_FILES, ids=[p.stem for p in CASE_FILES])
def test_case_file(path: Path, streamed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # Queries over one table read small scans up front; streamed, DataFusion pulls every
    # scan through the engine's dataset. Both must answer alike.
    if streamed:
        monkeypatch.setattr(session_module, "SMALL_SCAN_VALUES", -1)
    assert runner.check_file(path) > 0


def test_there_are_enough_cases() -> None:
    counts = {p.stem: len(runner.parse_file(p).cases) for p in CASE_FILES}
    for theme in (
        "ddl",
        "dml",
        "filters",
        "ordering",
        "aggregates_having",
        "time_functions",
        "show_create_round_trip",
        "time_travel",
        "deletes",
        "errors",
    ):
        assert counts.get(theme, 0) > 0, f"no cases in {theme}.sql"
    assert sum(counts.values()) >= 40, counts


# -- the runner ----------------------------------------------------------------------------------

SETUP = """\
CREATE TABLE t (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts));
INSERT INTO t (host, v, ts) VALUES ('a', 1.5, 1000), ('b', NULL, 2000);
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "case.sql"
    path.write_text(SETUP + text)
    return path


def test_mismatch_shows_a_diff_the_statement_and_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\nSELECT host, v FROM t ORDER BY host;\n-- expect\nhost | v\na | 1.5\nb | 2.0\n",
    )
    with pytest.raises(AssertionError) as info:
        runner.check_file(path)
    text = str(info.value)
    assert f"{path}:4:" in text
    assert "SELECT host, v FROM t ORDER BY host;" in text
    assert "--- expected" in text and "+++ actual" in text
    assert "-b | 2.0" in text and "+b | NULL" in text


def test_padding_does_not_matter_and_rowsort_sorts(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\nSELECT host, v FROM t;\n-- expect rowsort\n  host|v  \nb|NULL\na   |   1.5\n",
    )
    assert runner.check_file(path) == 1


def test_error_and_affected_expectations(tmp_path: Path) -> None:
    ok = write(
        tmp_path,
        "\nSELECT * FROM nope;\n-- expect error NotFound: 'nope'\n"
        "INSERT INTO t (host, ts) VALUES ('c', 3000);\n-- expect affected 1\n",
    )
    assert runner.check_file(ok) == 2
    for wrong in (
        "-- expect error InvalidArgument: 'nope'",  # other class
        "-- expect error NotFound: 'other'",  # other message
        "-- expect affected 0",  # not an affected count
    ):
        path = write(tmp_path, f"\nSELECT * FROM nope;\n{wrong}\n")
        with pytest.raises(AssertionError, match="result differs"):
            runner.check_file(path)


def test_setup_statements_must_succeed(tmp_path: Path) -> None:
    path = write(tmp_path, "\nSELECT * FROM nope;\n")
    with pytest.raises(AssertionError, match="setup statement failed"):
        runner.check_file(path)


def test_malformed_files_are_rejected(tmp_path: Path) -> None:
    for text, message in (
        ("SELECT 1 AS one;\n-- expext\none\n1\n", "expected '-- expect"),
        ("-- expect affected 1\n", "must follow a statement"),
        ("SELECT 1 AS one\n\n", "does not end with ';'"),
        ("SELECT 1 AS one;\n-- expect error NoSuchError\n", "unknown error class"),
        ("SELECT 1 AS one;\n-- expect something\n", "unknown expectation"),
    ):
        with pytest.raises(runner.CaseFileError, match=message):
            runner.parse_lines(text.splitlines())


def test_update_rewrites_expectations(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\nSELECT host, v FROM t ORDER BY host;\n-- expect\n\n"
        "SELECT * FROM nope;\n-- expect error NotFound: 'nope'\n"
        "-- flush\n"
        "DELETE FROM t WHERE host = 'a';\n-- expect affected 7\n"
        "SELECT count(*) AS n FROM t;\n-- expect\nn\n9\n",
    )
    assert runner.update_file(path) == 3
    text = path.read_text()
    assert "host | v\na    | 1.5\nb    | NULL\n\nSELECT * FROM nope;" in text
    assert "-- expect error NotFound: 'nope'\n" in text  # still matching: kept as written
    assert "-- expect affected 1\n" in text
    assert text.endswith("-- expect\nn\n1\n")
    assert runner.check_file(path) == 4


def test_rendering() -> None:
    table = pa.table(
        {
            "ts": pa.array([0, 1500, -1, None], pa.timestamp("ms")),
            "s": ["x", "", "a|b", "NULL"],
            "f": [0.1, float("inf"), None, -0.0],
            "b": [True, False, None, True],
        }
    )
    assert runner.render_table(table) == [
        "ts                      | s      | f    | b",
        "1970-01-01T00:00:00     | x      | 0.1  | true",
        "1970-01-01T00:00:01.500 | ''     | inf  | false",
        "1969-12-31T23:59:59.999 | 'a|b'  | NULL | NULL",
        "NULL                    | 'NULL' | -0.0 | true",
    ]
