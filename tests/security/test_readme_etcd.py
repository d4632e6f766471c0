"""The README's etcd setup as an operator follows it: its `etcdctl` commands, run against a
real etcd, leave a client without credentials refused and the `gnomon` user reading and
writing the cluster's namespace, and nothing outside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.errors import GnomonError
from gnomon.etcd import EtcdAccess, EtcdConnection
from gnomon_app.devcluster.etcd import ETCD, EtcdServer
from tests.docs.readme import blocks

pytestmark = pytest.mark.integration

ETCDCTL = ETCD.parent / "etcdctl"
PASSWORDS = {"root": "root-pw", "gnomon": "gnomon-pw"}


def _etcdctl(cmd: str, endpoint: str) -> None:
    args = cmd.split()[1:]
    if args[:2] == ["user", "add"]:
        # etcdctl asks a person for the password; the test gives it as an option.
        args.append(f"--new-user-password={PASSWORDS[args[2]]}")
    done = subprocess.run(
        [str(ETCDCTL), f"--endpoints={endpoint}", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"


def _read(endpoint: str, access: EtcdAccess, key: bytes) -> None:
    etcd = EtcdConnection(endpoint, timeout_s=5, access=access)
    try:
        etcd.kv("Put", etcdrpc.PutRequest(key=key, value=b"v"))
        etcd.kv("Range", etcdrpc.RangeRequest(key=key))
    finally:
        etcd.close()


def test_the_readme_etcd_commands(tmp_path: Path) -> None:
    (block,) = [b for b in blocks() if b.lang == "shell" and "etcdctl auth enable" in b.text]
    etcd = EtcdServer(tmp_path)
    etcd.start()
    try:
        for line in block.commands():
            for cmd in line.split("&&"):
                _etcdctl(cmd.strip(), etcd.endpoint)
        gnomon = EtcdAccess("gnomon", PASSWORDS["gnomon"])
        _read(etcd.endpoint, gnomon, b"/gnomon/readme")
        with pytest.raises(GnomonError):
            _read(etcd.endpoint, EtcdAccess(), b"/gnomon/readme")
        with pytest.raises(GnomonError):
            _read(etcd.endpoint, gnomon, b"/elsewhere")
    finally:
        etcd.stop()
