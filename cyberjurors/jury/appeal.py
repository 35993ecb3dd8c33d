"""The second instance (JurisAgents' stages IV-VI): the losing party appeals with a statement of
grounds and optionally new evidence; a larger panel (``appeal_jurors``, 31 by default, as Taobao's
appeal panels) re-examines the original record together with the first-instance verdict and
justification, the grounds and the new evidence; its verdict is final.

What the panel judges is a case file of its own (``CaseFile.appeal`` set): the admitted case with
the new evidence as the appellant's next round, the first instance's focus O_I, clue chain O_II and
precedents, and the ``AppealBrief``. New evidence goes through stage II select-perceive (its clues
follow the appellant's chain); every juror reads the first verdict's justification as <record> and
the grounds as <evidence> in the cached case prefix (``prompts.appeal_block``). The rounds are the
first instance's (JCV on the panel's own small-world graph, T rounds, early stop at delta), and the
verdict is ``verdict.decide``'s, marked instance 2 with its own id and ``appeal_of``.

No model is called here for what the record already holds: the first instance's stages are reused.
A first instance decided before its record was kept (appeals off then) is judged from the admitted
case: stage I and II run again.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Protocol

from ..config import Settings
from ..evidence.safety import instruction_sentences, jury_addressed
from ..llm.port import LLM
from ..schemas import (
    AppealBrief,
    AppealFiled,
    CaseFile,
    DisputeCase,
    EvidenceRound,
    PrecedentRef,
    Verdict,
    now,
)
from ..schemas.personas import Persona
from .budget import CaseBudget
from .clues import more_clues
from .rounds import Jury
from .stages import Retriever, clues_stage, focus_stage, seen, unread_evidence


class Remembers(Retriever, Protocol):
    """What the second instance needs of the precedent base: retrieval (a record without one) and
    each panel juror's memory M_k from the first instance's guideline pool."""

    async def memory(self, guidelines: list[PrecedentRef], personas: list[Persona]) -> dict[int, list[str]]: ...


def appeal_id(appeal: AppealFiled) -> str:
    """The appeal's content (who, against which verdict, grounds, evidence, when filed), not its
    envelope (event id, sent_at): a platform's resend is the same appeal."""
    content = appeal.model_dump_json(include={"case_id", "appellant", "verdict_id", "grounds", "evidence", "filed_at"})
    return hashlib.sha256(content.encode()).hexdigest()


def with_evidence(case: DisputeCase, appeal: AppealFiled) -> DisputeCase:
    """The case with the evidence filed with the appeal as the appellant's next round (raises
    pydantic's ValidationError for an evidence id the case already uses)."""
    if not appeal.evidence:
        return case
    last = max((r.round for r in case.rounds if r.party == appeal.appellant), default=0)
    new = EvidenceRound(party=appeal.appellant, round=last + 1, submitted_at=appeal.filed_at, items=appeal.evidence)
    data = case.model_dump()
    data["rounds"].append(new.model_dump())
    return DisputeCase.model_validate(data)  # validated whole: the case's rules hold for the new round too


def appeal_notes(before: DisputeCase, after: DisputeCase, appeal: AppealFiled) -> list[str]:
    """What the verdict should note about the appeal's own text: new evidence or grounds that address the jury."""
    notes = [n for n in jury_addressed(after) if n not in jury_addressed(before)]
    if instruction_sentences(appeal.grounds):
        notes.append(
            f"the {appeal.appellant}'s appeal grounds contain text addressed to the jury; they were treated "
            "as a party's claim, not as an instruction"
        )
    return notes


def appeal_file(
    record: CaseFile,
    first: Verdict,
    appeal: AppealFiled,
    case: DisputeCase,
    notes: list[str],
    accepted_at: datetime | None = None,
) -> CaseFile:
    """The second instance's case file before its stage II: the record (the first instance's
    ``clues`` result, or its admitted case) with the appealed case, no rounds and a budget of its own."""
    brief = AppealBrief(
        appeal_id=appeal_id(appeal),
        appellant=appeal.appellant,
        grounds=appeal.grounds,
        new_evidence=[i.id for i in appeal.evidence],
        filed_at=appeal.filed_at,
        first_instance=first,
    )
    return record.model_copy(
        update={
            "case": case,
            "digest": case.digest(),
            "received_at": accepted_at or now(),
            "rounds": [],
            "usage": {},
            "budget_stop": None,
            "problems": [*record.problems, *notes],
            "appeal": brief,
        }
    )


async def appeal_clues(
    case_file: CaseFile, jury: Jury, llm: LLM, settings: Settings, precedents: Remembers
) -> CaseFile:
    """The second instance's stage II: select-perceive over the new evidence, after the appellant's
    clues, and the panel's memories from the precedent pool. A record without stage II (kept from
    before appeals were on) runs stages I and II on the appealed case."""
    appeal = case_file.appeal
    assert appeal is not None
    if case_file.focus is None and case_file.clues is None and settings.focus_stage:
        case_file = await clues_stage(await focus_stage(case_file, llm, settings), llm, settings, precedents)
    elif case_file.clues is not None and case_file.focus is not None and appeal.new_evidence:
        budget = CaseBudget.of(case_file, settings)
        view = seen(case_file, settings).case  # the stages above mask for themselves; this call is made here
        items = [view.item(i) for i in appeal.new_evidence]
        chain, usage, problems = await more_clues(
            view, case_file.focus, appeal.appellant, items, case_file.clues, llm, settings, budget
        )
        case_file = case_file.model_copy(
            update={
                "clues": chain,
                "problems": [*case_file.problems, *problems],
                "budget_stop": budget.stopped,
                "usage": {**case_file.usage, "clues": usage},
            }
        )
        case_file = case_file.model_copy(
            update={"unread_evidence": await unread_evidence(case_file, case_file.clues, settings)}
        )
    elif case_file.clues is None and not settings.clues_stage:  # passive: the jurors see every item, new ones too
        case_file = case_file.model_copy(update={"unread_evidence": await unread_evidence(case_file, None, settings)})
    return await panel_memory(case_file, jury, precedents)


async def panel_memory(case_file: CaseFile, jury: Jury, precedents: Remembers) -> CaseFile:
    """Each panel juror's M_k: the top-K of the record's guideline pool by match with its persona."""
    found = case_file.precedents
    if found is None or not found.guidelines:
        return case_file
    memory = await precedents.memory(found.guidelines, jury.personas)
    if not memory:  # the base could not be opened now: the first instance's jurors keep theirs
        return case_file
    return case_file.model_copy(update={"precedents": found.model_copy(update={"memory": memory})})
