"""Hostile gRPC calls of the HoraeDB protocol: WriteRequest and SqlQueryRequest messages with
fuzzed names, indexes, values, timestamps and statements get a status in the answer's
header (200, a 4xx, or HoraeDB's 500 for a statement it cannot plan) or a clean gRPC status,
never an internal error, a hang or a crash."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import given

from gnomon.proto import storage_pb2
from tests.fuzz import strategies as fz
from tests.fuzz.conftest import FUZZ, FUZZER, assert_serving, basic
from tests.server.conftest import Running

pytestmark = pytest.mark.integration

#: gRPC statuses that are a clean refusal (the others, INTERNAL and UNKNOWN above all, are not).
CLEAN_CODES = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.OUT_OF_RANGE,
}
METADATA = (("authorization", basic(*FUZZER)),)


@pytest.fixture(scope="module")
def channel(server: Running) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(server.grpc_endpoint) as ch:
        yield ch


def _call(channel: grpc.Channel, method: str, request: Any, response: Any) -> Any:
    stub: Any = channel.unary_unary(
        f"/storage.StorageService/{method}",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=response.FromString,
    )
    try:
        return stub(request, timeout=60, metadata=METADATA)
    except grpc.RpcError as e:
        assert e.code() in CLEAN_CODES, (e.code(), e.details())
        return None


def _clean_header(header: Any) -> None:
    # HoraeDB answers 500 for planning failures such as an unknown table (so does gnomon, for
    # its SDKs): a failure of the server itself is the one whose text says so.
    assert not header.error.startswith("internal error"), (header.code, header.error)
    assert header.code in (200, 500, 503, 504) or 400 <= header.code < 500, (
        header.code,
        header.error,
    )


@FUZZ
@given(request=fz.write_requests())
def test_writes(channel: grpc.Channel, request: storage_pb2.WriteRequest) -> None:
    resp = _call(channel, "Write", request, storage_pb2.WriteResponse)
    if resp is not None:
        _clean_header(resp.header)


@FUZZ
@given(request=fz.sql_requests())
def test_sql_queries(channel: grpc.Channel, request: storage_pb2.SqlQueryRequest) -> None:
    resp = _call(channel, "SqlQuery", request, storage_pb2.SqlQueryResponse)
    if resp is not None:
        _clean_header(resp.header)


def test_still_serving(server: Running) -> None:
    assert_serving(server)
