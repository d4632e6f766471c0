"""Configuration of ``gnomon standalone``: built-in defaults, then a TOML file, then
``GNOMON_*`` environment variables, then command-line flags — each overriding the previous."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from gnomon.errors import InvalidArgument

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def check_log_level(value: str, *, source: str) -> str:
    """``value`` as a log level name (any case), or InvalidArgument naming ``source``."""
    level = str(value).upper()
    if level not in LOG_LEVELS:
        raise InvalidArgument(
            f"{source}: invalid log level {value!r}; expected one of {', '.join(LOG_LEVELS)}"
        )
    return level


@dataclass(frozen=True)
class StandaloneConfig:
    #: Directory holding the catalog, manifests, WAL and SSTs.
    data_dir: str = "data/standalone"
    #: Address the servers bind to.
    bind: str = "127.0.0.1"
    http_port: int = 5440
    grpc_port: int = 8831
    #: Arrow Flight (bulk reads and writes, the Spark data source).
    flight_port: int = 8832
    #: WAL sync policy: "always" (fsync before acknowledging) or "never".
    wal_sync: str = "always"
    #: Largest accepted request, in bytes.
    max_request_bytes: int = 256 * 1024**2
    #: Longest a SQL query may run, in seconds (0: no limit); past it the query is stopped
    #: and answered 504 (a gRPC client's own shorter deadline applies too).
    query_timeout_s: int = 300
    #: SQL results of this many bytes or more go zstd-compressed over gRPC (HoraeDB's
    #: ``resp_compress_min_length``: 4 MiB).
    compress_min_bytes: int = 4 * 1024**2
    #: Memory for decoded SST column chunks that queries read again without decoding;
    #: 0 keeps none.
    decoded_cache_bytes: int = 512 * 1024**2
    #: Level of the JSON log lines on stderr (the ``gnomon --log-level`` flag overrides it).
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        for port in (self.http_port, self.grpc_port, self.flight_port):
            if not 0 <= port <= 65535:
                raise InvalidArgument(f"invalid port {port}: must be 0..65535")
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

    def with_values(self, values: Mapping[str, Any], *, source: str) -> StandaloneConfig:
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, value in values.items():
            if value is None:
                continue
            f = known.get(key)
            if f is None:
                raise InvalidArgument(
                    f"{source}: unknown setting {key!r}; known: {', '.join(sorted(known))}"
                )
            try:
                value = int(value) if f.type in ("int", int) else str(value)
            except ValueError:
                raise InvalidArgument(
                    f"{source}: {key} must be an integer, not {value!r}"
                ) from None
            if key == "log_level":
                value = check_log_level(str(value), source=source)
            changes[key] = value
        return replace(self, **changes)


def load(
    path: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> StandaloneConfig:
    cfg = StandaloneConfig()
    if path is not None:
        try:
            with open(path, "rb") as f:
                doc = tomllib.load(f)
        except FileNotFoundError:
            raise InvalidArgument(f"config file {path!r} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise InvalidArgument(f"config file {path!r} is not valid TOML: {e}") from None
        cfg = cfg.with_values(doc.get("standalone", doc), source=path)
    environ = os.environ if env is None else env
    from_env = {
        f.name: environ[f"GNOMON_{f.name.upper()}"]
        for f in fields(cfg)
        if f"GNOMON_{f.name.upper()}" in environ
    }
    cfg = cfg.with_values(from_env, source="environment")
    return cfg.with_values(flags or {}, source="command line")
