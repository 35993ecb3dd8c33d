"""The verdict's justification verified (VERDICT's draft-verify-revise) and jury-voted (JURIS).

Scripted models play the verifier, the summariser revising, the drafters, the voting jurors and the
editor; everything else is the offline stand-in, through the same stage functions the worker runs.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace

from prometheus_client import REGISTRY

from cyberjurors.config import Settings
from cyberjurors.jury.budget import spent_on
from cyberjurors.jury.model_inputs import (
    DraftTask,
    EditTask,
    JurorTask,
    ReviseTask,
    SentenceVoteTask,
    VerifyTask,
)
from cyberjurors.jury.offline import LABEL, OfflineLLM
from cyberjurors.jury.rounds import Jury, is_settled
from cyberjurors.jury.stages import NoPrecedents, clues_stage, focus_stage, judge, round_stage, verdict_stage
from cyberjurors.jury.verify import remove_claims
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMError
from cyberjurors.observability import metrics
from cyberjurors.schemas import (
    CandidateSentences,
    CaseFile,
    DeadLetter,
    JustificationDraft,
    SentenceVotes,
    Verdict,
    Verification,
    VerificationDraft,
)
from cyberjurors.state.results import StageResults
from cyberjurors.streams.app import next_round
from cyberjurors.streams.dead_letters import DeadLetters
from cyberjurors.streams.stage_hop import StageHop
from cyberjurors.streams.verdict import Verdicts

from ... import factories
from ...conftest import EXAMPLES
from ...factories import example_case

NOW = datetime(2026, 11, 1, tzinfo=UTC)
KETTLE = "appl-001-kettle-crack.json"


# the shared settings with the sample media and a quick jury: five jurors, one round
config = functools.partial(factories.settings, media_root=EXAMPLES, metrics_port=0, jurors=5, rounds=1)


def scripted(answers: dict[type, Callable]) -> ScriptedLLM:
    """The offline stand-in, except for the output types given a script."""
    offline = OfflineLLM()
    return ScriptedLLM(
        lambda request, output_type: (
            answers[output_type](request) if output_type in answers else offline._answer(request.task)
        )
    )


def tasks(llm: ScriptedLLM, kind: type) -> list:
    return [c.task for c in llm.calls if isinstance(c.task, kind)]


async def settled(s: Settings, llm=None) -> CaseFile:
    """A case through focus, clues and its rounds on the offline stand-in: ready for the verdict."""
    llm, jury = llm or OfflineLLM(), Jury.from_settings(s)
    case_file = await focus_stage(CaseFile(case=example_case(KETTLE), received_at=NOW, backend="offline"), llm, s)
    case_file = await clues_stage(case_file, llm, s, NoPrecedents())
    while not is_settled(case_file, s):
        case_file = await round_stage(case_file, jury, llm, s)
    return case_file


# --- draft, verify, revise ------------------------------------------------------------------------


async def test_a_verifier_that_rejects_twice_then_passes_gets_three_drafts_with_the_feedback_accumulated():
    verdicts = iter(
        [
            VerificationDraft(decision="reject", feedback="first: say which clue shows the crack"),
            VerificationDraft(decision="reject", feedback="second: the seller's photo is [s1], not [s3]"),
            VerificationDraft(decision="pass"),
        ]
    )
    revisions = iter(["The crack is shown in [b1].", "The crack is shown in [b1]; the seller answered in [s1]."])
    llm = scripted(
        {
            VerificationDraft: lambda r: next(verdicts),
            JustificationDraft: lambda r: JustificationDraft(justification=next(revisions)),
        }
    )
    verdict = await judge(example_case(KETTLE), llm, config(pipeline="verifier"))

    checks, revises = tasks(llm, VerifyTask), tasks(llm, ReviseTask)
    summary = [c.task for c in llm.calls if c.role == "summary" and not isinstance(c.task, ReviseTask)]
    assert len(checks) == 3 and len(revises) == 2 and len(summary) == verdict.rounds_used
    assert checks[0].justification.startswith(f"{LABEL} Round {verdict.rounds_used}:")  # the round summary
    assert [t.justification for t in checks[1:]] == [
        "The crack is shown in [b1].",
        "The crack is shown in [b1]; the seller answered in [s1].",
    ]
    assert [t.turn for t in checks] == [1, 2, 3]
    said = ["first: say which clue shows the crack", "second: the seller's photo is [s1], not [s3]"]
    assert [t.feedback for t in revises] == [said[:1], said]  # the third draft is written with both
    assert [t.feedback for t in checks] == [[], said[:1], said]
    third = next(c for c in llm.calls if c.task is revises[1])
    assert all(f'<record of="verifier feedback">{f}</record>' in third.text() for f in said)
    assert third.role == "summary" and {c.role for c in llm.calls if isinstance(c.task, VerifyTask)} == {"verify"}

    assert verdict.verification == Verification(status="passed", turns=3, removed_claims=[], feedback=said)
    assert verdict.justification == "The crack is shown in [b1]; the seller answered in [s1]."
    named = {c.id for c in [*verdict.cited_clues, *verdict.mentioned_clues]}
    assert {"b1", "s1"} <= named  # the clues of the justification published, not of the first draft
    assert verdict.tokens.output_tokens == 10 * len(llm.calls)  # the verifier's calls are counted
    assert not any("verification" in p for p in verdict.problems)


async def test_a_claim_still_untraceable_after_t_max_turns_is_removed_from_the_justification():
    bad = "The courier admitted dropping the parcel [s9]."
    draft = f"The kettle arrived cracked [b1]. {bad} The seller offered a partial refund."
    llm = scripted(
        {
            VerificationDraft: lambda r: VerificationDraft(
                decision="reject",
                feedback=f"turn {r.task.turn}: nothing shows a courier admission",
                untraceable_claims=["the courier admitted dropping the parcel [s9]", "The moon is made of cheese."],
            ),
            JustificationDraft: lambda r: JustificationDraft(justification=draft),  # never fixes it
        }
    )
    verdict = await judge(example_case(KETTLE), llm, config(pipeline="verifier"))

    assert len(tasks(llm, VerifyTask)) == 3 and len(tasks(llm, ReviseTask)) == 2  # no revision after the last turn
    assert verdict.justification == "The kettle arrived cracked [b1]. The seller offered a partial refund."
    assert verdict.verification is not None
    assert verdict.verification.status == "failed" and verdict.verification.turns == 3
    assert verdict.verification.removed_claims == [bad]
    assert verdict.verification.feedback == [f"turn {n}: nothing shows a courier admission" for n in (1, 2, 3)]
    notes = " ".join(verdict.problems)
    assert "failed verification (still rejected after 3 of 3 turns): 1 untraceable sentence removed" in notes
    assert '"The moon is made of cheese."' in notes  # named, but in no sentence: said, nothing removed for it
    assert "[s9]" not in notes  # the label that is no clue of the case left with its sentence


def test_claims_are_removed_by_their_sentences_only():
    text = "It broke [b1]. The seller said it was sealed [s1]! The buyer waited 40 days. Refund is due."
    kept, removed, unmatched = remove_claims(
        text,
        [
            "the SELLER said   it was sealed [s1]",
            "it",
            "",
            "The buyer waited 40 days. Refund is due.",
            "not there at all",
        ],
    )
    assert kept == "It broke [b1]."
    assert removed == ["The seller said it was sealed [s1]!", "The buyer waited 40 days.", "Refund is due."]
    assert unmatched == ["it", "not there at all"]  # a stray word removes nothing
    assert remove_claims(text, []) == (text, [], [])
    assert remove_claims(text, ["It broke [b1]"]) == (
        "The seller said it was sealed [s1]! The buyer waited 40 days. Refund is due.",
        ["It broke [b1]."],
        [],
    )


async def test_the_verifier_is_off_by_default_and_the_verdict_then_says_nothing_of_it():
    llm = scripted({})
    verdict = await judge(example_case(KETTLE), llm, config())
    assert "verify" not in llm.roles() and verdict.verification is None
    assert verdict.justification.startswith(f"{LABEL} Round {verdict.rounds_used}:")


async def test_a_budget_reached_before_the_verdict_skips_verification_and_says_so():
    llm = scripted({})
    verdict = await judge(example_case(KETTLE), llm, config(pipeline="verifier", case_token_budget=1))
    assert not tasks(llm, VerifyTask) and verdict.verification is None
    assert verdict.budget_reached and "verdict" in [s.stage for s in verdict.budget_stops]
    assert any("the justification was not verified" in p for p in verdict.problems)


async def test_a_budget_reached_after_a_reject_stops_revising_and_removes_the_claims():
    s = config(pipeline="verifier")
    case_file = await settled(s)
    draft = case_file.rounds[-1].summary.summary
    claim = next(sentence for sentence in draft.split(". ") if re.search(r"\[[bs][0-9]+\]", sentence))
    llm = scripted(
        {VerificationDraft: lambda r: VerificationDraft(decision="reject", feedback="no", untraceable_claims=[claim])}
    )
    tight = s.model_copy(update={"case_token_budget": spent_on(case_file).total_tokens + 1})
    verdict = await verdict_stage(case_file, llm, tight)
    assert len(tasks(llm, VerifyTask)) == 1 and not tasks(llm, ReviseTask)  # the first check ran, then the budget
    assert verdict.verification is not None and verdict.verification.status == "failed"
    assert verdict.verification.turns == 1 and claim not in verdict.justification
    assert [s.stage for s in verdict.budget_stops] == ["verdict"]
    assert any("verification stopped after turn 1 of 3" in p for p in verdict.problems)


# --- JURIS -------------------------------------------------------------------------------------------

CANDIDATES = {
    0: ["A: the kettle arrived cracked [b1].", "A: the courier admitted it [s9].", "A: nobody accepts this."],
    1: ["B: the seller's reply is [s1].", "B: the box was intact on dispatch [s2]."],
}
ACCEPTED = {
    0: {"A1", "A2", "B1", "B2"},
    1: {"A1", "A2", "B1", "B2"},
    2: {"A1", "B1", "B2"},
    3: {"A1", "B1"},
    4: {"A1", "B1", "X9"},
}  # A2 has 2 of 5 votes, B2 3 of 5, A3 none; X9 is no candidate


def juris_model() -> ScriptedLLM:
    return scripted(
        {
            CandidateSentences: lambda r: CandidateSentences(sentences=CANDIDATES[r.task.drafter]),
            SentenceVotes: lambda r: SentenceVotes(accepted=sorted(ACCEPTED[r.task.juror])),
            JustificationDraft: lambda r: JustificationDraft(justification=" ".join(r.task.selected.values())),
            VerificationDraft: lambda r: VerificationDraft(decision="pass"),
        }
    )


async def test_juris_builds_the_justification_from_the_sentences_a_majority_of_jurors_voted_for():
    llm = juris_model()
    s = config(jurors=7, pipeline="juris", juris_drafter_models=["offline:drafter-a", "offline:drafter-b"])
    verdict = await judge(example_case(KETTLE), llm, s)

    drafts = [c for c in llm.calls if isinstance(c.task, DraftTask)]
    assert [(c.role, c.model, c.task.drafter) for c in drafts] == [
        ("draft", "offline:drafter-a", 0),
        ("draft", "offline:drafter-b", 1),
    ]
    votes = [c for c in llm.calls if isinstance(c.task, SentenceVoteTask)]
    assert sorted(c.task.juror for c in votes) == [0, 1, 2, 3, 4]  # juris.voters = 5 of the 7 jurors
    assert all(
        c.task.candidates
        == {
            "A1": CANDIDATES[0][0],
            "B1": CANDIDATES[1][0],
            "A2": CANDIDATES[0][1],
            "B2": CANDIDATES[1][1],
            "A3": CANDIDATES[0][2],
        }
        for c in votes
    )
    # each voter is sent as its juror's ballot was: same model, system prompt and case prefix (cached)
    ballots = {c.task.juror: c for c in llm.calls if isinstance(c.task, JurorTask)}
    for vote in votes:
        ballot = ballots[vote.task.juror]
        assert (vote.role, vote.model, vote.system, vote.shared) == (
            "juror",
            ballot.model,
            ballot.system,
            ballot.shared,
        )
    (edit,) = tasks(llm, EditTask)
    assert list(edit.selected) == ["A1", "B1", "B2"]
    assert verdict.justification == " ".join([CANDIDATES[0][0], CANDIDATES[1][0], CANDIDATES[1][1]])
    (check,) = tasks(llm, VerifyTask)
    assert check.justification == verdict.justification  # the verifier checks the consolidated result
    assert verdict.verification == Verification(status="passed", turns=1)
    assert "offline:drafter-a" not in verdict.models  # offline verdicts name the stand-in only
    assert Counter(llm.roles())["draft"] == 2


async def test_juris_with_no_sentence_accepted_keeps_the_round_summary_and_still_verifies_it():
    llm = scripted({SentenceVotes: lambda r: SentenceVotes(accepted=[])})
    verdict = await judge(example_case(KETTLE), llm, config(pipeline="juris"))
    assert not tasks(llm, EditTask) and len(tasks(llm, SentenceVoteTask)) == 5
    assert verdict.justification.startswith(f"{LABEL} Round") and verdict.verification is not None
    assert any("no candidate sentence was accepted by a majority of the 5 voting jurors" in p for p in verdict.problems)


# --- the offline stand-in --------------------------------------------------------------------------


async def test_the_offline_stand_in_verifies_by_labels_deterministically():
    s = config(pipeline="verifier")
    case_file = await settled(s)
    final = case_file.rounds[-1]
    slipped = final.summary.model_copy(update={"summary": f"{final.summary.summary} The parcel was opened [b9]."})
    case_file = case_file.model_copy(
        update={"rounds": [*case_file.rounds[:-1], final.model_copy(update={"summary": slipped})]}
    )
    first, again = [await verdict_stage(case_file, OfflineLLM(), s) for _ in range(2)]
    assert first.model_dump(exclude={"decided_at", "latency_s"}) == again.model_dump(
        exclude={"decided_at", "latency_s"}
    )
    assert first.verification is not None and first.verification.status == "passed"
    assert first.verification.turns == 2 and len(first.verification.feedback) == 1
    assert first.verification.feedback[0].startswith(LABEL) and "[b9]" in first.verification.feedback[0]
    assert first.justification == final.summary.summary and first.justification.startswith(LABEL)


async def test_the_offline_stand_in_runs_juris_deterministically_and_labels_it():
    s = config(pipeline="juris", jurors=7)
    first, again = [await judge(example_case(KETTLE), OfflineLLM(), s) for _ in range(2)]
    assert first.model_dump(exclude={"decided_at", "latency_s"}) == again.model_dump(
        exclude={"decided_at", "latency_s"}
    )
    assert first.justification.startswith(LABEL) and first.justification.count(LABEL) == 1
    assert first.verification == Verification(status="passed", turns=1)
    assert "jurors found for the" in first.justification


# --- the verdict step in the stream handlers: stored once, replayed without a call ------------------


class Topic:
    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes]] = []

    async def send(self, *, key: bytes, value: bytes, headers: dict[str, bytes] | None = None) -> None:
        self.sent.append((key, value))


def count(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_redelivered_settled_case_resends_the_stored_verdict_and_repeats_no_verifier_call():
    s = config(pipeline="juris", jurors=7)
    case_file = await settled(s)
    llm, jury = juris_model(), Jury.from_settings(s)
    out, in_flight = Topic(), metrics.CasesInFlight()
    verdicts = Verdicts(s, StageResults({}), out, in_flight, lambda cf: verdict_stage(cf, llm, s, jury))
    passed, turns = count("cyberjurors_verifications_total", status="passed"), count("cyberjurors_verifier_turns_sum")
    await verdicts.publish(case_file)
    made = len(llm.calls)
    assert Counter(llm.roles()) == {"draft": 2, "juror": 5, "summary": 1, "verify": 1}
    await verdicts.publish(case_file)  # a redelivery
    assert len(llm.calls) == made and out.sent[1] == out.sent[0]
    assert Verdict.model_validate_json(out.sent[0][1]).verification == Verification(status="passed", turns=1)
    assert count("cyberjurors_verifications_total", status="passed") == passed + 1  # counted once
    assert count("cyberjurors_verifier_turns_sum") == turns + 1


async def test_a_verifier_that_fails_dead_letters_the_verdict_step_and_its_replay_decides():
    s = config(pipeline="verifier")
    case_file = await settled(s)
    failing = {"now": True}

    def verify(request):
        if failing["now"]:
            raise LLMError("overloaded", "try later")
        return VerificationDraft(decision="pass")

    llm, jury = scripted({VerificationDraft: verify}), Jury.from_settings(s)
    dlq, out, in_flight = Topic(), Topic(), metrics.CasesInFlight()
    results = StageResults({})
    letters = DeadLetters(dlq, in_flight)
    verdicts = Verdicts(s, results, out, in_flight, lambda cf: verdict_stage(cf, llm, s, jury))
    handlers = SimpleNamespace(
        hop=StageHop(results, letters, in_flight, verdicts.resend), verdicts=verdicts, dead_letters=letters
    )
    raw = case_file.model_dump_json().encode()
    incoming = SimpleNamespace(
        value=raw, message=SimpleNamespace(key=b"k", value=raw, topic="t", partition=0, offset=3, timestamp=None)
    )
    await next_round(handlers, s, incoming, Topic())  # type: ignore[arg-type]
    [letter] = [DeadLetter.model_validate_json(v) for _, v in dlq.sent]
    assert (letter.stage, letter.reason, letter.replayable) == ("verdict", "llm_overloaded", True)
    assert out.sent == [] and results.stored(case_file.case_id, "verdict") is None

    failing["now"] = False  # the provider recovered: the letter's replay decides
    await next_round(handlers, s, incoming, Topic())  # type: ignore[arg-type]
    [(_, value)] = out.sent
    assert Verdict.model_validate_json(value).verification == Verification(status="passed", turns=1)
