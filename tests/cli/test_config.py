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
