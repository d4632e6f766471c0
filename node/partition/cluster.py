"""Partition tables in a cluster: their definitions at the meta service, which places the
sub-tables on shards of different nodes, and each sub-table reached where the route cache
says it is served (here, or at its owner's Arrow Flight endpoint)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence

import pyarrow as pa

from gnomon.errors import AlreadyExists, NotOwner, Unavailable
from meta.client import MetaClient
from node.cluster.remote import FlightReaders, FlightTableReader
from node.cluster.routes import RouteCache
from node.partition.parts import LocalParts, Part, RunSql
from node.partition.spec import PartitionSpec
from node.tables import TableReader

#: How long a definition, or the finding that a name is none, is kept.
KEEP_S = 10.0
KEEP_NONE_S = 2.0


class MetaPartitionCatalog:
    """Definitions kept by the meta service (the parent table's definition names the key);
    each one a node met is kept for :data:`KEEP_S`, a name found to be no partition table
    for :data:`KEEP_NONE_S` (a plain table's route answers that, from the route cache)."""

    def __init__(self, client: MetaClient, routes: RouteCache) -> None:
        self._client = client
        self._routes = routes
        self._known: dict[str, tuple[float, PartitionSpec | None]] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> PartitionSpec | None:
        if name.startswith("__"):
            return None  # the meta service names no other table so: sub-tables, internals
        now = time.monotonic()
        with self._lock:
            kept = self._known.get(name)
        if kept is not None and now - kept[0] < (KEEP_S if kept[1] else KEEP_NONE_S):
            return kept[1]
        route = self._routes.lookup([name]).get(name)
        spec = None
        if route is not None and route.shard_id is None:
            spec = self._definition(name)
        with self._lock:
            self._known[name] = (now, spec)
        return spec

    def _definition(self, name: str) -> PartitionSpec | None:
        for t in self._client.tables():
            if t.name == name and t.partitions:
                return PartitionSpec.from_json(name, t.schema, table_id=t.id)
        return None

    def names(self) -> list[str]:
        # Every partition table met, however long ago: a query's analysis must know the
        # table it reads (its timestamp literals, its pushdown). A dropped one is left out
        # once get() found it gone, its definition being checked again after KEEP_S.
        with self._lock:
            return sorted(n for n, (_, spec) in self._known.items() if spec)

    def database_tables(self) -> list[tuple[str, int]]:
        return sorted(
            (t.name, t.id)
            for t in self._client.tables()
            if not t.HasField("parent_id") and not t.name.startswith("__")
        )

    def create(self, spec: PartitionSpec, *, if_not_exists: bool = False) -> PartitionSpec:
        try:
            created = self._client.create_table(
                spec.name, spec.to_json(), partitions=spec.rule.partitions
            )
        except AlreadyExists:
            self.forget(spec.name)
            existing = self.get(spec.name)
            if if_not_exists and existing is not None:
                return existing
            raise
        made = PartitionSpec(
            spec.name, spec.schema, spec.options, spec.rule, created[0].id, int(time.time() * 1000)
        )
        with self._lock:
            self._known[spec.name] = (time.monotonic(), made)
        return made

    def drop(self, name: str) -> bool:
        spec = self.get(name)
        dropped = self._client.drop_table(name)
        self.forget(name)
        if spec is not None:
            for sub in spec.sub_tables:
                self._routes.invalidate(sub)
        return dropped

    def forget(self, name: str) -> None:
        with self._lock:
            self._known.pop(name, None)
        self._routes.invalidate(name)


class RemotePart:
    """A sub-table another node (``owner``) serves, reached at its Flight endpoint."""

    def __init__(self, table: str, reader: FlightTableReader) -> None:
        self._table = table
        self._owner = reader.owner
        self._client = reader.client
        self._reader = reader

    @property
    def table(self) -> str:
        return self._table

    @property
    def owner(self) -> str:
        return self._owner

    def reader(self) -> TableReader:
        return self._reader

    def query(self, sql: str, union: Sequence[str] = ()) -> pa.Table:
        return self._client.query(sql, {self._table: union} if union else None)

    def write(self, data: pa.Table) -> int:
        return self._client.put(self._table, data.to_batches(), data.schema)


class ClusterParts:
    """Sub-tables where the route cache says they are: here when the route names this node
    or a shard open here (``local_shards``), else at the owner."""

    def __init__(
        self,
        routes: RouteCache,
        remote: FlightReaders,
        local: LocalParts,
        *,
        me: str,
        local_shards: Callable[[], Collection[int]],
    ) -> None:
        self._routes = routes
        self._remote = remote
        self._local = local
        self._me = me
        self._local_shards = local_shards

    def bind(self, run: RunSql) -> None:
        self._local.bind(run)

    def locate(self, tables: Sequence[str]) -> list[Part]:
        routes = self._routes.lookup(tables)
        here = set(self._local_shards())
        parts: list[Part] = []
        for name in tables:
            route = routes.get(name)
            if route is None:
                raise Unavailable(f"sub-table {name!r} has no route (is its table being made?)")
            if route.endpoint == self._me or route.shard_id in here:
                parts.append(self._local.local(name))
                continue
            reader = self._remote.reader(name, route)
            if reader is None:
                raise Unavailable(f"sub-table {name!r}: shard {route.shard_id} has no owner now")
            parts.append(RemotePart(name, reader))
        return parts

    def moved(self, error: NotOwner) -> None:
        if error.shard_id is not None:
            self._routes.invalidate(shard_id=error.shard_id)
        else:
            self._routes.invalidate()
