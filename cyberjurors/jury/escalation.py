"""Escalation to human jurors: a verdict too doubtful to stand alone is published flagged
(``escalated``, ``escalation_reasons``) and its case goes to ``disputes.escalations`` with what a
human panel needs. No model is called: every reason is read from the verdict and its case file.

The reasons, a closed set (``schemas.ESCALATION_REASONS``), each switched on by ``escalate_on``:

* ``narrow_margin``: the vote margin, on the 17-vote scale (a jury of another size is scaled), is
  below ``escalation_margin``;
* ``low_precedent_coverage`` / ``no_precedent_coverage``: the precedent base had too few guidelines
  in the category (cross-category ones were added) / gave nothing or failed. Only with a precedent
  base configured: with ``precedent_backend = none`` no verdict has precedents by design;
* ``verification_failed``: the verifier still rejected the justification after its turns;
* ``injection``: a party's text (a message, a caption, a form field, appeal grounds) addresses the jury;
* ``decisive_evidence_unreadable``: evidence the jury was to examine could not be read
  (``CaseFile.unread_evidence``: an item stage II selected whose perception failed; with stage II
  off, any media item that could not be decoded). An item the selector passed over is not decisive;
* ``budget_reached``: the per-case budget cut the work short;
* ``inconsistent_with_precedent``: most of the verdict's nearest decided precedents went the other
  way (``consistency.py``). Off by default: a platform adds it to ``escalate_on``;
* ``quorum_not_reached``: the final round had fewer valid ballots than ``ballot_quorum`` (jurors whose
  answers failed twice abstained), so deliberation stopped there.

The event's id is derived from the verdict's, so a redelivered verdict re-sends the same escalation.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from ..config import Settings
from ..evidence.safety import instruction_sentences, jury_addressed
from ..schemas import JURY_SIZE, CaseFile, Escalation, EscalationReason, Verdict
from .rounds import short_of_quorum

ESCALATION_NAMESPACE = uuid.UUID("0c4f3a55-6b1e-4f55-9d0e-5f2a7c1d8e44")


@dataclass(frozen=True)
class Finding:
    reason: EscalationReason
    note: str


def scaled_margin(verdict: Verdict) -> float:
    """|seller - buyer| on the real jury's 17-vote scale, over the seats: an abstention narrows the
    margin as it would in a jury of 17, it is not taken to split as the votes cast did."""
    seats = verdict.votes.seats
    return verdict.margin * JURY_SIZE / seats if seats else 0.0


def _margin(verdict: Verdict, settings: Settings) -> list[Finding]:
    margin = scaled_margin(verdict)
    if margin >= settings.escalation_margin:
        return []
    v = verdict.votes
    scale = "" if v.seats == JURY_SIZE else f", {margin:.1f} on the {JURY_SIZE}-vote scale"
    abstained = f", {v.abstained} abstained" if v.abstained else ""
    return [
        Finding(
            "narrow_margin",
            f"the jury split {max(v.buyer, v.seller)}:{min(v.buyer, v.seller)}{abstained} (margin "
            f"{verdict.margin}{scale}), below escalation_margin {settings.escalation_margin:g}",
        )
    ]


def _coverage(case_file: CaseFile, verdict: Verdict, settings: Settings) -> list[Finding]:
    if settings.precedent_backend == "none":  # judged without precedents by configuration, not for want of them
        return []
    if verdict.precedent_coverage == "low":
        return [
            Finding(
                "low_precedent_coverage", "too few guidelines in the case's category: cross-category ones were added"
            )
        ]
    if verdict.precedent_coverage == "none":
        problem = (
            case_file.precedents.problem
            if case_file.precedents and case_file.precedents.problem
            else "nothing was retrieved"
        )
        return [Finding("no_precedent_coverage", f"the jury had no precedents: {problem}")]
    return []


def _verification(verdict: Verdict) -> list[Finding]:
    check = verdict.verification
    if check is None or check.status != "failed":
        return []
    removed = f"; {len(check.removed_claims)} claims removed" if check.removed_claims else ""
    return [
        Finding(
            "verification_failed", f"the verifier still rejected the justification after {check.turns} turns{removed}"
        )
    ]


def _injection(case_file: CaseFile) -> list[Finding]:
    notes = jury_addressed(case_file.case)
    appeal = case_file.appeal
    if appeal is not None and instruction_sentences(appeal.grounds):
        notes.append(f"the {appeal.appellant}'s appeal grounds contain text addressed to the jury")
    return [Finding("injection", "; ".join(notes))] if notes else []


def _unreadable(case_file: CaseFile) -> list[Finding]:
    if not case_file.unread_evidence:
        return []
    items = ", ".join(f"{i} ({case_file.case.party_of(i)})" for i in case_file.unread_evidence)
    how = "selected for examination" if case_file.clues is not None else "shown to the jurors"
    return [Finding("decisive_evidence_unreadable", f"evidence {how} could not be read: {items}")]


def _budget(verdict: Verdict) -> list[Finding]:
    if not verdict.budget_reached:
        return []
    where = ", ".join(f"{s.stage} ({s.limit})" for s in verdict.budget_stops)
    return [Finding("budget_reached", f"the per-case budget cut the work short at {where}")]


def _precedent(verdict: Verdict) -> list[Finding]:
    found = verdict.precedent_consistency
    if found is None or found.outcome != "inconsistent":
        return []
    return [
        Finding(
            "inconsistent_with_precedent",
            f"{len(found.disagreeing)} of the {len(found.compared)} nearest decided precedents went the other way: "
            + ", ".join(found.disagreeing),
        )
    ]


def _quorum(case_file: CaseFile, settings: Settings) -> list[Finding]:
    if not case_file.rounds or settings.deliberation != "jury":
        return []
    last = case_file.rounds[-1]
    need = short_of_quorum(last, settings)
    if need is None:
        return []
    seats = len(last.ballots) + len(last.abstentions)
    return [
        Finding(
            "quorum_not_reached",
            f"round {last.round} had {len(last.ballots)} valid ballots of {seats} seats, below ballot_quorum "
            f"{need}: {len(last.abstentions)} jurors abstained",
        )
    ]


def findings(case_file: CaseFile, verdict: Verdict, settings: Settings) -> list[Finding]:
    """Every reason ``escalate_on`` switches on that this verdict meets, in the closed set's order."""
    found = [
        *_margin(verdict, settings),
        *_coverage(case_file, verdict, settings),
        *_verification(verdict),
        *_injection(case_file),
        *_unreadable(case_file),
        *_budget(verdict),
        *_precedent(verdict),
        *_quorum(case_file, settings),
    ]
    return [f for f in found if f.reason in settings.escalate_on]


def escalate(verdict: Verdict, case_file: CaseFile, settings: Settings) -> Verdict:
    """The verdict flagged with the reasons it needs people, if any."""
    reasons = [f.reason for f in findings(case_file, verdict, settings)]
    return verdict.model_copy(update={"escalated": bool(reasons), "escalation_reasons": reasons})


def escalation_id(verdict: Verdict) -> str:
    return str(uuid.uuid5(ESCALATION_NAMESPACE, verdict.verdict_id))


def escalation_event(
    case_file: CaseFile, verdict: Verdict, settings: Settings, raised_at: datetime, trim: bool = False
) -> Escalation:
    """The event for ``disputes.escalations``; ``trim`` leaves out the ballots of every round but the
    last (their summaries and votes stay), for a record too large to send whole."""
    record = case_file
    if trim:
        kept = [r if r is case_file.rounds[-1] else r.model_copy(update={"ballots": []}) for r in case_file.rounds]
        record = case_file.model_copy(update={"rounds": kept})
    return Escalation(
        escalation_id=escalation_id(verdict),
        case_id=verdict.case_id,
        verdict_id=verdict.verdict_id,
        instance=verdict.instance,
        reasons=verdict.escalation_reasons,
        notes=[f.note for f in findings(case_file, verdict, settings)],
        verdict=verdict,
        case_file=record,
        ballots_trimmed=trim,
        raised_at=raised_at,
    )
