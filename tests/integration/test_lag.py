"""Consumer lag (kafka/lag.py) on the embedded broker: the reader takes the group's commits against
the end offsets, and a worker's metrics show the lag of cases a stuck stage has not finished."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import client_options, ensure_topics
from cyberjurors.kafka.lag import LagReader
from cyberjurors.streams.app import CONSUMED
from cyberjurors.tooling.broker import free_port
from cyberjurors.tooling.clients import produce as produce_events
from cyberjurors.tooling.clients import read_events
from cyberjurors.tooling.worker_process import WorkerProcess

from ..conftest import EXAMPLES
from ..unit.observability.test_metrics import labelled, scrape_until


@pytest.mark.integration
async def test_the_reader_takes_the_groups_commits_against_the_end_offsets(settings: Settings) -> None:
    await ensure_topics(settings)
    events, ready = settings.topic("disputes.events"), settings.topic("disputes.intake")
    producer = AIOKafkaProducer(**client_options(settings), enable_idempotence=False)
    await producer.start()
    try:
        for partition, count in ((0, 5), (1, 2)):
            for n in range(count):  # one record per request: Tansu reports a batch's first offset as the end
                await producer.send_and_wait(events, f"e{n}".encode(), partition=partition)
    finally:
        await producer.stop()
    group = f"{settings.app_id}-lag"
    committer = AIOKafkaConsumer(**client_options(settings), group_id=group, enable_auto_commit=False)
    await committer.start()
    try:
        committer.assign([TopicPartition(events, 0)])
        await committer.commit({TopicPartition(events, 0): 3})
    finally:
        await committer.stop()

    missing = settings.topic("never-created")
    reader = LagReader(settings, group, [events, ready, missing])
    try:
        lag = await reader.read()
    finally:
        await reader.close()
    assert lag == {(events, 0): 2, (events, 1): 2, (ready, 0): 0, (ready, 1): 0}
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        assert missing not in await admin.list_topics(), "reading lag must not create a topic"
    finally:
        await admin.close()


async def partition_counts(settings: Settings, topic: str, total: int) -> Counter:
    """How many records each partition of ``topic`` holds, by reading them (not their offsets)."""
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    counts: Counter = Counter()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(settings.partitions)])
        while sum(counts.values()) < total:
            batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 60)
            for tp, records in batch.items():
                counts[tp.partition] += len(records)
    finally:
        await consumer.stop()
    return counts


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_metrics_show_the_lag_of_cases_a_stuck_stage_has_not_finished(settings: Settings, tmp_path: Path) -> None:
    """Every case is ingested (no lag on disputes.events) but stage I hangs on a model call that takes
    ten minutes, so nothing on disputes.intake is committed: its lag is every admitted case, on the
    partition the case is on."""
    port = free_port()
    settings = settings.model_copy(
        update={"metrics_port": port, "metrics_host": "127.0.0.1", "lag_interval_s": 0.5, "offline_latency_s": 600}
    )
    cases = read_events([EXAMPLES / "cases"])[:5]
    await ensure_topics(settings)
    await produce_events(settings, cases)
    events, ready = settings.topic("disputes.events"), settings.topic("disputes.intake")
    # one record per produce request, so the embedded broker's end offsets are exact
    worker = WorkerProcess(settings, tmp_path / "worker.log", env={"PRODUCER_MAX_BATCH_SIZE": "1"}).start()
    try:

        def settled(samples: dict) -> bool:
            by_topic = labelled_by_topic(samples)
            return by_topic.get(ready) == len(cases) and not by_topic.get(events)

        samples = await scrape_until(port, settled, timeout_s=180)
        assert labelled_by_topic(samples).get(ready) == len(cases), (tmp_path / "worker.log").read_text()[-3000:]
        shown = {
            (dict(labels)["topic"], dict(labels)["partition"]): value
            for (name, labels), value in samples.items()
            if name == "cyberjurors_consumer_lag_records"
        }
        assert {topic for topic, _ in shown} == {settings.topic(name) for name in CONSUMED}
        assert all(
            dict(labels)["group"] == settings.app_id
            for (name, labels) in samples
            if name == "cyberjurors_consumer_lag_records"
        )
        held = await partition_counts(settings, ready, len(cases))
        assert {p: shown[(ready, str(p))] for p in range(settings.partitions)} == {
            p: held[p] for p in range(settings.partitions)
        }
        assert sum(v for (topic, _), v in shown.items() if topic != ready) == 0
    finally:
        await asyncio.to_thread(worker.stop)


def labelled_by_topic(samples: dict) -> dict[str, float]:
    return labelled(samples, "cyberjurors_consumer_lag_records", "topic")
