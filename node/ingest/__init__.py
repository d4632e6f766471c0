"""Ingestion: write requests of the HoraeDB protocol and InfluxDB line protocol decoded into
columnar rows, and written to the engine with tables and columns created on first use."""
