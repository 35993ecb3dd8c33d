"""An appeal through a real worker on the embedded broker: the second instance's verdict, a second
appeal refused, and the replayed appeal re-sending its verdict without a model call
(tests/unit/streams/test_appeals.py drives the appeal handler alone)."""

from __future__ import annotations

import json

import pytest

from cyberjurors.schemas import (
    DeadLetter,
    Verdict,
)
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, calls, read_topic, worker_process
from ..unit.streams.test_appeals import appeal

# --- a real worker ----------------------------------------------------------------------------------


@pytest.mark.integration
async def test_an_appeal_through_a_worker_gets_a_final_verdict_and_a_second_is_refused(settings, tmp_path):
    settings = settings.model_copy(update={"jurors": 5, "appeal_jurors": 9, "rounds": 1})
    events = read_events([sorted((EXAMPLES / "cases").glob("*.json"))[0]])
    case_id = events[0].case_id
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, events)
        [(_, raw)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=120)
        first = Verdict.model_validate_json(raw)
        loser = "buyer" if first.winner == "seller" else "seller"
        filed = appeal(
            first,
            appellant=loser,
            evidence=[{"id": "x-new-1", "kind": "text", "text": "New: the courier confirmed the damage."}],
        )
        second_appeal = filed | {"grounds": "A second try."}
        await produce(settings, [Outgoing(case_id, json.dumps(filed).encode(), "test", route="disputes.appeals")])
        found = await read_topic(settings, "disputes.verdicts", until=2, timeout_s=180)
        final = Verdict.model_validate_json(found[1][1])
        assert (final.instance, final.appeal_of, final.votes.total) == (2, first.verdict_id, 9)
        model_calls = len(calls(settings.llm_call_log))
        await produce(
            settings,
            [
                Outgoing(case_id, json.dumps(second_appeal).encode(), "test", route="disputes.appeals"),
                Outgoing(case_id, json.dumps(filed).encode(), "test", route="disputes.appeals"),
            ],
        )
        [(_, letter)] = await read_topic(settings, "disputes.dlq", until=1, timeout_s=60)
        again = await read_topic(settings, "disputes.verdicts", until=3, timeout_s=60)
    assert DeadLetter.model_validate_json(letter).reason == "appeal_already_filed"
    assert again[2][1] == found[1][1]  # the replayed appeal: its verdict re-sent
    assert len(calls(settings.llm_call_log)) == model_calls
