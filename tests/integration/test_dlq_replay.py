"""``dlq --replay`` with a running app: a replay that fails again is not sent again by the next
``--replay`` (only with ``--again``), and the trial's stuck case (a focus answer cut off by thinking)
is judged by a worker after the budget is raised and a final replay
(tests/unit/cli/test_dlq_replay.py: the letters, the filters and the command)."""

from __future__ import annotations

import asyncio

import pytest

from cyberjurors.config import RoleCall
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMError
from cyberjurors.schemas import DeadLetter
from cyberjurors.streams.app import create_app
from cyberjurors.tooling.clients import (
    Outgoing,
    placed_letters,
    produce,
    read_events,
    replay,
)

from ..conftest import EXAMPLES, cli, read_topic, running_app, worker_process
from ..messages_server import ScriptedServer, ThinkingModel, serving
from ..schema_model import SchemaModel
from ..unit.cli.test_dlq_replay import said


@pytest.mark.integration
async def test_a_replay_that_fails_again_is_not_resent_by_the_next_replay_unless_asked(settings):
    """The provider keeps failing: the first replay's failure writes a new letter with the same
    original; the next --replay holds it back, --again sends it (once), and a letter for another
    original in the same run still goes."""
    settings = settings.model_copy(update={"jurors": 3, "rounds": 1})
    model = SchemaModel()
    down = {"failing"}

    async def answer(request, output_type):
        if request.role == "focus" and request.case_id in down:
            raise LLMError("overloaded", "529 after retries")
        return (await model.generate(request, output_type)).output

    source = sorted((EXAMPLES / "cases").glob("*.json"))[0]
    (event,) = read_events([source])
    failing = Outgoing("failing", event.value.replace(event.case_id.encode(), b"failing"), "test")
    other = Outgoing("other", event.value.replace(event.case_id.encode(), b"other"), "test")
    await ensure_topics(settings)
    async with running_app(create_app(settings, llm=ScriptedLLM(answer))):
        await produce(settings, [failing])
        assert len(await read_topic(settings, "disputes.dlq", until=1, timeout_s=90)) == 1
        first = await replay(settings, await placed_letters(settings))
        assert [x.letter.key for x in first.sent] == ["failing"]
        letters = await read_topic(settings, "disputes.dlq", until=2, timeout_s=90)
        assert len(letters) == 2, "the replay did not fail again"

        down.add("other")
        await produce(settings, [other])  # a new failure, never replayed: it goes in the next run
        assert len(await read_topic(settings, "disputes.dlq", until=3, timeout_s=90)) == 3
        second = await replay(settings, await placed_letters(settings))
        assert [x.letter.key for x in second.sent] == ["other"]
        assert [x.letter.key for x in second.failed_again] == ["failing"] and len(second.already) == 1
        assert len(await read_topic(settings, "disputes.dlq", until=4, timeout_s=90)) == 4  # other failed again

        down.clear()  # the cause fixed: --again sends the held-back ones, each once
        third = await replay(settings, await placed_letters(settings), again=True)
        assert sorted(x.letter.key for x in third.sent) == ["failing", "other"]
        verdicts = await read_topic(settings, "disputes.verdicts", until=2, timeout_s=90)
        assert sorted(k for k, _ in verdicts) == ["failing", "other"]
        fourth = await replay(settings, await placed_letters(settings), again=True)
        assert fourth.sent == [] and len(fourth.already) == 4


async def logged(log, text: str, timeout_s: float = 60) -> str | None:
    """The worker log's first line with ``text``, once it is there (None if it never comes)."""

    async def line() -> str:
        while True:
            found = [x for x in (log.read_text() if log.exists() else "").splitlines() if text in x]
            if found:
                return found[0]
            await asyncio.sleep(0.2)

    try:
        return await asyncio.wait_for(line(), timeout_s)
    except TimeoutError:
        return None


@pytest.mark.integration
@pytest.mark.timeout(300)
async def test_a_case_cut_off_by_thinking_is_judged_after_the_budget_is_raised_and_a_final_replay(settings, tmp_path):
    """The trial's stuck case: a model that thinks 8,000 tokens leaves focus no room for its answer
    under the default thinking room, so the case is dead-lettered llm_truncated, final. The
    operator raises the thinking budget and restarts the worker. The case submitted again is still
    ignored, but at WARNING, naming the command; --replay leaves the final letter; --replay --final
    sends it and the restarted worker judges the case; a second run sends nothing."""
    (event,) = read_events([EXAMPLES / "cases" / "clot-001-shirt-torn-seam.json"])
    log = tmp_path / "worker.log"
    with serving(ScriptedServer(respond=ThinkingModel(thinking_tokens=8000))) as url:
        cut = settings.model_copy(
            update={
                "llm_backend": "anthropic",
                "anthropic_api_key": "sk-ant-test",
                "anthropic_base_url": url,
                "llm_max_retries": 0,
                "jurors": 3,
                "rounds": 1,
            }
        )
        async with worker_process(cut, log):
            await produce(cut, [event])
            (dead,) = await read_topic(cut, "disputes.dlq", until=1, timeout_s=90)
        first = DeadLetter.model_validate_json(dead[1])
        assert (first.stage, first.reason, first.replayable) == ("focus", "llm_truncated", False), first
        assert "thinking_budget" in first.detail

        raised = cut.model_copy(update={"llm_roles": {"default": RoleCall(thinking_budget=10000)}})
        async with worker_process(raised, log):
            await produce(raised, [event])  # what the operator tried first: intake ignores it, and says so
            warning = await logged(log, f"case {event.case_id} submitted again unchanged")
            assert warning is not None and "[WARNING]" in warning and "already dead-lettered at focus" in warning
            assert f"cyberjurors dlq --replay --final --case {event.case_id}" in warning, warning

            left = said(cli(raised, "dlq", "--replay"))
            assert "replayed 0; 0 replayed before; 1 would fail the same way" in left, left
            assert await read_topic(raised, "disputes.verdicts", until=1, timeout_s=3) == []

            sent = said(cli(raised, "dlq", "--replay", "--final", "--reason", "llm_truncated"))
            assert "replayed 1;" in sent, sent
            verdicts = await read_topic(raised, "disputes.verdicts", until=1, timeout_s=120)
            assert [k for k, _ in verdicts] == [event.case_id], log.read_text()[-4000:]

            again = said(cli(raised, "dlq", "--replay", "--final"))
            assert "replayed 0; 1 replayed before" in again, again
            assert len(await read_topic(raised, "disputes.intake", until=3, timeout_s=5)) == 2  # admitted, replayed
            assert len(await read_topic(raised, "disputes.dlq", until=2, timeout_s=3)) == 1
