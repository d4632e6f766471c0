"""A real etcd for integration tests and benchmarks (the one `gnomon dev-cluster` runs)."""

from gnomon_app.devcluster.etcd import ETCD, EtcdServer

__all__ = ["ETCD", "EtcdServer"]
