"""The dead letters of tests/unit/streams/test_dead_letters.py's table that only a running app
writes, each produced by the app on the embedded broker, with its flag."""

from __future__ import annotations

import json
import time
from collections import Counter
from datetime import UTC, datetime

import pytest
from aiokafka import AIOKafkaProducer

from cyberjurors.config import IntakeLimits, Settings
from cyberjurors.evidence import intake, records
from cyberjurors.jury.model_inputs import FocusTask
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.kafka.cluster import client_options, ensure_topics
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMError
from cyberjurors.precedents import learning
from cyberjurors.precedents.models import PrecedentError
from cyberjurors.schemas import CaseFile, DeadLetter, DisputeCase, Focus, Precedents
from cyberjurors.streams.app import create_app
from cyberjurors.tooling.clients import Outgoing, produce, replayable

from ..conftest import read_topic, running_app
from ..factories import case_data as case
from ..factories import whole
from ..unit.jury.test_escalation import SIGNATURE_REASONS
from ..unit.streams.test_appeals import APPEAL_REASONS
from ..unit.streams.test_cloudevents import CLOUDEVENT_REASONS
from ..unit.streams.test_dead_letters import FAMILIES, HELD, INTAKE, LLM_KINDS, NOW, PRECEDENT_KINDS, TABLE, family
from ..unit.streams.test_letters import LETTER_REASONS

# --- the app's own dead letters, from a running app -----------------------------------------


class Bug(Exception):
    """Not any exception the code expects: what a programming error looks like to the app."""


class NoPrecedents:
    """A precedent base that is on (so outcomes reach learning) and finds nothing for a case."""

    enabled = True

    async def open(self):
        return object(), object()

    async def retrieve(self, case, focus):
        return Precedents(coverage="none")


async def send_old_case_file(settings: Settings, case_id: str) -> None:
    """A case file on disputes.intake stamped 30 days ago: what re-reading old history delivers."""
    value = CaseFile(case=DisputeCase.model_validate(case(case_id)), received_at=NOW).model_dump_json().encode()
    producer = AIOKafkaProducer(**client_options(settings))
    await producer.start()
    try:
        await producer.send_and_wait(
            settings.topic("disputes.intake"),
            value,
            key=case_id.encode(),
            timestamp_ms=int((time.time() - 30 * 86400) * 1000),
        )
    finally:
        await producer.stop()


@pytest.mark.integration
async def test_every_other_reason_is_produced_by_the_running_app_with_its_flag(settings, monkeypatch, tmp_path):
    # small size limits, so an event, a case file and a stage output can each outgrow them cheaply
    settings = settings.model_copy(
        update={
            "jurors": 3,
            "rounds": 1,
            "precedent_backend": "embedded",
            "intake_limits": IntakeLimits(max_event_bytes=200_000, max_case_bytes=20_000),
            "media_store": str(tmp_path / "store"),
            # judged's outcomes are counted at once: an escalated case's wait for its human panel
            # (test_signed_outcomes.py, unit/streams/test_held_outcomes.py) would hold them back
            "escalate_on": [],
        }
    )
    offline = OfflineLLM()

    async def answer(request, output_type):
        case_id = request.case_id
        if isinstance(request.task, FocusTask) and case_id.startswith("llm-"):
            raise LLMError(case_id.removeprefix("llm-"), "failed after the retries")
        if isinstance(request.task, FocusTask) and case_id == "bug":
            raise Bug("a bug in a stage")
        if isinstance(request.task, FocusTask) and case_id == "huge-focus":
            # the schema clips a model's focus to its bound (schemas/bounds.py), so only an output
            # built past validation (a bug in a stage) can outgrow max_event_bytes now
            return Focus.model_construct(focus="x" * 250_000, buyer_claims=[], seller_claims=[])
        return (await offline.generate(request, output_type)).output

    admit = intake.admit

    def buggy_admit(case, s):
        if case.case_id == "intake-bug":
            raise Bug("a bug in intake")
        return admit(case, s)

    async def failing_learn(outcome, *args, **kw):
        kind, _, name = (outcome.event_id or "").partition(":")
        if kind == "precedent":
            raise PrecedentError(name, "the precedent base failed")
        if kind == "llm":
            raise LLMError(name, "re-distilling failed")
        raise Bug("a bug in learning")

    monkeypatch.setattr(intake, "admit", buggy_admit)
    monkeypatch.setattr(learning, "learn", failing_learn)

    def outcome(case_id: str, event_id: str | None = None, **extra: str) -> bytes:
        return json.dumps(
            {
                "type": "outcome",
                "case_id": case_id,
                "votes": {"buyer": 12, "seller": 5},
                **({"event_id": event_id} if event_id else {}),
                **extra,
            }
        ).encode()

    outcomes = settings.topic("disputes.outcomes")
    sends = [Outgoing(f"llm-{k}", whole(case(f"llm-{k}")), "test") for k in sorted(LLM_KINDS)]
    expected = [(f"llm-{k}", "focus", f"llm_{k}") for k in LLM_KINDS]  # (key, stage, reason)
    sends += [
        Outgoing("bug", whole(case("bug")), "test"),
        Outgoing("intake-bug", whole(case("intake-bug")), "test"),
        Outgoing("judged", whole(case("judged")), "test"),
        Outgoing(
            "judged", whole(case("judged", buyer_items=[{"id": "b1", "kind": "text", "text": "Changed."}])), "test"
        ),
        Outgoing("bad-ready", b"not a case file", "test", topic=settings.topic("disputes.intake")),
        Outgoing("bad-clues", b'{"case": 1}', "test", topic=settings.topic("disputes.clues")),
        Outgoing("bad-outcome", b'{"type": "outcome"}', "test", topic=outcomes),
        Outgoing("never-judged", outcome("never-judged"), "test", topic=outcomes),
        Outgoing("not-the-id", whole(case("the-id")), "test"),  # keyed other than by its case_id
        Outgoing("not-judged", outcome("judged"), "test", topic=outcomes),
        # decided 30 days ago with nothing kept here: its verdict expired (the marker's case is in test_app_handlers)
        Outgoing(
            "long-ago",
            outcome("long-ago", decided_at=datetime.fromtimestamp(time.time() - 30 * 86400, UTC).isoformat()),
            "test",
            topic=outcomes,
        ),
    ]
    sends += [
        Outgoing(
            "big-case",
            whole(
                case("big-case", buyer_items=[{"id": f"b{n}", "kind": "text", "text": "t" * 9000} for n in range(3)])
            ),
            "test",
        ),
        Outgoing("huge-focus", whole(case("huge-focus")), "test"),
    ]
    too_big = Outgoing(
        "too-big", whole(case("too-big", buyer_items=[{"id": "b1", "kind": "text", "text": "t" * 250_000}])), "test"
    )
    expected += [
        ("too-big", "intake", "event_too_large"),
        ("big-case", "intake", "case_too_large"),
        ("huge-focus", "focus", "output_too_large"),
    ]
    expected += [
        ("bug", "focus", "stage_failed"),
        ("intake-bug", "intake", "intake_failed"),
        ("judged", "intake", "case_already_submitted"),
        ("bad-ready", "focus", "invalid_case_file"),
        ("bad-clues", "rounds", "invalid_case_file"),
        ("bad-outcome", "outcome", "invalid_outcome"),
        ("never-judged", "outcome", "unknown_case"),
        ("long-ago", "outcome", "case_expired"),
        ("not-the-id", "intake", "key_mismatch"),
        ("not-judged", "outcome", "key_mismatch"),
    ]
    # outcomes for a judged case whose learning fails: the precedent base, a model call, a bug
    later = [Outgoing("judged", outcome("judged", f"precedent:{k}"), "test", topic=outcomes) for k in PRECEDENT_KINDS]
    later += [Outgoing("judged", outcome("judged", f"llm:{k}"), "test", topic=outcomes) for k in LLM_KINDS]
    later += [Outgoing("judged", outcome("judged", "bug"), "test", topic=outcomes)]
    # after the first, counted, outcome of the case (12:5): another decision for it
    later += [
        Outgoing(
            "judged",
            json.dumps({"type": "outcome", "case_id": "judged", "votes": {"buyer": 1, "seller": 16}}).encode(),
            "test",
            topic=outcomes,
        )
    ]
    expected += [("judged", "outcome", f"precedents_{k}") for k in [*PRECEDENT_KINDS, *LLM_KINDS]]
    expected += [("judged", "outcome", "stage_failed")]
    expected += [("judged", "outcome", "outcome_conflict")]
    expected += [("expired", "focus", "state_expired")]  # a case file first sent 30 days ago, read again

    await ensure_topics(settings)
    llm = ScriptedLLM(answer)
    async with running_app(create_app(settings, llm=llm, precedents=NoPrecedents())):  # type: ignore[arg-type]
        await produce(settings, sends)
        platform = settings.model_copy(update={"intake_limits": IntakeLimits(max_event_bytes=1_000_000)})
        await produce(platform, [too_big])  # a platform's limit
        assert await read_topic(settings, "disputes.verdicts", until=1, keys={"judged"}, timeout_s=90)
        await produce(settings, later)
        await send_old_case_file(settings, "expired")
        raw = await read_topic(settings, "disputes.dlq", until=len(expected), timeout_s=90)

    letters = [DeadLetter.model_validate_json(v) for _, v in raw]
    assert Counter((d.key, d.stage, d.reason) for d in letters) == Counter(expected)
    for d in letters:
        row = (family(d.stage), d.reason)
        assert row in TABLE, f"no table row for {row}"
        assert d.replayable is replayable(d) is TABLE[row], (row, d.replayable)

    # together with the intake reasons driven in tests/unit/streams/test_dead_letters.py, every row of the table
    # was produced
    driven = {(family(d.stage), d.reason) for d in letters} | {("intake", r) for r in [*INTAKE, "invalid_case"]}
    driven |= {("intake", r) for r in HELD}  # need minutes of waiting on a running app: driven by a moved clock there
    driven |= {
        ("appeal", r) for r in APPEAL_REASONS
    }  # each driven through the appeal handler in unit/streams/test_appeals.py
    # each driven through the outcomes handler in unit/jury/test_escalation.py
    driven |= {("outcome", r) for r in SIGNATURE_REASONS}
    # an escalated case's human panel decided: in unit/streams/test_held_outcomes.py, and on a worker in
    # test_signed_outcomes.py
    driven |= {("outcome", "outcome_superseded")}
    # each driven through the letters handler in unit/streams/test_letters.py (workers here run with letters off)
    driven |= {("letters", r) for r in LETTER_REASONS}
    # the CloudEvents headers' rules: through the intake handler in unit/streams/test_cloudevents.py, and a
    # running worker in test_kcat.py
    driven |= {("intake", r) for r in CLOUDEVENT_REASONS}
    # a sealed record nothing opens (payload_encryption), at any agent: through the agents' opening in
    # unit/streams/test_sealed_records.py
    driven |= {(where, r) for where in FAMILIES for r in records.REASONS}
    assert driven == set(TABLE)
