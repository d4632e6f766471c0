"""How a query reading one partition table alone, once, splits over the sub-tables its
WHERE clause leaves (:mod:`node.sql.pushdown`), found once per query *shape* (its
tokens but for its literals' values, :func:`node.sql.lexer.shaped`) and bound to each
query's literals: dashboards send one shape again and again with new times and hosts, and
finding a split (tokens, the SELECT tree, the prescan, the pushdown) costs more than the
rest of the work a small query's entry node does.

A kept split holds while the partition table is the one it was found for and the
literals the plan depends on (a LIMIT, an ordinal, an expression matched with another)
have the values it was found with; a query mentioning no partition table is told so from
its kept analysis (:mod:`node.sql.analysis`) without tokenizing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from node.engine.lru import Lru
from node.partition.parts import Part
from node.partition.tables import Partitions, PartitionTable
from node.sql import generators, prescan, pushdown, select
from node.sql.analysis import SHAPES, Analysis
from node.sql.lexer import Token, literals_at, shaped, tokenize


@dataclass(frozen=True)
class Split:
    table: PartitionTable
    push: pushdown.Pushdown
    parts: list[Part]


@dataclass(frozen=True)
class _Found:
    """How a query splits, found from its tokens (``planned`` None: it does not), with the
    partition tables there were then and the one it reads; its literals are the tokens at
    ``literals_at``."""

    partitions: tuple[str, ...]
    tokens: tuple[Token, ...]
    literals_at: tuple[int, ...]
    table: PartitionTable | None = None
    reads: prescan.Shape | None = None
    planned: pushdown.Planned | None = None

    @property
    def literals(self) -> list[Token]:
        return [self.tokens[at] for at in self.literals_at]


class Splits:
    """The splits of the shapes last queried over ``partitions``."""

    def __init__(self, partitions: Partitions, capacity: int = SHAPES) -> None:
        self._partitions = partitions
        self._kept: Lru[str, _Found] = Lru(capacity)

    def of(self, sql: str, analysis: Analysis | None = None) -> Split | None:
        """How ``sql`` splits, or None for a query that does not (told at once from its
        shape's ``analysis`` when it names no partition table)."""
        names = self._partitions.names()
        if not names:
            return None
        if analysis is not None and not any(
            self._partitions.find(name) is not None for name, _ in analysis.schemas
        ):
            return None
        shape = shaped(sql)
        kept = None if shape is None else self._kept.get(shape.text)
        if shape is not None and kept is not None and kept.partitions == tuple(names):
            if kept.planned is None:
                return None
            table = self._partitions.find(kept.planned.pushdown.table)
            # The table as it was found, and the literals the plan depends on as they were.
            if (
                table is not None
                and kept.table is not None
                and table.spec == kept.table.spec
                and kept.planned.holds_for(shape.literals)
            ):
                tokens = shape.swapped(kept.tokens, kept.literals_at)
                return _bound(sql, kept, table, tokens, shape.literals)
        found = self._find(sql, names)
        # Kept only where both lexers find the same literals, which binding swaps.
        if shape is not None and shape.found_at(found.tokens, found.literals_at):
            self._kept.put(shape.text, found)
        if found.table is None:
            return None
        return _bound(sql, found, found.table, found.tokens, found.literals)

    def _find(self, sql: str, names: list[str]) -> _Found:
        tokens = tokenize(sql)
        at = literals_at(tokens)
        found = _Found(tuple(names), tuple(tokens), at)
        known = set(names)
        # Columns qualified by the table's name (``cpu.host``) are no further reads of it.
        mentioned = [
            n
            for i, t in enumerate(tokens)
            if (n := t.identifier) in known and tokens[i + 1].text != "."
        ]
        if len(set(mentioned)) != 1:
            return found
        table = self._partitions.find(mentioned[0])
        if table is None:
            return found
        schema = table.spec.schema
        tree = select.read(tokens)
        reads = prescan.shape(tree, table.name, schema, mentions=len(mentioned))
        if not reads.single:
            return found
        planned = pushdown.plan(sql, tokens, tree, table.name, schema.names, at)
        if planned is None:
            return found
        return replace(found, table=table, reads=reads, planned=planned)


def _bound(
    sql: str,
    found: _Found,
    table: PartitionTable,
    tokens: Sequence[Token],
    literals: Sequence[Token],
) -> Split | None:
    """``found``'s split of ``sql``, a query of its shape over ``table`` whose tokens are
    ``tokens`` and literals ``literals``."""
    if found.planned is None or found.reads is None:
        return None
    generators.check(sql)  # DataFusion merges the sub-tables' answers with its items
    push = found.planned.bind(literals, sql)
    return Split(table, push, table.reading(found.reads.bind(tokens).bounds))
