"""The Prometheus HTTP endpoints: remote storage, the query API and OTLP metrics."""
