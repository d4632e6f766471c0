"""PostgreSQL's own forms in a query, as DataFusion reads them. Clients such as Grafana send
catalog queries written for PostgreSQL alone; five of its rules are applied here, each a
rule of PostgreSQL's that DataFusion lacks, not a pattern of one client's text:

- ``user``, ``current_user``, ``session_user`` and ``current_role`` are keywords naming the
  session's user, not columns: they become that name as a literal.
- A function in FROM given an alias without a column list yields one column named as the
  alias (``generate_series(1, 3) AS i``; ``string_to_array(...) s``, a scalar function, as
  a one-row table): the alias is given as the column's name too.
- An uncorrelated ``IN (SELECT ...)`` that reads no table is a constant of the statement
  (PostgreSQL's initplan): it is run once and its values written in its place. DataFusion
  plans such a subquery in a filter or a projection but not in ORDER BY, where Grafana's
  table list has it.
- A function qualified by ``pg_catalog`` is the function: that schema is always searched.
- ``'pg_class'::regclass`` is the OID of that relation of pg_catalog (pgjdbc joins
  comments so).

Only queries (SELECT, WITH) are read; anything that does not tokenize is left to the
engine, which words its error."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa

from gnomon.errors import GnomonError
from node.sql.lexer import Kind, Token, tokenize
from node.sql.rewrite import raw
from node.sql.system import PG_CATALOG, RELATIONS

#: Runs a query, answering its rows.
Query = Callable[[str], pa.Table]

_SESSION_USER = frozenset(("USER", "CURRENT_USER", "SESSION_USER", "CURRENT_ROLE"))
#: Functions DataFusion answers as tables; any other function in FROM is a scalar one.
_TABLE_FUNCTIONS = frozenset(("generate_series", "range"))
_FROM_ENDS = frozenset(
    ("WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "UNION", "EXCEPT", "INTERSECT",
     "WINDOW", "ON", "USING", "FETCH")
)  # fmt: skip
_NOT_ALIASES = _FROM_ENDS | {"JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL"}
#: Words a constant subquery may hold besides its functions and the names it declares.
_CONSTANT_WORDS = frozenset(
    ("SELECT", "FROM", "AS", "CASE", "WHEN", "THEN", "ELSE", "END", "AND", "OR", "NOT", "IN",
     "IS", "NULL", "TRUE", "FALSE", "DISTINCT", "WHERE", "LIKE", "BETWEEN")
)  # fmt: skip
#: The most values a constant subquery is written out as.
MAX_CONSTANTS = 1000

_Edit = tuple[int, int, str]


def translate(sql: str, user: str, query: Query) -> str:
    """``sql`` with PostgreSQL's forms written as DataFusion reads them (``user`` the
    session's; ``query`` runs a constant subquery)."""
    try:
        tokens = tokenize(sql)
    except GnomonError:
        return sql
    if not tokens[0].is_word("SELECT", "WITH") and not (
        tokens[0].text == "(" and tokens[1].is_word("SELECT", "WITH")
    ):
        return sql
    sql = _apply(
        sql,
        [
            *_session_users(tokens, user),
            *_function_aliases(sql, tokens),
            *_catalog_functions(tokens),
            *_relation_oids(sql, tokens),
        ],
    )
    return _apply(sql, _constant_subqueries(sql, tokenize(sql), query))


def _apply(sql: str, edits: Sequence[_Edit]) -> str:
    for start, end, text in sorted(edits, reverse=True):
        sql = sql[:start] + text + sql[end:]
    return sql


def _end(t: Token, sql: str) -> int:
    return t.pos + len(raw(t, sql))


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _session_users(tokens: Sequence[Token], user: str) -> list[_Edit]:
    return [
        (t.pos, t.pos + len(t.text), _literal(user))
        for i, t in enumerate(tokens)
        if t.kind is Kind.WORD
        and t.upper in _SESSION_USER
        and (i == 0 or tokens[i - 1].text != ".")
        and tokens[i + 1].text not in ("(", ".")
    ]


def _catalog_functions(tokens: Sequence[Token]) -> list[_Edit]:
    """``pg_catalog.f(...)`` as ``f(...)``: pg_catalog is searched first, always."""
    return [
        (t.pos, tokens[i + 2].pos, "")
        for i, t in enumerate(tokens[:-3])
        if t.identifier == PG_CATALOG and tokens[i + 1].text == "." and tokens[i + 3].text == "("
    ]


def _relation_oids(sql: str, tokens: Sequence[Token]) -> list[_Edit]:
    """``'pg_class'::regclass`` as the relation's OID, for pg_catalog's relations."""
    edits: list[_Edit] = []
    for i, t in enumerate(tokens[:-2]):
        cast = tokens[i + 2]
        if (
            t.kind is Kind.STRING
            and tokens[i + 1].text == "::"
            and cast.identifier == "regclass"
            and t.text.removeprefix(f"{PG_CATALOG}.") in RELATIONS
        ):
            oid = RELATIONS[t.text.removeprefix(f"{PG_CATALOG}.")]
            edits.append((t.pos, _end(cast, sql), str(oid)))
    return edits


def _closing(tokens: Sequence[Token], i: int) -> int:
    """The index of the parenthesis closing the one at ``i`` (the END token if none)."""
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].kind is Kind.SYMBOL:
            if tokens[j].text == "(":
                depth += 1
            elif tokens[j].text == ")":
                depth -= 1
                if depth == 0:
                    return j
    return len(tokens) - 1


def _from_items(tokens: Sequence[Token]) -> list[int]:
    """Indexes of the first token of every FROM item, at any depth."""
    starts: list[int] = []
    in_from: list[bool] = [False]  # per parenthesis depth
    for i, t in enumerate(tokens):
        if t.kind is Kind.SYMBOL and t.text == "(":
            in_from.append(False)
        elif t.kind is Kind.SYMBOL and t.text == ")":
            if len(in_from) > 1:
                in_from.pop()
        elif t.is_word("FROM", "JOIN"):
            in_from[-1] = True
            starts.append(i + 1)
        elif t.kind is Kind.WORD and t.upper in _FROM_ENDS:
            in_from[-1] = False
        elif t.text == "," and t.kind is Kind.SYMBOL and in_from[-1]:
            starts.append(i + 1)
    return starts


def _function_aliases(sql: str, tokens: Sequence[Token]) -> list[_Edit]:
    edits: list[_Edit] = []
    for i in _from_items(tokens):
        name = tokens[i]
        if name.kind is not Kind.WORD or tokens[i + 1].text != "(":
            continue
        close = _closing(tokens, i + 1)
        at = close + 1 + int(tokens[close + 1].is_word("AS"))
        alias = tokens[at]
        if (
            alias.kind not in (Kind.WORD, Kind.QUOTED)
            or (alias.kind is Kind.WORD and alias.upper in _NOT_ALIASES)
            or tokens[at + 1].text == "("
        ):
            continue
        written = raw(alias, sql)
        if name.identifier in _TABLE_FUNCTIONS:
            edits.append((_end(alias, sql), _end(alias, sql), f"({written})"))
        else:
            call = sql[name.pos : _end(tokens[close], sql)]
            edits.append((name.pos, _end(alias, sql), f"(SELECT {call}) AS {written}({written})"))
    return edits


def _constant_subqueries(sql: str, tokens: Sequence[Token], query: Query) -> list[_Edit]:
    edits: list[_Edit] = []
    i = 0
    while i < len(tokens) - 2:
        if (
            tokens[i].is_word("IN")
            and tokens[i + 1].text == "("
            and tokens[i + 2].is_word("SELECT")
        ):
            close = _closing(tokens, i + 1)
            inner = tokens[i + 2 : close]
            if _constant(inner):
                values = _values(sql[inner[0].pos : tokens[close].pos], query)
                if values is not None:
                    edits.append((tokens[i + 1].pos, tokens[close].pos + 1, values))
                    i = close
        i += 1
    return edits


def _constant(tokens: Sequence[Token]) -> bool:
    """Whether a subquery's ``tokens`` read no table and no column of an outer query: every
    word is a keyword, a function, a type after ``::``, or a name declared by an alias."""
    declared: set[str] = set()
    for i, t in enumerate(tokens):
        if t.is_word("AS") and i + 1 < len(tokens):
            declared.add(str(tokens[i + 1].identifier))
            if i + 2 < len(tokens) and tokens[i + 2].text == "(":
                close = _closing(tokens, i + 2)
                declared.update(str(c.identifier) for c in tokens[i + 3 : close] if c.identifier)
    for i, t in enumerate(tokens):
        if t.kind is Kind.QUOTED or t.kind is Kind.WORD:
            following = tokens[i + 1].text if i + 1 < len(tokens) else ""
            if (
                (t.kind is Kind.WORD and t.upper in _CONSTANT_WORDS)
                or following == "("
                or (i > 0 and tokens[i - 1].text == "::")
                or t.identifier in declared
            ):
                continue
            return False
    return True


def _values(subquery: str, query: Query) -> str | None:
    rows = query(subquery)
    if rows.num_columns != 1 or not 0 < rows.num_rows <= MAX_CONSTANTS:
        return None
    return "(" + ", ".join(_literal(v) for v in rows.column(0).to_pylist()) + ")"
