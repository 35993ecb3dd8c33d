"""One juror's failure does not end the case (jury/answers.py and its callers): an answer cut off or
invalid is asked for once more; a juror whose second answer fails too abstains for the round, a
round summary falls back to the tally, the verifier leaves the verdict unverified, each with a note;
a round short of ``ballot_quorum`` ends deliberation and is escalated. The focus, which the case
cannot go on without, stays final after its retry.

The offline stand-in answers every call but those a test makes fail (``failing``); the failures are
the LLMError a backend raises for a reply cut at max_tokens or invalid after its repair, with the
usage the provider billed for it.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from cyberjurors.jury.answers import ask
from cyberjurors.jury.escalation import scaled_margin
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.rounds import Jury, is_settled
from cyberjurors.jury.stages import NoPrecedents, clues_stage, focus_stage, judge, round_stage, verdict_stage
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMError, LLMRequest
from cyberjurors.schemas import (
    BallotDraft,
    CaseFile,
    Focus,
    RoundSummaryDraft,
    SentenceVotes,
    Usage,
    Verdict,
    VerificationDraft,
    Votes,
)

from ... import factories
from ...factories import example_case

NOW = datetime(2026, 11, 1, tzinfo=UTC)
KETTLE = "appl-001-kettle-crack.json"
BILLED = Usage(input_tokens=700, output_tokens=300)
"""what the provider bills for each failed reply in these tests"""

config = functools.partial(factories.settings, jurors=5, rounds=1, metrics_port=0)


def failing(fails: Callable[[LLMRequest, type], int], kind: str = "truncated") -> ScriptedLLM:
    """The offline stand-in, except that a call ``fails(request, output_type)`` times before it
    answers (0: answers at once; 2 or more: fails whenever asked) raises ``kind`` with BILLED."""
    offline, seen = OfflineLLM(), Counter[tuple]()

    def answer(request: LLMRequest, output_type: type):
        key = (request.role, output_type, getattr(request.task, "juror", None), getattr(request.task, "round", None))
        seen[key] += 1
        if seen[key] <= fails(request, output_type):
            raise LLMError(kind, f"the reply stopped at max_tokens ({request.max_output_tokens})", usage=BILLED)
        return offline._answer(request.task)

    return ScriptedLLM(answer)


def juror(*seats: int, times: int = 2) -> Callable[[LLMRequest, type], int]:
    """Jurors ``seats`` fail ``times`` per round."""
    return lambda r, t: times if r.role == "juror" and t is BallotDraft and r.task.juror in seats else 0


def role_fails(output_type: type, times: int = 2) -> Callable[[LLMRequest, type], int]:
    return lambda r, t: times if t is output_type else 0


async def decided(llm: ScriptedLLM, **over) -> tuple[Verdict, CaseFile]:
    s = config(**over)
    jury = Jury.from_settings(s)
    case_file = await focus_stage(CaseFile(case=example_case(KETTLE), received_at=NOW, backend="scripted"), llm, s)
    case_file = await clues_stage(case_file, llm, s, NoPrecedents())
    while not is_settled(case_file, s):
        case_file = await round_stage(case_file, jury, llm, s)
    return await verdict_stage(case_file, llm, s, jury), case_file


def calls_of(llm: ScriptedLLM, output_type_role: str, juror: int | None = None) -> int:
    return sum(1 for c in llm.calls if c.role == output_type_role and (juror is None or c.task.juror == juror))


# --- asked once more ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["truncated", "invalid_output"])
async def test_an_answer_that_fails_once_is_asked_for_again_and_what_the_failed_try_cost_counts(kind):
    llm = failing(role_fails(Focus, times=1), kind)
    request = factories_request(llm)
    result = await ask(llm, request, Focus)
    assert len(llm.calls) == 2 and isinstance(result.output, Focus)
    assert result.usage.input_tokens == BILLED.input_tokens + len(request.text()) // 4
    assert result.usage.output_tokens == BILLED.output_tokens + 10


@pytest.mark.parametrize("kind", ["overloaded", "refused", "bad_request"])
async def test_other_failures_are_not_asked_again_here(kind):
    llm = failing(role_fails(Focus, times=1), kind)
    with pytest.raises(LLMError) as raised:
        await ask(llm, factories_request(llm), Focus)
    assert raised.value.kind == kind and len(llm.calls) == 1


async def test_the_focus_cut_off_twice_still_ends_the_case_and_its_error_carries_both_tries_cost():
    llm = failing(role_fails(Focus))
    with pytest.raises(LLMError) as raised:
        await judge(example_case(KETTLE), llm, config())
    assert raised.value.kind == "truncated" and llm.roles() == ["focus", "focus"]
    assert raised.value.usage == BILLED + BILLED


def factories_request(llm: ScriptedLLM) -> LLMRequest:
    from cyberjurors.jury import prompts
    from cyberjurors.jury.model_inputs import FocusTask
    from cyberjurors.llm.port import stage_request

    case = example_case(KETTLE)
    return stage_request(
        "focus", config(), system=prompts.FOCUS_SYSTEM, prompt=["p"], task=FocusTask(case), case_id=case.case_id
    )


# --- a juror abstains -----------------------------------------------------------------------------


async def test_a_juror_cut_off_twice_abstains_the_others_decide_and_the_verdict_says_so():
    llm = failing(juror(2))
    verdict, case_file = await decided(llm)
    [held] = case_file.rounds
    assert [b.juror for b in held.ballots] == [0, 1, 3, 4]
    assert [(a.juror, a.round, a.kind) for a in held.abstentions] == [(2, 1, "truncated")]
    assert calls_of(llm, "juror", 2) == 2 and calls_of(llm, "juror") == 6  # asked once more, no more
    v = verdict.votes
    assert (v.total, v.abstained, v.seats) == (4, 1, 5)  # counted, not turned into a vote
    assert [s.vote for s in verdict.jury.seats][2] is None
    assert any("juror 2" in p and "abstained" in p and "cut at the output limit" in p for p in verdict.problems)
    assert "quorum_not_reached" not in verdict.escalation_reasons  # 4 of 5 reach 3
    # what the provider billed for both failed replies is in the case's tokens
    assert case_file.usage["rounds"].input_tokens >= 2 * BILLED.input_tokens
    assert case_file.usage["rounds"].output_tokens == 2 * BILLED.output_tokens + 10 * 5


async def test_a_juror_cut_off_once_answers_when_asked_again_and_no_one_abstains():
    llm = failing(juror(1, times=1))
    verdict, case_file = await decided(llm)
    assert len(case_file.rounds[0].ballots) == 5 and not case_file.rounds[0].abstentions
    assert verdict.votes.abstained == 0 and calls_of(llm, "juror", 1) == 2
    assert not any("abstained" in p for p in verdict.problems)


async def test_an_invalid_ballot_after_its_repair_abstains_as_invalid_output():
    verdict, case_file = await decided(failing(juror(0), "invalid_output"))
    assert [(a.juror, a.kind) for a in case_file.rounds[0].abstentions] == [(0, "invalid_output")]
    assert any("juror 0" in p and "did not fit the ballot's schema" in p for p in verdict.problems)


async def test_other_failures_of_a_juror_still_fail_the_round_for_its_replay():
    with pytest.raises(LLMError) as raised:
        await decided(failing(juror(3), "overloaded"))
    assert raised.value.kind == "overloaded" and raised.value.replayable


# --- the quorum -----------------------------------------------------------------------------------


async def test_a_round_short_of_the_quorum_ends_deliberation_and_is_escalated_not_dropped():
    llm = failing(juror(0, 1, 2))
    verdict, case_file = await decided(llm, rounds=3, early_stop=0)
    assert len(case_file.rounds) == 1 and verdict.rounds_used == 1  # 2 valid ballots of 5, below 3
    assert verdict.escalated and "quorum_not_reached" in verdict.escalation_reasons
    assert not verdict.early_stopped
    assert (verdict.votes.total, verdict.votes.abstained) == (2, 3)


async def test_ballot_quorum_sets_how_many_valid_ballots_a_round_needs():
    verdict, _ = await decided(failing(juror(4)), ballot_quorum=5)
    assert "quorum_not_reached" in verdict.escalation_reasons
    verdict, _ = await decided(failing(juror(4)), ballot_quorum=4)
    assert "quorum_not_reached" not in verdict.escalation_reasons
    verdict, _ = await decided(failing(juror(4)), ballot_quorum=99)  # capped at the jury's size: 5
    assert "quorum_not_reached" in verdict.escalation_reasons


async def test_a_round_with_no_valid_ballot_still_ends_in_a_verdict_that_says_it_stands_on_nothing():
    llm = failing(juror(0, 1, 2, 3, 4))
    verdict, case_file = await decided(llm)
    assert (verdict.votes.buyer, verdict.votes.seller, verdict.votes.abstained) == (0, 0, 5)
    assert verdict.escalated and "quorum_not_reached" in verdict.escalation_reasons
    assert any("gave no valid ballot" in p for p in verdict.problems)
    assert "No juror gave a valid ballot" in case_file.rounds[0].summary.summary
    assert calls_of(llm, "summary") == 0  # no summary of nothing is asked for


async def test_the_margin_is_scaled_over_the_seats_so_an_abstention_narrows_it_honestly():
    verdict, _ = await decided(failing(juror(3, 4)))
    v = verdict.votes
    assert v.seats == 5 and scaled_margin(verdict) == pytest.approx(verdict.margin * 17 / 5)


async def test_a_juror_who_abstained_is_not_read_in_the_next_round_by_those_who_follow_it():
    s = dict(jurors=5, rounds=2, early_stop=0, graph={"out_degree": 4})  # everyone follows everyone
    llm = failing(lambda r, t: 2 if t is BallotDraft and r.task.juror == 1 and r.task.round == 1 else 0)
    _, case_file = await decided(llm, **s)
    second = [c for c in llm.calls if c.role == "juror" and c.task.round == 2]
    assert len(second) == 5 and all(1 not in [b.juror for b in c.task.neighbours] for c in second)
    assert all(len(c.task.neighbours) == (4 if c.task.juror == 1 else 3) for c in second)
    assert len(case_file.rounds[1].ballots) == 5


def test_votes_without_abstentions_serialise_as_before_and_with_them_say_so():
    assert Votes(buyer=9, seller=8).model_dump_json() == '{"buyer":9,"seller":8}'
    assert Votes.model_validate_json(Votes(buyer=9, seller=6, abstained=2).model_dump_json()).seats == 17


# --- the summary and the verifier -----------------------------------------------------------------


async def test_a_summary_that_fails_twice_gives_way_to_the_tally_with_a_note():
    verdict, case_file = await decided(failing(role_fails(RoundSummaryDraft)))
    summary = case_file.rounds[0].summary
    assert summary.summary.startswith(f"{summary.votes.buyer} for the buyer, {summary.votes.seller} for the seller")
    assert any("summary is the tally" in p for p in verdict.problems)


async def test_a_verifier_that_fails_twice_leaves_the_verdict_unverified_with_a_note():
    llm = failing(role_fails(VerificationDraft))
    verdict, _ = await decided(llm, pipeline="verifier")
    assert verdict.verification is None and llm.roles().count("verify") == 2
    assert any("not verified: the verifier" in p for p in verdict.problems)
    assert verdict.tokens.output_tokens >= 2 * BILLED.output_tokens


async def test_a_juris_voter_that_fails_twice_abstains_from_the_sentence_vote():
    verdict, _ = await decided(failing(role_fails(SentenceVotes)), pipeline="juris")
    assert any("abstained from the sentence vote" in p for p in verdict.problems)
    assert verdict.verification is not None  # the rest of JURIS and the verifier still ran
