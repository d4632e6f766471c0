"""Tokens of gnomon's SQL dialect, for the statements gnomon parses itself (DDL, INSERT,
DELETE, SHOW, DESCRIBE); SELECT text goes to DataFusion."""

from __future__ import annotations

import re
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


@dataclass(frozen=True)
class Shaped:
    """A statement's shape and literals (:func:`shaped`)."""

    #: The statement's text with each literal replaced by a mark of its kind.
    text: str
    #: Its literal tokens, in order, as :func:`tokenize` makes them.
    literals: tuple[Token, ...]


# Marks of the literals in a shape. No statement holding the character they start with has
# a shape (the marks could not be told from its text).
_MARK = "\x00"
_STRING_MARK, _WHOLE_MARK, _NUMBER_MARK = _MARK + "s", _MARK + "i", _MARK + "n"

# Everything :data:`_PATTERN` reads, but whatever is no literal matched as one run (words
# with the digits they hold, space and symbols, comments, quoted identifiers, a minus sign,
# slash or dot starting no comment or number), so a statement costs a match per literal
# instead of one per token.
_LITERALS = re.compile(
    r"""((?:[^\W\d][\w$]*+|[^\w'"`.\-/]++|--[^\n]*+\n?|/\*.*?\*/"""
    r"""|"(?:[^"]|"")*+"|`(?:[^`]|``)*+`|-(?!-)|/(?!\*)|\.(?!\d))++)"""
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
