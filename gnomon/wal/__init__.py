"""The WAL contract, shared by every WAL backend: the :class:`~gnomon.wal.api.Wal` protocol
(``api.py``), argument checks and region routing (``region_wal.py``) and the group-commit
leader (``group_commit.py``). The disk WAL (``node/wal``) and the Kafka WAL (``wal_kafka``)
import only this package of each other's surroundings."""
