"""``dlq --replay`` on the embedded broker: each replayable letter is sent back once (the record in
disputes.dlq-replayed is read by any later replay, from any machine), final letters never, an
original kept in the media store is sent from there, a letter whose original failed again after a
replay is held back (sent with ``--again``), and the filters pick by time, reason, stage and case. A
final letter is sent only by ``--replay --final`` (after what made it fail has changed), once as
well. With a running app and a worker: tests/integration/test_dlq_replay.py.
"""

from __future__ import annotations

import base64
from collections import Counter
from datetime import UTC, datetime, timedelta

from cyberjurors.evidence.media_store import LocalMediaStore
from cyberjurors.evidence.records import is_sealed
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.schemas import DeadLetter
from cyberjurors.tooling.clients import (
    LetterFilter,
    Outgoing,
    placed_letters,
    produce,
    reader_seal,
    records,
    replay,
    replayed,
)

from ...conftest import cli, read_topic
from ...factories import sealing

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
    topic: str = "disputes.events",
) -> Outgoing:
    d = DeadLetter(
        reason=reason,
        detail="d",
        stage=stage,
        topic=settings.topic(topic),
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


async def test_a_letter_whose_stored_original_failed_again_after_a_replay_is_held_back(settings, tmp_path):
    """An original too large to carry is the case's own object in the media store, named by the
    digest of what is stored (not of the original's bytes): the replay note names it as the letter
    does, so the letter written when the replay failed again is recognised."""
    settings = settings.model_copy(update={"media_store": str(tmp_path / "store")})
    stored = b'{"type": "case", "large": "' + b"z" * 5000 + b'"}'
    ref = await LocalMediaStore(tmp_path / "store").put(stored, "c")
    await ensure_topics(settings)
    await produce(settings, [letter(settings, "c", "stage_failed", "round-2", True, 0, ref=ref)])
    first = await replay(settings, await placed_letters(settings))
    assert [x.letter.key for x in first.sent] == ["c"]
    again = await LocalMediaStore(tmp_path / "store").put(stored, "c")  # the same original failed again
    await produce(settings, [letter(settings, "c", "stage_failed", "round-2", True, 1, ref=again)])
    second = await replay(settings, await placed_letters(settings))
    assert second.sent == [] and [x.letter.key for x in second.failed_again] == ["c"]


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


def test_a_stage_name_of_an_earlier_release_is_refused_with_todays_name():
    from typer.testing import CliRunner

    from cyberjurors.cli import app

    result = CliRunner().invoke(app, ["dlq", "--stage", "ingest"])
    assert result.exit_code == 2
    assert "'ingest' is now 'intake'" in result.output and "renamed.md" in result.output


async def test_with_payload_encryption_an_original_goes_back_sealed_and_an_erased_case_s_letter_is_left_out(
    settings, tmp_path
):
    settings = sealing(settings, tmp_path)
    await ensure_topics(settings)
    sent = [
        letter(settings, "a", "llm_timeout", "focus", True, 0, b"original-a", topic="disputes.focus"),
        letter(settings, "e", "llm_timeout", "intake", True, 1, b"original-e"),  # the platform's topic
        letter(settings, "gone", "llm_timeout", "focus", True, 2, b"original-gone", topic="disputes.focus"),
    ]
    await produce(settings, sent, seal=True)  # sealed as a worker seals its letters
    seal = reader_seal(settings)
    assert seal is not None
    await seal.keys.destroy("gone")  # erased: its letter holds nothing anyone can read

    left_out: Counter[str] = Counter()
    letters = await placed_letters(settings, left_out)
    assert sorted(x.letter.key for x in letters) == ["a", "e"] and left_out == {"case_erased": 1}
    listed = said(cli(settings, "dlq"))
    assert "2 dead letters" in listed and "1 sealed letters left out, unreadable (1 case_erased)" in listed, listed

    result = await replay(settings, letters)
    assert sorted(x.letter.key for x in result.sent) == ["a", "e"]
    for key, topic in (("a", "disputes.focus"), ("e", "disputes.events")):
        resent = [r.value async for r in records(settings, topic, follow=False, raw=True, idle_timeout_s=1)]
        assert len(resent) == 1 and is_sealed(resent[0]) and b"original" not in resent[0], (topic, resent)
        assert await seal.open(key, resent[0]) == f"original-{key}".encode()
