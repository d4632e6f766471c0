"""Arrow IPC streams as the engine writes them (WAL records, query answers): what the
standard stream writer would write, read back whole, with or without dictionaries."""

from __future__ import annotations

import pyarrow as pa
import pytest

from node.engine.ipc import ipc_stream

pytestmark = pytest.mark.unit


def _writer_stream(schema: pa.Schema, batches: list[pa.RecordBatch]) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        for b in batches:
            writer.write_batch(b)
    return bytes(sink.getvalue())


PLAIN = pa.table(
    {"ts": pa.array([1, 2, 3], pa.timestamp("ms")), "v": [0.5, None, 2.0], "s": ["a", "b", "c"]}
).replace_schema_metadata({"op": "put"})
DICTIONARY = pa.table({"host": pa.array(["h1", "h2", "h1"]).dictionary_encode(), "v": [1, 2, 3]})


@pytest.mark.parametrize("table", [PLAIN, DICTIONARY], ids=["plain", "dictionary"])
@pytest.mark.parametrize("chunks", [0, 1, 3])
def test_stream_reads_back_as_written(table: pa.Table, chunks: int) -> None:
    batches = [table.slice(i, 1).to_batches()[0] for i in range(chunks)]
    data = ipc_stream(table.schema, batches)
    back = pa.ipc.open_stream(data).read_all()
    assert back.schema == table.schema and back.schema.metadata == table.schema.metadata
    assert back.equals(table.slice(0, chunks))
    if not pa.types.is_dictionary(table.schema.field(0).type):
        assert bytes(data) == _writer_stream(table.schema, batches)
