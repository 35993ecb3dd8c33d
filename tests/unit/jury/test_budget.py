"""The per-case budget: checked before each select step and each jury round, never inside one.

A scripted jury that never reaches delta (3 : 2) deliberates all T = 3 rounds without a budget;
the tokens it spends after each step are measured once with the budget off, and the budget is then
set at those boundaries. A real worker (tests/integration/test_budget.py) shows that a
budget-stopped case is decided once.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from datetime import UTC, datetime

import pytest

from cyberjurors.config import DEFAULT_LLM_PRICES, Settings
from cyberjurors.jury.rounds import Jury
from cyberjurors.jury.stages import NoPrecedents, clues_stage, focus_stage, judge, round_stage
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import GuardedLLM
from cyberjurors.llm.prices import PriceTable
from cyberjurors.observability import metrics
from cyberjurors.schemas import (
    BallotDraft,
    CaseFile,
    DisputeCase,
    Focus,
    Perception,
    RoundSummaryDraft,
    Selection,
    Usage,
    Verdict,
)

from ... import factories

NOW = datetime(2026, 11, 1, tzinfo=UTC)
JURORS = 5


@pytest.fixture
def three_item_case() -> DisputeCase:
    """A wool coat whose buyer sends three text items: the select steps a budget can cut short."""
    return factories.case(
        "budget-1",
        [
            {"id": "b1", "kind": "text", "text": "The lining was torn on arrival."},
            {"id": "b2", "kind": "text", "text": "Here is the courier's note about the box."},
            {"id": "b3", "kind": "text", "text": "I asked for a refund the same day."},
        ],
        metadata=factories.WOOL_COAT,
        seller="Our dispatch photo shows it intact.",
    )


async def answer(request, output_type):  # type: ignore[no-untyped-def]
    """A jury split 3 : 2 for the seller in every round (below delta = 0.8, so all T rounds are held);
    the selector always picks the first unseen item. It yields once, as a provider call would, so the
    two parties' select-perceive chains interleave."""
    await asyncio.sleep(0)
    task = request.task
    if output_type is Focus:
        return Focus(focus="Was the lining torn before delivery?", buyer_claims=["torn"], seller_claims=["intact"])
    if output_type is Selection:
        return Selection(evidence_id=task.candidates[0].id, reason="next")
    if output_type is Perception:
        return Perception(clue=f"what {task.item.id} says", assessment="a", leaning="neutral")
    if output_type is RoundSummaryDraft:
        return RoundSummaryDraft(
            summary=f"round {task.round}: 3 for the seller", buyer_arguments=[], seller_arguments=[]
        )
    return BallotDraft(
        conflicts=[],
        buyer_conflicts=[],
        seller_conflicts=[],
        vote="seller" if task.juror < 3 else "buyer",
        justification=f"J{task.juror} [s1]",
        cited_clues=["s1"],
    )


# the shared settings with this module's jury: JURORS jurors, T = 3 rounds, no budget unless a test sets one
settings = functools.partial(factories.settings, metrics_port=0, jurors=JURORS, rounds=3, case_token_budget=0)


def spent(case_file: CaseFile) -> Usage:
    return sum(case_file.usage.values(), Usage())


async def boundaries(case: DisputeCase) -> dict[str, int]:
    """Tokens spent after stage I, stage II and each round, with the budget off."""
    s = settings()
    llm, jury = ScriptedLLM(answer), Jury.from_settings(s)
    case_file = await focus_stage(CaseFile(case=case, received_at=NOW, backend="scripted"), llm, s)
    seen = {"focus": spent(case_file).total_tokens}
    case_file = await clues_stage(case_file, llm, s, NoPrecedents())
    seen["clues"] = spent(case_file).total_tokens
    for n in (1, 2, 3):
        case_file = await round_stage(case_file, jury, llm, s)
        seen[f"round-{n}"] = spent(case_file).total_tokens
    return seen


async def judged(case: DisputeCase, **overrides) -> tuple[Verdict, ScriptedLLM]:  # type: ignore[no-untyped-def]
    llm = ScriptedLLM(answer)
    return await judge(case, llm, settings(**overrides)), llm


async def test_a_case_over_the_budget_stops_after_the_round_in_progress_with_its_majority(three_item_case):
    spend = await boundaries(three_item_case)
    unlimited, _ = await judged(three_item_case)
    assert unlimited.rounds_used == 3 and not unlimited.budget_reached

    verdict, llm = await judged(three_item_case, case_token_budget=spend["round-1"])
    assert verdict.rounds_used == 1 and verdict.budget_reached and not verdict.early_stopped
    assert (verdict.winner, verdict.votes.seller, verdict.votes.buyer) == ("seller", 3, 2)  # round 1's majority
    assert verdict.justification == "round 1: 3 for the seller"
    [stop] = verdict.budget_stops
    assert (stop.limit, stop.stage, stop.tokens) == ("tokens", "round-1", spend["round-1"])
    note = next(p for p in verdict.problems if "per-case budget" in p)
    assert f"{spend['round-1']:,} tokens of case_token_budget {spend['round-1']:,}" in note
    assert "stopped after round 1 of 3" in note
    assert Counter(llm.roles())["juror"] == JURORS  # no second round was started
    assert verdict.tokens.total_tokens == spend["round-1"]

    # one token more and round 1 no longer reaches it: round 2 starts, and is the last
    verdict, _ = await judged(three_item_case, case_token_budget=spend["round-1"] + 1)
    assert verdict.rounds_used == 2 and [s.stage for s in verdict.budget_stops] == ["round-2"]


async def test_a_case_under_the_budget_is_unchanged(three_item_case):
    spend = await boundaries(three_item_case)
    off, off_llm = await judged(three_item_case)
    # reached only by the last round: nothing was left to stop, so nothing is marked
    for budget in (spend["round-3"], spend["round-3"] + 1, 10 * spend["round-3"]):
        on, on_llm = await judged(three_item_case, case_token_budget=budget)
        assert on.model_dump(exclude={"latency_s", "decided_at"}) == off.model_dump(exclude={"latency_s", "decided_at"})
        assert on_llm.roles() == off_llm.roles()
        assert not any("budget" in p for p in on.problems)


async def test_a_budget_reached_in_stage_ii_skips_the_next_select_steps_and_the_jury_judges_once(three_item_case):
    spend = await boundaries(three_item_case)
    verdict, llm = await judged(three_item_case, case_token_budget=spend["focus"] + 1)
    # both parties' first steps started before the budget was reached; the buyer's next two did not
    juror_call = next(c for c in llm.calls if c.role == "juror")
    assert [c.evidence_id for c in juror_call.task.clues] == ["b1", "s1"]
    assert Counter(llm.roles()) == {"focus": 1, "select": 2, "perceive": 2, "juror": JURORS, "summary": 1}
    assert [(s.stage, s.limit) for s in verdict.budget_stops] == [("clues", "tokens"), ("round-1", "tokens")]
    assert verdict.budget_reached and verdict.rounds_used == 1
    assert any("during stage II" in p and "up to 2 select-perceive steps skipped" in p for p in verdict.problems)

    # reached already by stage I: no select step at all, the jury still decides, from the transcript
    verdict, llm = await judged(three_item_case, case_token_budget=1)
    assert "select" not in llm.roles() and Counter(llm.roles())["juror"] == JURORS
    assert verdict.rounds_used == 1 and [s.stage for s in verdict.budget_stops] == ["clues", "round-1"]
    assert any("up to 4 select-perceive steps skipped" in p for p in verdict.problems)
    juror_call = next(c for c in llm.calls if c.role == "juror")
    assert juror_call.task.clues == [] and "The lining was torn on arrival." in juror_call.shared[0].text


async def test_the_cost_ceiling_adds_up_each_call_at_its_models_price(three_item_case):
    """Each call's cost is estimated where metrics price it (GuardedLLM, llm_prices) and carried in
    its usage; the ceiling compares their sum."""
    prices = PriceTable(DEFAULT_LLM_PRICES)

    def priced() -> GuardedLLM:  # answers as scripted, billed as the priced model would be
        return GuardedLLM(ScriptedLLM(answer, backend="anthropic", model_label="claude-sonnet-5-5"), prices=prices)

    s = settings()
    llm, jury = priced(), Jury.from_settings(s)
    case_file = await clues_stage(
        await focus_stage(CaseFile(case=three_item_case, received_at=NOW), llm, s), llm, s, NoPrecedents()
    )
    first = await round_stage(case_file, jury, llm, s)
    cost = spent(first).cost_usd
    assert cost == pytest.approx(prices.cost("anthropic", "claude-sonnet-5-5", spent(first)))
    assert cost > 0

    verdict = await judge(three_item_case, priced(), settings(case_cost_budget_usd=cost * (1 - 1e-9)))
    assert verdict.rounds_used == 1 and [(s.limit, s.stage) for s in verdict.budget_stops] == [("cost", "round-1")]
    assert verdict.tokens.cost_usd == pytest.approx(cost)
    assert any("of case_cost_budget_usd" in p for p in verdict.problems)


def test_budget_settings_default_off_values_and_the_environment(monkeypatch: pytest.MonkeyPatch):
    assert (Settings().case_token_budget, Settings().case_cost_budget_usd) == (400_000, 0.0)
    monkeypatch.setenv("CYBERJURORS_CASE_TOKEN_BUDGET", "")  # empty = off, as None is
    assert Settings().case_token_budget == 0
    monkeypatch.setenv("CYBERJURORS_CASE_COST_BUDGET_USD", "0.75")
    assert Settings().case_cost_budget_usd == 0.75


def test_budget_stops_are_counted_by_limit_and_stage_kind():
    from cyberjurors.schemas import BudgetStop

    before = {k: metrics.BUDGET_STOPS.labels(*k)._value.get() for k in [("tokens", "clues"), ("cost", "rounds")]}
    metrics.record_budget_stops(
        [
            BudgetStop(limit="tokens", stage="clues", tokens=9, cost_usd=0),
            BudgetStop(limit="cost", stage="round-2", tokens=9, cost_usd=1),
        ]
    )
    assert metrics.BUDGET_STOPS.labels("tokens", "clues")._value.get() == before[("tokens", "clues")] + 1
    assert metrics.BUDGET_STOPS.labels("cost", "rounds")._value.get() == before[("cost", "rounds")] + 1
