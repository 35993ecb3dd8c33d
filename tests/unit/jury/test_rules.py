"""The jury's rules at their edges: the majority on an even jury (a tie goes to the buyer, since the
seller wins only with more votes), early stopping exactly at and just below δ, and jurors citing
only the guidelines they were given."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

import pytest

from cyberjurors.jury.model_inputs import JurorTask
from cyberjurors.jury.rounds import Jury, is_settled, majority_share, run_round
from cyberjurors.jury.verdict import decide
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.schemas import (
    Ballot,
    BallotDraft,
    CaseFile,
    JuryRound,
    PrecedentRef,
    Precedents,
    RoundSummary,
    Votes,
)

from ...factories import case, settings

NOW = datetime(2026, 11, 1, tzinfo=UTC)

CASE = case("rules-1")


def ballot(juror: int, vote: str, round_no: int = 1) -> Ballot:
    return Ballot(
        conflicts=[],
        buyer_conflicts=[],
        seller_conflicts=[],
        vote=vote,
        justification=f"{vote} {juror}",
        juror=juror,
        round=round_no,
        model="scripted",
    )


def jury_round(buyer: int, seller: int, round_no: int = 1) -> JuryRound:
    votes = ["buyer"] * buyer + ["seller"] * seller
    return JuryRound(
        round=round_no,
        ballots=[ballot(j, v, round_no) for j, v in enumerate(votes)],
        summary=RoundSummary(
            summary="s",
            buyer_arguments=[],
            seller_arguments=[],
            round=round_no,
            votes=Votes(buyer=buyer, seller=seller),
        ),
    )


def case_file(*rounds: JuryRound) -> CaseFile:
    return CaseFile(case=CASE, received_at=NOW, rounds=list(rounds), backend="scripted")


# --- the majority ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "buyer, seller, winner",
    [
        (8, 8, "buyer"),  # a tie on an even jury: the seller needs more votes than the buyer
        (0, 0, "buyer"),
        (1, 1, "buyer"),
        (8, 9, "seller"),  # one vote decides
        (9, 8, "buyer"),
        (7, 9, "seller"),
        (16, 0, "buyer"),
        (0, 16, "seller"),
    ],
)
def test_seller_wins_only_with_more_votes_than_the_buyer(buyer, seller, winner):
    assert Votes(buyer=buyer, seller=seller).winner == winner


@pytest.mark.parametrize("buyer, seller", [(8, 8), (8, 9), (9, 8), (2, 2)])
def test_the_verdict_of_an_even_jury_follows_the_majority_rule(buyer, seller):
    jurors = buyer + seller
    verdict = decide(case_file(jury_round(buyer, seller)), settings(jurors=jurors), NOW)
    assert verdict.winner == ("seller" if seller > buyer else "buyer")
    assert (verdict.votes.buyer, verdict.votes.seller) == (buyer, seller)
    assert verdict.margin == abs(seller - buyer)


@pytest.mark.parametrize("buyer, seller", [(8, 8), (13, 4), (4, 13), (17, 0), (0, 17), (12, 3), (1, 0)])
def test_majority_share_is_the_larger_side_over_all_votes(buyer, seller):
    assert majority_share(Votes(buyer=buyer, seller=seller)) == pytest.approx(max(buyer, seller) / (buyer + seller))


def test_majority_share_of_no_votes_is_zero():
    assert majority_share(Votes(buyer=0, seller=0)) == 0


# --- early stopping at δ -------------------------------------------------------------------

# (buyer, seller, δ): the majority share reaches δ exactly, on either side
EXACTLY = [(12, 3, 0.8), (3, 12, 0.8), (8, 2, 0.8), (2, 8, 0.8), (9, 8, 9 / 17), (12, 5, 12 / 17), (3, 1, 0.75)]
# and the closest share below δ a jury of that size can have
JUST_BELOW = [(13, 4, 0.8), (4, 13, 0.8), (11, 4, 0.8), (8, 9, 10 / 17), (11, 6, 12 / 17), (2, 1, 0.75)]


@pytest.mark.parametrize("buyer, seller, delta", EXACTLY)
def test_a_majority_share_of_exactly_delta_stops_early(buyer, seller, delta):
    assert Fraction(max(buyer, seller), buyer + seller) == Fraction(delta).limit_denominator(100)  # truly exact
    s = settings(jurors=buyer + seller, rounds=3, early_stop=delta)
    assert is_settled(case_file(jury_round(buyer, seller)), s)
    verdict = decide(case_file(jury_round(buyer, seller)), s, NOW)
    assert verdict.early_stopped and verdict.rounds_used == 1


@pytest.mark.parametrize("buyer, seller, delta", JUST_BELOW)
def test_a_majority_share_just_below_delta_deliberates_on(buyer, seller, delta):
    share = Fraction(max(buyer, seller), buyer + seller)
    assert share < Fraction(delta).limit_denominator(100)
    assert share + Fraction(1, buyer + seller) >= Fraction(delta).limit_denominator(100)  # one vote short
    s = settings(jurors=buyer + seller, rounds=3, early_stop=delta)
    assert not is_settled(case_file(jury_round(buyer, seller)), s)
    assert not is_settled(case_file(jury_round(buyer, seller), jury_round(buyer, seller, 2)), s)
    assert is_settled(case_file(*(jury_round(buyer, seller, t) for t in (1, 2, 3))), s)  # T rounds end it


def test_without_early_stopping_even_a_unanimous_jury_deliberates_all_rounds():
    s = settings(jurors=17, rounds=3, early_stop=0)
    assert not is_settled(case_file(jury_round(17, 0)), s)
    assert not is_settled(case_file(jury_round(17, 0), jury_round(0, 17, 2)), s)
    assert is_settled(case_file(*(jury_round(17, 0, t) for t in (1, 2, 3))), s)
    assert not is_settled(case_file(), s)


def test_early_stopping_looks_at_the_latest_round():
    s = settings(jurors=17, rounds=3, early_stop=0.8)
    assert is_settled(case_file(jury_round(9, 8), jury_round(14, 3, 2)), s)
    assert not is_settled(case_file(jury_round(14, 3), jury_round(9, 8, 2)), s)


# --- guidelines a juror may cite ------------------------------------------------------------


def guideline(gid: str, version: int) -> PrecedentRef:
    return PrecedentRef(
        id=gid,
        kind="guideline",
        version=version,
        text=f"rule {gid}",
        category="clothing",
        favours="buyer",
        confidence=0.7,
        score=1.0,
        rank=1,
    )


async def test_a_guideline_a_juror_cites_but_was_never_given_is_dropped():
    """Juror 0 was given g-a, juror 1 g-b, juror 2 nothing; each cites g-a, g-b and an invented id."""
    s = settings(jurors=3, rounds=1, pipeline_overrides={"round_summary": False}, precedent_backend="embedded")
    precedents = Precedents(
        guidelines=[guideline("g-a", 1), guideline("g-b", 4)], memory={0: ["g-a"], 1: ["g-b"], 2: []}, coverage="high"
    )
    given: dict[int, list[str]] = {}

    def answer(request, output_type):
        task: JurorTask = request.task
        given[task.juror] = [g.ref for g in task.memory]
        return BallotDraft(
            conflicts=[],
            buyer_conflicts=[],
            seller_conflicts=[],
            vote="buyer",
            justification="per the rules",
            cited_clues=[],
            cited_guidelines=["g-a", "g-b@4", "g-invented@1", "g-a@9"],
        )

    result, _ = await run_round(
        CaseFile(case=CASE, received_at=NOW, precedents=precedents), Jury.from_settings(s), ScriptedLLM(answer), s
    )
    assert given == {0: ["g-a@1"], 1: ["g-b@4"], 2: []}
    cited = {b.juror: b.cited_guidelines for b in result.ballots}
    # kept: what the juror was given, at the version it saw (once); dropped: everything else
    assert cited == {0: ["g-a@1"], 1: ["g-b@4"], 2: []}

    verdict = decide(CaseFile(case=CASE, received_at=NOW, precedents=precedents, rounds=[result]), s, NOW)
    assert sorted(verdict.cited_precedents) == ["g-a@1", "g-b@4"]
    assert verdict.precedents_seen == ["g-a@1", "g-b@4"]
