"""The data node: table engine, WAL, and (later) its servers."""
