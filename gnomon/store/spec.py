"""Table specifications of the StructuredTable SPI: typed fields, a composite primary key and
single-column secondary indexes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from gnomon.errors import InvalidArgument, SchemaMismatch


class FieldType(StrEnum):
    STRING = "string"
    INT = "int"  # 32-bit signed
    LONG = "long"  # 64-bit signed
    FLOAT = "float"
    DOUBLE = "double"
    BYTES = "bytes"


#: Types allowed in a primary key (ordered, exact comparison).
KEY_TYPES = frozenset({FieldType.STRING, FieldType.INT, FieldType.LONG, FieldType.BYTES})

_INT_RANGE = {FieldType.INT: (-(2**31), 2**31 - 1), FieldType.LONG: (-(2**63), 2**63 - 1)}


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: FieldType


@dataclass(frozen=True)
class TableSpec:
    """The schema of one StructuredTable.

    ``primary_key`` lists field names in key order; ``indexes`` lists non-key fields that get a
    secondary index each. All non-key fields are nullable.
    """

    name: str
    fields: tuple[FieldSpec, ...]
    primary_key: tuple[str, ...]
    indexes: tuple[str, ...] = ()
    _by_name: dict[str, FieldSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, FieldSpec] = {}
        for f in self.fields:
            if f.name in by_name:
                raise InvalidArgument(f"table {self.name!r}: duplicate field {f.name!r}")
            by_name[f.name] = f
        object.__setattr__(self, "_by_name", by_name)
        if not self.primary_key:
            raise InvalidArgument(f"table {self.name!r}: a primary key is required")
        for k in self.primary_key:
            if k not in by_name:
                raise InvalidArgument(
                    f"table {self.name!r}: primary key field {k!r} is not a field"
                )
            if by_name[k].type not in KEY_TYPES:
                raise InvalidArgument(
                    f"table {self.name!r}: primary key field {k!r} has type {by_name[k].type}, "
                    f"keys must be one of {sorted(KEY_TYPES)}"
                )
        for i in self.indexes:
            if i not in by_name:
                raise InvalidArgument(f"table {self.name!r}: index field {i!r} is not a field")
            if i in self.primary_key:
                raise InvalidArgument(
                    f"table {self.name!r}: index field {i!r} is part of the primary key"
                )

    def field(self, name: str) -> FieldSpec:
        try:
            return self._by_name[name]
        except KeyError:
            raise SchemaMismatch(f"table {self.name!r} has no field {name!r}") from None

    def has_field(self, name: str) -> bool:
        return name in self._by_name

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def check_value(self, name: str, value: Any) -> None:
        """Raise SchemaMismatch unless ``value`` fits field ``name`` (None fits non-key fields)."""
        spec = self.field(name)
        if value is None:
            if name in self.primary_key:
                raise SchemaMismatch(f"table {self.name!r}: key field {name!r} cannot be null")
            return
        ok: bool
        if spec.type is FieldType.STRING:
            ok = isinstance(value, str)
        elif spec.type in (FieldType.INT, FieldType.LONG):
            lo, hi = _INT_RANGE[spec.type]
            ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
        elif spec.type in (FieldType.FLOAT, FieldType.DOUBLE):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        else:
            ok = isinstance(value, (bytes, bytearray, memoryview))
        if not ok:
            raise SchemaMismatch(
                f"table {self.name!r}: field {name!r} of type {spec.type} "
                f"cannot hold {type(value).__name__} value {value!r}"
            )

    def check_row(self, row: Mapping[str, Any]) -> None:
        """Check a full write: every key part present, every value well-typed."""
        for name, value in row.items():
            self.check_value(name, value)
        # Only the key fields: check_key rejects any other field as "not a key prefix".
        self.check_key({k: row[k] for k in self.primary_key if k in row}, full=True)

    def check_key(self, key: Mapping[str, Any], *, full: bool) -> tuple[Any, ...]:
        """Return the key values in key order. A partial key must be a leftmost prefix."""
        values: list[Any] = []
        for k in self.primary_key:
            if k not in key:
                break
            self.check_value(k, key[k])
            values.append(key[k])
        extra = [k for k in key if k not in self.primary_key[: len(values)]]
        if full and len(values) < len(self.primary_key):
            missing = self.primary_key[len(values)]
            raise SchemaMismatch(f"table {self.name!r}: key part {missing!r} is missing")
        if extra:
            for k in extra:
                self.field(k)  # unknown fields first: the clearer message
            raise SchemaMismatch(
                f"table {self.name!r}: {extra} are not a leftmost prefix of the primary key "
                f"{list(self.primary_key)}"
            )
        return tuple(values)

    def check_columns(self, columns: Iterable[str] | None) -> tuple[str, ...]:
        if columns is None:
            return self.field_names
        cols = tuple(columns)
        for c in cols:
            self.field(c)
        return cols

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fields": [[f.name, f.type.value] for f in self.fields],
            "primary_key": list(self.primary_key),
            "indexes": list(self.indexes),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TableSpec:
        return cls(
            name=d["name"],
            fields=tuple(FieldSpec(n, FieldType(t)) for n, t in d["fields"]),
            primary_key=tuple(d["primary_key"]),
            indexes=tuple(d.get("indexes", ())),
        )


def spec(
    name: str,
    fields: Iterable[tuple[str, FieldType | str]],
    primary_key: Iterable[str],
    indexes: Iterable[str] = (),
) -> TableSpec:
    """Shorthand: ``spec("t", [("k", "string"), ("v", "long")], ["k"])``."""
    return TableSpec(
        name=name,
        fields=tuple(FieldSpec(n, FieldType(t)) for n, t in fields),
        primary_key=tuple(primary_key),
        indexes=tuple(indexes),
    )
