"""Offset commits never pass a message no handler finished (streams/transport.py, SafeAcks).

Faust's own consumer, as the worker builds it, fed the messages its streams would hand over; no
broker is needed to decide which offset to commit. Each test also runs Faust's unmodified
decision on the same state, to show the case it gets wrong. The whole path (workers joining and
leaving while cases flow) is tests/test_rebalance.py and bench/rebalance.py.
"""

from __future__ import annotations

import pytest
from faust.transport.drivers.aiokafka import Consumer as FaustConsumer
from faust.types import TP
from faust.types.tuples import ConsumerMessage

from cyberjurors.config import Settings
from cyberjurors.streams.app import faust_app
from cyberjurors.streams.transport import SafeAcks

TOPIC = "t.disputes.focus"
TP0 = TP(TOPIC, 0)


@pytest.fixture
async def consumers() -> tuple[SafeAcks, FaustConsumer]:
    """(ours, Faust's own), each of an app that consumes TOPIC with acks, at committed offset 15."""
    made = []
    for ours in (True, False):
        app = faust_app(Settings(llm_backend="offline", precedent_backend="none"))
        if not ours:
            app.transport.Consumer = FaustConsumer
        app.topics.add(app.topic(TOPIC))
        await app.topics._update_indices()  # what subscribing does: TOPIC's messages are acked
        app.flow_control.resume()  # as after recovery
        consumer = app.consumer
        consumer._committed_offset[TP0] = 15
        made.append(consumer)
    assert isinstance(made[0], SafeAcks) and not isinstance(made[1], SafeAcks)
    return made[0], made[1]


def taken(consumer: FaustConsumer, offset: int, generation: int | None = None) -> ConsumerMessage:
    """A message a stream took from its channel (tracked as unacked), fetched in ``generation``."""
    message = ConsumerMessage(TOPIC, 0, offset, 0.0, 0, None, b"case", b"{}", None, tp=TP0,
                              generation_id=consumer.app.consumer_generation_id if generation is None else generation)
    message.tracked = True
    message.incref()
    consumer._unacked_messages.add(message)
    return message


def both(consumers: tuple[SafeAcks, FaustConsumer], step) -> list:  # type: ignore[no-untyped-def]
    return [step(c) for c in consumers]


def test_a_message_still_in_a_handler_holds_the_commit_back(consumers):
    # 15 and 16 taken by two actors (stage_concurrency 2); 16 finishes first
    first = both(consumers, lambda c: (taken(c, 15), taken(c, 16)))
    for consumer, (m15, m16) in zip(consumers, first):
        assert m16.ack(consumer)
    ours, faust = (c._new_offset(TP0) for c in consumers)
    assert faust == 17, "Faust commits past 15 while it is still being handled (faust-streaming issue 606)"
    assert ours is None
    # 15 finishes: both are done, so both are committed
    ours_consumer, _ = consumers
    assert first[0][0].ack(ours_consumer)
    assert ours_consumer._new_offset(TP0) == 17


def test_a_message_fetched_before_a_rebalance_is_released_but_not_committed(consumers):
    # fetched in generation 1; the group moved to generation 2; the stream skips it and acks it
    for consumer in consumers:
        consumer.app.consumer_generation_id = 2
    stale = both(consumers, lambda c: taken(c, 15, generation=1))
    results = [m.ack(c) for c, m in zip(consumers, stale)]
    assert results == [False, True]  # Faust counts it as handled; it was skipped
    ours, faust = (c._new_offset(TP0) for c in consumers)
    assert (ours, faust) == (None, 16)  # Faust would commit past it: whoever reads 15 next, never sees it
    assert stale[0].acked and stale[0] not in consumers[0].unacked  # a rebalance or stop does not wait on it
    # read again in generation 2 from the committed offset, handled, acked: now it counts
    again = taken(consumers[0], 15)
    assert again.ack(consumers[0])
    assert consumers[0]._new_offset(TP0) == 16


def test_an_ack_while_the_flow_is_suspended_does_not_count(consumers):
    for consumer in consumers:
        consumer.app.flow_control.suspend()  # a rebalance started: streams skip what they hold
    skipped = both(consumers, lambda c: taken(c, 15))
    assert [m.ack(c) for c, m in zip(consumers, skipped)] == [False, True]
    assert [c._new_offset(TP0) for c in consumers] == [None, 16]


def test_consecutive_finished_messages_are_committed_as_faust_does(consumers):
    ours, _ = consumers
    messages = [taken(ours, offset) for offset in (15, 16, 17)]
    for message in reversed(messages):
        assert message.ack(ours)
    assert ours._new_offset(TP0) == 18
    assert ours._new_offset(TP0) is None  # nothing new since
