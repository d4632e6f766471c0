"""The SQL lexer: every kind of token with its position, what is skipped, and the errors."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import pytest

from gnomon.errors import InvalidArgument
from node.sql.lexer import Kind, Token, shaped, tokenize

pytestmark = pytest.mark.unit


def kinds(sql: str) -> list[tuple[str, str, int]]:
    return [(t.kind, t.text, t.pos) for t in tokenize(sql)]


def test_words_numbers_symbols_with_positions() -> None:
    assert kinds("SELECT a_1, $x FROM t") == [
        (Kind.WORD, "SELECT", 0),
        (Kind.WORD, "a_1", 7),
        (Kind.SYMBOL, ",", 10),
        (Kind.SYMBOL, "$", 12),
        (Kind.WORD, "x", 13),
        (Kind.WORD, "FROM", 15),
        (Kind.WORD, "t", 20),
        (Kind.END, "", 21),
    ]


@pytest.mark.parametrize("number", ["1", "42", "1.5", ".5", "1e5", "1E-5", "1.2e+3", "7."])
def test_numbers(number: str) -> None:
    assert kinds(f"x={number}")[2] == (Kind.NUMBER, number, 2)


def test_a_word_may_start_with_digits_where_no_number_is() -> None:
    assert kinds("03_dml 1e5x 2a 1e5 2E+3 0x1F 12.5") == [
        (Kind.WORD, "03_dml", 0),
        (Kind.WORD, "1e5x", 7),
        (Kind.WORD, "2a", 12),
        (Kind.NUMBER, "1e5", 15),
        (Kind.NUMBER, "2E+3", 19),
        (Kind.NUMBER, "0", 24),
        (Kind.WORD, "x1F", 25),
        (Kind.NUMBER, "12.5", 29),
        (Kind.END, "", 33),
    ]
    assert tokenize("FROM 03_dml")[1].identifier == "03_dml"


def test_a_dot_before_a_digit_starts_a_number_elsewhere_it_is_a_symbol() -> None:
    assert kinds("t.c .5") == [
        (Kind.WORD, "t", 0),
        (Kind.SYMBOL, ".", 1),
        (Kind.WORD, "c", 2),
        (Kind.NUMBER, ".5", 4),
        (Kind.END, "", 6),
    ]


def test_a_dot_between_a_name_and_a_digit_led_word_qualifies_it() -> None:
    # t.3rd is the column 3rd of t; x.5 and t.1e5 keep their numbers, as before.
    assert kinds("t.3rd `q`.2nd x.5 t.1e5") == [
        (Kind.WORD, "t", 0),
        (Kind.SYMBOL, ".", 1),
        (Kind.WORD, "3rd", 2),
        (Kind.QUOTED, "q", 6),
        (Kind.SYMBOL, ".", 9),
        (Kind.WORD, "2nd", 10),
        (Kind.WORD, "x", 14),
        (Kind.NUMBER, ".5", 15),
        (Kind.WORD, "t", 18),
        (Kind.NUMBER, ".1e5", 19),
        (Kind.END, "", 23),
    ]
    found = shaped("SELECT t.3rd, x.5 FROM t")
    assert found is not None and [t.text for t in found.literals] == [".5"]


def test_longest_symbols_first() -> None:
    texts = [t.text for t in tokenize("a<=b>=c<>d!=e||f::g<h")][:-1]
    assert " ".join(texts) == "a <= b >= c <> d != e || f :: g < h"


def test_strings_and_quoted_identifiers_unquote_doubled_quotes() -> None:
    assert kinds("'it''s' \"a\"\"b\" `c``d` ''") == [
        (Kind.STRING, "it's", 0),
        (Kind.QUOTED, 'a"b', 8),
        (Kind.QUOTED, "c`d", 15),
        (Kind.STRING, "", 22),
        (Kind.END, "", 24),
    ]


def test_identifiers_fold_unquoted_case_and_keep_quoted() -> None:
    word, quoted, string, _ = tokenize("Host \"Host\" 'Host'")
    assert (word.identifier, word.upper) == ("host", "HOST")
    assert quoted.identifier == "Host"
    assert string.identifier is None
    assert word.is_word("HOST") and not quoted.is_word("HOST")


def test_comments_and_space_are_skipped() -> None:
    sql = "a -- to the end\n/* a\nblock */ b/c -- last"
    assert kinds(sql) == [
        (Kind.WORD, "a", 0),
        (Kind.WORD, "b", 30),
        (Kind.SYMBOL, "/", 31),
        (Kind.WORD, "c", 32),
        (Kind.END, "", len(sql)),
    ]
    assert kinds("1-2--3") == [(Kind.NUMBER, "1", 0), (Kind.SYMBOL, "-", 1),
                               (Kind.NUMBER, "2", 2), (Kind.END, "", 6)]  # fmt: skip


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("a /* open", "unterminated comment at position 2"),
        ("x = 'open", "unterminated ' quote starting at position 4"),
        ('x "open', 'unterminated " quote starting at position 2'),
        ("x `open", "unterminated ` quote starting at position 2"),
        ('"""open', 'unterminated " quote starting at position 0'),  # "" inside, then open
        ("x ``", "empty quoted identifier at position 2"),
        ("a \\ b", "unexpected character '\\\\' at position 2"),
    ],
)
def test_errors_name_the_problem_and_where(sql: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match="^" + re.escape(message) + "$"):
        tokenize(sql)


def test_tokens_are_where_their_text_is() -> None:
    """Random statements of every token kind: each word, number and symbol is its text at
    its position, each string and quoted identifier starts with its quote there, and what
    lies between tokens is space or comments."""
    pieces = ["SELECT", "host", "_x1", "42", "1.5e-3", ".7", "<=", "::", "(", ")", ",", "-",
              "/", "*", "'a''b'", '"Q"', "`b`", " ", "\n", "-- c\n", "/* c */"]  # fmt: skip
    rnd = random.Random(7)
    for _ in range(300):
        sql = " ".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 12)))
        tokens = tokenize(sql)
        assert tokens[-1].kind is Kind.END and tokens[-1].pos == len(sql)
        covered = 0
        for t in tokens[:-1]:
            gap = sql[covered : t.pos]
            assert gap.strip() == "" or "--" in gap or "/*" in gap, (sql, t)
            if t.kind in (Kind.WORD, Kind.NUMBER, Kind.SYMBOL):
                assert sql.startswith(t.text, t.pos)
                covered = t.pos + len(t.text)
            else:
                quote = sql[t.pos]
                assert quote in "'\"`"
                covered = sql.index(quote, t.pos + 1 + len(t.text)) + 1


def _literals(tokens: Sequence[Token]) -> list[tuple[str, str, int]]:
    return [(t.kind, t.text, t.pos) for t in tokens if t.kind in (Kind.STRING, Kind.NUMBER)]


PIECES = ["SELECT", "x1", "_y", "03_t", "1e5x", "0x1F", "<=", "(", ")", ",", "-", "/", ".", "*",
          '"Q""1"', "`b`", "-- c '1'\n", "/* '2' 3 */", "\n", "$"]  # fmt: skip
LITERALS = ["42", "7", "1.5e-3", ".7", "1e5", "'a''b'", "''", "'x -- y'"]


def _statement(rnd: random.Random) -> list[str]:
    return [rnd.choice(PIECES + LITERALS) for _ in range(rnd.randint(1, 12))]


def test_shaped_finds_the_literals_tokenize_finds() -> None:
    rnd = random.Random(11)
    for _ in range(500):
        sql = " ".join(_statement(rnd))
        shape = shaped(sql)
        assert shape is not None, sql
        assert _literals(shape.literals) == _literals(tokenize(sql)), sql


def test_statements_of_one_shape_differ_in_literal_values_alone() -> None:
    """Swapping literals for others of their kind (a whole number for a whole number)
    keeps the shape; the tokens are then the same but for those literals."""
    rnd = random.Random(12)
    kind = {lit: (lit[0] == "'", lit.isdigit()) for lit in LITERALS}
    for _ in range(300):
        pieces = _statement(rnd)
        other = [
            rnd.choice([o for o in LITERALS if kind[o] == kind[p]]) if p in kind else p
            for p in pieces
        ]
        a, b = " ".join(pieces), " ".join(other)
        shape_a, shape_b = shaped(a), shaped(b)
        assert shape_a is not None and shape_b is not None
        assert shape_a.text == shape_b.text
        plain = [
            [(t.kind, t.text) for t in tokenize(s) if t.kind not in (Kind.STRING, Kind.NUMBER)]
            for s in (a, b)
        ]
        assert plain[0] == plain[1]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("x = 1", "x = 1.0"),  # a whole number and another
        ("x = 1", "x = '1'"),
        ("x = 1", "x = -1"),
        ("x = 'a'", 'x = "a"'),  # a string and a quoted identifier
        ("x IN (1, 2)", "x IN (1)"),
        ("x = 1 -- 'c'", "x = 1 -- 'd'"),  # comments are kept as they are
    ],
)
def test_statements_of_other_shapes(a: str, b: str) -> None:
    shape_a, shape_b = shaped(a), shaped(b)
    assert shape_a is not None and shape_b is not None
    assert shape_a.text != shape_b.text


@pytest.mark.parametrize("sql", ["x = 'open", "a /* open", 'x = "open', "a \x00 b"])
def test_statements_without_a_shape(sql: str) -> None:
    assert shaped(sql) is None
