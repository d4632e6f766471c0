"""StructuredTable storage SPI (contract in :mod:`gnomon.store.api`) and its backends."""

from gnomon.store.api import KeyRange, Row, StructuredStore, StructuredTable, TableContext
from gnomon.store.filters import Filter
from gnomon.store.spec import FieldSpec, FieldType, TableSpec, spec

__all__ = [
    "FieldSpec",
    "FieldType",
    "Filter",
    "KeyRange",
    "Row",
    "StructuredStore",
    "StructuredTable",
    "TableContext",
    "TableSpec",
    "spec",
]
