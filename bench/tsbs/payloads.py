"""The TSBS cpu-only batches serialised once, before any timing, as the request bodies each
loader sends: HoraeDB ``WriteRequest`` protobufs and InfluxDB line protocol. Building them
outside the timed section keeps client-side encoding out of the ingest figures, as TSBS does
with its pre-generated data files."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench.tsbs.cpu_only import FIELDS, TAGS
from gnomon.proto import storage_pb2

TABLE = "cpu"
DATABASE = "public"


def horaedb_request(batch: pa.Table) -> bytes:
    """One ``WriteRequest`` for ``batch``: one series entry per host (its ten tags once), one
    field group per reading, as the HoraeDB SDKs group points."""
    table = storage_pb2.WriteTableRequest(table=TABLE, tag_names=TAGS, field_names=FIELDS)
    host = batch.column("hostname").to_numpy(zero_copy_only=False)
    order = np.argsort(host, kind="stable")
    _, starts = np.unique(host[order], return_index=True)
    bounds = [*starts.tolist(), len(order)]
    ts = batch.column("timestamp").cast(pa.int64()).to_numpy().tolist()
    values = np.column_stack([batch.column(f).to_numpy() for f in FIELDS]).tolist()
    tags = [batch.column(t).to_pylist() for t in TAGS]
    for lo, hi in itertools.pairwise(bounds):
        rows = order[lo:hi].tolist()
        first = rows[0]
        table.entries.append(
            storage_pb2.WriteSeriesEntry(
                tags=[
                    storage_pb2.Tag(name_index=j, value=storage_pb2.Value(string_value=col[first]))
                    for j, col in enumerate(tags)
                ],
                field_groups=[
                    storage_pb2.FieldGroup(
                        timestamp=ts[i],
                        fields=[
                            storage_pb2.Field(
                                name_index=j, value=storage_pb2.Value(float64_value=v)
                            )
                            for j, v in enumerate(values[i])
                        ],
                    )
                    for i in rows
                ],
            )
        )
    req = storage_pb2.WriteRequest(
        context=storage_pb2.RequestContext(database=DATABASE), table_requests=[table]
    )
    return req.SerializeToString()


def line_protocol(batch: pa.Table) -> bytes:
    """``batch`` as InfluxDB line protocol with millisecond timestamps (``precision=ms``).
    Floats are written in their shortest round-trip form, so every system stores the same
    doubles. No TSBS tag or value needs escaping."""
    parts: list[pa.Array] = [pa.array([TABLE] * batch.num_rows)]
    for t in TAGS:
        parts.append(pc.binary_join_element_wise(f",{t}=", batch.column(t), ""))
    for k, f in enumerate(FIELDS):
        sep = " " if k == 0 else ","
        parts.append(
            pc.binary_join_element_wise(f"{sep}{f}=", batch.column(f).cast(pa.string()), "")
        )
    ts = batch.column("timestamp").cast(pa.int64()).cast(pa.string())
    parts.append(pc.binary_join_element_wise(" ", ts, "\n", ""))
    lines = pc.binary_join_element_wise(*parts, "").combine_chunks()
    # Every line ends in a newline, so the string data buffer is the request body as is.
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset :]
    start, end = int(offsets[0]), int(offsets[len(lines)])
    return lines.buffers()[2].to_pybytes()[start:end]


#: Request bodies by the name loaders ask for them (:attr:`system.Kind.encodings`).
ENCODERS: dict[str, Callable[[pa.Table], bytes]] = {
    "gnomon-grpc": horaedb_request,
    "line-protocol": line_protocol,
}
