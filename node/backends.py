"""Where a node keeps what must outlive it, chosen from settings: the WAL (local disk or
Kafka), the SSTs (local files or S3) and the catalog and manifests (SQLite, etcd or
PostgreSQL through the StructuredTable SPI). Only composition roots call this; the engine is
handed what it uses.

Settings are URLs::

    wal      disk | kafka://HOST:PORT[,HOST:PORT]
    store    file | file:///DIR | s3://BUCKET[/PREFIX]
    catalog  sqlite | sqlite:///PATH | etcd://HOST:PORT[,HOST:PORT][/NAMESPACE] | postgresql://...

``disk``, ``file`` and ``sqlite`` alone live in the data directory (standalone). An etcd
catalog is reached with the etcd user and TLS files of ``Storage.etcd``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from gnomon.errors import InvalidArgument
from gnomon.etcd import EtcdAccess
from gnomon.store.api import StructuredStore
from gnomon.wal.api import Wal
from node.engine.compaction.offload import Offload
from node.engine.config import EngineConfig
from node.engine.engine import Engine
from node.engine.placement import TablePlacer
from node.engine.shard import STANDALONE_SHARD
from objectstore.api import ObjectStore


@dataclass(frozen=True)
class Storage:
    wal: str = "disk"
    store: str = "file"
    catalog: str = "sqlite"
    #: Topic names of the WAL regions start with this (several clusters on one Kafka).
    kafka_namespace: str = "gnomon"
    #: Longest a write waits for Kafka to acknowledge its WAL record, in seconds.
    wal_append_timeout_s: float = 5.0
    #: Whether dead WAL records are deleted from Kafka (False: a broker without DeleteRecords).
    wal_delete_records: bool = True
    #: S3 endpoint URL (an S3-compatible server); None for AWS.
    s3_endpoint: str | None = None
    s3_region: str | None = None
    wal_sync: Literal["always", "never"] = "always"
    #: How an etcd catalog is reached: etcd's user and password, its CA, a client certificate.
    etcd: EtcdAccess = field(default_factory=EtcdAccess)

    def __post_init__(self) -> None:
        if self.wal_sync not in ("always", "never"):
            raise InvalidArgument(f"wal_sync {self.wal_sync!r}: 'always' or 'never'")
        _scheme(self.wal, "wal", ("disk", "kafka"))
        _scheme(self.store, "store", ("file", "s3"))
        _scheme(self.catalog, "catalog", ("sqlite", "etcd", "postgresql", "postgres"))


def _scheme(url: str, setting: str, allowed: tuple[str, ...]) -> str:
    scheme = url.split("://", 1)[0] if "://" in url else url
    if scheme not in allowed:
        raise InvalidArgument(
            f"{setting} {url!r}: expected one of {', '.join(a + '://...' for a in allowed)}"
            f" (or {allowed[0]!r} alone for the data directory)"
        )
    return scheme


def _rest(url: str) -> str:
    return url.split("://", 1)[1] if "://" in url else ""


def open_wal(data_dir: str, storage: Storage) -> Wal:
    if _scheme(storage.wal, "wal", ("disk", "kafka")) == "kafka":
        from wal_kafka import KafkaWal

        bootstrap = _rest(storage.wal).rstrip("/")
        if not bootstrap:
            raise InvalidArgument(f"wal {storage.wal!r}: name the brokers, kafka://HOST:PORT")
        return KafkaWal(
            bootstrap,
            namespace=storage.kafka_namespace,
            append_timeout_s=storage.wal_append_timeout_s,
            delete_records=storage.wal_delete_records,
        )
    from node.wal.disk import DiskWal

    return DiskWal(os.path.join(data_dir, "wal"), sync=storage.wal_sync)


def open_store(data_dir: str, storage: Storage) -> ObjectStore:
    if _scheme(storage.store, "store", ("file", "s3")) == "s3":
        from objectstore.s3 import S3ObjectStore

        parts = urlsplit(storage.store)
        if not parts.netloc:
            raise InvalidArgument(f"store {storage.store!r}: name the bucket, s3://BUCKET/PREFIX")
        return S3ObjectStore(
            parts.netloc,
            prefix=parts.path.strip("/"),
            endpoint_url=storage.s3_endpoint,
            region=storage.s3_region,
        )
    from objectstore.local import LocalObjectStore

    root = _rest(storage.store) or os.path.join(data_dir, "sst")
    return LocalObjectStore(root)


def open_catalog(data_dir: str, storage: Storage) -> StructuredStore:
    scheme = _scheme(storage.catalog, "catalog", ("sqlite", "etcd", "postgresql", "postgres"))
    if scheme == "etcd":
        from gnomon.store.etcd import EtcdStore

        endpoints, _, namespace = _rest(storage.catalog).partition("/")
        if not endpoints:
            raise InvalidArgument(f"catalog {storage.catalog!r}: name etcd, etcd://HOST:PORT")
        return EtcdStore(
            endpoints,
            namespace="/" + (namespace.strip("/") or "gnomon"),
            access=storage.etcd,
        )
    if scheme in ("postgresql", "postgres"):
        from gnomon.store.postgres import PostgresStore

        return PostgresStore(storage.catalog)
    from gnomon.store.sqlite import SqliteStore

    return SqliteStore(_rest(storage.catalog) or os.path.join(data_dir, "meta.db"))


def open_engine(
    data_dir: str,
    storage: Storage,
    *,
    placer: TablePlacer | None = None,
    offload: Offload | None = None,
    **config: object,
) -> Engine:
    """An engine on ``data_dir`` (node-local scratch: staging, cache, and a disk WAL) whose
    durable state lives where ``storage`` says; no shard is open yet."""
    data_dir = os.path.abspath(data_dir)
    os.makedirs(data_dir, exist_ok=True)
    wal = open_wal(data_dir, storage)
    try:
        store = open_store(data_dir, storage)
        meta = open_catalog(data_dir, storage)
    except BaseException:
        wal.close()
        raise
    return Engine(
        EngineConfig(data_dir=data_dir, wal_sync=storage.wal_sync, **config),  # type: ignore[arg-type]
        meta=meta,
        wal=wal,
        store=store,
        placer=placer,
        offload=offload,
    )


def open_standalone(data_dir: str, **config: Any) -> Engine:
    """A standalone engine on ``data_dir`` (catalog, WAL and SSTs all inside it) serving
    every table from its one shard; ``wal_sync`` and the :class:`EngineConfig` fields may
    be given."""
    storage = Storage(wal_sync=config.pop("wal_sync", "always"))
    engine = open_engine(data_dir, storage, placer=None, **config)
    try:
        engine.open_shard(STANDALONE_SHARD)
    except BaseException:
        engine.close()
        raise
    return engine
