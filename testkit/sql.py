"""A SQL executor over a fresh engine holding one table, its rows both in an SST and in the
memtable."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from node.backends import open_standalone
from node.sql.executor import SqlExecutor


@contextmanager
def executor_over(
    path: Path, ddl: str, insert: str, flushed: Sequence[str], fresh: str
) -> Iterator[SqlExecutor]:
    """An executor over an engine at ``path`` with the table of ``ddl``: the ``flushed``
    rows (SQL tuples) written by ``insert`` (``INSERT INTO t (...) VALUES``) and flushed to
    an SST, then the ``fresh`` one left in the memtable."""
    engine = open_standalone(str(path), compaction_threads=0, gc_interval_s=0)
    try:
        ex = SqlExecutor(engine)
        ex.execute(ddl)
        ex.execute(f"{insert} {', '.join(flushed)}")
        engine.flush()
        ex.execute(f"{insert} {fresh}")
        yield ex
    finally:
        engine.close()
