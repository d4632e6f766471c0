"""Tokens of gnomon's SQL dialect, for the statements gnomon parses itself (DDL, INSERT,
DELETE, SHOW, DESCRIBE); SELECT text goes to DataFusion, within the bounds
:func:`check_bounds` puts on its size and shape."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gnomon.errors import InvalidArgument


class Kind:
    """Token kinds, compared with ``is``. Plain class attributes rather than an Enum: looking
    up an Enum member costs about four times as much, and planning one query looks up
    hundreds."""

    WORD: Final = "word"  # keyword or unquoted identifier
    QUOTED: Final = "quoted"  # `ident` or "ident": case-sensitive identifier
    STRING: Final = "string"  # 'text'
    NUMBER: Final = "number"
    SYMBOL: Final = "symbol"
    END: Final = "end"


class Token:
    """One token: its kind, its text (a string literal's or quoted identifier's unquoted),
    and where it starts in the statement."""

    __slots__ = ("identifier", "kind", "pos", "text", "upper")

    def __init__(self, kind: str, text: str, pos: int) -> None:
        self.kind = kind  # a Kind
        self.text = text
        self.pos = pos
        # Both derived once: a query's tokens are tested hundreds of times while it is planned.
        #: The text in upper case, for keyword tests.
        self.upper = text.upper()
        #: The name this token is as an identifier: quoted as written, unquoted folded to
        #: lower case (as DataFusion folds it); None for any other token.
        self.identifier: str | None = (
            text.lower() if kind is Kind.WORD else text if kind is Kind.QUOTED else None
        )

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, {self.pos})"

    def is_word(self, *words: str) -> bool:
        return self.kind is Kind.WORD and self.upper in words


# Longer symbols first. Besides what the dialect's own statements use, this covers the
# operators of queries handed on to DataFusion (arithmetic, ||, ::, [], ...), whose text is
# tokenized too (to find the tables and timestamp comparisons they contain).
_SYMBOLS = (
    "<=", ">=", "<>", "!=", "||", "::", "(", ")", ",", ";", "=", "<", ">", "*", ".", "-", "+",
    "/", "%", "[", "]", "{", "}", ":", "|", "&", "^", "~", "!", "?", "@", "#", "$",
)  # fmt: skip

# A word may start with digits, as a HoraeDB (MySQL) table name does
# (``03_dml_select``), when a letter or underscore follows them, but never where a number
# is: an exponent (``1e5``, ``2E+3``) or a hexadecimal literal (``0x1F``) stays a number.
# DataFusion reads such a word only quoted (:meth:`node.sql.analysis.Analysis.rewrite`).
_DIGIT_WORD = r"""\d++(?![eE][+-]?\d++(?![\w$])|(?<=0)[xX][\da-fA-F]++(?![\w$]))[^\W\d][\w$]*+"""
# A dot between a name and such a word (``t.1st_value``) qualifies the word, where ``.1``
# would otherwise start a number.
_QUALIFYING_DOT = r"""(?<=[\w$`"])\.(?=""" + _DIGIT_WORD + r""")"""

# One pattern for every token, tried at each position: a regular expression walks the text
# in C, where a loop over characters cost about 5 us per token. Space and comments before a
# token are skipped (possessively: a comment never comes back as symbols). Groups, most
# frequent first: a word; a number (digits, a decimal point, an exponent with its sign); a
# symbol (longer ones first, "." not before a digit, "/" not opening a comment); a string
# literal; a quoted identifier (either quote); and the errors: a comment left open, then any
# other character (an unterminated quote, a stray character). Nothing matches at the end.
_PATTERN = re.compile(
    r"""(?:\s+|--[^\n]*+\n?|/\*.*?\*/)*+"""
    r"""(?:([^\W\d][\w$]*|""" + _DIGIT_WORD + r""")"""
    r"""|((?:\d|(?!""" + _QUALIFYING_DOT + r""")\.(?=\d))(?:[\d.eE]|(?<=[eE])[+-])*)"""
    r"""|(<=|>=|<>|!=|\|\||::|\.(?!\d)|""" + _QUALIFYING_DOT + r"""|/(?!\*)"""
    r"""|[(),;=<>*\-+%\[\]{}:|&^~!?@#$])"""
    r"""|'((?:[^']|'')*+)'"""
    r"""|"((?:[^"]|"")*+)"|`((?:[^`]|``)*+)`"""
    r"""|(/\*)|(.)|\Z)""",
    re.DOTALL,
)
_WORD, _NUMBER, _SYMBOL, _STRING, _DOUBLE, _BACK = range(1, 7)


def tokenize(sql: str) -> tuple[Token, ...]:
    """The tokens of ``sql``, ending with an END token."""
    out: list[Token] = []
    for m in _PATTERN.finditer(sql):
        group = m.lastindex
        if group is None:
            break  # the end, after any space and comments
        text, pos = m.group(group), m.start(group)
        if group == _WORD:
            out.append(Token(Kind.WORD, text, pos))
        elif group == _SYMBOL:
            out.append(Token(Kind.SYMBOL, text, pos))
        elif group == _NUMBER:
            out.append(Token(Kind.NUMBER, text, pos))
        elif group == _STRING:
            out.append(Token(Kind.STRING, text.replace("''", "'"), pos - 1))
        elif group in (_DOUBLE, _BACK):
            quote = sql[pos - 1]
            if not text and quote == "`":
                # "" may be HoraeDB's empty string; the parser refuses it where a name stands
                raise InvalidArgument(f"empty quoted identifier at position {pos - 1}")
            out.append(Token(Kind.QUOTED, text.replace(quote * 2, quote), pos - 1))
        else:
            raise _error(sql, pos)
    out.append(Token(Kind.END, "", len(sql)))
    return tuple(out)


def _error(sql: str, pos: int) -> InvalidArgument:
    """Why the text at ``pos`` is no token."""
    c = sql[pos]
    if sql.startswith("/*", pos):
        return InvalidArgument(f"unterminated comment at position {pos}")
    if c in "'\"`":
        return InvalidArgument(f"unterminated {c} quote starting at position {pos}")
    return InvalidArgument(f"unexpected character {c!r} at position {pos}")


# Bounds on a query handed to DataFusion. Its planner and optimizer recurse once per level of
# an expression tree (a flat chain of 10,000 ORs is a tree 10,000 deep: it overflowed the
# native stack and killed the process) and take time that grows faster than the square of
# a chain's length (a sum of 256 columns filtered by WHERE took 0.4 s to plan, 512 took
# 2.8 s, 1,024 took 19 s). A long OR of equalities of one column reaches DataFusion as an IN
# list (:mod:`node.sql.rewrite`), which is flat, so these bounds leave room for what people
# write or generate.

#: Characters of a query's text (tokenizing a mebibyte takes about 0.4 s).
MAX_QUERY_CHARS = 1 << 20
#: Parentheses open at once. DataFusion's SQL parser refuses more than about 46 (and nested
#: subqueries beyond 23), so this is its limit stated first, where gnomon's own passes over
#: the tokens (some recursive) have not run yet.
MAX_NESTING = 32
#: Binary operators on one path down an expression tree, at most: those of an expression's
#: chain at each enclosing level, plus one per level (``a = 1 OR b = 2`` counts 3: the
#: comparisons' and the OR). A level takes 1 to 2 KiB of native stack to plan; queries deeper
#: than a few levels run where there is far more (:data:`node.sql.session.DEEP_STACK_BYTES`).
MAX_EXPRESSION_DEPTH = 256
#: Binary operators in a whole query: with the depth bound, this bounds the planning time
#: (eight 256-term sums and a 256-operator WHERE clause plan in about a second).
MAX_OPERATORS = 2048

#: Words that are binary operators (an expression node with two operands).
_OPERATOR_WORDS = frozenset(("AND", "OR", "IS", "LIKE", "ILIKE", "IN", "BETWEEN", "SIMILAR"))
#: Symbols that are no operator: grouping, lists, qualified names.
_NOT_OPERATORS = frozenset(("(", ")", ",", ";", ".", "]", "{", "}"))
#: Words that end one expression and start another at the same parenthesis level.
_EXPRESSION_ENDS = frozenset((
    "SELECT", "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "ON", "USING",
    "JOIN", "UNION", "INTERSECT", "EXCEPT", "WHEN", "THEN", "ELSE", "END", "AS", "WITH",
    "WINDOW", "QUALIFY", "PARTITION", "BY",
))  # fmt: skip


@dataclass(frozen=True)
class Extent:
    """How deep and large a query's expressions are (:func:`extent`)."""

    nesting: int
    depth: int
    operators: int


def check_size(sql: str) -> None:
    """Refuse a query longer than :data:`MAX_QUERY_CHARS`."""
    if len(sql) > MAX_QUERY_CHARS:
        raise InvalidArgument(
            f"query too long: {len(sql)} characters, at most {MAX_QUERY_CHARS} "
            f"(MAX_QUERY_CHARS) are taken"
        )


def extent(tokens: Sequence[Token]) -> Extent:
    """The nesting, expression depth and operators of ``tokens`` (see the bounds above).
    One pass over the tokens, made once per query shape."""
    nesting = depth = operators = 0
    # Per open parenthesis: the depth reached before it and the chain it interrupted.
    open_: list[tuple[int, int]] = []
    base = chain = 0
    for t in tokens:
        kind = t.kind
        if kind is Kind.SYMBOL:
            text = t.text
            if text == "(":
                open_.append((base, chain))
                base += chain + 1
                chain = 0
                nesting = max(nesting, len(open_))
                continue
            if text == ")":
                if open_:
                    base, chain = open_.pop()
                continue
            if text == ",":
                chain = 0
                continue
            if text in _NOT_OPERATORS:
                continue
        elif kind is Kind.WORD:
            upper = t.upper
            if upper in _EXPRESSION_ENDS:
                chain = 0
                continue
            if upper not in _OPERATOR_WORDS:
                continue
        else:
            continue
        chain += 1
        operators += 1
        if base + chain > depth:
            depth = base + chain
    return Extent(nesting, depth, operators)


def check_bounds(tokens: Sequence[Token]) -> Extent:
    """The extent of a query's ``tokens``; raises InvalidArgument, naming the bound and the
    value found, when it exceeds one."""
    found = extent(tokens)
    if found.nesting > MAX_NESTING:
        raise InvalidArgument(
            f"query too complex: parentheses nested {found.nesting} deep, at most "
            f"{MAX_NESTING} (MAX_NESTING)"
        )
    if found.depth > MAX_EXPRESSION_DEPTH:
        raise InvalidArgument(
            f"query too complex: an expression chains {found.depth} operators (with those "
            f"of the expressions around it), at most {MAX_EXPRESSION_DEPTH} "
            f"(MAX_EXPRESSION_DEPTH); a long OR of one column's values is better written "
            f"col IN (...)"
        )
    if found.operators > MAX_OPERATORS:
        raise InvalidArgument(
            f"query too complex: {found.operators} operators, at most {MAX_OPERATORS} "
            f"(MAX_OPERATORS)"
        )
    return found


@dataclass(frozen=True)
class Shaped:
    """A statement's shape and literals (:func:`shaped`)."""

    #: The statement's text with each literal replaced by a mark of its kind.
    text: str
    #: Its literal tokens, in order, as :func:`tokenize` makes them.
    literals: tuple[Token, ...]

    def found_at(self, tokens: Sequence[Token], at: Sequence[int]) -> bool:
        """Whether the literals :func:`tokenize` found in the statement (``tokens``, at
        ``at``: :func:`literals_at`) are this shape's, which :meth:`swapped` puts into
        another statement's tokens (never so with double-quoted strings, which a shape
        holds as text)."""
        return [(t.kind, t.text, t.pos) for t in self.literals] == [
            (tokens[i].kind, tokens[i].text, tokens[i].pos) for i in at
        ]

    def swapped(self, tokens: Sequence[Token], at: Sequence[int]) -> list[Token]:
        """``tokens`` of a statement of this shape (its literals at ``at``) with this
        statement's literals in their place: without tokenizing it. Only the literals'
        positions are this statement's."""
        out = list(tokens)
        for i, literal in zip(at, self.literals, strict=True):
            out[i] = literal
        return out


def literals_at(tokens: Sequence[Token]) -> tuple[int, ...]:
    """Where the literals :func:`shaped` finds are among ``tokens``."""
    return tuple(i for i, t in enumerate(tokens) if t.kind in (Kind.STRING, Kind.NUMBER))


# Marks of the literals in a shape. No statement holding the character they start with has
# a shape (the marks could not be told from its text).
_MARK = "\x00"
_STRING_MARK, _WHOLE_MARK, _NUMBER_MARK = _MARK + "s", _MARK + "i", _MARK + "n"

# Everything :data:`_PATTERN` reads, but whatever is no literal matched as one run (words
# with the digits they hold, space and symbols, comments, quoted identifiers, a minus sign,
# slash or dot starting no comment or number), so a statement costs a match per literal
# instead of one per token.
_LITERALS = re.compile(
    r"""((?:[^\W\d][\w$]*+|""" + _DIGIT_WORD + r"""|[^\w'"`.\-/]++|--[^\n]*+\n?|/\*.*?\*/"""
    r"""|"(?:[^"]|"")*+"|`(?:[^`]|``)*+`|-(?!-)|/(?!\*)|\.(?!\d)|""" + _QUALIFYING_DOT + r""")++)"""
    r"""|'((?:[^']|'')*+)'"""
    r"""|((?:\d|\.(?=\d))(?:[\d.eE]|(?<=[eE])[+-])*)"""
    r"""|(.)""",
    re.DOTALL,
)


def shaped(sql: str) -> Shaped | None:
    """The shape and literals of ``sql``: two statements of the same shape have the same
    tokens but for their literals' values (a number's only in whether it is whole), and
    the literals are those :func:`tokenize` finds. None for a statement holding the marks'
    character, or an unterminated quote or comment; other statements :func:`tokenize`
    refuses (a stray character) get a shape, but no analysis is ever kept for one."""
    if _MARK in sql:
        return None
    parts: list[str] = []
    literals: list[Token] = []
    for m in _LITERALS.finditer(sql):
        group = m.lastindex
        if group == 1:
            parts.append(m.group(1))
        elif group == 2:
            parts.append(_STRING_MARK)
            literals.append(Token(Kind.STRING, m.group(2).replace("''", "'"), m.start()))
        elif group == 3:
            text = m.group(3)
            parts.append(_WHOLE_MARK if text.isdigit() else _NUMBER_MARK)
            literals.append(Token(Kind.NUMBER, text, m.start()))
        else:
            return None
    return Shaped("".join(parts), tuple(literals))
