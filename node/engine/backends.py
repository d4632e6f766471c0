"""Choosing where an engine keeps what must outlive the node: the WAL (local disk or Kafka), the
SSTs (local files or S3) and the catalog and manifests (a SQLite file, which may live outside
the data directory so that another process can open the same tables)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from gnomon.errors import InvalidArgument
from gnomon.store.sqlite import SqliteStore
from node.engine.engine import Engine, EngineConfig
from node.engine.shard import STANDALONE_SHARD
from node.wal.api import Wal
from node.wal.disk import DiskWal
from objectstore.api import ObjectStore
from objectstore.local import LocalObjectStore


@dataclass(frozen=True)
class StorageConfig:
    wal: Literal["disk", "kafka"] = "disk"
    kafka_bootstrap: str | None = None
    kafka_namespace: str = "gnomon"
    store: Literal["local", "s3"] = "local"
    s3_bucket: str | None = None
    s3_prefix: str = ""
    s3_endpoint: str | None = None
    s3_region: str | None = None
    #: SQLite file of the catalog and manifests (default: inside the data directory).
    meta_path: str | None = None

    def __post_init__(self) -> None:
        if self.wal not in ("disk", "kafka"):
            raise InvalidArgument(f"unknown wal {self.wal!r}: disk or kafka")
        if self.store not in ("local", "s3"):
            raise InvalidArgument(f"unknown object store {self.store!r}: local or s3")
        if self.wal == "kafka" and not self.kafka_bootstrap:
            raise InvalidArgument("wal=kafka needs kafka_bootstrap (host:port[,host:port])")
        if self.store == "s3" and not self.s3_bucket:
            raise InvalidArgument("store=s3 needs s3_bucket")


def open_engine(data_dir: str, storage: StorageConfig, **config: Any) -> Engine:
    """An engine on ``data_dir`` (node-local scratch: staging, cache, disk WAL) whose durable
    state lives where ``storage`` says."""
    data_dir = os.path.abspath(data_dir)
    os.makedirs(data_dir, exist_ok=True)
    wal: Wal
    if storage.wal == "kafka":
        from wal_kafka import KafkaWal

        assert storage.kafka_bootstrap is not None
        wal = KafkaWal(storage.kafka_bootstrap, namespace=storage.kafka_namespace)
    else:
        wal = DiskWal(os.path.join(data_dir, "wal"), sync=config.get("wal_sync", "always"))
    store: ObjectStore
    if storage.store == "s3":
        from objectstore.s3 import S3ObjectStore

        assert storage.s3_bucket is not None
        store = S3ObjectStore(
            storage.s3_bucket,
            prefix=storage.s3_prefix,
            endpoint_url=storage.s3_endpoint,
            region=storage.s3_region,
        )
    else:
        store = LocalObjectStore(os.path.join(data_dir, "sst"))
    meta = SqliteStore(storage.meta_path or os.path.join(data_dir, "meta.db"))
    engine = Engine(EngineConfig(data_dir=data_dir, **config), meta=meta, wal=wal, store=store)
    try:
        engine.open_shard(STANDALONE_SHARD)
    except BaseException:
        engine.close()
        raise
    return engine
