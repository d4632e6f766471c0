"""Statements of gnomon's SQL dialect (HoraeDB-compatible)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from node.engine.schema import ColumnType
from node.sql.lexer import Token


@dataclass(frozen=True)
class ColumnDef:
    name: str
    type: ColumnType
    is_tag: bool = False
    #: None when the statement says neither NULL nor NOT NULL.
    nullable: bool | None = None
    default: Any = None
    comment: str = ""
    dictionary: bool = False
    #: A DEFAULT computed from other columns (``c1 + 1``), as its text.
    default_expr: str | None = None


@dataclass(frozen=True)
class CreateTable:
    name: str
    columns: list[ColumnDef]
    timestamp_key: str
    primary_key: list[str] | None = None
    if_not_exists: bool = False
    partition_by: list[str] | None = None
    partitions: int | None = None
    engine: str = "Analytic"
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AlterAddColumns:
    table: str
    columns: list[ColumnDef]


@dataclass(frozen=True)
class AlterModifySetting:
    table: str
    options: dict[str, str]


@dataclass(frozen=True)
class DropTable:
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class ShowTables:
    like: str | None = None


@dataclass(frozen=True)
class ShowCreateTable:
    name: str


@dataclass(frozen=True)
class Describe:
    name: str


@dataclass(frozen=True)
class Explain:
    query: str
    analyze: bool = False


@dataclass(frozen=True)
class Insert:
    table: str
    columns: list[str] | None
    rows: list[list[Any]]


@dataclass(frozen=True)
class Delete:
    table: str
    where: str | None


@dataclass(frozen=True)
class Query:
    """A SELECT (or WITH ... SELECT), executed by DataFusion."""

    sql: str
    #: The tokens of ``sql``, as the parser found them (empty: not tokenized yet).
    tokens: tuple[Token, ...] = field(default=(), repr=False, compare=False)


Statement = (
    CreateTable
    | AlterAddColumns
    | AlterModifySetting
    | DropTable
    | ShowTables
    | ShowCreateTable
    | Describe
    | Explain
    | Insert
    | Delete
    | Query
)
