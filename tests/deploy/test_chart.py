"""The Helm chart helm/gnomon, rendered and linted offline by the Helm library itself
(helm-python-sdk), every manifest validated against the Kubernetes schemas
(kubernetes-validate, strict: unknown fields are errors), and every container's command line
accepted by the gnomon CLI with the settings the chart mounts and sets."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import helm_python
import kubernetes_validate
import pytest
import yaml

from gnomon.config import CompactionNodeConfig, MetaConfig, NodeConfig
from tests.deploy.command_lines import RoleLine, parse_role_line

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "gnomon"
RELEASE, NAMESPACE = "demo", "db"
FULLNAME = f"{RELEASE}-gnomon"
#: The Kubernetes release whose API schemas the manifests must satisfy.
KUBE_VERSION = "1.30.0"

POSTGRES_URL = "postgresql://gnomon:pw@postgres.db.svc:5432/gnomon"
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "postgresql-catalog": {
        "catalog": {"backend": "postgresql"},
        "credentials": {
            "postgresqlUrl": POSTGRES_URL,
            "s3AccessKeyId": "AKIDEXAMPLE",
            "s3SecretAccessKey": "not-a-real-secret",
        },
        "objectStorage": {"s3": {"endpoint": "http://minio.storage.svc:9000"}},
    },
    "five-nodes": {
        "dataNode": {"replicas": 5, "persistence": {"enabled": False}},
        "meta": {"replicas": 3, "settings": {"election_ttl_s": 5}},
        "compactionNode": {"replicas": 3, "executor": "ray", "rayAddress": "ray-head:10001"},
        "etcd": {"endpoints": [f"etcd-{i}.etcd:2379" for i in range(3)]},
        "kafka": {"brokerEndpoints": [f"kafka-{i}.kafka:9092" for i in range(3)]},
    },
    "query-nodes": {"queryNode": {"replicas": 2}},
    "existing-secret": {
        "catalog": {"backend": "postgresql"},
        "credentials": {"existingSecret": "gnomon-credentials-of-my-own"},
        "compactionNode": {"enabled": False},
    },
}


@dataclass(frozen=True)
class Rendered:
    manifests: list[dict[str, Any]]
    notes: str

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [m for m in self.manifests if m["kind"] == kind]

    def one(self, kind: str, name: str) -> dict[str, Any]:
        found = [m for m in self.of_kind(kind) if m["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind}/{name}: {len(found)} rendered"
        return found[0]


def render(values: dict[str, Any]) -> Rendered:
    with helm_python.Chart.load(CHART) as chart:
        out = chart.render(values, name=RELEASE, namespace=NAMESPACE)
    manifests = [
        doc
        for path, text in sorted(out.items())
        if path.endswith(".yaml")
        for doc in yaml.safe_load_all(text)
        if doc
    ]
    notes = next(text for path, text in out.items() if path.endswith("NOTES.txt"))
    return Rendered(manifests, notes)


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> tuple[str, Rendered]:
    return request.param, render(VALUE_SETS[request.param])


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_lint_is_clean(name: str) -> None:
    report = helm_python.lint(CHART, VALUE_SETS[name], strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_every_manifest_is_valid_kubernetes(rendered: tuple[str, Rendered]) -> None:
    _, out = rendered
    assert out.manifests
    for manifest in out.manifests:
        kubernetes_validate.validate(manifest, KUBE_VERSION, strict=True)


def test_the_validation_catches_a_misplaced_field() -> None:
    deployment = render({}).one("Deployment", f"{FULLNAME}-meta")
    deployment["spec"]["template"]["spec"]["containers"][0]["probes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSION, strict=True)


# -- the pods' command lines ---------------------------------------------------------------------


@dataclass(frozen=True)
class Pod:
    name: str
    ip: str


def pods(workload: dict[str, Any]) -> list[Pod]:
    """The pods Kubernetes makes of ``workload``: a StatefulSet's are numbered, a
    Deployment's get a random suffix."""
    name = workload["metadata"]["name"]
    suffix = "{}" if workload["kind"] == "StatefulSet" else "5d8f7c9b4-x2x7{}"
    return [
        Pod(f"{name}-{suffix.format(i)}", f"10.0.0.{i + 10}")
        for i in range(workload["spec"]["replicas"])
    ]


def secret_value(out: Rendered, ref: dict[str, Any]) -> str | None:
    """The value a secretKeyRef gives: from the chart's Secret, or for a Secret of the
    user's own, a stand-in (a URL for the catalog key, which must read as one)."""
    secrets = [s for s in out.of_kind("Secret") if s["metadata"]["name"] == ref["name"]]
    if not secrets:
        assert ref["name"] == VALUE_SETS["existing-secret"]["credentials"]["existingSecret"]
        return "postgresql://stand-in" if ref["key"] == "catalog-url" else "stand-in"
    data = secrets[0].get("data") or {}
    if ref["key"] not in data:
        assert ref.get("optional"), f"secret {ref['name']} has no key {ref['key']}"
        return None
    return base64.b64decode(data[ref["key"]]).decode()


def container_env(out: Rendered, container: dict[str, Any], pod: Pod) -> dict[str, str]:
    """The environment Kubernetes gives ``container`` in pod ``pod`` ($(VAR) expanded)."""
    env: dict[str, str] = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = re.sub(
                r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), str(var["value"])
            )
            continue
        source = var["valueFrom"]
        if "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            env[var["name"]] = {"metadata.name": pod.name, "status.podIP": pod.ip}[path]
        else:
            value = secret_value(out, source["secretKeyRef"])
            if value is not None:
                env[var["name"]] = value
    return env


def mounted_files(
    out: Rendered, pod_spec: dict[str, Any], container: dict[str, Any], tmp: Path
) -> dict[str, str]:
    """Container path -> a local copy of each ConfigMap item the container mounts."""
    volumes = {v["name"]: v for v in pod_spec["volumes"]}
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts", []):
        volume = volumes.get(mount["name"])
        if volume is None or "configMap" not in volume:
            continue
        config_map = out.one("ConfigMap", volume["configMap"]["name"])
        for item in volume["configMap"]["items"]:
            local = tmp / f"{config_map['metadata']['name']}-{item['path']}"
            local.write_text(config_map["data"][item["key"]])
            files[f"{mount['mountPath']}/{item['path']}"] = str(local)
    return files


def role_lines(out: Rendered, tmp: Path) -> dict[Pod, RoleLine]:
    """Each pod of every workload -> its container's role and settings."""
    lines: dict[Pod, RoleLine] = {}
    for workload in out.of_kind("Deployment") + out.of_kind("StatefulSet"):
        pod_spec = workload["spec"]["template"]["spec"]
        (container,) = pod_spec["containers"]
        assert "command" not in container, "the image's entry point is gnomon"
        files = mounted_files(out, pod_spec, container, tmp)
        for pod in pods(workload):
            env = container_env(out, container, pod)
            lines[pod] = parse_role_line(container["args"], files=files, env=env)
    return lines


def test_every_command_line_is_accepted_and_wired(
    rendered: tuple[str, Rendered], tmp_path: Path
) -> None:
    name, out = rendered
    values = VALUE_SETS[name]
    lines = role_lines(out, tmp_path)
    metas = {pod: line.config for pod, line in lines.items() if isinstance(line.config, MetaConfig)}
    every_node = {
        pod: line.config for pod, line in lines.items() if isinstance(line.config, NodeConfig)
    }
    nodes = {pod: node for pod, node in every_node.items() if node.role == "data"}
    queries = {pod: node for pod, node in every_node.items() if node.role == "query"}
    assert len(metas) == values.get("meta", {}).get("replicas", 2)
    assert len(nodes) == values.get("dataNode", {}).get("replicas", 3)
    assert len(queries) == values.get("queryNode", {}).get("replicas", 0)
    if queries:
        query_set = out.one("StatefulSet", f"{FULLNAME}-query")
        query_headless = out.one("Service", query_set["spec"]["serviceName"])
        out.one("Service", f"{FULLNAME}-query")
        out.one("PodDisruptionBudget", f"{FULLNAME}-query")
        for pod, query in queries.items():
            assert query.advertise == (
                f"{pod.name}.{query_headless['metadata']['name']}.{NAMESPACE}.svc.cluster.local:"
                f"{query.grpc_port}"
            )
            # Every other setting is the data nodes' (one config map, the same environment).
            data = next(iter(nodes.values()))
            assert (query.meta, query.wal, query.store, query.catalog) == (
                data.meta,
                data.wal,
                data.store,
                data.catalog,
            )
    else:
        assert not [
            m for m in out.manifests if m["metadata"]["name"].startswith(f"{FULLNAME}-query")
        ]

    meta_service = out.one("Service", f"{FULLNAME}-meta")
    etcd = values.get("etcd", {}).get("endpoints", ["etcd:2379"])
    for pod, meta in metas.items():
        assert meta.etcd == ",".join(etcd)
        assert meta.advertise == f"{pod.ip}:{meta.grpc_port}"
        assert meta.bind == "0.0.0.0"
        assert meta_service["spec"]["ports"][0]["port"] == meta.grpc_port

    statefulset = out.one("StatefulSet", f"{FULLNAME}-data")
    headless = out.one("Service", statefulset["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    brokers = values.get("kafka", {}).get("brokerEndpoints", ["kafka:9092"])
    for pod, node in nodes.items():
        # A stable name per pod, resolvable through the headless Service.
        assert node.advertise == (
            f"{pod.name}.{headless['metadata']['name']}.{NAMESPACE}.svc.cluster.local:{node.grpc_port}"
        )
        assert (
            node.meta
            == f"{meta_service['metadata']['name']}:{meta_service['spec']['ports'][0]['port']}"
        )
        assert node.wal == "kafka://" + ",".join(brokers)
        assert node.store == "s3://gnomon/sst"
        if values.get("catalog", {}).get("backend") == "postgresql":
            assert node.catalog.startswith("postgresql://")
        else:
            assert node.catalog == f"etcd://{','.join(etcd)}/gnomon/catalog"
    assert len({node.advertise for node in nodes.values()}) == len(nodes)

    compaction = values.get("compactionNode", {})
    enabled = compaction.get("enabled", True)
    compactors = {
        pod: line.config
        for pod, line in lines.items()
        if isinstance(line.config, CompactionNodeConfig)
    }
    assert len(compactors) == (compaction.get("replicas", 2) if enabled else 0)
    for node in nodes.values():
        assert node.compaction_mode == ("offload" if enabled else "local")
    for pod, compactor in compactors.items():
        assert compactor.advertise == f"{pod.ip}:{compactor.grpc_port}"
        assert compactor.meta == next(iter(nodes.values())).meta
        # It reads and writes the data nodes' SSTs.
        assert {(compactor.store, compactor.s3_endpoint)} == {
            (node.store, node.s3_endpoint) for node in nodes.values()
        }
        assert compactor.executor == compaction.get("executor", "local")


def test_secrets_stay_out_of_the_config_map() -> None:
    out = render(VALUE_SETS["postgresql-catalog"])
    text = yaml.safe_dump(out.one("ConfigMap", FULLNAME))
    assert "pw@" not in text and "not-a-real-secret" not in text
    assert "catalog" not in yaml.safe_dump(out.one("ConfigMap", FULLNAME)["data"]["node.toml"])


def test_an_existing_secret_replaces_the_charts() -> None:
    out = render(VALUE_SETS["existing-secret"])
    assert out.of_kind("Secret") == []
    refs = {
        var["valueFrom"]["secretKeyRef"]["name"]
        for var in out.one("StatefulSet", f"{FULLNAME}-data")["spec"]["template"]["spec"][
            "containers"
        ][0]["env"]
        if "secretKeyRef" in var.get("valueFrom", {})
    }
    assert refs == {"gnomon-credentials-of-my-own"}


def test_a_postgresql_catalog_without_its_url_is_refused() -> None:
    with pytest.raises(helm_python.HelmError, match="postgresqlUrl"):
        render({"catalog": {"backend": "postgresql"}})


def test_probes_resources_and_disruption_budgets(rendered: tuple[str, Rendered]) -> None:
    _, out = rendered
    workloads = out.of_kind("Deployment") + out.of_kind("StatefulSet")
    budgets = out.of_kind("PodDisruptionBudget")
    for workload in workloads:
        template = workload["spec"]["template"]
        (container,) = template["spec"]["containers"]
        assert container["resources"]["requests"], workload["metadata"]["name"]
        assert "readinessProbe" in container and "livenessProbe" in container
        assert template["spec"]["securityContext"]["runAsNonRoot"] is True
        labels = template["metadata"]["labels"]
        assert any(
            all(labels.get(k) == v for k, v in b["spec"]["selector"]["matchLabels"].items())
            for b in budgets
        ), f"no disruption budget covers {workload['metadata']['name']}"
    # The processes serving HTTP are probed on /health.
    for workload in out.of_kind("StatefulSet") + out.of_kind("Deployment"):
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        if any(p["name"] == "http" for p in container["ports"]):
            for probe in ("readinessProbe", "livenessProbe"):
                assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}
    assert out.one("Deployment", f"{FULLNAME}-meta")["spec"]["replicas"] >= 2


def test_notes_show_the_first_query(rendered: tuple[str, Rendered]) -> None:
    _, out = rendered
    assert f"port-forward svc/{FULLNAME}-data 5440:5440" in out.notes
    assert "SELECT * FROM cpu" in out.notes


# -- the chart's README ---------------------------------------------------------------------------


def leaves(values: dict[str, Any], prefix: str = "") -> set[str]:
    found: set[str] = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            found |= leaves(value, f"{path}.")
        else:
            found.add(path)
    return found


def test_the_readme_documents_every_value() -> None:
    documented = set(re.findall(r"^\| `([\w.]+)` \|", (CHART / "README.md").read_text(), re.M))
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    keys = leaves(values)
    prefixes = {k.rsplit(".", i)[0] for k in keys for i in range(k.count(".") + 1)}
    assert documented <= prefixes, f"documented but not in values.yaml: {documented - prefixes}"
    undocumented = {k for k in keys if not any(k == d or k.startswith(f"{d}.") for d in documented)}
    assert not undocumented, f"values.yaml keys missing from README.md: {sorted(undocumented)}"


def schema_paths(schema: dict[str, Any], prefix: str = "") -> dict[str, bool]:
    """Each key the schema names -> whether its value is opaque to the schema (an object
    whose keys it does not list: resources, settings ...)."""
    found: dict[str, bool] = {}
    for key, sub in schema.get("properties", {}).items():
        found[f"{prefix}{key}"] = sub.get("type") == "object" and "properties" not in sub
        found |= schema_paths(sub, f"{prefix}{key}.")
    return found


def test_the_values_schema_knows_exactly_the_values() -> None:
    with helm_python.Chart.load(CHART) as chart:
        schema = chart.schema
        defaults = chart.values
    assert schema is not None
    paths = schema_paths(schema)
    keys = leaves(defaults)
    unknown = {
        k
        for k in keys
        if k not in paths and not any(k.startswith(f"{p}.") for p in paths if paths[p])
    }
    assert not unknown, f"values without a schema: {sorted(unknown)}"
    prefixes = {k.rsplit(".", i)[0] for k in keys for i in range(k.count(".") + 1)}
    assert set(paths) <= prefixes, f"schema entries not in values.yaml: {set(paths) - prefixes}"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"dataNode": {"replica": 5}}, "'replica' not allowed"),
        ({"compactionNode": {"executor": "spark"}}, "'local', 'ray'"),
        ({"catalog": {"backend": "sqlite"}}, "'etcd', 'postgresql'"),
        ({"meta": {"settings": {"shards": [1]}}}, "settings"),
    ],
)
def test_mistyped_values_are_refused(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm_python.HelmValuesError, match=message):
        render(values)
