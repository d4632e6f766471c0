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
        #: for a table whose route names this node before its keeper has opened the shard.
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

    def locate(self, name: str) -> Placed | None:
        route = self._routes.lookup([name]).get(name)
        if route is None or route.shard_id is None:
            return None
        if route.endpoint and route.endpoint == self._me:
            self.catch_up()
        return Placed(route.shard_id, route.table_id, route.endpoint)
