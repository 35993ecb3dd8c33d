"""Consumer lag: how far the worker's consumer group is behind on each partition it consumes.

Read from the broker, the way Kafka's own tools (``kafka-consumer-groups --describe``) and KEDA's
Kafka scaler read it: the group's committed offsets (OffsetFetch) against each partition's end
offset (ListOffsets). Not from Faust's sensor (``cyberjurors_faust_topic_partition_end_offset``):
Faust moves an end offset only when a fetch hands this worker records from that partition, and only
for the partitions this worker holds, so the lag of a stalled or unassigned partition would freeze
or vanish — the very cases lag is watched for.

Every worker reports the whole group's lag, so it is there as long as any worker is up; dashboards
and alerts take ``max by (group, topic, partition)``. A failed read removes the series rather than
leaving stale numbers behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from mode import Service
from prometheus_client import Gauge

from ..config import Settings
from ..observability import metrics
from .cluster import client_options

log = logging.getLogger("cyberjurors.lag")

Lag = dict[tuple[str, int], int]  # (topic, partition) -> records not yet committed


def lag_of(end: int, committed: int | None, start: int) -> int:
    """Records not yet committed on one partition. Where the group has committed nothing, the worker
    starts from the log start (``auto_offset_reset`` earliest), so everything from there counts.
    Never negative: a broker may report an end offset below a commit (Tansu 0.6 reports the last
    batch's first offset as the end)."""
    base = committed if committed is not None and committed >= 0 else start
    return max(0, end - base)


class LagReader:
    """One admin client (the group's committed offsets) and one group-less consumer (end and start
    offsets), kept open between reads."""

    def __init__(self, settings: Settings, group: str, topics: Iterable[str]):
        self.settings = settings
        self.group = group
        self.topics = tuple(topics)
        self._admin: AIOKafkaAdminClient | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def _clients(self) -> tuple[AIOKafkaAdminClient, AIOKafkaConsumer]:
        if self._admin is None or self._consumer is None:
            admin = AIOKafkaAdminClient(**client_options(self.settings))
            consumer = AIOKafkaConsumer(**client_options(self.settings), group_id=None, enable_auto_commit=False)
            try:
                await admin.start()
                await consumer.start()
            except BaseException:
                await _close(admin, consumer)
                raise
            self._admin, self._consumer = admin, consumer
        return self._admin, self._consumer

    async def read(self) -> Lag:
        admin, consumer = await self._clients()
        known = await consumer.topics()  # all topics' metadata, without naming (and so creating) any
        partitions = [
            TopicPartition(topic, p)
            for topic in self.topics
            if topic in known
            for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        if not partitions:
            return {}
        committed = await admin.list_consumer_group_offsets(self.group, partitions=partitions)
        ends = await consumer.end_offsets(partitions)
        starts = await consumer.beginning_offsets(partitions)
        return {
            (tp.topic, tp.partition): lag_of(ends[tp], committed[tp].offset if tp in committed else None, starts[tp])
            for tp in partitions
        }

    async def close(self) -> None:
        admin, consumer, self._admin, self._consumer = self._admin, self._consumer, None, None
        await _close(admin, consumer)


async def _close(admin: AIOKafkaAdminClient | None, consumer: AIOKafkaConsumer | None) -> None:
    # a client of an unreachable broker may fail to close; there is nothing to keep
    with contextlib.suppress(Exception):
        if consumer is not None:
            await consumer.stop()
    with contextlib.suppress(Exception):
        if admin is not None:
            await admin.close()


class LagGauge:
    """``cyberjurors_consumer_lag_records`` for one group: a read replaces the group's series (partitions no
    longer read are removed); ``clear`` removes them all."""

    def __init__(self, group: str, gauge: Gauge = metrics.CONSUMER_LAG):
        self.group = group
        self.gauge = gauge
        self._shown: set[tuple[str, int]] = set()

    def publish(self, lag: Mapping[tuple[str, int], int]) -> None:
        for (topic, partition), value in lag.items():
            self.gauge.labels(self.group, topic, str(partition)).set(value)
        for topic, partition in self._shown - set(lag):
            self.gauge.remove(self.group, topic, str(partition))
        self._shown = set(lag)

    def clear(self) -> None:
        self.publish({})


class ConsumerLag(Service):
    """Reads the group's lag every ``lag_interval_s`` on the worker's event loop and publishes it.
    Started with the worker (before it joins the group), so a worker that never gets partitions
    still shows what is waiting."""

    def __init__(self, settings: Settings, group: str, topics: Iterable[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)  # mode's Service options, passed on
        self.interval_s = settings.lag_interval_s
        self.reader = LagReader(settings, group, topics)
        self.gauge = LagGauge(group)
        self._failing = False

    async def update(self) -> None:
        try:
            lag = await asyncio.wait_for(self.reader.read(), timeout=max(5.0, self.interval_s))
        except Exception as err:  # lag is an observation: a failed read must not stop the worker
            if not self._failing:
                log.warning(
                    "consumer lag not read (%s); the series are removed until a read succeeds",
                    err or type(err).__name__,
                )
            self._failing = True
            self.gauge.clear()
            await self.reader.close()  # a fresh connection next time
            return
        if self._failing:
            log.info("consumer lag read again")
        self._failing = False
        self.gauge.publish(lag)

    @Service.task
    async def _poll(self) -> None:
        await self.update()
        async for _ in self.itertimer(self.interval_s, name="consumer_lag"):
            await self.update()

    async def on_stop(self) -> None:
        await self.reader.close()
