"""The ObjectStore contract: flat keys ("a/b/c.sst") mapped to immutable byte objects.

Implementations: :class:`objectstore.local.LocalObjectStore` (standalone) and, later, S3.
Keys use "/" as separator, never start with "/" and never contain "..". Every put is atomic:
a reader sees the old object, or the whole new one, never a prefix.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol


@dataclass(frozen=True)
class ObjectMeta:
    key: str
    size: int
    #: Last modification, milliseconds since the epoch.
    mtime_ms: int


class ObjectStore(Protocol):
    def put(self, key: str, data: bytes) -> ObjectMeta:
        """Store ``data`` under ``key`` atomically, replacing any existing object."""

    def put_file(self, key: str, path: str) -> ObjectMeta:
        """Store the contents of the local file ``path`` under ``key`` atomically. The local
        file may be moved or deleted by this call (it is the caller's staging copy)."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Atomically create ``key`` only if no object exists there; True if created."""

    def get(self, key: str) -> bytes:
        """The whole object; NotFound if absent."""

    def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from ``start`` (fewer at the end of the object); NotFound if absent;
        InvalidArgument for a negative start or length."""

    def open_input(self, key: str) -> BinaryIO:
        """A seekable, readable binary file over the object (for Parquet readers)."""

    def head(self, key: str) -> ObjectMeta:
        """Metadata of the object; NotFound if absent."""

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        """Every object whose key starts with ``prefix``, in ascending key order."""

    def delete(self, key: str) -> bool:
        """Delete the object; True if it existed (deleting an absent key is not an error)."""
