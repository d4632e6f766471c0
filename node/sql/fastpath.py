"""The one interface of the SQL fast paths: queries of a shape some module recognises,
answered from the rows of their one table with Arrow and numpy kernels instead of a
DataFusion session, plan and run (about 1.5 ms of a point query).

The executor asks :func:`plan` once per query shape (the analysis keeps the answer) with the
query's tree (:mod:`node.sql.select`, which the prescan reads too), binds it to each query's
literals (:meth:`FastPath.bind`), reads the table's rows the scan's bounds keep (a fast path
is planned only when the bounds are the whole WHERE clause), and asks
:meth:`FastPath.answer`; a fast path declines with None, and the query goes to DataFusion.
What each fast path takes, and why its answers are DataFusion's, is said in its module:

- :class:`node.sql.direct.BucketedAggregation`: ``date_bin`` buckets of max, min, sum,
  avg and count, also straight from a located read's arrays; its latest n buckets under an
  upper time bound read from a window of n buckets first (:meth:`FastPath.window`);
- :class:`node.sql.direct.SortedRows`: plain columns sorted by string, integer or timestamp
  keys, with a LIMIT.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import pyarrow as pa

from node.engine.bounds import Bounds
from node.engine.schema import Schema
from node.engine.sst.reader import LocatedArrays
from node.sql import direct
from node.sql.lexer import Token
from node.sql.select import Select


class FastPath(Protocol):
    """A query of one table that can be answered from its rows without DataFusion."""

    @property
    def route(self) -> str:
        """What EXPLAIN names it (its ``gnomon_route`` row)."""
        ...

    @property
    def reads(self) -> list[str]:
        """The columns the answer reads (the scan reads no others)."""
        ...

    @property
    def located(self) -> bool:
        """Whether :meth:`answer` takes a located read's arrays (then the executor offers
        them before building a table)."""
        ...

    def bind(self, tokens: Sequence[Token]) -> FastPath | None:
        """This fast path, planned for a query of the same shape, with the literal values
        of ``tokens``; None when they make a query it does not take."""
        ...

    def answer(self, rows: pa.Table | LocatedArrays) -> pa.Table | None:
        """The answer over ``rows`` (those of the table the WHERE clause keeps; string tags
        may come dictionary encoded), or None to decline."""
        ...

    def window(self, bounds: Bounds) -> tuple[Bounds, int] | None:
        """Narrower ``bounds`` whose rows give the same answer whenever it has at least the
        number of rows returned with them, or None: the executor reads those first, and the
        whole bounds when the answer comes short (or the fast path declines)."""
        ...


def plan(
    query: Select, tokens: Sequence[Token], table: str, schema: Schema, *, exact_where: bool
) -> FastPath | None:
    """The fast path answering a query (its tree, and ``tokens``, where its literals are)
    of ``table`` alone, or None; only a query whose bounds are its whole WHERE clause
    (``exact_where``) is taken: then the rows read are exactly those it keeps."""
    if not exact_where:
        return None
    found: FastPath | None = direct.plan(query, tokens, table, schema)
    return found
