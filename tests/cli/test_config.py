from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gnomon.config import CompactionNodeConfig, MetaConfig, NodeConfig, StandaloneConfig
from gnomon.errors import InvalidArgument

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_example_file_holds_the_defaults() -> None:
    assert StandaloneConfig.load(str(ROOT / "gnomon.example.toml"), env={}) == StandaloneConfig()


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    f = tmp_path / "g.toml"
    f.write_text('[standalone]\nhttp_port = 6000\ngrpc_port = 7000\ndata_dir = "x"\n')
    cfg = StandaloneConfig.load(
        str(f),
        env={"GNOMON_GRPC_PORT": "7001", "GNOMON_DATA_DIR": "y"},
        flags={"data_dir": "z", "http_port": None},
    )
    assert (cfg.http_port, cfg.grpc_port, cfg.data_dir) == (6000, 7001, "z")


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("[standalone]\nhttp_prot = 1\n", {}, "unknown setting 'http_prot'"),
        ("[standalone\n", {}, "not valid TOML"),
        ("", {"GNOMON_HTTP_PORT": "abc"}, "http_port must be an integer"),
        ("[standalone]\nwal_sync = 'sometimes'\n", {}, "invalid wal_sync"),
        ("[standalone]\ngrpc_port = 70000\n", {}, "invalid port 70000"),
        ("", {"GNOMON_DECODED_CACHE_BYTES": "-1"}, "decoded_cache_bytes must be at least 0"),
    ],
)
def test_bad_config_is_rejected(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    f = tmp_path / "g.toml"
    f.write_text(text)
    with pytest.raises(InvalidArgument, match=message):
        StandaloneConfig.load(str(f), env=env)


def test_missing_file() -> None:
    with pytest.raises(InvalidArgument, match="does not exist"):
        StandaloneConfig.load("/nonexistent/gnomon.toml", env={})


def test_the_decoded_cache_budget_reaches_the_engine(tmp_path: Path) -> None:
    from node.server.standalone import Standalone

    cfg = StandaloneConfig.load(
        None,
        env={"GNOMON_DECODED_CACHE_BYTES": "1048576"},
        flags={"data_dir": str(tmp_path / "d"), "http_port": 0, "grpc_port": 0, "flight_port": 0},
    )
    server = Standalone.from_config(cfg)
    server.start()
    try:
        assert server.engine is not None
        assert server.engine.stats().decoded_cache.capacity_bytes == 1_048_576
    finally:
        server.stop()


def test_the_decoded_cache_default_is_the_engines() -> None:
    from node.engine.config import EngineConfig

    assert StandaloneConfig().decoded_cache_bytes == EngineConfig.decoded_cache_bytes


def test_each_role_reads_its_own_table(tmp_path: Path) -> None:
    f = tmp_path / "g.toml"
    f.write_text(
        '[standalone]\nhttp_port = 1\n[node]\nhttp_port = 2\nmeta = "m:1"\n'
        'catalog = "etcd://e:2/x"\nadvertise = "n:3"\n[meta]\netcd = "e:2"\nshards = 4\n'
    )
    assert StandaloneConfig.load(str(f), env={}).http_port == 1
    node = NodeConfig.load(str(f), env={"GNOMON_LEASE_TTL_S": "6"})
    assert (node.http_port, node.meta, node.lease_ttl_s, node.data_dir) == (
        2,
        "m:1",
        6,
        "data/node",
    )
    meta = MetaConfig.load(str(f), env={}, flags={"interval_s": "0.5"})
    assert (meta.etcd, meta.shards, meta.interval_s) == ("e:2", 4, 0.5)


@pytest.mark.parametrize(
    ("cls", "values", "message"),
    [
        (NodeConfig, {"catalog": "etcd://e:1/x", "advertise": "n:1"}, "needs meta: --meta"),
        (NodeConfig, {"meta": "m:1", "advertise": "n:1"}, "needs catalog: --catalog"),
        (NodeConfig, {"meta": "m:1", "catalog": "etcd://e:1/x"}, "needs advertise"),
        (MetaConfig, {}, "needs etcd: --etcd"),
        (MetaConfig, {"etcd": "e:1", "interval_s": "often"}, "interval_s must be a number"),
        (CompactionNodeConfig, {"store": "s3://b"}, "needs meta: --meta"),
        (CompactionNodeConfig, {"meta": "m:1"}, "needs store: --store"),
        (CompactionNodeConfig, {"meta": "m:1", "store": "s3://b", "executor": "k8s"}, "executor"),
        (
            CompactionNodeConfig,
            {"meta": "m:1", "store": "s3://b", "ray_address": "r:1"},
            "ray_address needs executor 'ray'",
        ),
        (
            NodeConfig,
            {"meta": "m:1", "catalog": "etcd://e:1/x", "advertise": "n:1", "compaction_mode": "x"},
            "invalid compaction_mode",
        ),
        (
            NodeConfig,
            {"meta": "m:1", "catalog": "etcd://e:1/x", "advertise": "n:1", "grpc_port": "0"},
            "needs a fixed grpc_port",
        ),
        (
            NodeConfig,
            {
                "meta": "m:1",
                "catalog": "etcd://e:1/x",
                "advertise": "n:1",
                "wal_append_timeout_s": "0",
            },
            "wal_append_timeout_s must be at least 0.1",
        ),
    ],
)
def test_required_and_typed_settings(
    cls: type[NodeConfig | MetaConfig | CompactionNodeConfig],
    values: dict[str, str],
    message: str,
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        cls.load(None, env={}, flags=values)


@pytest.mark.parametrize("role", ["standalone", "node", "meta", "compaction-node"])
def test_every_setting_has_its_flag(role: str) -> None:
    from click.testing import CliRunner

    from gnomon_app.cli import main

    cls = {
        "standalone": StandaloneConfig,
        "node": NodeConfig,
        "meta": MetaConfig,
        "compaction-node": CompactionNodeConfig,
    }[role]
    text = CliRunner().invoke(main, [role, "--help"], terminal_width=200).output
    for f in dataclasses.fields(cls):
        if f.metadata.get("flag", True):
            assert "--" + f.name.replace("_", "-") in text, f.name
