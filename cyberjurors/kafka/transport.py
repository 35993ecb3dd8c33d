"""Faust's Kafka transport with a configurable consumer long-poll (``kafka_fetch_max_wait_ms``)
and offset commits that never pass a message no handler finished.

Faust builds its worker consumer with ``fetch_max_wait_ms=1500`` hard-coded. Apache Kafka answers
a waiting fetch as soon as data arrives, so that costs nothing there; the embedded Tansu broker
holds every empty fetch for the full wait, and a case crosses six or more hops, so the wait must
be ours to set. What each setting costs per hop: docs/streams.md and ``bench/broker_hop.py``.

Commits (``SafeAcks``). faust-streaming decides what to commit from the offsets its streams ack,
and around a rebalance its streams drop messages they took (fetched before it, or before the new
generation was known, or while the flow was suspended), some acked as if handled (its pure-Python
stream), some without a trace (its compiled one). Its commit rule then passes them: it tolerates
one missing offset at the head (which also passes a message still in a handler when a later one
finishes first: faust-streaming issue 606) and checks nothing while the committed offset is unknown,
as in a revocation's own commit. And a message dropped after the seek that ends the rebalance is
never read again. bench/rebalance.py lost up to 10 of 150 cases so.

So the decision is ours. Our agents report each event their handler finished (``handled``,
after the handler returned: not Faust's ack, which also comes when a stream skips a message or is
cancelled), and the offset committed is the first one, from the committed offset on, that no
handler finished: offsets are taken in order, one by one, so an offset never read or never finished
is never passed. Where the committed offset is not known (the group has committed nothing, or Faust
forgot it during a revocation) the count starts from the last one this consumer knew, else from
the partition's log start. Only the broker says an offset is no record: the count moves past an
unfinished offset that is no record only once it lies below the log start (deleted by retention;
our pipeline topics are neither compacted nor transactional, so their offsets follow on).

What is read is watched. Each seek starts a new reading of the partition. Nothing the fetch loop
hands on while a seek is under way goes to an agent: the seek reads it again (at a restart Faust
resumes its fetcher for the changelogs before it seeks the stream partitions, and such records
were handled twice). A message handed over
in this reading that is neither queued, nor in a handler, nor finished, or one Faust's fetch loop
passed over without handing it over, was dropped; so is the first unfinished offset of any
assigned partition when records lie beyond it and no agent has held it for three commit ticks
(the fetch loop read past it) or ten (nothing reads it). The consumer seeks back to it and reads
it again. Counting less costs duplicates, never cases: what a handler finished but was not
committed is handled again, and the stored stage results make that a re-send.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any
from weakref import WeakKeyDictionary

import faust
from faust.transport.consumer import ensure_TP
from faust.transport.drivers import aiokafka as driver
from faust.types import TP, EventT, Message


class ReadOffsets(defaultdict):
    """Faust's last offset read per partition, under which its fetch loop drops a record as a
    duplicate. After a seek to X, records of a batch fetched before the seek can still arrive and
    move it past X, and the records read again would then be dropped: so it holds at X until
    record X is read again."""

    def __init__(self) -> None:
        super().__init__(lambda: None)
        self.holding: dict[TP, int] = {}

    def __setitem__(self, tp: TP, offset: int | None) -> None:
        held = self.holding.get(tp)
        if held is not None and offset is not None and offset != held:
            return
        self.holding.pop(tp, None)
        super().__setitem__(tp, offset)


class SafeAcks(driver.Consumer):
    """Faust's consumer, committing only what a handler finished (see the module's docstring)."""

    _read_offset: ReadOffsets  # Faust's mapping, replaced by one that can hold an offset

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fetched: defaultdict[TP, set[int]] = defaultdict(set)  # counted in the current reading
        self._delivered: defaultdict[TP, set[int]] = defaultdict(set)  # of those, put in an agent's queue
        self._handled: defaultdict[TP, set[int]] = defaultdict(set)
        self._reading: dict[TP, int] = {}  # which reading: one more at every seek of the partition
        self._sought: dict[TP, int] = {}  # the last reading whose seek is done
        self._start: dict[TP, int | None] = {}  # where that seek went (None: not known)
        self._floor: dict[TP, int] = {}  # the last offset decided on (see _base), else the log start
        self._counting: set[TP] = set()  # the current reading's own records have begun
        self._batch_sought: dict[TP, int] = {}  # ``_sought`` when the batch being read was asked for
        self._stalls: dict[TP, tuple[int, int]] = {}  # first unfinished offset, ticks it has been stalled
        self._reading_of: WeakKeyDictionary[Message, int] = WeakKeyDictionary()
        self._read_offset = ReadOffsets()
        deliver = self.callback  # the conductor's: puts the message in its agents' queues

        async def delivered(message: Message) -> None:
            if self._seeking(message.tp):  # the seek reads it again: handled now, it would be handled twice
                return
            await deliver(message)
            if self._reading_of.get(message) == self._reading.get(message.tp, 0):
                self._delivered[message.tp].add(message.offset)

        self.callback = delivered

    async def _getmany(self, active_partitions: Any, timeout: float) -> Any:
        self._batch_sought = dict(self._sought)
        return await super()._getmany(active_partitions, timeout)

    def _counts(self, tp: TP, offset: int) -> bool:
        """Whether a record belongs to the partition's current reading. After a seek to X, the
        rest of a batch fetched before it still arrives; a record counts from record X on, or from
        a batch asked for once the seek was done. Which records count decides only what is read
        again (``dropped``), never what is committed: records of a batch fetched before the seek
        are not counted, so a first counted record past X says nothing about the offsets between."""
        if tp in self._counting or tp not in self._reading:  # never sought: nothing is stale
            return True
        reading = self._reading[tp]
        settled = self._sought.get(tp) == reading and self._batch_sought.get(tp) == reading
        if settled or (offset == self._start.get(tp) and self._sought.get(tp) == reading):
            self._counting.add(tp)
            return True
        return False

    def _seeking(self, tp: TP) -> bool:
        """A seek of ``tp`` (to its committed offset, or back to a dropped offset) has begun and is
        not done: what the fetch loop hands on meanwhile was fetched before it, from at or past
        where the seek goes, and is read again once it is done (at a restart, Faust resumes the
        fetcher for the changelogs before it seeks the stream partitions)."""
        return (
            tp in self._reading
            and self._sought.get(tp) != self._reading[tp]
            and self.app.topics.acks_enabled_for(tp.topic)
        )

    def _to_message(self, tp: TP, record: Any) -> Any:
        message = super()._to_message(tp, record)
        if self.app.topics.acks_enabled_for(tp.topic) and self._counts(tp, record.offset):
            self._fetched[tp].add(record.offset)  # what our agents read (not the changelogs)
            self._reading_of[message] = self._reading.get(tp, 0)
        return message

    def mark_handled(self, message: Message) -> None:
        self._handled[message.tp].add(message.offset)  # finished is finished, whichever reading fetched it

    def in_flight(self, tp: TP) -> set[int]:
        """Offsets of ``tp`` a handler holds."""
        return {m.offset for m in list(self._unacked_messages) if m.tp == tp and not m.acked}

    def queued(self, tp: TP) -> set[int]:
        """Offsets of ``tp`` waiting in an agent's queue."""
        offsets = set()
        # the Conductor's index of channels by topic: private, not declared by ConductorT
        index = self.app.topics._topic_name_index  # type: ignore[attr-defined]
        for channel in list(index.get(tp.topic, ())):
            queue = getattr(channel, "_queue", None)
            for event in list(getattr(queue, "_queue", ())):
                message = getattr(event, "message", None)
                if message is not None and message.tp == tp:
                    offsets.add(message.offset)
        return offsets

    def _base(self, tp: TP) -> int | None:
        """Where the partition's finished run ends: the committed offset, or the offset this consumer
        last decided to commit (everything below it was handled, even if the commit did not reach the
        broker), whichever is further; with neither, the log start (None until read: then nothing
        is committed). Faust forgets the committed offset during a revocation; this does not."""
        known = [o for o in (self._committed_offset.get(tp), self._floor.get(tp)) if o is not None]
        return max(known, default=None)

    def _first_unfinished(self, tp: TP) -> int | None:
        position = self._base(tp)
        if position is not None:
            while position in self._handled[tp]:
                position += 1
        return position

    def _new_offset(self, tp: TP) -> int | None:
        position = self._first_unfinished(tp)
        if position is None:
            return None
        self._floor[tp] = position  # before the marks below it go
        for marks in (self._fetched, self._handled, self._delivered):
            marks[tp] = {o for o in marks[tp] if o >= position}
        # Faust's own bookkeeping is not used; keep it from growing
        self._acked[tp][:] = [o for o in self._acked[tp] if o >= position]
        self._acked_index[tp].difference_update({o for o in self._acked_index[tp] if o < position})
        if self._gap.get(tp):
            self._gap[tp].chop(0, position)
        committed = self._committed_offset.get(tp)
        return position if committed is None or position > committed else None

    def dropped(self, tp: TP) -> set[int]:
        """Offsets of this reading that no handler holds and none will get: handed to an agent and
        neither queued, nor in a handler, nor finished; or passed over by Faust's fetch loop (its
        read offset at or past them, as a duplicate of a batch read before the seek, or while the
        flow was suspended) without being handed over."""
        unfinished = self._fetched[tp] - self._handled[tp]
        if not unfinished:
            return set()
        read = self._read_offset.get(tp)
        passed = {o for o in unfinished - self._delivered[tp] if read is not None and o <= read}
        return ((self._delivered[tp] & unfinished) | passed) - self.in_flight(tp) - self.queued(tp)

    def _watched(self) -> list[TP]:
        return sorted(tp for tp in self.assignment() if self.app.topics.acks_enabled_for(tp.topic))

    async def _learn_log_starts(self, tps: list[TP]) -> None:
        """The log start of partitions the group has committed nothing on (where their count starts)."""
        try:
            starts = await self.earliest_offsets(*tps)
        except Exception as err:  # tried again at the next tick; nothing is committed meanwhile
            self.log.warning("could not read the log start of %s: %r", tps, err)
            return
        for tp, offset in starts.items():
            if offset is not None and ensure_TP(tp) in self.assignment():
                self._floor.setdefault(ensure_TP(tp), offset)

    async def _deleted(self, tp: TP, first: int) -> bool:
        """Whether ``first`` lies below the partition's log start (deleted by retention before it was
        handled): then the offsets up to the log start are done, and a warning says so."""
        try:
            start = (await self.earliest_offsets(tp)).get(tp)
        except Exception:
            return False
        if start is None or first >= start:
            return False
        self.log.warning(
            "%s: offsets %d..%d were deleted by the broker before they were handled (retention)", tp, first, start - 1
        )
        self._handled[tp].update(range(first, start))
        return True

    def stalled(self, tp: TP) -> int | None:
        """The first unfinished offset, when records lie beyond it (the high watermark) and no agent
        has held it for 3 commit ticks in a row after Faust's fetch loop read past it (a record
        dropped before it was counted), or for 10 otherwise (a partition nothing reads again)."""
        first, read = self._first_unfinished(tp), self._read_offset.get(tp)
        if first is None or first >= self._end(tp) or first in self.in_flight(tp) | self.queued(tp):
            self._stalls.pop(tp, None)
            return None
        seen, ticks = self._stalls.get(tp, (first, 0))
        self._stalls[tp] = (first, ticks + 1 if seen == first else 1)
        return first if self._stalls[tp][1] >= (3 if read is not None and first < read else 10) else None

    def _end(self, tp: TP) -> int:
        """The partition's high watermark as the last fetch reported it (0 when unknown)."""
        try:
            return self.highwater(tp) or 0
        except Exception:  # no consumer yet, or the partition is no longer assigned
            return 0

    def _new_reading(self, tp: TP) -> None:
        """Begun before a seek of ``tp``: what was counted or handled before counts no more."""
        self._reading[tp] = self._reading.get(tp, 0) + 1
        self._start[tp] = None
        self._counting.discard(tp)
        for marks in (self._fetched, self._delivered):
            marks.pop(tp, None)
        self._stalls.pop(tp, None)

    def _sought_to(self, tp: TP, offset: int | None) -> None:
        """The seek that began ``tp``'s current reading is done, to ``offset``."""
        self._sought[tp], self._start[tp] = self._reading[tp], offset

    async def force_commit(self, topics: Any = None, start_new_transaction: bool = True) -> bool:
        """Commit; then read again what a stream dropped in the partition's current reading."""
        committed = await super().force_commit(topics, start_new_transaction=start_new_transaction)
        if not self.app.rebalancing and self.app.flow_control.is_active():  # else a seek is coming
            watched = self._watched()
            if unknown := [tp for tp in watched if self._base(tp) is None]:
                await self._learn_log_starts(unknown)
            for tp in watched:
                stalled = self.stalled(tp)
                if stalled is not None and await self._deleted(tp, stalled):
                    stalled = None
                lost = self.dropped(tp) | ({stalled} if stalled is not None else set())
                if lost:
                    self.log.warning(
                        "%s: offsets %s were dropped unhandled; reading again from %s", tp, sorted(lost), min(lost)
                    )
                    self._new_reading(tp)
                    self._read_offset.holding.pop(tp, None)
                    await self.seek(tp, min(lost))
                    self._sought_to(tp, min(lost))
                    self._read_offset.holding[tp] = min(lost)
        return committed

    async def commit_and_end_transactions(self) -> None:
        """The commit at a stop (and before a revocation). Faust's ``commit`` only waits when a
        periodic commit is under way, and that one counted before the last handlers finished: what
        they finished would be handled again by the next owner. So wait for it, then commit."""
        await self.maybe_wait_for_commit_to_finish()
        await self.commit(start_new_transaction=False)

    async def perform_seek(self) -> None:
        """Faust's: every partition to its committed offset, each in a new reading."""
        assigned = {tp for tp in self.assignment() if self.app.topics.acks_enabled_for(tp.topic)}
        for tp in set(self._reading) - assigned:  # revoked: forget it
            self._new_reading(tp)
            for marks in (self._reading, self._sought, self._start, self._handled, self._floor):
                marks.pop(tp, None)
        for tp in assigned:
            self._new_reading(tp)
        self._read_offset.holding.clear()  # held there, the fetch loop stalled on the embedded broker
        committed = {ensure_TP(tp): offset for tp, offset in (await self.seek_to_committed()).items()}
        self._read_offset.update(
            {tp: offset if offset is not None and offset >= 0 else None for tp, offset in committed.items()}
        )
        self._committed_offset.update({tp: offset or None for tp, offset in committed.items() if offset is not None})
        for tp in assigned:
            offset = committed.get(tp)
            self._floor.pop(tp, None)  # the broker's word, just read, or the log start below
            if offset is not None and offset >= 0:
                self._floor[tp] = offset
            self._sought_to(tp, offset if offset is not None and offset >= 0 else None)
        if unknown := [tp for tp in assigned if tp not in self._floor]:
            await self._learn_log_starts(unknown)


def handled(event: EventT) -> None:
    """Our handler finished ``event``: its offset may be committed (``SafeAcks``)."""
    mark = getattr(event.app.consumer, "mark_handled", None)
    if mark is not None:
        mark(event.message)


def transport_for(fetch_max_wait_ms: int) -> type[driver.Transport]:
    class ConsumerThread(driver.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = fetch_max_wait_ms  # read when the consumer starts its fetcher
            return consumer

    class ShortPollConsumer(SafeAcks):
        def _new_consumer_thread(self) -> ConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    class Transport(driver.Transport):
        Consumer = ShortPollConsumer

    return Transport


def use_fetch_wait(app: faust.App, fetch_max_wait_ms: int) -> None:
    """Install the transport; call before any topic or agent is declared on the app."""
    app.transport = transport_for(fetch_max_wait_ms)(app.conf.broker_consumer, app)
