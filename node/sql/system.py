"""HoraeDB's system catalog: ``system.public.tables``, one row per table a query may read.

HoraeDB answers it with the columns ``timestamp`` (always 0), ``catalog``, ``schema``,
``table_name``, ``table_id`` and ``engine``; tools written for HoraeDB list tables so. gnomon
has one catalog and one schema, named as HoraeDB's defaults (``horaedb``, ``public``) so such
queries (``WHERE catalog = 'horaedb'``) find the same rows. The rows are the tables SHOW
TABLES lists, made when a query names the system table and handed to DataFusion as a catalog
of its own, so ``system.public.tables`` reads as any three-part name does there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import datafusion
import pyarrow as pa
import pyarrow.dataset as ds
from datafusion.catalog import Catalog
from datafusion.catalog import Schema as DfSchema

from node.sql.lexer import Kind, Token

CATALOG = "system"
SCHEMA = "public"
TABLES = "tables"
#: The catalog and schema every table is listed under, HoraeDB's default names.
TABLE_CATALOG = "horaedb"
TABLE_SCHEMA = "public"
ENGINE = "Analytic"

_NAME = (CATALOG, SCHEMA, TABLES)

_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("timestamp", pa.timestamp("ms")),
    ("catalog", pa.string()),
    ("schema", pa.string()),
    ("table_name", pa.string()),
    ("table_id", pa.uint64()),
    ("engine", pa.string()),
]
TABLES_SCHEMA = pa.schema(_COLUMNS)


def references(tokens: Sequence[Token]) -> tuple[int, ...]:
    """Where ``tokens`` name ``system.public.tables``: the position of each of the name's
    three words (unquoted in any case, as DataFusion folds them, or quoted as spelled)."""
    found: list[int] = []
    for i in range(len(tokens) - 4):
        words = tokens[i : i + 5 : 2]
        dots = tokens[i + 1 : i + 4 : 2]
        if all(_names(t, part) for t, part in zip(words, _NAME, strict=True)) and all(
            d.kind is Kind.SYMBOL and d.text == "." for d in dots
        ):
            found.extend((i, i + 2, i + 4))
    return tuple(found)


def _names(token: Token, part: str) -> bool:
    if token.kind is Kind.WORD:
        return token.text.lower() == part
    return token.kind is Kind.QUOTED and token.text == part


def tables_rows(tables: Iterable[tuple[str, int]]) -> pa.Table:
    """The rows of ``system.public.tables`` for ``tables`` (name, id)."""
    listed = list(tables)
    n = len(listed)
    return pa.table(
        [
            pa.array([0] * n, pa.timestamp("ms")),
            pa.array([TABLE_CATALOG] * n, pa.string()),
            pa.array([TABLE_SCHEMA] * n, pa.string()),
            pa.array([name for name, _ in listed], pa.string()),
            pa.array([table_id for _, table_id in listed], pa.uint64()),
            pa.array([ENGINE] * n, pa.string()),
        ],
        schema=TABLES_SCHEMA,
    )


def register(ctx: datafusion.SessionContext, rows: pa.Table) -> None:
    """Make ``rows`` DataFusion's ``system.public.tables`` in ``ctx``."""
    schema = DfSchema.memory_schema()
    schema.register_table(TABLES, ds.dataset(rows))
    catalog = Catalog.memory_catalog()
    catalog.register_schema(SCHEMA, schema)
    ctx.register_catalog_provider(CATALOG, catalog)
