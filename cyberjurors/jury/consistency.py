"""Consistency with precedent: after the vote, the verdict is compared with its nearest decided
precedents, the historical cases retrieved for it (``precedents/retrieval.py``) of the same category
whose similarity to the case reaches ``consistency.min_similarity``. Where most of them (more than
half) went the other way, the verdict says so with their ids, and, with
``inconsistent_with_precedent`` in ``escalate_on``, goes to people (``escalation.py``).

No model is called and nothing is searched again: the retrieved cases carry their real outcome
(``PrecedentRef.favours``) and their cosine with the case's query (``PrecedentRef.similarity``).
Fewer than ``consistency.min_precedents`` near ones is ``no_precedent``: one precedent alone is too
little to call a verdict inconsistent. An even split is consistent: the precedents do not say the
verdict went the wrong way.
"""

from __future__ import annotations

from ..config import Settings
from ..schemas import CaseFile, Party, PrecedentConsistency, PrecedentRef


def near_precedents(case_file: CaseFile, settings: Settings) -> list[PrecedentRef]:
    """The decided historical cases of the case's category near enough to compare with, nearest first."""
    found = case_file.precedents
    category = case_file.case.metadata.category
    near = [
        p
        for p in (found.cases if found else [])
        if p.kind == "case"
        and p.category == category
        and p.favours is not None
        and p.similarity is not None
        and p.similarity >= settings.consistency.min_similarity
    ]
    return sorted(near, key=lambda p: -(p.similarity or 0.0))


def consistency(case_file: CaseFile, winner: Party, settings: Settings) -> PrecedentConsistency | None:
    """How the verdict for ``winner`` stands against its near precedents; None without a precedent
    base (``precedent_backend = none``: judged without precedents by design, nothing to compare)."""
    if settings.precedent_backend == "none":
        return None
    near = near_precedents(case_file, settings)
    disagreeing = [p.id for p in near if p.favours != winner]
    if len(near) < settings.consistency.min_precedents:
        outcome = "no_precedent"
    else:
        outcome = "inconsistent" if 2 * len(disagreeing) > len(near) else "consistent"
    return PrecedentConsistency(
        outcome=outcome,
        compared=[p.id for p in near],
        disagreeing=disagreeing if outcome != "no_precedent" else [],
        min_similarity=settings.consistency.min_similarity,
    )


def consistency_note(found: PrecedentConsistency | None, winner: Party) -> list[str]:
    """What a reader of an inconsistent verdict is told: which precedents went the other way."""
    if found is None or found.outcome != "inconsistent":
        return []
    other = "seller" if winner == "buyer" else "buyer"
    return [
        f"most of the nearest decided precedents went the other way: {len(found.disagreeing)} of "
        f"{len(found.compared)} ({', '.join(found.disagreeing)}) were decided for the {other}, this verdict "
        f"for the {winner}"
    ]
