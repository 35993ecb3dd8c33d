"""The deployment files, checked without a Docker engine: docker-compose.yml's structure and
references (the console behind its local TLS proxy among them), the Prometheus config, recording and alert rules (with promtool), Grafana
provisioning, and the dashboards (Grafana's dashboard JSON model, and every query naming only
metrics the workers export or the recording rules record).

``METRICS`` is the contract between the code (cyberjurors/observability/metrics.py) and the recording rules,
dashboards and alerts; tests/integration/test_prometheus_live.py checks the same queries against a real
Prometheus scraping a real worker.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from ...conftest import ROOT

INFRA = ROOT / "infra"
DASHBOARDS = ROOT / "dashboards"
COMPOSE = ROOT / "docker-compose.yml"
PROVISIONED_DATASOURCE = INFRA / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
PROVISIONED_DASHBOARDS = INFRA / "grafana" / "provisioning" / "dashboards" / "dashboards.yml"

# name -> type, as cyberjurors/observability/metrics.py defines them (counters carry their _total here)
METRICS: dict[str, str] = {
    "cyberjurors_case_latency_seconds": "histogram",  # {category}
    "cyberjurors_stage_latency_seconds": "histogram",  # {stage: focus|clues|round|verdict}
    "cyberjurors_llm_calls_total": "counter",  # {backend, model, role}
    "cyberjurors_llm_errors_total": "counter",  # {backend, model, role, kind}
    "cyberjurors_llm_latency_seconds": "histogram",  # {backend, model, role}
    "cyberjurors_llm_retries_total": "counter",  # {backend, model}
    "cyberjurors_llm_tokens_total": "counter",  # {backend, model, role, kind}
    "cyberjurors_llm_cost_usd_total": "counter",  # {backend, model, role}
    "cyberjurors_cases_in_flight": "gauge",
    "cyberjurors_verdicts_total": "counter",  # {winner, category}
    "cyberjurors_vote_margin": "histogram",
    "cyberjurors_rounds_used": "histogram",
    "cyberjurors_early_stops_total": "counter",
    "cyberjurors_dead_letters_total": "counter",  # {stage, reason}
    "cyberjurors_precedent_retrieval_seconds": "histogram",
    "cyberjurors_precedent_fallbacks_total": "counter",  # {reason}
    "cyberjurors_precedent_cold_starts_total": "counter",  # {category}
    "cyberjurors_seller_win_share_reference_ratio": "gauge",
    "cyberjurors_outcomes_total": "counter",  # {agreement: agree|disagree, real_winner, category}
    "cyberjurors_outcome_vote_error": "histogram",  # {category}
    "cyberjurors_consumer_lag_records": "gauge",  # {group, topic, partition}: the whole group's, per worker
    "cyberjurors_escalations_total": "counter",  # {reason, tier: first|appeal}
    "cyberjurors_escalated_verdicts_total": "counter",  # {tier}
    "cyberjurors_appeals_total": "counter",  # {appellant: buyer|seller}
    "cyberjurors_appeal_verdicts_total": "counter",  # {result: reversed|upheld}
    "cyberjurors_human_decisions_total": "counter",  # {agreement: agree|disagree}
}
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")


def exposed_names() -> set[str]:
    """The series names a scrape shows: histograms as _bucket/_sum/_count, the rest as named."""
    names = set()
    for name, kind in METRICS.items():
        names |= {name + suffix for suffix in HISTOGRAM_SERIES} if kind == "histogram" else {name}
    return names


def recording_rules() -> list[dict]:
    rules = yaml.safe_load((INFRA / "recording.yml").read_text())
    return [rule for group in rules["groups"] for rule in group["rules"]]


RECORDED = {rule["record"] for rule in recording_rules()}
EXPOSED = exposed_names() | RECORDED
"""What dashboards and alerts may name: the workers' series and the recording rules' (which
name only the workers' series or earlier records: ``test_recording_rules_follow_the_conventions``)."""
SCRAPED = {"up"}
"""What Prometheus itself writes for every target it scrapes, which alerts may name too (a worker
that is down exports nothing: only ``up`` says so)."""

# --- PromQL: which metric names does an expression use? ---------------------------------------------

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![\w:$.])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")
_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
    "inf",
    "nan",
    "Inf",
    "NaN",
}
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?P<selector>.+?)\s*,\s*(?P<label>\w+)\s*\)\s*$")


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords, label
    names (in matchers or by/on/... lists), durations or Grafana variables."""
    text = _STRINGS.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for match in _IDENT.finditer(text):
        word, call = match.group(1), match.group(2)
        if call or word in _KEYWORDS:
            continue
        names.add(word)
    return names


def unknown_metrics(expr: str, known: set[str] = EXPOSED) -> set[str]:
    """Names in ``expr`` that no worker exports and no recording rule records (a typo, a bare
    histogram name, a metric of another exporter): what makes a dashboard or an alert fail here."""
    return metric_names(expr) - known


def variable_query(variable: dict) -> tuple[str, str] | None:
    """(selector, label) of a Grafana ``label_values(selector, label)`` variable query."""
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    match = _LABEL_VALUES.match(query or "") if variable.get("type") == "query" else None
    return (match.group("selector"), match.group("label")) if match else None


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def load_dashboard(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def panel_queries(dashboard: dict) -> list[tuple[str, str]]:
    """(where, expr) for every query of every panel, rows' nested panels included."""
    out = []
    panels = list(dashboard.get("panels", []))
    while panels:
        panel = panels.pop(0)
        panels += panel.get("panels", [])
        for t in panel.get("targets", []):
            out.append((f"{dashboard['uid']} / {panel.get('title')} / {t.get('refId')}", t.get("expr", "")))
    return out


def alert_rules() -> list[dict]:
    rules = yaml.safe_load((INFRA / "alerts.yml").read_text())
    return [rule for group in rules["groups"] for rule in group["rules"]]


def dashboard_problems(dashboard: dict) -> list[str]:
    """Every query (and variable query) that names a metric the workers do not export."""
    problems = []
    for where, expr in panel_queries(dashboard):
        if not expr.strip():
            problems.append(f"{where}: empty query")
        elif unknown := unknown_metrics(expr):
            problems.append(f"{where}: unknown metrics {sorted(unknown)} in {expr}")
        elif not metric_names(expr):
            problems.append(f"{where}: names no metric: {expr}")
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable_query(variable)
        if variable.get("type") == "query" and query is None:
            problems.append(f"{dashboard['uid']} / ${variable.get('name')}: not a label_values(metric, label) query")
        elif query is not None and (unknown := unknown_metrics(query[0])):
            problems.append(f"{dashboard['uid']} / ${variable['name']}: unknown metrics {sorted(unknown)}")
    return problems


# --- docker-compose.yml ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


def env(service: dict) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) if "=" in item else (item, "") for item in raw)
    return {k: "" if v is None else str(v) for k, v in raw.items()}


def resolved(value: str, **given: str) -> str:
    """${VAR:-default} / ${VAR-default} -> default (what compose uses when VAR is unset), or the
    value given here for VAR; ${VAR:?message} must be given (compose refuses the file without it)."""

    def one(match: re.Match) -> str:
        name, kind, default = match.group(1), match.group(2), match.group(3) or ""
        if name in given:
            return given[name]
        assert kind != "?", f"{name} is required: {default}"
        return default

    return re.sub(r"\$\{(\w+)(?::?([-?])([^}]*))?\}", one, value)


def names_read(value: str) -> set[str]:
    """The variables a compose value reads."""
    return set(re.findall(r"\$\{(\w+)", value))


def mounts(service: dict) -> list[tuple[str, str]]:
    """(source, target) of each volume entry, short or long syntax."""
    out = []
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            out.append((str(volume.get("source", "")), str(volume["target"])))
        else:
            parts = volume.split(":")
            out.append((parts[0], parts[1]) if len(parts) > 1 else ("", parts[0]))
    return out


def exposed_ports(service: dict) -> set[int]:
    """Container ports a service listens on for the others: `expose` and the container side of `ports`."""
    ports = {int(str(p).split("/")[0]) for p in service.get("expose", [])}
    for mapping in service.get("ports", []):
        ports.add(int(str(mapping).split("/")[0].rsplit(":", 1)[-1]))
    return ports


def test_compose_has_the_stack(services: dict) -> None:
    assert {"kafka", "elasticsearch", "prometheus", "grafana", "worker", "topics", "producer"} <= set(services)
    for name, service in services.items():
        assert "image" in service or "build" in service, name


def test_compose_bind_mounts_exist_and_named_volumes_are_declared(compose: dict, services: dict) -> None:
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for source, target in mounts(service):
            if source.startswith((".", "/")):
                path = (ROOT / source).resolve() if source.startswith(".") else Path(source)
                assert path.exists(), f"{name}: mounts {source} at {target}, which is not in the repository"
                assert ROOT in path.parents or path == ROOT, f"{name}: {source} is outside the repository"
            elif source:
                assert source in declared, f"{name}: named volume {source} is not declared under volumes:"


def test_compose_build_context_has_the_dockerfile(services: dict) -> None:
    built = {name: s["build"] for name, s in services.items() if "build" in s}
    assert built, "nothing builds the app image"
    for name, build in built.items():
        context = build if isinstance(build, str) else build.get("context", ".")
        dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        assert (ROOT / context / dockerfile).is_file(), name
    # services that run the built image by tag must be able to find it: one service builds that tag
    tags = {s.get("image") for s in services.values() if "build" in s}
    for name, service in services.items():
        if str(service.get("image", "")).startswith("cyberjurors"):
            assert service["image"] in tags, f"{name} uses {service['image']}, which no service builds"


def test_depends_on_names_real_services_with_meaningful_conditions(services: dict) -> None:
    for name, service in services.items():
        deps = service.get("depends_on") or {}
        if isinstance(deps, list):
            deps = {d: {"condition": "service_started"} for d in deps}
        for dep, spec in deps.items():
            assert dep in services, f"{name} depends on {dep}, which is not a service"
            condition = (spec or {}).get("condition", "service_started")
            assert condition in ("service_started", "service_healthy", "service_completed_successfully")
            if condition == "service_healthy":
                assert "healthcheck" in services[dep], f"{name} waits for {dep} to be healthy; it has no healthcheck"
            if condition == "service_completed_successfully":
                assert str(services[dep].get("restart", "no")) == "no", f"{dep} is waited for as a one-shot job"


def test_worker_scales_and_is_configured_for_the_stack(services: dict) -> None:
    worker = services["worker"]
    assert "container_name" not in worker, "a fixed container name forbids --scale worker=N"
    assert not worker.get("ports"), "a fixed host port forbids --scale worker=N"
    assert worker.get("command") in (["worker"], "worker")
    e = env(worker)
    port = int(resolved(e["CYBERJURORS_METRICS_PORT"]))
    assert port in exposed_ports(worker)
    assert e["KAFKA_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert int(e["CYBERJURORS_PARTITIONS"]) >= 4, "partitions bound how many workers can share the load"
    assert e["CYBERJURORS_PRECEDENT_BACKEND"] == "elasticsearch" and e["ELASTICSEARCH_URL"]
    assert e["ANTHROPIC_API_KEY"].startswith("${ANTHROPIC_API_KEY"), "the key is passed through, not stored"
    assert resolved(e["CYBERJURORS_PROCESSING_GUARANTEE"]) in ("at_least_once", "exactly_once")
    assert e["CYBERJURORS_MEDIA_ROOT"].startswith("/app/examples")
    assert services["worker"]["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    # every one-shot job shares the worker's Kafka and topic settings (same partitions, same prefix)
    for job in ("topics", "producer"):
        j = env(services[job])
        for key in ("KAFKA_BOOTSTRAP_SERVERS", "CYBERJURORS_PARTITIONS", "CYBERJURORS_TOPIC_PREFIX"):
            assert j.get(key) == e.get(key), (job, key)
    assert services["topics"]["command"] == ["topics"]
    producer = services["producer"]["command"]
    assert producer[0] == "produce" and {"examples/cases", "examples/incremental"} <= set(producer)
    assert all((ROOT / p).is_dir() for p in producer[1:])


def test_worker_healthcheck_asks_the_readiness_probe(services: dict) -> None:
    """Not /metrics: prometheus-client answers it from a thread even when the worker's loop is stuck."""
    worker = services["worker"]
    port = int(resolved(env(worker)["CYBERJURORS_PROBE_PORT"]))
    assert port in exposed_ports(worker)
    check = " ".join(worker["healthcheck"]["test"])
    assert f"http://localhost:{port}/readyz" in check and "/metrics" not in check
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"CYBERJURORS_PROBE_PORT={port}" in dockerfile
    assert {"9464", str(port)} <= set(re.search(r"^EXPOSE (.+)$", dockerfile, re.M).group(1).split())


# what CONSOLE_PASSWORD_HASH holds: an argon2id hash (argon2-cffi's defaults) of "example"
PASSWORD_HASH = "$argon2id$v=19$m=65536,t=3,p=4$uYlUZgZtiRqJ9B1UcJHlUQ$72KU7rES2TqbF7IFZG19dSATi8qUF/1VgihG+wY3z4U"
SIGNING_KEY = "CYBERJURORS_OUTCOME_SIGNING_KEY"


def compose_settings(service: dict, monkeypatch: pytest.MonkeyPatch, **given: str):
    """The Settings a service's container starts with: its environment as compose resolves it
    (variables unset unless given), and nothing from the environment running the tests."""
    from cyberjurors.config import ECOSYSTEM_ENV, ENV_PREFIX, Settings

    for key in list(os.environ):
        if key.startswith(ENV_PREFIX) or key in ECOSYSTEM_ENV:
            monkeypatch.delenv(key)
    for key, value in env(service).items():
        monkeypatch.setenv(key, resolved(value, **given))
    return Settings()


def test_worker_metrics_and_probes_listen_beyond_loopback(services: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The package listens on loopback unless told: Prometheus scrapes each worker from its own container."""
    settings = compose_settings(services["worker"], monkeypatch)
    assert settings.metrics_host == "0.0.0.0" and settings.probe_host == "0.0.0.0"
    assert {settings.metrics_port, settings.probe_port} <= exposed_ports(services["worker"])


def test_console_sits_behind_a_local_tls_proxy(services: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The console listens on its container's every address (the proxy is another container), so it
    must know TLS ends in front (console_proxy.behind); it publishes nothing, and the proxy, the one
    way in, is published on the host's loopback only and forwards to the console's port."""
    console, proxy = services["console"], services["console-proxy"]
    assert console.get("command") in (["console"], "console") and console.get("image") == "cyberjurors:latest"
    settings = compose_settings(console, monkeypatch, CONSOLE_PASSWORD_HASH=PASSWORD_HASH)
    assert settings.console_proxy.behind is True
    assert settings.console_proxy.trusted == [], "no SSO proxy in the local stack: no identity headers believed"
    assert settings.console_host == "0.0.0.0" and settings.console_port in exposed_ports(console)
    assert not console.get("ports"), "the console's plain HTTP must not reach the host"
    assert re.fullmatch(r"caddy:\d+\.\d+\.\d+(-alpine)?", proxy["image"]), "a pinned release"
    assert proxy.get("ports"), "the proxy is the way in"
    for mapping in proxy["ports"]:
        assert str(mapping).startswith("127.0.0.1:"), f"{mapping}: published beyond this machine"
    command = proxy["command"]
    assert command[:2] == ["caddy", "reverse-proxy"] and "--internal-certs" in command
    frm, to = command[command.index("--from") + 1], command[command.index("--to") + 1]
    assert urlparse(frm).scheme == "https" and urlparse(frm).port in exposed_ports(proxy)
    assert {int(str(m).rsplit(":", 1)[1]) for m in proxy["ports"]} == {urlparse(frm).port}
    assert to == f"console:{settings.console_port}"
    assert proxy["depends_on"]["console"]["condition"] in ("service_started", "service_healthy")


def test_console_password_is_a_hash_from_the_environment(services: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """One user, whose argon2 hash comes from CONSOLE_PASSWORD_HASH, never written here; unset, the
    console refuses to start (an empty hash is no hash) while the rest of the stack runs."""
    from pydantic import ValidationError

    console = services["console"]
    users = env(console)["CYBERJURORS_CONSOLE_USERS"]
    assert names_read(users) == {"CONSOLE_PASSWORD_HASH"} and "$argon2" not in users
    settings = compose_settings(console, monkeypatch, CONSOLE_PASSWORD_HASH=PASSWORD_HASH)
    [(name, hashed)] = settings.console_users.items()
    assert hashed == PASSWORD_HASH and settings.console_user_roles[name], name
    with pytest.raises(ValidationError, match="console-password"):
        compose_settings(console, monkeypatch)
    for other in set(services) - {"console"}:
        assert "CYBERJURORS_CONSOLE_USERS" not in env(services[other]), other


def test_console_store_is_on_a_named_volume(compose: dict, services: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    console = services["console"]
    db = compose_settings(console, monkeypatch, CONSOLE_PASSWORD_HASH=PASSWORD_HASH).console_db
    assert db.is_absolute()
    named = {target: source for source, target in mounts(console) if source and not source.startswith((".", "/"))}
    holder = [target for target in named if db.is_relative_to(target)]
    assert holder, f"{db} is on no named volume: it would go with the container"
    assert named[holder[0]] in (compose.get("volumes") or {})
    # the volume is mounted where the image has a folder of its user's (a new volume takes its owner)
    assert holder[0] == "/data" and "chown cyberjurors:cyberjurors /data" in (ROOT / "Dockerfile").read_text()


def test_worker_and_console_share_the_signing_key(services: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The console signs human-panel decisions, the workers verify them: the same variable for both
    (one value in one place), a placeholder only for local use (the file's convention for secrets)."""
    worker, console = env(services["worker"]), env(services["console"])
    assert worker[SIGNING_KEY] == console[SIGNING_KEY]
    assert names_read(worker[SIGNING_KEY]) == {"OUTCOME_SIGNING_KEY"}
    given = {"OUTCOME_SIGNING_KEY": "k" * 44, "CONSOLE_PASSWORD_HASH": PASSWORD_HASH}
    for name in ("worker", "console"):
        assert compose_settings(services[name], monkeypatch, **given).outcome_signing_key == "k" * 44
        # the placeholder is a valid key, so the stack runs as it is
        assert (
            len(compose_settings(services[name], monkeypatch, CONSOLE_PASSWORD_HASH=PASSWORD_HASH).outcome_signing_key)
            >= 32
        )
    assert "production:" in COMPOSE.read_text().split("&outcome-signing-key", 1)[1].split("\n", 1)[0]
    holders = {name for name, s in services.items() if SIGNING_KEY in env(s)}
    assert holders == {"worker", "console"}, "only who signs and who verifies holds the key"


def test_urls_between_services_point_at_ports_they_listen_on(services: dict) -> None:
    def check(url_or_hostport: str, who: str) -> None:
        parsed = urlparse(url_or_hostport if "://" in url_or_hostport else f"tcp://{url_or_hostport}")
        assert parsed.hostname in services, f"{who}: {parsed.hostname} is not a service"
        assert parsed.port in exposed_ports(services[parsed.hostname]), f"{who}: {url_or_hostport}"

    worker = env(services["worker"])
    check(worker["KAFKA_BOOTSTRAP_SERVERS"], "worker Kafka")
    check(worker["ELASTICSEARCH_URL"], "worker Elasticsearch")
    datasource = yaml.safe_load(PROVISIONED_DATASOURCE.read_text())["datasources"][0]
    check(datasource["url"], "Grafana data source")
    kafka = env(services["kafka"])
    listeners = {urlparse(x.replace("://", "://h")).port for x in kafka["KAFKA_LISTENERS"].split(",")}
    assert (
        9092 in listeners
        and {int(p.rsplit(":", 1)[1]) for p in kafka["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(",")} <= listeners
    )


def test_kafka_is_a_kraft_combined_node(services: dict) -> None:
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    e = env(kafka)
    assert set(e["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert e["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{e['KAFKA_NODE_ID']}@kafka:")
    assert len(base64.urlsafe_b64decode(e["CLUSTER_ID"] + "==")) == 16, "CLUSTER_ID must be a base64 UUID"
    for key in ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"):
        assert e[key] == "1", f"{key}: a single node cannot replicate (and exactly_once needs the transaction log)"


def test_elasticsearch_is_a_local_single_node(services: dict) -> None:
    es = services["elasticsearch"]
    assert re.match(r"docker\.elastic\.co/elasticsearch/elasticsearch:9\.", es["image"])
    e = env(es)
    assert e["discovery.type"] == "single-node"
    assert e["xpack.security.enabled"] == "false"
    heap = dict(re.findall(r"-Xm([sx])(\S+)", e["ES_JAVA_OPTS"]))
    assert heap["s"] == heap["x"], "Elasticsearch wants -Xms equal to -Xmx"
    assert "production" in COMPOSE.read_text().split("elasticsearch:", 1)[1].split("healthcheck")[0].lower()


def test_dockerfile(services: dict) -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim\b", text, re.M)
    assert re.findall(r"^FROM (\S+)", text, re.M) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    assert "torch" not in " ".join(re.findall(r"^RUN .*(?:\n .*)*", text, re.M)), "the image is torch-free"
    assert "embedder fetch" in text, "the model is in the image, checked by its sha256"
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and user[-1] not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \["cyberjurors"\]', text, re.M)
    ignored = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", "data"} <= ignored
    copied = {src for line in re.findall(r"^COPY (.+)$", text, re.M) for src in line.split()[:-1]}
    # the package, its media, its metadata and licence, the lock it installs from
    for needed in ("cyberjurors", "examples", "pyproject.toml", "README.md", "LICENSE", "requirements/image.txt"):
        assert needed in copied and needed not in ignored, needed
    # the build's REVISION argument lands where cyberjurors_build_info reads it: under the venv's prefix
    from cyberjurors.observability.metrics import REVISION_FILE

    venv = re.search(r"python -m venv (\S+)", text).group(1)
    written = re.findall(r'"\$\{REVISION\}" > (\S+)', text)
    assert written == [f"{venv}/{REVISION_FILE.relative_to(sys.prefix)}"], written


# --- Prometheus -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prometheus_config() -> dict:
    return yaml.safe_load((INFRA / "prometheus.yml").read_text())


def test_prometheus_scrapes_ports_the_services_listen_on(prometheus_config: dict, services: dict) -> None:
    prometheus = services["prometheus"]
    targets = []
    for job in prometheus_config["scrape_configs"]:
        for sd in job.get("dns_sd_configs", []):
            assert sd.get("type", "SRV") == "A" and "port" in sd, "A records need a port"
            targets += [(job["job_name"], name.removeprefix("tasks."), int(sd["port"])) for name in sd["names"]]
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, port = target.rsplit(":", 1)
                targets.append((job["job_name"], "prometheus" if host == "localhost" else host, int(port)))
    assert any(service == "worker" for _, service, _ in targets), "the workers are not scraped"
    for job, service, port in targets:
        assert service in services, f"job {job} scrapes {service}, which is not a service"
        assert port in exposed_ports(services[service]), f"job {job}: {service} does not listen on {port}"
        metrics_port = env(services[service]).get("CYBERJURORS_METRICS_PORT")
        if metrics_port is not None:
            assert port == int(resolved(metrics_port)), f"job {job}: {service} serves metrics on {metrics_port}"
    listen = [a for a in prometheus.get("command", []) if a.startswith("--web.listen-address")]
    assert all(a.endswith(":9090") for a in listen)


def test_prometheus_config_and_rules_are_mounted_where_the_config_expects_them(
    prometheus_config: dict, services: dict
) -> None:
    mounted = {
        target: (ROOT / source).resolve() for source, target in mounts(services["prometheus"]) if source.startswith(".")
    }
    config_args = [a.split("=", 1)[1] for a in services["prometheus"]["command"] if a.startswith("--config.file=")]
    assert config_args and mounted[config_args[0]] == INFRA / "prometheus.yml"
    config_dir = Path(config_args[0]).parent
    assert prometheus_config["rule_files"]
    for rule_file in prometheus_config["rule_files"]:
        in_container = str(config_dir / rule_file)
        assert in_container in mounted, f"{rule_file} is not mounted at {in_container}"
        assert mounted[in_container] == (INFRA / rule_file).resolve()


def test_alert_rules_are_complete() -> None:
    rules = alert_rules()
    names = {r["alert"] for r in rules}
    assert names == {
        "CyberJurorsCaseLatencyHigh",
        "CyberJurorsLLMErrorRateHigh",
        "CyberJurorsDeadLettersGrowing",
        "CyberJurorsSellerWinShareDrift",
        "CyberJurorsOutcomeAccuracyLow",
        "CyberJurorsConsumerLagHigh",
        "CyberJurorsWorkerDown",
    }
    for rule in rules:
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        known = EXPOSED | SCRAPED
        assert not unknown_metrics(rule["expr"], known), (rule["alert"], unknown_metrics(rule["expr"], known))
        assert metric_names(rule["expr"]), rule["alert"]
    # the worker-down alert: one rule per missing worker, one for a fleet with none up
    down = {r["labels"]["severity"]: r["expr"] for r in rules if r["alert"] == "CyberJurorsWorkerDown"}
    assert set(down) == {"warning", "critical"} and "absent(" in down["critical"]


# level:metric:operations; levels are "cyberjurors" (the fleet) and "cyberjurors_<label>"
RECORD_NAME = re.compile(
    r"cyberjurors(?:_(?P<by>[a-z_]+))?:[a-z_]+:(?:ratio_rate|mean|increase)(?:1h|1d)|"
    r"cyberjurors:[a-z_]+:max"
)


def grouping(expr: str) -> set[frozenset[str]]:
    """The label sets of every `by (...)` in an expression."""
    return {frozenset(x.strip() for x in m.split(",")) for m in re.findall(r"\bby \(([^()]*)\)", expr)}


def test_recording_rules_follow_the_conventions() -> None:
    """Each record is named level:metric:operations, aggregates by job and the labels its level
    names (so it is fleet-wide: never per instance), names only the workers' metrics or the records
    before it, and its window is the one its name says."""
    seen: set[str] = set()
    for rule in recording_rules():
        name, expr = rule["record"], rule["expr"]
        match = RECORD_NAME.fullmatch(name)
        assert match, f"{name}: not cyberjurors[_<label>]:<metric>:<operation><window>"
        level = {"job", *([match.group("by")] if match.group("by") else [])}
        for by in grouping(expr):
            assert by == level, f"{name}: aggregates by {sorted(by)}, its level says {sorted(level)}"
        assert "instance" not in expr, f"{name}: a fleet-wide rule must not keep or pick instances"
        assert not unknown_metrics(expr, exposed_names() | seen), (name, unknown_metrics(expr, exposed_names() | seen))
        window = re.search(r"(1h|1d)$", name)
        assert set(re.findall(r"\[(\w+)\]", expr)) <= ({window.group(1)} if window else set()), name
        assert name not in seen, f"{name} recorded twice"
        seen.add(name)


def test_every_recording_rule_has_a_unit_test_from_two_workers_one_restarting() -> None:
    tests = yaml.safe_load((INFRA / "recording.test.yml").read_text())
    assert tests["rule_files"] == ["recording.yml"]
    checked = {
        name
        for case in tests["tests"]
        for check in case.get("promql_expr_test", [])
        for name in metric_names(check["expr"])
    }
    assert checked >= RECORDED, f"never checked: {RECORDED - checked}"
    first = tests["tests"][0]["input_series"]
    instances = {re.search(r'instance="([^"]+)"', s["series"]).group(1) for s in first}
    assert len(instances) >= 2, "the fleet case needs two workers"
    resets = [s["series"] for s in first if re.search(r"x\d+ \S+\+", s["values"])]
    assert resets, "the fleet case needs a worker whose counters restart"
    for case in tests["tests"]:
        for series in case["input_series"]:
            assert series["series"].split("{", 1)[0] in exposed_names(), series["series"]


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    tests = yaml.safe_load((INFRA / "alerts.test.yml").read_text())
    assert tests["rule_files"] == ["recording.yml", "alerts.yml"]
    fires, quiet = set(), set()
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
        for series in case["input_series"]:
            name = series["series"].split("{", 1)[0]
            assert name in exposed_names() | SCRAPED, f"test input {name} is not a metric the workers export"
    every = {r["alert"] for r in alert_rules()}
    assert fires == every, f"never seen firing: {every - fires}"
    assert quiet == every, f"never seen quiet: {every - quiet}"


PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool not installed: `make test` installs Debian's prometheus package "
    "(apt-get install prometheus, as root)",
)


def promtool(*args: str) -> subprocess.CompletedProcess:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


@needs_promtool
def test_promtool_check_config() -> None:
    result = promtool("check", "config", "infra/prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_check_rules() -> None:
    result = promtool("check", "rules", "infra/alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout
    result = promtool("check", "rules", "infra/recording.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(RECORDED)} rules found" in result.stdout


@needs_promtool
@pytest.mark.parametrize("tests", ["alerts.test.yml", "recording.test.yml"])
def test_promtool_test_rules(tests: str) -> None:
    result = promtool("test", "rules", f"infra/{tests}")
    assert result.returncode == 0, result.stdout + result.stderr


# --- Grafana ---------------------------------------------------------------------------------------


def test_grafana_provisioning_points_at_the_mounted_dashboards(services: dict) -> None:
    grafana = services["grafana"]
    mounted = {target: (ROOT / source).resolve() for source, target in mounts(grafana) if source.startswith(".")}
    assert mounted["/etc/grafana/provisioning/datasources"] == PROVISIONED_DATASOURCE.parent
    assert mounted["/etc/grafana/provisioning/dashboards"] == PROVISIONED_DASHBOARDS.parent
    provider = yaml.safe_load(PROVISIONED_DASHBOARDS.read_text())["providers"][0]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    assert mounted["/var/lib/grafana/dashboards"] == DASHBOARDS
    assert 3000 in exposed_ports(grafana)
    datasources = yaml.safe_load(PROVISIONED_DATASOURCE.read_text())["datasources"]
    assert [d["type"] for d in datasources] == ["prometheus"] and datasources[0]["uid"]


# --- dashboards ------------------------------------------------------------------------------------

PANEL_TYPES = {"timeseries", "stat", "gauge", "bargauge"}


def test_there_are_four_dashboards_with_unique_uids() -> None:
    files = dashboard_files()
    titles = {load_dashboard(f)["title"] for f in files}
    assert titles == {
        "CyberJurors / Overview",
        "CyberJurors / Latency and stages",
        "CyberJurors / Tokens and cost",
        "CyberJurors / Verdicts, fairness and drift",
    }
    uids = [load_dashboard(f)["uid"] for f in files]
    assert len(set(uids)) == len(uids)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,40}", uid) for uid in uids), "Grafana uids: 40 chars at most"


@pytest.mark.parametrize("path", dashboard_files(), ids=lambda p: p.name)
def test_dashboard_follows_grafanas_dashboard_model(path: Path) -> None:
    """The classic dashboard JSON model (what file provisioning and the import UI read):
    top-level fields, a datasource template variable defaulting to the provisioned data source,
    panels of current types on the 24-column grid without overlaps, each query with a refId."""
    d = load_dashboard(path)
    uid = yaml.safe_load(PROVISIONED_DATASOURCE.read_text())["datasources"][0]["uid"]
    assert d["schemaVersion"] >= 39
    assert d["id"] is None, "a provisioned dashboard must not carry a database id"
    for key, kind in {
        "title": str,
        "uid": str,
        "panels": list,
        "templating": dict,
        "time": dict,
        "annotations": dict,
        "tags": list,
        "editable": bool,
        "refresh": str,
        "version": int,
    }.items():
        assert isinstance(d[key], kind), key
    variables = {v["name"]: v for v in d["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus" and ds["current"]["value"] == uid
    ids, cells = set(), set()
    for panel in d["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["title"]
        assert panel["id"] not in ids
        ids.add(panel["id"])
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        g = panel["gridPos"]
        assert g["w"] > 0 and g["h"] > 0 and g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["y"] >= 0, panel["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps another panel"
                cells.add((x, y))
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs)
        for t in panel["targets"]:
            assert t["expr"].strip() and t["datasource"]["uid"] == "${datasource}"
        assert {"defaults", "overrides"} <= set(panel["fieldConfig"]) and isinstance(panel["options"], dict)
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == "${datasource}"


def test_dashboard_json_is_what_the_generator_writes() -> None:
    sys.path.insert(0, str(DASHBOARDS))
    try:
        import make_dashboards
    finally:
        sys.path.remove(str(DASHBOARDS))
    rendered = make_dashboards.render()
    assert sorted(rendered) == [p.name for p in dashboard_files()]
    for name, text in rendered.items():
        assert (DASHBOARDS / name).read_text(encoding="utf-8") == text, (
            f"{name} is stale: run python dashboards/make_dashboards.py"
        )
    assert make_dashboards.render() == rendered, "the generator is not deterministic"


def grafana_round_trip_losses(source: dict) -> list[str]:
    """Fields Grafana's dashboard model does not know, found by reading the JSON into the types
    Grafana generates from its schema (grafana-foundation-sdk: dashboard, panels, the options and
    field config of each panel plugin) and writing it back: whatever is dropped or changed."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the classic model says "prefer dashboardv2"
        from grafana_foundation_sdk.cog import plugins
        from grafana_foundation_sdk.cog.encoder import JSONEncoder
        from grafana_foundation_sdk.models import dashboard as model

        plugins.register_default_plugins()
        back = json.loads(json.dumps(model.Dashboard.from_json(source), cls=JSONEncoder))

    def diff(a: object, b: object, at: str) -> list[str]:
        if isinstance(a, dict) and isinstance(b, dict):
            return [f"{at}.{k}: dropped" for k in a if k not in b and a[k] is not None] + [
                x for k in a if k in b for x in diff(a[k], b[k], f"{at}.{k}")
            ]
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            return [x for n, (p, q) in enumerate(zip(a, b, strict=True)) for x in diff(p, q, f"{at}[{n}]")]
        return [] if a == b else [f"{at}: {a!r} read back as {b!r}"]

    return diff(source, back, "")


@pytest.mark.parametrize("path", dashboard_files(), ids=lambda p: p.name)
def test_grafanas_own_dashboard_types_read_every_field(path: Path) -> None:
    pytest.importorskip("grafana_foundation_sdk", reason="grafana-foundation-sdk (the test extra) not installed")
    assert grafana_round_trip_losses(load_dashboard(path)) == []


def test_the_grafana_type_check_catches_unknown_fields() -> None:
    pytest.importorskip("grafana_foundation_sdk", reason="grafana-foundation-sdk (the test extra) not installed")
    dashboard = load_dashboard(dashboard_files()[0])
    dashboard["panels"][0]["gridPosition"] = dashboard["panels"][0].pop("gridPos")
    dashboard["panels"][1]["options"]["reduceOption"] = {}
    assert len(grafana_round_trip_losses(dashboard)) == 2


@pytest.mark.parametrize("path", dashboard_files(), ids=lambda p: p.name)
def test_every_dashboard_query_names_only_exported_metrics(path: Path) -> None:
    assert dashboard_problems(load_dashboard(path)) == []


def test_a_dashboard_naming_a_missing_metric_fails() -> None:
    dashboard = copy.deepcopy(load_dashboard(dashboard_files()[0]))
    target = dashboard["panels"][0]["targets"][0]
    target["expr"] = target["expr"].replace("cyberjurors_", "cyberjurors_missing_", 1)
    assert dashboard_problems(dashboard)
    # hidden behind `or vector(0)`, or a bare histogram name, or another exporter's metric: still caught
    for expr in (
        "sum(rate(cyberjurors_verdict_total[5m])) or vector(0)",
        "histogram_quantile(0.9, sum by (le) (rate(cyberjurors_case_latency_seconds[5m])))",
        "up == 0",
        "cyberjurors_llm_calls_total_bucket",
    ):
        target["expr"] = expr
        assert dashboard_problems(dashboard), expr


def test_metric_name_extraction() -> None:
    assert metric_names(
        "sum by (le, category) (rate(cyberjurors_case_latency_seconds_bucket"
        '{category="food", instance=~"$instance"}[$__rate_interval]))'
    ) == {"cyberjurors_case_latency_seconds_bucket"}
    assert metric_names("a / on (instance) group_left (x) b and c offset 5m > bool 1e3 or vector(0)") == {"a", "b", "c"}
    assert metric_names('sum(x{le="+Inf", a=~"{b}"}) without (le) / scalar(sum(y))') == {"x", "y"}
    assert metric_names("abs(m - n) > 0.15 and on (instance) sum by (instance) (increase(o[6h])) >= 30") == {
        "m",
        "n",
        "o",
    }
