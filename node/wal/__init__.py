"""The disk WAL of a standalone node (the contract it implements is :mod:`gnomon.wal`)."""
