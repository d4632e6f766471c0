"""What the executor learns from a query's tokens before it runs: the tables it reads, its
time-travel clauses, the integer literals it compares with timestamps (to rewrite for
DataFusion), and, for a query reading one table, its prescan (:mod:`node.sql.prescan`) and
a plan of its own (:mod:`node.sql.direct`).

All of that holds for every query of the same *shape* (the same tokens, but for the values
of its literals) over the same tables: dashboards and benchmarks send one shape again and
again with new times and hosts. :class:`Analyses` keeps an analysis per shape, and each
query binds it to its own literals, which costs a few literal conversions instead of the
passes over every token that finding it takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.engine.lru import Lru
from node.engine.options import UpdateMode
from node.engine.schema import ColumnType, Schema
from node.sql import fastpath, functions, latest_rows, modes, prescan, rewrite, select, system
from node.sql.lexer import Kind, Token, check_bounds, literals_at, shaped
from node.sql.parser import resolve
from node.tables import TableCatalog

_CLAUSE_WORDS = (
    "WHERE", "GROUP", "ORDER", "LIMIT", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "ON",
    "UNION", "HAVING", "WINDOW", "EXCEPT", "INTERSECT", "OFFSET", "NATURAL", "QUALIFY",
)  # fmt: skip
_COMPARISONS = ("=", "<", ">", "<=", ">=", "<>", "!=")


#: Shapes whose analysis is kept.
SHAPES = 256


@dataclass(frozen=True)
class Travel:
    """A time-travel clause, ``<table> VERSION AS OF <n>`` or ``<table> TIMESTAMP AS OF
    <t>``, read under the registered name ``alias``."""

    table: str
    alias: str
    version: bool  # VERSION AS OF (else TIMESTAMP AS OF)
    #: Where the table's name, the literal and the token after it are among the tokens.
    name_at: int
    literal_at: int
    following_at: int
    #: Whether an alias of the table follows the clause (else the table's name becomes one).
    aliased: bool


@dataclass(frozen=True)
class Analysis:
    #: The tokens it was found in, and where their literals are.
    tokens: tuple[Token, ...]
    literals_at: tuple[int, ...]
    #: The engine's tables, and the schemas of those the query names, it was found with.
    tables: list[str]
    schemas: tuple[tuple[str, Schema], ...]
    travel: tuple[Travel, ...]
    #: The integer literals compared with a timestamp column (as HoraeDB allows:
    #: ``ts >= 1700000000000``): the tokens from the first to the last of each (a sign and
    #: the number).
    timestamps: tuple[tuple[int, int], ...]
    #: The tables read as they are (not travelling), once per mention.
    plain: tuple[str, ...]
    #: For a query reading no table but one: its prescan, and its own plan when it has one
    #: (for an exact prescan).
    prescan: prescan.Shape | None
    fast: fastpath.FastPath | None
    #: The most operators on one path of an expression (:func:`node.sql.lexer.extent`).
    depth: int = 0
    #: SELECT items named by their text (:func:`node.sql.rewrite.unnamed_items`).
    unnamed: tuple[tuple[int, int], ...] = ()
    #: Integer arithmetic on literals alone (:func:`node.sql.rewrite.constant_spans`).
    constants: tuple[tuple[int, int], ...] = ()
    #: Names DataFusion would read otherwise than the catalog spells them, with the name
    #: each means (:func:`_spelled_names`): given to DataFusion double-quoted.
    names: tuple[tuple[int, str], ...] = ()
    #: Double-quoted tokens that are string literals (:func:`_double_quoted_strings`).
    strings: tuple[int, ...] = ()
    #: The words naming a view of the catalog (:func:`node.sql.system.references`).
    system: tuple[int, ...] = ()
    #: String tags reach DataFusion plain (:func:`node.sql.modes.plain_tags`).
    plain_tags: bool = False
    #: Its plan is looked at for literal scan filters (:func:`node.sql.modes.equates_twice`).
    equates_twice: bool = False

    def holds_for(self, engine: TableCatalog) -> bool:
        """Whether the engine's tables are still those the analysis was found with."""
        if engine.list_tables() != self.tables:
            return False
        for name, schema in self.schemas:
            now = engine.describe(name).schema
            if now is not schema and now != schema:
                return False
        return True

    def item_names(self, sql: str, tokens: Sequence[Token]) -> frozenset[str]:
        """The names :meth:`rewrite` gives the unnamed SELECT items: their text."""
        return frozenset(name for _, name in self._item_names(sql, tokens))

    def _item_names(self, sql: str, tokens: Sequence[Token]) -> list[tuple[int, str]]:
        """Where each unnamed SELECT item ends in ``sql``, and its text."""
        found = []
        for first, last in self.unnamed:
            end = tokens[last].pos + len(rewrite.raw(tokens[last], sql))
            found.append((end, sql[tokens[first].pos : end]))
        return found

    def rewrite(self, sql: str, tokens: Sequence[Token]) -> str:
        """``sql`` (of ``tokens``) as DataFusion takes it: time-travel clauses become their
        registered names, integer milliseconds compared with a timestamp become
        timestamps, unnamed SELECT items holding literals are named by their text, words
        starting with a digit are quoted, double-quoted strings become single-quoted."""
        edits: list[tuple[int, int, str]] = []
        for at in self.strings:
            dq = tokens[at]
            quoted = "'" + dq.text.replace("'", "''") + "'"
            edits.append((dq.pos, dq.pos + len(rewrite.raw(dq, sql)), quoted))
        for at, name in self.names:
            written = tokens[at]
            edits.append((written.pos, written.pos + len(rewrite.raw(written, sql)), _dq(name)))
        for end, name in self._item_names(sql, tokens):
            edits.append((end, end, f" AS {_dq(name)}"))
        for t in self.travel:
            text = _dq(t.alias) if t.aliased else f"{_dq(t.alias)} AS {_dq(t.table)}"
            edits.append((tokens[t.name_at].pos, tokens[t.following_at].pos, text + " "))
        for first, last in self.timestamps:
            number = tokens[last]
            sign = "-" if first != last else ""
            text = f"to_timestamp_millis({sign}{number.text})"
            edits.append((tokens[first].pos, number.pos + len(number.text), text))
        out: list[str] = []
        done = 0
        for begin, stop, text in sorted(edits):
            out.append(sql[done:begin])
            out.append(text)
            done = stop
        out.append(sql[done:])
        return "".join(out)


class Analyses:
    """The analyses of the shapes last queried (:func:`node.sql.lexer.shaped`)."""

    def __init__(self, capacity: int = SHAPES) -> None:
        self._kept: Lru[str, Analysis] = Lru(capacity)

    def bound(self, sql: str, engine: TableCatalog) -> tuple[Analysis, list[Token]] | None:
        """The kept analysis of ``sql``'s shape, if the engine's tables are still those it
        was found with, and the tokens of ``sql``, made from those it was found in with
        the literals of ``sql``: without tokenizing the statement. Only the literals'
        positions are its own (see :meth:`Analysis.rewrite`)."""
        shape = shaped(sql)
        found = None if shape is None else self._kept.get(shape.text)
        if found is None or shape is None or not found.holds_for(engine):
            return None
        return found, shape.swapped(found.tokens, found.literals_at)

    def of(self, sql: str, tokens: Sequence[Token], engine: TableCatalog) -> Analysis:
        """The analysis of ``sql`` (of ``tokens``), kept for its shape."""
        shape = shaped(sql)
        if shape is not None:
            found = self._kept.get(shape.text)
            if found is not None and found.holds_for(engine):
                return found
        found = analyse(tokens, engine, sql)
        # Kept only where both lexers find the same literals, which :meth:`bound` swaps.
        if shape is not None and shape.found_at(found.tokens, found.literals_at):
            self._kept.put(shape.text, found)
        return found


def analyse(tokens: Sequence[Token], engine: TableCatalog, sql: str) -> Analysis:
    """The analysis of ``sql`` (of ``tokens``); raises on a query beyond the bounds
    DataFusion is given (:func:`node.sql.lexer.check_bounds`, checked first: the passes
    below recurse into parentheses) or a time-travel clause that cannot be one."""
    extent = check_bounds(tokens)
    tables = engine.list_tables()
    known = set(tables)
    tokens = list(tokens)
    system_at = system.references(tokens)
    names = _spelled_names(tokens, sql, known, system_at, last=False)
    mentioned = list(
        dict.fromkeys(
            n for i, t in enumerate(tokens) if (n := t.identifier) in known and i not in system_at
        )
    )
    schemas = tuple((name, engine.describe(name).schema) for name in mentioned)
    strings = _double_quoted_strings(tokens, sql, known, schemas)
    columns = {c.name for _, schema in schemas for c in schema.columns}
    names += _spelled_names(tokens, sql, known | columns, (*strings, *system_at), last=True)
    names += _bucket_calls(tokens)
    if strings:
        tokens = list(tokens)
        for at in strings:
            tokens[at] = Token(Kind.STRING, tokens[at].text, tokens[at].pos)
    ts_columns = {
        c.name for _, schema in schemas for c in schema.columns if c.type is ColumnType.TIMESTAMP
    }
    travel: list[Travel] = []
    timestamps: list[tuple[int, int]] = []
    plain: list[str] = []
    for i, t in enumerate(tokens):
        name = t.identifier
        if name is None or i in system_at:
            continue
        if (
            i + 4 < len(tokens)
            and tokens[i + 1].is_word("VERSION", "TIMESTAMP")
            and tokens[i + 2].is_word("AS")
            and tokens[i + 3].is_word("OF")
        ):
            # A table not open here is found where it is as the query registers it.
            version = tokens[i + 1].is_word("VERSION")
            lit = tokens[i + 4]
            if version and (lit.kind is not Kind.NUMBER or not lit.text.isdigit()):
                raise InvalidArgument("VERSION AS OF takes a version number")
            if not version:
                timestamp_ms(lit)  # a literal of no timestamp fails here, not at binding
            following = tokens[i + 5]
            aliased = (
                following.is_word("AS")
                or following.kind is Kind.QUOTED
                or (following.kind is Kind.WORD and not following.is_word(*_CLAUSE_WORDS))
            )
            alias = f"__travel_{len(travel) + 1}"
            travel.append(Travel(name, alias, version, i, i + 4, i + 5, aliased))
        elif name in known:
            plain.append(name)
        elif name in ts_columns:
            timestamps.extend(_timestamp_literals(tokens, i))
    # The statement's one parse: its tokens as the catalog spells them, into a tree.
    tree = select.read(tokens)
    shape = None
    planned = None
    # The executor binds a prescan and plan to the tokens it has, where double-quoted
    # strings are still quoted names: a query holding one goes to DataFusion alone.
    if not travel and not strings and len(set(plain)) == 1:
        schema = engine.describe(plain[0]).schema
        shape = prescan.shape(tree, plain[0], schema, mentions=len(plain))
        exact = shape.single and len(shape.bounds) == shape.terms
        planned = fastpath.plan(tree, tokens, plain[0], schema, exact_where=exact)
    found = Analysis(
        tuple(tokens),
        literals_at(tokens),
        tables,
        schemas,
        tuple(travel),
        tuple(timestamps),
        tuple(plain),
        shape,
        planned,
        extent.depth,
        rewrite.unnamed_items(tokens, tree),
        rewrite.constant_spans(tokens),
        tuple(names),
        strings,
        system_at,
        modes.plain_tags(tokens, schemas),
        modes.equates_twice(tokens),
    )
    if (
        shape is not None
        and len(plain) > 1
        and engine.describe(shape.table).options.update_mode is UpdateMode.OVERWRITE
        and latest_rows.applies(found.rewrite(sql, tokens), shape.table, schema)
    ):
        # Planned once per shape: the query reads the table's latest rows only.
        found = replace(found, prescan=replace(shape, latest=True))
    return found


def _bucket_calls(tokens: Sequence[Token]) -> list[tuple[int, str]]:
    """Where ``tokens`` call time_bucket with more than its two arguments, and the name of
    the function taking so many (:func:`node.sql.functions.bucket_name`)."""
    found: list[tuple[int, str]] = []
    for i, t in enumerate(tokens):
        if (
            not t.is_word("TIME_BUCKET")
            or tokens[i + 1].kind is not Kind.SYMBOL
            or tokens[i + 1].text != "("
        ):
            continue
        depth, arguments = 0, 1
        for u in tokens[i + 1 :]:
            if u.kind is Kind.SYMBOL and u.text in "()":
                depth += 1 if u.text == "(" else -1
                if depth == 0:
                    break
            elif u.kind is Kind.SYMBOL and u.text == "," and depth == 1:
                arguments += 1
        if arguments > 2:
            found.append((i, functions.bucket_name(arguments)))
    return found


# Names keep their case in gnomon's catalog, as in HoraeDB (``CREATE TABLE case_T``), where
# DataFusion folds unquoted names to lower case. An unquoted name is what it spells, else
# its lower-case form (what gnomon's catalog held when it folded names too; see
# :func:`node.sql.parser.resolve`); a quoted one is what it spells. So an unquoted word
# spelling a table or column in another case than lower, or starting with a digit
# (DataFusion reads such a word only quoted), reaches DataFusion quoted as the catalog
# spells it. Other unquoted words are left to DataFusion's folding, which finds the
# lower-case form (and leaves keywords alone: a column named "timestamp" is no reason to
# touch TIMESTAMP).


def _spelled_names(
    tokens: list[Token], sql: str, names: set[str], skip: Sequence[int], *, last: bool
) -> list[tuple[int, str]]:
    """Where ``tokens`` (of ``sql``) name one of ``names`` not as DataFusion would read it,
    and the name (see above); on the ``last`` pass, every word starting with a digit. The
    tokens found become quoted names as the catalog spells them, for the passes that match
    names against the catalog."""
    found: list[tuple[int, str]] = []
    for i, t in enumerate(tokens):
        if i in skip or t.identifier is None:
            continue
        if t.kind is Kind.WORD:
            nxt = tokens[i + 1]  # the END token comes after every word
            if nxt.kind is Kind.SYMBOL and nxt.text == "(":
                continue  # a function
            if t.text in names and t.text != t.identifier:
                name = t.text
            elif t.text[0].isdigit() and (last or resolve(t.text, names) in names):
                name = resolve(t.text, names)
            else:
                continue
        else:
            continue  # a quoted name is taken as written
        tokens[i] = Token(Kind.QUOTED, name, t.pos)
        found.append((i, name))
    return found


# Double quotes: HoraeDB (like MySQL) quotes strings with them and names with back-quotes;
# DataFusion (like PostgreSQL) quotes names with them. gnomon takes "..." as a string where
# a value is expected and the text names nothing the query can mean: a double-quoted token
# is a name where it stands where only a name can (after AS, FROM or JOIN, next to a '.',
# or right after an expression: an alias without AS), and anywhere when it spells (in any
# case) a table, a column of the tables the query names, or an alias the query defines.
# Everywhere else (comparisons, IN lists, function arguments, SELECT items) it is a string.
# (gnomon's own statements take it as a string wherever a literal is expected:
# :meth:`node.sql.parser._Parser.literal`.)

#: Words after which an expression (so a value) starts; after any other word (a name, a
#: keyword such as FROM or AS) a double-quoted token is a name.
_BEFORE_VALUE = frozenset((
    "SELECT", "WHERE", "AND", "OR", "NOT", "LIKE", "ILIKE", "BY", "THEN", "ELSE", "WHEN",
    "CASE", "DISTINCT", "BETWEEN", "IS", "ON", "HAVING", "ALL", "ANY", "SOME", "INTERVAL",
    "ESCAPE", "TO", "ZONE", "LIMIT", "OFFSET", "IN", "VALUES", "RETURNING",
))  # fmt: skip


def _double_quoted_strings(
    tokens: Sequence[Token], sql: str, tables: set[str], schemas: tuple[tuple[str, Schema], ...]
) -> tuple[int, ...]:
    """Where ``tokens`` (of ``sql``) hold double-quoted string literals (see above)."""
    quoted = [i for i, t in enumerate(tokens) if t.kind is Kind.QUOTED and sql[t.pos] == '"']
    if not quoted:
        return ()
    names = {n.lower() for n in tables}
    names.update(c.name.lower() for _, schema in schemas for c in schema.columns)
    names.update(
        n.lower()
        for i, t in enumerate(tokens[1:], 1)
        if tokens[i - 1].is_word("AS") and (n := t.identifier) is not None
    )
    values = [i for i in quoted if _stands_for_value(tokens, i)]
    names.update(tokens[i].text.lower() for i in set(quoted).difference(values))
    return tuple(i for i in values if tokens[i].text.lower() not in names)


def _stands_for_value(tokens: Sequence[Token], i: int) -> bool:
    """Whether token ``i`` stands where a value can (see above)."""
    nxt = tokens[i + 1]  # the END token comes after every name
    if nxt.kind is Kind.SYMBOL and nxt.text == ".":
        return False
    if i == 0:
        return True
    prev = tokens[i - 1]
    if prev.kind is Kind.SYMBOL:
        return prev.text not in (".", ")")
    if prev.kind is Kind.WORD:
        return prev.upper in _BEFORE_VALUE
    return False  # after a literal or quoted name: an alias


def timestamp_ms(t: Token) -> int:
    """The milliseconds a TIMESTAMP AS OF literal names: a whole number, or a string."""
    if t.kind is Kind.NUMBER and t.text.isdigit():
        return int(t.text)
    if t.kind is Kind.STRING:
        try:
            return parse_timestamp(t.text)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
    raise InvalidArgument(
        f"TIMESTAMP AS OF takes milliseconds or a timestamp string like '2024-01-01 00:00:00', "
        f"not {t.text!r}"
    )


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch of a timestamp string such as '2024-01-01 00:00:00'."""
    return int(pa.scalar(text).cast(pa.timestamp("ms")).cast(pa.int64()).as_py())


def _dq(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _number(tokens: Sequence[Token], i: int) -> tuple[int, int] | None:
    """An integer literal (optionally negative) starting at token ``i``: its first and last
    token."""
    t = tokens[i]
    first = i
    if t.kind is Kind.SYMBOL and t.text == "-" and i + 1 < len(tokens):
        i += 1
    n = tokens[i]
    if n.kind is Kind.NUMBER and n.text.isdigit():
        return first, i
    return None


def _numbers(tokens: Sequence[Token], k: int) -> list[tuple[int, int]]:
    """The integer literals of ``( n, n, ... )`` opening at token ``k``; a list holding
    anything else (a subquery, an expression) is left alone as a whole."""

    def symbol(j: int, text: str) -> bool:
        return j < len(tokens) and tokens[j].kind is Kind.SYMBOL and tokens[j].text == text

    if not symbol(k, "("):
        return []
    found: list[tuple[int, int]] = []
    j = k + 1
    while j < len(tokens):
        number = _number(tokens, j)
        if number is None:
            return []
        found.append(number)
        j = number[1] + 1
        if symbol(j, ")"):
            return found
        if not symbol(j, ","):
            return []
        j += 1
    return []


def _timestamp_literals(tokens: Sequence[Token], i: int) -> list[tuple[int, int]]:
    """The integer literals compared with the timestamp column at token ``i``."""
    found: list[tuple[int, int]] = []
    nxt = tokens[i + 1]  # the END token comes after every name
    if nxt.kind is Kind.SYMBOL and nxt.text in _COMPARISONS:
        number = _number(tokens, i + 2)
        if number:
            found.append(number)
    elif (k := _after(tokens, i + 1, "BETWEEN")) is not None:
        first = _number(tokens, k)
        if first:
            found.append(first)
            j = first[1] + 1
            if j < len(tokens) and tokens[j].is_word("AND"):
                second = _number(tokens, j + 1)
                if second:
                    found.append(second)
    elif (k := _after(tokens, i + 1, "IN")) is not None:
        found.extend(_numbers(tokens, k))
    if i >= 2 and tokens[i - 1].kind is Kind.SYMBOL and tokens[i - 1].text in _COMPARISONS:
        prev = tokens[i - 2]
        if prev.kind is Kind.NUMBER and prev.text.isdigit():
            neg = i >= 3 and tokens[i - 3].kind is Kind.SYMBOL and tokens[i - 3].text == "-"
            found.append((i - 3 if neg else i - 2, i - 2))
    return found


def _after(tokens: Sequence[Token], i: int, word: str) -> int | None:
    """Where what follows ``word`` or ``NOT word`` at token ``i`` starts, if either is
    there."""
    if tokens[i].is_word(word):
        return i + 1
    if tokens[i].is_word("NOT") and i + 1 < len(tokens) and tokens[i + 1].is_word(word):
        return i + 2
    return None
