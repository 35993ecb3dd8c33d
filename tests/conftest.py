"""Shared fixtures: one embedded broker per session; per test, fresh topics and a fresh group."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import faust
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.observability import tracing
from cyberjurors.tooling.broker import embedded_broker
from cyberjurors.tooling.clients import follow
from cyberjurors.tooling.worker_process import WorkerProcess, child_env

from .messages_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Provider settings from the developer's shell must not reach a test's settings (a real key or
    URL would send its calls out, or change which backend ``auto`` picks)."""
    for var in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "CYBERJURORS_SETTINGS_FILE",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with embedded_broker(log=tmp_path_factory.mktemp("broker") / "tansu.log") as bootstrap:
        yield bootstrap


@pytest.fixture
def settings(broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for var in (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "KAFKA_BOOTSTRAP_SERVERS",
        "ELASTICSEARCH_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    run = uuid.uuid4().hex[:8]
    return Settings(
        kafka_bootstrap_servers=broker,
        app_id=f"test-{run}",
        topic_prefix=f"t{run}.",
        partitions=2,
        datadir=tmp_path / "faust",
        media_root=EXAMPLES,
        llm_backend="offline",
        precedent_backend="none",  # tests of the precedent base turn it on with an index they build
        precedent_dir=tmp_path / "precedents",
        llm_call_log=tmp_path / "llm-calls.jsonl",
        kafka_profile="local",  # the embedded broker's short timeouts
        metrics_port=0,  # off: worker processes would all want 9464; tests of metrics pick a free port
        probe_port=0,  # off likewise (9465); tests of the probes pick a free port
        # off: letters add model calls after each verdict, which tests counting a case's calls would race;
        # tests/integration/test_letters.py turns them on
        letters=False,
    )


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    """A local server speaking the Messages and Chat Completions APIs, answers scripted per test."""
    s = ScriptedServer()
    await s.start()
    yield s
    await s.stop()


@contextlib.asynccontextmanager
async def worker_process(settings: Settings, log: Path, python: str = sys.executable) -> AsyncIterator[WorkerProcess]:
    await ensure_topics(settings)
    worker = WorkerProcess(settings, log, python=python).start()
    try:
        yield worker
    finally:
        await asyncio.to_thread(worker.stop)


@pytest.fixture
async def worker(settings: Settings, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[WorkerProcess]:
    async with worker_process(settings, tmp_path / "worker.log") as process:
        yield process
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        print((tmp_path / "worker.log").read_text()[-6000:])


@contextlib.asynccontextmanager
async def running_app(app: faust.App) -> AsyncIterator[faust.App]:
    """A Faust app started in the test's own event loop (for backends that live in the test)."""
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


async def read_topic(
    settings: Settings, topic: str, until: int, timeout_s: float = 120, keys: set[str] | None = None
) -> list[tuple[str, bytes]]:
    """Collect messages from a topic until `until` of them (for `keys`, if given) have arrived."""
    seen: list[tuple[str, bytes]] = []

    async def read() -> None:
        async for key, value in follow(settings, topic, idle_timeout_s=0.5):
            if keys is None or key in keys:
                seen.append((key, value))
            if len(seen) >= until:
                return

    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(read(), timeout_s)
    return seen


def cli(settings: Settings, *args: str, timeout: float = 120, **env_overrides: str) -> subprocess.CompletedProcess[str]:
    """The `cyberjurors` command in a child process, with the settings a command hands its worker."""
    env = child_env(settings) | env_overrides
    return subprocess.run(
        [sys.executable, "-m", "cyberjurors", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def calls(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans this process ends, in memory (installed as the service's tracer, removed after)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.install(None)
    provider.shutdown()
