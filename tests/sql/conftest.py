from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node.backends import open_standalone
from node.sql.executor import SqlExecutor


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[SqlExecutor]:
    """A standalone engine's executor with table ``t`` (a host tag, a double ``v``, a time
    key ``ts``) of two rows."""
    engine = open_standalone(str(tmp_path / "db"))
    ex = SqlExecutor(engine)
    ex.execute(
        "CREATE TABLE t (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
    )
    ex.execute("INSERT INTO t (host, v, ts) VALUES ('a', 1.0, 1), ('b', 5.0, 2)")
    yield ex
    engine.close()
