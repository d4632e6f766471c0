"""InfluxQL's syntax: tokens, the statements gnomon takes (``SELECT``, ``SHOW ...``) as values,
and the parser that builds them; a statement outside what :mod:`node.sql.influxql` lists as
taken is refused here, naming what is not supported."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from gnomon.errors import InvalidArgument

#: Nanoseconds per unit of an InfluxQL duration literal.
_UNITS_NS = {
    "ns": 1,
    "u": 1_000,
    "µ": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
    "w": 604_800_000_000_000,
}
#: ``epoch=`` values: how many nanoseconds one unit of the answer's times is.
EPOCHS_NS = {k: v for k, v in _UNITS_NS.items() if k not in ("d", "w")} | {"n": 1}
#: InfluxQL aggregate -> the SQL that computes it over column ``c`` ordered by time ``t``.
AGGREGATES: dict[str, Callable[[str, str], str]] = {
    "count": lambda c, t: f"count({c})",
    "mean": lambda c, t: f"avg({c})",
    "sum": lambda c, t: f"sum({c})",
    "min": lambda c, t: f"min({c})",
    "max": lambda c, t: f"max({c})",
    "median": lambda c, t: f"median({c})",
    "stddev": lambda c, t: f"stddev({c})",
    "spread": lambda c, t: f"max({c}) - min({c})",
    "first": lambda c, t: f"first_value({c} ORDER BY {t})",
    "last": lambda c, t: f"last_value({c} ORDER BY {t})",
}
_FILLS = ("null", "none", "previous", "linear")

_TOKEN = re.compile(
    r"""\s*(?:
      (?P<dur>\d+(?:ns|ms|u|µ|s|m|h|d|w)(?![A-Za-z_0-9]))
    | (?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)
    | (?P<str>'(?:[^'\\]|\\.)*')
    | (?P<qid>"(?:[^"\\]|\\.)*")
    | (?P<id>[A-Za-z_][A-Za-z_0-9]*)
    | (?P<op>=~|!~|!=|<>|<=|>=|[=<>(),;*+\-/.])
    | (?P<regex>/)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str  # dur, num, str, qid, id, op
    text: str

    @property
    def word(self) -> str:
        """An unquoted word in upper case ('' for anything else)."""
        return self.text.upper() if self.kind == "id" else ""


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.lastgroup is None:
            raise InvalidArgument(
                f"InfluxQL: unexpected character at {pos}: {text[pos : pos + 20]!r}"
            )
        if m.lastgroup == "regex":
            raise InvalidArgument("InfluxQL: regular expressions are not supported")
        tokens.append(Token(m.lastgroup, m.group(m.lastgroup)))
        pos = m.end()
    return tokens


def unquote(tok: Token) -> str:
    if tok.kind in ("qid", "str"):
        return re.sub(r"\\(.)", r"\1", tok.text[1:-1])
    return tok.text


@dataclass
class Call:
    """An aggregate of one field (or ``*``)."""

    func: str
    arg: str


@dataclass
class Item:
    """One SELECT item: a field or tag name, or an aggregate call; ``*`` is a name too."""

    target: str | Call
    alias: str | None = None


@dataclass
class Select:
    items: list[Item]
    measurement: str
    where: list[Token] = field(default_factory=list)
    bucket_ns: int | None = None
    offset_ns: int = 0
    group_tags: list[str] = field(default_factory=list)
    group_all_tags: bool = False
    fill: str | float = "null"
    descending: bool = False
    limit: int | None = None
    offset: int = 0


@dataclass
class Show:
    what: str  # MEASUREMENTS, TAG KEYS, FIELD KEYS
    measurement: str | None = None


Statement = Select | Show


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self, ahead: int = 0) -> Token | None:
        at = self.pos + ahead
        return self.tokens[at] if at < len(self.tokens) else None

    def next(self, what: str) -> Token:
        tok = self.peek()
        if tok is None:
            raise InvalidArgument(f"InfluxQL: expected {what}, found the end of the statement")
        self.pos += 1
        return tok

    def accept(self, *words: str) -> bool:
        if all(
            (t := self.peek(i)) is not None and (t.word == w or (t.kind == "op" and t.text == w))
            for i, w in enumerate(words)
        ):
            self.pos += len(words)
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.accept(word):
            tok = self.peek()
            found = "the end of the statement" if tok is None else repr(tok.text)
            raise InvalidArgument(f"InfluxQL: expected {word}, found {found}")

    def name(self, what: str) -> str:
        tok = self.next(what)
        if tok.kind not in ("id", "qid"):
            raise InvalidArgument(f"InfluxQL: expected {what}, found {tok.text!r}")
        return unquote(tok)

    def measurement(self) -> str:
        # db.rp.measurement: gnomon has one database and no retention policies.
        parts = [self.name("a measurement")]
        while self.accept("."):
            parts.append(self.name("a measurement"))
        return parts[-1]

    def integer(self, what: str) -> int:
        tok = self.next(what)
        if tok.kind != "num" or not tok.text.isdigit():
            raise InvalidArgument(f"InfluxQL: expected {what}, found {tok.text!r}")
        return int(tok.text)

    def duration(self) -> int:
        tok = self.next("a duration")
        if tok.kind != "dur":
            raise InvalidArgument(f"InfluxQL: expected a duration such as 5m, found {tok.text!r}")
        return duration_ns(tok.text)

    def statement(self) -> Statement:
        if self.accept("SHOW"):
            return self.show()
        if self.accept("SELECT"):
            return self.select()
        tok = self.peek()
        raise InvalidArgument(
            f"InfluxQL: expected SELECT or SHOW, found {tok.text if tok else 'nothing'!r}"
        )

    def show(self) -> Show:
        for words in (("MEASUREMENTS",), ("TAG", "KEYS"), ("FIELD", "KEYS")):
            if self.accept(*words):
                what = " ".join(words)
                measurement = self.measurement() if self.accept("FROM") else None
                self.end()
                return Show(what, measurement)
        raise InvalidArgument("InfluxQL: SHOW takes MEASUREMENTS, TAG KEYS or FIELD KEYS here")

    def select(self) -> Select:
        items = [self.item()]
        while self.accept(","):
            items.append(self.item())
        self.expect("FROM")
        stmt = Select(items, self.measurement())
        if self.accept("INTO"):
            raise InvalidArgument("InfluxQL: SELECT ... INTO is not supported")
        if self.accept("WHERE"):
            start = self.pos
            while (tok := self.peek()) is not None and tok.word not in (
                "GROUP",
                "ORDER",
                "LIMIT",
                "OFFSET",
                "SLIMIT",
                "FILL",
                "TZ",
            ):
                self.pos += 1
            stmt.where = self.tokens[start : self.pos]
        if self.accept("GROUP", "BY"):
            self.group_by(stmt)
        if self.accept("FILL"):
            stmt.fill = self.fill()
        if self.accept("ORDER", "BY"):
            if self.name("time") != "time":
                raise InvalidArgument("InfluxQL: only ORDER BY time is supported")
            stmt.descending = self.accept("DESC")
            if not stmt.descending:
                self.accept("ASC")
        if self.accept("LIMIT"):
            stmt.limit = self.integer("a LIMIT count")
        if self.accept("OFFSET"):
            stmt.offset = self.integer("an OFFSET count")
        self.end()
        return stmt

    def item(self) -> Item:
        if self.accept("*"):
            return Item("*")
        name = self.name("a field, a tag or a function")
        target: str | Call = name
        if self.accept("("):
            func = name.lower()
            if func not in AGGREGATES:
                raise InvalidArgument(f"InfluxQL: function {name}() is not supported")
            arg = "*" if self.accept("*") else self.name(f"the field {name}() takes")
            self.expect(")")
            target = Call(func, arg)
        alias = self.name("an alias") if self.accept("AS") else None
        return Item(target, alias)

    def group_by(self, stmt: Select) -> None:
        while True:
            if self.accept("*"):
                stmt.group_all_tags = True
            elif (
                (tok := self.peek()) is not None
                and tok.word == "TIME"
                and ((nxt := self.peek(1)) is not None and nxt.text == "(")
            ):
                self.pos += 2
                stmt.bucket_ns = self.duration()
                if self.accept(","):
                    sign = -1 if self.accept("-") else 1
                    stmt.offset_ns = sign * self.duration()
                self.expect(")")
            else:
                stmt.group_tags.append(self.name("a tag to group by"))
            if not self.accept(","):
                return

    def fill(self) -> str | float:
        self.expect("(")
        negative = self.accept("-")
        tok = self.next("a fill option")
        self.expect(")")
        if tok.kind == "num":
            return -float(tok.text) if negative else float(tok.text)
        option = tok.text.lower()
        if tok.kind != "id" or option not in _FILLS or negative:
            raise InvalidArgument(
                f"InfluxQL: fill() takes null, none, previous, linear or a number, not {tok.text!r}"
            )
        return option

    def end(self) -> None:
        tok = self.peek()
        if tok is not None:
            raise InvalidArgument(f"InfluxQL: unexpected {tok.text!r}")


def duration_ns(text: str) -> int:
    m = re.fullmatch(r"(\d+)(ns|ms|u|µ|s|m|h|d|w)", text)
    if m is None:
        raise InvalidArgument(f"InfluxQL: {text!r} is not a duration")
    return int(m.group(1)) * _UNITS_NS[m.group(2)]


def split_statements(text: str) -> list[str]:
    """The statements of a query string, split at ``;`` outside quotes."""
    parts, current, quote = [], [], ""
    for ch in text:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif ch == ";":
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse(text: str) -> Statement:
    return _Parser(tokenize(text)).statement()
