"""``dlq --replay`` on the embedded broker: each replayable letter is sent back once (the record in
disputes.dlq-replayed is read by any later replay, from any machine), final letters never, an
original kept in the media store is sent from there, a replay that fails again is not sent again
by the next ``--replay`` (only with ``--again``), and the filters pick by time, reason, stage and
case. A final letter is sent only by ``--replay --final`` (after what made it fail has changed),
once as well; the trial's stuck case (a focus answer cut off by thinking) is judged that way.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta

import pytest

from cyberjurors.evidence.media_store import LocalMediaStore
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMError
from cyberjurors.schemas import DeadLetter
from cyberjurors.streams.app import create_app
from cyberjurors.streams.clients import (
    LetterFilter,
    Outgoing,
    placed_letters,
    produce,
    read_events,
    replay,
    replayed,
)
from cyberjurors.streams.kafka import ensure_topics

from .conftest import EXAMPLES, read_topic, running_app, worker_process
from .messages_server import ScriptedServer, ThinkingModel, serving
from .test_cli import cli

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)


def letter(
    settings,
    key: str,
    reason: str,
    stage: str,
    replayable: bool,
    hours: int,
    original: bytes = b"",
    ref: str | None = None,
) -> Outgoing:
    d = DeadLetter(
        reason=reason,
        detail="d",
        stage=stage,
        topic=settings.topic("disputes.events"),
        partition=0,
        offset=0,
        key=key,
        replayable=replayable,
        original_base64=base64.b64encode(original).decode(),
        original_ref=ref,
        failed_at=T0 + timedelta(hours=hours),
    )
    return Outgoing(key, d.model_dump_json().encode(), "test", topic=settings.topic("disputes.dlq"))


async def test_each_replayable_letter_is_replayed_once_and_final_ones_never(settings, tmp_path):
    settings = settings.model_copy(update={"media_store": str(tmp_path / "store")})
    stored = b'{"type": "case", "large": "' + b"z" * 5000 + b'"}'
    ref = await LocalMediaStore(tmp_path / "store").put(stored)
    await ensure_topics(settings)
    await produce(
        settings,
        [
            letter(settings, "a", "llm_timeout", "focus", True, 0, b"original-a"),
            letter(settings, "b", "llm_bad_request", "focus", False, 1, b"original-b"),
            letter(settings, "c", "stage_failed", "round-2", True, 2, ref=ref),
            letter(settings, "d", "llm_overloaded", "clues", True, 3, b"original-d"),
        ],
    )
    letters = await placed_letters(settings)
    assert sorted(x.letter.key for x in letters) == ["a", "b", "c", "d"]

    first = await replay(settings, letters)
    assert sorted(x.letter.key for x in first.sent) == ["a", "c", "d"] and first.already == [] and first.failed == []
    sent = await read_topic(settings, "disputes.events", until=3, timeout_s=20)
    assert sorted(sent) == sorted([("a", b"original-a"), ("c", stored), ("d", b"original-d")])
    assert set(await replayed(settings)) == {x.id for x in first.sent}

    again = await replay(settings, await placed_letters(settings))  # a second run, as from another machine
    assert again.sent == [] and sorted(x.letter.key for x in again.already) == ["a", "c", "d"]
    assert len(await read_topic(settings, "disputes.events", until=4, timeout_s=3)) == 3  # nothing re-sent


async def test_the_filters_pick_by_time_reason_stage_and_case(settings):
    await ensure_topics(settings)
    await produce(
        settings,
        [
            letter(settings, "a", "llm_timeout", "focus", True, 0),
            letter(settings, "b", "llm_timeout", "round-2", True, 5),
            letter(settings, "c", "stage_failed", "round-3", True, 10),
        ],
    )
    letters = [x.letter for x in await placed_letters(settings)]

    def keys(f: LetterFilter) -> list[str]:
        return sorted(x.key for x in letters if f(x))

    assert keys(LetterFilter(since=T0 + timedelta(hours=5))) == ["b", "c"]
    assert keys(LetterFilter(until=T0 + timedelta(hours=5))) == ["a"]  # until is exclusive
    assert keys(LetterFilter(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=6))) == ["b"]
    assert keys(LetterFilter(reason="llm_timeout")) == ["a", "b"]
    assert keys(LetterFilter(stage="rounds")) == ["b", "c"] and keys(LetterFilter(stage="round-3")) == ["c"]
    assert keys(LetterFilter(case="c", reason="stage_failed")) == ["c"]


async def test_the_command_replays_the_chosen_letters_once(settings):
    await ensure_topics(settings)
    await produce(
        settings,
        [
            letter(settings, "a", "llm_timeout", "focus", True, 0, b"original-a"),
            letter(settings, "b", "llm_timeout", "focus", True, 30, b"original-b"),
        ],
    )
    first = cli(settings, "dlq", "--replay", "--until", "2026-11-02")
    assert first.returncode == 0, first.stderr
    assert "1 dead letters" in first.stdout and "replayed 1;" in first.stdout
    second = cli(settings, "dlq", "--replay")
    assert second.returncode == 0, second.stderr
    assert "replayed 1; 1 replayed before" in second.stdout
    sent = await read_topic(settings, "disputes.events", until=3, timeout_s=5)
    assert sorted(sent) == [("a", b"original-a"), ("b", b"original-b")]


@pytest.mark.integration
async def test_a_replay_that_fails_again_is_not_resent_by_the_next_replay_unless_asked(settings):
    """The provider keeps failing: the first replay's failure writes a new letter with the same
    original; the next --replay holds it back, --again sends it (once), and a letter for another
    original in the same run still goes."""
    settings = settings.model_copy(update={"jurors": 3, "rounds": 1})
    offline = OfflineLLM()
    down = {"failing"}

    async def answer(request, output_type):
        if request.role == "focus" and request.case_id in down:
            raise LLMError("overloaded", "529 after retries")
        return (await offline.generate(request, output_type)).output

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


def said(result) -> str:
    """The command's output on one line (rich wraps it at the width of a terminal it does not have)."""
    assert result.returncode == 0, result.stderr
    return " ".join(result.stdout.split())


async def test_the_command_holds_back_a_letter_whose_original_failed_after_a_replay(settings):
    await ensure_topics(settings)
    await produce(settings, [letter(settings, "a", "llm_timeout", "focus", True, 0, b"original-a")])
    assert "replayed 1;" in cli(settings, "dlq", "--replay").stdout
    await produce(settings, [letter(settings, "a", "llm_timeout", "focus", True, 1, b"original-a")])  # failed again
    assert "failed again after a replay" in said(cli(settings, "dlq"))
    held = said(cli(settings, "dlq", "--replay"))
    assert "replayed 0; 1 replayed before; 1 failed again after a replay (--again sends them)" in held, held
    sent = said(cli(settings, "dlq", "--replay", "--again"))
    assert "replayed 1; 1 replayed before;" in sent, sent
    assert len(await read_topic(settings, "disputes.events", until=3, timeout_s=5)) == 2


async def test_the_command_sends_final_letters_only_with_final_and_each_once(settings):
    await ensure_topics(settings)
    await produce(
        settings,
        [
            letter(settings, "a", "llm_truncated", "focus", False, 0, b"original-a"),
            letter(settings, "b", "text_too_long", "intake", False, 1, b"original-b"),
        ],
    )
    assert cli(settings, "dlq", "--final").returncode == 2  # it goes with --replay
    left = said(cli(settings, "dlq", "--replay"))
    assert "replayed 0; 0 replayed before; 2 would fail the same way (--final sends them" in left, left
    picked = said(cli(settings, "dlq", "--replay", "--final", "--reason", "llm_truncated"))
    assert "replayed 1; 0 replayed before; 0 would fail" in picked, picked
    assert await read_topic(settings, "disputes.events", until=2, timeout_s=5) == [("a", b"original-a")]
    assert "final, replayed" in said(cli(settings, "dlq", "--case", "a"))

    second = said(cli(settings, "dlq", "--replay", "--final", "--reason", "llm_truncated"))
    assert "replayed 0; 1 replayed before" in second, second
    plain = said(cli(settings, "dlq", "--replay"))  # without --final the sent one stays replayed, b stays final
    assert "replayed 0; 1 replayed before; 1 would fail the same way" in plain, plain

    # a's replay failed the same way again: a new letter, same original, held back like any other
    await produce(settings, [letter(settings, "a", "llm_truncated", "focus", False, 2, b"original-a")])
    held = said(cli(settings, "dlq", "--replay", "--final", "--case", "a"))
    assert "replayed 0; 1 replayed before; 1 failed again after a replay (--again sends them)" in held, held
    sent = said(cli(settings, "dlq", "--replay", "--final", "--again", "--case", "a"))
    assert "replayed 1; 1 replayed before" in sent, sent
    assert len(await read_topic(settings, "disputes.events", until=3, timeout_s=5)) == 2


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

        raised = cut.model_copy(update={"llm_thinking_budget": 10000})
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
