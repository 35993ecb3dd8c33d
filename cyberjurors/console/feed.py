"""The console's reader: one consumer outside any group on the topics the console shows, each
record filed in the store with its partition's next offset, so a restarted console resumes where
it stopped (the offsets live in the store, not in the broker: nothing to clean up, no group to join).

disputes.rounds is internal, but it carries the case file after each round (evidence by reference,
the clue chain, every round's ballots, usage by stage), which is what the case page shows for a
verdict that was not escalated; an escalation carries the same record for its case.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, wait_exponential

from ..config import Settings
from ..kafka.cluster import client_options, ensure_topics
from ..kafka.producers import RECORD_OVERHEAD
from ..streams.worker import broker_view
from ..tooling.clients import opened_record, reader_seal
from .store import FILED_AS, Store

log = logging.getLogger("cyberjurors.console")
PRUNE_EVERY_S = 3600.0  # console_retention_s is counted in days: an hour late is no matter


@dataclass
class FeedStatus:
    connected: bool = False
    error: str | None = None
    read: int = 0
    lag: int | None = None  # records on the broker not yet stored, as of the last poll
    last_poll: float | None = None
    partitions: dict[str, int] = field(default_factory=dict)


def _logged(state: RetryCallState) -> None:
    err = state.outcome.exception() if state.outcome else None
    log.warning("console feed: %s; trying again in %.0fs", err, state.next_action.sleep if state.next_action else 0)


class Feed:
    def __init__(self, settings: Settings, store: Store, poll_s: float = 0.5):
        self.settings, self.store, self.poll_s = settings, store, poll_s
        self.status = FeedStatus()
        self.kinds = {settings.topic(name): kind for name, kind in FILED_AS.items()}
        self._pruned_at = 0.0

    async def run(self) -> None:
        """Follow the topics until cancelled. A broker that cannot be reached, or anything else that
        stops the reading, is tried again with backoff: the pages keep serving what is stored, and
        /healthz says what went wrong."""
        async for attempt in AsyncRetrying(
            wait=wait_exponential(multiplier=1, max=30), before_sleep=_logged, retry=retry_if_exception_type(Exception)
        ):
            with attempt:
                try:
                    await self._follow()
                except Exception as err:
                    if not isinstance(err, (KafkaError, OSError, TimeoutError)):
                        log.exception("console feed failed")
                    self.status.connected, self.status.error = False, str(err) or type(err).__name__
                    raise

    async def _follow(self) -> None:
        view = await broker_view(self.settings, timeout_s=10)
        if self.store.on_cluster(view.cluster_id):
            log.warning(
                "console feed: the broker is another cluster (%s) than before: its dead letters and offsets "
                "are read afresh; verdicts, records and decisions already stored are kept",
                view.cluster_id,
            )
        with contextlib.suppress(KafkaError):  # a console may lack the right to create topics; workers create them
            await ensure_topics(self.settings)
        consumer = AIOKafkaConsumer(
            **client_options(self.settings),
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=self.settings.kafka_fetch_max_wait_ms,
            max_partition_fetch_bytes=max(1 << 20, self.settings.intake_limits.max_event_bytes + RECORD_OVERHEAD),
        )
        seal = reader_seal(self.settings)
        await consumer.start()
        try:
            partitions = await self._assign(consumer)
            self.status.connected, self.status.error = True, None
            while True:
                batch = await consumer.getmany(timeout_ms=int(self.poll_s * 1000))
                for tp, records in batch.items():
                    if seal is not None:  # payload_encryption: opened; one nothing opens is a marker, not filed
                        records = [await opened_record(seal, r) for r in records]
                    await asyncio.to_thread(self._file, tp, records)
                self.status.lag = sum(
                    max(0, (consumer.highwater(tp) or 0) - (self.store.position(tp.topic, tp.partition) or 0))
                    for tp in partitions
                )
                self.status.last_poll = time.time()
                await self._prune()
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), 5)

    async def _prune(self) -> None:
        """``console_retention_s``: once per PRUNE_EVERY_S, what is older leaves the store."""
        keep = self.settings.console_retention_s
        if keep is None or time.time() - self._pruned_at < PRUNE_EVERY_S:
            return
        self._pruned_at = time.time()
        before = datetime.fromtimestamp(time.time() - keep, UTC)
        if deleted := await asyncio.to_thread(self.store.prune, before):
            log.info("console store: %d rows older than console_retention_s deleted", deleted)

    async def _assign(self, consumer: AIOKafkaConsumer) -> list[TopicPartition]:
        partitions = [
            TopicPartition(topic, p)
            for topic in self.kinds
            for p in sorted(consumer.partitions_for_topic(topic) or range(self.settings.partitions))
        ]
        consumer.assign(partitions)
        fresh = []
        for tp in partitions:
            at = self.store.position(tp.topic, tp.partition)
            if at is None:
                fresh.append(tp)
            else:
                consumer.seek(tp, at)  # past the end (a topic re-created): auto_offset_reset takes the earliest
        if fresh:
            await consumer.seek_to_beginning(*fresh)
        self.status.partitions = {t: sum(1 for tp in partitions if tp.topic == t) for t in self.kinds}
        return partitions

    def _file(self, tp: TopicPartition, records: list) -> None:
        kind = self.kinds[tp.topic]
        for record in records:
            self.store.apply(kind, record)
            self.status.read += 1
