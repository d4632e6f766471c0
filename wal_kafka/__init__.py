"""WAL regions on Kafka: the same :class:`gnomon.wal.api.Wal` as the disk WAL (see README.md)."""

from .region import RecoveryInfo
from .wal import KafkaWal

__all__ = ["KafkaWal", "RecoveryInfo"]
