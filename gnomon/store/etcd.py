"""etcd backend of the StructuredTable SPI (:mod:`gnomon.store.api`).

Everything lives under one key namespace (``/gnomon`` by default)::

    <ns>/catalog/<table name>            {"id": <table id>, "spec": <spec JSON>}
    <ns>/next_id                         the last table id handed out
    <ns>/tables/<id>/r/<key>             one row: compact JSON of its fields
    <ns>/tables/<id>/i/<n>/<value><key>  the same row under the n-th index's value
    <ns>/tables/<id>/d                   rewritten by every commit that deletes from the table

``<key>`` and ``<value>`` are order-preserving byte encodings (:func:`encode_key`), so a key
range or prefix of the SPI is one etcd range read, and etcd's byte order is the SPI's key order.

A transaction reads from one snapshot (the revision of its first read), buffers its writes and
commits them as ONE etcd Txn whose compares re-check everything it read: the mod revision of
every key read, "nothing in this range changed after the snapshot" for every range scanned, and,
since a range compare cannot see deleted keys, the table's deletion marker ``d`` for every table
it scanned. A failed compare is a :class:`~gnomon.errors.Conflict`; a read-only transaction
never commits and never conflicts.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.errors import (
    AlreadyExists,
    Conflict,
    Corrupted,
    GnomonError,
    InvalidArgument,
    NotFound,
    SchemaMismatch,
    TooLarge,
)
from gnomon.etcd import EtcdConnection, prefix_end
from gnomon.store.api import KeyRange, Row, TableContext
from gnomon.store.filters import And, Eq, Filter, In, Not, Or, Range, matches
from gnomon.store.spec import FieldType, TableSpec
from gnomon.store.sqlfilter import normalise_value

T = TypeVar("T")

#: etcd's default ``--max-txn-ops``: the most compares, and separately the most writes, that
#: one Txn may carry.
DEFAULT_MAX_TXN_OPS = 128

# Rows fetched per range request of a scan.
_PAGE = 512
# Admin calls outside a transaction are repeated on conflict: concurrent creates of unrelated
# tables race on the id counter, which is no reason to fail either.
_ADMIN_ATTEMPTS = 16

_FLOAT_TYPES = frozenset({FieldType.FLOAT, FieldType.DOUBLE})
_SIGN = 1 << 63
_ALL_BITS = (1 << 64) - 1


# -- key encoding -----------------------------------------------------------------------------


def _escaped(data: bytes) -> bytes:
    # 0x00 becomes 0x00 0xFF and the value ends with 0x00 0x01: the terminator sorts below every
    # escaped byte, so a value sorts before its extensions and the encoding is prefix-free.
    return data.replace(b"\x00", b"\x00\xff") + b"\x00\x01"


def encode_value(field_type: FieldType, value: Any) -> bytes:
    """Order-preserving, self-delimiting bytes of one (normalised, non-null) field value.

    Strings sort by code point (their UTF-8 bytes do), bytes bytewise, ints numerically (64-bit
    big-endian with the sign bit flipped), floats numerically with -0.0 equal to 0.0.
    """
    if field_type is FieldType.STRING:
        return _escaped(value.encode("utf-8"))
    if field_type is FieldType.BYTES:
        return _escaped(bytes(value))
    if field_type in _FLOAT_TYPES:
        number = float(value) + 0.0  # adding 0.0 turns -0.0 into 0.0
        (bits,) = struct.unpack(">Q", struct.pack(">d", number))
        bits = bits ^ _ALL_BITS if bits & _SIGN else bits | _SIGN
        return int(bits).to_bytes(8, "big")
    return (int(value) + _SIGN).to_bytes(8, "big")


def encode_key(spec: TableSpec, values: Sequence[Any]) -> bytes:
    """The bytes of a (partial) primary key; a prefix's bytes prefix those of its full keys."""
    return b"".join(
        encode_value(spec.field(name).type, value)
        for name, value in zip(spec.primary_key, values, strict=False)
    )


def _successor(key: bytes) -> bytes:
    return key + b"\x00"


# -- row encoding -----------------------------------------------------------------------------


def _dump_row(spec: TableSpec, row: Mapping[str, Any]) -> bytes:
    """Compact JSON of a normalised row; nulls are left out, bytes are base64, infinities are
    the strings "inf"/"-inf" (JSON has no token for them)."""
    out: dict[str, Any] = {}
    for f in spec.fields:
        value = row.get(f.name)
        if value is None:
            continue
        if f.type is FieldType.BYTES:
            value = base64.b64encode(value).decode("ascii")
        elif f.type in _FLOAT_TYPES and math.isinf(value):
            value = "inf" if value > 0 else "-inf"
        out[f.name] = value
    # ASCII: field names may hold lone surrogates, which have no UTF-8 bytes.
    return json.dumps(out, separators=(",", ":"), allow_nan=False).encode()


def _load_row(spec: TableSpec, key: bytes, data: bytes) -> Row:
    try:
        raw = json.loads(data)
        row: Row = {}
        for f in spec.fields:
            value = raw.get(f.name)
            if value is not None:
                if f.type is FieldType.BYTES:
                    value = base64.b64decode(value, validate=True)
                elif f.type in _FLOAT_TYPES:
                    value = float(value)
            row[f.name] = value
        return row
    except (ValueError, TypeError, AttributeError) as e:
        raise Corrupted(f"table {spec.name!r}: row at etcd key {key!r} is not valid: {e}") from e


# -- catalog ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    id: int
    spec: TableSpec


@functools.lru_cache(maxsize=1024)
def _load_entry(data: bytes) -> _Entry:
    try:
        raw = json.loads(data)
        return _Entry(int(raw["id"]), TableSpec.from_json(raw["spec"]))
    except (ValueError, TypeError, KeyError, GnomonError) as e:
        raise Corrupted(f"etcd catalog entry {data[:200]!r} is not valid: {e}") from e


def _dump_entry(entry: _Entry) -> bytes:
    return json.dumps({"id": entry.id, "spec": entry.spec.to_json()}).encode()


class _Layout:
    """The keys of one namespace."""

    def __init__(self, namespace: str) -> None:
        base = namespace.rstrip("/").encode("utf-8", "surrogatepass") + b"/"
        self.base = base
        self.next_id = base + b"next_id"
        self._catalog = base + b"catalog/"
        self._tables = base + b"tables/"

    def catalog(self, name: str) -> bytes:
        # surrogatepass: every Python str is a valid table name here, so it must have bytes.
        return self._catalog + name.encode("utf-8", "surrogatepass")

    def table(self, table_id: int) -> bytes:
        return self._tables + str(table_id).encode() + b"/"


# -- filters ----------------------------------------------------------------------------------


def _checked_value(spec: TableSpec, name: str, value: Any) -> Any:
    # Ints given for float fields stay ints here: matches() compares them with the stored
    # floats exactly, as the reference semantics want.
    spec.check_value(name, value)
    return normalise_value(spec, name, value)


def _stored_value(spec: TableSpec, name: str, value: Any) -> Any:
    value = _checked_value(spec, name, value)
    if value is not None and spec.field(name).type in _FLOAT_TYPES:
        return float(value)
    return value


def _checked_filter(spec: TableSpec, f: Filter) -> Filter:
    """``f`` with every value checked against its field and normalised as stored values are, so
    that :func:`matches` on stored rows is the whole evaluation."""
    if isinstance(f, Eq):
        spec.field(f.field)
        return f if f.value is None else Eq(f.field, _checked_value(spec, f.field, f.value))
    if isinstance(f, In):
        spec.field(f.field)
        return In(
            f.field,
            frozenset(None if v is None else _checked_value(spec, f.field, v) for v in f.values),
        )
    if isinstance(f, Range):
        spec.field(f.field)
        return Range(
            f.field,
            None if f.lower is None else _checked_value(spec, f.field, f.lower),
            None if f.upper is None else _checked_value(spec, f.field, f.upper),
            f.lower_inclusive,
            f.upper_inclusive,
        )
    if isinstance(f, Not):
        return Not(_checked_filter(spec, f.filter))
    if isinstance(f, And):
        return And(tuple(_checked_filter(spec, s) for s in f.filters))
    if isinstance(f, Or):
        return Or(tuple(_checked_filter(spec, s) for s in f.filters))
    raise InvalidArgument(f"table {spec.name!r}: not a filter: {f!r}")


def _check_limit(spec: TableSpec, limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidArgument(f"table {spec.name!r}: bad scan limit {limit!r}")


# -- etcd requests ----------------------------------------------------------------------------


def _compare(key: bytes, *, mod: int, less: bool, range_end: bytes = b"") -> Any:
    return etcdrpc.Compare(
        key=key,
        range_end=range_end,
        target=etcdrpc.Compare.MOD,
        result=etcdrpc.Compare.LESS if less else etcdrpc.Compare.EQUAL,
        mod_revision=mod,
    )


def _put_op(key: bytes, value: bytes) -> Any:
    return etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=key, value=value))


def _delete_op(key: bytes, range_end: bytes = b"") -> Any:
    return etcdrpc.RequestOp(
        request_delete_range=etcdrpc.DeleteRangeRequest(key=key, range_end=range_end)
    )


# -- the store --------------------------------------------------------------------------------


class EtcdStore:
    """A :class:`~gnomon.store.api.StructuredStore` in an etcd v3 cluster.

    ``endpoints`` is ``host:port[,host:port...]`` or a sequence of endpoints, as
    :func:`gnomon.etcd.parse_endpoints` reads them; requests go to one endpoint and move to the
    next when it is unreachable, which raises :class:`~gnomon.errors.Unavailable` naming it
    (reads try every endpoint first).
    ``namespace`` is the key prefix of this store; stores with different namespaces are
    independent (namespaces must not be nested in each other). ``timeout_s`` bounds every
    request. ``max_txn_ops`` must not exceed the server's ``--max-txn-ops``: a transaction that
    writes more keys than that is :class:`~gnomon.errors.TooLarge`, and one that read more keys
    than that is checked per table instead of per key (coarser, so more conflicts).

    Thread-safe; each thread runs its own transactions. Admin calls inside ``transact`` on the
    same thread join that transaction.
    """

    def __init__(
        self,
        endpoints: str | Sequence[str],
        *,
        namespace: str = "/gnomon",
        timeout_s: float = 10.0,
        max_txn_ops: int = DEFAULT_MAX_TXN_OPS,
    ) -> None:
        if not namespace.strip("/") or "\x00" in namespace:
            raise InvalidArgument(f"EtcdStore needs a non-empty namespace, got {namespace!r}")
        if max_txn_ops < 8:
            raise InvalidArgument(f"max_txn_ops must be at least 8, got {max_txn_ops}")
        self._namespace = namespace
        self.max_txn_ops = max_txn_ops
        self.layout = _Layout(namespace)
        self._etcd = EtcdConnection(
            endpoints, timeout_s=timeout_s, owner=f"EtcdStore(namespace={namespace!r})"
        )
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"EtcdStore({','.join(self._etcd.targets)!r}, namespace={self._namespace!r})"

    # -- admin ---------------------------------------------------------------------------------

    def create(self, spec: TableSpec, *, if_not_exists: bool = False) -> None:
        def op(txn: _Txn) -> None:
            found = txn.catalog(spec.name)
            if found is not None:
                if not if_not_exists:
                    raise AlreadyExists(f"table {spec.name!r} already exists")
                if found.spec != spec:
                    raise SchemaMismatch(
                        f"table {spec.name!r} exists with spec {found.spec.to_json()}, "
                        f"not {spec.to_json()}"
                    )
                return
            last = txn.get(self.layout.next_id)
            try:
                table_id = int(last or b"0") + 1
            except ValueError:
                raise Corrupted(f"etcd key {self.layout.next_id!r} holds {last!r}") from None
            txn.put(self.layout.next_id, str(table_id).encode())
            txn.put(self.layout.catalog(spec.name), _dump_entry(_Entry(table_id, spec)))

        self._admin(op)

    def exists(self, name: str) -> bool:
        return self._admin(lambda txn: txn.catalog(name)) is not None

    def get_spec(self, name: str) -> TableSpec:
        found = self._admin(lambda txn: txn.catalog(name))
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return found.spec

    def drop(self, name: str) -> None:
        def op(txn: _Txn) -> None:
            found = txn.catalog(name)
            if found is None:
                raise NotFound(f"table {name!r} does not exist")
            txn.delete(self.layout.catalog(name))
            prefix = self.layout.table(found.id)
            txn.delete_range(prefix, prefix_end(prefix))
            txn.dropped.add(found.id)

        self._admin(op)

    # -- transactions --------------------------------------------------------------------------

    def transact(self, fn: Callable[[TableContext], T]) -> T:
        self._check_open()
        if getattr(self._local, "txn", None) is not None:
            raise InvalidArgument(f"{self!r}: transact called inside a transaction of this thread")
        txn = _Txn(self)
        self._local.txn = txn
        try:
            result = fn(_Context(txn))
            txn.commit()
            return result
        finally:
            txn.open = False
            self._local.txn = None

    def close(self) -> None:
        self._etcd.close()

    # -- internals -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        self._etcd.check_open()

    def _admin(self, op: Callable[[_Txn], T]) -> T:
        self._check_open()
        joined: _Txn | None = getattr(self._local, "txn", None)
        if joined is not None:
            return op(joined)
        last: Conflict | None = None
        for _ in range(_ADMIN_ATTEMPTS):
            txn = _Txn(self)
            try:
                result = op(txn)
                txn.commit()
                return result
            except Conflict as e:
                last = e
            finally:
                txn.open = False
        assert last is not None
        raise last

    def _rpc(self, method: str, request: Any, *, idempotent: bool) -> Any:
        """Send one KV request; reads go on to the next endpoint when one is unreachable."""
        return self._etcd.kv(method, request, failover=idempotent)


class _Writes:
    """A transaction's buffered writes: puts, point deletes and range deletes, each key in at
    most one of them, so that the commit can apply all of them in one etcd Txn (which refuses a
    key that is both put and deleted)."""

    def __init__(self) -> None:
        self.puts: dict[bytes, bytes] = {}
        self.deletes: set[bytes] = set()
        self.ranges: list[tuple[bytes, bytes]] = []

    def __bool__(self) -> bool:
        return bool(self.puts or self.deletes or self.ranges)

    def lookup(self, key: bytes) -> tuple[bool, bytes | None]:
        """(True, value or None if deleted) if this transaction wrote ``key``."""
        if key in self.puts:
            return True, self.puts[key]
        return self.hides(key), None

    def hides(self, key: bytes) -> bool:
        """True if this transaction deleted ``key`` (and did not write it again)."""
        return key in self.deletes or self._in_ranges(key)

    def _in_ranges(self, key: bytes) -> bool:
        return any(start <= key < end for start, end in self.ranges)

    def put(self, key: bytes, value: bytes) -> None:
        self.deletes.discard(key)
        self.puts[key] = value

    def delete(self, key: bytes) -> None:
        self.puts.pop(key, None)
        if not self._in_ranges(key):
            self.deletes.add(key)

    def delete_range(self, start: bytes, end: bytes) -> None:
        for key in [k for k in self.puts if start <= k < end]:
            del self.puts[key]
        self.deletes = {k for k in self.deletes if not start <= k < end}
        self.ranges.append((start, end))

    def puts_between(self, start: bytes, end: bytes) -> list[tuple[bytes, bytes]]:
        return sorted((k, v) for k, v in self.puts.items() if start <= k < end)

    def ops(self) -> list[Any]:
        ops: list[Any] = []
        for start, end in self.ranges:
            # Keys written again after the range was deleted are cut out of the deletion.
            lower = start
            for key, _ in self.puts_between(start, end):
                if lower < key:
                    ops.append(_delete_op(lower, key))
                lower = _successor(key)
            if lower < end:
                ops.append(_delete_op(lower, end))
        ops.extend(_delete_op(key) for key in sorted(self.deletes))
        ops.extend(_put_op(key, value) for key, value in sorted(self.puts.items()))
        return ops


class _Txn:
    """One transaction: snapshot reads with read-set tracking, buffered writes."""

    def __init__(self, store: EtcdStore) -> None:
        self.store = store
        self.layout = store.layout
        self.open = True
        self.revision: int | None = None  # the snapshot, set by the first read
        self.writes = _Writes()
        self._cache: dict[bytes, bytes | None] = {}
        # Read set: key -> (mod revision seen, 0 if absent; table id or None for catalog keys).
        self.reads: dict[bytes, tuple[int, int | None]] = {}
        self.ranges: list[tuple[bytes, bytes, int]] = []  # scanned [start, end) per table id
        self.deleted_from: set[int] = set()  # tables this transaction deletes keys from
        self.dropped: set[int] = set()

    def check_open(self) -> None:
        self.store._check_open()
        if not self.open:
            raise InvalidArgument("a TableContext cannot be used after its transaction ended")

    # -- reads ---------------------------------------------------------------------------------

    def _range_request(self, **fields: Any) -> Any:
        response = self.store._rpc(
            "Range", etcdrpc.RangeRequest(revision=self.revision or 0, **fields), idempotent=True
        )
        if self.revision is None:
            self.revision = int(response.header.revision)
        return response

    def get(self, key: bytes, table_id: int | None = None) -> bytes | None:
        known, value = self.writes.lookup(key)
        if known:
            return value
        if key in self._cache:
            return self._cache[key]
        response = self._range_request(key=key)
        kv = response.kvs[0] if response.kvs else None
        self.reads[key] = (int(kv.mod_revision) if kv else 0, table_id)
        value = bytes(kv.value) if kv else None
        self._cache[key] = value
        return value

    def catalog(self, name: str) -> _Entry | None:
        data = self.get(self.layout.catalog(name))
        return None if data is None else _load_entry(data)

    def scan(
        self,
        start: bytes,
        end: bytes,
        table_id: int,
        visit: Callable[[bytes, bytes], T | None],
        *,
        limit: int | None = None,
        page: int = _PAGE,
        keys_only: bool = False,
    ) -> list[T]:
        """``visit`` every (key, value) in [start, end) in key order as this transaction sees
        it; the non-None results, up to ``limit`` of them. Only the part of the range read
        before ``limit`` was reached joins the read set."""
        out: list[T] = []
        if (limit is not None and limit <= 0) or start >= end:
            return out
        stop = end
        for key, value in self._merged(start, end, page, keys_only):
            item = visit(key, value)
            if item is not None:
                out.append(item)
                if limit is not None and len(out) >= limit:
                    stop = _successor(key)
                    break
        self.ranges.append((start, stop, table_id))
        return out

    def _merged(
        self, start: bytes, end: bytes, page: int, keys_only: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        """etcd's keys at the snapshot overlaid with this transaction's writes, in key order."""
        mine = self.writes.puts_between(start, end)
        i = 0
        cursor: bytes | None = start
        while cursor is not None:
            response = self._range_request(
                key=cursor, range_end=end, limit=page, keys_only=keys_only
            )
            kvs = list(response.kvs)
            cursor = _successor(bytes(kvs[-1].key)) if response.more and kvs else None
            for kv in kvs:
                key = bytes(kv.key)
                while i < len(mine) and mine[i][0] < key:
                    yield mine[i]
                    i += 1
                if i < len(mine) and mine[i][0] == key:
                    yield mine[i]
                    i += 1
                elif not self.writes.hides(key):
                    yield key, bytes(kv.value)
        yield from mine[i:]

    # -- writes --------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes) -> None:
        self.writes.put(key, value)

    def delete(self, key: bytes, table_id: int | None = None) -> None:
        self.writes.delete(key)
        if table_id is not None:
            self.deleted_from.add(table_id)

    def delete_range(self, start: bytes, end: bytes, table_id: int | None = None) -> None:
        self.writes.delete_range(start, end)
        if table_id is not None:
            self.deleted_from.add(table_id)

    # -- commit --------------------------------------------------------------------------------

    def commit(self) -> None:
        if not self.writes:
            return
        ops = self.writes.ops()
        ops.extend(
            _put_op(self.layout.table(t) + b"d", b"")
            for t in sorted(self.deleted_from)
            if t not in self.dropped
        )
        limit = self.store.max_txn_ops
        if len(ops) > limit:
            raise TooLarge(
                f"{self.store!r}: the transaction writes {len(ops)} keys; one etcd transaction "
                f"may write at most max_txn_ops={limit}"
            )
        request = etcdrpc.TxnRequest(compare=self._compares(), success=ops)
        try:
            response = self.store._rpc("Txn", request, idempotent=False)
        except TooLarge as e:
            raise TooLarge(f"{e.message} (this store allows max_txn_ops={limit})") from e
        if not response.succeeded:
            raise Conflict(
                f"{self.store!r}: a concurrent transaction changed what this transaction read"
            )

    def _compares(self) -> list[Any]:
        if self.revision is None:
            return []
        after = self.revision + 1  # "mod revision < after": unchanged since the snapshot
        groups: dict[int | None, list[Any]] = {}
        for key, (mod, table_id) in self.reads.items():
            groups.setdefault(table_id, []).append(_compare(key, mod=mod, less=False))
        scanned: set[int] = set()
        for start, end, table_id in self.ranges:
            groups.setdefault(table_id, []).append(
                _compare(start, range_end=end, mod=after, less=True)
            )
            scanned.add(table_id)
        for table_id in scanned:
            # Range compares cannot see deleted keys; every deletion rewrites the marker.
            marker = self.layout.table(table_id) + b"d"
            groups[table_id].append(_compare(marker, mod=after, less=True))
        limit = self.store.max_txn_ops
        total = sum(len(g) for g in groups.values())
        # Too many compares for one Txn: check whole tables instead of keys, largest first. A
        # table-wide range compare sees every write after the snapshot, and the deletion
        # marker, which lies inside the table's range, sees every deletion.
        for table_id in sorted(
            (t for t in groups if t is not None), key=lambda t: len(groups[t]), reverse=True
        ):
            if total <= limit:
                break
            prefix = self.layout.table(table_id)
            total -= len(groups[table_id]) - 1
            groups[table_id] = [
                _compare(prefix, range_end=prefix_end(prefix), mod=after, less=True)
            ]
        if total > limit:
            raise TooLarge(
                f"{self.store!r}: the transaction read {total} tables and catalog keys; one etcd "
                f"transaction may check at most max_txn_ops={limit}"
            )
        return [c for g in groups.values() for c in g]


class _Context:
    def __init__(self, txn: _Txn) -> None:
        self.txn = txn

    def table(self, name: str) -> _EtcdTable:
        self.txn.check_open()
        found = self.txn.catalog(name)
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return _EtcdTable(self.txn, found)


class _EtcdTable:
    def __init__(self, txn: _Txn, entry: _Entry) -> None:
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
        full = {n: _stored_value(spec, n, row.get(n)) for n in spec.field_names}
        key = encode_key(spec, [full[k] for k in spec.primary_key])
        value = _dump_row(spec, full)
        if spec.indexes:
            # The old row says which index entries to remove; reading it also makes this write
            # conflict with concurrent writes of the row, which could otherwise leave an entry
            # of a value neither transaction committed.
            old = self._txn.get(self._rows + key, self._id)
            if old is not None:
                self._unindex(key, _load_row(spec, self._rows + key, old), keep=full)
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
        row = _load_row(self._spec, self._rows + encoded, data)
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
        equal = _checked_filter(spec, Eq(field, value))
        # Equal index bytes can still differ in value (a long beyond 2**53 and the double it
        # rounds to), so the equality is re-checked on every row.
        combined = equal if filter is None else And((equal, filter))
        if value is None:
            spec.check_columns(columns)
            _checked_filter(spec, combined)
            _check_limit(spec, limit)
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
            self._unindex(encoded, _load_row(self._spec, self._rows + encoded, old))
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
                self._unindex(key[offset:], _load_row(spec, key, value))
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
        flt = None if filter is None else _checked_filter(spec, filter)
        _check_limit(spec, limit)

        def visit(key: bytes, value: bytes) -> Row | None:
            row = _load_row(spec, key, value)
            if flt is not None and not matches(flt, row):
                return None
            return {c: row[c] for c in cols}

        page = _PAGE if limit is None or flt is not None else max(1, min(_PAGE, limit))
        # Materialised: the caller's later writes must not show up in an earlier scan.
        return iter(self._txn.scan(start, end, self._id, visit, limit=limit, page=page))
