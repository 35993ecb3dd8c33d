"""A stage whose output is already stored is not run again when its input is redelivered: with a
real worker, after a case's verdict, the exact ``disputes.intake`` and ``disputes.focus`` messages
are sent again (what a consumer sees when an offset commit is lost); the worker calls no model and
the verdict comes out again, the same. The verdict deleted the case's intermediate results, so each
redelivered input of the decided case re-sends the stored verdict itself instead of its stage's output."""

from __future__ import annotations

from collections import Counter

import pytest
from aiokafka.structs import ConsumerRecord
from faust.types import TP

from cyberjurors.config import Settings
from cyberjurors.schemas import CaseFile, Verdict
from cyberjurors.streams.app import faust_app
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, calls, read_topic

pytestmark = pytest.mark.integration


def roles(settings, case_id: str) -> Counter:
    return Counter(c["role"] for c in calls(settings.llm_call_log) if c["case_id"] == case_id)


async def test_redelivered_stage_inputs_reuse_the_stored_outputs(settings, worker):
    events = read_events([sorted((EXAMPLES / "cases").glob("*.json"))[0]])
    case_id = events[0].case_id
    await produce(settings, events)
    [(key, first)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=120)
    assert key == case_id
    decided = Verdict.model_validate_json(first)
    before = roles(settings, case_id)
    assert all(before[r] > 0 for r in ("focus", "select", "perceive", "juror")), before

    redelivered = []
    for topic in ("disputes.intake", "disputes.focus"):
        [(key, value)] = await read_topic(settings, topic, until=1, keys={case_id}, timeout_s=30)
        assert CaseFile.model_validate_json(value).case_id == case_id
        redelivered.append(Outgoing(case_id, value, "redelivery", topic=settings.topic(topic)))
    await produce(settings, redelivered)

    verdicts = await read_topic(settings, "disputes.verdicts", until=3, timeout_s=120)
    assert [k for k, _ in verdicts] == [case_id] * 3, "each redelivery should end in the verdict re-sent"
    assert [Verdict.model_validate_json(v).verdict_id for _, v in verdicts] == [decided.verdict_id] * 3
    assert all(v == first for _, v in verdicts)  # the stored verdict, not a new decision
    after = roles(settings, case_id)
    assert after == before, f"model calls repeated: {before} -> {after}"
    # the decided case went no further down the pipeline: disputes.clues holds only the original
    clues = await read_topic(settings, "disputes.clues", until=2, keys={case_id}, timeout_s=5)
    assert len(clues) == 1


@pytest.mark.parametrize("committed", [0, 5])
async def test_no_commit_passes_a_message_still_being_handled(committed):
    """faust-streaming 0.15 commits past the message at the committed offset while an agent still
    handles it, once the ones after it are acked (faust-streaming#606): with stage_concurrency actors
    a slow case there (a stalled URL) and a worker killed meanwhile, the restarted worker resumed after
    it and the case was lost with no letter. The worker's consumer (kafka/transport.py) commits only
    up to the first offset no handler finished; an offset no message holds is committed past only
    once the broker's log start is past it (deleted by retention), never because a reading began
    past it."""
    app = faust_app(Settings(llm_backend="offline", precedent_backend="none"))
    app.topics.add(app.topic("t", value_serializer="raw"))
    await app.topics._update_indices()  # what subscribing does: acks are tracked for the agents' topics
    consumer, tp = app.consumer, TP("t", 0)

    def fetched(offset: int):  # type: ignore[no-untyped-def]
        message = consumer._to_message(tp, ConsumerRecord("t", 0, offset, 0, 0, b"k", b"v", None, 1, 1, ()))
        consumer.track_message(message)  # handed to an agent
        return message

    def finished(message) -> None:  # type: ignore[no-untyped-def]
        consumer.mark_handled(message)  # what app.each reports once the handler returned
        consumer.ack(message)

    messages = [fetched(offset) for offset in range(committed, committed + 4)]
    consumer._committed_offset[tp] = committed
    for message in messages[1:]:
        finished(message)
    assert consumer._new_offset(tp) is None  # the first is still being handled
    finished(messages[0])
    assert consumer._new_offset(tp) == committed + 4
    consumer._committed_offset[tp] = committed + 4  # as the commit records it
    # a gap no message fills holds the commit, even when a reading begins past it: records handed
    # over while the seek was under way are not counted, so that says nothing of the gap
    for message in [fetched(offset) for offset in (committed + 5, committed + 6)]:
        finished(message)
    assert consumer._new_offset(tp) is None
    consumer._new_reading(tp)
    consumer._sought_to(tp, committed + 4)
    consumer._batch_sought = dict(consumer._sought)  # a batch asked for after the seek
    finished(fetched(committed + 5))
    assert consumer._new_offset(tp) is None

    async def earliest_offsets(*tps):  # type: ignore[no-untyped-def]  # the broker's answer: the log starts past the gap
        return {tp: committed + 5 for tp in tps}

    consumer.earliest_offsets = earliest_offsets  # type: ignore[method-assign]
    assert await consumer._deleted(tp, committed + 4)
    assert consumer._new_offset(tp) == committed + 7
