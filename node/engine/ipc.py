"""Arrow IPC streams, written with options made once: pyarrow's default writer set-up reads
environment variables for every stream, which costs as much as writing a small batch."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

_OPTIONS = pa.ipc.IpcWriteOptions()


def ipc_stream(schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> pa.Buffer:
    """One complete IPC stream (schema, ``batches``, end marker)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.RecordBatchStreamWriter(sink, schema, options=_OPTIONS) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue()
