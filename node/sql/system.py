"""The catalog as tables a query reads: HoraeDB's ``system.public.tables`` and the SQL
standard's ``information_schema`` (``schemata``, ``tables``, ``columns``), whose rows are
the tables SHOW TABLES lists (and their columns), made when a query names one and handed to
DataFusion in place of its own (which knows only the tables a query has registered).

HoraeDB answers ``system.public.tables`` with the columns ``timestamp`` (always 0),
``catalog``, ``schema``, ``table_name``, ``table_id`` and ``engine``; tools written for
HoraeDB list tables so. gnomon has one catalog and one schema, named as HoraeDB's defaults
(``horaedb``, ``public``) so such queries (``WHERE catalog = 'horaedb'``) find the same
rows. ``information_schema`` names them as PostgreSQL does (the database ``gnomon``, the
schema ``public``, column types by their standard names), since the tools that read it
(Grafana, DBeaver) speak PostgreSQL's dialect.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import datafusion
import pyarrow as pa
import pyarrow.dataset as ds
from datafusion.catalog import Catalog
from datafusion.catalog import Schema as DfSchema

from node.engine.schema import Schema
from node.security.principal import DATABASE
from node.sql import pg_functions
from node.sql.lexer import Kind, Token

CATALOG = "system"
SCHEMA = "public"
TABLES = "tables"
#: The catalog and schema every table is listed under, HoraeDB's default names.
TABLE_CATALOG = "horaedb"
TABLE_SCHEMA = "public"
ENGINE = "Analytic"
INFORMATION_SCHEMA = "information_schema"
#: The one database PostgreSQL's clients see (whatever name they ask for), named by
#: information_schema as every table's catalog; its tables are in DATABASE.
DATABASE_NAME = "gnomon"
OWNER = pg_functions.OWNER

#: A table as SHOW TABLES lists it: its name and id.
Listed = tuple[str, int]
Describe = Callable[[str], Schema]

_COLUMNS: list[tuple[str, pa.DataType]] = [
    ("timestamp", pa.timestamp("ms")),
    ("catalog", pa.string()),
    ("schema", pa.string()),
    ("table_name", pa.string()),
    ("table_id", pa.uint64()),
    ("engine", pa.string()),
]
TABLES_SCHEMA = pa.schema(_COLUMNS)


@dataclass(frozen=True)
class View:
    """One table of the catalog: the words that name it and how its rows are made from the
    tables a query may see."""

    name: tuple[str, ...]
    #: Its rows, of the tables (name, id) and a table's schema by its name.
    rows: Callable[[Sequence[Listed], Describe], pa.Table]


def references(tokens: Sequence[Token]) -> tuple[int, ...]:
    """Where ``tokens`` name a view: the position of each of its name's words (unquoted in
    any case, as DataFusion folds them, or quoted as spelled)."""
    return tuple(at for _, at in _named(tokens))


def named(tokens: Sequence[Token]) -> tuple[View, ...]:
    """The views ``tokens`` name."""
    return tuple(dict.fromkeys(view for view, _ in _named(tokens)))


def _named(tokens: Sequence[Token]) -> Iterable[tuple[View, int]]:
    for view in VIEWS:
        width = 2 * len(view.name) - 1
        for i in range(len(tokens) - width):
            words = tokens[i : i + width : 2]
            dots = tokens[i + 1 : i + width : 2]
            if all(_names(t, part) for t, part in zip(words, view.name, strict=True)) and all(
                d.kind is Kind.SYMBOL and d.text == "." for d in dots
            ):
                yield from ((view, at) for at in range(i, i + width, 2))


def _names(token: Token, part: str) -> bool:
    if token.kind is Kind.WORD:
        return token.text.lower() == part
    return token.kind is Kind.QUOTED and token.text == part


def tables_rows(tables: Sequence[Listed], _: Describe | None = None) -> pa.Table:
    """The rows of ``system.public.tables`` for ``tables``."""
    n = len(tables)
    return pa.table(
        [
            pa.array([0] * n, pa.timestamp("ms")),
            pa.array([TABLE_CATALOG] * n, pa.string()),
            pa.array([TABLE_SCHEMA] * n, pa.string()),
            pa.array([name for name, _ in tables], pa.string()),
            pa.array([table_id for _, table_id in tables], pa.uint64()),
            pa.array([ENGINE] * n, pa.string()),
        ],
        schema=TABLES_SCHEMA,
    )


def _strings(**columns: Sequence[object]) -> pa.Table:
    return pa.table({k: pa.array(v, pa.string()) for k, v in columns.items()})


def _schemata(_: Sequence[Listed], __: Describe) -> pa.Table:
    names = [INFORMATION_SCHEMA, "pg_catalog", DATABASE]
    return _strings(catalog_name=[DATABASE_NAME] * 3, schema_name=names, schema_owner=[OWNER] * 3)


def _tables(tables: Sequence[Listed], _: Describe) -> pa.Table:
    n = len(tables)
    return _strings(
        table_catalog=[DATABASE_NAME] * n,
        table_schema=[DATABASE] * n,
        table_name=[name for name, _ in tables],
        table_type=["BASE TABLE"] * n,
    )


def _columns(tables: Sequence[Listed], describe: Describe) -> pa.Table:
    columns = [(name, i, c) for name, _ in tables for i, c in enumerate(describe(name).columns, 1)]
    n = len(columns)
    return pa.table(
        {
            "table_catalog": pa.array([DATABASE_NAME] * n, pa.string()),
            "table_schema": pa.array([DATABASE] * n, pa.string()),
            "table_name": pa.array([t for t, _, _ in columns], pa.string()),
            "column_name": pa.array([c.name for _, _, c in columns], pa.string()),
            "ordinal_position": pa.array([i for _, i, _ in columns], pa.int32()),
            "column_default": pa.array(
                [None if c.default is None else str(c.default) for _, _, c in columns], pa.string()
            ),
            "is_nullable": pa.array(["YES" if c.nullable else "NO" for _, _, c in columns]),
            "data_type": pa.array(
                [pg_functions.type_name(c.type.arrow()) for _, _, c in columns], pa.string()
            ),
        }
    )


# -- pg_catalog: PostgreSQL's own catalog, as its drivers (pgjdbc: DBeaver's) read it ----------

PG_CATALOG = "pg_catalog"
#: OIDs as PostgreSQL numbers them: its catalog's relations and schemas, then gnomon's tables
#: from the first user OID, by rank of name.
RELATIONS = {
    "pg_type": 1247,
    "pg_attribute": 1249,
    "pg_class": 1259,
    "pg_attrdef": 2604,
    "pg_description": 2609,
    "pg_namespace": 2615,
}
NAMESPACES = {PG_CATALOG: 11, DATABASE: 2200, INFORMATION_SCHEMA: 13000}
FIRST_OID = 16384
OWNER_OID = 10


def _oids(tables: Sequence[Listed]) -> list[tuple[int, str]]:
    return [(FIRST_OID + i, name) for i, name in enumerate(sorted(name for name, _ in tables))]


def _table(columns: Mapping[str, tuple[pa.DataType, Sequence[object]]]) -> pa.Table:
    return pa.table({name: pa.array(values, kind) for name, (kind, values) in columns.items()})


def _pg_namespace(_: Sequence[Listed], __: Describe) -> pa.Table:
    n = len(NAMESPACES)
    return _table(
        {
            "oid": (pa.int64(), list(NAMESPACES.values())),
            "nspname": (pa.string(), list(NAMESPACES)),
            "nspowner": (pa.int64(), [OWNER_OID] * n),
        }
    )


def _pg_class(tables: Sequence[Listed], _: Describe) -> pa.Table:
    oids = _oids(tables)
    n = len(oids)
    return _table(
        {
            "oid": (pa.int64(), [oid for oid, _ in oids]),
            "relname": (pa.string(), [name for _, name in oids]),
            "relnamespace": (pa.int64(), [NAMESPACES[DATABASE]] * n),
            "relkind": (pa.string(), ["r"] * n),
            "relowner": (pa.int64(), [OWNER_OID] * n),
            "relpersistence": (pa.string(), ["p"] * n),
            "relispartition": (pa.bool_(), [False] * n),
            "relhasindex": (pa.bool_(), [False] * n),
            "reltablespace": (pa.int64(), [0] * n),
        }
    )


def _pg_attribute(tables: Sequence[Listed], describe: Describe) -> pa.Table:
    columns = [
        (oid, i, c, pg_functions.pg_type(c.type.arrow()))
        for oid, name in _oids(tables)
        for i, c in enumerate(describe(name).columns, 1)
    ]
    n = len(columns)
    return _table(
        {
            "attrelid": (pa.int64(), [oid for oid, _, _, _ in columns]),
            "attname": (pa.string(), [c.name for _, _, c, _ in columns]),
            "atttypid": (pa.int64(), [t.oid for _, _, _, t in columns]),
            "attlen": (pa.int64(), [t.size for _, _, _, t in columns]),
            "attnum": (pa.int64(), [i for _, i, _, _ in columns]),
            "atttypmod": (pa.int64(), [-1] * n),
            "attnotnull": (pa.bool_(), [not c.nullable for _, _, c, _ in columns]),
            "attisdropped": (pa.bool_(), [False] * n),
            "atthasdef": (pa.bool_(), [False] * n),
            "attidentity": (pa.string(), [""] * n),
            "attgenerated": (pa.string(), [""] * n),
            "attcollation": (pa.int64(), [0] * n),
        }
    )


def _pg_type(_: Sequence[Listed], __: Describe) -> pa.Table:
    types = pg_functions.TYPES
    n = len(types)
    return _table(
        {
            "oid": (pa.int64(), [t.oid for t in types]),
            "typname": (pa.string(), [t.typname for t in types]),
            "typnamespace": (pa.int64(), [NAMESPACES[PG_CATALOG]] * n),
            "typlen": (pa.int64(), [t.size for t in types]),
            "typtype": (pa.string(), ["b"] * n),
            "typnotnull": (pa.bool_(), [False] * n),
            "typtypmod": (pa.int64(), [-1] * n),
            "typbasetype": (pa.int64(), [0] * n),
            "typelem": (pa.int64(), [0] * n),
            "typrelid": (pa.int64(), [0] * n),
        }
    )


def _none(**columns: pa.DataType) -> Callable[[Sequence[Listed], Describe], pa.Table]:
    """A catalog table gnomon keeps no rows in (comments, default expressions)."""
    empty = pa.table({name: pa.array([], kind) for name, kind in columns.items()})
    return lambda _, __: empty


VIEWS = (
    View((CATALOG, SCHEMA, TABLES), tables_rows),
    View((INFORMATION_SCHEMA, "schemata"), _schemata),
    View((INFORMATION_SCHEMA, "tables"), _tables),
    View((INFORMATION_SCHEMA, "columns"), _columns),
    View((PG_CATALOG, "pg_namespace"), _pg_namespace),
    View((PG_CATALOG, "pg_class"), _pg_class),
    View((PG_CATALOG, "pg_attribute"), _pg_attribute),
    View((PG_CATALOG, "pg_type"), _pg_type),
    View(
        (PG_CATALOG, "pg_description"),
        _none(objoid=pa.int64(), classoid=pa.int64(), objsubid=pa.int64(), description=pa.string()),
    ),
    View(
        (PG_CATALOG, "pg_attrdef"),
        _none(oid=pa.int64(), adrelid=pa.int64(), adnum=pa.int64(), adbin=pa.string()),
    ),
)
#: The pg_catalog relations a query may read (any other answers no rows over PostgreSQL's
#: protocol).
PG_CATALOG_VIEWS = frozenset(v.name[1] for v in VIEWS if v.name[0] == PG_CATALOG)


def register(ctx: datafusion.SessionContext, views: Mapping[View, pa.Table]) -> None:
    """Make each of ``views`` a table of ``ctx`` under its name."""
    schemas: dict[tuple[str, ...], DfSchema] = {}
    for view, rows in views.items():
        *path, table = view.name
        schema = schemas.get(tuple(path))
        if schema is None:
            schema = schemas[tuple(path)] = DfSchema.memory_schema()
            if len(path) == 1:
                ctx.catalog().register_schema(path[0], schema)
            else:
                catalog = Catalog.memory_catalog()
                catalog.register_schema(path[1], schema)
                ctx.register_catalog_provider(path[0], catalog)
        schema.register_table(table, ds.dataset(rows))
