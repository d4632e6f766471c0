"""A recursive-descent parser for the statements gnomon interprets itself.

Identifiers keep their case, quoted (`x` or "x") or not, as in HoraeDB: ``CREATE TABLE
case_T (VALUE1 double, ...)`` names ``case_T`` and ``VALUE1``. Statements naming an existing
table or column find it by the name as written, else by its lower-case form (the name
gnomon gave unquoted identifiers when it folded them): :func:`resolve`. Where a literal is
expected, "x" is a string, as in HoraeDB (``VALUES (1, "a")``, ``DEFAULT "d"``, ``WITH (k="v")``);
queries follow the rule of :mod:`node.sql.analysis`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from typing import Any

from gnomon.errors import InvalidArgument
from node.engine.schema import ColumnType
from node.sql.ast import (
    AlterAddColumns,
    AlterModifySetting,
    ColumnDef,
    CreateTable,
    Delete,
    Describe,
    DropTable,
    Explain,
    Insert,
    Query,
    ShowCreateTable,
    ShowTables,
    Statement,
)
from node.sql.lexer import Kind, Token, tokenize


def parse(sql: str) -> Statement:
    """Parse exactly one statement (a trailing ';' is allowed)."""
    text = statement_text(sql)
    if not text:
        raise InvalidArgument("empty SQL statement")
    return _Parser(text).statement()


def statement_text(sql: str) -> str:
    """The text of the statement :func:`parse` reads: ``sql`` without the space around it
    and trailing semicolons."""
    text = sql.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    return text


class _Parser:
    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = tokenize(sql)
        self.i = 0

    # -- token helpers ---------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.tokens[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def advance(self) -> Token:
        t = self.tok
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return t

    def error(self, expected: str) -> InvalidArgument:
        t = self.tok
        found = "end of statement" if t.kind is Kind.END else repr(t.text)
        return InvalidArgument(
            f"SQL syntax error at position {t.pos}: expected {expected}, found {found}"
        )

    def accept(self, *words: str) -> bool:
        if self.tok.is_word(*words):
            self.advance()
            return True
        return False

    def expect(self, *words: str) -> None:
        for w in words:
            if not self.accept(w):
                raise self.error(w)

    def accept_symbol(self, s: str) -> bool:
        if self.tok.kind is Kind.SYMBOL and self.tok.text == s:
            self.advance()
            return True
        return False

    def expect_symbol(self, s: str) -> None:
        if not self.accept_symbol(s):
            raise self.error(repr(s))

    def ident(self, what: str = "identifier") -> str:
        t = self.tok
        if t.kind is Kind.QUOTED:
            if not t.text:
                raise InvalidArgument(f"empty quoted identifier at position {t.pos}")
            self.advance()
            return t.text
        if t.kind is Kind.WORD:
            self.advance()
            return t.text
        raise self.error(what)

    def keyword(self, what: str) -> str:
        """A word whose case does not matter (an option's name), in lower case."""
        return self.ident(what).lower()

    def ident_list(self) -> list[str]:
        self.expect_symbol("(")
        names = [self.ident()]
        while self.accept_symbol(","):
            names.append(self.ident())
        self.expect_symbol(")")
        return names

    def is_string(self, t: Token) -> bool:
        """Whether ``t`` is a string literal: 'x', or "x" (HoraeDB's)."""
        return t.kind is Kind.STRING or (t.kind is Kind.QUOTED and self.sql[t.pos] == '"')

    def string(self, what: str = "a quoted string") -> str:
        t = self.tok
        if not self.is_string(t):
            raise self.error(what)
        self.advance()
        return t.text

    def end(self) -> None:
        if self.tok.kind is not Kind.END:
            raise self.error("end of statement")

    def rest(self) -> str:
        """The statement text from the current token on."""
        return self.sql[self.tok.pos :].strip()

    def literal(self) -> Any:
        t = self.tok
        negative = False
        if t.kind is Kind.SYMBOL and t.text in "-+":
            negative = t.text == "-"
            self.advance()
            t = self.tok
            if t.kind is not Kind.NUMBER:
                raise self.error("a number")
        if t.kind is Kind.NUMBER:
            self.advance()
            try:
                value: Any = int(t.text) if t.text.isdigit() else float(t.text)
            except ValueError:
                raise InvalidArgument(f"invalid number {t.text!r} at position {t.pos}") from None
            return -value if negative else value
        if self.is_string(t):
            self.advance()
            return t.text
        if t.is_word("X") and self.binary_follows():
            self.advance()
            return self.binary(self.advance())
        if t.is_word("NULL"):
            self.advance()
            return None
        if t.is_word("TRUE", "FALSE"):
            self.advance()
            return t.text.upper() == "TRUE"
        raise self.error("a literal value")

    def binary_follows(self) -> bool:
        """Whether a string follows the current token (an X) directly: x'11'."""
        nxt = self.peek()
        return nxt.kind is Kind.STRING and nxt.pos == self.tok.pos + 1

    def binary(self, t: Token) -> bytes:
        """The bytes of the hexadecimal string ``t`` of a binary literal."""
        try:
            return bytes.fromhex(t.text)
        except ValueError:
            raise InvalidArgument(
                f"invalid binary literal x'{t.text}' at position {t.pos - 1}: "
                "expected pairs of hexadecimal digits"
            ) from None

    # -- statements ------------------------------------------------------------------------------

    def statement(self) -> Statement:
        t = self.tok
        if t.is_word("SELECT", "WITH", "VALUES") or (t.kind is Kind.SYMBOL and t.text == "("):
            return Query(self.sql, self.tokens)
        if self.accept("CREATE"):
            return self.create_table()
        if self.accept("ALTER"):
            return self.alter_table()
        if self.accept("DROP"):
            self.expect("TABLE")
            if_exists = self.accept("IF")
            if if_exists:
                self.expect("EXISTS")
            name = self.ident("table name")
            self.end()
            return DropTable(name, if_exists)
        if self.accept("SHOW"):
            return self.show()
        if self.accept("DESCRIBE", "DESC"):
            self.accept("TABLE")
            name = self.ident("table name")
            self.end()
            return Describe(name)
        if self.accept("EXPLAIN"):
            analyze = self.accept("ANALYZE")
            if not self.tok.is_word("SELECT", "WITH"):
                raise self.error("a SELECT query to explain")
            return Explain(self.rest(), analyze)
        if self.accept("INSERT"):
            return self.insert()
        if self.accept("DELETE"):
            self.expect("FROM")
            table = self.ident("table name")
            if self.tok.kind is Kind.END:
                return Delete(table, None)
            self.expect("WHERE")
            where = self.rest()
            if not where:
                raise self.error("a condition after WHERE")
            return Delete(table, where)
        raise self.error(
            "a statement (SELECT, INSERT, DELETE, CREATE TABLE, ALTER TABLE, DROP TABLE, SHOW, "
            "DESCRIBE, EXPLAIN)"
        )

    def show(self) -> Statement:
        if self.accept("TABLES"):
            like = None
            if self.accept("LIKE"):
                like = self.string("a LIKE pattern")
            self.end()
            return ShowTables(like)
        if self.accept("CREATE"):
            self.expect("TABLE")
            name = self.ident("table name")
            self.end()
            return ShowCreateTable(name)
        raise self.error("TABLES or CREATE TABLE")

    def create_table(self) -> CreateTable:
        self.expect("TABLE")
        if_not_exists = False
        if self.accept("IF"):
            self.expect("NOT", "EXISTS")
            if_not_exists = True
        name = self.ident("table name")
        self.expect_symbol("(")
        columns: list[ColumnDef] = []
        timestamp_key: str | None = None
        primary_key: list[str] | None = None
        while True:
            if self.tok.is_word("TIMESTAMP") and self.peek().is_word("KEY"):
                self.advance()
                self.advance()
                keys = self.ident_list()
                if len(keys) != 1:
                    raise InvalidArgument("TIMESTAMP KEY takes exactly one column")
                timestamp_key = _one_timestamp_key(name, timestamp_key, keys[0])
            elif self.tok.is_word("PRIMARY") and self.peek().is_word("KEY"):
                self.advance()
                self.advance()
                primary_key = self.ident_list()
            else:
                col, inline_pk, inline_ts = self.column_def()
                columns.append(col)
                if inline_pk:
                    primary_key = [*(primary_key or []), col.name]
                if inline_ts:
                    timestamp_key = _one_timestamp_key(name, timestamp_key, col.name)
            if self.accept_symbol(")"):
                break
            self.expect_symbol(",")
        if timestamp_key is None:
            raise InvalidArgument(f"table {name!r}: TIMESTAMP KEY(column) is required")
        defined = [c.name for c in columns]
        timestamp_key = resolve(timestamp_key, defined)
        if primary_key is not None:
            primary_key = [resolve(k, defined) for k in primary_key]
        partition_by: list[str] | None = None
        partitions: int | None = None
        engine = "Analytic"
        options: dict[str, str] = {}
        while self.tok.kind is not Kind.END:
            if self.accept("PARTITION"):
                self.expect("BY", "KEY")
                partition_by = self.ident_list()
                self.expect("PARTITIONS")
                n = self.literal()
                if not isinstance(n, int) or n < 1:
                    raise InvalidArgument("PARTITIONS must be a positive integer")
                partitions = n
            elif self.accept("ENGINE"):
                self.expect_symbol("=")
                engine = self.ident("engine name")
                if engine.lower() != "analytic":
                    raise InvalidArgument(f"unknown engine {engine!r}: only Analytic is supported")
                engine = "Analytic"
            elif self.accept("WITH"):
                options.update(self.options())
            else:
                raise self.error("PARTITION BY, ENGINE or WITH")
        return CreateTable(
            name,
            columns,
            timestamp_key,
            primary_key,
            if_not_exists,
            partition_by,
            partitions,
            engine,
            options,
        )

    def column_def(self) -> tuple[ColumnDef, bool, bool]:
        """A column's definition, and whether it says PRIMARY KEY and TIMESTAMP KEY."""
        name = self.ident("column name")
        t = self.tok
        if t.kind is not Kind.WORD:
            raise self.error(f"a type for column {name!r}")
        self.advance()
        typ = ColumnType.parse(t.text)
        if self.accept_symbol("("):  # varchar(255) and the like: the length is not enforced
            self.literal()
            self.expect_symbol(")")
        is_tag = False
        nullable: bool | None = None
        default: Any = None
        default_expr: str | None = None
        comment = ""
        primary = timestamp = dictionary = False
        while True:
            if self.accept("TAG"):
                is_tag = True
            elif self.accept("NOT"):
                self.expect("NULL")
                nullable = False
            elif self.accept("NULL"):
                nullable = True
            elif self.accept("DEFAULT"):
                default, default_expr = self.default()
            elif self.accept("COMMENT"):
                comment = self.string("a comment string")
            elif self.tok.is_word("PRIMARY") and self.peek().is_word("KEY"):
                self.advance()
                self.advance()
                primary = True
            elif self.tok.is_word("TIMESTAMP") and self.peek().is_word("KEY"):
                self.advance()
                self.advance()
                timestamp = True  # HoraeDB's column-level form of TIMESTAMP KEY(column)
            elif self.accept("DICTIONARY"):
                if typ is not ColumnType.STRING:
                    raise InvalidArgument(
                        f"column {name!r} ({typ.value}): only a string column can be DICTIONARY"
                    )
                dictionary = True
            else:
                break
        col = ColumnDef(name, typ, is_tag, nullable, default, comment, dictionary, default_expr)
        return col, primary, timestamp

    def default(self) -> tuple[Any, str | None]:
        """A DEFAULT: a literal, else an expression's text as HoraeDB prints it (``c3 * 2 +
        1``), which runs to the next column option or the column's end."""
        start = self.i
        if self.tok.kind is not Kind.WORD or self.tok.is_word("NULL", "TRUE", "FALSE", "X"):
            with contextlib.suppress(InvalidArgument):
                value = self.literal()
                if self._default_ends():
                    return value, None
            self.i = start
        parts: list[str] = []
        depth = 0
        while not (depth == 0 and self._default_ends()):
            t = self.advance()
            if t.kind is Kind.END:
                raise self.error("the end of a DEFAULT expression")
            raw = self.sql[t.pos : self.tok.pos].strip() if t.kind is not Kind.WORD else t.text
            if t.kind is Kind.SYMBOL and t.text in "()":
                depth += 1 if t.text == "(" else -1
            binary = t.kind is Kind.SYMBOL and t.text in "+-*/%" and _ends_operand(parts)
            parts.append(f" {raw} " if binary else raw)
        return None, "".join(parts).strip()

    def _default_ends(self) -> bool:
        t = self.tok
        return (
            t.kind is Kind.END
            or (t.kind is Kind.SYMBOL and t.text in ",)")
            or t.is_word("NOT", "NULL", "TAG", "COMMENT", "PRIMARY", "TIMESTAMP", "DICTIONARY")
        )

    def added_column(self) -> ColumnDef:
        """A column ALTER TABLE adds: never the table's TIMESTAMP KEY."""
        col, _, timestamp = self.column_def()
        if timestamp:
            raise InvalidArgument(
                f"column {col.name!r}: ALTER TABLE cannot add a TIMESTAMP KEY, a table has one "
                "from its creation"
            )
        return col

    def options(self) -> dict[str, str]:
        self.expect_symbol("(")
        out: dict[str, str] = {}
        if self.accept_symbol(")"):
            return out
        while True:
            key = self.keyword("option name")
            self.expect_symbol("=")
            value = self.literal()
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
            if self.accept_symbol(")"):
                return out
            self.expect_symbol(",")

    def alter_table(self) -> Statement:
        self.expect("TABLE")
        table = self.ident("table name")
        if self.accept("ADD"):
            self.accept("COLUMN")
            columns: list[ColumnDef] = []
            if self.accept_symbol("("):
                while True:
                    columns.append(self.added_column())
                    if self.accept_symbol(")"):
                        break
                    self.expect_symbol(",")
            else:
                while True:
                    columns.append(self.added_column())
                    if not self.accept_symbol(","):
                        break
                    self.accept("ADD")
                    self.accept("COLUMN")
            self.end()
            return AlterAddColumns(table, columns)
        if self.accept("MODIFY"):
            self.expect("SETTING")
            options: dict[str, str] = {}
            while True:
                key = self.keyword("setting name")
                self.expect_symbol("=")
                value = self.literal()
                options[key] = str(value).lower() if isinstance(value, bool) else str(value)
                if not self.accept_symbol(","):
                    break
            self.end()
            return AlterModifySetting(table, options)
        raise self.error("ADD COLUMN or MODIFY SETTING")

    def insert(self) -> Insert:
        self.expect("INTO")
        # HoraeDB's INSERT INTO TABLE t; a table named "table" is still INSERT INTO table ...
        nxt = self.peek()
        if self.tok.is_word("TABLE") and nxt.identifier is not None and not nxt.is_word("VALUES"):
            self.advance()
        table = self.ident("table name")
        columns: list[str] | None = None
        if self.tok.kind is Kind.SYMBOL and self.tok.text == "(":
            columns = self.ident_list()
        self.expect("VALUES")
        rows: list[list[Any]] = []
        while True:
            self.expect_symbol("(")
            row = [self.literal()]
            while self.accept_symbol(","):
                row.append(self.literal())
            self.expect_symbol(")")
            if columns is not None and len(row) != len(columns):
                raise InvalidArgument(
                    f"INSERT row {len(rows) + 1} has {len(row)} values for {len(columns)} columns"
                )
            rows.append(row)
            if not self.accept_symbol(","):
                break
        self.end()
        return Insert(table, columns, rows)


def _ends_operand(parts: list[str]) -> bool:
    """Whether the text so far ends with an operand (a sign after it is a binary operator)."""
    return bool(parts) and parts[-1] != "(" and not parts[-1].endswith(" ")


def resolve(name: str, names: Collection[str]) -> str:
    """The one of ``names`` that ``name`` means: itself, else its lower-case form (the name
    gnomon gave an unquoted identifier when it folded them, so statements written for a
    table made then find it still), else ``name`` (for the error naming it)."""
    if name in names:
        return name
    lower = name.lower()
    return lower if lower in names else name


def _one_timestamp_key(table: str, found: str | None, column: str) -> str:
    """``column``, the TIMESTAMP KEY of ``table``, unless one was named before (``found``)."""
    if found is not None:
        raise InvalidArgument(
            f"table {table!r}: two TIMESTAMP KEYs ({found!r} and {column!r}), a table has one"
        )
    return column
