"""Kill the worker (SIGKILL) while the jury deliberates, after stage II's output is on the topic;
a new worker finishes the case without repeating stages I and II."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMError
from cyberjurors.schemas import DeadLetter, Verdict
from cyberjurors.streams.app import create_app
from cyberjurors.tooling.clients import placed_letters, produce, read_events, replay, replayable

from ..conftest import EXAMPLES, calls, read_topic, running_app, worker_process

pytestmark = pytest.mark.integration


async def test_killed_worker_resumes_without_repeating_stages_one_and_two(settings, tmp_path):
    # a simulated provider latency makes the jury rounds long enough to be killed in
    settings = settings.model_copy(update={"offline_latency_s": 0.4, "early_stop": 1.0})
    events = read_events([EXAMPLES / "cases" / sorted(p.name for p in (EXAMPLES / "cases").glob("*.json"))[0]])
    case_id = events[0].case_id

    async with worker_process(settings, tmp_path / "worker-1.log") as first:
        await produce(settings, events)
        assert await read_topic(settings, "disputes.clues", until=1, timeout_s=90), "stage II never finished"
        await asyncio.sleep(4 * settings.commit_interval_s + 0.5)  # its input offset is committed too
        first.kill()
    before = Counter(c["role"] for c in calls(settings.llm_call_log) if c["case_id"] == case_id)
    assert before["juror"] < settings.jurors * settings.rounds, "the case finished before the kill"
    assert not await read_topic(settings, "disputes.verdicts", until=1, timeout_s=1)

    async with worker_process(settings, tmp_path / "worker-2.log"):
        verdicts = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=180)
    after = Counter(c["role"] for c in calls(settings.llm_call_log) if c["case_id"] == case_id)

    assert [k for k, _ in verdicts] == [case_id]
    verdict = Verdict.model_validate_json(verdicts[0][1])
    assert verdict.votes.total == settings.jurors and verdict.rounds_used == settings.rounds
    for role in ("focus", "select", "perceive"):
        assert after[role] == before[role] > 0, f"{role} calls repeated: {before[role]} -> {after[role]}"
    assert after["juror"] >= settings.jurors * settings.rounds


async def test_a_failed_model_call_is_dead_lettered_and_its_replay_finishes_the_case(settings):
    """The provider is down during round 1: the round's input goes to the DLQ as llm_overloaded;
    once it recovers, `cyberjurors dlq --replay` (the same function) completes the case."""
    settings = settings.model_copy(update={"jurors": 5})
    offline = OfflineLLM()
    provider_down = True

    async def answer(request, output_type):
        if request.role == "juror" and provider_down:
            raise LLMError("overloaded", "529 after retries")
        return (await offline.generate(request, output_type)).output

    scripted = ScriptedLLM(answer)
    events = read_events([sorted((EXAMPLES / "cases").glob("*.json"))[0]])
    await ensure_topics(settings)
    async with running_app(create_app(settings, llm=scripted)):
        await produce(settings, events)
        letters = await read_topic(settings, "disputes.dlq", until=1, timeout_s=90)
        assert letters, "the failed round was not dead-lettered"
        letter = DeadLetter.model_validate_json(letters[0][1])
        assert (letter.reason, letter.stage, letter.key) == ("llm_overloaded", "round-1", events[0].case_id)
        assert letter.topic == settings.topic("disputes.clues") and replayable(letter)
        before = Counter(c.role for c in scripted.calls)

        provider_down = False
        await replay(settings, await placed_letters(settings))
        verdicts = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=90)

    assert [k for k, _ in verdicts] == [events[0].case_id]
    after = Counter(c.role for c in scripted.calls)
    assert all(after[r] == before[r] > 0 for r in ("focus", "select", "perceive")), (before, after)
