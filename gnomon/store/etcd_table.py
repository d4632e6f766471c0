"""Tables of the etcd backend (:mod:`gnomon.store.etcd`) as a transaction sees them: rows under
their primary-key bytes, index entries beside them, scans as range reads of the transaction."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from gnomon.errors import NotFound, SchemaMismatch
from gnomon.etcd import prefix_end
from gnomon.store.api import KeyRange, Row
from gnomon.store.etcd_codec import (
    Entry,
    check_limit,
    checked_filter,
    dump_row,
    encode_key,
    encode_value,
    load_row,
    stored_value,
)
from gnomon.store.etcd_txn import PAGE, Txn
from gnomon.store.filters import And, Eq, Filter, matches
from gnomon.store.spec import TableSpec
from gnomon.store.sqlfilter import normalise_value


class Context:
    def __init__(self, txn: Txn) -> None:
        self.txn = txn

    def table(self, name: str) -> EtcdTable:
        self.txn.check_open()
        found = self.txn.catalog(name)
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return EtcdTable(self.txn, found)


class EtcdTable:
    def __init__(self, txn: Txn, entry: Entry) -> None:
        self._txn = txn
        self._id = entry.id
        self._spec = entry.spec
        prefix = txn.layout.table(entry.id)
        self._rows = prefix + b"r/"
        self._indexes = [
            prefix + b"i/" + str(n).encode() + b"/" for n in range(len(entry.spec.indexes))
        ]

    @property
    def spec(self) -> TableSpec:
        return self._spec

    def write(self, row: Mapping[str, Any]) -> None:
        self._check()
        spec = self._spec
        spec.check_row(row)
        full = {n: stored_value(spec, n, row.get(n)) for n in spec.field_names}
        key = encode_key(spec, [full[k] for k in spec.primary_key])
        value = dump_row(spec, full)
        if spec.indexes:
            # The old row says which index entries to remove; reading it also makes this write
            # conflict with concurrent writes of the row, which could otherwise leave an entry
            # of a value neither transaction committed.
            old = self._txn.get(self._rows + key, self._id)
            if old is not None:
                self._unindex(key, load_row(spec, self._rows + key, old), keep=full)
            for n, field in enumerate(spec.indexes):
                if full[field] is not None:
                    self._txn.put(self._index_key(n, full[field], key), value)
        self._txn.put(self._rows + key, value)

    def read(self, key: Mapping[str, Any], columns: Sequence[str] | None = None) -> Row | None:
        self._check()
        encoded = self._full_key(key)
        cols = self._spec.check_columns(columns)
        data = self._txn.get(self._rows + encoded, self._id)
        if data is None:
            return None
        row = load_row(self._spec, self._rows + encoded, data)
        return {c: row[c] for c in cols}

    def scan(
        self,
        key_range: KeyRange | None = None,
        *,
        limit: int | None = None,
        filter: Filter | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        self._check()
        start, end = self._bounds(key_range)
        return self._select(start, end, limit, filter, columns)

    def scan_index(
        self,
        field: str,
        value: Any,
        *,
        limit: int | None = None,
        filter: Filter | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        self._check()
        spec = self._spec
        spec.field(field)
        if field not in spec.indexes:
            raise SchemaMismatch(f"table {spec.name!r}: field {field!r} has no index")
        equal = checked_filter(spec, Eq(field, value))
        # Equal index bytes can still differ in value (a long beyond 2**53 and the double it
        # rounds to), so the equality is re-checked on every row.
        combined = equal if filter is None else And((equal, filter))
        if value is None:
            spec.check_columns(columns)
            checked_filter(spec, combined)
            check_limit(spec, limit)
            return iter([])
        assert isinstance(equal, Eq)
        n = spec.indexes.index(field)
        prefix = self._indexes[n] + encode_value(spec.field(field).type, equal.value)
        return self._select(prefix, prefix_end(prefix), limit, combined, columns)

    def delete(self, key: Mapping[str, Any]) -> bool:
        self._check()
        encoded = self._full_key(key)
        old = self._txn.get(self._rows + encoded, self._id)
        if old is None:
            return False
        if self._spec.indexes:
            self._unindex(encoded, load_row(self._spec, self._rows + encoded, old))
        self._txn.delete(self._rows + encoded, self._id)
        return True

    def delete_all(self, prefix: Mapping[str, Any]) -> int:
        self._check()
        values = self._spec.check_key(prefix, full=False)
        start = self._rows + self._encode_prefix(values)
        end = prefix_end(start)
        spec = self._spec
        offset = len(self._rows)

        def unindex(key: bytes, value: bytes) -> bool:
            if spec.indexes:
                self._unindex(key[offset:], load_row(spec, key, value))
            return True

        count = len(self._txn.scan(start, end, self._id, unindex, keys_only=not spec.indexes))
        if count:
            self._txn.delete_range(start, end, self._id)
        return count

    # -- helpers -------------------------------------------------------------------------------

    def _check(self) -> None:
        """The context is open and the table was not dropped by this transaction."""
        self._txn.check_open()
        found = self._txn.catalog(self._spec.name)
        if found is None or found.id != self._id:
            raise NotFound(f"table {self._spec.name!r} was dropped")

    def _encode_prefix(self, values: tuple[Any, ...]) -> bytes:
        spec = self._spec
        names = spec.primary_key[: len(values)]
        return encode_key(
            spec, [normalise_value(spec, n, v) for n, v in zip(names, values, strict=True)]
        )

    def _full_key(self, key: Mapping[str, Any]) -> bytes:
        return self._encode_prefix(self._spec.check_key(key, full=True))

    def _index_key(self, n: int, value: Any, key: bytes) -> bytes:
        field_type = self._spec.field(self._spec.indexes[n]).type
        return self._indexes[n] + encode_value(field_type, value) + key

    def _unindex(self, key: bytes, old: Row, keep: Mapping[str, Any] | None = None) -> None:
        """Delete the index entries of row ``old`` (except those ``keep`` rewrites)."""
        for n, field in enumerate(self._spec.indexes):
            if old[field] is None:
                continue
            entry = self._index_key(n, old[field], key)
            new = None if keep is None else keep[field]
            if new is None or self._index_key(n, new, key) != entry:
                self._txn.delete(entry, self._id)

    def _bounds(self, key_range: KeyRange | None) -> tuple[bytes, bytes]:
        start, end = self._rows, prefix_end(self._rows)
        if key_range is None:
            return start, end
        if key_range.lower is not None:
            values = self._spec.check_key(key_range.lower, full=False)
            lower = self._rows + self._encode_prefix(values)
            start = lower if key_range.lower_inclusive else prefix_end(lower)
        if key_range.upper is not None:
            values = self._spec.check_key(key_range.upper, full=False)
            upper = self._rows + self._encode_prefix(values)
            end = prefix_end(upper) if key_range.upper_inclusive else upper
        return start, end

    def _select(
        self,
        start: bytes,
        end: bytes,
        limit: int | None,
        filter: Filter | None,
        columns: Sequence[str] | None,
    ) -> Iterator[Row]:
        spec = self._spec
        cols = spec.check_columns(columns)
        flt = None if filter is None else checked_filter(spec, filter)
        check_limit(spec, limit)

        def visit(key: bytes, value: bytes) -> Row | None:
            row = load_row(spec, key, value)
            if flt is not None and not matches(flt, row):
                return None
            return {c: row[c] for c in cols}

        page = PAGE if limit is None or flt is not None else max(1, min(PAGE, limit))
        # Materialised: the caller's later writes must not show up in an earlier scan.
        return iter(self._txn.scan(start, end, self._id, visit, limit=limit, page=page))
