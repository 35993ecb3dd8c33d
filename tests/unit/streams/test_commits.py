"""Offset commits never pass a message no handler finished (kafka/transport.py, SafeAcks).

Faust's own consumer, as the worker builds it, fed what happens to messages: the consumer fetches
them, streams take them (in flight), handlers finish them (``mark_handled``, as ``app.each``
reports) and streams ack them, or, during a rebalance, drop them, acked (Faust's pure-Python
stream) or not (its compiled one). No broker is needed to decide which offset to commit. Each
test also asks Faust's unmodified consumer, in the same state, for the commit it gets wrong. The
whole path (workers joining and leaving while cases queue) is tests/integration/test_rebalance.py and
bench/rebalance.py.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.structs import ConsumerRecord
from faust.transport.drivers.aiokafka import Consumer as FaustConsumer
from faust.types import TP

from cyberjurors.config import Settings
from cyberjurors.kafka.transport import SafeAcks
from cyberjurors.streams.app import faust_app

TOPIC = "t.disputes.focus"
TP0 = TP(TOPIC, 0)


@pytest.fixture
async def consumers() -> tuple[SafeAcks, FaustConsumer]:
    """(ours, Faust's own), each of an app that consumes TOPIC with acks."""
    made = []
    for ours in (True, False):
        app = faust_app(Settings(llm_backend="offline", precedent_backend="none"))
        if not ours:
            app.transport.Consumer = FaustConsumer
        app.topics.add(app.topic(TOPIC))
        await app.topics._update_indices()  # what subscribing does: TOPIC's messages are acked
        made.append(app.consumer)
    assert isinstance(made[0], SafeAcks) and not isinstance(made[1], SafeAcks)
    return made[0], made[1]


class Partition:
    """One partition of TOPIC as both consumers see it, from committed offset ``committed``."""

    def __init__(self, consumers: tuple[SafeAcks, FaustConsumer], committed: int | None, offsets: range):
        self.consumers = consumers
        self.messages = {}
        for consumer in consumers:
            consumer._committed_offset[TP0] = committed
            for offset in offsets:  # fetched, in order
                record = ConsumerRecord(TOPIC, 0, offset, 0, 0, b"case", b"{}", None, 4, 2, ())
                self.messages[consumer, offset] = consumer._to_message(TP0, record)

    def take(self, *offsets: int) -> None:
        """A stream takes them from its channel: in flight."""
        for (consumer, offset), message in self.messages.items():
            if offset in offsets:
                message.tracked = True
                message.incref()
                consumer._unacked_messages.add(message)

    def finish(self, *offsets: int) -> None:
        """Their handler returns: ``app.each`` reports it, then the stream acks."""
        for (consumer, offset), message in self.messages.items():
            if offset in offsets:
                if isinstance(consumer, SafeAcks):
                    consumer.mark_handled(message)
                message.ack(consumer)

    def drop(self, *offsets: int, acked: bool) -> None:
        """A stream drops them in a rebalance: Faust's pure-Python stream acks them, its compiled one does not."""
        if acked:
            for (consumer, offset), message in self.messages.items():
                if offset in offsets:
                    message.incref()
                    message.ack(consumer)

    def commit(self) -> tuple[int | None, int | None]:
        """(ours, Faust's) offset to commit now; committed, as Faust records it."""
        offsets = tuple(c._new_offset(TP0) for c in self.consumers)
        for consumer, offset in zip(self.consumers, offsets, strict=True):
            if offset is not None:
                consumer._committed_offset[TP0] = offset
        return offsets  # type: ignore[return-value]


def test_a_message_still_in_a_handler_holds_the_commit_back(consumers):
    p = Partition(consumers, 15, range(15, 18))
    p.take(15, 16)  # two actors (stage_concurrency 2); 16 finishes first
    p.finish(16)
    assert p.commit() == (None, 17), "Faust passes 15 while it is handled (faust-streaming issue 606)"
    p.finish(15)
    assert p.commit()[0] == 17


@pytest.mark.parametrize("acked", [True, False], ids=["dropped-acked", "dropped-silently"])
def test_a_message_dropped_in_a_rebalance_holds_the_commit_until_handled(consumers, acked):
    p = Partition(consumers, 15, range(15, 19))
    p.drop(15, acked=acked)
    p.take(16)
    p.finish(16)
    ours, faust = p.commit()
    assert faust == 17, "Faust passes the dropped message"
    assert ours is None
    p.take(17)
    p.finish(17)
    assert p.commit()[0] is None  # still held by 15
    p.take(15)  # read again after the next seek, and handled
    p.finish(15)
    assert p.commit()[0] == 18


def test_while_faust_forgets_the_committed_offset_the_count_goes_on_from_the_last_known(consumers):
    # during a revocation Faust has forgotten the committed offset, and commits past anything
    p = Partition(consumers, 15, range(15, 20))
    assert p.commit() == (None, None)  # nothing new: 15 is where the partition stands
    for consumer in consumers:
        consumer._committed_offset.pop(TP0)  # what Faust's on_partitions_revoked does before its commit
    p.drop(15, 16, 17, acked=True)
    p.take(18)
    p.finish(18)
    assert p.commit() == (15, 19)


def test_with_nothing_committed_the_count_starts_at_the_log_start(consumers):
    """A group that has committed nothing starts reading at the log start. Records handed to an
    agent before the seek was done are not counted in the reading; the commit must still wait
    for them, so it counts from the log start, not from the first record counted."""
    ours, _ = consumers
    p = Partition((ours,), None, range(3, 6))
    p.take(3, 4)
    p.finish(4, 5)
    assert p.commit() == (None,), "no log start known yet: nothing is committed"
    ours._floor[TP0] = 0  # read from the broker (_learn_log_starts)
    assert p.commit() == (0,)  # 0, 1, 2 not read yet, 3 in a handler: from the first record counted it was 6
    for offset in (0, 1, 2):
        ours.mark_handled(record(ours, offset))
    assert p.commit() == (3,)
    p.finish(3)
    assert p.commit() == (6,)


def test_handled_messages_are_committed_as_faust_commits_them(consumers):
    p = Partition(consumers, 15, range(15, 18))
    p.take(15, 16, 17)
    p.finish(17, 16, 15)
    assert p.commit() == (18, 18)
    ours, _ = consumers
    assert not ours._fetched[TP0] and not ours._handled[TP0], "marks below the committed offset are dropped"
    assert p.commit()[0] is None  # nothing new since


async def test_a_message_handed_to_an_agent_and_then_dropped_is_found_for_reading_again():
    """What the consumer seeks back to: handed over (through the conductor, into the agent's
    queue), then neither queued, nor in a handler, nor finished."""
    app = faust_app(Settings(llm_backend="offline", precedent_backend="none"))
    app.topics.add(app.topic(TOPIC, value_serializer="raw", key_serializer="raw"))
    await app.topics._update_indices()
    await app.topics.on_partitions_assigned({TP0})
    app.flow_control.resume()  # the conductor puts into agents' queues only while the flow runs
    consumer = app.consumer
    assert isinstance(consumer, SafeAcks)
    for offset in (5, 6, 7):
        record = ConsumerRecord(TOPIC, 0, offset, 0, 0, b"case", b"{}", None, 4, 2, ())
        await consumer.callback(consumer._to_message(TP0, record))  # what the fetch loop does
    assert consumer.queued(TP0) == {5, 6, 7} and consumer.dropped(TP0) == set()
    (queue,) = [channel._queue for channel in app.topics._topic_name_index[TOPIC]]
    first, second = queue.get_nowait(), queue.get_nowait()  # a stream takes 5, and 6
    second.message.tracked = True
    consumer._unacked_messages.add(second.message)  # 6 goes to a handler; 5 is dropped (a rebalance)
    assert consumer.dropped(TP0) == {5}
    consumer.mark_handled(second.message)
    consumer._unacked_messages.discard(second.message)
    assert consumer.dropped(TP0) == {5}  # 7 still queued
    assert first.message.offset == 5


async def test_what_is_fetched_while_a_seek_is_under_way_is_not_handed_over():
    """At a restart Faust resumes its fetcher for the changelogs before it seeks the stream
    partitions to their committed offsets: records fetched meanwhile were handed to agents and,
    read again after the seek, handled twice (a second dead letter for one malformed outcome, in a
    clean clone's test_metrics). The seek reads them again; only then are they handed over."""
    app = faust_app(Settings(llm_backend="offline", precedent_backend="none"))
    app.topics.add(app.topic(TOPIC, value_serializer="raw", key_serializer="raw"))
    await app.topics._update_indices()
    await app.topics.on_partitions_assigned({TP0})
    app.flow_control.resume()
    consumer = app.consumer
    assert isinstance(consumer, SafeAcks)
    consumer._new_reading(TP0)  # perform_seek begins
    for offset in (4, 5):  # fetched from the position the partition had before the seek
        await consumer.callback(record(consumer, offset))
    assert consumer.queued(TP0) == set(), "handed over while the seek was under way"
    consumer._sought_to(TP0, 4)  # the seek is done: 4 and 5 come again
    for offset in (4, 5):
        await consumer.callback(record(consumer, offset))
    assert consumer.queued(TP0) == {4, 5}
    other = TP("t.disputes.elsewhere", 0)  # not ours to count (no acks): passed on as Faust would
    assert not consumer._seeking(other)


def test_a_message_the_fetch_loop_passed_over_is_found_for_reading_again(consumers):
    """Faust's fetch loop drops a record at or below its read offset as a duplicate (its read
    offset moved past it on a batch read before a seek), and one it read while the flow was
    suspended: fetched in this reading, never handed to an agent. Past the read offset it is only
    not read yet."""
    ours, _ = consumers
    p = Partition((ours,), 5, range(5, 9))
    p.take(8)
    p.finish(8)
    ours._delivered[TP0].add(8)
    ours._read_offset[TP0] = 7  # the loop has read up to 7; 5, 6, 7 never reached an agent
    assert ours.dropped(TP0) == {5, 6, 7}
    ours._read_offset[TP0] = 4  # before them: still to come
    assert ours.dropped(TP0) == set()
    assert p.commit() == (None,)  # committed at 5, never past it


def record(consumer: SafeAcks, offset: int):  # type: ignore[no-untyped-def]
    """What the fetch loop makes of a record it hands on."""
    return consumer._to_message(TP0, ConsumerRecord(TOPIC, 0, offset, 0, 0, b"case", b"{}", None, 4, 2, ()))


def test_a_stale_run_after_a_seek_back_counts_for_nothing(consumers):
    """Seeking back to 5 while a batch fetched before (20, 21) is still read: those records must
    not count as read in the new reading (they say nothing of 6..19)."""
    ours, _ = consumers
    p = Partition((ours,), 5, range(0))
    ours._batch_sought = dict(ours._sought)  # a batch asked for before the seek
    ours._new_reading(TP0)
    ours._sought_to(TP0, 5)
    stale = [record(ours, 20), record(ours, 21)]
    assert not ours._fetched[TP0], "a stale batch's records were counted in the new reading"
    for message in stale:
        ours.mark_handled(message)  # finished is finished, whichever reading fetched it
    assert ours._new_offset(TP0) is None
    ours.mark_handled(record(ours, 5))  # read again: the reading begins
    assert ours._fetched[TP0] == {5}
    assert p.commit() == (6,)
    assert p.commit() == (None,)  # nothing new


def test_a_reading_that_begins_past_the_offset_sought_passes_nothing(consumers):
    """After a seek to 26, records 26 and 27 reach a handler before the seek is done (uncounted),
    28 is dropped, and the first record counted is 29 (bench-found: the commit went to 29 while 26
    and 27 were in handlers and 28 was never handled, and that case got no verdict). The offsets
    between are records, not holes: the commit waits for each, and 28 is read again."""
    ours, _ = consumers
    Partition((ours,), 26, range(0))  # sets the committed offset; no message is fetched
    ours._new_reading(TP0)
    early = [record(ours, 26), record(ours, 27)]  # handed over while the seek was under way
    ours._sought_to(TP0, 26)
    ours._batch_sought = dict(ours._sought)
    ours.mark_handled(record(ours, 29))
    assert ours._new_offset(TP0) is None
    for message in early:
        ours.mark_handled(message)
    assert ours._new_offset(TP0) == 28, "28 was passed"
    ours.highwater = lambda tp: 30  # type: ignore[method-assign]
    ours._read_offset[TP0] = 29
    assert [ours.stalled(TP0) for _ in range(3)] == [None, None, 28]


async def test_offsets_deleted_by_retention_before_they_were_handled_are_passed(consumers):
    """Committed 5, but the broker's log now starts at 9 (retention deleted 5..8 unread): only the
    broker's log start lets the count move past them, with a warning."""
    ours, _ = consumers
    p = Partition((ours,), 5, range(9, 11))
    p.take(9, 10)
    p.finish(9, 10)
    starts = {TP0: 3}

    async def earliest_offsets(*tps):  # type: ignore[no-untyped-def]  # the broker's ListOffsets answer
        return {tp: starts[tp] for tp in tps}

    ours.earliest_offsets = earliest_offsets  # type: ignore[method-assign]
    assert not await ours._deleted(TP0, 5)  # 5 is a record: it waits
    assert p.commit() == (None,)
    starts[TP0] = 9
    assert await ours._deleted(TP0, 5)
    assert p.commit() == (11,)


def test_an_unfinished_offset_the_fetch_loop_read_past_and_no_agent_holds_is_read_again(consumers):
    """A record dropped before it was counted (a stale batch's, around a seek) leaves the first
    unfinished offset with nothing to finish it: once Faust's loop has read past it and no agent
    holds it for three commit ticks, the consumer reads again from it; when nothing reads the
    partition at all, after ten. Committed 5, 6 and 7 finished, records up to 9: 5 is stalled. In
    a handler, or at the partition's end, it is not."""
    ours, _ = consumers
    p = Partition((ours,), 5, range(5, 8))
    p.take(6, 7)
    p.finish(6, 7)
    ours.highwater = lambda tp: 10  # type: ignore[method-assign]
    ours._read_offset[TP0] = 9
    assert [ours.stalled(TP0) for _ in range(3)] == [None, None, 5]
    assert p.commit() == (None,)  # never past it meanwhile
    p.take(5)  # a handler has it: not stalled, and the count starts again
    assert ours.stalled(TP0) is None
    ours._unacked_messages.clear()
    ours._read_offset[TP0] = 5  # not read past it: the partition is not being read
    assert [ours.stalled(TP0) for _ in range(10)][-2:] == [None, 5]
    ours.highwater = lambda tp: 5  # type: ignore[method-assign]  # 5 is the end: nothing to read
    assert [ours.stalled(TP0) for _ in range(12)] == [None] * 12


async def test_the_commit_at_a_stop_waits_out_a_periodic_commit_and_then_commits_what_it_missed(consumers):
    """Faust's ``commit`` returns without committing while a periodic commit is under way, and
    that one counted before the last handler finished: at a stop, what it finished was left for
    the next owner to handle again (a second dead letter, a re-sent verdict)."""
    ours, _ = consumers
    p = Partition((ours,), 5, range(5, 7))
    p.take(5, 6)
    p.finish(5)
    sent: list[dict] = []

    async def to_the_broker(offsets):  # type: ignore[no-untyped-def]  # the group coordinator's OffsetCommit
        sent.append(dict(offsets))
        return True

    ours._commit = to_the_broker  # type: ignore[method-assign]
    ours.assignment = lambda: {TP0}  # type: ignore[method-assign]
    ours.app.producer.flush = _nothing  # type: ignore[method-assign]  # no producer started here
    periodic = asyncio.get_running_loop().create_future()
    ours._commit_fut = periodic  # a periodic commit is under way: it counted 5 (6 was in a handler)

    stop = asyncio.ensure_future(ours.commit_and_end_transactions())
    await asyncio.sleep(0)  # the stop's commit meets the periodic one
    await ours.force_commit()  # what the periodic one sends, counted before 6 finished: 6
    p.finish(6)  # the last handler finishes while it is out
    ours._commit_fut = None
    periodic.set_result(None)
    await stop
    assert sent == [{TP0: 6}, {TP0: 7}], f"the stop's commit left handled offsets uncommitted: {sent}"


async def _nothing() -> None:
    return None


class Broker:
    """What the periodic commit asks of the broker, answered here: the log start (ListOffsets),
    the high watermark, the commits sent (OffsetCommit) and the seeks made."""

    def __init__(self, consumer: SafeAcks, log_start: int, highwater: int, read: int):
        self.log_start = log_start
        self.sent: list[int] = []
        self.seeks: list[int] = []

        async def commit(offsets):  # type: ignore[no-untyped-def]
            self.sent.append(offsets[TP0])
            return True

        async def earliest_offsets(*tps):  # type: ignore[no-untyped-def]
            return {tp: self.log_start for tp in tps}

        async def seek(tp, offset):  # type: ignore[no-untyped-def]
            self.seeks.append(offset)

        consumer._commit = commit  # type: ignore[method-assign]
        consumer.earliest_offsets = earliest_offsets  # type: ignore[method-assign]
        consumer.seek = seek  # type: ignore[method-assign]
        consumer.assignment = lambda: {TP0}  # type: ignore[method-assign]
        consumer.highwater = lambda tp: highwater  # type: ignore[method-assign]
        consumer.app.producer.flush = _nothing  # type: ignore[method-assign]  # no producer started here
        consumer.app.flow_control.resume()
        consumer._read_offset[TP0] = read  # how far Faust's fetch loop has read


async def test_the_first_live_record_at_the_log_start_holds_the_commit_while_in_a_handler(consumers):
    """Committed 5; retention deleted 5..8, so the log starts at 9; record 9 is in a handler and 10
    is finished. Through the periodic commit's own path (5 stalls, the broker's log start is past
    it): 5..8 count as done and the commit goes to 9, not past it, until 9's handler returns.
    Counting the log start itself as deleted would commit 11 and lose case 9 at the next restart."""
    ours, _ = consumers
    p = Partition((ours,), 5, range(9, 11))
    p.take(9, 10)
    p.finish(10)
    broker = Broker(ours, log_start=9, highwater=11, read=10)  # read past 5: stalled after three ticks
    for _ in range(5):
        await ours.force_commit()
    assert broker.sent == [9], f"the commit passed record 9 while its handler held it: {broker.sent}"
    assert broker.seeks == [], "record 9 is in a handler: nothing to read again"
    p.finish(9)
    await ours.force_commit()
    assert broker.sent == [9, 11]


async def test_a_stalled_record_at_the_log_start_is_read_again_not_counted_as_deleted(consumers):
    """Committed 9 and the log starts at 9: record 9 is live. Dropped before it was counted (10 was
    fetched and finished, 9 never reached an agent), it stalls and is read again from 9; nothing
    lies below the log start, so nothing is counted done or committed. Once retention deletes 9
    too, it is passed."""
    ours, _ = consumers
    p = Partition((ours,), 9, range(10, 11))
    p.take(10)
    p.finish(10)
    broker = Broker(ours, log_start=9, highwater=11, read=10)
    for _ in range(3):
        await ours.force_commit()
    assert broker.seeks == [9], "record 9 at the log start was taken for deleted instead of read again"
    assert broker.sent == [] and 9 not in ours._handled[TP0]
    broker.log_start = 10
    assert await ours._deleted(TP0, 9)
    await ours.force_commit()
    assert broker.sent == [11]
