"""How a data node takes part in its deployment — the one thing that differs between a
standalone server and a cluster node, chosen by the composition root and handed to the node.

A :class:`LocalPlacement` serves every table from one shard on local backends. A
:class:`MetaPlacement` joins a cluster: tables are placed by the meta service, the shards
this node leads are opened and closed as the meta service says (:class:`ShardKeeper`), the
node heartbeats and fences itself when it cannot (:class:`LeaseClock`), and requests for
tables served elsewhere are routed there (:class:`ClusterRouter`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol

import grpc

from gnomon import shard_control
from gnomon.errors import Unavailable
from gnomon.peer import Peer
from meta.client import MetaClient, NodeAgent
from meta.model import NodeKind
from node.backends import Storage, open_engine, open_standalone
from node.cluster.forward import Forwarder
from node.cluster.keeper import ShardKeeper
from node.cluster.lease import LeaseClock
from node.cluster.placer import MetaPlacer
from node.cluster.remote import FlightReaders
from node.cluster.router import ClusterRouter, LocalRouter, Router
from node.cluster.routes import RouteCache
from node.engine.compaction.client import CompactionClient
from node.engine.compaction.offload import CompactionMode, Offload
from node.engine.engine import Engine
from node.partition.cluster import ClusterParts, MetaPartitionCatalog
from node.partition.parts import LocalParts
from node.partition.tables import Partitions, standalone_partitions
from node.sql.provider import NoRemoteTables, RemoteTables
from node.sql.remote_tables import FlightRemoteTables
from node.tables import LocalTables

#: Compaction workers of a node that offloads its merges (a local one's is the engine's).
OFFLOAD_COMPACTION_THREADS = 4


class Placement(Protocol):
    def open_engine(self, data_dir: str, **config: object) -> Engine:
        """The node's engine on its backends, with the shards it serves from the start."""

    def router(self, engine: Engine) -> Router: ...

    def remote_tables(self) -> RemoteTables:
        """Where queries find the tables other nodes serve."""

    def partitions(self, tables: LocalTables) -> Partitions:
        """The partition tables: where they are defined and where their sub-tables are
        served (``tables``: this node's)."""

    def handlers(self) -> Sequence[grpc.GenericRpcHandler]:
        """gRPC services of the node's part in its deployment (beside the storage service)."""

    def join(
        self,
        engine: Engine,
        endpoints: Mapping[str, str],
        figures: Callable[[], Mapping[str, float]],
    ) -> None:
        """The servers listen (``endpoints``: where, by protocol): start taking part
        (register, heartbeat with ``figures``, follow shards)."""

    def leave(self) -> None:
        """Stop taking part; the engine is closed after this."""


class LocalPlacement:
    def __init__(self, *, wal_sync: str = "always", advertise: str | None = None) -> None:
        self.wal_sync = wal_sync
        self.advertise = advertise

    def open_engine(self, data_dir: str, **config: object) -> Engine:
        return open_standalone(data_dir, wal_sync=self.wal_sync, **config)

    def router(self, engine: Engine) -> Router:
        return LocalRouter(self.advertise)

    def remote_tables(self) -> RemoteTables:
        return NoRemoteTables()

    def partitions(self, tables: LocalTables) -> Partitions:
        return standalone_partitions(tables)

    def handlers(self) -> Sequence[grpc.GenericRpcHandler]:
        return ()

    def join(
        self,
        engine: Engine,
        endpoints: Mapping[str, str],
        figures: Callable[[], Mapping[str, float]],
    ) -> None:
        return None

    def leave(self) -> None:
        return None


class MetaPlacement:
    def __init__(
        self,
        meta: str,
        advertise: str,
        storage: Storage,
        *,
        ttl_s: int = 10,
        reconcile_s: float = 2.0,
        compaction_mode: CompactionMode = CompactionMode.LOCAL,
        compaction_timeout_s: float = 600.0,
        peer: Peer | None = None,
        kind: NodeKind = NodeKind.DATA,
    ) -> None:
        self.advertise = advertise
        #: What the node registers as: a query node is given no shards.
        self.kind = kind
        #: How this node calls the others, the meta service and the compaction nodes.
        self.peer = peer = peer or Peer()
        self.storage = storage
        self.ttl_s = ttl_s
        self.client = MetaClient(meta, peer=peer)
        self.routes = RouteCache(self.client)
        self.lease = LeaseClock(on_lapse_renewed=self._poke_keeper)
        self.forwarder = Forwarder(advertise, peer=peer)
        self.readers = FlightReaders(self.routes, advertise, peer)
        self.remote = FlightRemoteTables(self.readers)
        self._reconcile_s = reconcile_s
        self._agent: NodeAgent | None = None
        self._keeper: ShardKeeper | None = None
        self._placer = MetaPlacer(self.client, self.routes, me=advertise)
        # Picks fail fast: with meta away a compaction is merged here, not held up.
        self._picks = MetaClient(meta, timeout_s=2.0, retry_for_s=2.0, peer=peer)
        self._compaction_nodes = CompactionClient(requester=advertise, peer=peer)
        self.offload = Offload(
            self._picks,
            self._compaction_nodes,
            mode=compaction_mode,
            timeout_s=compaction_timeout_s,
        )

    def open_engine(self, data_dir: str, **config: object) -> Engine:
        if self.offload.mode is CompactionMode.OFFLOAD:
            # A merge offloaded costs a thread waiting on its answer, not a core.
            config.setdefault("compaction_threads", OFFLOAD_COMPACTION_THREADS)
        return open_engine(
            data_dir, self.storage, placer=self._placer, offload=self.offload, **config
        )

    def router(self, engine: Engine) -> Router:
        return ClusterRouter(
            self.advertise, self.routes, self.forwarder, local_shards=lambda: list(engine.shards())
        )

    def remote_tables(self) -> RemoteTables:
        return self.remote

    def partitions(self, tables: LocalTables) -> Partitions:
        engine = tables.engine
        return Partitions(
            MetaPartitionCatalog(self.client, self.routes),
            ClusterParts(
                self.routes,
                self.readers,
                LocalParts(tables, tables),
                me=self.advertise,
                local_shards=lambda: list(engine.shards()),
            ),
        )

    def handlers(self) -> Sequence[grpc.GenericRpcHandler]:
        return (shard_control.handler(self._release, self.peer.secret),)

    def _release(
        self, shard_id: int, epoch: int, table_ids: Collection[int] | None
    ) -> Sequence[str]:
        if self._keeper is None:
            raise Unavailable("this node has not joined its cluster yet")
        return self._keeper.release(shard_id, epoch, table_ids)

    def join(
        self,
        engine: Engine,
        endpoints: Mapping[str, str],
        figures: Callable[[], Mapping[str, float]],
    ) -> None:
        def load() -> tuple[float, dict[int, float]]:
            shards = engine.shards()
            tables = engine.stats().tables
            return float(len(tables)), {s: 1.0 for s in shards}

        self._agent = NodeAgent(
            self.client,
            self.advertise,
            self.kind,
            ttl_s=self.ttl_s,
            # Three heartbeats a lease: one lost to a hiccup leaves the lease current.
            interval_s=self.ttl_s / 3,
            load=load,
            on_renewed=self.lease.renewed,
            endpoints=endpoints,
            figures=figures,
        )
        self._agent.start()
        self._keeper = ShardKeeper(
            engine,
            self.client,
            self.advertise,
            lease=self.lease,
            interval_s=self._reconcile_s,
            on_event=lambda e: self.routes.invalidate(shard_id=e.shard_id),
            on_pass=self.lease.caught_up,
        )
        self._placer.catch_up = self._keeper.reconcile
        self._keeper.start()

    def _poke_keeper(self) -> None:
        if self._keeper is not None:
            self._keeper.poke()

    def leave(self) -> None:
        # The meta client first: a pass or a heartbeat retrying a meta service that is away
        # (or stopping with this node) gives up at once, rather than holding the stop for
        # as long as its retries last (the threads are joined after it).
        self.client.close()
        if self._keeper is not None:
            self._keeper.stop()
        if self._agent is not None:
            self._agent.stop()
        self.forwarder.close()
        self.readers.close()
        self._picks.close()
        self._compaction_nodes.close()
