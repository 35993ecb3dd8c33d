"""Continual precedent learning from confirmed outcomes (the VERDICT paper's jurisprudential memory).

For a case we judged, the platform later reports how it was really decided:

* agreement: the case joins H, and each guideline the majority cited gains confidence;
* disagreement: each cited guideline loses confidence, and one that falls below
  ``guideline_min_confidence`` is retired (kept for the record, no longer retrieved);
* every ``redistil_after`` confirmed cases in a category, that category is distilled again from
  its confirmed cases and the new rules merged into N.

Every change makes a new guideline version with a history entry naming the case, so a verdict's
``id@version`` can be traced, and a replayed outcome (same case, same guideline) changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .. import schemas
from ..config import EvidenceSettings, Settings
from ..evidence.privacy import minimise
from ..llm.port import LLM
from ..schemas import CaseFile, OutcomeReported, Verdict
from .build import BuildReport, merge_and_store
from .distill import MERGE_THRESHOLD, distil, summarize_case
from .embeddings import Embedder
from .index import PrecedentIndex
from .models import Document, Guideline, GuidelineChange, PrecedentCase

AGREE_STEP = 0.10  # confidence moves a tenth of the way to 1 on agreement
DISAGREE_FACTOR = 0.80  # and loses a fifth on disagreement: doubt weighs more than confirmation


@dataclass
class LearningReport:
    agreed: bool
    case_added: str | None = None
    raised: list[str] = field(default_factory=list)
    lowered: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def confirmed_case(case_file: CaseFile, outcome: OutcomeReported, settings: EvidenceSettings) -> PrecedentCase:
    """The case as a precedent, its personal data masked as the jury saw it: its summary is shown to later
    juries and distilled by a model."""
    case = minimise(case_file.case, settings).case.model_copy(update={"ground_truth": outcome.votes})
    return summarize_case(case).model_copy(update={"decided_at": outcome.decided_at})


def adjust(guideline: Guideline, agreed: bool, case_id: str, min_confidence: float, now: datetime) -> Guideline | None:
    """The next version of a guideline after an outcome, or None when nothing changes: the case
    was applied before (a replay), or the guideline is retired already."""
    if not guideline.active or any(change.case_id == case_id for change in guideline.history):
        return None
    c = guideline.confidence
    confidence = round(c + AGREE_STEP * (1 - c) if agreed else c * DISAGREE_FACTOR, 4)
    retire = not agreed and confidence < min_confidence  # a confirmed rule gains; only doubt retires
    reason = "retired" if retire else "outcome_agreed" if agreed else "outcome_disagreed"
    version = guideline.version + 1
    return guideline.model_copy(
        update={
            "version": version,
            "confidence": confidence,
            "active": not retire,
            "updated_at": now,
            "history": [
                *guideline.history,
                GuidelineChange(version=version, reason=reason, confidence=confidence, case_id=case_id, at=now),
            ],
        }
    )


async def learn(
    outcome: OutcomeReported,
    verdict: Verdict,
    case_file: CaseFile,
    index: PrecedentIndex,
    settings: Settings,
    now: datetime | None = None,
    *,
    replacing: OutcomeReported | None = None,
) -> LearningReport:
    """The precedent base follows a decision: the case confirmed when it agrees with the jury, and
    each guideline the verdict cited one step up or down.

    ``replacing`` is the human panel's decision that a supervisor's override (signed, naming it)
    replaces. The confirmed case becomes the override's, or goes when the override no longer agrees
    with the jury. Only when the override reverses agreement does each cited guideline take one step
    the other way (not an exact undo: other cases may have moved it since), recorded under the
    override's own id, so a redelivery applies it once."""
    now = now or schemas.now()
    agreed = outcome.votes.winner == verdict.winner
    report = LearningReport(agreed=agreed)
    if agreed:
        await _confirm(case_file, outcome, index, report, settings)
    if replacing is None:
        await _adjust_cited(verdict, agreed, outcome.case_id, index, settings, now, report)
        return report
    was = replacing.votes.winner == verdict.winner
    if was and not agreed:
        await index.delete([f"case:{outcome.case_id}"])
    if agreed != was:
        key = f"{outcome.case_id}@{outcome.event_id or 'override'}"
        await _adjust_cited(verdict, agreed, key, index, settings, now, report)
    return report


async def _confirm(
    case_file: CaseFile, outcome: OutcomeReported, index: PrecedentIndex, report: LearningReport, settings: Settings
) -> None:
    """The case, with the votes that decided it, as a precedent (upserted: the latest decision's votes)."""
    precedent = confirmed_case(case_file, outcome, settings)
    await index.upsert([Document.of_case(precedent)])
    report.case_added = precedent.case_id


async def _adjust_cited(
    verdict: Verdict,
    agreed: bool,
    key: str,
    index: PrecedentIndex,
    settings: Settings,
    now: datetime,
    report: LearningReport,
) -> None:
    """Each guideline the verdict cited, one step up (agreed) or down, once per ``key``."""
    cited = [f"guideline:{ref.split('@')[0]}" for ref in verdict.cited_precedents]
    changed = []
    for doc in await index.get(cited):
        if doc.guideline is None:
            continue
        new = adjust(doc.guideline, agreed, key, settings.guideline_min_confidence, now)
        if new is None:
            report.unchanged.append(doc.guideline.id)
            continue
        changed.append(Document.of_guideline(new))
        (report.raised if agreed else report.lowered).append(new.ref)
        if not new.active:
            report.retired.append(new.id)
    if changed:
        await index.upsert(changed)


async def redistil(
    category: str, case_ids: list[str], index: PrecedentIndex, embedder: Embedder, llm: LLM, settings: Settings
) -> BuildReport:
    """Distil a category again from its confirmed cases and fold the rules into N exactly as a
    build does: a rule close to an existing guideline becomes a new version of it."""
    report = BuildReport()
    cases = [d.case for d in await index.get([f"case:{c}" for c in case_ids]) if d.case is not None]
    if cases:
        fresh = await distil(category, cases, llm, settings)
        await merge_and_store(category, fresh, index, embedder, MERGE_THRESHOLD, report)
    return report
