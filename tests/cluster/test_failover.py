"""Failover on a running cluster (real etcd, broker, S3 server, meta and ``gnomon node``
processes): data nodes SIGKILLed and restarted under a steady writer, a node paused past its
lease and resumed, the leading meta instance killed in the middle of a failover.

The writer is the published HoraeDB SDK in Direct mode, in a subprocess, writing APPEND rows
that each carry a unique id and printing every acknowledged batch's ids as soon as the ack
arrives. A refused write is retried with fresh ids, never the same ones: a write that failed
may still have reached the log (and then the new owner replays it), so resending its ids
could legitimately store them twice. The check after each failover is the contract: every
acknowledged id is stored exactly once; unacknowledged ids may or may not be.

``GNOMON_KILLS`` sets how many kills the kill test makes (default 10; 200 for a long run).

Every wait is for a condition, bounded by what it takes by the cluster's settings (the lease
below, meta's timers, the writer's request timeout) with the work in it stretched by
``SLOWDOWN`` (``testkit/wait.py``): the tests pass on a machine busy with other jobs.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from gnomon.proto import storage_pb2
from gnomon_app.admin import CRASH_ENV
from gnomon_app.devcluster.cluster import DevCluster, settle_timeout_s
from meta.runner import CRASH_EXIT_CODE
from node.cluster.forward import FORWARDED_FROM
from testkit.sdk import PRELUDE
from testkit.wait import START_S, bound, wait_until
from tests.cluster.support import http_sql, post

pytestmark = pytest.mark.cluster

KILLS = int(os.environ.get("GNOMON_KILLS", "10"))
#: The shortest lease a node may ask for (``--lease-ttl-s``): failover shows quickly.
LEASE_TTL_S = 3
NODES = 3
#: How long a failover may take with the lease above: the cluster settled again, and a table
#: read through a live node.
SETTLE_S = settle_timeout_s(LEASE_TTL_S)
#: The writer's request timeout (the SDK's ``timeout_ms`` below) and its pause after a
#: refused batch, before it starts over from the next entry node.
WRITE_TIMEOUT_S = 5.0
RETRY_PAUSE_S = 0.2
#: How long the writer may take to get batches acknowledged: its start (a Python process
#: importing the SDK, the work of a server's start), then a timed-out request through each
#: entry node in turn after a failover.
PROGRESS_S = bound(START_S) + NODES * (WRITE_TIMEOUT_S + RETRY_PAUSE_S)
T0 = 1_700_000_000_000

WRITER = """
TABLES = {tables!r}
STOP = {stop!r}
BATCH = {batch}


def build(endpoint):
    b = Builder(endpoint, Mode.{mode})
    b.set_default_database("public")
    return b.build()


async def run():
    ctx = RpcContext()
    ctx.timeout_ms = {timeout_ms}
    entry = 0
    c = build(ENDPOINTS[entry])
    next_id = 0
    k = 0
    while not os.path.exists(STOP):
        table = TABLES[k % len(TABLES)]
        k += 1
        ids = list(range(next_id, next_id + BATCH))
        next_id += BATCH
        # Four tag values, so that a partition table's rows reach each of its sub-tables.
        pts = [point(table, {t0} + i, {{"w": V().string(f"w{{i % 4}}")}}, {{"id": V().int64(i)}})
               for i in ids]
        try:
            ok = await write(c, ctx, pts) == [len(ids), 0]
            err = None if ok else "partial"
        except Exception as e:
            ok, err = False, str(e)[:300]
        if ok:
            print(json.dumps({{"table": table, "ids": ids}}), flush=True)
            continue
        print(json.dumps({{"table": table, "error": err}}), flush=True)
        # The SDK keeps a route to a dead node until that node answers again: start over
        # from another entry node, as an application would after repeated failures.
        entry += 1
        c = build(ENDPOINTS[entry % len(ENDPOINTS)])
        await asyncio.sleep({pause_s})


asyncio.run(run())
sys.stdout.flush()
os._exit(0)
"""


class Writer:
    """The SDK writer subprocess; a thread collects the acknowledged ids it prints."""

    def __init__(
        self,
        cluster: DevCluster,
        tables: list[str],
        tmp: Path,
        batch: int = 20,
        entry: int = 0,
        mode: str = "Direct",
        endpoints: list[str] | None = None,
    ) -> None:
        """``entry``: the node the SDK is built on first (then the next ones, in turn);
        ``mode``: the SDK's ``Direct`` (to each table's owner) or ``Proxy`` (all through the
        entry node); ``endpoints``: the nodes it may enter at (the data nodes when None)."""
        self._stop_file = tmp / "writer.stop"
        script = tmp / "writer.py"
        endpoints = endpoints or [n.grpc for n in cluster.node_endpoints]
        endpoints = endpoints[entry:] + endpoints[:entry]
        script.write_text(
            f"ENDPOINTS = {endpoints!r}\nENDPOINT = ENDPOINTS[0]\n"
            + PRELUDE
            + WRITER.format(
                tables=tables,
                stop=str(self._stop_file),
                batch=batch,
                t0=T0,
                mode=mode,
                timeout_ms=round(WRITE_TIMEOUT_S * 1000),
                pause_s=RETRY_PAUSE_S,
            )
        )
        self.acked: dict[str, list[int]] = {t: [] for t in tables}
        self.batches = 0
        self.errors: list[str] = []
        self._cond = threading.Condition()
        self._stderr = (tmp / "writer.err").open("w")
        self._proc = subprocess.Popen(
            [sys.executable, str(script)],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            msg = json.loads(line)
            with self._cond:
                if "ids" in msg:
                    self.acked[msg["table"]].extend(msg["ids"])
                    self.batches += 1
                else:
                    self.errors.append(msg["error"])
                self._cond.notify_all()

    def snapshot(self) -> dict[str, list[int]]:
        with self._cond:
            return {t: list(ids) for t, ids in self.acked.items()}

    def wait_progress(self, batches: int, timeout_s: float = PROGRESS_S) -> None:
        """Until ``batches`` more batches than now are acknowledged, for every table."""
        with self._cond:
            target = {t: len(ids) for t, ids in self.acked.items()}
            need = batches

            def done() -> bool:
                return all(len(self.acked[t]) >= n + need for t, n in target.items())

            if not self._cond.wait_for(done, timeout=timeout_s):
                raise AssertionError(
                    f"the writer made no progress in {timeout_s}s on some table; last errors: "
                    f"{self.errors[-3:]}"
                )

    def stop(self) -> None:
        self._stop_file.touch()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._reader.join(timeout=10)
        self._stderr.close()


def stored_ids(
    cluster: DevCluster,
    table: str,
    *,
    down: Collection[int] = (),
    read: str = "leader",
    first: Collection[int] = (),
) -> Counter[int]:
    """How many times each id is stored in ``table``, read by SQL through some live node
    (``read``: from the leader's copy or a follower's; the nodes ``first`` before the others),
    each in turn until one answers within SETTLE_S."""
    last: Any = None
    deadline = time.monotonic() + SETTLE_S
    query = json.dumps({"query": f"SELECT id FROM {table}", "read": read}).encode()
    order = sorted(range(len(cluster.node_endpoints)), key=lambda i: i not in first)
    live = [cluster.node_endpoints[i] for i in order if i not in down]
    attempt = 0
    while True:
        try:
            status, body = post(live[attempt % len(live)].http, "/sql", query)
        except OSError as e:
            status, body = 0, str(e)
        if status == 200:
            return Counter(int(r["id"]) for r in body["rows"])
        last = (status, body)
        if time.monotonic() > deadline:
            raise AssertionError(f"reading {table} failed for {SETTLE_S:.0f}s: {last}")
        attempt += 1
        time.sleep(0.2)


def assert_acked_once(
    cluster: DevCluster, acked: dict[str, list[int]], *, down: Collection[int] = ()
) -> None:
    for table, ids in acked.items():
        stored = stored_ids(cluster, table, down=down)
        lost = [i for i in ids if stored[i] == 0]
        doubled = [i for i in ids if stored[i] > 1]
        assert not lost, f"{table}: {len(lost)} acknowledged ids lost, e.g. {lost[:10]}"
        assert not doubled, f"{table}: acknowledged ids stored twice, e.g. {doubled[:10]}"


def create_tables(
    cluster: DevCluster,
    tables: list[str],
    *,
    through: int = 0,
    mode: str = "APPEND",
    partitions: int = 0,
) -> None:
    """Tables of the writer's rows, in update ``mode``; partition tables over ``partitions``
    sub-tables when not 0."""
    partitioned = f" PARTITION BY KEY(w) PARTITIONS {partitions}" if partitions else ""
    for table in tables:
        status, body = http_sql(
            cluster.node_endpoints[through].http,
            f"CREATE TABLE {table} (w string TAG, id bigint, ts timestamp NOT NULL, "
            f"TIMESTAMP KEY(ts)){partitioned} WITH (update_mode='{mode}')",
        )
        assert status == 200, body


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    with DevCluster(
        tmp_path / "cluster", nodes=NODES, shards=6, lease_ttl_s=LEASE_TTL_S
    ) as running:
        yield running


#: What one round of the kill test may take: the failover and the restart each settled, and
#: the restarted node's start (the writer's progress and the reads take little beside them).
KILL_S = 2 * SETTLE_S + bound(START_S)
#: A cluster's start: etcd, the broker, the S3 server, meta and the nodes one after another.
START_CLUSTER_S = (4 + NODES) * bound(START_S)


@pytest.mark.long
@pytest.mark.timeout(START_CLUSTER_S + PROGRESS_S + KILLS * KILL_S)
def test_kill_nodes_under_a_writer_loses_no_acknowledged_row(
    cluster: DevCluster, tmp_path: Path
) -> None:
    tables = [f"fo_kill_{i}" for i in range(4)]
    create_tables(cluster, tables)
    started = time.monotonic()
    writer = Writer(cluster, tables, tmp_path)
    try:
        writer.wait_progress(3)
        for k in range(KILLS):
            # The owner of a table being written, so every kill interrupts acknowledged work.
            victim = cluster.leader_of(tables[k % len(tables)])
            cluster.kill_node(victim)
            cluster.wait_settled(without={cluster.node_endpoints[victim].grpc}, timeout_s=SETTLE_S)
            writer.wait_progress(2)
            assert_acked_once(cluster, writer.snapshot(), down={victim})
            cluster.start_node(victim)
            cluster.wait_settled(timeout_s=SETTLE_S)
    finally:
        writer.stop()
    assert_acked_once(cluster, writer.snapshot())
    print(
        f"\n{KILLS} kills, {writer.batches} batches acknowledged, {len(writer.errors)} refused, "
        f"in {time.monotonic() - started:.0f}s"
    )


def grpc_write(
    endpoint: str, table: str, ids: list[int], *, forwarded: bool = False
) -> tuple[int, str]:
    """One gRPC Write of rows ``ids`` to ``endpoint``: (header code, error); with
    ``forwarded``, marked as already forwarded so the node must answer it itself."""
    req = storage_pb2.WriteRequest()
    req.context.database = "public"
    t = req.table_requests.add(table=table, tag_names=["w"], field_names=["id"])
    entry = t.entries.add()
    entry.tags.add(name_index=0).value.string_value = "w"
    for i in ids:
        point = entry.field_groups.add(timestamp=T0 + i)
        point.fields.add(name_index=0).value.int64_value = i
    metadata = ((FORWARDED_FROM, "127.0.0.1:1"),) if forwarded else ()
    with grpc.insecure_channel(endpoint) as channel:
        try:
            resp = channel.unary_unary(
                "/storage.StorageService/Write",
                request_serializer=storage_pb2.WriteRequest.SerializeToString,
                response_deserializer=storage_pb2.WriteResponse.FromString,
            )(req, timeout=10, metadata=metadata)
        except grpc.RpcError as e:
            return -1, f"{e.code().name} {e.details()}"
    return resp.header.code, resp.header.error


class Rows:
    """Ids written by the test itself, by outcome."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.acked: list[int] = []
        self.refused: list[int] = []
        self._next = 1_000_000

    def write(self, endpoint: str, *, forwarded: bool = False, n: int = 10) -> tuple[int, str]:
        ids = list(range(self._next, self._next + n))
        self._next += n
        code, error = grpc_write(endpoint, self.table, ids, forwarded=forwarded)
        (self.acked if code == 200 else self.refused).extend(ids)
        return code, error


def test_paused_owner_acknowledges_nothing_after_losing_its_shard(cluster: DevCluster) -> None:
    table = "fo_pause"
    create_tables(cluster, [table])
    rows = Rows(table)
    old = cluster.leader_of(table)
    old_endpoint = cluster.node_endpoints[old].grpc
    for _ in range(5):
        assert rows.write(old_endpoint)[0] == 200
    cluster.pause_node(old)
    try:
        cluster.wait_settled(without={old_endpoint}, timeout_s=SETTLE_S)
        new = cluster.leader_of(table)
        assert new != old
        new_endpoint = cluster.node_endpoints[new].grpc
        for _ in range(5):
            code, error = rows.write(new_endpoint)
            assert code == 200, error
    finally:
        cluster.resume_node(old)
    # At once, before it can have heard of the failover: the woken node must refuse (it
    # cannot forward a request marked as forwarded), whatever its lease or keeper think.
    answers = [rows.write(old_endpoint, forwarded=True) for _ in range(40)]
    acked_by_deposed = [a for a in answers if a[0] == 200]
    # Unless a rebalance gave the woken node its shard back meanwhile (a busy machine slows
    # the writes enough): then it owns it rightly, at a newer epoch, and the rows it took
    # are checked with the others below.
    if cluster.leader_of(table) != old:
        assert not acked_by_deposed, "the deposed owner acknowledged writes for a shard it lost"
    # Read through it at once too: its copy lacks the rows the new owner acknowledged, so
    # it answers only once it knows where the table is (the read goes there), never stale.
    status, body = http_sql(cluster.node_endpoints[old].http, f"SELECT id FROM {table}")
    assert status == 200, body
    missing = set(rows.acked) - {int(r["id"]) for r in body["rows"]}
    assert not missing, f"a read through the woken node missed {sorted(missing)[:10]}"
    # Unmarked, it may forward to the new owner (then the rows are acknowledged by it).
    for _ in range(5):
        rows.write(old_endpoint)
    cluster.wait_settled(timeout_s=SETTLE_S)
    wait_until(
        "writes through the new owner",
        lambda: rows.write(new_endpoint)[0] == 200,
        timeout_s=SETTLE_S,
    )
    # Exactly the acknowledged rows, once each: the deposed owner's memtable (rows it
    # acknowledged before the pause, replayed by the new owner from the log) was flushed when
    # it closed the shard, and that flush must not have committed (the epoch fence); the
    # writes it refused must not have reached the data either.
    stored = stored_ids(cluster, table)
    assert stored == Counter(rows.acked), (
        f"lost {sorted(set(rows.acked) - set(stored))[:10]}, "
        f"doubled {[i for i, n in stored.items() if n > 1][:10]}, "
        f"refused but stored {sorted(set(stored) & set(rows.refused))[:10]}"
    )


def _two_metas(root: Path, **meta_env: str) -> DevCluster:
    return DevCluster(
        root, nodes=NODES, metas=2, shards=6, lease_ttl_s=LEASE_TTL_S, meta_env=meta_env
    )


def test_meta_leader_killed_right_after_a_data_node(tmp_path: Path) -> None:
    """SIGKILL a data node, then at once the leading meta (the failover planned, or about to
    be): the other meta instance takes over and fails the node's shards over."""
    with _two_metas(tmp_path / "cluster") as cluster:
        tables = [f"fo_meta_{i}" for i in range(3)]
        create_tables(cluster, tables)
        writer = Writer(cluster, tables, tmp_path)
        try:
            writer.wait_progress(3)
            victim = cluster.leader_of(tables[0])
            leading = cluster.meta_leader()
            cluster.kill_node(victim)
            cluster.kill_meta(leading)
            _survive(cluster, writer, victim, leading)
        finally:
            writer.stop()
        assert_acked_once(cluster, writer.snapshot())


@pytest.mark.long
def test_meta_leader_dies_in_the_middle_of_a_failover(tmp_path: Path) -> None:
    """The leading meta exits abruptly between two steps of the failover procedure (the
    dead node's shards locked and given new leaders, not yet released): the other instance
    must take the procedure over and finish it."""
    crash = {CRASH_ENV: "failover:1"}
    with _two_metas(tmp_path / "cluster", **crash) as cluster:
        tables = [f"fo_mid_{i}" for i in range(3)]
        create_tables(cluster, tables)
        writer = Writer(cluster, tables, tmp_path)
        try:
            writer.wait_progress(3)
            victim = cluster.leader_of(tables[0])
            leading = cluster.meta_leader()
            meta = cluster.processes[f"meta-{leading}"].proc
            cluster.kill_node(victim)
            assert meta.wait(timeout=SETTLE_S) == CRASH_EXIT_CODE
            cluster.meta_env = {}
            _survive(cluster, writer, victim, leading)
        finally:
            writer.stop()
        assert_acked_once(cluster, writer.snapshot())


def _survive(cluster: DevCluster, writer: Writer, victim: int, leading: int) -> None:
    """After data node ``victim`` and meta ``leading`` died: the other meta finishes the
    failover, writes resume, nothing acknowledged is lost; then both come back."""
    cluster.wait_settled(without={cluster.node_endpoints[victim].grpc}, timeout_s=SETTLE_S)
    assert cluster.meta_leader() != leading
    writer.wait_progress(3)
    assert_acked_once(cluster, writer.snapshot(), down={victim})
    # Another process took one of the dead node's ports: it comes back on new ones but for
    # its gRPC port, which names it in the cluster.
    taken = cluster.node_endpoints[victim].pg
    host, port = taken.rsplit(":", 1)
    with socket.create_server((host, int(port))):
        cluster.start_node(victim)
    assert cluster.node_endpoints[victim].pg != taken
    cluster.start_meta(leading)
    cluster.wait_settled(timeout_s=SETTLE_S)
    writer.wait_progress(2)
