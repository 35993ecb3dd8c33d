"""The stream handlers alone, without Kafka: dict tables, list-backed topics and fake events.

Each event is parsed once per hop, each hand-off serialised once (the table stores the bytes the
topic got, and a replay re-sends them), and the case digest is computed once at intake and
carried to the verdict id.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from cyberjurors.config import Settings
from cyberjurors.evidence.signing import sign
from cyberjurors.jury.rounds import Jury
from cyberjurors.jury.stages import NoPrecedents, clues_stage, focus_stage, round_stage
from cyberjurors.jury.verdict import VERDICT_NAMESPACE, verdict_id
from cyberjurors.llm.port import LLMError
from cyberjurors.observability import metrics
from cyberjurors.schemas import CaseFile, DeadLetter, DecidedBy, OutcomeReported, Verdict
from cyberjurors.state.results import StageResults
from cyberjurors.streams.dead_letters import DeadLetters, hand_on
from cyberjurors.streams.intake import Intake
from cyberjurors.streams.outcome import Outcomes
from cyberjurors.streams.stage_hop import StageHop
from cyberjurors.streams.verdict import Verdicts

from ...factories import case as text_case  # a text-only case
from ...schema_model import SchemaModel

NOW = datetime(2026, 11, 1, tzinfo=UTC)


class Topic:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes]] = []
        self.headers: list[dict[str, bytes]] = []  # of each message sent, in order
        self.partitions: list[int | None] = []  # the partition each was sent to, when one was chosen

    async def send(
        self, *, key: bytes, value: bytes, headers: dict[str, bytes] | None = None, partition: int | None = None
    ) -> None:
        self.sent.append((key, value))
        self.headers.append(dict(headers or {}))
        self.partitions.append(partition)


def event(value: bytes, key: bytes = b"k", partition: int = 0) -> SimpleNamespace:
    return SimpleNamespace(
        value=value, message=SimpleNamespace(key=key, value=value, topic="t", partition=partition, offset=7)
    )


@pytest.fixture
def parts():
    in_flight = metrics.CasesInFlight()
    dlq = Topic()
    table: dict[str, bytes] = {}
    results = StageResults(table)
    letters = DeadLetters(dlq, in_flight)
    return SimpleNamespace(
        in_flight=in_flight,
        dlq=dlq,
        table=table,
        results=results,
        letters=letters,
        hop=StageHop(results, letters, in_flight),
    )


def dead(dlq: Topic) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(v) for _, v in dlq.sent]


async def test_ingest_admits_once_with_the_digest_and_stores_the_bytes_it_sends(parts):
    ready = Topic()
    intake = Intake(
        Settings(llm_backend="offline"), "offline", {}, parts.results, ready, parts.letters, parts.in_flight
    )
    case = text_case()
    submitted = json.dumps({"type": "case", "case": case.model_dump(mode="json")}).encode()
    await intake(event(submitted, b"c-1"))
    await intake(event(submitted, b"c-1"))  # the same content again: ignored
    [(key, value)] = ready.sent
    assert key == b"c-1" and parts.table["c-1/intake"] is value
    assert CaseFile.model_validate_json(value).digest == case.digest()

    changed = json.loads(submitted)
    changed["case"]["rounds"][0]["items"][0]["text"] = "Changed."
    await intake(event(json.dumps(changed).encode(), b"c-1"))
    [letter] = dead(parts.dlq)
    assert (letter.stage, letter.reason, letter.replayable) == ("intake", "case_already_submitted", False)


async def test_a_hop_parses_once_serialises_once_and_replays_the_stored_bytes(parts, monkeypatch):
    case_file = CaseFile(case=text_case(), received_at=NOW)
    parsed = []
    parse = CaseFile.model_validate_json
    monkeypatch.setattr(CaseFile, "model_validate_json", lambda raw: parsed.append(raw) or parse(raw))
    calls = []

    async def work(cf: CaseFile) -> CaseFile:
        calls.append(cf)
        return cf.model_copy(update={"problems": ["worked"]})

    out = Topic()
    incoming = event(case_file.model_dump_json().encode(), b"c-1")
    await parts.hop(incoming, "focus", out, work)
    assert len(parsed) == 1 and len(calls) == 1
    assert parts.table["c-1/focus"] is out.sent[0][1]

    await parts.hop(incoming, "focus", out, work)  # a replay: the stored bytes again, no work
    assert len(calls) == 1 and out.sent[1] == out.sent[0]


async def test_a_result_stored_by_an_older_version_is_resent_and_still_parses(parts):
    """An older version's table stored the case file as a json-serialised dict; the changelog gives it back as bytes."""
    case_file = CaseFile(case=text_case(), received_at=NOW, problems=["old"])
    parts.table["c-1/focus"] = json.dumps(case_file.model_dump(mode="json")).encode()
    out = Topic()

    async def work(cf: CaseFile) -> CaseFile:
        raise AssertionError("a stored result must not be recomputed")

    await parts.hop(event(case_file.model_dump_json().encode(), b"c-1"), "focus", out, work)
    assert CaseFile.model_validate_json(out.sent[0][1]) == case_file


async def test_failures_are_dead_lettered_with_their_flag(parts):
    case_file = CaseFile(case=text_case(), received_at=NOW)

    async def overloaded(cf: CaseFile) -> CaseFile:
        raise LLMError("overloaded", "try later")

    async def buggy(cf: CaseFile) -> CaseFile:
        raise KeyError("x")

    raw = case_file.model_dump_json().encode()
    await parts.hop(event(raw, b"c-1"), "focus", Topic(), overloaded)
    await parts.hop(event(raw, b"c-1"), "clues", Topic(), buggy)
    await parts.hop(event(b"not json", b"c-2"), "round", Topic(), buggy)
    assert [(d.stage, d.reason, d.replayable) for d in dead(parts.dlq)] == [
        ("focus", "llm_overloaded", True),
        ("clues", "stage_failed", True),
        ("round", "invalid_case_file", False),
    ]


async def test_the_verdict_is_decided_once_and_its_id_is_the_one_the_case_content_always_had(parts):
    settings = Settings(llm_backend="offline", jurors=3, rounds=1)
    llm, jury = SchemaModel(), Jury.from_settings(settings)
    case_file = await focus_stage(CaseFile(case=text_case(), received_at=NOW), llm, settings)
    case_file = await round_stage(await clues_stage(case_file, llm, settings, NoPrecedents()), jury, llm, settings)
    out = Topic()
    verdicts = Verdicts(Settings(llm_backend="offline"), parts.results, out, parts.in_flight)
    await verdicts.publish(case_file)
    await verdicts.publish(case_file)  # a replay re-sends the stored bytes
    assert out.sent[0] == out.sent[1] and parts.table[f"{case_file.case_id}/verdict"] is out.sent[0][1]
    verdict = Verdict.model_validate_json(out.sent[0][1])
    old_id = str(uuid.uuid5(VERDICT_NAMESPACE, f"{case_file.case_id}:{case_file.case.digest()}"))
    assert verdict.verdict_id == verdict_id(case_file) == old_id


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_an_outcome_after_its_verdict_expired_is_final_and_one_before_its_verdict_is_replayable():
    """The verdict leaves a marker when it expires: an outcome then is case_expired (no replay can
    bring the verdict back), while one for a case not decided yet stays unknown_case, replayable. An
    outcome decided longer than the retention ago for a case with nothing kept is case_expired too;
    the marker itself goes one retention later."""
    clock = Clock()
    table, times = {}, {}
    results = StageResults(table, times, retention_s=100, clock=clock)
    dlq = Topic()
    outcomes = Outcomes(
        Settings(llm_backend="offline", retention={"state_s": 100}),
        SchemaModel(),
        SimpleNamespace(enabled=False),
        results,
        {},
        DeadLetters(dlq, metrics.CasesInFlight()),
    )
    for stage in ("intake", "verdict"):
        await hand_on(results, "decided", stage, b"{}", Topic())
    await hand_on(results, "in-flight", "intake", b"{}", Topic())

    def outcome(case_id: str, decided_at: str | None = None) -> SimpleNamespace:
        raw = {"type": "outcome", "case_id": case_id, "votes": {"buyer": 12, "seller": 5}}
        return event(json.dumps(raw | ({"decided_at": decided_at} if decided_at else {})).encode(), case_id.encode())

    clock.now += 101
    assert await results.expire() == 2
    assert set(table) == {"decided/expired"} and set(times) == {"decided"}  # in-flight kept no verdict: gone whole
    await outcomes(outcome("decided"))
    await outcomes(outcome("in-flight"))
    await outcomes(outcome("never-seen"))
    await outcomes(outcome("never-seen", decided_at="2020-01-01T00:00:00Z"))  # decided long before the retention
    letters = dead(dlq)
    assert [(d.key, d.reason, d.replayable) for d in letters] == [
        ("decided", "case_expired", False),
        ("in-flight", "unknown_case", True),
        ("never-seen", "unknown_case", True),
        ("never-seen", "case_expired", False),
    ]
    assert "its verdict has expired (state_retention_s=100)" in letters[0].detail
    assert "decided at 2020-01-01 00:00 UTC" in letters[3].detail

    clock.now += 101  # one retention later the marker goes too: nothing is left of the case
    assert await results.expire() == 1 and table == {} and times == {}


async def test_a_second_outcome_with_another_decision_is_a_final_dead_letter_and_a_repeat_is_not(parts):
    """The first counted outcome stands. A repeat of its decision (the same votes, source and escalation,
    whatever its envelope or decided_at) is logged and ignored; one with other votes (the tester's
    10:7, then 1:16) must not vanish in a log line: a dead letter keeps it, final, saying what was
    counted and what differs."""
    key = "the console's outcome signing key, 32+ chars"
    # not escalated: an escalated case's platform outcomes wait for its panel (tests/unit/streams/test_held_outcomes.py)
    settings = Settings(llm_backend="offline", jurors=3, rounds=1, outcome_signing_key=key, escalate_on=[])
    llm, jury = SchemaModel(), Jury.from_settings(settings)
    case_file = await focus_stage(CaseFile(case=text_case("c-1"), received_at=NOW), llm, settings)
    case_file = await round_stage(await clues_stage(case_file, llm, settings, NoPrecedents()), jury, llm, settings)
    # stored under the key an earlier release used for intake's output (state/results.py RENAMED)
    parts.table["c-1/ready"] = case_file.model_dump_json().encode()
    decided = await Verdicts(settings, parts.results, Topic(), parts.in_flight).publish(case_file)
    outcomes = Outcomes(settings, llm, SimpleNamespace(enabled=False), parts.results, {}, parts.letters)
    counted = metrics.OUTCOMES.labels("agree" if decided.winner == "buyer" else "disagree", "buyer", decided.category)
    before = counted._value.get()

    first = {
        "type": "outcome",
        "case_id": "c-1",
        "votes": {"buyer": 10, "seller": 7},
        "decided_at": "2026-11-26T19:00:00Z",
    }
    await outcomes(event(json.dumps(first).encode(), b"c-1"))
    stored = parts.table["c-1/outcome"]
    same = first | {"event_id": "resent-1", "decided_at": "2026-11-26T19:05:00Z", "source": "platform_jury"}
    await outcomes(event(json.dumps(same).encode(), b"c-1"))
    assert dead(parts.dlq) == [] and counted._value.get() == before + 1

    other = json.dumps(first | {"votes": {"buyer": 1, "seller": 16}, "decided_at": "2026-11-26T19:01:00Z"}).encode()
    await outcomes(event(other, b"c-1"))
    [letter] = dead(parts.dlq)
    assert (letter.stage, letter.reason, letter.replayable, letter.key) == (
        "outcome",
        "outcome_conflict",
        False,
        "c-1",
    )
    assert base64.b64decode(letter.original_base64) == other
    assert "counted already (votes 10:7, winner buyer, source platform_jury" in letter.detail
    assert "differs in votes, winner (votes 1:16, winner seller" in letter.detail
    assert parts.table["c-1/outcome"] is stored and counted._value.get() == before + 1  # the first stands

    panel = first | {"votes": {"buyer": 2, "seller": 1}, "source": "human_panel"}  # another decider
    by = DecidedBy(reviewer="ann", role="reviewer")  # signed: the console's word, refused only as a conflict
    await outcomes(
        event(sign(OutcomeReported.model_validate(panel | {"decided_by": by}), key).model_dump_json().encode(), b"c-1")
    )
    assert [d.reason for d in dead(parts.dlq)] == ["outcome_conflict"] * 2
    assert "differs in votes, source (" in dead(parts.dlq)[1].detail
