"""The worker's probes (streams/probes.py): liveness answered by the event loop, startup and
readiness from the precedent base, and readiness following the consumer group on real workers.

The rebalance test holds the group still with SIGSTOP: a frozen member neither heartbeats nor
rejoins, so the broker cannot finish a rebalance until it is resumed (or its session expires, 80 s
here). That makes "not ready until the group assigns partitions" and "not ready while
rebalancing" states the test can wait for rather than race.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from cyberjurors.config import Settings
from cyberjurors.observability import metrics
from cyberjurors.streams.app import CONSUMED, create_app
from cyberjurors.streams.broker import free_port
from cyberjurors.streams.kafka import ensure_topics
from cyberjurors.streams.probes import ProbeServer
from cyberjurors.streams.worker_process import WorkerProcess

LOCAL = {"probe_host": "127.0.0.1", "metrics_host": "127.0.0.1"}


def get(url: str, timeout_s: float = 5) -> tuple[int, dict]:
    """(status, JSON body); raises OSError (a timeout included) when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def poll(url: str, until: Callable[[int, dict], bool], timeout_s: float) -> tuple[int, dict]:
    """The first answer that satisfies ``until`` (connection refused counts as no answer yet)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            status, body = await asyncio.to_thread(get, url)
            if until(status, body):
                return status, body
        except OSError:
            status, body = 0, {}
        assert time.monotonic() < deadline, f"{url}: still {status} {body} after {timeout_s:g} s"
        await asyncio.sleep(0.2)


def answered(status: int, body: dict) -> bool:
    return status in (200, 503)


def ready(status: int, body: dict) -> bool:
    return status == 200


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
        update={"precedent_backend": "embedded", "embedding_model": str(settings.datadir / "no-such-model")}
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


# --- real workers in a consumer group ---------------------------------------------------------------


async def settled(urls: list[str], topic: str, timeout_s: float) -> list[dict]:
    """The workers' /readyz bodies once every one is ready and, read together, they share the
    topic's two partitions out exactly (each partition held by one worker): the group is stable."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            answers = [await asyncio.to_thread(get, url) for url in urls]
        except OSError:
            answers = []
        shares = [body["assigned"].get(topic, []) for _, body in answers]
        if (
            answers
            and all(status == 200 for status, _ in answers)
            and sorted(itertools.chain.from_iterable(shares)) == [0, 1]
        ):
            return [body for _, body in answers]
        assert time.monotonic() < deadline, f"not settled after {timeout_s:g} s: {answers}"
        await asyncio.sleep(0.5)


def freeze(worker: WorkerProcess) -> None:
    os.killpg(worker.process.pid, signal.SIGSTOP)  # type: ignore[union-attr]


def thaw(worker: WorkerProcess) -> None:
    os.killpg(worker.process.pid, signal.SIGCONT)  # type: ignore[union-attr]


@pytest.mark.integration
@pytest.mark.timeout(600)
async def test_readiness_follows_assignment_and_rebalances(settings: Settings, tmp_path: Path) -> None:
    await ensure_topics(settings)
    ports = {name: free_port() for name in "abc"}

    def worker(name: str, **update: object) -> WorkerProcess:
        s = settings.model_copy(
            update={"probe_port": ports[name], "datadir": tmp_path / f"faust-{name}", **LOCAL, **update}
        )
        return WorkerProcess(s, tmp_path / f"worker-{name}.log")

    def url(name: str, path: str = "readyz") -> str:
        return f"http://127.0.0.1:{ports[name]}/{path}"

    events = settings.topic("disputes.events")
    # b holds every partition, then freezes; its long session keeps it a member the broker waits for
    b = worker("b", session_timeout_s=80).start()
    a, c = worker("a"), worker("c")
    try:
        await poll(url("b"), ready, timeout_s=180)
        freeze(b)
        a.start()
        status, body = await poll(url("a"), answered, timeout_s=120)
        assert status == 503 and body["reasons"] == ["waiting for the consumer group to assign partitions"], body
        assert body["assigned"] == {}
        assert await asyncio.to_thread(get, url("a", "livez")) == (200, {"status": "ok"})
        assert (await asyncio.to_thread(get, url("a", "startupz")))[0] == 200  # started, just not assigned

        thaw(b)
        bodies = await settled([url("a"), url("b")], events, timeout_s=240)
        assert all(set(body["assigned"]) == {settings.topic(name) for name in CONSUMED} for body in bodies), bodies

        # a third worker joins while b is frozen: a gives up its partitions and is not ready until the
        # rebalance is over (b's rejoin), then ready again; with 2 partitions one worker holds none
        freeze(b)
        c.start()
        status, body = await poll(url("a"), lambda status, _: status == 503, timeout_s=180)
        assert "rebalancing: the consumer group is moving partitions between workers" in body["reasons"], body
        thaw(b)
        bodies = await settled([url(name) for name in "abc"], events, timeout_s=300)
        assert any(not body["assigned"] for body in bodies), "three workers, two partitions: one is ready with none"
    finally:
        if b.alive():
            thaw(b)
        for w in (a, b, c):
            await asyncio.to_thread(w.stop)
