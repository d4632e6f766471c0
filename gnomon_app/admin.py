"""``gnomon meta`` (run a meta instance) and ``gnomon admin ...`` (inspect and operate a cluster
through its meta service). Registered on the main command group by ``gnomon_app/cli.py``."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Mapping, Sequence
from types import FrameType
from typing import TYPE_CHECKING

import click

from gnomon.config import MetaConfig, options, write_ports_file
from gnomon.errors import GnomonError
from gnomon_app.lazycli import LazyGroup, console

# gRPC, the protos and the meta service are imported by the commands that use them: the
# `gnomon` command lists these commands for every other one (`gnomon --help` too).
if TYPE_CHECKING:
    from gnomon.proto import meta_pb2 as pb
    from meta.client import MetaClient

#: Test seam read by ``gnomon meta``: ``"<kind>:<step>"`` exits the process right after that
#: procedure step commits (see ``meta/runner.py``).
CRASH_ENV = "GNOMON_META_CRASH_AFTER"


@click.command("meta")
@click.option("--config", "config_file", default=None, help="TOML file with a [meta] table.")
@options(MetaConfig)
def meta_command(config_file: str | None, **flags: object) -> None:
    """Run a meta service instance (several may run on one etcd; one leads).

    Settings come from defaults, then --config, then GNOMON_* environment variables, then
    flags."""
    from gnomon.peer import Peer
    from gnomon.tls import ServerTls
    from meta.core import MetaSettings
    from meta.server import MetaServer, ServerConfig

    try:
        cfg = MetaConfig.load(config_file, flags=flags)
        etcd_access = cfg.etcd_access()
        credentials = (
            None
            if cfg.tls_cert is None or cfg.tls_key is None
            else ServerTls(cfg.tls_cert, cfg.tls_key).grpc_credentials()
        )
    except GnomonError as e:
        raise click.UsageError(e.message) from None
    settings = MetaSettings(
        shards=cfg.shards,
        node_ttl_s=cfg.node_ttl_s,
        interval_s=cfg.interval_s,
        followers=cfg.followers,
        crash_after=os.environ.get(CRASH_ENV) or None,
    )
    config = ServerConfig(
        etcd=cfg.etcd,
        etcd_access=etcd_access,
        namespace=cfg.namespace,
        bind=cfg.bind,
        grpc_port=cfg.grpc_port,
        advertise=cfg.advertise,
        election_ttl_s=cfg.election_ttl_s,
        settings=settings,
        peer=Peer(cfg.cluster_secret, cfg.cluster_ca),
        credentials=credentials,
    )
    from gnomon_app.cli import refusing

    server = MetaServer(config)
    # Without etcd an instance could neither lead nor name the leader: refused at once.
    with refusing("meta"):
        port = server.start()
    try:
        write_ports_file(cfg.ports_file, {"grpc": port})
    except BaseException:
        server.stop()
        raise
    console().print(f"meta listening on {cfg.bind}:{port} (etcd {cfg.etcd})")

    def on_signal(signum: int, frame: FrameType | None) -> None:
        server.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.wait()


_META = click.option(
    "--meta", "meta", default="127.0.0.1:2390", show_default=True, help="Meta endpoints."
)


class _AdminGroup(LazyGroup):
    """Gnomon errors of a subcommand become a one-line message and exit status 1."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except GnomonError as e:
            console().print(f"[red]error:[/red] {e.message}", highlight=False, soft_wrap=True)
            ctx.exit(1)


@click.group("admin", cls=_AdminGroup)
def admin() -> None:
    """Inspect and operate a cluster through its meta service."""


def _client(meta: str) -> MetaClient:
    from meta.client import MetaClient

    return MetaClient(meta, retry_for_s=10.0)


def _show(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """A table whose cells are never cut or wrapped (an endpoint split over two lines cannot
    be copied, nor found by a script): wider than the terminal, it is as wide as it needs."""
    from rich.table import Table as RichTable

    out = RichTable(title=title)
    for col in columns:
        out.add_column(col, no_wrap=True)
    cells = [list(row) for row in rows]
    for row in cells:
        out.add_row(*row)
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    # Each cell is padded by one space a side and bounded by one rule.
    needed = sum(widths) + 3 * len(columns) + 1
    from rich.console import Console

    wide = console() if needed <= console().width else Console(width=needed)
    wide.print(out)


@admin.command()
@_META
def nodes(meta: str) -> None:
    """Registered nodes, their kind (data, query, compaction), liveness and load."""
    from meta.wire import NODE_KINDS_BACK

    with _client(meta) as client:
        found = client.nodes()
    _show(
        "nodes",
        (
            "name",
            "kind",
            "live",
            "load",
            "leader shards",
            "follower shards",
            "tables",
            "rows/s",
            "memtable",
            "queries/s",
            "cpu",
        ),
        (
            (
                n.name,
                NODE_KINDS_BACK[n.kind].value,
                "yes" if n.live else "no",
                f"{n.load:.2f}",
                str(n.leader_shards),
                str(n.follower_shards),
                *_figures(n.figures),
            )
            for n in found
        ),
    )


def _figures(figures: Mapping[str, float]) -> tuple[str, ...]:
    """A data node's reported figures as table cells ("-" where it reported none)."""

    def cell(name: str, fmt: str) -> str:
        return format(figures[name], fmt) if name in figures else "-"

    memtable = figures.get("memtable_bytes")
    return (
        cell("tables", ".0f"),
        cell("rows_written_per_s", ",.0f"),
        "-" if memtable is None else f"{memtable / 2**20:,.1f} MiB",
        cell("queries_per_s", ",.1f"),
        "-" if "cpu" not in figures else f"{figures['cpu']:.0%}",
    )


@admin.command("compaction-nodes")
@_META
def compaction_nodes(meta: str) -> None:
    """Compaction nodes: liveness, heartbeat age, load and the tasks each runs now."""
    from gnomon.proto import meta_pb2 as pb
    from node.engine.compaction.client import CompactionClient

    with _client(meta) as client:
        found = [n for n in client.nodes() if n.kind == pb.COMPACTION]
    _show(
        "compaction nodes",
        ("name", "live", "heartbeat", "load", "running", "queued", "slots", "MiB/s", "cpu"),
        (
            (
                n.name,
                "yes" if n.live else "no",
                "-" if n.heartbeat_age_s < 0 else f"{n.heartbeat_age_s:.1f}s ago",
                f"{n.load:.2f}",
                *(_count(n.figures, k) for k in ("running", "queued", "slots")),
                "-"
                if "bytes_per_s" not in n.figures
                else f"{n.figures['bytes_per_s'] / 2**20:,.1f}",
                "-" if "cpu" not in n.figures else f"{n.figures['cpu']:.0%}",
            )
            for n in found
        ),
    )
    rows: list[tuple[str, ...]] = []
    with CompactionClient() as nodes:
        for n in found:
            if not n.live:
                continue
            try:
                status = nodes.status(n.name, timeout_s=3.0)
            except GnomonError as e:
                rows.append((n.name, "-", "-", "unreachable", "-", "-", "-", e.message))
                continue
            rows += [
                (
                    n.name,
                    t.task_id,
                    str(t.table_id),
                    t.state,
                    str(t.inputs),
                    f"{t.input_bytes / 2**20:,.1f}",
                    f"{t.seconds:.1f}",
                    t.requester,
                )
                for t in status.tasks
            ]
    _show(
        "tasks",
        ("node", "task", "table id", "state", "inputs", "input MiB", "seconds", "from"),
        rows,
    )


def _count(figures: Mapping[str, float], name: str) -> str:
    return f"{figures[name]:.0f}" if name in figures else "-"


@admin.command()
@_META
def shards(meta: str) -> None:
    """Shards: leader, followers (with how far each is behind), epoch, status (pinned: an
    operator chose its leader, rebalancing leaves it there), tables and load."""
    from meta.model import FOLLOWER_LAG

    with _client(meta) as client:
        found = client.shards()
        figures: dict[str, Mapping[str, float]] = {n.name: n.figures for n in client.nodes()}

    def follower(shard_id: int, name: str) -> str:
        lag = figures.get(name, {}).get(f"{FOLLOWER_LAG}{shard_id}")
        return name if lag is None else f"{name} ({lag:.1f}s behind)"

    _show(
        "shards",
        ("id", "leader", "followers", "epoch", "status", "tables", "load"),
        (
            (
                str(s.id),
                s.leader or "-",
                ",".join(follower(s.id, f) for f in s.followers) or "-",
                str(s.epoch),
                f"{s.status}, pinned" if s.pinned else s.status,
                str(s.tables),
                f"{s.load:.2f}",
            )
            for s in found
        ),
    )


@admin.command()
@_META
def tables(meta: str) -> None:
    """Tables and the shards they live in."""
    with _client(meta) as client:
        found = client.tables()
    _show(
        "tables",
        ("id", "name", "shard", "partitions", "parent"),
        (
            (
                str(t.id),
                t.name,
                str(t.shard_id) if t.HasField("shard_id") else "-",
                str(t.partitions or "-"),
                str(t.parent_id) if t.HasField("parent_id") else "-",
            )
            for t in found
        ),
    )


def _finish(client: MetaClient, started: pb.ProcedureInfo) -> None:
    """Wait for a procedure and print how it ended."""
    with console().status(f"procedure {started.id} ({started.kind}) running"):
        info = client.wait_procedure(started.id, timeout_s=120)
    console().print(f"procedure {info.id} ({info.kind}): {info.status} {info.error}".rstrip())
    if info.status != "done":
        raise SystemExit(1)


@admin.command()
@_META
@click.argument("shard_id", type=int)
@click.argument("target")
def migrate(meta: str, shard_id: int, target: str) -> None:
    """Move the leadership of SHARD_ID to the data node TARGET."""
    with _client(meta) as client:
        _finish(client, client.migrate(shard_id, target))


@admin.command()
@_META
@click.argument("shard_id", type=int)
def split(meta: str, shard_id: int) -> None:
    """Split SHARD_ID: half its tables go to a new shard on the same nodes."""
    with _client(meta) as client:
        _finish(client, client.split(shard_id))


@admin.command()
@_META
@click.argument("shard_id", type=int)
@click.argument("other_id", type=int)
def merge(meta: str, shard_id: int, other_id: int) -> None:
    """Merge OTHER_ID into SHARD_ID (OTHER_ID is dropped)."""
    with _client(meta) as client:
        _finish(client, client.merge(shard_id, other_id))


@admin.command("add-follower")
@_META
@click.argument("shard_id", type=int)
@click.argument("node")
def add_follower(meta: str, shard_id: int, node: str) -> None:
    """Have the data node NODE follow SHARD_ID: it reads the leader's log into a read-only copy,
    serves follower reads, and takes over fast if the leader fails."""
    with _client(meta) as client:
        _finish(client, client.add_follower(shard_id, node))


@admin.command("switch-role")
@_META
@click.argument("shard_id", type=int)
@click.argument("new_leader")
def switch_role(meta: str, shard_id: int, new_leader: str) -> None:
    """Make the follower NEW_LEADER lead SHARD_ID."""
    with _client(meta) as client:
        _finish(client, client.switch_role(shard_id, new_leader))
