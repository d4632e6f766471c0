"""HoraeDB's own integration cases run on gnomon: how many of their statements gnomon answers
as HoraeDB does.

HoraeDB keeps its SQL cases as sqlness files (``integration_tests/cases`` in apache/horaedb):
each ``x.sql`` beside an ``x.result`` holding every statement followed by HoraeDB's answer, as
its test runner prints it (the Rust SDK's CSV of ``Type(value)`` cells, ``affected_rows: N``,
an InfluxQL answer's JSON, or ``Failed to execute query, err: ...``). This runs each file,
statement by statement, on a fresh ``gnomon standalone`` and compares the answers:

- rows and affected-row counts agree when the printed text is the same;
- an InfluxQL answer (``-- SQLNESS ARG protocol=influxql``) agrees when its JSON is equal;
- an error agrees with an error: the messages are each server's own.

``-- SQLNESS REPLACE pattern text`` applies to gnomon's answer as it did to HoraeDB's;
``pre_cmd=flush`` is skipped (gnomon answers alike before and after a flush).

Usage: ``python -m bench.horaedb_cases CASES_DIR [CASES_DIR ...] [-v]`` where CASES_DIR is,
for example, ``integration_tests/cases/common`` of a HoraeDB checkout. Symbolic links to
directories are not followed, so ``env/local`` counts its own cases, not ``common`` again.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.tsbs.gnomon_server import SERVICE, GnomonServer
from gnomon.proto import storage_pb2
from node.server import sql_response
from node.server.arrow_wire import decode_payload

ERROR_PREFIX = "Failed to execute query"


@dataclass
class Statement:
    """One statement of a case file: its text and the sqlness directives above it."""

    text: str
    #: Everything before the text since the previous statement (comments, directives).
    head: str
    args: dict[str, str] = field(default_factory=dict)
    replaces: list[tuple[str, str]] = field(default_factory=list)


def statements(sql: str) -> list[Statement]:
    """The statements of a sqlness ``.sql`` file: runs of lines ending at one ending in ';',
    with the ``--`` comment lines before each."""
    out: list[Statement] = []
    head: list[str] = []
    body: list[str] = []
    for line in sql.splitlines():
        if not body and (line.startswith("--") or not line.strip()):
            head.append(line)
            continue
        body.append(line)
        if line.rstrip().endswith(";"):
            out.append(_statement("\n".join(body), head))
            head, body = [], []
    return out


def _statement(text: str, head: list[str]) -> Statement:
    stmt = Statement(text, "\n".join(head))
    for line in head:
        words = line[2:].split()
        if words[:2] == ["SQLNESS", "ARG"]:
            stmt.args.update(w.split("=", 1) for w in words[2:] if "=" in w)  # type: ignore[misc]
        elif words[:2] == ["SQLNESS", "REPLACE"] and len(words) >= 3:
            stmt.replaces.append((words[2], " ".join(words[3:])))
    return stmt


def expected(result: str, stmts: list[Statement]) -> list[str]:
    """HoraeDB's answer to each of ``stmts``, cut out of its ``.result`` file: the text
    between a statement and the next one."""
    answers: list[str] = []
    pos = 0
    for i, stmt in enumerate(stmts):
        start = _line_at(result, stmt.text, pos) + len(stmt.text)
        if i + 1 < len(stmts):
            nxt = stmts[i + 1]
            end = _line_at(result, nxt.text, start)
            # The answer ends where the next statement's comments start (sqlness prints
            # them without the blank lines between).
            comments = [line for line in nxt.head.splitlines() if line.strip()]
            if comments:
                end = result.rindex(comments[0], start, end)
        else:
            end = len(result)
        answers.append(result[start:end].strip())
        pos = end
    return answers


def _line_at(text: str, lines: str, pos: int) -> int:
    """Where ``lines`` next stand in ``text`` from ``pos`` as whole lines (an error message
    quoting the statement does not count)."""
    while True:
        at = text.index(lines, pos)
        if (at == 0 or text[at - 1] == "\n") and text[at + len(lines) : at + len(lines) + 1] in (
            "\n",
            "",
        ):
            return at
        pos = at + 1


# -- gnomon's answers, printed as HoraeDB's test runner prints its own ---------------------------


def _rust_float(v: float) -> str:
    """A float as Rust's ``{:?}`` prints it (``10.0``, ``1e-7``, ``1e16``, ``NaN``, ``inf``)."""
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    text = repr(v)
    if "e" in text:
        mantissa, exp = text.split("e")
        return f"{mantissa.removesuffix('.0')}e{int(exp)}"
    return text


def _rust_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


_INTEGERS = {
    pa.int8(): "Int8",
    pa.int16(): "Int16",
    pa.int32(): "Int32",
    pa.int64(): "Int64",
    pa.uint8(): "UInt8",
    pa.uint16(): "UInt16",
    pa.uint32(): "UInt32",
    pa.uint64(): "UInt64",
}


def _cell(typ: pa.DataType, v: Any) -> str:
    """A value as the HoraeDB Rust SDK's ``Value`` prints itself (``Debug``)."""
    if v is None:
        return "Null"
    if pa.types.is_timestamp(typ):
        return f"Timestamp({v})"
    if pa.types.is_boolean(typ):
        return f"Boolean({'true' if v else 'false'})"
    if typ in _INTEGERS:
        return f"{_INTEGERS[typ]}({v})"
    if pa.types.is_float64(typ):
        return f"Double({_rust_float(v)})"
    if pa.types.is_float32(typ):
        return f"Float({_rust_float(v)})"
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ):
        return f"Varbinary([{', '.join(str(b) for b in v)}])"
    return f"String({_rust_string(str(v))})"


def _values(column: pa.ChunkedArray[Any]) -> tuple[pa.DataType, list[Any]]:
    """A column's type and values, timestamps as integer milliseconds (the SDK's)."""
    typ = column.type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
        column = column.cast(typ)
    if pa.types.is_timestamp(typ):
        typ = pa.timestamp("ms")
        column = column.cast(typ, safe=False).cast(pa.int64())
    return typ, column.to_pylist()


def render(table: pa.Table | None, affected_rows: int | None) -> str:
    if table is None or table.num_rows == 0:
        return f"affected_rows: {affected_rows or 0}"
    lines = ["".join(f"{name}," for name in table.column_names)]
    columns = [_values(c) for c in table.columns]
    for i in range(table.num_rows):
        lines.append("".join(f"{_cell(typ, values[i])}," for typ, values in columns))
    return "\n".join(lines)


class Runner:
    """Runs statements on one gnomon server."""

    def __init__(self, server: GnomonServer) -> None:
        self.server = server

    def sql(self, text: str) -> str:
        call = self.server._channel().unary_unary(
            SERVICE + "SqlQuery",
            request_serializer=storage_pb2.SqlQueryRequest.SerializeToString,
            response_deserializer=sql_response.decode,
        )
        resp = call(
            storage_pb2.SqlQueryRequest(
                context=storage_pb2.RequestContext(database="public"), sql=text
            ),
            timeout=60,
        )
        if resp.header.code != 200:
            return f"{ERROR_PREFIX}, err: {resp.header.code} {resp.header.error}"
        if resp.batches is None:
            return render(None, resp.affected_rows)
        return render(decode_payload(resp.batches, resp.compressed), None)

    def influxql(self, text: str, method: str) -> str:
        url = f"http://127.0.0.1:{self.server.http_port}/influxdb/v1/query"
        # HoraeDB answers times as epoch milliseconds unasked; InfluxDB 1.x (and gnomon)
        # answers RFC3339 strings unless epoch= asks for numbers.
        form = urllib.parse.urlencode({"q": text, "epoch": "ms"})
        if method == "get":
            request = urllib.request.Request(f"{url}?{form}")
        else:
            request = urllib.request.Request(
                url,
                data=form.encode(),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                return str(r.read().decode())
        except urllib.error.HTTPError as e:
            return f"{ERROR_PREFIX}, err: {e.code} {e.read().decode(errors='replace')}"

    def run(self, stmt: Statement) -> str:
        text = stmt.text
        if stmt.args.get("protocol") == "influxql":
            answer = self.influxql(text.rstrip().removesuffix(";"), stmt.args.get("method", ""))
        else:
            answer = self.sql(text)
        for pattern, replacement in stmt.replaces:
            answer = re.sub(pattern, replacement, answer)
        return answer.strip()


def agree(ours: str, theirs: str) -> bool:
    if theirs.startswith(ERROR_PREFIX) or ours.startswith(ERROR_PREFIX):
        return theirs.startswith(ERROR_PREFIX) and ours.startswith(ERROR_PREFIX)
    if theirs.startswith("{"):
        try:
            return bool(json.loads(ours) == json.loads(theirs))
        except ValueError:
            return False
    return ours == theirs


@dataclass(frozen=True)
class Bug:
    """Statements whose HoraeDB answer shows a HoraeDB bug that docs/compatibility.md
    lists (its row named by ``feature``): those of the case file ending in ``file`` whose
    text holds ``text``, only the ``occurrences`` (counted from 1) if given."""

    file: str
    text: str
    feature: str
    occurrences: tuple[int, ...] = ()


_EXTRA_VALUES = "Extra INSERT values beyond the column list"
_ZERO_FILL = "A column an INSERT leaves out"
_DAY_BUCKETS = "Day buckets"
_WEEK_BUCKETS = "Week buckets (P1W)"
_INFLUX_SERIES = "InfluxQL GROUP BY a tag"
_INFLUX_TSID = "InfluxQL SELECT *"
_DEFAULT_TTL = "Default TTL"

#: HoraeDB's answers that are documented HoraeDB bugs: not counted in the agreement that
#: excludes them, listed on their own.
BUGS = (
    Bug("dml/insert_mode.sql", '(1, 100, "d5")', _EXTRA_VALUES),
    # The rows after the extra values were dropped.
    Bug("dml/insert_mode.sql", "FROM\n    `03_dml_insert_mode_table3`", _EXTRA_VALUES, (2,)),
    Bug("dml/insert_mode.sql", "FROM\n    `03_dml_insert_mode_table1`", _ZERO_FILL, (2,)),
    Bug("ddl/alter_table.sql", "SELECT * FROM `05_alter_table_t0`", _ZERO_FILL, (2, 3, 4)),
    Bug("ddl/sampling-primary-key.sql", "select * from", _ZERO_FILL),
    Bug("function/time_bucket.sql", "'P1Y')", _DAY_BUCKETS),
    Bug("function/time_bucket.sql", "'P1M')", _DAY_BUCKETS),
    Bug("function/time_bucket.sql", "'P1W')", _WEEK_BUCKETS),
    Bug("function/time_bucket.sql", "'P1D')", _DAY_BUCKETS),
    Bug("influxql/basic.sql", "group by location", _INFLUX_SERIES),
    Bug("influxql/basic.sql", 'SELECT * FROM "h2o_feet"', _INFLUX_TSID),
)


def bug_of(path: Path, stmt: Statement, seen: dict[tuple[str, str], int]) -> str | None:
    """The documented HoraeDB bug HoraeDB's answer to ``stmt`` shows, if any. ``seen``
    counts the statements of this file matching each entry so far."""
    for bug in BUGS:
        if not path.as_posix().endswith(bug.file):
            continue
        if bug.text not in stmt.text:
            continue
        key = (bug.file, bug.text)
        seen[key] = seen.get(key, 0) + 1
        if not bug.occurrences or seen[key] in bug.occurrences:
            return bug.feature
    return None


_CREATE = re.compile(r"^\s*CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?`?([^`\s(]+)", re.I)
_DROP = re.compile(r"^\s*DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?`?([^`\s;]+)", re.I)
_SHOW_CREATE = re.compile(r"^\s*SHOW\s+CREATE\s+TABLE\s+`?([^`\s;]+)", re.I)
_TTL_OPTION = re.compile(r"\b(?:enable_)?ttl\s*=", re.I)


class DefaultTtl:
    """Finds SHOW CREATE TABLE answers showing HoraeDB's default TTL (``enable_ttl='true'``,
    ``ttl='7d'``) for a table whose CREATE TABLE set no TTL option: the documented HoraeDB
    bug of expiring data nobody asked to expire. Follows the tables of one case file
    through the CREATE and DROP statements HoraeDB answered without an error."""

    def __init__(self) -> None:
        #: The CREATE TABLE statement in effect for each table name.
        self.created: dict[str, str] = {}

    def bug(self, stmt: Statement, theirs: str) -> str | None:
        text = stmt.text
        ok = not theirs.startswith(ERROR_PREFIX)
        if m := _CREATE.match(text):
            if ok and not (m.group(1) and m.group(2) in self.created):
                self.created[m.group(2)] = text
        elif m := _DROP.match(text):
            if ok:
                self.created.pop(m.group(1), None)
        elif m := _SHOW_CREATE.match(text):
            create = self.created.get(m.group(1))
            shows = "enable_ttl='true'" in theirs and "ttl='7d'" in theirs
            if create is not None and shows and not _TTL_OPTION.search(create):
                return _DEFAULT_TTL
        return None


#: Why an answer differs, when it is for a reason gnomon keeps (docs/compatibility.md):
#: checked in this order on each disagreement.
KINDS = ("plan text", "column names", "tsid values", "table options", "other")


def kind_of(statement: str, ours: str, theirs: str) -> str:
    """Which of :data:`KINDS` a disagreement is: an EXPLAIN's plan (each engine's own);
    the same rows under other column names (gnomon names an expression by its text,
    HoraeDB's DataFusion by its plan); the same rows but for the series ids (each
    hashes tags its own way); a SHOW CREATE TABLE alike up to its WITH (...) options
    (each engine's own option set) and the quoting of its key clauses."""
    if statement.lstrip().upper().startswith("EXPLAIN"):
        return KINDS[0]
    ours_rows, theirs_rows = ours.split("\n")[1:], theirs.split("\n")[1:]
    if ours_rows == theirs_rows and ours_rows and not ours.startswith(ERROR_PREFIX):
        return KINDS[1]
    if ours.split("\n")[0] == theirs.split("\n")[0] and _tsid_masked(ours) == _tsid_masked(theirs):
        return KINDS[2]
    if _without_options(ours) == _without_options(theirs):
        return KINDS[3]
    return KINDS[4]


def _without_options(answer: str) -> str:
    """A SHOW CREATE TABLE answer cut at its options, its key clauses' names unquoted."""
    head = answer.split(" ENGINE=Analytic", 1)[0]
    return re.sub(
        r"((?:PRIMARY|TIMESTAMP) KEY\()([^)]*)\)",
        lambda m: m.group(1) + m.group(2).replace("`", "").replace(", ", ",") + ")",
        head,
    )


def _tsid_masked(answer: str) -> str:
    """``answer`` with the values of its tsid column blanked."""
    lines = answer.split("\n")
    names = lines[0].split(",")
    if "tsid" not in names:
        return answer
    at = names.index("tsid")
    masked = [lines[0]]
    for line in lines[1:]:
        cells = re.split(r",(?=[A-Z][A-Za-z0-9]*\(|Null,|$)", line)
        if at < len(cells):
            cells[at] = "tsid"
        masked.append(",".join(cells))
    return "\n".join(masked)


@dataclass
class FileScore:
    path: Path
    agreed: int
    total: int
    misses: list[tuple[str, str, str]]
    #: Statements whose HoraeDB answer is a documented HoraeDB bug: text, the bug's
    #: feature, whether gnomon answered alike anyway.
    bugs: list[tuple[str, str, bool]] = field(default_factory=list)

    @property
    def agreed_without_bugs(self) -> int:
        return self.agreed - sum(1 for _, _, same in self.bugs if same)


def run_file(sql_path: Path, scratch: Path) -> FileScore:
    stmts = statements(sql_path.read_text())
    answers = expected(sql_path.with_suffix(".result").read_text(), stmts)
    server = GnomonServer(scratch)
    try:
        runner = Runner(server)
        score = FileScore(sql_path, 0, len(stmts), [])
        seen: dict[tuple[str, str], int] = {}
        ttl = DefaultTtl()
        for stmt, theirs in zip(stmts, answers, strict=True):
            ours = runner.run(stmt)
            same = agree(ours, theirs)
            bug = bug_of(sql_path, stmt, seen) or ttl.bug(stmt, theirs)
            if bug is not None:
                score.bugs.append((stmt.text, bug, same))
            if same:
                score.agreed += 1
            elif bug is None:
                score.misses.append((stmt.text, theirs, ours))
        return score
    finally:
        server.stop()


def case_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, _, files in os.walk(root):  # symbolic links to directories are not followed
        found.extend(Path(dirpath) / f for f in files if f.endswith(".sql"))
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path, help="directories of sqlness cases")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each disagreement")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gnomon-horaedb-cases-") as tmp:
        for root in args.dirs:
            agreed = total = 0
            kinds: dict[str, int] = {}
            bugs: list[tuple[Path, str, str, bool]] = []
            for n, path in enumerate(case_files(root)):
                score = run_file(path, Path(tmp) / str(n))
                agreed += score.agreed
                total += score.total
                bugs.extend((path.relative_to(root), *b) for b in score.bugs)
                for text, theirs, ours in score.misses:
                    kind = kind_of(text, ours, theirs)
                    kinds[kind] = kinds.get(kind, 0) + 1
                print(f"{path.relative_to(root)}: {score.agreed}/{score.total}")
                if args.verbose:
                    for text, theirs, ours in score.misses:
                        print(
                            f"  --- {text}\n  ({kind_of(text, ours, theirs)})\n"
                            f"  horaedb: {theirs}\n  gnomon:  {ours}"
                        )
            print(f"{root.name}: {agreed} of {total} statements agree ({agreed / total:.0%})")
            counted = total - len(bugs)
            kept = agreed - sum(1 for *_, same in bugs if same)
            print(
                f"{root.name}: without the {len(bugs)} whose HoraeDB answer is a documented "
                f"HoraeDB bug, {kept} of {counted} agree ({kept / counted:.0%})"
            )
            for rel, text, feature, same in bugs:
                first = " ".join(text.split())[:100]
                alike = " (answered alike anyway)" if same else ""
                print(f"  HoraeDB bug [{feature}]{alike}: {rel}: {first}")
            print(
                f"{root.name}: disagreements by kind: "
                + ", ".join(f"{k} {kinds.get(k, 0)}" for k in KINDS)
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
