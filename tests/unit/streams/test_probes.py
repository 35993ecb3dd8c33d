"""The worker's probes (streams/probes.py): liveness answered by the event loop, startup and
readiness from the precedent base and the key service. Readiness following the consumer group on real workers:
tests/integration/test_probes.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import urllib.error
import urllib.request

import pytest

from cyberjurors.config import Settings
from cyberjurors.config.evidence import KeyServiceSettings
from cyberjurors.evidence.key_service import LocalKeys, key_wrap
from cyberjurors.observability import metrics
from cyberjurors.precedents.base import PrecedentBase
from cyberjurors.streams.app import CONSUMED, create_app
from cyberjurors.streams.probes import Health, ProbeServer
from cyberjurors.streams.worker import worker_services
from cyberjurors.tooling.broker import free_port


def get(url: str, timeout_s: float = 5) -> tuple[int, dict]:
    """(status, JSON body); raises OSError (a timeout included) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


# --- in one process -------------------------------------------------------------------------------


async def test_liveness_is_answered_by_the_event_loop_and_metrics_are_not(settings: Settings) -> None:
    """A stuck loop fails /livez (the client's timeout, as the kubelet's), while /metrics, served by
    prometheus-client's own thread, still answers: why the compose healthcheck moved off /metrics."""
    app = create_app(settings)
    probe_port, metrics_port = free_port(), free_port()
    assert metrics.serve(metrics_port, "127.0.0.1")
    server = ProbeServer(app.cyberjurors_health, "127.0.0.1", probe_port)
    await server.start()
    try:
        livez = f"http://127.0.0.1:{probe_port}/livez"
        assert await asyncio.to_thread(get, livez) == (200, {"status": "ok"})

        seen: dict[str, object] = {}
        done = threading.Event()

        def probe_while_blocked() -> None:
            try:
                seen["livez"] = get(livez, timeout_s=1)
            except OSError as err:  # the timeout: nothing on the loop can answer
                seen["livez"] = err
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as reply:
                seen["metrics"] = reply.status
            done.set()

        threading.Thread(target=probe_while_blocked, daemon=True).start()
        assert done.wait(timeout=120)  # blocks the event loop itself until the probes have had their answers
        assert isinstance(seen["livez"], OSError), seen
        assert seen["metrics"] == 200

        assert await asyncio.to_thread(get, livez) == (200, {"status": "ok"})  # the loop is free again
        status, body = await asyncio.to_thread(get, f"http://127.0.0.1:{probe_port}/readyz")
        assert (status, body["reasons"]) == (503, ["waiting for the consumer group to assign partitions"])
        assert await asyncio.to_thread(get, f"http://127.0.0.1:{probe_port}/startupz") == (
            200,
            {"status": "ok", "reasons": []},
        )  # no precedent base to load
        with pytest.raises(urllib.error.HTTPError):  # only the three paths
            await asyncio.to_thread(urllib.request.urlopen, f"http://127.0.0.1:{probe_port}/metrics", timeout=5)
    finally:
        await server.stop()


async def test_a_precedent_base_that_fails_to_open_ends_the_start_but_not_readiness(settings: Settings) -> None:
    """The first failed opening ends the start (the worker judges without precedents meanwhile), readiness
    stays false with the reason, and the opening is tried again in the background."""
    settings = settings.model_copy(
        update={"precedent_backend": "embedded", "embedding": {"model": str(settings.datadir / "no-such-model")}}
    )
    app = create_app(settings)
    health = app.cyberjurors_health
    assert health.not_started() == ["loading the precedent base (embedding model and index)"]
    await health.start()
    try:
        deadline = time.monotonic() + 60
        while health.not_started() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert health.not_started() == []
        reasons = health.not_ready()
        assert reasons[0] == "waiting for the consumer group to assign partitions"
        assert reasons[1].startswith("precedent base not open: ") and "no-such-model" in reasons[1]
        assert not health.precedents.is_open
    finally:
        await health.stop()


def test_the_probes_report_the_topics_the_agents_consume(settings: Settings) -> None:
    app = create_app(settings)
    sources = {topic for agent in app.agents.values() for topic in agent.channel.topics}
    assert sources == {settings.topic(name) for name in CONSUMED}
    assert app.cyberjurors_health.topics == sources


async def test_a_worker_whose_key_service_cannot_be_reached_is_not_ready(settings: Settings, tmp_path) -> None:
    """With media_encryption the worker's readiness asks the key service (the KEK file here: a secret
    unmounted under a running worker), and follows it back once it answers."""
    kek = tmp_path / "kek"
    kek.write_bytes(os.urandom(64))
    settings = settings.model_copy(
        update={
            "media_encryption": True,
            "case_key_secret": "k" * 32,
            "case_key_store": str(tmp_path / "keys"),
            "key_service": KeyServiceSettings(kek_file=kek),
            "probe_port": free_port(),
        }
    )
    app = create_app(settings)
    [server] = [s for s in worker_services(app, settings) if isinstance(s, ProbeServer)]
    health = server.health
    assert isinstance(health.key_service, LocalKeys)
    assert "checking the key service" in health.not_ready()  # not ready before it has answered once
    health.key_check_interval_s = 0.05
    await health.start()
    await server.start()
    try:
        readyz = f"http://127.0.0.1:{settings.probe_port}/readyz"
        deadline = time.monotonic() + 60
        while not health.key_service_checked and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not [r for r in health.not_ready() if "key service" in r]
        kek.unlink()
        deadline = time.monotonic() + 60
        while health.key_service_error is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        status, body = await asyncio.to_thread(get, readyz)
        [reason] = [r for r in body["reasons"] if "key service" in r]
        assert status == 503 and reason.startswith("key service unreachable: ") and str(kek) in reason
        kek.write_bytes(os.urandom(64))  # another KEK than the one it started with: still not ready
        await health.check_key_service()
        assert any("another KEK" in r for r in health.not_ready())
    finally:
        await server.stop()
        await health.stop()


async def test_readiness_fails_while_kms_cannot_be_reached(
    settings: Settings, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    service = KeyServiceSettings(
        kind="aws_kms",
        kms_key_id="alias/cj",
        kms_region="eu-west-1",
        kms_endpoint_url=f"http://127.0.0.1:{free_port()}",  # nothing listens there
        timeout_s=0.5,
    )
    health = Health(create_app(settings), PrecedentBase(settings, []), [], key_service=key_wrap(service))
    await health.check_key_service()
    [reason] = [r for r in health.not_ready() if "key service" in r]
    assert reason.startswith("key service unreachable: AWS KMS key alias/cj: cannot describe its key")
    assert Health(create_app(settings), PrecedentBase(settings, []), []).key_service is None  # off: not asked
