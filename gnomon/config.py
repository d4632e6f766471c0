"""Configuration of each gnomon process, one type per role: :class:`StandaloneConfig`
(``gnomon standalone``), :class:`NodeConfig` (``gnomon node``), :class:`CompactionNodeConfig`
(``gnomon compaction-node``) and :class:`MetaConfig` (``gnomon meta``).

Each setting comes from its built-in default, then a TOML file (``--config``; a table named
after the role, e.g. ``[node]``), then a ``GNOMON_<NAME>`` environment variable, then its
flag (``--<name>``) — each overriding the previous. A setting is declared once, as a field
with its help text; the command-line flags are made from the fields (:func:`options`), so
flags, files, environment and ``--help`` cannot disagree.
"""

from __future__ import annotations

import json
import os
import tomllib
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Self, TypeVar

import click

from gnomon.errors import InvalidArgument

if typing.TYPE_CHECKING:
    from gnomon.etcd import EtcdAccess

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

F = TypeVar("F", bound=Callable[..., Any])


def check_log_level(value: str, *, source: str) -> str:
    """``value`` as a log level name (any case), or InvalidArgument naming ``source``."""
    level = str(value).upper()
    if level not in LOG_LEVELS:
        raise InvalidArgument(
            f"{source}: invalid log level {value!r}; expected one of {', '.join(LOG_LEVELS)}"
        )
    return level


def setting(default: Any, help: str, *, flag: bool = True) -> Any:
    """A field of a role's config: its default and help text (``flag=False``: no flag,
    as for ``log_level``, which the main command takes)."""
    return field(default=default, metadata={"help": help, "flag": flag})


def machine_memory_bytes() -> int:
    """The memory of the machine this process runs on: its physical memory, or the limit of
    its container (cgroup v2 or v1) when that is lower."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(limit, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():  # "max": no limit
            return min(physical, int(text))
    return physical


#: The memory a query's DataFusion operators may hold unless query_memory_bytes says.
QUERY_MEMORY_MAX_BYTES = 4 * 1024**3


def _check_port(name: str, port: int) -> None:
    if not 0 <= port <= 65535:
        raise InvalidArgument(f"invalid port {port}: must be 0..65535 ({name})")


def _check_tls(cert: str | None, key: str | None) -> None:
    if (cert is None) != (key is None):
        raise InvalidArgument("TLS needs both tls_cert and tls_key")


#: The help of the TLS settings of the meta service and compaction nodes.
_TLS_CERT_HELP = (
    "PEM certificate (chain): serve gRPC over TLS (needed when the cluster has a cluster_ca: "
    "every call between its processes uses TLS then)."
)
_TLS_KEY_HELP = "PEM private key of tls_cert."


@dataclass(frozen=True)
class Settings:
    """Settings loaded from a TOML file, the environment and flags (:meth:`load`): every
    role's config, and the groups of settings several commands share."""

    #: The TOML table holding these settings.
    SECTION: ClassVar[str] = ""

    def __post_init__(self) -> None:
        """Checks of the settings together (each subclass adds its own and calls up)."""

    @classmethod
    def load(
        cls,
        path: str | None = None,
        *,
        env: Mapping[str, str] | None = None,
        flags: Mapping[str, Any] | None = None,
    ) -> Self:
        values: dict[str, Any] = {}
        if path is not None:
            try:
                with open(path, "rb") as f:
                    doc = tomllib.load(f)
            except FileNotFoundError:
                raise InvalidArgument(f"config file {path!r} does not exist") from None
            except tomllib.TOMLDecodeError as e:
                raise InvalidArgument(f"config file {path!r} is not valid TOML: {e}") from None
            section = doc.get(cls.SECTION, doc)
            if not isinstance(section, dict):
                raise InvalidArgument(f"config file {path!r}: [{cls.SECTION}] is not a table")
            values.update(_with_source(section, path))
        environ = os.environ if env is None else env
        names = [f.name for f in fields(cls)]
        values.update(
            _with_source({n: environ[_env(n)] for n in names if _env(n) in environ}, "environment")
        )
        values.update(_with_source(flags or {}, "command line"))
        # Defaults of required settings are empty: check them once every source is in.
        return cls._from(values)

    @classmethod
    def _from(cls, values: Mapping[str, tuple[Any, str]]) -> Self:
        known = {f.name: f for f in fields(cls)}
        types = typing.get_type_hints(cls)
        kwargs: dict[str, Any] = {}
        for key, (value, source) in values.items():
            if key not in known:
                raise InvalidArgument(
                    f"{source}: unknown setting {key!r}; known: {', '.join(sorted(known))}"
                )
            kwargs[key] = _convert(key, value, types[key], source)
            if key == "log_level":
                kwargs[key] = check_log_level(kwargs[key], source=source)
        return cls(**kwargs)


@dataclass(frozen=True)
class RoleConfig(Settings):
    log_level: str = setting("INFO", "Level of the JSON log lines on stderr.", flag=False)
    ports_file: str | None = setting(
        None,
        "Once serving, write the ports listened on to this file as one JSON object by "
        'protocol (e.g. {"grpc": 8831}): how whoever started the process learns the ports '
        "of those set to 0 (any free one).",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_log_level(self.log_level, source=self.SECTION)


@dataclass(frozen=True)
class EtcdSettings(Settings):
    """How a process reaches etcd when etcd has its own authentication or TLS on: the meta
    service, data nodes with an etcd catalog, and ``gnomon admin users|grants|tokens`` on
    one."""

    etcd_user: str | None = setting(
        None,
        "etcd user to authenticate as (etcd's authentication on; with etcd_password or "
        "etcd_password_file). It needs read and write on the cluster's keys.",
    )
    etcd_password: str | None = setting(
        None, "Password of etcd_user; best given as GNOMON_ETCD_PASSWORD or etcd_password_file."
    )
    etcd_password_file: str | None = setting(
        None, "File holding the password of etcd_user (its first line)."
    )
    etcd_ca: str | None = setting(
        None,
        "PEM CA that signed etcd's certificate: etcd is reached over TLS (endpoints host:port "
        "or https://host:port).",
    )
    etcd_cert: str | None = setting(
        None,
        "PEM client certificate presented to etcd (its --client-cert-auth; with no etcd_user, "
        "etcd takes the certificate's common name as the user); reaches etcd over TLS.",
    )
    etcd_key: str | None = setting(None, "PEM private key of etcd_cert.")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.etcd_password is not None and self.etcd_password_file is not None:
            raise InvalidArgument("give etcd_password or etcd_password_file, not both")
        self.etcd_access()

    def etcd_access(self) -> EtcdAccess:
        """The settings as an :class:`~gnomon.etcd.EtcdAccess` (the password file read now)."""
        # Imported here: every command loads its settings, few of them reach etcd (gRPC).
        from gnomon.etcd import EtcdAccess

        password = self.etcd_password
        if self.etcd_password_file is not None:
            try:
                with open(self.etcd_password_file, encoding="utf-8") as f:
                    password = f.readline().rstrip("\r\n")
            except OSError as e:
                raise InvalidArgument(
                    f"etcd_password_file {self.etcd_password_file!r} cannot be read: "
                    f"{e.strerror}"
                ) from None
        return EtcdAccess(self.etcd_user, password, self.etcd_ca, self.etcd_cert, self.etcd_key)


def write_ports_file(path: str | None, ports: Mapping[str, int]) -> None:
    """Write ``ports`` (by protocol) to the ports file at ``path``, if one is set. The file
    appears whole (written aside, then renamed): a reader polling for it never sees part."""
    if path is None:
        return
    aside = f"{path}.{os.getpid()}.tmp"
    with open(aside, "w", encoding="utf-8") as f:
        json.dump(dict(ports), f)
    os.replace(aside, path)


def _with_source(values: Mapping[str, Any], source: str) -> dict[str, tuple[Any, str]]:
    """The values given (None: not given), each with where it came from."""
    return {k: (v, source) for k, v in values.items() if v is not None}


def _env(name: str) -> str:
    return f"GNOMON_{name.upper()}"


def _base_type(annotation: Any) -> type:
    """``int`` for ``int`` and ``int | None``."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return args[0] if args else annotation  # type: ignore[no-any-return]


_KINDS = {int: "an integer", float: "a number", bool: "true or false", str: "text"}


def _convert(key: str, value: Any, annotation: Any, source: str) -> Any:
    kind = _base_type(annotation)
    try:
        if kind is bool:
            if isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError(value)
                return value.lower() in ("true", "1", "yes")
            return bool(value)
        if kind is int:
            if isinstance(value, (float, bool)):
                raise ValueError(value)
            return int(value)
        if kind is float:
            return float(value)
        return str(value)
    except ValueError:
        raise InvalidArgument(f"{source}: {key} must be {_KINDS[kind]}, not {value!r}") from None


def options(cls: type[Settings]) -> Callable[[F], F]:
    """Click options for every flag-bearing setting of ``cls`` (``--data-dir`` for
    ``data_dir``), each defaulting to None so that an absent flag leaves the setting to the
    file, the environment or the default; the help shows the default."""
    types = typing.get_type_hints(cls)

    def decorate(fn: F) -> F:
        for f in reversed(fields(cls)):
            if not f.metadata.get("flag", True):
                continue
            kind = _base_type(types[f.name])
            default = "" if f.default is MISSING else f.default
            shown = f" [default: {default}]" if default not in ("", None) else ""
            fn = click.option(
                "--" + f.name.replace("_", "-"),
                f.name,
                type=kind if kind in (int, float, bool) else str,
                default=None,
                help=f"{f.metadata.get('help', '')}{shown}",
            )(fn)
        return fn

    return decorate


@dataclass(frozen=True)
class ServerConfig(RoleConfig):
    """What every process serving data (standalone or a cluster's data node) is set with."""

    data_dir: str = setting(
        "data/standalone", "Directory of this process's data (a node's local scratch)."
    )
    bind: str = setting("127.0.0.1", "Address the servers listen on.")
    http_port: int = setting(5440, "HTTP port (SQL, line protocol, health, metrics).")
    grpc_port: int = setting(8831, "gRPC port (the HoraeDB protocol).")
    flight_port: int = setting(8832, "Arrow Flight port (bulk Arrow reads and writes, Spark).")
    pg_port: int = setting(
        5433, "PostgreSQL protocol port (psql, Grafana, DBeaver, Python drivers; 0: off)."
    )
    wal_sync: str = setting(
        "always",
        "'always': fsync the WAL before acknowledging a write; 'never': leave it to the OS.",
    )
    max_request_bytes: int = setting(256 * 1024**2, "Largest accepted request, in bytes.")
    query_timeout_s: int = setting(
        300,
        "Longest a SQL query may run, in seconds (0: no limit); past it the query is stopped "
        "and answered 504 (a gRPC client's shorter deadline applies too).",
    )
    compress_min_bytes: int = setting(
        4 * 1024**2, "SQL results of this many bytes or more go zstd-compressed over gRPC."
    )
    decoded_cache_bytes: int = setting(
        512 * 1024**2, "Memory for decoded SST column chunks queries read again (0: none)."
    )
    advertise: str | None = setting(
        None, "host:port clients reach this node's gRPC at (routes name it)."
    )
    auth: bool = setting(
        False,
        "Authenticate every request (HTTP, gRPC, Flight) against the users and tokens of "
        "gnomon admin users|tokens, and authorise it by their grants.",
    )
    insecure: bool = setting(
        False, "Serve without authentication on an address other than loopback (else refused)."
    )
    cluster_secret: str | None = setting(
        None,
        "Secret the nodes and the meta service of a cluster present to each other (with auth), "
        "and the key account records are signed with (a standalone without one leaves them "
        "unsigned); best given as GNOMON_CLUSTER_SECRET.",
    )
    cluster_ca: str | None = setting(
        None,
        "PEM CA the cluster's TLS certificates are signed by: calls to the other nodes, the "
        "meta service and compaction nodes use TLS and trust it (a cluster serving TLS); best "
        "given as GNOMON_CLUSTER_CA.",
    )
    auth_cache_s: float = setting(5.0, "Seconds a successful credential check is reused.")
    tls_cert: str | None = setting(
        None, "PEM certificate (chain): serve HTTP, gRPC, Flight over TLS."
    )
    tls_key: str | None = setting(None, "PEM private key of tls_cert.")
    tls_client_ca: str | None = setting(
        None, "PEM CA: clients must present a certificate it signed (mutual TLS)."
    )
    max_concurrent_queries: int = setting(
        16, "SQL queries run at once; more wait in a queue (query_queue_timeout_s)."
    )
    max_concurrent_queries_per_user: int = setting(
        8,
        "SQL queries one user runs at once (with auth); more wait in the queue, where a freed "
        "turn goes to the user running the fewest.",
    )
    max_queued_queries: int = setting(
        64, "SQL queries waiting for their turn at once; past it a query is refused (503)."
    )
    max_queued_queries_per_user: int = setting(
        16,
        "SQL queries of one user waiting for their turn at once (with auth); past it the user's "
        "query is refused (503).",
    )
    query_queue_timeout_s: float = setting(
        30.0, "Longest a query waits for its turn before it is refused (503)."
    )
    max_statement_bytes: int = setting(1024**2, "Longest accepted SQL statement, in bytes.")
    query_memory_bytes: int = setting(
        0,
        "Memory one query's DataFusion operators may hold (sorts, joins, aggregations); past "
        "it the query fails with 413 (0: server_memory_bytes / (2 x max_concurrent_queries), "
        "at most 4 GiB, so the queries running at once hold half the server's budget; 4 GiB "
        "without a server budget).",
    )
    max_result_bytes: int = setting(
        1024**3, "Largest query answer, in bytes of Arrow data; larger ones are refused (413)."
    )
    server_memory_bytes: int = setting(
        machine_memory_bytes() // 2,
        "Memory the running queries may hold together: each one's DataFusion pool "
        "(query_memory_bytes), the batches the scans hand on and the answers; a query that "
        "cannot get its share fails 'over the server's memory budget' (503), the others run "
        "on (default: half the machine's memory, or of its container's limit; 0: no limit).",
    )
    max_generated_values: int = setting(
        10_000_000,
        "Values one query's range, generate_series, array_repeat, repeat, lpad, rpad and "
        "array_resize calls may make together (list elements, characters), counted from their "
        "arguments before it runs, which must be constants; a call in a query with a FROM "
        "clause counts once per row of a batch (65,536). Past it the query fails with 413.",
    )
    max_connections_per_s: float = setting(
        0.0,
        "New connections one client address may open a second to each of HTTP, gRPC and "
        "Flight, in bursts of as many (at least 1); past it an HTTP connection is answered 429 "
        "and closed, a gRPC or Flight call on it refused (0: no limit).",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_tls(self.tls_cert, self.tls_key)
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise InvalidArgument("tls_client_ca needs tls_cert and tls_key")
        for name in (
            "max_concurrent_queries",
            "max_concurrent_queries_per_user",
            "max_statement_bytes",
            "max_generated_values",
        ):
            if getattr(self, name) < 1:
                raise InvalidArgument(f"{name} must be at least 1")
        if self.max_queued_queries < 0 or self.max_queued_queries_per_user < 0:
            raise InvalidArgument(
                "max_queued_queries and max_queued_queries_per_user must be at least 0"
            )
        if self.max_result_bytes < 1024:
            raise InvalidArgument("max_result_bytes must be at least 1024")
        for name in ("server_memory_bytes", "query_memory_bytes"):
            if getattr(self, name) < 0:
                raise InvalidArgument(f"{name} must be at least 0")
        if 0 < self.server_memory_bytes < self.query_pool_bytes:
            raise InvalidArgument(
                f"server_memory_bytes ({self.server_memory_bytes}) is less than one query's "
                f"query_memory_bytes ({self.query_pool_bytes}): no query could run"
            )
        if self.max_connections_per_s < 0:
            raise InvalidArgument("max_connections_per_s must be at least 0 (0: no limit)")
        if self.query_queue_timeout_s < 0 or self.auth_cache_s < 0:
            raise InvalidArgument("query_queue_timeout_s and auth_cache_s must be at least 0")
        for name in ("http_port", "grpc_port", "flight_port", "pg_port"):
            _check_port(name, getattr(self, name))
        if self.wal_sync not in ("always", "never"):
            raise InvalidArgument(f"invalid wal_sync {self.wal_sync!r}: 'always' or 'never'")
        if self.max_request_bytes < 1024:
            raise InvalidArgument("max_request_bytes must be at least 1024")
        if self.query_timeout_s < 0:
            raise InvalidArgument("query_timeout_s must be at least 0 (0: no limit)")
        if self.compress_min_bytes < 1:
            raise InvalidArgument("compress_min_bytes must be at least 1")
        if self.decoded_cache_bytes < 0:
            raise InvalidArgument("decoded_cache_bytes must be at least 0")

    @property
    def query_pool_bytes(self) -> int:
        """The memory one query's DataFusion operators may hold: query_memory_bytes, or its
        share of server_memory_bytes when that is 0."""
        if self.query_memory_bytes:
            return self.query_memory_bytes
        if not self.server_memory_bytes:
            return QUERY_MEMORY_MAX_BYTES
        share = self.server_memory_bytes // (2 * self.max_concurrent_queries)
        return min(share, QUERY_MEMORY_MAX_BYTES)


@dataclass(frozen=True)
class StandaloneConfig(ServerConfig):
    SECTION: ClassVar[str] = "standalone"


@dataclass(frozen=True)
class NodeConfig(EtcdSettings, ServerConfig):
    """A data node of a cluster: the meta service it joins and where it keeps what must
    outlive it (shared by every node: the WAL regions, the SSTs, the catalog)."""

    SECTION: ClassVar[str] = "node"

    data_dir: str = setting("data/node", "Directory of this node's local scratch.")
    meta: str = setting("", "Meta service endpoints, HOST:PORT[,HOST:PORT] (required).")
    role: str = setting(
        "data",
        "'data': serve the shards the meta service gives this node; 'query': own no shards, "
        "answer queries across the data nodes and send writes to them (a front address "
        "for clients that need not follow shards).",
    )
    wal: str = setting("disk", "WAL: kafka://HOST:PORT[,HOST:PORT], or disk (one machine).")
    store: str = setting("file", "SSTs: s3://BUCKET[/PREFIX], or file:///DIR (one machine).")
    catalog: str = setting(
        "",
        "Catalog and manifests: etcd://HOST:PORT[,HOST:PORT]/NAMESPACE or postgresql://... "
        "(required; shared by every node).",
    )
    kafka_namespace: str = setting("gnomon", "Prefix of the WAL regions' topic names.")
    wal_delete_records: bool = setting(
        True,
        "Delete WAL records below the lowest live one from Kafka (its DeleteRecords call); "
        "false for a broker without it (the dev cluster's): records are then only marked "
        "deleted and the WAL's topics keep growing (a Kafka WAL only).",
    )
    wal_append_timeout_s: float = setting(
        5.0,
        "Longest a write waits for Kafka to acknowledge its WAL record, in seconds; past it "
        "the write is answered 503, its rows may or may not be stored (a Kafka WAL only).",
    )
    s3_endpoint: str | None = setting(None, "S3 endpoint URL of an S3-compatible store.")
    s3_region: str | None = setting(None, "S3 region.")
    lease_ttl_s: int = setting(
        10,
        "Lease with the meta service, in seconds: a node silent this long loses its shards "
        "(it stops acknowledging writes a margin before).",
    )
    compaction_mode: str = setting(
        "local",
        "'local': merge here; 'offload': send merges to a compaction node meta picks, merging "
        "here when none answers in time. A table's compaction_mode option overrides it.",
    )
    compaction_timeout_s: float = setting(
        600.0, "Longest an offloaded merge may take before this node merges it itself."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.role not in NODE_ROLES:
            raise InvalidArgument(f"invalid role {self.role!r}: 'data' or 'query'")
        if self.compaction_mode not in COMPACTION_MODES:
            raise InvalidArgument(
                f"invalid compaction_mode {self.compaction_mode!r}: 'local' or 'offload'"
            )
        if self.compaction_timeout_s <= 0:
            raise InvalidArgument("compaction_timeout_s must be positive")
        if self.wal_append_timeout_s < 0.1:
            raise InvalidArgument("wal_append_timeout_s must be at least 0.1")
        for name, example in (("meta", "HOST:PORT"), ("catalog", "etcd://HOST:PORT/gnomon")):
            if not getattr(self, name):
                raise InvalidArgument(
                    f"gnomon node needs {name}: --{name} {example} (or GNOMON_{name.upper()})"
                )
        if not self.advertise:
            raise InvalidArgument(
                "gnomon node needs advertise: the host:port other nodes and clients reach its "
                "gRPC at (--advertise, GNOMON_ADVERTISE)"
            )
        if self.grpc_port == 0:
            # The advertised endpoint, named before the node starts, is its name in the
            # cluster: a port picked at start could not be in it.
            raise InvalidArgument(
                "gnomon node needs a fixed grpc_port (not 0): its advertise names it"
            )
        if self.lease_ttl_s < 3:
            raise InvalidArgument("lease_ttl_s must be at least 3")
        if self.auth and not self.cluster_secret:
            # The accounts on the shared catalog are signed with it: without it, whoever can
            # write there could make themselves a superuser.
            raise InvalidArgument(
                "gnomon node with auth needs cluster_secret (GNOMON_CLUSTER_SECRET): the "
                "nodes present it to each other and the account records are signed with it"
            )


COMPACTION_MODES = ("local", "offload")
NODE_ROLES = ("data", "query")
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class CompactionNodeConfig(RoleConfig):
    """A compaction node: it registers with the meta service, heartbeats its load and merges
    the compaction tasks data nodes offload to it, reading and writing the SSTs on the object
    store the data nodes share."""

    SECTION: ClassVar[str] = "compaction_node"

    meta: str = setting("", "Meta service endpoints, HOST:PORT[,HOST:PORT] (required).")
    store: str = setting(
        "", "SSTs: s3://BUCKET[/PREFIX], or file:///DIR (one machine); the data nodes' store."
    )
    s3_endpoint: str | None = setting(None, "S3 endpoint URL of an S3-compatible store.")
    s3_region: str | None = setting(None, "S3 region.")
    executor: str = setting(
        "local", "Where merges run: 'local' (threads of this process) or 'ray' (Ray tasks)."
    )
    ray_address: str | None = setting(
        None, "Ray cluster to run merges on (--executor ray); unset starts a local Ray."
    )
    slots: int = setting(2, "Merges run at once; as many more wait, further tasks are refused.")
    data_dir: str = setting(
        "data/compaction-node", "Local scratch: staging of outputs, cache of inputs."
    )
    bind: str = setting("127.0.0.1", "Address the servers listen on.")
    grpc_port: int = setting(8841, "gRPC port (the CompactionService).")
    http_port: int = setting(8842, "HTTP port (/metrics, /health).")
    advertise: str | None = setting(
        None, "host:port data nodes reach the gRPC at (its name in meta; default bind:port)."
    )
    lease_ttl_s: int = setting(
        10, "Lease with the meta service, in seconds; heartbeats go three times a lease."
    )
    cluster_secret: str | None = setting(
        None,
        "Secret every call between the processes of the cluster carries; with it set, calls "
        "without it are refused. Best given as GNOMON_CLUSTER_SECRET.",
    )
    cluster_ca: str | None = setting(
        None,
        "PEM CA the cluster's TLS certificates are signed by: calls to the other processes use "
        "TLS and trust it; best given as GNOMON_CLUSTER_CA.",
    )
    tls_cert: str | None = setting(None, _TLS_CERT_HELP)
    tls_key: str | None = setting(None, _TLS_KEY_HELP)
    hold_answer_s: float = setting(
        0.0,
        "Seconds each merged task's answer is held back (fault-injection tests: a task in "
        "flight to kill or time out).",
        flag=False,
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, example in (("meta", "HOST:PORT"), ("store", "s3://BUCKET/PREFIX")):
            if not getattr(self, name):
                raise InvalidArgument(
                    f"gnomon compaction-node needs {name}: --{name} {example} "
                    f"(or GNOMON_{name.upper()})"
                )
        if self.executor not in EXECUTORS:
            raise InvalidArgument(f"invalid executor {self.executor!r}: 'local' or 'ray'")
        if self.ray_address and self.executor != "ray":
            raise InvalidArgument("ray_address needs executor 'ray' (--executor ray)")
        if self.slots < 1:
            raise InvalidArgument("slots must be at least 1")
        for name in ("grpc_port", "http_port"):
            _check_port(name, getattr(self, name))
        _check_tls(self.tls_cert, self.tls_key)
        if self.lease_ttl_s < 3:
            raise InvalidArgument("lease_ttl_s must be at least 3")


@dataclass(frozen=True)
class MetaConfig(EtcdSettings, RoleConfig):
    """An instance of the meta service (several may run on one etcd; one leads)."""

    SECTION: ClassVar[str] = "meta"

    etcd: str = setting("", "etcd endpoints, HOST:PORT[,HOST:PORT] (required).")
    bind: str = setting("127.0.0.1", "Address the gRPC server listens on.")
    grpc_port: int = setting(2390, "gRPC port of the meta service.")
    advertise: str | None = setting(None, "Endpoint others reach this instance at.")
    namespace: str = setting("/gnomon", "etcd key prefix of this cluster.")
    shards: int = setting(8, "Shards a new cluster is made with.")
    node_ttl_s: int = setting(10, "Lease of a node that does not ask for one, in seconds.")
    election_ttl_s: int = setting(3, "Lease of the leading instance, in seconds.")
    interval_s: float = setting(1.0, "Seconds between scheduling rounds.")
    cluster_secret: str | None = setting(
        None,
        "Secret every call between the processes of the cluster carries; with it set, calls "
        "without it are refused. Best given as GNOMON_CLUSTER_SECRET.",
    )
    cluster_ca: str | None = setting(
        None,
        "PEM CA the cluster's TLS certificates are signed by: calls to the other processes use "
        "TLS and trust it; best given as GNOMON_CLUSTER_CA.",
    )
    tls_cert: str | None = setting(None, _TLS_CERT_HELP)
    tls_key: str | None = setting(None, _TLS_KEY_HELP)
    followers: int = setting(
        0,
        "Followers each shard gets on other data nodes: read-only copies that serve follower "
        "reads and take over fast when the leader fails (needs that many more nodes).",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.followers < 0:
            raise InvalidArgument("followers must be 0 or more")
        if not self.etcd:
            raise InvalidArgument("gnomon meta needs etcd: --etcd HOST:PORT (or GNOMON_ETCD)")
        _check_port("grpc_port", self.grpc_port)
        _check_tls(self.tls_cert, self.tls_key)
        if self.shards < 1:
            raise InvalidArgument("shards must be at least 1")
