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
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ..evidence.scrub import json_forms
from .index import PrecedentIndex
from .models import Document, Guideline

EXPIRED = "expired"  # what a guideline's history names in place of a case past precedent_case_retention_s


class ErasableIndex(PrecedentIndex, Protocol):
    """What both stores add to ``PrecedentIndex`` for an erasure."""

    async def guidelines_citing(self, case_id: str) -> list[Document]: ...

    async def rewrite(self, documents: Sequence[Document]) -> None: ...

    async def purge(self, needles: Sequence[str]) -> list[str]: ...

    async def cases_decided_before(self, before: datetime) -> list[str]: ...


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


async def erase_case(index: ErasableIndex, case_id: str, erased_as: str, purge: bool = True) -> PrecedentsErased:
    """Delete the case and rewrite the guidelines naming it; ``erased_as`` is what their history
    names instead (``erased:<reference>``, never the case id). ``purge``: the bytes out of the files
    now (a sweep over many cases purges once, after the last)."""
    done = PrecedentsErased(cases=await index.delete([f"case:{case_id}"]))
    citing = [d.guideline for d in await index.guidelines_citing(case_id) if d.guideline is not None]
    await index.rewrite([Document.of_guideline(without_case(g, case_id, erased_as)) for g in citing])
    done.guidelines = len(citing)
    if purge:
        done.notes = await index.purge(json_forms(case_id))
    return done


async def expire_cases(index: ErasableIndex, retention_s: float, now: datetime | None = None) -> PrecedentsErased:
    """``precedent_case_retention_s``: every historical case decided longer ago than that leaves the
    base as an erased one does, its place in the guidelines' history named ``expired``."""
    before = (now or datetime.now(UTC)) - timedelta(seconds=retention_s)
    done = PrecedentsErased()
    expired = await index.cases_decided_before(before)
    for case_id in expired:
        one = await erase_case(index, case_id, EXPIRED, purge=False)
        done.cases += one.cases
        done.guidelines += one.guidelines
    if expired:
        done.notes = await index.purge(json_forms(*expired))
    return done
