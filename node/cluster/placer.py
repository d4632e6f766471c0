"""The engine's placer in a cluster: new tables get their id and shard from the meta service,
and a table not open here is looked up in the route cache (then the meta service)."""

from __future__ import annotations

from collections.abc import Callable

from gnomon.errors import NotFound
from meta.client import MetaClient
from node.cluster import tables
from node.cluster.routes import RouteCache
from node.engine.options import TableOptions
from node.engine.placement import Placed
from node.engine.schema import Schema


class MetaPlacer:
    def __init__(self, client: MetaClient, routes: RouteCache, *, me: str = "") -> None:
        self._client = client
        self._routes = routes
        self._me = me
        #: Brings the shards open here up to date with the meta service (the keeper's pass),
        #: before a fresh :meth:`locate`.
        self.catch_up: Callable[[], None] = lambda: None

    def place(self, name: str, schema: Schema, options: TableOptions) -> Placed:
        created = self._client.create_table(name, tables.encode(schema, options))
        table = created[0]
        self._routes.invalidate(name)
        if not table.HasField("shard_id"):
            raise NotFound(f"table {name!r} was placed without a shard")
        route = self._routes.lookup([name]).get(name)
        return Placed(table.shard_id, table.id, route.endpoint if route else "")

    def unplace(self, name: str) -> None:
        self._client.drop_table(name)
        self._routes.invalidate(name)

    def locate(self, name: str, *, fresh: bool = False) -> Placed | None:
        route = None if fresh else self._routes.lookup([name]).get(name)
        if fresh or (route is not None and route.endpoint == self._me):
            # The keeper's pass opens what the meta service places here; the route is asked
            # anew after it, so both read the same (or a later) placement.
            self.catch_up()
            self._routes.invalidate(name)
            route = self._routes.lookup([name]).get(name)
        if route is None or route.shard_id is None:
            return None
        return Placed(route.shard_id, route.table_id, route.endpoint)
