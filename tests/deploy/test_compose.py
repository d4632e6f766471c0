"""docker-compose.yml, checked without a Docker engine: valid against the Compose
specification's schema, every file it mounts present, every gnomon command line accepted by
the gnomon CLI and wired to the services of the file."""

from __future__ import annotations

import json
import re
import shlex
from importlib.resources import files as package_files
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import jsonschema
import pytest
import yaml

from gnomon.config import CompactionNodeConfig, MetaConfig, NodeConfig
from tests.deploy.command_lines import RoleLine, parse_cli, parse_role_line
from tests.docs.readme import blocks

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


def compose_schema() -> dict[str, Any]:
    """The Compose specification's JSON schema, as check-jsonschema ships it."""
    text = (
        package_files("check_jsonschema.builtin_schemas.vendor")
        .joinpath("compose-spec.json")
        .read_text()
    )
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_errors(doc: dict[str, Any]) -> list[str]:
    schema = compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return doc


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def gnomon_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: svc
        for name, svc in services(compose).items()
        if str(svc.get("image", "")).startswith("gnomon:")
    }


def bind_mounts(svc: dict[str, Any]) -> dict[str, Path]:
    """Container path -> local file of each bind mount (short syntax, ./ relative)."""
    mounts: dict[str, Path] = {}
    for volume in svc.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            mounts[target] = (COMPOSE.parent / source).resolve()
    return mounts


def read_env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return env


def environment(svc: dict[str, Any]) -> dict[str, str]:
    env: dict[str, str] = {}
    for name in svc.get("env_file", []):
        env.update(read_env_file(COMPOSE.parent / name))
    given = svc.get("environment", {})
    env.update(given if isinstance(given, dict) else dict(e.split("=", 1) for e in given))
    return env


def role_line(svc: dict[str, Any]) -> RoleLine:
    files = {target: str(local) for target, local in bind_mounts(svc).items()}
    return parse_role_line(svc["command"], files=files, env=environment(svc))


def test_the_file_is_valid_against_the_compose_specification(compose: dict[str, Any]) -> None:
    assert schema_errors(compose) == []


def test_the_schema_check_catches_a_misspelled_key(compose: dict[str, Any]) -> None:
    broken = yaml.safe_load(COMPOSE.read_text())
    broken["services"]["data-0"]["healthchek"] = broken["services"]["data-0"].pop("healthcheck")
    assert any("healthchek" in e for e in schema_errors(broken))


def test_the_cluster_is_all_there(compose: dict[str, Any]) -> None:
    roles = sorted(role_line(svc).role for svc in gnomon_services(compose).values())
    assert roles == ["compaction-node"] * 2 + ["meta"] * 2 + ["node"] * 4
    query = [n for n, svc in gnomon_services(compose).items() if "--role=query" in svc["command"]]
    assert query == ["query-0"]
    assert {"etcd", "kafka", "minio", "minio-init"} <= set(services(compose))
    assert services(compose)["etcd"]["image"].startswith("quay.io/coreos/etcd:v")
    kafka = services(compose)["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft
    # Every image pinned to a release.
    for name, svc in services(compose).items():
        tag = svc["image"].rsplit(":", 1)[1]
        assert tag not in ("latest", ""), name


def test_every_mounted_file_exists(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes", {}))
    for name, svc in services(compose).items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith((".", "/")):
                assert (COMPOSE.parent / source).is_file(), f"{name} mounts missing {source}"
            else:
                assert source in declared, f"{name} uses undeclared volume {source}"
        for env_file in svc.get("env_file", []):
            assert (COMPOSE.parent / env_file).is_file(), f"{name}: missing {env_file}"
        if "build" in svc:
            assert (COMPOSE.parent / svc["build"] / "Dockerfile").is_file()


def test_every_dependency_is_a_service(compose: dict[str, Any]) -> None:
    for name, svc in services(compose).items():
        assert set(svc.get("depends_on", {})) <= set(services(compose)), name


def test_every_gnomon_command_line_is_accepted_and_wired_to_the_file(
    compose: dict[str, Any],
) -> None:
    lines = {name: role_line(svc) for name, svc in gnomon_services(compose).items()}
    metas = {n: line.config for n, line in lines.items() if isinstance(line.config, MetaConfig)}
    nodes = {n: line.config for n, line in lines.items() if isinstance(line.config, NodeConfig)}
    for name, meta in metas.items():
        assert meta.advertise == f"{name}:{meta.grpc_port}"
        assert meta.bind == "0.0.0.0"
        assert meta.etcd == "etcd:2379"
    meta_endpoints = sorted(f"{n}:{m.grpc_port}" for n, m in metas.items())
    for name, node in nodes.items():
        assert node.advertise == f"{name}:{node.grpc_port}"
        assert node.bind == "0.0.0.0"
        assert sorted(node.meta.split(",")) == meta_endpoints
        assert node.wal == "kafka://kafka:9092"
        assert node.catalog.startswith("etcd://etcd:2379/")
        assert urlsplit(node.s3_endpoint or "").hostname == "minio"
        bucket = urlsplit(node.store).hostname
        assert f"gnomon/{bucket}" in services(compose)["minio-init"]["command"][0]
        # Its local scratch is on the service's named volume.
        mounted = {v.split(":")[1] for v in gnomon_services(compose)[name]["volumes"]}
        assert node.data_dir in mounted
        # Merges go to the compaction nodes.
        assert node.compaction_mode == "offload"
    compactors = {
        n: line.config for n, line in lines.items() if isinstance(line.config, CompactionNodeConfig)
    }
    stores = {(node.store, node.s3_endpoint) for node in nodes.values()}
    for name, compactor in compactors.items():
        assert compactor.advertise == f"{name}:{compactor.grpc_port}"
        assert compactor.bind == "0.0.0.0"
        assert sorted(compactor.meta.split(",")) == meta_endpoints
        # They read and write the data nodes' SSTs.
        assert stores == {(compactor.store, compactor.s3_endpoint)}
        mounted = {v.split(":")[1] for v in gnomon_services(compose)[name]["volumes"]}
        assert compactor.data_dir in mounted


def test_flags_the_cli_does_not_know_are_refused() -> None:
    with pytest.raises(click.UsageError):
        parse_role_line(["node", "--advertize=data-0:8831"], files={}, env={})
    with pytest.raises(AssertionError, match="not mounted"):
        parse_role_line(["meta", "--config=/etc/gnomon/missing.toml"], files={}, env={})
    with pytest.raises(AssertionError, match="GNOMON_ETDC"):
        parse_role_line(["meta"], files={}, env={"GNOMON_ETDC": "etcd:2379"})


def test_health_checks(compose: dict[str, Any]) -> None:
    for name, svc in services(compose).items():
        if name != "minio-init":
            assert "healthcheck" in svc, f"{name} has no health check"
    for name, svc in gnomon_services(compose).items():
        config = role_line(svc).config
        check = " ".join(svc["healthcheck"]["test"])
        if isinstance(config, NodeConfig | CompactionNodeConfig):
            assert f"http://127.0.0.1:{config.http_port}/health" in check, name
        else:
            assert isinstance(config, MetaConfig)
            assert f"('127.0.0.1', {config.grpc_port})" in check, name


def test_the_s3_credentials_match_minios() -> None:
    env = read_env_file(ROOT / "deploy" / "s3.env")
    assert env["AWS_ACCESS_KEY_ID"] == env["MINIO_ROOT_USER"]
    assert env["AWS_SECRET_ACCESS_KEY"] == env["MINIO_ROOT_PASSWORD"]


def readme_deploy_commands() -> list[list[str]]:
    """The commands of the README's Deploy block (tagged `shell`), each split into words."""
    (block,) = (b for b in blocks() if b.lang == "shell" and "docker compose" in b.text)
    return [shlex.split(cmd, comments=True) for cmd in block.commands()]


def test_the_readme_deploy_commands_fit_the_file(compose: dict[str, Any]) -> None:
    """What can be checked without a Docker engine: each command aims at a service of the
    file, a port it publishes, and gnomon commands the CLI accepts."""
    published = {
        port.rsplit(":", 1)[1]
        for svc in services(compose).values()
        for port in svc.get("ports", [])
    }
    commands = readme_deploy_commands()
    assert commands[0][:3] == ["docker", "compose", "up"]
    for words in commands:
        if words[0] == "curl":
            (url,) = (w for w in words if w.startswith("http://"))
            assert urlsplit(url).hostname == "127.0.0.1"
            assert str(urlsplit(url).port) in published, url
        elif words[:3] == ["docker", "compose", "exec"]:
            service, program, *args = words[3:]
            assert service in services(compose) and program == "gnomon", words
            parse_cli(args)
            for endpoint in re.findall(r"--(?:meta|endpoint) (\S+)", shlex.join(args)):
                host = endpoint.split(":")[0]
                assert host == "127.0.0.1" or host in services(compose), endpoint
        else:
            assert words[:2] == ["docker", "compose"], words
