"""File-based SQL cases: every ``tests/sql/cases/*.sql`` file runs on a fresh engine, its
statements in order, each checked against the expectation written after it.

File format
-----------
Read top to bottom, line by line:

* A statement is SQL text, on one line or several, ended by a line whose last character is
  ``;``. A statement directly followed by an expectation is a *case*; one without an
  expectation is setup and must simply succeed.
* Expectations, on the line right after the statement::

      -- expect                    the rows of a query: a header line with the column names,
      host | m                     then one line per row, cells separated by '|' (spaces
      a    | 2.5                   around '|' do not matter); the block ends at the first
      b    | 3.0                   blank line (or the end of the file)
      -- expect rowsort            the same, but rows are compared sorted (a query whose
                                   ORDER BY is not total, or that has none)
      -- expect affected 3         a statement returning an affected-row count (INSERT,
                                   DELETE, DDL)
      -- expect error NotFound: 'nope'
                                   the statement fails with that ``gnomon.errors`` class (or a
                                   subclass) and a message containing the text after ':'
                                   (which is optional); anything else is a mismatch: a
                                   plain Python exception, or a message that carries a
                                   Python traceback
* Directives, each on its own line, run between statements::

      -- flush [table]             flush every table (or one) to SSTs
      -- compact table             compact a table now
      -- reopen                    close the engine and open it again on the same directory
* Any other line starting with ``--`` is a comment, and blank lines are ignored, except right
  after a statement, where a ``--`` line must be an expectation or a directive (so a
  misspelled ``-- expect`` is an error, not a silently skipped check).

Rendering of values
-------------------
NULL for null, true/false, integers in decimal, floats with ``repr`` (``2.5``, ``inf``,
``nan``), timestamps as ISO-8601 (``2024-01-01T00:00:01``, a fraction only when not zero:
``...01.500``), dates as ``2024-01-01``, bytes as ``0x6162``, lists as ``[1, 2]``. Strings are
written as they are, unless that would be ambiguous (empty, surrounding spaces, containing
'|' or a line break, starting with a quote, or spelling NULL): then with ``repr``.

Regenerating
------------
``python -m tests.sql.runner --update FILE...`` rewrites every expectation block of the files
from what the statements return now (an ``error`` expectation that still matches is kept as
written). The expectations are the specification: review every changed line by hand.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from gnomon import errors
from node.backends import open_standalone
from node.engine.engine import Engine
from node.sql.executor import SqlExecutor

CASES_DIR = Path(__file__).parent / "cases"

_EXPECT = re.compile(r"^--\s*expect\b\s*(?P<rest>.*)$", re.IGNORECASE)
_DIRECTIVE = re.compile(r"^--\s*(?P<name>flush|compact|reopen)\b\s*(?P<arg>.*)$", re.IGNORECASE)
_ERROR = re.compile(r"^error\s+(?P<cls>\w+)\s*(?::\s?(?P<text>.*))?$", re.IGNORECASE)
_AFFECTED = re.compile(r"^affected\s+(?P<n>\d+)$", re.IGNORECASE)


class CaseFileError(ValueError):
    """The case file itself is malformed."""


@dataclass
class Expectation:
    kind: str  # "rows" | "rowsort" | "affected" | "error"
    #: 0-based line index of the ``-- expect`` line, and the index after the block.
    start: int
    stop: int
    rows: list[str] = field(default_factory=list)
    affected: int | None = None
    error_class: str | None = None
    error_text: str | None = None


@dataclass
class Step:
    #: 1-based line where the statement (or directive) starts.
    line: int
    sql: str | None = None
    directive: tuple[str, str] | None = None
    expect: Expectation | None = None


@dataclass
class CaseFile:
    path: Path
    lines: list[str]
    steps: list[Step]

    @property
    def cases(self) -> list[Step]:
        return [s for s in self.steps if s.expect is not None]


# -- parsing -------------------------------------------------------------------------------------


def parse_file(path: Path) -> CaseFile:
    lines = path.read_text().splitlines()
    return CaseFile(path, lines, parse_lines(lines, str(path)))


def parse_lines(lines: list[str], name: str = "<cases>") -> list[Step]:
    steps: list[Step] = []
    i, n = 0, len(lines)

    def fail(at: int, msg: str) -> CaseFileError:
        return CaseFileError(f"{name}:{at + 1}: {msg}")

    while i < n:
        text = lines[i].strip()
        if not text:
            i += 1
            continue
        if text.startswith("--"):
            if _EXPECT.match(text):
                raise fail(i, "an expectation must follow a statement")
            d = _DIRECTIVE.match(text)
            if d:
                steps.append(Step(i + 1, directive=(d["name"].lower(), d["arg"].strip())))
            i += 1
            continue
        start = i
        body: list[str] = []
        while True:
            body.append(lines[i])
            if lines[i].rstrip().endswith(";"):
                break
            i += 1
            if i >= n:
                raise fail(start, "statement does not end with ';'")
            if not lines[i].strip() or lines[i].strip().startswith("--"):
                raise fail(i, "statement does not end with ';' before this line")
        i += 1
        step = Step(start + 1, sql="\n".join(body).strip())
        steps.append(step)
        if i < n and lines[i].strip().startswith("--"):
            m = _EXPECT.match(lines[i].strip())
            if m:
                step.expect, i = _parse_expectation(lines, i, m["rest"].strip(), fail)
            elif not _DIRECTIVE.match(lines[i].strip()):
                raise fail(i, f"after a statement expected '-- expect ...', got {lines[i]!r}")
    return steps


def _parse_expectation(lines: list[str], i: int, rest: str, fail: Any) -> tuple[Expectation, int]:
    if not rest or rest.lower() == "rowsort":
        j = i + 1
        while j < len(lines) and lines[j].strip():
            j += 1
        kind = "rowsort" if rest else "rows"
        return Expectation(kind, i, j, rows=[ln.strip() for ln in lines[i + 1 : j]]), j
    a = _AFFECTED.match(rest)
    if a:
        return Expectation("affected", i, i + 1, affected=int(a["n"])), i + 1
    e = _ERROR.match(rest)
    if e:
        cls = getattr(errors, e["cls"], None)
        if not (isinstance(cls, type) and issubclass(cls, errors.GnomonError)):
            raise fail(i, f"unknown error class {e['cls']!r} (see gnomon.errors)")
        text = e["text"].strip() if e["text"] else None
        return Expectation("error", i, i + 1, error_class=e["cls"], error_text=text or None), i + 1
    raise fail(i, f"unknown expectation {rest!r}")


# -- rendering -----------------------------------------------------------------------------------

_PLAIN = re.compile(r"^[^\s'\"|](?:[^|\n\r]*[^\s|])?$")


def render_value(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return v if _PLAIN.match(v) and v != "NULL" else repr(v)
    if isinstance(v, bytes):
        return "0x" + v.hex()
    if isinstance(v, list):
        return "[" + ", ".join(render_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {render_value(x)}" for k, x in v.items()) + "}"
    if hasattr(v, "isoformat"):
        return str(v.isoformat())
    return str(v)


def _render_timestamp(v: int | None, unit: str, tz: str | None) -> str:
    if v is None:
        return "NULL"
    text = str(np.datetime64(v, unit))
    whole, _, frac = text.partition(".")
    out = whole if not frac.strip("0") else text
    return out if tz is None else f"{out}[{tz}]"


def render_column(col: pa.ChunkedArray | pa.Array[Any]) -> list[str]:
    t = col.type
    if pa.types.is_dictionary(t):
        col = col.cast(t.value_type)
        t = t.value_type
    if pa.types.is_timestamp(t):
        ints = col.cast(pa.int64()).to_pylist()
        return [_render_timestamp(v, t.unit, t.tz) for v in ints]
    return [render_value(v) for v in col.to_pylist()]


def render_table(table: pa.Table) -> list[str]:
    """Header and rows, cells padded to line up (comparison ignores the padding)."""
    columns = [[name, *render_column(table.column(i))] for i, name in enumerate(table.column_names)]
    widths = [max(len(c) for c in col) for col in columns]
    return [
        " | ".join(col[r].ljust(w) for col, w in zip(columns, widths, strict=True)).rstrip()
        for r in range(table.num_rows + 1)
    ]


def normalize(line: str) -> str:
    return re.sub(r"\s*\|\s*", " | ", line.strip())


# -- running -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one statement did, rendered as the lines of an expectation block."""

    rows: list[str] | None = None
    affected: int | None = None
    error: BaseException | None = None

    def describe(self) -> list[str]:
        if self.error is not None:
            return [f"error {type(self.error).__name__}: {self.error}"]
        if self.affected is not None:
            return [f"affected {self.affected}"]
        return list(self.rows or [])


class Session:
    """One engine on a temporary directory, opened fresh per case file."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.engine = self._open()
        self.sql = SqlExecutor(self.engine)

    def _open(self) -> Engine:
        # No background compaction or GC: manifest versions (time travel) stay deterministic.
        return open_standalone(
            self.data_dir, wal_sync="never", compaction_threads=0, gc_interval_s=0
        )

    def directive(self, name: str, arg: str) -> None:
        if name == "flush":
            self.engine.flush(arg or None)
        elif name == "compact":
            if not arg:
                raise CaseFileError("-- compact needs a table name")
            self.engine.compact(arg)
        elif name == "reopen":
            self.engine.close()
            self.engine = self._open()
            self.sql = SqlExecutor(self.engine)

    def run(self, sql: str) -> Outcome:
        try:
            result = self.sql.execute(sql)
        except Exception as e:
            return Outcome(error=e)
        if result.is_query:
            return Outcome(rows=render_table(result.table()))
        return Outcome(affected=result.affected_rows)

    def close(self) -> None:
        self.engine.close()


#: An error message must not carry a Python traceback (e.g. one DataFusion flattened).
_LEAK = "Traceback (most recent call last)"


def _matches(exp: Expectation, got: Outcome) -> bool:
    if exp.kind == "error":
        cls = getattr(errors, exp.error_class or "")
        return (
            got.error is not None
            and isinstance(got.error, cls)
            and (exp.error_text is None or exp.error_text in str(got.error))
            and _LEAK not in str(got.error)
        )
    if exp.kind == "affected":
        return got.error is None and got.rows is None and got.affected == exp.affected
    if got.rows is None:
        return False
    return _comparable(exp.rows, exp.kind) == _comparable(got.rows, exp.kind)


def _comparable(lines: list[str], kind: str) -> list[str]:
    norm = [normalize(ln) for ln in lines]
    if kind == "rowsort" and norm:
        return [norm[0], *sorted(norm[1:])]
    return norm


def _expected_lines(exp: Expectation) -> list[str]:
    if exp.kind == "error":
        return [f"error {exp.error_class}" + (f": {exp.error_text}" if exp.error_text else "")]
    if exp.kind == "affected":
        return [f"affected {exp.affected}"]
    return exp.rows


def _report(case_file: CaseFile, step: Step, got: Outcome) -> str:
    exp = step.expect
    assert exp is not None
    kind = exp.kind if exp.kind in ("rows", "rowsort") else ""
    expected = _comparable(_expected_lines(exp), kind)
    actual = _comparable(got.describe(), kind)
    diff = difflib.unified_diff(expected, actual, "expected", "actual", lineterm="", n=3)
    return (
        f"{case_file.path}:{step.line}: result differs\n"
        f"statement:\n    {(step.sql or '').replace(chr(10), chr(10) + '    ')}\n" + "\n".join(diff)
    )


@contextmanager
def _session() -> Iterator[Session]:
    with tempfile.TemporaryDirectory(prefix="gnomon-sql-cases-") as tmp:
        session = Session(str(Path(tmp) / "db"))
        try:
            yield session
        finally:
            session.close()


def run_file(path: Path) -> tuple[int, list[str]]:
    """Runs every statement of ``path``; returns (cases checked, failure reports)."""
    case_file = parse_file(path)
    failures: list[str] = []
    with _session() as session:
        for step in case_file.steps:
            if step.directive is not None:
                session.directive(*step.directive)
                continue
            assert step.sql is not None
            got = session.run(step.sql)
            if step.expect is None:
                if got.error is not None:
                    failures.append(
                        f"{path}:{step.line}: setup statement failed (it has no expectation; "
                        f"stopping here)\nstatement:\n    {step.sql}\n{got.describe()[0]}"
                    )
                    break
            elif not _matches(step.expect, got):
                failures.append(_report(case_file, step, got))
    return len(case_file.cases), failures


def check_file(path: Path) -> int:
    """Runs ``path`` and raises AssertionError listing every mismatch; returns the case count."""
    count, failures = run_file(path)
    if failures:
        raise AssertionError(f"{len(failures)} failing statement(s)\n\n" + "\n\n".join(failures))
    return count


# -- regenerating --------------------------------------------------------------------------------


def _new_block(exp: Expectation, got: Outcome) -> list[str]:
    if got.error is not None:
        if exp.kind == "error" and _matches(exp, got):
            return [f"-- expect {_expected_lines(exp)[0]}"]
        first = str(got.error).splitlines()[0] if str(got.error) else ""
        return [f"-- expect error {type(got.error).__name__}: {first}".rstrip(": ")]
    if got.rows is None:
        return [f"-- expect affected {got.affected}"]
    if exp.kind == "rowsort":
        return ["-- expect rowsort", got.rows[0], *sorted(got.rows[1:])]
    return ["-- expect", *got.rows]


def update_file(path: Path) -> int:
    """Rewrites the expectation blocks of ``path`` from actual results; returns how many
    blocks changed."""
    case_file = parse_file(path)
    replacements: list[tuple[int, int, list[str]]] = []
    with _session() as session:
        for step in case_file.steps:
            if step.directive is not None:
                session.directive(*step.directive)
                continue
            assert step.sql is not None
            got = session.run(step.sql)
            exp = step.expect
            if exp is None:
                if got.error is not None:
                    raise CaseFileError(
                        f"{path}:{step.line}: setup statement failed: {got.describe()[0]}"
                    )
                continue
            block = _new_block(exp, got)
            old = case_file.lines[exp.start : exp.stop]
            if [normalize(x) for x in block] != [normalize(x) for x in old]:
                replacements.append((exp.start, exp.stop, block))
    lines = list(case_file.lines)
    for start, stop, block in reversed(replacements):
        following = lines[stop] if stop < len(lines) else ""
        # A rows block must end at a blank line.
        tail = [""] if block[0].strip() in ("-- expect", "-- expect rowsort") and following else []
        lines[start:stop] = block + tail
    path.write_text("\n".join(lines) + "\n")
    return len(replacements)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--update", action="store_true", help="rewrite expectations in place")
    parser.add_argument("files", nargs="*", type=Path, help="case files (default: all)")
    args = parser.parse_args(argv)
    files = args.files or sorted(CASES_DIR.glob("*.sql"))
    status = 0
    for path in files:
        if args.update:
            print(f"{path}: {update_file(path)} expectation block(s) rewritten")
            continue
        count, failures = run_file(path)
        print(f"{path}: {count} cases, {len(failures)} failing")
        for f in failures:
            print(f, end="\n\n")
        status |= bool(failures)
    return status


if __name__ == "__main__":
    sys.exit(main())
