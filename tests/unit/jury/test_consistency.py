"""Consistency with precedent (jury/consistency.py): after the vote, the verdict against its nearest
decided precedents of the same category. Most of them the other way: a note naming them on the
verdict and, with ``inconsistent_with_precedent`` in ``escalate_on``, an escalation; agreeing ones,
too few, too far or of another category: nothing. The count by outcome is a metric."""

from __future__ import annotations

import functools

from cyberjurors.jury.rounds import Jury
from cyberjurors.jury.stages import clues_stage, focus_stage, judge, round_stage
from cyberjurors.observability import metrics
from cyberjurors.schemas import CaseFile, Party, PrecedentRef, Precedents, Verdict

from ...factories import settings
from ..streams.test_app_handlers import NOW
from .test_escalation import handler, jury, make_case

conf = functools.partial(
    settings, rounds=1, warm_cache_first=False, precedent_backend="embedded", consistency={"min_similarity": 0.6}
)
ESCALATING = [*settings().escalate_on, "inconsistent_with_precedent"]
NOTE = "most of the nearest decided precedents went the other way"


def decided(case_id: str, favours: Party, similarity: float | None, category: str = "clothing") -> PrecedentRef:
    """A retrieved historical case (what precedents/retrieval.py hands the jury), decided for ``favours``."""
    return PrecedentRef(
        id=case_id,
        kind="case",
        text=f"{case_id}: a torn seam",
        category=category,
        favours=favours,
        score=0.03,
        rank=1,
        similarity=similarity,
    )


class Decided:
    """A precedent base that retrieves these historical cases for the case."""

    def __init__(self, *cases: PrecedentRef):
        self.found = Precedents(cases=list(cases), coverage="high")

    async def retrieve(self, case, focus):  # type: ignore[no-untyped-def]
        return self.found


async def seller_verdict(*cases: PrecedentRef, **over: object) -> Verdict:
    """The unanimous seller verdict of the scripted jury on the torn-seam case, with these precedents."""
    return await judge(make_case(), jury(sellers=17), conf(**over), precedents=Decided(*cases))


async def test_precedents_that_mostly_went_the_other_way_are_noted_and_escalate_with_the_setting():
    against = [decided("hist-1", "buyer", 0.91), decided("hist-2", "buyer", 0.72), decided("hist-3", "seller", 0.8)]
    noted = await seller_verdict(*against)
    found = noted.precedent_consistency
    assert found is not None and found.outcome == "inconsistent"
    assert (found.compared, found.disagreeing) == (["hist-1", "hist-3", "hist-2"], ["hist-1", "hist-2"])
    assert f"{NOTE}: 2 of 3 (hist-1, hist-2) were decided for the buyer, this verdict for the seller" in noted.problems
    assert not noted.escalated  # the note only: escalating is the platform's choice
    escalated = await seller_verdict(*against, escalate_on=ESCALATING)
    assert escalated.escalated and escalated.escalation_reasons == ["inconsistent_with_precedent"]


async def test_precedents_that_agree_or_split_evenly_leave_the_verdict_alone():
    agreeing = await seller_verdict(
        decided("hist-1", "seller", 0.9), decided("hist-2", "seller", 0.8), escalate_on=ESCALATING
    )
    assert agreeing.precedent_consistency is not None and agreeing.precedent_consistency.outcome == "consistent"
    assert agreeing.precedent_consistency.disagreeing == []
    assert not agreeing.escalated and not any(NOTE in p for p in agreeing.problems)
    even = await seller_verdict(
        decided("hist-1", "seller", 0.9), decided("hist-2", "buyer", 0.8), escalate_on=ESCALATING
    )
    assert even.precedent_consistency.outcome == "consistent" and not even.escalated


async def test_only_near_decided_cases_of_the_category_are_compared_and_one_alone_is_too_few():
    far_or_other = [
        decided("hist-near", "buyer", 0.9),
        decided("hist-far", "buyer", 0.59),  # below consistency.min_similarity
        decided("hist-food", "buyer", 0.95, category="food"),
        decided("hist-old", "buyer", None),  # retrieved before similarities were recorded
    ]
    verdict = await seller_verdict(*far_or_other, escalate_on=ESCALATING)
    found = verdict.precedent_consistency
    assert found is not None and (found.outcome, found.compared, found.disagreeing) == (
        "no_precedent",
        ["hist-near"],
        [],
    )
    assert not verdict.escalated and not any(NOTE in p for p in verdict.problems)
    # lower the bar and the far one counts: two of two against
    lowered = await seller_verdict(*far_or_other, consistency={"min_similarity": 0.5}, escalate_on=ESCALATING)
    assert lowered.precedent_consistency.outcome == "inconsistent" and lowered.escalated
    alone = await seller_verdict(*far_or_other, consistency={"min_precedents": 1}, escalate_on=ESCALATING)
    assert alone.precedent_consistency.outcome == "inconsistent"
    at_the_bar = await seller_verdict(decided("hist-a", "buyer", 0.6), decided("hist-b", "buyer", 0.6))
    assert at_the_bar.precedent_consistency.outcome == "inconsistent"  # the similarity is reached, not passed


async def test_without_a_precedent_base_nothing_is_compared():
    verdict = await seller_verdict(
        decided("hist-1", "buyer", 0.9), decided("hist-2", "buyer", 0.9), precedent_backend="none"
    )
    assert verdict.precedent_consistency is None and not any(NOTE in p for p in verdict.problems)


async def test_each_first_decided_verdict_is_counted_by_its_consistency():
    s = conf(escalate_on=ESCALATING)
    llm = jury(sellers=17)
    case_file = await focus_stage(CaseFile(case=make_case(), received_at=NOW), llm, s)
    against = Decided(decided("hist-1", "buyer", 0.9), decided("hist-2", "buyer", 0.8))
    case_file = await round_stage(await clues_stage(case_file, llm, s, against), Jury.from_settings(s), llm, s)
    counted = metrics.PRECEDENT_CONSISTENCY.labels("inconsistent")
    before = counted._value.get()
    h = handler(s)
    verdict = await h.verdicts.publish(case_file)
    await h.verdicts.publish(case_file)  # redelivered: re-sent, not counted again
    assert verdict.escalation_reasons == ["inconsistent_with_precedent"] and len(h.escalations.sent) == 2
    assert counted._value.get() == before + 1
