"""What the runner knows of a system under test: a :class:`Kind` installs and loads it, giving a
:class:`System` the runner settles, sizes, queries and stops. One module per system implements
both (``gnomon_server``, ``influx``, ``victoria``, ``duck``, ``clickhouse``); ``systems`` lists
them."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal, Protocol, TypeVar

import pyarrow as pa

from bench.tsbs.serving import wait_until
from testkit.debian import PackageUnavailable, apt_install

log = logging.getLogger("gnomon.bench.tsbs")

#: The query language a system answers (:meth:`queries.Query.text`).
Dialect = Literal["gnomon", "influxql", "duckdb", "clickhouse"]
#: How long a server may take to settle (snapshot, merge, compact) after a load.
SETTLE_TIMEOUT_S = 120.0


class SystemUnavailable(RuntimeError):
    """A system's software is missing and cannot be installed here."""


class System(Protocol):
    """One loaded system, as the runner settles, sizes, queries and stops it."""

    name: str

    @property
    def pids(self) -> tuple[int, ...]:
        """Its server processes (none for a system running in the bench process)."""

    def query(self, text: str) -> pa.Table: ...

    def stored_rows(self) -> int:
        """Rows it holds, counted by itself (a load that lost rows is a wrong answer)."""

    def disk_bytes(self) -> int: ...

    def peak_rss(self) -> int | None:
        """The peak resident memory of its servers once stopped; None in process."""

    def stop(self) -> None: ...


@dataclass
class Workload:
    """The data every loader loads: the batches, and the request bodies built from them before
    any timing (by encoding: ``gnomon-grpc``, ``line-protocol``)."""

    batches: list[pa.Table]
    hosts: int
    workers: int
    #: The time the data spans, ``[start_ms, end_ms)``.
    start_ms: int
    end_ms: int
    payloads: dict[str, list[bytes]] = field(default_factory=dict)

    @cached_property
    def table(self) -> pa.Table:
        """Every batch as one table, for the systems loaded in one call."""
        return pa.concat_tables(self.batches)


S = TypeVar("S", bound=System)


class Kind(Protocol[S]):
    """A system the benchmark can run, loaded as an ``S``."""

    @property
    def name(self) -> str: ...

    @property
    def dialect(self) -> Dialect | None:
        """What it is queried in; None: ingest and size only."""

    @property
    def loaders(self) -> tuple[str, ...]:
        """Ways of loading it, each measured on its own; the first is the system's ingest
        figure and loads the copy that is queried."""

    @property
    def encodings(self) -> tuple[str, ...]:
        """Request bodies its loaders send (:data:`payloads.ENCODERS`)."""

    def unavailable(self) -> str | None:
        """Why it cannot run here (None: installed, or installable by :meth:`install`)."""

    def install(self) -> None:
        """Install what is missing; raises :class:`SystemUnavailable`."""

    def load(self, loader: str, where: Path, work: Workload) -> tuple[S, float]:
        """A fresh system under ``where`` loaded by ``loader``, and the seconds the load
        took."""

    def settle(self, system: S, quiet_s: float) -> S:
        """``system`` in its settled state, whose size is then measured (a server may be
        replaced by a restarted one)."""


def apt_binary(binary: str, package: str, *, install: bool = True) -> str:
    """The path of ``binary``, installing the Debian ``package`` when it is missing (as root
    only: the benchmark never asks for privileges)."""
    found = shutil.which(binary)
    if found:
        return found
    if not install:
        raise SystemUnavailable(f"{binary} is not installed")
    try:
        apt_install(package)
    except PackageUnavailable as e:
        raise SystemUnavailable(str(e)) from None
    found = shutil.which(binary)
    if found is None:
        raise SystemUnavailable(f"apt-get installed {package} but {binary} is not on the PATH")
    return found


def apt_unavailable(binary: str, package: str) -> str | None:
    """Why ``binary`` cannot run here: missing and apt-get cannot install ``package``."""
    if shutil.which(binary):
        return None
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        return f"{binary} is missing and installing {package} needs apt-get as root"
    return None


def python_unavailable(module: str) -> str | None:
    """Why a system running in this process cannot run: its Python package is missing (it is
    a development dependency, as every package the benchmark imports)."""
    if importlib.util.find_spec(module) is None:
        return f"the Python package {module} is missing (pip install -e '.[dev]')"
    return None


def send_all(payloads: Sequence[bytes], send: Callable[[bytes], None], workers: int) -> float:
    """Seconds to send every payload with ``workers`` concurrent clients."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="loader") as pool:
        for f in [pool.submit(send, p) for p in payloads]:
            f.result()
    return time.perf_counter() - t0


def loaded(
    server: S, send: Callable[[bytes], None], payloads: Sequence[bytes], workers: int
) -> tuple[S, float]:
    """``server`` once every payload is sent with ``send``, and the seconds that took; the
    server is stopped when the load fails."""
    try:
        return server, send_all(payloads, send, workers)
    except BaseException:
        server.stop()
        raise


def settle_size(system: System, quiet_s: float) -> None:
    """Wait until a server's size on disk stops changing for ``quiet_s`` (cache snapshots,
    merges, compaction); at most :data:`SETTLE_TIMEOUT_S`."""
    last = [-1, time.monotonic()]

    def stable() -> bool:
        size = system.disk_bytes()
        if size != last[0]:
            last[0], last[1] = size, time.monotonic()
            return False
        return time.monotonic() - float(last[1]) >= quiet_s

    try:
        wait_until(stable, timeout_s=SETTLE_TIMEOUT_S, what=f"{system.name} compaction")
    except TimeoutError:
        log.warning("%s still compacting; its size is measured as it is", system.name)
