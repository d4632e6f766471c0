"""Debian packages the tests and benchmarks run (PostgreSQL, InfluxDB), installed with
apt-get when missing: never by hand, so a fresh machine gets them from the project's own
files."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess

log = logging.getLogger("gnomon.tests")


class PackageUnavailable(RuntimeError):
    """A Debian package is missing and could not be installed here (no apt-get, not root,
    or apt-get failed)."""


def apt_install(package: str, *, timeout_s: float = 600) -> None:
    """``apt-get install -y package`` (as root only: nothing here asks for privileges)."""
    if shutil.which("apt-get") is None:
        raise PackageUnavailable(f"{package} is missing and this system has no apt-get")
    if os.geteuid() != 0:
        raise PackageUnavailable(f"{package} is missing; apt-get install {package} needs root")
    log.info("installing %s with apt-get", package)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    done = subprocess.run(
        ["apt-get", "install", "-y", "--no-install-recommends", package],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )
    if done.returncode != 0:
        raise PackageUnavailable(f"apt-get install {package} failed: {done.stderr[-2000:]}")
