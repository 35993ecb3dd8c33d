"""An escalated case's outcomes (streams/outcome.py, streams/held_outcomes.py): the signed human
panel's decision is the decision. An outcome anyone can send (the platform's 17-vote jury) that comes
first is held, neither counted nor learned from; the panel's decision is then counted and learned
from, and the held one ends as a dead letter (``outcome_superseded``); with no panel decision within
``escalation_outcome_wait_s`` the held one is counted (and a panel's decision after that stands in
its place for the precedent base). Held state is in the stage results (the table's changelog), so a
restarted worker finds it; a redelivered outcome, overridden at any depth, is left alone.
The same on a real broker and worker: tests/integration/test_signed_outcomes.py."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace
from typing import Any

import pytest

from cyberjurors.config import Settings
from cyberjurors.evidence import signing
from cyberjurors.jury.escalation import escalation_id
from cyberjurors.observability import metrics
from cyberjurors.precedents import learning
from cyberjurors.schemas import CaseFile, DeadLetter, DecidedBy, OutcomeReported, Verdict
from cyberjurors.state.results import StageResults
from cyberjurors.streams.dead_letters import DeadLetters
from cyberjurors.streams.outcome import Outcomes
from cyberjurors.streams.verdict import Verdicts

from ...schema_model import SchemaModel
from ..jury.test_escalation import KEY, conf, decided_case_file, drift, jury, make_case, precedents_on
from .test_app_handlers import NOW, Topic, event

PLATFORM = {"type": "outcome", "case_id": "esc-1", "votes": {"buyer": 17, "seller": 0}, "source": "platform_jury"}
WAIT = 3600.0


class Worker:
    """One worker's outcomes handler over its tables (what their changelogs restore), on a clock a test moves."""

    def __init__(self, s: Settings, state: SimpleNamespace, clock: list[float]):
        self.dlq = Topic()
        results = StageResults(state.table, state.times, s.state_retention_s, clock=lambda: clock[0])
        self.results = results
        self.outcomes = Outcomes(
            s,
            SchemaModel(),
            precedents_on(),  # type: ignore[arg-type]
            results,
            {},  # type: ignore[arg-type]
            DeadLetters(self.dlq, metrics.CasesInFlight()),
        )

    async def send(self, value: bytes, offset: int = 7) -> None:
        message = event(value, b"esc-1")
        message.message.offset = offset
        await self.outcomes(message)

    def letters(self) -> list[DeadLetter]:
        return [DeadLetter.model_validate_json(v) for _, v in self.dlq.sent]


@pytest.fixture
def learned(monkeypatch) -> list[tuple[str, str, str]]:
    """What learning was asked to do: ("learn", winner, source) and ("overridden", from, to)."""
    done: list[tuple[str, str, str]] = []

    async def learn(
        outcome: OutcomeReported, *_: object, replacing: OutcomeReported | None = None
    ) -> learning.LearningReport:
        if replacing is None:
            done.append(("learn", outcome.votes.winner, outcome.source or "platform_jury"))
        else:
            done.append(("overridden", replacing.source or "platform_jury", outcome.source or "platform_jury"))
        return learning.LearningReport(agreed=True)

    monkeypatch.setattr(learning, "learn", learn)
    return done


async def escalated(s: Settings, state: SimpleNamespace) -> Verdict:
    """A 9:8 verdict, escalated (narrow margin), stored in ``state`` as a worker stores it."""
    results = StageResults(state.table, state.times, keep_for_appeal=True, clock=lambda: NOW.timestamp())
    out, escalations, dlq = Topic(), Topic(), Topic()
    in_flight = metrics.CasesInFlight()
    verdicts = Verdicts(s, results, out, in_flight, escalations=escalations, dead_letters=DeadLetters(dlq, in_flight))
    decided = await verdicts.publish(await decided_case_file(s, jury(sellers=9)))
    state.table["esc-1/ready"] = CaseFile(case=make_case(), received_at=NOW).model_dump_json().encode()
    assert decided.escalated
    return decided


def tables() -> SimpleNamespace:
    """A worker's stage-results and stage-times tables."""
    return SimpleNamespace(table={}, times={})


def panel(decided: Verdict, buyer: int = 0, seller: int = 3, **over: Any) -> bytes:
    """The console's signed decision on the case's escalation (for the seller 0:3 unless told)."""
    outcome = OutcomeReported.model_validate(
        {
            "type": "outcome",
            "case_id": "esc-1",
            "votes": {"buyer": buyer, "seller": seller},
            "source": "human_panel",
            "escalation_id": escalation_id(decided),
            "decided_by": DecidedBy(reviewer="ann", role="reviewer"),
            "event_id": "console:e:1",
        }
        | over
    )
    return signing.sign(outcome, KEY).model_dump_json().encode()


async def test_an_unsigned_outcome_sent_first_is_held_and_the_panels_decision_is_counted_and_learned(learned):
    s = conf(escalation_outcome_wait_s=WAIT)
    state = tables()
    table, decided = state.table, await escalated(s, state)
    w = Worker(s, state, [NOW.timestamp()])
    before = drift()
    platform = json.dumps(PLATFORM).encode()  # 17:0 for the buyer, from anyone who can write to the topic
    await w.send(platform, offset=3)
    await w.send(platform, offset=3)  # redelivered while it waits: held once
    assert drift() == before and learned == [] and w.dlq.sent == []
    assert "esc-1/outcome" not in table and "esc-1/outcome/held" in table
    assert state.times["esc-1"]["held"] == NOW.timestamp()

    genuine = panel(decided)
    await w.send(genuine, offset=4)
    counted, errors, _, agreed, disagreed = drift()
    assert (counted, errors, agreed, disagreed) == (before[0] + 1, before[1] + 1, before[3] + 1, before[4])
    assert table["esc-1/outcome"] == genuine  # the panel's decision is the case's
    assert learned == [("learn", "seller", "human_panel")]  # learned from once, and only the panel's
    [letter] = w.letters()
    assert (letter.reason, letter.replayable, letter.offset) == ("outcome_superseded", False, 3)
    assert base64.b64decode(letter.original_base64) == platform  # the held outcome, kept as it was sent
    assert "its human panel decided" in letter.detail and "neither counted nor learned from" in letter.detail
    assert "esc-1/outcome/held" not in table and "held" not in state.times["esc-1"]

    await w.send(platform, offset=3)  # redelivered again, after it was superseded: left alone
    assert len(w.dlq.sent) == 1 and drift()[0] == before[0] + 1
    other = json.dumps(PLATFORM | {"votes": {"buyer": 5, "seller": 12}}).encode()
    await w.send(other, offset=9)  # another one after the panel decided: superseded too, never a conflict
    assert [d.reason for d in w.letters()] == ["outcome_superseded"] * 2
    assert drift()[0] == before[0] + 1 and learned == [("learn", "seller", "human_panel")]


async def test_a_held_outcome_survives_a_restart_and_a_second_one_that_differs_is_a_conflict(learned):
    s = conf(escalation_outcome_wait_s=WAIT)
    state = tables()
    table, decided = state.table, await escalated(s, state)
    first = Worker(s, state, [NOW.timestamp()])
    await first.send(json.dumps(PLATFORM).encode(), offset=3)
    await first.send(json.dumps(PLATFORM | {"votes": {"buyer": 8, "seller": 9}}).encode(), offset=5)
    [conflict] = first.letters()
    assert (conflict.reason, conflict.offset) == ("outcome_conflict", 5)
    assert "is held already for the human panel's decision" in conflict.detail

    # a new worker: its tables from their changelogs
    restarted = Worker(s, SimpleNamespace(table=dict(table), times=dict(state.times)), [NOW.timestamp()])
    await restarted.send(panel(decided), offset=6)
    assert [(d.reason, d.offset) for d in restarted.letters()] == [("outcome_superseded", 3)]
    assert learned == [("learn", "seller", "human_panel")]


async def test_without_the_panels_decision_the_held_outcome_is_counted_when_the_wait_passes(learned):
    s = conf(escalation_outcome_wait_s=WAIT)
    state = tables()
    table, decided = state.table, await escalated(s, state)
    clock = [NOW.timestamp()]
    w = Worker(s, state, clock)
    platform = json.dumps(PLATFORM).encode()
    await w.send(platform, offset=3)
    before = drift()
    clock[0] += WAIT - 1
    assert await w.outcomes.release_due() == 0 and drift() == before  # still within the wait
    clock[0] += 2
    assert await w.outcomes.release_due() == 1
    assert drift()[0] == before[0] + 1 and learned == [("learn", "buyer", "platform_jury")]
    assert table["esc-1/outcome"] == OutcomeReported.model_validate_json(platform).model_dump_json().encode()
    assert "esc-1/outcome/held" not in table and w.dlq.sent == []
    assert await w.outcomes.release_due() == 0  # released once

    await w.send(platform, offset=3)  # a replay of it: counted already, not again
    assert drift()[0] == before[0] + 1

    # the panel decides late: its decision stands from now on, for the precedent base (the counters keep the first)
    late = panel(decided)
    await w.send(late, offset=8)
    assert table["esc-1/outcome"] == late and w.dlq.sent == []
    assert learned[-1] == ("overridden", "platform_jury", "human_panel")
    assert drift()[0] == before[0] + 1
    await w.send(platform, offset=3)  # the platform's, redelivered after the panel's replaced it: left alone
    assert w.dlq.sent == [] and table["esc-1/outcome"] == late


async def test_a_case_holding_an_outcome_is_not_expired_before_it_is_released(learned):
    s = conf(escalation_outcome_wait_s=WAIT, retention={"state_s": 2 * WAIT}, appeal_window_s=0)  # no appeal hold
    state = tables()
    table = state.table
    await escalated(s, state)
    clock = [NOW.timestamp()]
    w = Worker(s, state, clock)
    clock[0] += 2 * WAIT - 10  # the outcome comes just before the case's retention ends
    await w.send(json.dumps(PLATFORM).encode(), offset=3)
    clock[0] += 20
    assert await w.results.expire() == 0 and "esc-1/verdict" in table  # the held outcome keeps its case
    clock[0] += WAIT
    assert await w.outcomes.release_due() == 1 and "esc-1/outcome" in table
    assert await w.results.expire() == 1 and "esc-1/verdict" not in table and "esc-1/outcome" not in table


async def test_a_redelivered_decision_after_a_chain_of_overrides_is_left_alone(learned):
    s = conf()
    state = tables()
    table, decided = state.table, await escalated(s, state)
    w = Worker(s, state, [NOW.timestamp()])
    a = panel(decided, 0, 3, event_id="console:e:1")
    b = panel(
        decided,
        3,
        0,
        event_id="console:e:2",
        decided_by=DecidedBy(reviewer="sue", role="supervisor", override_of="console:e:1"),
    )
    c = panel(
        decided,
        1,
        2,
        event_id="console:e:3",
        decided_by=DecidedBy(reviewer="sue", role="supervisor", override_of="console:e:2"),
    )
    for value in (a, b, c):
        await w.send(value)
    assert table["esc-1/outcome"] == c
    before = list(learned)
    for value in (a, b, a, c):  # A and B redelivered, overridden two and one steps back; C once more
        await w.send(value)
    assert w.dlq.sent == [] and table["esc-1/outcome"] == c
    assert learned[len(before) :] == [("learn", "seller", "human_panel")]  # only C, the standing one, again
    stray = panel(decided, 2, 0, event_id="console:e:9")  # different, naming nothing: still a conflict
    await w.send(stray)
    assert [d.reason for d in w.letters()] == ["outcome_conflict"]


async def test_the_wait_is_never_longer_than_the_retention(learned):
    s = conf(escalation_outcome_wait_s=30 * 86400, retention={"state_s": 86400}, appeal_window_s=0)
    state = tables()
    await escalated(s, state)
    clock = [NOW.timestamp()]
    w = Worker(s, state, clock)
    await w.send(json.dumps(PLATFORM).encode(), offset=3)
    clock[0] += 86400 + 1
    assert await w.outcomes.release_due() == 1 and "esc-1/outcome" in state.table
