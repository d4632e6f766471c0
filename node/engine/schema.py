"""The table schema model: typed columns, TAG columns, the timestamp key and the primary key.

Without an explicit primary key a table gets the implicit ``tsid uint64`` column — a hash of the
tag values that names one series — and the primary key ``(tsid, timestamp)``. In tables made from
:data:`TSID_ZERO_UNTAGGED` on (``Schema.tsid_version``), a row without any tag value has tsid 0,
as in HoraeDB; older tables keep the hash they stored such rows under. The engine adds two
more columns to everything it stores: ``__seq`` (the WAL sequence of the write that produced the
row), which orders versions of a key, and ``__kind`` (a put, or a row deletion that shadows older
versions of its key); neither is part of the user-visible schema.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, cast

import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.engine import defaults

TSID = "tsid"
SEQ = "__seq"
KIND = "__kind"
#: The ``tsid_version`` from which a row without any tag value has tsid 0 (HoraeDB's value)
#: rather than the hash of no tags; tables made before it keep the hash their rows carry.
TSID_ZERO_UNTAGGED = 2
#: Values of the ``__kind`` column.
PUT = 0
DELETE = 1

# A name may start with a digit, as HoraeDB's may (``1st_value``), but not be a number.
_NAME = re.compile(r"^(?![0-9]*$)[A-Za-z0-9_][A-Za-z0-9_\-\.]*$")

#: Most columns a table may have, its timestamp and series id included: InfluxDB 3's limit
#: (500 per table, the time column included). Every scan, flush and compaction handles each
#: column; a table made ten thousand columns wide by a stray write makes ``SELECT *`` take
#: minutes. Checked where schemas are made and grown, so CREATE TABLE, ALTER TABLE and
#: writes that create or widen tables all meet it.
MAX_COLUMNS = 500


#: The Arrow type of a dictionary-encoded string tag.
DICTIONARY_TAG = pa.dictionary(pa.int32(), pa.string())


class ColumnType(StrEnum):
    TIMESTAMP = "timestamp"
    DOUBLE = "double"
    FLOAT = "float"
    STRING = "string"
    VARBINARY = "varbinary"
    BOOLEAN = "boolean"
    DATE = "date"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    UINT8 = "uint8"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"

    @classmethod
    def parse(cls, name: str) -> ColumnType:
        try:
            return cls(_ALIASES.get(name.lower(), name.lower()))
        except ValueError:
            raise InvalidArgument(
                f"unknown column type {name!r}; expected one of {', '.join(t.value for t in cls)}"
            ) from None

    def arrow(self) -> pa.DataType:
        return _ARROW[self]


_ALIASES = {
    "bigint": "int64",
    "int": "int32",
    "integer": "int32",
    "smallint": "int16",
    "tinyint": "int8",
    "real": "float",
    "bool": "boolean",
    "text": "string",
    "varchar": "string",
    "bytes": "varbinary",
    "binary": "varbinary",
}

_ARROW: dict[ColumnType, pa.DataType] = {
    ColumnType.TIMESTAMP: pa.timestamp("ms"),
    ColumnType.DOUBLE: pa.float64(),
    ColumnType.FLOAT: pa.float32(),
    ColumnType.STRING: pa.string(),
    ColumnType.VARBINARY: pa.binary(),
    ColumnType.BOOLEAN: pa.bool_(),
    ColumnType.DATE: pa.date32(),
    ColumnType.INT8: pa.int8(),
    ColumnType.INT16: pa.int16(),
    ColumnType.INT32: pa.int32(),
    ColumnType.INT64: pa.int64(),
    ColumnType.UINT8: pa.uint8(),
    ColumnType.UINT16: pa.uint16(),
    ColumnType.UINT32: pa.uint32(),
    ColumnType.UINT64: pa.uint64(),
}

#: Integer-like types (timestamps and dates included) cast from 0; the others are listed.
_ZERO: dict[ColumnType, pa.Scalar[Any]] = {
    **{t: pa.scalar(0, pa.int32()) for t in ColumnType},
    ColumnType.TIMESTAMP: pa.scalar(0, pa.int64()),
    ColumnType.DOUBLE: pa.scalar(0.0),
    ColumnType.FLOAT: pa.scalar(0.0),
    ColumnType.STRING: pa.scalar(""),
    ColumnType.VARBINARY: pa.scalar(b""),
    ColumnType.BOOLEAN: pa.scalar(False),
}

#: Float columns cannot be tags or key parts: equality on them is not a series identity.
_UNKEYABLE = frozenset({ColumnType.DOUBLE, ColumnType.FLOAT})


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    is_tag: bool = False
    nullable: bool = True
    #: Value used when an insert omits the column (None: null, or an error if NOT NULL).
    default: Any = None
    comment: str = ""
    #: Declared DICTIONARY (HoraeDB's hint to dictionary-encode a string column): shown by
    #: DESCRIBE and SHOW CREATE TABLE; string tags are dictionary-encoded either way.
    dictionary: bool = False
    #: A default computed from the row's other columns (:mod:`node.engine.defaults`), as
    #: its text; ``default`` is then None.
    default_expr: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "type": self.type.value}
        if self.is_tag:
            d["tag"] = True
        if self.dictionary:
            d["dictionary"] = True
        if not self.nullable:
            d["nullable"] = False
        if self.default is not None:
            d["default"] = self.default
        if self.comment:
            d["comment"] = self.comment
        if self.default_expr is not None:
            d["default_expr"] = self.default_expr
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Column:
        return cls(
            name=d["name"],
            type=ColumnType(d["type"]),
            is_tag=bool(d.get("tag", False)),
            nullable=bool(d.get("nullable", True)),
            default=d.get("default"),
            comment=str(d.get("comment", "")),
            dictionary=bool(d.get("dictionary", False)),
            default_expr=d.get("default_expr"),
        )


#: Projections of one schema kept (queries name a few column sets; any more are built anew).
MAX_PROJECTIONS = 1024


@dataclass(frozen=True)
class Schema:
    """A table schema. Build one with :meth:`Schema.build`, which validates it and adds the
    implicit ``tsid`` column when no primary key is given."""

    columns: tuple[Column, ...]
    timestamp_key: str
    primary_key: tuple[str, ...]
    version: int = 1
    #: How the implicit tsid is computed (see :data:`TSID_ZERO_UNTAGGED`); fixed when the
    #: table is made, since stored rows carry it.
    tsid_version: int = 1
    _by_name: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", {c.name: c for c in self.columns})

    @classmethod
    def build(
        cls,
        columns: Iterable[Column],
        *,
        timestamp_key: str,
        primary_key: Sequence[str] | None = None,
        version: int = 1,
        tsid_version: int = 1,
    ) -> Schema:
        cols = list(columns)
        names: set[str] = set()
        for c in cols:
            _check_name(c.name)
            if c.name in names:
                raise InvalidArgument(f"duplicate column {c.name!r}")
            names.add(c.name)
            if c.is_tag and c.type in _UNKEYABLE:
                raise InvalidArgument(f"tag column {c.name!r} cannot be of type {c.type}")
        if timestamp_key not in names:
            raise InvalidArgument(f"timestamp key {timestamp_key!r} is not a column")
        # A key naming ``tsid`` without such a column (HoraeDB's PRIMARY KEY(tsid, t, c1))
        # keys by the implicit series id and more columns.
        implicit = primary_key is None or (TSID in primary_key and TSID not in names)
        _check_width(len(cols) + implicit)
        if primary_key is None and TSID in names:
            raise InvalidArgument(
                f"column name {TSID!r} is reserved for the series id when no PRIMARY KEY is given"
            )
        if implicit:
            cols.insert(0, Column(TSID, ColumnType.UINT64, nullable=False))
        if primary_key is None:
            primary_key = (TSID, timestamp_key)
        pk = tuple(primary_key)
        if len(set(pk)) != len(pk):
            raise InvalidArgument(f"primary key {list(pk)} repeats a column")
        if timestamp_key not in pk:
            raise InvalidArgument(
                f"primary key {list(pk)} must contain the timestamp key {timestamp_key!r}"
            )
        by_name = {c.name: c for c in cols}
        for i, c in enumerate(cols):
            if c.default_expr is not None:
                defaults.check(c.default_expr, c.name, [b.name for b in cols[:i]])
        for k in pk:
            if k not in by_name:
                raise InvalidArgument(f"primary key column {k!r} is not a column")
            if by_name[k].type in _UNKEYABLE:
                raise InvalidArgument(
                    f"primary key column {k!r} cannot be of type {by_name[k].type}"
                )
        # Key parts and the timestamp can never be null: a null key names no row.
        fixed = [
            replace(c, nullable=False) if c.name in pk or c.name == timestamp_key else c
            for c in cols
        ]
        if by_name[timestamp_key].type is not ColumnType.TIMESTAMP:
            raise InvalidArgument(
                f"timestamp key {timestamp_key!r} must be of type timestamp, "
                f"not {by_name[timestamp_key].type}"
            )
        return cls(tuple(fixed), timestamp_key, pk, version, tsid_version)

    # -- lookups -------------------------------------------------------------------------------

    def column(self, name: str) -> Column:
        try:
            return self._by_name[name]
        except KeyError:
            raise InvalidArgument(f"unknown column {name!r}") from None

    def has_column(self, name: str) -> bool:
        return name in self._by_name

    # Names are listed once per schema (it never changes), and handed out as fresh lists:
    # planning a query asks for them dozens of times.
    @property
    def names(self) -> list[str]:
        return list(self._names)

    @property
    def tags(self) -> list[str]:
        return list(self._tags)

    @functools.cached_property
    def _names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @functools.cached_property
    def _tags(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.is_tag)

    @functools.cached_property
    def _string_tags(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.is_tag and c.type is ColumnType.STRING)

    @property
    def has_tsid(self) -> bool:
        return self.primary_key[0] == TSID and TSID in self._by_name

    @property
    def untagged_tsid_zero(self) -> bool:
        """Whether a row without any tag value has tsid 0."""
        return self.tsid_version >= TSID_ZERO_UNTAGGED

    @property
    def key_columns(self) -> list[str]:
        """Columns whose value is fixed by the primary key: the key itself and, with the
        implicit tsid, the tags it hashes. Statistics on these are safe to prune with even when
        newer versions of a row shadow older ones."""
        if self.has_tsid:
            return list(self.primary_key) + self.tags
        return list(self.primary_key)

    def arrow(self, *, dictionary_tags: bool = False) -> pa.Schema:
        """The columns as Arrow fields; with ``dictionary_tags``, string tags dictionary
        encoded (few distinct values: cheaper to decode, hash and sort)."""
        return self._arrow_schemas[dictionary_tags]

    @functools.cached_property
    def _arrow_schemas(self) -> dict[bool, pa.Schema]:
        # Built once: every scan asks for them, and a schema never changes.
        def fields(encoded: set[str]) -> pa.Schema:
            return pa.schema(
                [
                    pa.field(
                        c.name, DICTIONARY_TAG if c.name in encoded else c.type.arrow(), c.nullable
                    )
                    for c in self.columns
                ]
            )

        return {False: fields(set()), True: fields(set(self.dictionary_tags))}

    @property
    def dictionary_tags(self) -> list[str]:
        """The tag columns of string type (those :meth:`arrow` may dictionary encode)."""
        return list(self._string_tags)

    @functools.cached_property
    def run_order(self) -> str | None:
        """What the rows of one series in an SST are sorted by: the timestamp, when the
        primary key is the series (its tags, or their tsid) then the timestamp."""
        *series, last = self.primary_key
        tags = set(self.tags)
        if last == self.timestamp_key and all(c == TSID or c in tags for c in series):
            return last
        return None

    def storage_projection(
        self, columns: tuple[str, ...], dictionary: tuple[str, ...] = ()
    ) -> pa.Schema:
        """The storage fields of ``columns``, those named in ``dictionary`` dictionary
        encoded. Made once per projection: every read of SSTs asks for one, and building it
        costs a point query about as much as slicing its rows."""
        key = (columns, dictionary)
        out = self._projections.get(key)
        if out is None:
            storage = self.storage_arrow()
            fields = [storage.field(c) for c in columns]
            out = pa.schema(
                [f.with_type(DICTIONARY_TAG) if f.name in dictionary else f for f in fields]
            )
            if len(self._projections) < MAX_PROJECTIONS:
                self._projections[key] = out
        return out

    @functools.cached_property
    def _projections(self) -> dict[tuple[tuple[str, ...], tuple[str, ...]], pa.Schema]:
        return {}

    def storage_arrow(self) -> pa.Schema:
        """The schema of memtables and SSTs: the table's columns plus the row sequence and
        kind."""
        return self._storage_schema

    @functools.cached_property
    def _storage_schema(self) -> pa.Schema:
        return (
            self.arrow()
            .append(pa.field(SEQ, pa.uint64(), nullable=False))
            .append(pa.field(KIND, pa.uint8(), nullable=False))
        )

    @property
    def series_key(self) -> list[str]:
        """The primary key without the timestamp: what names one series."""
        return [k for k in self.primary_key if k != self.timestamp_key]

    def fill_value(self, name: str) -> pa.Scalar[Any]:
        """The value a row lacking column ``name`` reads as: its default, else null, else (for
        NOT NULL columns of rows that are only deletion markers) the type's zero."""
        if name == KIND:
            return pa.scalar(PUT, pa.uint8())
        col = self.column(name)
        typ = col.type.arrow()
        if col.default is not None:
            return pa.scalar(col.default, typ)
        if col.nullable:
            return pa.scalar(None, typ)
        return _ZERO[col.type].cast(typ)

    # -- evolution and persistence ---------------------------------------------------------------

    def with_column(self, column: Column) -> Schema:
        """A new schema version with ``column`` appended (ADD COLUMN)."""
        return self.with_columns([column])

    def with_columns(self, columns: Sequence[Column]) -> Schema:
        """The next schema version, with ``columns`` appended (ADD COLUMN). Existing rows read
        a new column as its default, so it must be nullable or have one; a new tag of an
        implicit-tsid table must be nullable without a default, so that the series ids of
        existing rows (computed without it) still name the same series."""
        names = set(self._by_name)
        for column in columns:
            _check_name(column.name)
            if column.name in names:
                raise InvalidArgument(f"column {column.name!r} already exists")
            names.add(column.name)
            if column.default_expr is not None:
                raise InvalidArgument(
                    f"new column {column.name!r}: a DEFAULT computed from other columns is "
                    "for a table's creation; existing rows would need it computed on read"
                )
            if not column.nullable and column.default is None:
                raise InvalidArgument(
                    f"new column {column.name!r} must be nullable or have a default: "
                    "existing rows need a value"
                )
            if column.is_tag and column.type in _UNKEYABLE:
                raise InvalidArgument(f"tag column {column.name!r} cannot be of type {column.type}")
            if (
                column.is_tag
                and self.has_tsid
                and (column.default is not None or not column.nullable)
            ):
                raise InvalidArgument(
                    f"new tag {column.name!r} must be nullable without a default: existing "
                    "series ids were computed without it"
                )
        _check_width(len(names))
        return replace(self, columns=(*self.columns, *columns), version=self.version + 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": [c.to_json() for c in self.columns],
            "timestamp_key": self.timestamp_key,
            "primary_key": list(self.primary_key),
            "version": self.version,
            "tsid_version": self.tsid_version,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Schema:
        return cls(
            tuple(Column.from_json(c) for c in d["columns"]),
            d["timestamp_key"],
            tuple(d["primary_key"]),
            int(d["version"]),
            # Schemas stored before the field existed hash untagged rows (version 1).
            int(d.get("tsid_version", 1)),
        )


def repeat(value: pa.Scalar[Any], n: int) -> pa.Array[Any]:
    """``value`` ``n`` times (for columns a row source lacks)."""
    out: pa.Array[Any] = pa.repeat(cast(Any, value), n)
    return out


def _check_width(columns: int) -> None:
    if columns > MAX_COLUMNS:
        raise InvalidArgument(
            f"a table has at most {MAX_COLUMNS} columns (its timestamp and series id "
            f"included); this one would have {columns}"
        )


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise InvalidArgument(
            f"invalid column name {name!r}: use letters, digits, '_', '-' or '.', "
            "starting with a letter, digit or '_', not all digits"
        )
    if name.startswith("__"):
        raise InvalidArgument(
            f"invalid column name {name!r}: names starting with '__' are reserved"
        )
