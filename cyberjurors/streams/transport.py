"""Faust's Kafka transport with a configurable consumer long-poll (``kafka_fetch_max_wait_ms``)
and offset commits that never pass a message no handler finished.

Faust builds its worker consumer with ``fetch_max_wait_ms=1500`` hard-coded. Apache Kafka answers
a waiting fetch as soon as data arrives, so that costs nothing there; the embedded Tansu broker
holds every empty fetch for the full wait, and a case crosses six or more hops, so the wait must
be ours to set. What each setting costs per hop: docs/streams.md and ``bench/broker_hop.py``.

Commits (``SafeAcks``): faust-streaming acks the messages it skips after a rebalance (fetched
before it: another worker, or this one after seeking back, reads them again) as if a handler had
finished them, and commits up to one in-flight message early when a later one finishes first
(faust-streaming issue 606: acked 16 while 15 runs, committed 15, so it commits 17). Either lets
a commit pass a message no handler finished; at the next rebalance or stop it is gone, which
bench/rebalance.py saw (2 of 300 cases lost scaling 2 -> 3 workers). Here an ack counts towards a
commit only when the message was fetched in the current consumer generation and acked while the
flow runs; any other message is released (a rebalance or stop does not wait on it) and read again
from the committed offset. And the committed offset never passes a message still in a handler.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as driver
from faust.types import TP, Message
from faust.types.tuples import ack_lock
from mode.utils.futures import notify


class SafeAcks(driver.Consumer):
    """Faust's consumer, committing only what a handler finished (see the module's docstring)."""

    def counts(self, message: Message) -> bool:
        """Whether an ack of this message shows a handler finished it in the current assignment."""
        return (self.app.flow_control.is_active()
                and message.generation_id == self.app.consumer_generation_id)

    def ack(self, message: Message) -> bool:
        if self.counts(message):
            return super().ack(message)
        with ack_lock:  # as Faust's ack: released, so neither stop nor rebalance waits on it
            message.acked = True
            self._unacked_messages.discard(message)
            notify(self._waiting_for_ack)
        return False

    def in_flight_floor(self, tp: TP) -> int | None:
        """The lowest offset of ``tp`` a handler holds and has not acked."""
        return min((m.offset for m in list(self._unacked_messages) if m.tp == tp and not m.acked), default=None)

    def _new_offset(self, tp: TP) -> int | None:
        floor = self.in_flight_floor(tp)
        acked = self._acked[tp]
        later = [offset for offset in acked if floor is not None and offset >= floor]
        if not later:
            return super()._new_offset(tp)
        acked[:] = [offset for offset in acked if offset < floor]  # Faust's choice among the offsets below it
        try:
            return super()._new_offset(tp)
        finally:
            acked.extend(later)
            acked.sort()


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
