"""The README's Cluster section as a new user follows it: `gnomon dev-cluster` started as
written (ports moved to a free range), the commands shown run against it from another
"terminal", the documented `gnomon node` command joins it as a fourth node once its
placeholders are filled in, the SDK example the README shows writes on through a `kill -9`
of the node leading its table (found as the README says, with `gnomon admin tables` and
`shards`), and one Ctrl-C stops everything."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gnomon_app.devcluster.cluster import S3_ENV
from gnomon_app.devcluster.procs import Server, on_free_ports
from meta.client import MetaClient
from tests.docs.readme import BIN, ROOT, blocks

pytestmark = pytest.mark.integration


def _free_range(span: int = 40) -> int:
    """A base port with ``span`` free ports after it (bounded attempts), below the kernel's
    ephemeral range: the dev cluster's own connections take source ports from that range,
    and one landing in the fixed range would keep a node from listening."""
    rng = random.Random()
    for _ in range(50):
        base = rng.randrange(20_000, 32_000, 100)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + span):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return base
    pytest.fail("no free range of ports")


def _aim(text: str, base: int) -> str:
    text = re.sub(
        r"127\.0\.0\.1:(60\d\d)\b", lambda m: f"127.0.0.1:{base + int(m[1]) - 6000}", text
    )
    text = text.replace("--port-base 6000", f"--port-base {base}")
    return text.replace(".venv/bin/", f"{BIN}/")


def _run(cmd: str) -> str:
    done = subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _bash_block(marker: str) -> list[str]:
    """The commands of the README's one bash block that mentions ``marker``."""
    (found,) = [b.commands() for b in blocks() if b.lang == "bash" and marker in b.text]
    return found


@pytest.mark.long
def test_the_cluster_section(tmp_path: Path) -> None:
    start, tries = _bash_block("gnomon dev-cluster"), _bash_block("curl")
    real, compaction = _bash_block("gnomon node"), _bash_block("gnomon compaction-node")
    failover = _bash_block("examples/sdk_failover.py")
    (command,) = start
    base = _free_range()
    log = tmp_path / "dev-cluster.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", "exec " + _aim(command, base) + f" --data-dir {tmp_path / 'dc'}"],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while "stop: Ctrl-C" not in log.read_text():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        summary = log.read_text()
        assert f"127.0.0.1:{base}" in summary and f"127.0.0.1:{base + 20}" in summary
        # The SDK's line names the example that recovers from a dead node, for these nodes.
        nodes = ",".join(f"127.0.0.1:{base + 20 + i}" for i in range(3))
        assert f"examples/sdk_failover.py --nodes {nodes}" in summary, summary

        answers = [_run(_aim(cmd, base)) for cmd in tries]
        created, inserted, selected, followed = (json.loads(a) for a in answers[:4])
        assert created == {"affected_rows": 0} and inserted == {"affected_rows": 1}
        assert selected["rows"][0]["site"] == "a" and selected["rows"][0]["v"] == 1.5
        # A follower read: the copy may be a moment behind, never ahead.
        assert followed["rows"][0]["n"] in (0, 1)
        shards, nodes = answers[4:]
        assert "leader" in shards.lower() and nodes.count("127.0.0.1:") >= 3

        # Before a node joins and leaves: the example's table would be placed on it.
        _write_through_a_kill(failover, base, proc.pid, log, tmp_path)
        _join_a_fourth_node(real, base, summary, tmp_path)
        _start_a_compaction_node(compaction, base, summary, tmp_path)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0, log.read_text()
    for port in (base, base + 10, base + 20):
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()


def _services(summary: str) -> dict[str, str]:
    """The dev cluster's services as its summary names them (etcd, kafka, s3)."""
    found = {k: re.search(rf"{k}\s+(\S+)", summary) for k in ("etcd", "kafka", "s3")}
    return {k: m[1] for k, m in found.items() if m is not None}


def _join_a_fourth_node(real: list[str], base: int, summary: str, tmp_path: Path) -> None:
    """The documented `gnomon node` command, its placeholders filled with the dev cluster's
    services: it registers and the meta service sees it live."""
    (command,) = real
    services = _services(summary)
    _run_documented(
        command,
        {
            "THIS_HOST:8831": "{grpc}",
            "BROKER:9092": services["kafka"],
            "ETCD:2379": services["etcd"],
        },
        ["--http-port", "--flight-port"],
        base,
        summary,
        tmp_path / "node-4",
    )


def _start_a_compaction_node(
    compaction: list[str], base: int, summary: str, tmp_path: Path
) -> None:
    """The documented `gnomon compaction-node` command (its optional Ray part left out), its
    placeholders filled: it registers with the meta service as a live compaction node."""
    (command,) = compaction
    _run_documented(
        re.sub(r"\s*\[[^\]]*\]", "", command),
        {"THIS_HOST:8841": "{grpc}"},
        ["--http-port"],
        base,
        summary,
        tmp_path / "compaction",
    )


def _run_documented(
    command: str,
    placeholders: dict[str, str],
    port_flags: list[str],
    base: int,
    summary: str,
    data_dir: Path,
) -> None:
    """Start a documented command with its placeholders filled (``{grpc}``: a free port it
    serves gRPC on and registers as; its other ports any free ones), and wait until the meta
    service sees it live."""

    def start(ports: tuple[int, ...]) -> Server:
        filled = command.replace("META1:2390,META2:2390", f"127.0.0.1:{base}").replace(
            "BUCKET/gnomon", "gnomon/readme"
        )
        for placeholder, value in placeholders.items():
            filled = filled.replace(placeholder, value.format(grpc=f"127.0.0.1:{ports[0]}"))
        assert not re.search(r"[A-Z]{4,}", filled.replace("--", "")), filled
        argv = [
            sys.executable,
            "-m",
            "gnomon_app.cli",
            *filled.split()[1:],
            f"--s3-endpoint={_services(summary)['s3']}",
            f"--data-dir={data_dir}",
            f"--grpc-port={ports[0]}",
            *(f"{flag}=0" for flag in port_flags),
        ]
        started, _ = Server.start_gnomon(
            argv, log=data_dir.with_suffix(".log"), env=S3_ENV, cwd=ROOT
        )
        return started

    node, (grpc,) = on_free_ports(start)
    try:
        with MetaClient(f"127.0.0.1:{base}") as client:
            deadline = time.monotonic() + 30
            while not any(n.name == f"127.0.0.1:{grpc}" and n.live for n in client.nodes()):
                assert time.monotonic() < deadline, node.log.read_text()
                time.sleep(0.2)
    finally:
        node.stop()


def _rows(table: str) -> list[list[str]]:
    """The rows of a table `gnomon admin` printed, as their cells."""
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in table.splitlines()]
    return [r for r in rows if r and r[0].isdigit()]


def _admin(what: str, base: int) -> list[list[str]]:
    return _rows(_run(f"{BIN}/gnomon admin {what} --meta 127.0.0.1:{base}"))


def _leader_of(table: str, base: int) -> str:
    """The node leading ``table``'s shard, found as the README says: `gnomon admin tables`
    names the shard (id, name, shard, ...), `gnomon admin shards` its leader (id, leader,
    ...)."""
    (shard,) = [r[2] for r in _admin("tables", base) if r[1] == table]
    (leader,) = [r[1] for r in _admin("shards", base) if r[0] == shard]
    return leader


def _pid_of(parent: int, flag: str) -> int:
    """The pid of the child of ``parent`` (the dev cluster) started with ``flag``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and flag.encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no process of the dev cluster has {flag}")


def _write_through_a_kill(
    failover: list[str], base: int, cluster: int, cluster_log: Path, tmp_path: Path
) -> None:
    """The README's SDK example, run as written, while the node leading its table is killed
    with SIGKILL: the dev cluster tells it, the example builds its client again on another
    node and writes on, every point it counted as written is stored, and the meta service
    moves the dead node's shards to the others."""
    (command,) = failover
    out = tmp_path / "sdk_failover.out"
    with open(out, "wb") as sink:
        example = subprocess.Popen(
            ["bash", "-c", "exec " + _aim(command, base)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + 60
        while not re.search(r"written [1-9]", out.read_text()):
            assert example.poll() is None and time.monotonic() < deadline, out.read_text()
            time.sleep(0.2)
        leader = _leader_of("sdk_failover", base)
        victim = _pid_of(cluster, f"--advertise={leader}")
        os.kill(victim, signal.SIGKILL)
        killed_at = len(out.read_text())
        assert example.wait(timeout=120) == 0, out.read_text()
    finally:
        if example.poll() is None:
            example.kill()
            example.wait(timeout=30)
    printed = out.read_text()
    before, after = printed[:killed_at], printed[killed_at:]
    assert f"write failed (cannot connect to {leader})" in after, printed
    assert "building the client again on " in after, printed
    at_kill = max(int(n.replace(",", "")) for n in re.findall(r"written ([\d,]+)", before))
    summary = re.search(r"wrote ([\d,]+) points in ", after)
    assert summary is not None, printed
    written = int(summary[1].replace(",", ""))
    assert written > at_kill, printed  # it wrote on after the kill
    assert f"(pid {victim}) was killed by SIGKILL" in cluster_log.read_text()
    # Every point it counted as written is stored (one retried after a failed call that was
    # stored after all overwrites itself), read through a node that lives.
    live = next(i for i in range(3) if f"127.0.0.1:{base + 20 + i}" != leader)
    answer = json.loads(
        _run(
            f"curl -s -X POST http://127.0.0.1:{base + 10 + live}/sql -H 'Content-Type: "
            """application/json' -d '{"query": "SELECT count(*) AS n FROM sdk_failover"}'"""
        )
    )
    assert answer["rows"][0]["n"] >= written, (answer, printed)
    # And the dead node's shards reopened on the others.
    deadline = time.monotonic() + 60
    while leader in (r[1] for r in _admin("shards", base)):
        assert time.monotonic() < deadline, _admin("shards", base)
        time.sleep(1)
