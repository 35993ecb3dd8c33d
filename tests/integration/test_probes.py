"""The worker's probes on real workers: readiness follows the consumer group's assignment and
rebalances (tests/unit/streams/test_probes.py has the rest).

The test holds the group still with SIGSTOP: a frozen member neither heartbeats nor rejoins, so the
broker cannot finish a rebalance until it is resumed (or its session expires, 80 s here). That
makes "not ready until the group assigns partitions" and "not ready while rebalancing" states the
test can wait for rather than race."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cyberjurors.config import KafkaTimeouts, Settings
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.streams.app import CONSUMED
from cyberjurors.tooling.broker import free_port
from cyberjurors.tooling.worker_process import WorkerProcess

from ..unit.streams.test_probes import get

LOCAL = {"probe_host": "127.0.0.1", "metrics_host": "127.0.0.1"}


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
    # b holds every partition, then freezes (for seconds); its longer session keeps it a member the
    # broker waits for. Not longer than that: the embedded broker holds each join for half of it
    b = worker("b", kafka_timeouts=KafkaTimeouts(session_timeout_s=30)).start()
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
        await asyncio.gather(*(asyncio.to_thread(w.stop) for w in (a, b, c)))  # each may wait its stop deadline
