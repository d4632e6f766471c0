"""etcd backend of the StructuredTable SPI (:mod:`gnomon.store.api`).

Everything lives under one key namespace (``/gnomon`` by default)::

    <ns>/catalog/<table name>            {"id": <table id>, "spec": <spec JSON>}
    <ns>/next_id                         the last table id handed out
    <ns>/tables/<id>/r/<key>             one row: compact JSON of its fields
    <ns>/tables/<id>/i/<n>/<value><key>  the same row under the n-th index's value
    <ns>/tables/<id>/d                   rewritten by every commit that deletes from the table

``<key>`` and ``<value>`` are order-preserving byte encodings (:func:`encode_key`, with the row
and catalog forms in :mod:`gnomon.store.etcd_codec`), so a key
range or prefix of the SPI is one etcd range read, and etcd's byte order is the SPI's key order.

A transaction reads from one snapshot (the revision of its first read), buffers its writes and
commits them as ONE etcd Txn whose compares re-check everything it read: the mod revision of
every key read, "nothing in this range changed after the snapshot" for every range scanned, and,
since a range compare cannot see deleted keys, the table's deletion marker ``d`` for every table
it scanned. A failed compare is a :class:`~gnomon.errors.Conflict`; a read-only transaction
never commits and never conflicts (:mod:`gnomon.store.etcd_txn`; tables as a transaction sees
them: :mod:`gnomon.store.etcd_table`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from gnomon.errors import (
    AlreadyExists,
    Conflict,
    Corrupted,
    InvalidArgument,
    NotFound,
    SchemaMismatch,
)
from gnomon.etcd import EtcdAccess, EtcdConnection, prefix_end
from gnomon.store.api import TableContext
from gnomon.store.etcd_codec import Entry, Layout, dump_entry, encode_key
from gnomon.store.etcd_table import Context
from gnomon.store.etcd_txn import Txn
from gnomon.store.spec import TableSpec

__all__ = ["DEFAULT_MAX_TXN_OPS", "EtcdStore", "encode_key"]

T = TypeVar("T")

#: etcd's default ``--max-txn-ops``: the most compares, and separately the most writes, that
#: one Txn may carry.
DEFAULT_MAX_TXN_OPS = 128

# Admin calls outside a transaction are repeated on conflict: concurrent creates of unrelated
# tables race on the id counter, which is no reason to fail either.
_ADMIN_ATTEMPTS = 16


class EtcdStore:
    """A :class:`~gnomon.store.api.StructuredStore` in an etcd v3 cluster.

    ``endpoints`` is ``host:port[,host:port...]`` or a sequence of endpoints, as
    :func:`gnomon.etcd.parse_endpoints` reads them, reached as ``access`` says (etcd's
    authentication, TLS); requests go to one endpoint and move to the next when it is
    unreachable, which raises :class:`~gnomon.errors.Unavailable` naming it (reads try every
    endpoint first).
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
        access: EtcdAccess | None = None,
    ) -> None:
        if not namespace.strip("/") or "\x00" in namespace:
            raise InvalidArgument(f"EtcdStore needs a non-empty namespace, got {namespace!r}")
        if max_txn_ops < 8:
            raise InvalidArgument(f"max_txn_ops must be at least 8, got {max_txn_ops}")
        self._namespace = namespace
        self.max_txn_ops = max_txn_ops
        self.layout = Layout(namespace)
        self._etcd = EtcdConnection(
            endpoints,
            timeout_s=timeout_s,
            owner=f"EtcdStore(namespace={namespace!r})",
            access=access,
        )
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"EtcdStore({','.join(self._etcd.targets)!r}, namespace={self._namespace!r})"

    # -- admin ---------------------------------------------------------------------------------

    def create(self, spec: TableSpec, *, if_not_exists: bool = False) -> None:
        def op(txn: Txn) -> None:
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
            txn.put(self.layout.catalog(spec.name), dump_entry(Entry(table_id, spec)))

        self._admin(op)

    def exists(self, name: str) -> bool:
        return self._admin(lambda txn: txn.catalog(name)) is not None

    def get_spec(self, name: str) -> TableSpec:
        found = self._admin(lambda txn: txn.catalog(name))
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return found.spec

    def drop(self, name: str) -> None:
        def op(txn: Txn) -> None:
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
        self.check_open()
        if getattr(self._local, "txn", None) is not None:
            raise InvalidArgument(f"{self!r}: transact called inside a transaction of this thread")
        txn = Txn(self)
        self._local.txn = txn
        try:
            result = fn(Context(txn))
            txn.commit()
            return result
        finally:
            txn.open = False
            self._local.txn = None

    def close(self) -> None:
        self._etcd.close()

    # -- internals -----------------------------------------------------------------------------

    def check_open(self) -> None:
        self._etcd.check_open()

    def _admin(self, op: Callable[[Txn], T]) -> T:
        self.check_open()
        joined: Txn | None = getattr(self._local, "txn", None)
        if joined is not None:
            return op(joined)
        last: Conflict | None = None
        for _ in range(_ADMIN_ATTEMPTS):
            txn = Txn(self)
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

    def rpc(self, method: str, request: Any, *, idempotent: bool) -> Any:
        """Send one KV request; reads go on to the next endpoint when one is unreachable."""
        return self._etcd.kv(method, request, failover=idempotent)
