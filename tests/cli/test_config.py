from __future__ import annotations

from pathlib import Path

import pytest

from gnomon.config import StandaloneConfig, load
from gnomon.errors import InvalidArgument

ROOT = Path(__file__).resolve().parents[2]


def test_example_file_holds_the_defaults() -> None:
    assert load(str(ROOT / "gnomon.example.toml"), env={}) == StandaloneConfig()


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    f = tmp_path / "g.toml"
    f.write_text('[standalone]\nhttp_port = 6000\ngrpc_port = 7000\ndata_dir = "x"\n')
    cfg = load(
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
        load(str(f), env=env)


def test_missing_file() -> None:
    with pytest.raises(InvalidArgument, match="does not exist"):
        load("/nonexistent/gnomon.toml", env={})


def test_the_decoded_cache_budget_reaches_the_engine(tmp_path: Path) -> None:
    from node.server.standalone import Standalone

    cfg = load(
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
    from node.engine.engine import EngineConfig

    assert StandaloneConfig().decoded_cache_bytes == EngineConfig.decoded_cache_bytes
