"""Tokens of gnomon's SQL dialect, for the statements gnomon parses itself (DDL, INSERT,
DELETE, SHOW, DESCRIBE); SELECT text goes to DataFusion."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class Token:
    kind: str  # a Kind
    text: str
    pos: int
    # Both derived once: a query's tokens are tested hundreds of times while it is planned.
    #: The text in upper case, for keyword tests.
    upper: str = field(init=False, repr=False, compare=False)
    #: The name this token is as an identifier: quoted as written, unquoted folded to lower
    #: case (as DataFusion folds it); None for any other token.
    identifier: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "upper", self.text.upper())
        name = {Kind.QUOTED: self.text, Kind.WORD: self.text.lower()}.get(self.kind)
        object.__setattr__(self, "identifier", name)

    def is_word(self, *words: str) -> bool:
        return self.kind is Kind.WORD and self.upper in words


# Longer symbols first. Besides what the dialect's own statements use, this covers the
# operators of queries handed on to DataFusion (arithmetic, ||, ::, [], ...), whose text is
# tokenized too (to find the tables and timestamp comparisons they contain).
_SYMBOLS = (
    "<=", ">=", "<>", "!=", "||", "::", "(", ")", ",", ";", "=", "<", ">", "*", ".", "-", "+",
    "/", "%", "[", "]", "{", "}", ":", "|", "&", "^", "~", "!", "?", "@", "#", "$",
)  # fmt: skip


@functools.lru_cache(maxsize=256)
def tokenize(sql: str) -> tuple[Token, ...]:
    """The tokens of ``sql``, ending with an END token. Cached: a query's text is tokenized
    by the parser and again by the executor, and dashboards send the same texts again."""
    out: list[Token] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            if j < 0:
                raise InvalidArgument(f"unterminated comment at position {i}")
            i = j + 2
        elif c == "'":
            text, i2 = _quoted(sql, i, "'")
            out.append(Token(Kind.STRING, text, i))
            i = i2
        elif c in '`"':
            text, i2 = _quoted(sql, i, c)
            if not text:
                raise InvalidArgument(f"empty quoted identifier at position {i}")
            out.append(Token(Kind.QUOTED, text, i))
            i = i2
        elif c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit()):
            j = i
            while j < n and (
                sql[j].isdigit() or sql[j] in ".eE" or (sql[j] in "+-" and sql[j - 1] in "eE")
            ):
                j += 1
            out.append(Token(Kind.NUMBER, sql[i:j], i))
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (sql[j].isalnum() or sql[j] in "_$"):
                j += 1
            out.append(Token(Kind.WORD, sql[i:j], i))
            i = j
        else:
            for s in _SYMBOLS:
                if sql.startswith(s, i):
                    out.append(Token(Kind.SYMBOL, s, i))
                    i += len(s)
                    break
            else:
                raise InvalidArgument(f"unexpected character {c!r} at position {i}")
    out.append(Token(Kind.END, "", n))
    return tuple(out)


def _quoted(sql: str, start: int, quote: str) -> tuple[str, int]:
    """The text between quotes (a doubled quote is one literal quote) and the index after."""
    parts: list[str] = []
    i = start + 1
    while True:
        j = sql.find(quote, i)
        if j < 0:
            raise InvalidArgument(f"unterminated {quote} quote starting at position {start}")
        parts.append(sql[i:j])
        if sql.startswith(quote * 2, j):
            parts.append(quote)
            i = j + 2
        else:
            return "".join(parts), j + 1
