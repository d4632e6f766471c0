"""Prometheus remote storage (remote write 1.0, remote read) and the Prometheus query API with
PromQL, over gnomon's tables: one table per metric (see README.md)."""
