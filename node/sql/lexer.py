"""Tokens of gnomon's SQL dialect, for the statements gnomon parses itself (DDL, INSERT,
DELETE, SHOW, DESCRIBE); SELECT text goes to DataFusion."""

from __future__ import annotations

import re
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

    __slots__ = ("identifier", "kind", "pos", "shape", "text", "upper")

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
        #: What the token is to the shape of its query (:mod:`node.sql.analysis`): its kind
        #: and text, but of a literal only its kind (and whether a number is whole, which
        #: decides what it can be).
        self.shape: tuple[str, str | bool] | tuple[str] = (
            (kind, text.isdigit())
            if kind is Kind.NUMBER
            else (kind,)
            if kind is Kind.STRING
            else (kind, text)
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

# One pattern for every token, tried at each position: a regular expression walks the text
# in C, where a loop over characters cost about 5 us per token. Space and comments before a
# token are skipped (possessively: a comment never comes back as symbols). Groups, most
# frequent first: a word; a number (digits, a decimal point, an exponent with its sign); a
# symbol (longer ones first, "." not before a digit, "/" not opening a comment); a string
# literal; a quoted identifier (either quote); and the errors: a comment left open, then any
# other character (an unterminated quote, a stray character). Nothing matches at the end.
_PATTERN = re.compile(
    r"""(?:\s+|--[^\n]*+\n?|/\*.*?\*/)*+"""
    r"""(?:([^\W\d][\w$]*)"""
    r"""|((?:\d|\.(?=\d))(?:[\d.eE]|(?<=[eE])[+-])*)"""
    r"""|(<=|>=|<>|!=|\|\||::|\.(?!\d)|/(?!\*)|[(),;=<>*\-+%\[\]{}:|&^~!?@#$])"""
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
            if not text:
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
