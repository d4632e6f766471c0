"""Arrow IPC streams, as cheaply as pyarrow allows: a stream is its schema message, its record
batch messages and an end marker, and without dictionaries those messages are serialized on
their own and joined. A stream writer's set-up (pyarrow's default one reads environment
variables for every stream) costs as much as writing a small batch."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

_OPTIONS = pa.ipc.IpcWriteOptions()
#: The end-of-stream marker: a continuation token and a zero message length.
_END = b"\xff\xff\xff\xff\x00\x00\x00\x00"


def ipc_stream(schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> bytes | pa.Buffer:
    """One complete IPC stream (schema, ``batches``, end marker)."""
    if not any(pa.types.is_dictionary(t) for t in schema.types):
        return b"".join([schema.serialize(), *(b.serialize() for b in batches), _END])
    # Dictionary batches must precede the batches using them: the writer tracks those.
    sink = pa.BufferOutputStream()
    with pa.ipc.RecordBatchStreamWriter(sink, schema, options=_OPTIONS) as writer:
        for batch in batches:
            writer.write_batch(batch)
    return sink.getvalue()
