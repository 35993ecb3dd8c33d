"""Escalations on a real worker: sent to disputes.escalations keyed by case, and a redelivered input
re-sends the same one without a model call (tests/unit/jury/test_escalation.py has the reasons)."""

from __future__ import annotations

import pytest

from cyberjurors.jury.escalation import escalation_id
from cyberjurors.schemas import (
    Escalation,
    Verdict,
)
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, calls, read_topic, worker_process

# --- a real worker ------------------------------------------------------------------------------------


@pytest.mark.integration
async def test_a_worker_sends_escalations_keyed_by_case_and_resends_the_same_one(settings, tmp_path):
    settings = settings.model_copy(update={"escalation_margin": 18, "jurors": 5, "rounds": 1})  # every verdict
    events = read_events([sorted((EXAMPLES / "cases").glob("*.json"))[0]])
    case_id = events[0].case_id
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, events)
        [(key, verdict)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=120)
        [(escalated_key, raised)] = await read_topic(settings, "disputes.escalations", until=1, timeout_s=60)
        decided = Verdict.model_validate_json(verdict)
        sent = Escalation.model_validate_json(raised)
        assert key == escalated_key == case_id and decided.escalated and "narrow_margin" in decided.escalation_reasons
        assert sent.verdict == decided and sent.escalation_id == escalation_id(decided)
        assert sent.reasons == decided.escalation_reasons and len(sent.notes) == len(sent.reasons)
        record = sent.case_file
        media = [i.media for i in record.case.items() if i.media is not None]
        assert media and all(m.path or m.url or m.stored for m in media)  # evidence by reference, not by value
        assert record.focus is not None and record.clues is not None and record.clues.all()
        assert [len(r.ballots) for r in record.rounds] == [5] and record.rounds[0].summary.votes == decided.votes
        model_calls = len(calls(settings.llm_call_log))

        [(_, ready)] = await read_topic(settings, "disputes.intake", until=1, keys={case_id}, timeout_s=30)
        await produce(settings, [Outgoing(case_id, ready, "redelivery", topic=settings.topic("disputes.intake"))])
        again = await read_topic(settings, "disputes.escalations", until=2, timeout_s=60)
    assert [v for _, v in again] == [raised, raised]  # the same escalation, not a second one
    assert len(calls(settings.llm_call_log)) == model_calls
