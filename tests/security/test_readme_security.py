"""The README's Security example as a user follows it (paths and ports aside): accounts,
a grant and tokens made with `gnomon admin` on the demo's data directory, the server started
again with `--auth true`, and both documented calls answered for the user, with the revoked
token and missing credentials refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gnomon_app.devcluster.procs import Server
from tests.cli.conftest import start_demo
from tests.docs.readme import BIN, ROOT, blocks

pytestmark = pytest.mark.integration

PASSWORD = "grafana-pw"


def _run(cmd: str) -> str:
    done = subprocess.run(
        ["bash", "-c", cmd], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_the_security_example(tmp_path: Path) -> None:
    (block,) = [b for b in blocks() if b.lang == "shell" and "gnomon admin users" in b.text]
    data = tmp_path / "data"
    start_demo(data, tmp_path / "demo.log").stop()  # the demo's tables, as `make run` leaves
    http = 0
    server: Server | None = None
    tokens: list[str] = []
    revoked = ""
    try:
        for documented in block.commands():
            # The trailing comment goes: the test adds what the comment says a user types.
            cmd = documented.split("  #")[0].strip()
            cmd = cmd.replace("--data-dir data/standalone", f"--data-dir {data}")
            cmd = re.sub(r"^gnomon ", f"{BIN}/gnomon ", cmd)
            if "users create root" in cmd:
                cmd += " --password root-password"  # typed at its prompt otherwise
            cmd = cmd.replace("--password '...'", f"--password {PASSWORD}")
            if " standalone " in cmd:
                server, ports = Server.start_gnomon(
                    [sys.executable, "-m", "gnomon_app.cli", *cmd.split()[1:], "--data-dir",
                     str(data), "--http-port=0", "--grpc-port=0", "--flight-port=0"],
                    log=tmp_path / "server.log",
                    cwd=ROOT,
                    timeout_s=120,
                )  # fmt: skip
                http = ports["http"]
                continue
            if "tokens revoke" in cmd:
                revoked = tokens.pop()
                cmd = cmd.replace("<id>", revoked.removeprefix("gnm_").split(".")[0])
                _run(cmd)
                # The Bearer call below is made with a token still valid.
                tokens.append(
                    _run(cmd.replace(f"revoke {cmd.split()[4]}", "create grafana")).strip()
                )
                continue
            cmd = cmd.replace("127.0.0.1:5440", f"127.0.0.1:{http}")
            cmd = cmd.replace("grafana:...", f"grafana:{PASSWORD}")
            if tokens:
                cmd = cmd.replace("gnm_...", tokens[-1])
            out = _run(cmd)
            if "tokens create" in cmd:
                tokens.append(out.strip())
                assert tokens[-1].startswith("gnm_"), out
            elif cmd.startswith("curl"):
                assert "rows" in json.loads(out), out
        assert server is not None
        assert _status(http, "") == 401
        assert revoked and _status(http, f"Authorization: Bearer {revoked}") == 401
    finally:
        if server is not None:
            server.stop()


def _status(http: int, header: str) -> int:
    """The HTTP status of a query sent with ``header`` (none when empty)."""
    with_header = f"-H '{header}' " if header else ""
    out = _run(
        f"curl -s -o /dev/null -w '%{{http_code}}' {with_header}-X POST "
        f'http://127.0.0.1:{http}/sql -d \'{{"query": "SHOW TABLES"}}\''
    )
    return int(out)
