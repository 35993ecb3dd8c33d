"""Faust's Kafka transport with a configurable consumer long-poll (``kafka_fetch_max_wait_ms``),
and commits that never pass a message still being handled.

Faust builds its worker consumer with ``fetch_max_wait_ms=1500`` hard-coded. Apache Kafka answers
a waiting fetch as soon as data arrives, so that costs nothing there; the embedded Tansu broker
holds every empty fetch for the full wait, and a case crosses six or more hops, so the wait must
be ours to set. What each setting costs per hop: docs/streams.md and ``bench/broker_hop.py``.

faust-streaming 0.15 commits over the message at the committed offset while it is still in flight
when the ones after it are done (its head-gap check is off by one, faust-streaming#606): with
``stage_concurrency`` actors per stage, a worker killed then loses that case for good, since the
restarted worker resumes after it.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as driver


def transport_for(fetch_max_wait_ms: int) -> type[driver.Transport]:
    class ConsumerThread(driver.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = fetch_max_wait_ms  # read when the consumer starts its fetcher
            return consumer

    class ShortPollConsumer(driver.Consumer):
        def _new_consumer_thread(self) -> ConsumerThread:
            return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

        def _new_offset(self, tp: Any) -> int | None:
            return None if _in_flight_before_acked(self, tp) else super()._new_offset(tp)

    class Transport(driver.Transport):
        Consumer = ShortPollConsumer

    return Transport


def _in_flight_before_acked(consumer: Any, tp: Any) -> bool:
    """Whether a message of ``tp`` handed to an agent and not yet acked lies before every acked
    one: then nothing may be committed (Faust's own run of acked offsets starts past it)."""
    acked = consumer._acked[tp]
    pending = [m.offset for m in list(consumer._unacked_messages) if m.tp == tp and not m.acked]
    return bool(acked) and bool(pending) and min(pending) < min(acked)


def use_fetch_wait(app: faust.App, fetch_max_wait_ms: int) -> None:
    """Install the transport; call before any topic or agent is declared on the app."""
    app.transport = transport_for(fetch_max_wait_ms)(app.conf.broker_consumer, app)
