"""The verdict's justification checked before it is published: VERDICT's draft-verify-revise loop.

After the final round, the verifier (VERDICT's Adjudication Supervisor, role ``verify``) reads the
justification (the final round's summary S_T, or JURIS's consolidated sentences), the majority's
justifications it summarises, and what they may rest on: O_II (each clue with its evidence id and
frames), the guidelines the majority cited, the order record and the parties' claims. It answers
Pass, or Reject with feedback and the untraceable claims quoted as sentences. On Reject the
summariser revises the justification with all the feedback so far (a ``summary`` call), up to
``verifier_max_turns`` verifier calls (T_max). A justification still rejected after them loses the
sentences holding the claims the last Reject named: removed by string matching, not by one more
revision, since a revision could add a claim no turn is left to check, and removal costs no call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..config import Role, Settings
from ..llm.port import LLM, T, stage_request
from ..schemas import (
    Ballot,
    BudgetStop,
    CaseFile,
    Clue,
    DisputeCase,
    Focus,
    JustificationDraft,
    Party,
    PrecedentRef,
    Usage,
    Verification,
    VerificationDraft,
    Votes,
)
from . import prompts
from .answers import NoAnswer, output_or_none
from .budget import CaseBudget, describe
from .model_inputs import ReviseTask, VerdictBasis, VerifyTask
from .rounds import Jury, case_stages

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MIN_CLAIM_CHARS = 12
"""A quoted claim shorter than this must equal a whole sentence to remove it: a stray word must
not take out every sentence it occurs in."""


@dataclass(frozen=True)
class Grounds(VerdictBasis):
    """What the verdict's justification may rest on and what the majority said, with the case file
    it comes from and the majority's voices: the shared input of the verifier, the summariser's
    revisions and JURIS's drafters and jurors."""

    case_file: CaseFile
    voices: list[tuple[str, str, str]]

    @classmethod
    def of(cls, case_file: CaseFile, jury: Jury) -> Grounds:
        final = case_file.rounds[-1]
        winner = final.votes.winner
        majority = [b for b in final.ballots if b.vote == winner]
        cited = {g.split("@")[0] for b in majority for g in b.cited_guidelines}
        pool = case_file.precedents.guidelines if case_file.precedents else []
        focus, clues = case_stages(case_file)
        return cls(
            case_file.case,
            focus,
            clues,
            [g for g in pool if g.id in cited],
            winner,
            final.votes,
            majority,
            case_file,
            jury.voices(majority),
        )

    def verdict_line(self) -> str:
        return prompts.verdict_line(self.winner, self.votes.buyer, self.votes.seller)

    def sources(self) -> str:
        return prompts.sources_block(self.case, self.focus, self.clues, self.guidelines)

    def told(
        self,
    ) -> tuple[DisputeCase, Focus | None, list[Clue] | None, list[PrecedentRef], Party, Votes, list[Ballot]]:
        """The ``VerdictBasis`` fields every task built on the grounds begins with (VerifyTask,
        ReviseTask, DraftTask), in their order."""
        return (self.case, self.focus, self.clues, self.guidelines, self.winner, self.votes, self.majority)

    async def ask(
        self,
        llm: LLM,
        role: Role,
        settings: Settings,
        system: str,
        prompt: str,
        task: object,
        output_type: type[T],
        juror: int | None = None,
    ) -> tuple[T | NoAnswer, Usage]:
        """A call that reads the grounds' sources as its shared prefix (the verifier's, the
        summariser's revision, a JURIS drafter's): its answer, or ``NoAnswer``, and its cost."""
        request = stage_request(
            role,
            settings,
            juror=juror,
            system=system,
            shared=[self.sources()],
            prompt=[prompt],
            task=task,
            case_id=self.case.case_id,
        )
        return await output_or_none(llm, request, output_type)


@dataclass
class Justified:
    """The verdict's justification as the verdict step leaves it."""

    text: str
    verification: Verification | None = None
    usage: Usage = field(default_factory=Usage)
    notes: list[str] = field(default_factory=list)
    stop: BudgetStop | None = None
    """the per-case budget skipped or cut short the work on the justification"""


async def verified(text: str, grounds: Grounds, llm: LLM, settings: Settings, budget: CaseBudget) -> Justified:
    """Verify ``text``, revising it on each Reject while turns and budget last; what still fails
    loses its untraceable claims. The budget is checked before each turn (a revision and its check),
    as between rounds: a turn under way is never cut. A verifier whose answer fails twice leaves the
    justification unverified; a revision that does, the last Reject's claims to be removed."""
    feedback: list[str] = []
    spent = Usage()
    answer: VerificationDraft | None = None
    turns = 0
    notes: list[str] = []
    while turns < settings.verifier_max_turns and not budget.reached():
        if answer is not None:  # rejected, with a turn left: the summariser revises first
            revised, usage = await revise(text, feedback, answer.untraceable_claims, grounds, llm, settings)
            spent += usage
            budget.add(usage)
            if isinstance(revised, NoAnswer):
                notes.append(f"the revision after turn {turns}'s Reject was not made: the summariser {revised.said()}")
                break
            text = revised
        turns += 1
        checked, usage = await verify(text, turns, feedback, grounds, llm, settings)
        spent += usage
        budget.add(usage)
        if isinstance(checked, NoAnswer):
            what = f"the justification was not verified: the verifier {checked.said()}"
            return Justified(text, None, spent, [*notes, what])
        answer = checked
        if answer.decision == "pass":
            return Justified(text, Verification(status="passed", turns=turns, feedback=feedback), spent)
        feedback.append(answer.feedback.strip() or "rejected without feedback")
    stop = budget.stop("verdict") if turns < settings.verifier_max_turns and not notes else None
    if answer is None:  # the budget was reached before the first check
        return Justified(text, None, spent, [skipped_note("the justification was not verified", stop, settings)], stop)
    kept, removed, unmatched = remove_claims(text, answer.untraceable_claims)
    final = kept or fallback(grounds)
    notes = [failed_note(turns, removed, settings), *notes]
    if unmatched:
        notes.append(
            "the verifier named claims not found in the justification, left as they are: "
            + "; ".join(f'"{c}"' for c in unmatched)
        )
    if stop is not None:
        notes.append(
            skipped_note(f"verification stopped after turn {turns} of {settings.verifier_max_turns}", stop, settings)
        )
    return Justified(
        final, Verification(status="failed", turns=turns, removed_claims=removed, feedback=feedback), spent, notes, stop
    )


async def verify(
    text: str, turn: int, feedback: list[str], grounds: Grounds, llm: LLM, settings: Settings
) -> tuple[VerificationDraft | NoAnswer, Usage]:
    prompt = prompts.verify_prompt(grounds.verdict_line(), grounds.voices, text, turn, feedback)
    task = VerifyTask(*grounds.told(), text, turn, list(feedback))
    return await grounds.ask(llm, "verify", settings, prompts.VERIFY_SYSTEM, prompt, task, VerificationDraft)


async def revise(
    text: str, feedback: list[str], untraceable: list[str], grounds: Grounds, llm: LLM, settings: Settings
) -> tuple[str | NoAnswer, Usage]:
    """The summariser's revision of a rejected justification, with the feedback of every turn."""
    prompt = prompts.revise_prompt(grounds.verdict_line(), grounds.voices, text, feedback, untraceable)
    task = ReviseTask(*grounds.told(), text, list(feedback), list(untraceable))
    answer, usage = await grounds.ask(llm, "summary", settings, prompts.REVISE_SYSTEM, prompt, task, JustificationDraft)
    if isinstance(answer, NoAnswer):
        return answer, usage
    return answer.justification.strip() or text, usage


def sentences(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_END.split(text.strip()) if s.strip()]


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .!?;:,")


def _holds(sentence: str, claim: str) -> bool:
    """Whether ``sentence`` is where the quoted ``claim`` stands: the same text, or one within the
    other (a claim quoted in part, or a claim spanning sentences)."""
    s, c = _norm(sentence), _norm(claim)
    if not s or not c:
        return False
    return s == c or (len(c) >= MIN_CLAIM_CHARS and c in s) or (len(s) >= MIN_CLAIM_CHARS and s in c)


def remove_claims(text: str, claims: list[str]) -> tuple[str, list[str], list[str]]:
    """``text`` without the sentences holding ``claims``: (what is kept, the sentences removed, the
    claims found in no sentence). Deterministic: the same text and claims give the same result."""
    parts = sentences(text)
    hits = {claim: [i for i, s in enumerate(parts) if _holds(s, claim)] for claim in dict.fromkeys(claims)}
    gone = sorted({i for found in hits.values() for i in found})
    kept = " ".join(s for i, s in enumerate(parts) if i not in gone)
    return kept, [parts[i] for i in gone], [c for c, found in hits.items() if not found and c.strip()]


def fallback(grounds: Grounds) -> str:
    """The justification when no sentence of it could be traced."""
    return (
        f"{grounds.verdict_line()} None of the reasons drafted for it could be traced to the perceived clues "
        "or the cited guidelines, so none is given here."
    )


def failed_note(turns: int, removed: list[str], settings: Settings) -> str:
    gone = (
        f"{len(removed)} untraceable sentence{'s' if len(removed) != 1 else ''} removed"
        if removed
        else "nothing could be removed"
    )
    return (
        f"the justification failed verification (still rejected after {turns} of {settings.verifier_max_turns} "
        f"turns): {gone}"
    )


def skipped_note(what: str, stop: BudgetStop | None, settings: Settings) -> str:
    return f"per-case budget reached ({describe(stop, settings)}): {what}" if stop else what
