"""Broker faults, with the real embedded broker and real worker processes: a worker whose broker
restarts (the embedded one is in-memory: topics, offsets and changelogs are gone) exits with
EXIT_BROKER_LOST for its supervisor, and the worker started again becomes ready and judges; a fresh
worker started at once beside the stale one does too; SIGTERM to a worker whose broker is dead ends
it within ``stop_deadline_s``; the watch's rules, read against a real broker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cyberjurors.config import KafkaTimeouts, Settings
from cyberjurors.kafka.cluster import TOPICS, ensure_topics
from cyberjurors.schemas import DisputeCase
from cyberjurors.streams.worker import (
    EXIT_BROKER_LOST,
    EXIT_STOP_DEADLINE,
    BrokerView,
    BrokerWatch,
    broker_view,
    lost_state,
    went_back,
)
from cyberjurors.tooling.broker import free_port, start_broker, stop_process
from cyberjurors.tooling.clients import await_outcomes, case_event, produce
from cyberjurors.tooling.worker_process import WorkerProcess

from ..conftest import EXAMPLES

pytestmark = pytest.mark.integration

READY = "[^Worker]: Ready"
WAIT_S = 180  # a bound on each wait, never a measurement


class Broker:
    """An embedded broker of this test's own, on a fixed port, that the test stops and starts again;
    with ``cluster_id``, under that id on every start (as a Tansu started by hand keeps its own)."""

    def __init__(self, log: Path, cluster_id: str | None = None) -> None:
        self.port, self.log, self.cluster_id = free_port(), log, cluster_id
        self.process: subprocess.Popen | None = None
        self.bootstrap = ""

    def start(self) -> Broker:
        self.process, self.bootstrap = start_broker(self.port, log=self.log, cluster_id=self.cluster_id)
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
            self.process = None


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(tmp_path / "tansu.log").start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def fault_settings(settings: Settings, own_broker: Broker) -> Settings:
    return settings.model_copy(
        update={
            "kafka_bootstrap_servers": own_broker.bootstrap,
            # only a lost state ends a worker here
            "kafka_timeouts": KafkaTimeouts(broker_check_interval_s=0.5, broker_loss_exit_s=600.0, stop_deadline_s=5.0),
        }
    )


def a_case() -> tuple[str, object]:
    raw = json.loads(sorted((EXAMPLES / "cases").glob("*.json"))[0].read_text())
    raw["case_id"] = f"fault-{uuid.uuid4().hex[:8]}"
    return raw["case_id"], case_event(DisputeCase.model_validate(raw), "test")


async def judged(settings: Settings) -> None:
    """A new case sent now ends as a verdict."""
    case_id, event = a_case()
    await produce(settings, [event])
    got = await await_outcomes(settings, [case_id], timeout_s=WAIT_S)
    assert case_id in got, "no outcome"
    assert got[case_id].verdict is not None, got[case_id].dead_letter


def exit_code(worker: WorkerProcess, timeout_s: float = WAIT_S) -> int | None:
    try:
        return worker.process.wait(timeout=timeout_s)  # type: ignore[union-attr]
    except subprocess.TimeoutExpired:
        return None


def log_of(worker: WorkerProcess) -> str:
    return worker.log_path.read_text(errors="replace")


@contextlib.contextmanager
def running(worker: WorkerProcess) -> Iterator[WorkerProcess]:
    try:
        yield worker.start()
    finally:
        worker.kill()


async def restart(broker: Broker) -> None:
    broker.stop()
    await asyncio.to_thread(broker.start)


@pytest.fixture
async def serving(fault_settings: Settings, tmp_path: Path) -> AsyncIterator[WorkerProcess]:
    """A worker on the test's own broker, ready and with one case judged: what each fault hits."""
    await ensure_topics(fault_settings)
    with running(WorkerProcess(fault_settings, tmp_path / "worker.log")) as worker:
        assert await asyncio.to_thread(worker.wait_for, READY), log_of(worker)[-3000:]
        await judged(fault_settings)
        yield worker


async def test_a_broker_restart_ends_the_worker_and_the_worker_started_again_judges(
    fault_settings: Settings, own_broker: Broker, serving: WorkerProcess
):
    await restart(own_broker)
    code = await asyncio.to_thread(exit_code, serving)
    assert code == EXIT_BROKER_LOST, f"exit code {code}:\n{log_of(serving)[-3000:]}"
    assert "broker lost: the broker answers as cluster" in log_of(serving)

    serving.start()  # what its supervisor does
    assert await asyncio.to_thread(serving.wait_for, READY), log_of(serving)[-3000:]
    await judged(fault_settings)


async def test_a_fresh_worker_started_beside_the_stale_one_becomes_ready_and_judges(
    fault_settings: Settings, own_broker: Broker, serving: WorkerProcess, tmp_path: Path
):
    stale = serving
    await restart(own_broker)
    with running(WorkerProcess(fault_settings, tmp_path / "fresh.log")) as fresh:
        assert await asyncio.to_thread(fresh.wait_for, READY), log_of(fresh)[-3000:]
        await judged(fault_settings)
        assert fresh.alive()
    assert await asyncio.to_thread(exit_code, stale) == EXIT_BROKER_LOST, log_of(stale)[-3000:]


async def test_sigterm_ends_a_worker_whose_broker_is_dead_within_the_stop_deadline(
    fault_settings: Settings, own_broker: Broker, serving: WorkerProcess
):
    worker = serving
    own_broker.stop()
    assert await asyncio.to_thread(worker.wait_for, "Unable connect to node", timeout_s=60)
    worker.process.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
    # the bound the feature promises: the deadline plus room for a loaded machine
    code = await asyncio.to_thread(exit_code, worker, fault_settings.stop_deadline_s + 25)
    assert code is not None, "still running long after the stop deadline"
    assert code == EXIT_STOP_DEADLINE, f"exit code {code}:\n{log_of(worker)[-3000:]}"
    assert "after SIGTERM (stop_deadline_s)" in log_of(worker)


# --- the watch's rules, against the real broker ---------------------------------------------------


async def test_the_watch_reads_its_broker_and_names_what_was_lost(fault_settings: Settings):
    await ensure_topics(fault_settings)
    baseline = await broker_view(fault_settings, timeout_s=30)
    ours = {fault_settings.topic(name) for name in TOPICS}
    assert set(baseline.partitions) == ours and set(baseline.partitions.values()) == {fault_settings.partitions}
    assert baseline.cluster_id and baseline.cluster_id.startswith("cyberjurors-embedded-")
    assert await BrokerWatch(fault_settings, baseline).check() is None

    events = fault_settings.topic("disputes.events")
    assert "is gone" in lost_state(BrokerView(baseline.cluster_id, {}), baseline)
    regrown = BrokerView(baseline.cluster_id, baseline.partitions | {events: 4})
    assert f"topic {events} has 4 partitions, not 2" in lost_state(regrown, baseline)
    assert "answers as cluster 'tansu_cluster'" in lost_state(
        BrokerView("tansu_cluster", baseline.partitions), baseline
    )


async def test_the_watch_gives_an_unreachable_broker_broker_loss_exit_s(fault_settings: Settings):
    nowhere = fault_settings.model_copy(
        update={
            "kafka_bootstrap_servers": f"127.0.0.1:{free_port()}",
            "kafka_timeouts": fault_settings.kafka_timeouts.model_copy(update={"broker_loss_exit_s": 30.0}),
        }
    )
    now = [1000.0]
    watch = BrokerWatch(nowhere, BrokerView("c", {}), clock=lambda: now[0])
    assert await watch.check() is None  # unreachable since now
    now[0] += 29.0
    assert await watch.check() is None
    now[0] += 1.0
    reason = await watch.check()
    assert reason is not None and "has not answered for 30s" in reason


async def test_the_watch_tells_a_restart_under_the_same_cluster_id_by_end_offsets_that_went_back(
    settings: Settings, tmp_path: Path
):
    """A Tansu started by hand keeps its cluster id, and its topics may be created again (by
    ``cyberjurors topics``, a starting worker) before the watch sees them gone: only the partitions'
    end offsets, now below what they were, tell that the broker lost its log."""
    broker = Broker(tmp_path / "tansu.log", cluster_id="tansu_cluster").start()
    try:
        s = settings.model_copy(update={"kafka_bootstrap_servers": broker.bootstrap})
        await ensure_topics(s)
        cases = [a_case()[1] for _ in range(6)]  # spread over both partitions of disputes.events
        await produce(s, cases[:3])
        watch = BrokerWatch(s, await broker_view(s, timeout_s=30))
        assert sum(watch.ends.values()) > 0
        await produce(s, cases[3:])
        assert await watch.check() is None  # offsets that grow are what a broker does
        grown = dict(watch.ends)
        assert sum(grown.values()) > sum(watch.baseline.ends.values())

        await restart(broker)
        await ensure_topics(s)  # the same topics, the same partition counts, empty
        await produce(s, cases[:1])
        seen = await broker_view(s, timeout_s=30)
        assert seen.cluster_id == watch.baseline.cluster_id and lost_state(seen, watch.baseline) is None
        reason = await watch.check()
        assert reason is not None and "below the" in reason and "the broker lost its log" in reason, reason
        assert went_back(grown, grown) is None  # the control: the same offsets are no loss
    finally:
        broker.stop()
