"""The ``gnomon`` command line."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

import click

from gnomon import __version__
from gnomon.config import (
    LOG_LEVELS,
    CompactionNodeConfig,
    NodeConfig,
    RoleConfig,
    ServerConfig,
    StandaloneConfig,
    check_log_level,
    options,
)
from gnomon.errors import GnomonError
from gnomon.stopping import stop_signals
from gnomon_app.lazycli import LazyGroup, console
from gnomon_app.shell import DEFAULT_MAX_ROWS
from gnomon_app.without_pandas import keep_pandas_out

# What a command needs beyond the CLI itself (Arrow, DataFusion, gRPC, the engine) is
# imported when it runs: every command, `gnomon --help` among them, would wait for it.


@click.group()
@click.version_option(__version__, prog_name="gnomon")
@click.option(
    "--log-level",
    default=None,
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    help="Level of the JSON log lines on stderr [default: GNOMON_LOG_LEVEL, then the "
    "config file's log_level for servers, then INFO for servers and WARNING otherwise].",
)
def main(log_level: str | None) -> None:
    """gnomon: a distributed time-series and analytics database."""
    from node.server import logfmt

    try:
        level = check_log_level(
            log_level or os.environ.get("GNOMON_LOG_LEVEL", "WARNING"), source="GNOMON_LOG_LEVEL"
        )
    except GnomonError as e:
        raise click.UsageError(e.message) from None
    logfmt.configure(level)


def _log_level_flag() -> str | None:
    """The group's ``--log-level``, which a server command ranks above its other settings."""
    level: str | None = click.get_current_context().find_root().params.get("log_level")
    return level


if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from gnomon_app.devcluster.cluster import DevCluster, NodeEndpoints
    from node.engine.engine import Engine
    from node.server.placement import Placement
    from node.server.standalone import Standalone

C = TypeVar("C", bound=RoleConfig)


def _demo_batch(hosts: int, start_ms: int, steps: int, rng: np.random.Generator) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    n = hosts * steps
    host_idx = pa.array(np.tile(np.arange(hosts), steps), pa.int64())
    ts = start_ms + np.repeat(np.arange(steps), hosts) * 10_000
    return pa.table(
        {
            "hostname": pa.array([f"host_{i}" for i in range(hosts)]).take(host_idx),
            "region": pa.array(["eu-west-1", "us-east-1", "ap-south-1"]).take(
                pa.array(np.tile(np.arange(hosts) % 3, steps), pa.int64())
            ),
            "usage_user": pa.array(rng.uniform(0, 100, n)),
            "usage_system": pa.array(rng.uniform(0, 100, n)),
            "ts": pa.array(ts, pa.timestamp("ms")),
        }
    )


def _has_rows(engine: Engine, table: str) -> bool:
    return any(b.num_rows for b in engine.scan(table, columns=["ts"]))


def _abort_cut_short_loads(engine: Engine) -> None:
    """Cancel the revisions of loads that never committed: left reserved, they would hold the
    next load's revision back (revisions publish in order) until their lease ran out."""
    from node.engine.revisions import RevisionState

    for rev in engine.revisions.open_revisions(DEMO_TABLE):
        if rev.owner == _DEMO_OWNER and rev.state is RevisionState.RESERVED:
            engine.revisions.abort(DEMO_TABLE, rev.revision)


def _load_demo(engine: Engine, hosts: int, hours: int) -> None:
    """Load ``hours`` of 10 s readings for ``hosts`` hosts into the demo table, with a progress
    bar, unless it already holds rows: the demo never replaces data. The rows are staged under
    one revision, so a load cut short (Ctrl-C) leaves the table empty, to be loaded next time,
    rather than half full."""
    import numpy as np
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from node.engine.revisions import RevisionState
    from node.engine.schema import Column, ColumnType, Schema

    if DEMO_TABLE in engine.list_tables() and _has_rows(engine, DEMO_TABLE):
        console().print(f"demo table {DEMO_TABLE} already loaded; using it as it is")
        return

    schema = Schema.build(
        [
            Column("hostname", ColumnType.STRING, is_tag=True),
            Column("region", ColumnType.STRING, is_tag=True),
            Column("usage_user", ColumnType.DOUBLE),
            Column("usage_system", ColumnType.DOUBLE),
            Column("ts", ColumnType.TIMESTAMP),
        ],
        timestamp_key="ts",
    )
    rng = np.random.default_rng(42)
    steps_total = hours * 360
    chunk = 360  # one hour of readings per write
    start = int(time.time() * 1000) // 3_600_000 * 3_600_000 - hours * 3_600_000
    engine.create_table(DEMO_TABLE, schema, if_not_exists=True)
    _abort_cut_short_loads(engine)
    revision = engine.revisions.reserve(DEMO_TABLE, owner=_DEMO_OWNER).revision
    t0 = time.perf_counter()
    with Progress(
        TextColumn(f"loading {DEMO_TABLE}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console(),
    ) as progress:
        task = progress.add_task("load", total=steps_total * hosts)
        for s in range(0, steps_total, chunk):
            batch = _demo_batch(hosts, start + s * 10_000, min(chunk, steps_total - s), rng)
            engine.revisions.stage(DEMO_TABLE, revision, batch)
            progress.advance(task, batch.num_rows)
    state = engine.revisions.commit(DEMO_TABLE, revision, wait_s=60.0).state
    if state is not RevisionState.LATEST:
        console().print(f"the demo rows wait for an earlier revision of {DEMO_TABLE} ({state})")
    elapsed = time.perf_counter() - t0
    n = steps_total * hosts
    console().print(f"loaded {n:,} rows in {elapsed:.2f}s ({n / elapsed:,.0f} rows/s)")


#: The demo's own table, so loading it never touches a table a user or Telegraf (whose
#: default measurement is ``cpu``) writes to.
DEMO_TABLE = "demo_cpu"
#: Owner of the revisions the demo loads under.
_DEMO_OWNER = "gnomon demo"
_DEMO_QUERY = (
    f"SELECT hostname, max(usage_user) AS peak FROM {DEMO_TABLE} "
    "WHERE region = 'eu-west-1' GROUP BY hostname ORDER BY peak DESC LIMIT 5"
)


@main.command()
@click.option("--data-dir", default="data/demo", show_default=True, help="Engine directory.")
@click.option("--hosts", default=100, show_default=True, help="Number of series.")
@click.option("--hours", default=24, show_default=True, help="Hours of 10 s readings to load.")
def demo(data_dir: str, hosts: int, hours: int) -> None:
    """Load a small cpu dataset into an embedded engine (once: the table demo_cpu is reused
    when it holds rows) and query it (no server)."""
    from rich.table import Table as RichTable

    from node.backends import open_standalone
    from node.sql.executor import SqlExecutor

    with open_standalone(data_dir) as engine:
        _load_demo(engine, hosts, hours)
        t0 = time.perf_counter()
        top = SqlExecutor(engine).execute(_DEMO_QUERY).table()
        elapsed = time.perf_counter() - t0
        out = RichTable(title=_DEMO_QUERY)
        out.add_column("hostname")
        out.add_column("peak usage_user", justify="right")
        for h, v in zip(
            top.column("hostname").to_pylist(), top.column("peak").to_pylist(), strict=True
        ):
            out.add_row(h, f"{v:.2f}")
        console().print(out)
        console().print(f"query took {elapsed * 1000:.1f} ms; data in {os.path.abspath(data_dir)}")


def _start(role: str, cfg: ServerConfig, placement: Placement | None = None) -> Standalone:
    """Configure logging and start a data-serving process, or exit with one line saying why
    not (a port in use, a data directory in use, a bad setting)."""
    from node.server import logfmt
    from node.server.standalone import Standalone

    with refusing(role):
        logfmt.configure(cfg.log_level)
        server = Standalone.from_config(cfg, placement=placement)
        server.start()
    return server


@contextlib.contextmanager
def refusing(role: str) -> Iterator[None]:
    """A start that fails ends the process with one line saying why: exit 2 for what the
    user can mend (a setting, a port or directory in use), 1 for what the system refused."""
    try:
        yield
    except GnomonError as e:
        console(stderr=True).print(f"[red]gnomon {role}:[/red] {e.message}", soft_wrap=True)
        raise SystemExit(2) from None
    except OSError as e:
        console(stderr=True).print(f"[red]gnomon {role}:[/red] {e}", soft_wrap=True)
        raise SystemExit(1) from None


def _load_config(cls: type[C], config_file: str | None, flags: dict[str, object]) -> C:
    try:
        return cls.load(config_file, flags={**flags, "log_level": _log_level_flag()})
    except GnomonError as e:
        raise click.UsageError(e.message) from None


@main.command()
@click.option("--config", "config_file", default=None, help="TOML file with a [standalone] table.")
@options(StandaloneConfig)
@click.option(
    "--demo",
    "with_demo",
    is_flag=True,
    help=f"Load the demo table {DEMO_TABLE} unless it holds rows already, then serve.",
)
def standalone(config_file: str | None, with_demo: bool, **flags: object) -> None:
    """Run gnomon standalone: HoraeDB-compatible gRPC, HTTP and Arrow Flight on one embedded
    engine.

    Settings come from defaults, then --config, then GNOMON_* environment variables, then
    flags. Stops gracefully (flushing) on SIGTERM or Ctrl-C."""
    keep_pandas_out()
    cfg = _load_config(StandaloneConfig, config_file, flags)
    with stop_signals(logging.getLogger("gnomon.standalone")) as stop:
        server = _start("standalone", cfg)
        if with_demo and server.engine is not None:
            _load_demo(server.engine, hosts=100, hours=24)
        http = f"{cfg.bind}:{server.http_port}"
        console().print(
            f"gnomon standalone: HTTP on {http}, gRPC (HoraeDB protocol) on "
            f"{cfg.bind}:{server.grpc_port}, Arrow Flight on {cfg.bind}:{server.flight_port}, "
            f"data in {os.path.abspath(cfg.data_dir)}\n"
            f'  query:  .venv/bin/gnomon sql --endpoint {http} -e "{_DEMO_QUERY}"\n'
            f"  shell:  .venv/bin/gnomon sql --endpoint {http}\n"
            f"  curl:   curl -s -X POST http://{http}/sql -H 'Content-Type: application/json' "
            """-d '{"query": "SHOW TABLES"}'\n"""
            "  stop:   Ctrl-C",
            soft_wrap=True,
        )
        server.run_forever(stop)


@main.command()
@click.option("--config", "config_file", default=None, help="TOML file with a [node] table.")
@options(NodeConfig)
def node(config_file: str | None, **flags: object) -> None:
    """Run a node of a cluster: it registers with the meta service, serves the shards the
    meta service gives it (WAL regions on Kafka, SSTs on S3, catalog on etcd) and routes
    requests for other tables to their owners. With --role query it owns no shards: it
    answers queries across the data nodes and sends writes to them.

    Settings come from defaults, then --config, then GNOMON_* environment variables, then
    flags. Stops gracefully (flushing) on SIGTERM or Ctrl-C."""
    keep_pandas_out()
    from gnomon.peer import Peer
    from meta.model import NodeKind
    from node.backends import Storage
    from node.engine.compaction.offload import CompactionMode
    from node.server.placement import MetaPlacement

    cfg = _load_config(NodeConfig, config_file, flags)
    assert cfg.advertise is not None  # NodeConfig requires it
    try:
        placement = MetaPlacement(
            cfg.meta,
            cfg.advertise,
            Storage(
                wal=cfg.wal,
                store=cfg.store,
                catalog=cfg.catalog,
                kafka_namespace=cfg.kafka_namespace,
                wal_append_timeout_s=cfg.wal_append_timeout_s,
                wal_delete_records=cfg.wal_delete_records,
                s3_endpoint=cfg.s3_endpoint,
                s3_region=cfg.s3_region,
                wal_sync="never" if cfg.wal_sync == "never" else "always",
                etcd=cfg.etcd_access(),
            ),
            ttl_s=cfg.lease_ttl_s,
            compaction_mode=CompactionMode(cfg.compaction_mode),
            compaction_timeout_s=cfg.compaction_timeout_s,
            peer=Peer(cfg.cluster_secret, cfg.cluster_ca),
            kind=NodeKind(cfg.role),
        )
    except GnomonError as e:
        raise click.UsageError(e.message) from None
    with stop_signals(logging.getLogger("gnomon.standalone")) as stop:
        server = _start("node", cfg, placement)
        console().print(
            f"gnomon node {cfg.advertise} ({cfg.role}): HTTP on {cfg.bind}:{server.http_port}, "
            f"gRPC on {cfg.bind}:{server.grpc_port}, Arrow Flight on "
            f"{cfg.bind}:{server.flight_port}; meta {cfg.meta}, WAL {cfg.wal}, "
            f"SSTs {cfg.store}, catalog {cfg.catalog}",
            soft_wrap=True,
        )
        server.run_forever(stop)


@main.command("compaction-node")
@click.option(
    "--config", "config_file", default=None, help="TOML file with a [compaction_node] table."
)
@options(CompactionNodeConfig)
def compaction_node(config_file: str | None, **flags: object) -> None:
    """Run a compaction node: it registers with the meta service, heartbeats its load and
    merges the compactions data nodes offload to it (reading and writing their SSTs on the
    shared object store), in threads of its own or as Ray tasks (--executor ray).

    Settings come from defaults, then --config, then GNOMON_* environment variables, then
    flags. Stops on SIGTERM or Ctrl-C (tasks in flight get a few seconds to finish)."""
    from compaction_node.server import CompactionNode
    from node.server import logfmt

    cfg = _load_config(CompactionNodeConfig, config_file, flags)
    logfmt.configure(cfg.log_level)
    with stop_signals(logging.getLogger("gnomon.compaction_node")) as stop:
        server = CompactionNode(cfg)
        with refusing("compaction-node"):
            server.start()
        console().print(
            f"gnomon compaction-node {server.name}: gRPC on {cfg.bind}:{server.grpc_port}, "
            f"HTTP on {cfg.bind}:{server.http_port}; executor {cfg.executor}, {cfg.slots} slots, "
            f"meta {cfg.meta}, SSTs {cfg.store}",
            soft_wrap=True,
        )
        server.run_forever(stop)


@main.command("dev-cluster")
@click.option("--nodes", type=click.IntRange(1, 10), default=3, show_default=True)
@click.option("--metas", type=click.IntRange(1, 5), default=1, show_default=True)
@click.option("--shards", type=click.IntRange(1, 256), default=8, show_default=True)
@click.option(
    "--followers",
    type=click.IntRange(0, 9),
    default=0,
    show_default=True,
    help="Followers each shard gets on other data nodes (read copies that take over fast).",
)
@click.option(
    "--compaction-nodes",
    type=click.IntRange(0, 10),
    default=0,
    show_default=True,
    help="Compaction nodes; with any, the data nodes offload their merges to them.",
)
@click.option(
    "--query-nodes",
    type=click.IntRange(0, 10),
    default=0,
    show_default=True,
    help="Query nodes: they own no shards, answer queries across the data nodes and send "
    "writes to them (a front address for clients).",
)
@click.option(
    "--data-dir", default="data/dev-cluster", show_default=True, help="Everything goes here."
)
@click.option(
    "--port-base",
    type=click.IntRange(0, 65000),
    default=6000,
    show_default=True,
    help="Meta instance j listens on BASE+j; data node i serves HTTP on BASE+10+i, gRPC on "
    "BASE+20+i and Flight on BASE+30+i; compaction node k gRPC on BASE+40+k, HTTP on BASE+50+k; "
    "query node q HTTP on BASE+60+q, gRPC on BASE+70+q, Flight on BASE+80+q; the PostgreSQL "
    "protocol of data node i on BASE+90+i, of query node q on BASE+100+q. 0: any free "
    "ports (printed once started). etcd, the broker and the S3 server always take free ones.",
)
@click.option(
    "--auth",
    is_flag=True,
    help="Authentication on: a cluster secret between the processes, etcd's own "
    "authentication (the processes reach it as a user of their own) and a first superuser "
    "(its password printed).",
)
@click.option(
    "--tls",
    is_flag=True,
    help="Every process's servers over TLS (the data nodes' HTTP, gRPC and Flight, the meta "
    "service, the compaction nodes, etcd, which asks for client certificates too), from a "
    "throwaway CA.",
)
def dev_cluster(
    nodes: int,
    metas: int,
    shards: int,
    followers: int,
    compaction_nodes: int,
    query_nodes: int,
    data_dir: str,
    port_base: int,
    auth: bool,
    tls: bool,
) -> None:
    """Run a whole cluster on loopback: etcd, a Kafka-protocol broker, an S3 server, meta
    instances and data nodes, each a process (logs under --data-dir/logs). For trying gnomon
    as a cluster: the broker and the S3 server keep data in memory, so each run starts empty.
    Ctrl-C stops everything."""
    import signal
    import threading

    from gnomon_app.devcluster.cluster import DevCluster

    if 0 < port_base < 1024:
        raise click.BadParameter("0 (any free ports) or from 1024", param_hint="--port-base")
    cluster = DevCluster(
        Path(data_dir).absolute(),
        nodes=nodes,
        metas=metas,
        shards=shards,
        port_base=port_base or None,
        followers=followers,
        compaction_nodes=compaction_nodes,
        query_nodes=query_nodes,
        auth=auth,
        tls=tls,
    )
    with (
        refusing("dev-cluster"),
        console().status("starting etcd, the broker, the S3 server, meta and the nodes"),
    ):
        cluster.start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        console().print(_cluster_summary(cluster), soft_wrap=True)
        while not stop.wait(0.5):
            for ended in cluster.exited():
                console(stderr=True).print(
                    f"gnomon dev-cluster: {ended}", soft_wrap=True, highlight=False
                )
    finally:
        with console().status("stopping"):
            cluster.stop()


def _psql_target(cluster: DevCluster, node: NodeEndpoints) -> str:
    """psql's connection string for ``node``'s PostgreSQL port: as the first superuser with
    authentication on, checking the throwaway CA's certificate with TLS on."""
    host, port = node.pg.rsplit(":", 1)
    words = [f"host={host}", f"port={port}", "dbname=gnomon"]
    if cluster.admin is not None:
        words.append(f"user={cluster.admin[0]}")
    if cluster.ca is not None:
        words += ["sslmode=verify-ca", f"sslrootcert={cluster.ca}"]
    return '"' + " ".join(words) + '"'


def _cluster_summary(cluster: DevCluster) -> str:
    first = cluster.node_endpoints[0]
    assert cluster.etcd is not None
    lines = [
        f"gnomon dev cluster: {len(cluster.node_endpoints)} data nodes, "
        + (f"{len(cluster.query_endpoints)} query nodes, " if cluster.query_endpoints else "")
        + f"{len(cluster.meta_endpoints)} meta, data and logs in {cluster.root}",
        f"  etcd     {cluster.etcd.endpoint}",
        f"  kafka    {cluster.bootstrap} (tansu; it has no DeleteRecords, so the nodes only mark "
        "WAL records deleted, and its topics grow while it runs)",
        f"  s3       {cluster.s3_endpoint} (moto)",
        f"  meta     {cluster.meta}",
    ]
    for n in cluster.node_endpoints:
        lines.append(f"  {n.name}   gRPC {n.grpc}  HTTP {n.http}  Flight {n.flight}  PG {n.pg}")
    for q in cluster.query_endpoints:
        lines.append(
            f"  {q.name}  gRPC {q.grpc}  HTTP {q.http}  Flight {q.flight}  PG {q.pg}  (query node)"
        )
    for c in cluster.compaction_endpoints:
        lines.append(f"  {c.name}   gRPC {c.grpc}  HTTP {c.http}")
    scheme, curl = "http", "curl -s"
    # The meta service and compaction nodes take calls with the cluster secret only.
    secret = "" if cluster.peer.secret is None else f"GNOMON_CLUSTER_SECRET={cluster.peer.secret} "
    if cluster.ca is not None:
        scheme, curl = "https", f"curl -s --cacert {cluster.ca}"
        lines.append(f"  TLS      the data nodes' certificate is signed by the CA {cluster.ca}")
    if cluster.admin is not None:
        user, password = cluster.admin
        curl += f" -u {user}:{password}"
        etcd_env = "".join(f"{name}={value} " for name, value in cluster.etcd_env().items())
        lines += [
            f"  auth     superuser {user!r}, password {password!r}; the processes share the "
            f"cluster secret {cluster.peer.secret!r} (GNOMON_CLUSTER_SECRET)",
            f"  etcd     authentication on: the processes reach it as etcd user "
            f"{cluster.etcd.access.user!r}",
            # The accounts are changed in the catalog on etcd itself, signed with the secret.
            f"  accounts {secret}{etcd_env}gnomon admin users|grants|tokens ... "
            f"--catalog {cluster.catalog}",
        ]
    lines += [
        "examples (any node answers; requests go on to the table's owner):",
        f"  gnomon sql --endpoint {first.http}",
        f"  psql {_psql_target(cluster, first)}",
        f"  {curl} -X POST {scheme}://{first.http}/sql -H 'Content-Type: application/json' "
        """-d '{"query": "SHOW TABLES"}'""",
        f"  {secret}gnomon admin shards --meta {cluster.meta}",
        f"  {secret}gnomon admin compaction-nodes --meta {cluster.meta}",
        f"  horaedb-client: Builder('{first.grpc}', Mode.Direct), built again on another node "
        "after a failed call (the SDK keeps a dead node's routes; README, Cluster):",
        "    python examples/sdk_failover.py --nodes "
        + ",".join(n.grpc for n in cluster.node_endpoints),
        "  stop: Ctrl-C",
    ]
    return "\n".join(lines)


@main.command()
@click.option(
    "--endpoint",
    default="127.0.0.1:5440",
    show_default=True,
    help="HTTP address of a gnomon server: host:port or http://host:port.",
)
@click.option("-e", "--execute", "statement", default=None, help="Run one statement and exit.")
@click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    default=DEFAULT_MAX_ROWS,
    show_default=True,
    help="Rows shown of an answer (the server sends no more); a line says how many more it had.",
)
@click.option(
    "--time-zone",
    default="local",
    show_default=True,
    envvar="GNOMON_TIME_ZONE",
    help="Zone timestamps are shown in, as ISO 8601: local (this machine's), UTC or a name "
    "such as Europe/Paris [env GNOMON_TIME_ZONE].",
)
def sql(endpoint: str, statement: str | None, max_rows: int, time_zone: str) -> None:
    """SQL shell against a running gnomon server (Ctrl-C cancels, Ctrl-D quits)."""
    from gnomon_app import shell

    try:
        view = shell.View(max_rows, shell.time_zone(time_zone))
    except GnomonError as e:
        raise click.BadParameter(e.message, param_hint="--time-zone") from None
    try:
        url = shell.base_url(endpoint)
        if statement is None:
            shell.interactive(url, console(), view)
        else:
            shell.render(console(), shell.run_sql(url, statement, max_rows=max_rows), view)
    except GnomonError as e:
        console().print(f"[red]error:[/red] {e.message}", highlight=False, soft_wrap=True)
        raise SystemExit(1) from None


class _BenchGroup(LazyGroup):
    """The benchmarks live in the source tree's ``bench/`` package, imported only when one is
    run (they pull in DuckDB, matplotlib ...)."""

    def import_module(self, name: str) -> ModuleType:
        import sys

        try:
            return super().import_module(name)
        except ModuleNotFoundError as e:
            if e.name not in ("bench", "bench.tsbs"):
                raise
            if not os.path.isdir(os.path.join("bench", "tsbs")):
                raise click.ClickException(
                    "the benchmarks live in the bench/ folder of the source tree: run "
                    "`gnomon bench` from the root of a checkout"
                ) from None
            # Not installed: a source checkout, run from its root.
            sys.path.insert(0, os.getcwd())
            return super().import_module(name)


@click.group(cls=_BenchGroup)
def bench() -> None:
    """Benchmarks of gnomon beside its peers (run from the root of a source checkout)."""


def _add_meta_commands() -> None:
    from gnomon_app.admin import admin, meta_command

    main.add_command(meta_command)
    main.add_command(admin)
    for accounts in ("users", "grants", "tokens"):
        admin.add_lazy_command(accounts, "gnomon_app.accounts", accounts)


bench.add_lazy_command("tsbs", "bench.tsbs.cli", "tsbs")
main.add_command(bench)
_add_meta_commands()

if __name__ == "__main__":
    main()
