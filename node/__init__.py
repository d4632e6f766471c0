"""The data node: servers, SQL and ingest, the table engine, its WAL and its part in a cluster."""
