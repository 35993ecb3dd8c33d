"""A verdict's clues are exactly what its majority cited, and every clue label its justification
names can be traced: to those clues, to the other clues it mentions, or to a note."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cyberjurors.jury.rounds import Jury, clue_labels, run_round
from cyberjurors.jury.verdict import decide
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.schemas import BallotDraft, CaseFile, Clue, ClueChain, DisputeCase, RoundSummaryDraft

from ...factories import settings

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def clue(cid: str, evidence: str, leaning: str) -> Clue:
    return Clue(
        id=cid,
        party="buyer" if cid.startswith("b") else "seller",
        step=int(cid[1:]),
        evidence_id=evidence,
        evidence_kind="text",
        selection_reason="r",
        clue=f"clue {cid}",
        assessment="a",
        leaning=leaning,
    )


@pytest.fixture
def case_file() -> CaseFile:
    case = DisputeCase.model_validate(
        {
            "case_id": "c-clues",
            "metadata": {
                "category": "appliances",
                "product": "Kettle",
                "order_amount": "40",
                "currency": "EUR",
                "ordered_at": "2026-10-01T00:00:00Z",
                "dispute_reason": "Leaks",
                "requested_remedy": "Refund",
            },
            "rounds": [
                {
                    "party": "buyer",
                    "round": 1,
                    "items": [
                        {"id": "e1", "kind": "text", "text": "It leaks."},
                        {"id": "e2", "kind": "text", "text": "Water on the table."},
                    ],
                },
                {
                    "party": "seller",
                    "round": 1,
                    "items": [{"id": "e3", "kind": "text", "text": "Tested before dispatch."}],
                },
            ],
        }
    )
    chain = ClueChain(buyer=[clue("b1", "e1", "buyer"), clue("b2", "e2", "buyer")], seller=[clue("s1", "e3", "seller")])
    return CaseFile(case=case, received_at=NOW, clues=chain, backend="scripted")


async def deliberate(case_file: CaseFile, ballot, summary: str, jurors: int = 5):
    """One scripted round: ``ballot(juror)`` gives (vote, justification, cited_clues)."""

    def answer(request, output_type):
        if output_type is RoundSummaryDraft:
            return RoundSummaryDraft(summary=summary, buyer_arguments=[], seller_arguments=[])
        vote, justification, cited = ballot(request.task.juror)
        return BallotDraft(
            conflicts=[],
            buyer_conflicts=[],
            seller_conflicts=[],
            vote=vote,
            justification=justification,
            cited_clues=cited,
        )

    s = settings(jurors=jurors)
    jury_round, _ = await run_round(case_file, Jury.from_settings(s), ScriptedLLM(answer), s)
    case_file = case_file.model_copy(update={"rounds": [jury_round]})
    return jury_round, decide(case_file, s, NOW)


async def test_a_majority_that_cites_nothing_gets_no_clues_and_a_note(case_file):
    _, verdict = await deliberate(
        case_file,
        lambda k: ("buyer", "It simply leaks.", []) if k < 4 else ("seller", "Tested, see [s1].", ["s1"]),
        "4 for the buyer.",
    )
    assert verdict.winner == "buyer"
    assert verdict.cited_clues == []  # not every clue of the case, and not the minority's
    assert "the buyer's majority cited no clue of the clue chain" in verdict.problems


async def test_cited_clues_are_the_majoritys_most_cited_first(case_file):
    cites = {0: ["b2"], 1: ["b1", "b2"], 2: ["b2"], 3: ["s1"], 4: ["s1"]}
    _, verdict = await deliberate(
        case_file, lambda k: ("buyer" if k < 3 else "seller", "see list", cites[k]), "3 for the buyer."
    )
    assert [c.id for c in verdict.cited_clues] == ["b2", "b1"]
    assert not any("cited no clue" in p for p in verdict.problems)


async def test_labels_in_a_jurors_justification_count_as_cited_and_unknown_ones_are_dropped(case_file):
    jury_round, verdict = await deliberate(
        case_file,
        lambda k: ("buyer", "The water [b2] and the leak [b1]; also [b7].", ["b1", "s9"]),
        "All for the buyer: [b1] [b2].",
    )
    for ballot in jury_round.ballots:
        assert ballot.cited_clues == ["b1", "b2"]  # the list, then what the text names; no b7, no s9
    assert [c.id for c in verdict.cited_clues] == ["b1", "b2"]


async def test_every_label_of_the_justification_is_a_verdict_clue_or_a_note(case_file):
    summary = "3 for the seller on [s1]; the buyer side points to [b1] and a photo [b4]."
    _, verdict = await deliberate(
        case_file, lambda k: ("seller", "Tested [s1].", []) if k < 3 else ("buyer", "It leaks [b1].", []), summary
    )
    assert verdict.winner == "seller"
    assert [c.id for c in verdict.cited_clues] == ["s1"]
    assert [c.id for c in verdict.mentioned_clues] == ["b1"]  # the minority's clue, named by the summary
    assert "the justification names [b4], which is no clue of this case" in verdict.problems
    traced = {c.id for c in [*verdict.cited_clues, *verdict.mentioned_clues]}
    for label in clue_labels(verdict.justification):
        assert label in traced or any(f"[{label}]" in p for p in verdict.problems)


def test_clue_labels_read_bracketed_clue_ids_only():
    assert clue_labels("[b1] and [s12], [b1] again, not [g-3] nor b2 nor [x1] nor [b0]") == ["b1", "s12"]
