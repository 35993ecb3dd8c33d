"""A case erased from the precedent base (`cyberjurors erase`): the historical case H, and the case
taken out of the provenance of every guideline that names it.

A guideline is a rule distilled from many cases, not a copy of one; it stays, with the case gone
from its ``supporting_cases`` and each history entry the case made naming the erasure (``erased:``
and the erasure's reference) instead: its history still shows that a confirmed case moved its
confidence, not which case. Its version is not raised (what jurors saw under ``id@version`` is
unchanged: the rule, its confidence). Both stores then put the bytes out of their files
(``purge``): the embedded store's SQLite file and write-ahead log, Elasticsearch's segments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .index import PrecedentIndex
from .models import Document, Guideline


class ErasableIndex(PrecedentIndex, Protocol):
    """What both stores add to ``PrecedentIndex`` for an erasure."""

    async def guidelines_citing(self, case_id: str) -> list[Document]: ...

    async def rewrite(self, documents: Sequence[Document]) -> None: ...

    async def purge(self, needles: Sequence[str]) -> list[str]: ...


@dataclass
class PrecedentsErased:
    cases: int = 0  # historical case documents deleted (0 or 1)
    guidelines: int = 0  # guidelines whose provenance named the case, rewritten without it
    notes: list[str] = field(default_factory=list)  # what is not done yet (a reader holding the file)


def without_case(guideline: Guideline, case_id: str, erased_as: str) -> Guideline:
    """The guideline with the case out of its provenance: not a supporting case any more, and each
    history entry it made naming ``erased_as`` (an override's ``case_id@event`` too)."""
    history = [
        change.model_copy(update={"case_id": erased_as})
        if change.case_id is not None and (change.case_id == case_id or change.case_id.startswith(f"{case_id}@"))
        else change
        for change in guideline.history
    ]
    supporting = [c for c in guideline.supporting_cases if c != case_id]
    return guideline.model_copy(update={"supporting_cases": supporting, "history": history})


async def erase_case(index: ErasableIndex, case_id: str, erased_as: str) -> PrecedentsErased:
    """Delete the case and rewrite the guidelines naming it; ``erased_as`` is what their history
    names instead (``erased:<reference>``, never the case id)."""
    done = PrecedentsErased(cases=await index.delete([f"case:{case_id}"]))
    citing = [d.guideline for d in await index.guidelines_citing(case_id) if d.guideline is not None]
    await index.rewrite([Document.of_guideline(without_case(g, case_id, erased_as)) for g in citing])
    done.guidelines = len(citing)
    done.notes = await index.purge([case_id])
    return done
