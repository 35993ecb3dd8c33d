"""Letters on a real worker: a case's verdict on disputes.verdicts gets one letter per party on
disputes.letters, keyed by the case, in each party's language; the verdict sent to the topic again
(a redelivery, a re-sent verdict) re-sends the same letters and calls no model. The handler alone:
tests/unit/streams/test_letters.py."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from cyberjurors.schemas import PartyLetter, Verdict
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, calls, read_topic, worker_process

pytestmark = pytest.mark.integration

CASE = "appl-004-kettle-leak-es-en"


async def test_a_verdict_gets_a_letter_to_each_party_and_a_resent_verdict_calls_no_model(settings, tmp_path):
    settings = settings.model_copy(update={"letters": True})
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, read_events([EXAMPLES / "cases" / f"{CASE}.json"]))
        [(key, verdict)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=120)
        first = await read_topic(settings, "disputes.letters", until=2, timeout_s=60)
        before = Counter(c["role"] for c in calls(settings.llm_call_log) if c["case_id"] == CASE)
        await produce(settings, [Outgoing(CASE, verdict, "redelivery", route="disputes.verdicts")])
        again = await read_topic(settings, "disputes.letters", until=4, timeout_s=60)
        await asyncio.sleep(1)
        after = Counter(c["role"] for c in calls(settings.llm_call_log) if c["case_id"] == CASE)
    assert key == CASE and {k for k, _ in again} == {CASE}
    letters = [PartyLetter.model_validate_json(v) for _, v in first]
    decided = Verdict.model_validate_json(verdict)
    assert sorted((x.party, x.locale, x.verdict_id) for x in letters) == [
        ("buyer", "es", decided.verdict_id),
        ("seller", "en", decided.verdict_id),
    ]
    assert before["letter"] == 2 and after == before, f"model calls repeated: {before} -> {after}"
    assert sorted(v for _, v in again[2:]) == sorted(v for _, v in first)  # the stored bytes re-sent
