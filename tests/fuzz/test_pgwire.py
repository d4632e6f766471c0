"""Hostile PostgreSQL protocol input: messages of every kind with fuzzed bodies, cut ones,
bad lengths, messages out of order and fuzzed statements, after an authenticated startup or
instead of one, and fuzzed SCRAM exchanges. The server answers with errors or closes the
connection, never hangs, logs no failure of its own and keeps serving."""

from __future__ import annotations

import socket
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.security import scram
from tests.fuzz import strategies as fz
from tests.fuzz.conftest import FUZZ, FUZZER, assert_serving
from tests.pgwire.wire import (
    SYNC,
    WireClient,
    bind,
    client_first_bare,
    cstr,
    execute,
    frame,
    parse,
    startup,
)
from tests.server.conftest import Running

pytestmark = pytest.mark.unit

_KINDS = st.sampled_from([b"P", b"B", b"D", b"E", b"C", b"S", b"H", b"Q", b"F", b"d", b"?"])
_LENGTHS = st.sampled_from([-1, 0, 3, 2**31 - 1, 2**30, 64 * 1024**2 + 1])
_STATEMENT = st.one_of(fz.sql_statements, st.just("SELECT $1"), st.just("SELECT v FROM fuzz_seed"))


@st.composite
def _message(draw: st.DrawFn) -> bytes:
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return frame(draw(_KINDS), draw(st.binary(max_size=64)))
    if choice == 1:
        return parse(draw(_STATEMENT), draw(st.sampled_from(["", "s"])))
    if choice == 2:
        params = tuple(draw(st.lists(st.binary(max_size=8), max_size=3)))
        return bind(draw(st.sampled_from(["", "p"])), draw(st.sampled_from(["", "s"])), params)
    if choice == 3:
        return execute(draw(st.sampled_from(["", "p"])), draw(st.integers(-2, 3)))
    if choice == 4:
        whole = frame(draw(_KINDS), draw(st.binary(max_size=32)))
        return whole[: draw(st.integers(0, len(whole)))]
    return draw(_KINDS) + struct.pack(">i", draw(_LENGTHS)) + draw(st.binary(max_size=16))


_SESSIONS = st.lists(_message(), min_size=1, max_size=8)


def _closes(sock: socket.socket) -> None:
    """Send the end of input and read until the server closes: no hang."""
    sock.shutdown(socket.SHUT_WR)
    while sock.recv(65536):
        pass


@pytest.mark.long
@FUZZ
@given(messages=_SESSIONS)
def test_hostile_messages_after_startup(
    server: Running, pg_port: int, messages: list[bytes]
) -> None:
    client = WireClient(pg_port, *FUZZER)
    try:
        client.send(*messages, SYNC, frame(b"Q", cstr("SELECT 1")))
        _closes(client.sock)
    finally:
        client.close()
    assert_serving(server)


@FUZZ
@given(
    head=st.one_of(
        st.binary(max_size=40),
        st.builds(lambda n, b: struct.pack(">i", n) + b, _LENGTHS, st.binary(max_size=16)),
        st.builds(lambda b: startup(FUZZER[0])[: len(b)], st.binary(max_size=40)),
        st.builds(lambda n: struct.pack(">ii", 8, n), st.integers(-(2**31), 2**31 - 1)),
    )
)
@pytest.mark.long
def test_hostile_startup(server: Running, pg_port: int, head: bytes) -> None:
    with socket.create_connection(("127.0.0.1", pg_port), timeout=30) as sock:
        sock.sendall(head)
        _closes(sock)
    assert_serving(server)


_CLIENT_FIRST = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda gs2, bare: (gs2 + bare).encode(), st.text(max_size=24), st.text(max_size=40)),
    st.builds(lambda gs2: (gs2 + client_first_bare()).encode(), st.sampled_from(["n,,", "y,,"])),
)


@FUZZ
@given(
    mechanism=st.sampled_from([scram.MECHANISM, f"{scram.MECHANISM}-PLUS", ""]),
    first=_CLIENT_FIRST,
    declared=st.one_of(st.none(), st.integers(-2, 80)),
    final=st.one_of(st.binary(max_size=96), st.text(max_size=96).map(str.encode)),
)
@pytest.mark.long
def test_hostile_scram_exchange(
    server: Running, pg_port: int, mechanism: str, first: bytes, declared: int | None, final: bytes
) -> None:
    client = WireClient(pg_port, FUZZER[0], login=False)
    length = len(first) if declared is None else declared
    try:
        client.send(
            frame(b"p", cstr(mechanism) + struct.pack(">i", length) + first), frame(b"p", final)
        )
        _closes(client.sock)
    finally:
        client.close()
    assert_serving(server)
