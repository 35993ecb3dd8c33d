"""The pipeline's stages as functions from a case file to the next case file: focus, clues,
round (once per jury round), and the verdict (its justification verified or jury-voted first).

The Faust app runs each on its own topic hop; benchmarks and tests run them back to back in one
process (``judge``). Both go through these functions, so an ablation that switches a stage off
behaves the same in either: the case file passes on unchanged and no model is called.

They are also where a case enters the jury: each stage works on ``seen(case_file)``, the case with
its personal data replaced by placeholders (``evidence/privacy.py``), and hands on the case file it
was given with only its own results added. The case file keeps the case as submitted, so every
stage masks from the same text and gets the same placeholders; nothing the jury's code reads (the
prompts, the offline stand-in, precedent retrieval) ever holds the values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..config import Settings
from ..evidence.privacy import Minimised, minimise
from ..llm.port import LLM, gather_pair
from ..schemas import CaseFile, ClueChain, DisputeCase, Focus, PrecedentRef, Precedents, Usage, Verdict, now
from ..schemas.personas import Persona
from .budget import CaseBudget
from .clues import find_clues, passive_evidence, unread_passive
from .focus import extract_focus
from .juris import juris
from .rounds import Jury, is_settled, run_round
from .stakes import seated, sitting
from .verdict import decide
from .verify import Grounds, Justified, skipped_note, verified


class Retriever(Protocol):
    """What the clues stage needs of the precedent base (``cyberjurors.precedents``)."""

    async def retrieve(self, case: DisputeCase, focus: Focus | None) -> Precedents: ...


class NoPrecedents:
    async def retrieve(self, case: DisputeCase, focus: Focus | None) -> Precedents:
        return Precedents(coverage="none")

    async def memory(self, guidelines: list[PrecedentRef], personas: list[Persona]) -> dict[int, list[str]]:
        return {}


def seen(case_file: CaseFile, settings: Settings) -> CaseFile:
    """The case file as the jury sees it: the case and an appeal's grounds minimised (the same
    placeholders in every stage, and on every worker). Only for reading: a stage's result is built
    on the case file it was given, never on this, which masked again would escape its own placeholders."""
    done, appeal = minimised(case_file, settings), case_file.appeal
    if done.report is None:
        return case_file
    grounds = {"appeal": appeal.model_copy(update={"grounds": done.extra[0]})} if appeal else {}
    return case_file.model_copy(update={"case": done.case, **grounds})


def minimised(case_file: CaseFile, settings: Settings) -> Minimised:
    """The case and an appeal's grounds (read last, so an appeal keeps the first instance's numbers) masked."""
    appeal = case_file.appeal
    if appeal is None:
        return minimise(case_file.case, settings)
    return minimise(case_file.case, settings, (appeal.grounds,), appeal.appellant)


def jury_for(jury: Jury, settings: Settings, case_file: CaseFile) -> Jury:
    """The jury a court sits with (``settings`` the court's): the worker's (qualified, when the gate
    is on) when the court seats as many, else one of the first N personas, unvetted; an appeal's
    panel as the appeal handler seated it."""
    if case_file.appeal is not None or len(jury) == settings.jurors:
        return jury
    return Jury.from_settings(settings)


async def focus_stage(case_file: CaseFile, llm: LLM, settings: Settings) -> CaseFile:
    """Stage I; the court that sits on the case is chosen first (``stakes.py``): its model extracts the focus."""
    case_file, settings = seated(case_file, settings)
    if not settings.focus_stage or settings.per_juror_stages:  # nothing shared to extract: pass it on
        return case_file
    focus, usage = await extract_focus(seen(case_file, settings).case, llm, settings)
    return case_file.model_copy(update={"focus": focus, "usage": {**case_file.usage, "focus": usage}})


async def _clue_chain(
    case_file: CaseFile, llm: LLM, settings: Settings, budget: CaseBudget
) -> tuple[ClueChain | None, Usage, list[str]]:
    if not settings.clues_stage:
        # stage II off: jurors get every item at once; note here what they will not be able to read
        return None, Usage(), (await passive_evidence(case_file, settings))[1]
    if settings.per_juror_stages or case_file.focus is None:  # each juror finds its own clues
        return None, Usage(), []
    return await find_clues(case_file.case, case_file.focus, llm, settings, budget)


async def clues_stage(case_file: CaseFile, llm: LLM, settings: Settings, precedents: Retriever) -> CaseFile:
    """Stage II and precedent retrieval, side by side (retrieval needs only the focus). Once the
    per-case budget is reached no further select step starts: the jury gets what was perceived."""
    case_file, settings = seated(case_file, settings)
    budget = CaseBudget.of(case_file, settings)
    view = seen(case_file, settings)
    (chain, usage, problems), found = await gather_pair(
        _clue_chain(view, llm, settings, budget),
        precedents.retrieve(view.case, case_file.focus),  # a query the precedent store may log or keep
    )
    if found.problem:
        problems = [*problems, found.problem]
    return case_file.model_copy(
        update={
            "clues": chain,
            "precedents": found,
            "problems": [*case_file.problems, *problems],
            "usage": {**case_file.usage, "clues": usage},
            "budget_stop": budget.stopped,
            "unread_evidence": await unread_evidence(case_file, chain, settings),
        }
    )


async def unread_evidence(case_file: CaseFile, chain: ClueChain | None, settings: Settings) -> list[str]:
    """The evidence the jury was to examine that could not be read (what escalates a verdict as
    ``decisive_evidence_unreadable``): the items stage II selected as the likeliest to hold a key
    clue whose perception failed; with stage II off, every media item that could not be decoded.
    An item the selector passed over is not one, however broken (its note is on the verdict)."""
    if chain is not None:
        return [c.evidence_id for c in chain.all() if c.problem]
    return await unread_passive(case_file, settings) if not settings.clues_stage else []


async def round_stage(case_file: CaseFile, jury: Jury, llm: LLM, settings: Settings) -> CaseFile:
    case_file, settings = seated(case_file, settings)
    jury = jury_for(jury, settings, case_file)
    result, usage = await run_round(seen(case_file, settings), jury, llm, settings)
    total = case_file.usage.get("rounds")
    # the jury that opens the deliberation is the one the verdict names (deliberation = court seats no jurors)
    opening = {"jury": jury.composition if settings.deliberation == "jury" else None} if not case_file.rounds else {}
    return case_file.model_copy(
        update={
            "rounds": [*case_file.rounds, result],
            **opening,
            "usage": {**case_file.usage, "rounds": total + usage if total else usage},
        }
    )


async def verdict_stage(case_file: CaseFile, llm: LLM, settings: Settings, jury: Jury | None = None) -> Verdict:
    """The settled case's verdict, its justification drafted (round summary or JURIS) and verified
    as the settings say. The worker stores the result before sending it, so a redelivered input
    re-sends it and repeats no call made here. It records what was masked (kinds and counts)."""
    settings = sitting(settings, case_file)
    justified = await justify(
        seen(case_file, settings), jury_for(jury or Jury.from_settings(settings), settings, case_file), llm, settings
    )
    masked = minimised(case_file, settings).report
    verdict = decide(case_file, settings, now(), justified)
    withheld = (
        [
            f"{where}: could not be checked for personal data, so the jury read [WITHHELD] in its place"
            for where in masked.withheld
        ]
        if masked
        else []
    )
    return verdict.model_copy(update={"minimisation": masked, "problems": [*verdict.problems, *withheld]})


async def justify(case_file: CaseFile, jury: Jury, llm: LLM, settings: Settings) -> Justified | None:
    """None when the settings call for neither JURIS nor the verifier: the round summary as it is."""
    if not settings.verifies:
        return None
    text = case_file.rounds[-1].summary.summary
    grounds = Grounds.of(case_file, jury)
    budget = CaseBudget.of(case_file, settings)
    usage = Usage()
    notes: list[str] = []
    if settings.justification == "juris":
        if budget.reached():  # JURIS is one step: it starts only within the budget
            stop = budget.stop("verdict")
            return Justified(
                text,
                None,
                Usage(),
                [
                    skipped_note(
                        "JURIS and the verification were skipped; the justification is the round summary",
                        stop,
                        settings,
                    )
                ],
                stop,
            )
        voted, usage, notes = await juris(grounds, jury, llm, settings)
        budget.add(usage)
        text = voted or text
    checked = await verified(text, grounds, llm, settings, budget)
    checked.usage, checked.notes = usage + checked.usage, [*notes, *checked.notes]
    return checked


async def judge(
    case: DisputeCase, llm: LLM, settings: Settings, jury: Jury | None = None, precedents: Retriever | None = None
) -> Verdict:
    """One case through every stage in this process, no Kafka: for benchmarks and tests. Without a
    retriever the jury sees no precedents (open a ``PrecedentBase`` and pass it to have them)."""
    case_file = CaseFile(case=case, received_at=now(), backend=llm.backend)
    return await judge_file(
        case_file, llm, settings, jury or Jury.from_settings(settings), precedents or NoPrecedents()
    )


async def judge_file(
    case_file: CaseFile,
    llm: LLM,
    settings: Settings,
    jury: Jury,
    precedents: Retriever,
    at: Callable[[str], None] = lambda stage: None,
) -> Verdict:
    """An admitted case file through focus, clues, the rounds and the verdict, back to back, as the
    topology runs them hop by hop; ``at`` hears each stage's name (focus, clues, round-N, verdict)
    as it starts, so a failure can be told by its stage as a dead letter would be."""
    at("focus")
    case_file = await focus_stage(case_file, llm, settings)
    at("clues")
    case_file = await clues_stage(case_file, llm, settings, precedents)
    while not is_settled(case_file, settings):
        at(f"round-{len(case_file.rounds) + 1}")
        case_file = await round_stage(case_file, jury, llm, settings)
    at("verdict")
    return await verdict_stage(case_file, llm, settings, jury)
