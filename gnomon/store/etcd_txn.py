"""Transactions of the etcd backend (:mod:`gnomon.store.etcd`): snapshot reads with read-set
tracking, buffered writes, and the commit as one etcd Txn whose compares re-check what was read
(see that module's docstring for the rules)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.errors import Conflict, InvalidArgument, TooLarge
from gnomon.etcd import prefix_end
from gnomon.store.etcd_codec import Entry, Layout, load_entry, successor

T = TypeVar("T")

#: Rows fetched per range request of a scan.
PAGE = 512


class TxnStore(Protocol):
    """What a transaction needs of its store."""

    layout: Layout
    max_txn_ops: int

    def check_open(self) -> None: ...

    def rpc(self, method: str, request: Any, *, idempotent: bool) -> Any: ...


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
                lower = successor(key)
            if lower < end:
                ops.append(_delete_op(lower, end))
        ops.extend(_delete_op(key) for key in sorted(self.deletes))
        ops.extend(_put_op(key, value) for key, value in sorted(self.puts.items()))
        return ops


class Txn:
    """One transaction: snapshot reads with read-set tracking, buffered writes."""

    def __init__(self, store: TxnStore) -> None:
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
        self.store.check_open()
        if not self.open:
            raise InvalidArgument("a TableContext cannot be used after its transaction ended")

    # -- reads ---------------------------------------------------------------------------------

    def _range_request(self, **fields: Any) -> Any:
        response = self.store.rpc(
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

    def catalog(self, name: str) -> Entry | None:
        data = self.get(self.layout.catalog(name))
        return None if data is None else load_entry(data)

    def scan(
        self,
        start: bytes,
        end: bytes,
        table_id: int,
        visit: Callable[[bytes, bytes], T | None],
        *,
        limit: int | None = None,
        page: int = PAGE,
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
                    stop = successor(key)
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
            cursor = successor(bytes(kvs[-1].key)) if response.more and kvs else None
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
            response = self.store.rpc("Txn", request, idempotent=False)
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
