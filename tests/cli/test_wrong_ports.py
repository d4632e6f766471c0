"""A port of the wrong kind given to the CLI, as a new user easily does: `gnomon sql` at a
gRPC or Arrow Flight port, `gnomon admin` at a data node's ports. Each says in one line what
it reached and what it wanted, run on a terminal as typed, without a traceback."""

from __future__ import annotations

import re

import pexpect
import pytest

from tests.docs.readme import BIN, ROOT
from tests.server.conftest import Running, gnomon

pytestmark = pytest.mark.integration

__all__ = ["gnomon"]


#: The colours a terminal is sent.
_COLOURS = re.compile(r"\x1b\[[0-9;]*m")


def _typed(*args: str) -> tuple[str, int]:
    """What ``gnomon ARGS`` prints on a terminal (its colours left out), and its exit
    status."""
    term = pexpect.spawn(
        str(BIN / "gnomon"), list(args), cwd=str(ROOT), encoding="utf-8", timeout=60
    )
    try:
        term.expect(pexpect.EOF)
    finally:
        term.close()
    assert term.exitstatus is not None, term.signalstatus
    assert isinstance(term.before, str)
    return _COLOURS.sub("", term.before), term.exitstatus


def _one_line_error(output: str) -> str:
    assert "Traceback" not in output, output
    (line,) = [x for x in output.splitlines() if x.strip()]
    assert line.startswith("error: "), output
    return line


@pytest.mark.parametrize("port", ["grpc_port", "flight_port"])
@pytest.mark.parametrize("interactive", [False, True])
def test_sql_at_an_http2_port(gnomon: Running, port: str, interactive: bool) -> None:
    endpoint = f"127.0.0.1:{getattr(gnomon, port)}"
    statement = [] if interactive else ["-e", "SHOW TABLES"]
    output, status = _typed("sql", "--endpoint", endpoint, *statement)
    line = _one_line_error(output)
    assert status == 1
    assert f"http://{endpoint} answers HTTP/2 (a gRPC or Arrow Flight port)" in line, line
    assert "needs a gnomon server's HTTP port (5440" in line, line


@pytest.mark.parametrize(
    ("port", "reached"),
    [
        ("grpc_port", "answers gRPC but not meta's calls"),
        ("flight_port", "answers gRPC but not meta's calls"),
        ("http_port", "answers HTTP/1.1, not gRPC"),
    ],
)
def test_admin_at_a_data_nodes_port(gnomon: Running, port: str, reached: str) -> None:
    endpoint = f"127.0.0.1:{getattr(gnomon, port)}"
    output, status = _typed("admin", "shards", "--meta", endpoint)
    line = _one_line_error(output)
    assert status == 1
    assert f"{endpoint} is no meta service: it {reached}" in line, line
    assert "--meta takes a meta service's gRPC address (port 2390" in line, line
