"""The tracing part of the deployment files, checked without a Docker engine (as tests/unit/project/test_infra.py
does for the rest): docker-compose.yml's OpenTelemetry collector and Tempo, their configs under
infra/, Grafana's Tempo data source, and the worker settings that send spans there and log JSON.
Every file parses, every reference between them (service, port, mounted path, component name)
resolves."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from cyberjurors.config import Settings

from .test_infra import COMPOSE, INFRA, PROVISIONED_DATASOURCE, ROOT, env, exposed_ports, mounts, resolved

COLLECTOR = INFRA / "otel-collector.yml"
TEMPO = INFRA / "tempo.yml"
TEMPO_DATASOURCE = PROVISIONED_DATASOURCE.parent / "tempo.yml"


@pytest.fixture(scope="module")
def services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


@pytest.fixture(scope="module")
def collector() -> dict:
    return yaml.safe_load(COLLECTOR.read_text())


@pytest.fixture(scope="module")
def tempo() -> dict:
    return yaml.safe_load(TEMPO.read_text())


def mounted_config(service: dict, flag: str) -> Path:
    """The repository file mounted where the service's command-line flag (``--config=``,
    ``-config.file=``) says its config is."""
    [path] = [arg.split("=", 1)[1] for arg in service["command"] if arg.startswith(flag)]
    mounted = {target: (ROOT / source).resolve() for source, target in mounts(service) if source.startswith(".")}
    assert path in mounted, f"{path} is not mounted"
    return mounted[path]


def host_port(address: str) -> tuple[str, int]:
    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    assert parsed.hostname and parsed.port, address
    return parsed.hostname, parsed.port


def collector_problems(config: dict) -> list[str]:
    """What ``otelcol validate`` would refuse first: a pipeline or the service naming a component
    that is not configured, a traces pipeline without receivers or exporters."""
    problems = []
    service = config.get("service", {})
    for name in service.get("extensions", []):
        if name not in (config.get("extensions") or {}):
            problems.append(f"extension {name} is not configured")
    for pipeline, parts in service.get("pipelines", {}).items():
        for kind in ("receivers", "processors", "exporters"):
            for name in parts.get(kind, []):
                if name not in (config.get(kind) or {}):
                    problems.append(f"pipeline {pipeline}: {kind[:-1]} {name} is not configured")
        if not parts.get("receivers") or not parts.get("exporters"):
            problems.append(f"pipeline {pipeline} needs receivers and exporters")
    if "traces" not in service.get("pipelines", {}):
        problems.append("no traces pipeline")
    return problems


def test_compose_runs_a_collector_and_tempo_on_pinned_images(services: dict) -> None:
    assert re.fullmatch(r"otel/opentelemetry-collector-contrib:\d+\.\d+\.\d+", services["otel-collector"]["image"])
    assert re.fullmatch(r"grafana/tempo:\d+\.\d+\.\d+", services["tempo"]["image"])
    assert services["tempo-init"]["image"] == services["tempo"]["image"]


def test_the_collector_config_is_complete(services: dict, collector: dict) -> None:
    assert mounted_config(services["otel-collector"], "--config=") == COLLECTOR
    assert collector_problems(collector) == []
    assert collector["service"]["pipelines"]["traces"]["processors"][0] == "memory_limiter", (
        "the memory limiter goes first, so it sees everything"
    )


def test_a_collector_config_naming_a_missing_component_fails(collector: dict) -> None:
    broken = copy.deepcopy(collector)
    broken["service"]["pipelines"]["traces"]["exporters"].append("otlp/jaeger")
    del broken["processors"]["batch"]
    assert len(collector_problems(broken)) == 2


def test_workers_and_the_producer_send_spans_to_the_collectors_otlp_http_receiver(
    services: dict, collector: dict
) -> None:
    receiver = host_port(collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"])
    for name in ("worker", "producer"):
        url = env(services[name])["OTEL_EXPORTER_OTLP_ENDPOINT"]
        host, port = host_port(url)
        assert urlparse(url).scheme == "http" and urlparse(url).path in ("", "/"), "a base URL: /v1/traces is added"
        assert host == "otel-collector" and port == receiver[1] and port in exposed_ports(services[host]), name
        # the settings read it as otlp_endpoint, so tracing is on there
        assert Settings(llm_backend="offline", otlp_endpoint=url).otlp_endpoint == url


def test_the_collector_exports_to_tempos_otlp_receiver(services: dict, collector: dict, tempo: dict) -> None:
    exporters = collector["service"]["pipelines"]["traces"]["exporters"]
    [to_tempo] = [collector["exporters"][e] for e in exporters if e.split("/")[0] == "otlp"]  # OTLP/gRPC
    host, port = host_port(to_tempo["endpoint"])
    assert host == "tempo" and port in exposed_ports(services["tempo"])
    assert host_port(tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"])[1] == port
    assert "tempo" in services["otel-collector"]["depends_on"]


def test_tempo_keeps_its_data_in_its_volume(services: dict, tempo: dict) -> None:
    assert mounted_config(services["tempo"], "-config.file=") == TEMPO
    volumes = {target: source for source, target in mounts(services["tempo"])}
    [data] = [target for target, source in volumes.items() if source == "tempo-data"]
    storage = tempo["storage"]["trace"]
    assert storage["backend"] == "local"
    for path in (storage["wal"]["path"], storage["local"]["path"]):
        assert path.startswith(data + "/"), f"{path} is outside the volume at {data}"
    # the one-shot job that gives the volume to Tempo's user runs first, on the same volume
    init = services["tempo-init"]
    assert ("tempo-data", data) in mounts(init) and data in init["entrypoint"]
    assert services["tempo"]["depends_on"]["tempo-init"]["condition"] == "service_completed_successfully"


def test_grafana_reads_tempo_as_a_provisioned_data_source(services: dict, tempo: dict) -> None:
    mounted = {
        target: (ROOT / source).resolve() for source, target in mounts(services["grafana"]) if source.startswith(".")
    }
    assert mounted["/etc/grafana/provisioning/datasources"] == TEMPO_DATASOURCE.parent
    [source] = yaml.safe_load(TEMPO_DATASOURCE.read_text())["datasources"]
    assert source["type"] == "tempo" and source["uid"]
    host, port = host_port(source["url"])
    assert host == "tempo" and port == tempo["server"]["http_listen_port"] and port in exposed_ports(services["tempo"])
    uids = [
        d["uid"] for f in TEMPO_DATASOURCE.parent.glob("*.yml") for d in yaml.safe_load(f.read_text())["datasources"]
    ]
    assert len(uids) == len(set(uids)), "data source uids must be unique"


def test_the_image_logs_json(services: dict) -> None:
    text = (ROOT / "Dockerfile").read_text()
    [value] = re.findall(r"CYBERJURORS_LOG_FORMAT=(\S+)", text)
    assert Settings(llm_backend="offline", log_format=value).log_format == "json"
    for name in ("worker", "producer"):  # compose leaves the image's default alone
        assert resolved(env(services[name]).get("CYBERJURORS_LOG_FORMAT", value)) == "json"
