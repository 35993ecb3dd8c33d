"""The pipeline's stages as functions from a case file to the next case file.

The Faust app runs each on its own topic hop; benchmarks and tests run them back to back in one
process (``judge``). Both go through these functions, so an ablation that switches a stage off
behaves the same in either: the case file passes on unchanged and no model is called.
"""

from __future__ import annotations

from datetime import datetime, timezone

from ..config import Settings
from ..schemas import CaseFile, ClueChain, DisputeCase, Usage, Verdict
from .focus import extract_focus
from .jury import Jury, decide, is_settled, run_round
from .llm import LLM, gather_all
from .perception import localize_clues, passive_evidence
from .precedents.store import PrecedentBase


async def focus_stage(case_file: CaseFile, llm: LLM, settings: Settings) -> CaseFile:
    if not settings.focus_stage or settings.per_juror_stages:  # nothing shared to extract: pass it on
        return case_file
    focus, usage = await extract_focus(case_file.case, llm, settings)
    return case_file.model_copy(update={"focus": focus, "usage": {**case_file.usage, "focus": usage}})


async def _clue_chain(case_file: CaseFile, llm: LLM, settings: Settings) -> tuple[ClueChain | None, Usage, list[str]]:
    if not settings.clue_localization:
        # stage II off: jurors get every item at once; note here what they will not be able to read
        return None, Usage(), (await passive_evidence(case_file.case, settings))[1]
    if settings.per_juror_stages or case_file.focus is None:  # each juror localises its own clues
        return None, Usage(), []
    return await localize_clues(case_file.case, case_file.focus, llm, settings)


async def clue_stage(case_file: CaseFile, llm: LLM, settings: Settings, precedents: PrecedentBase) -> CaseFile:
    """Stage II and precedent retrieval, side by side (retrieval needs only the focus)."""
    (chain, usage, problems), found = await gather_all(
        _clue_chain(case_file, llm, settings),
        precedents.retrieve(case_file.case, case_file.focus),
    )
    if found.problem:
        problems = [*problems, found.problem]
    return case_file.model_copy(update={"clues": chain, "precedents": found,
                                        "problems": [*case_file.problems, *problems],
                                        "usage": {**case_file.usage, "perception": usage}})


async def jury_round(case_file: CaseFile, jury: Jury, llm: LLM, settings: Settings) -> CaseFile:
    result, usage = await run_round(case_file, jury, llm, settings)
    total = case_file.usage.get("jury")
    return case_file.model_copy(update={"rounds": [*case_file.rounds, result],
                                        "usage": {**case_file.usage, "jury": total + usage if total else usage}})


def now() -> datetime:
    return datetime.now(timezone.utc)


async def judge(case: DisputeCase, llm: LLM, settings: Settings, jury: Jury | None = None,
                precedents: PrecedentBase | None = None) -> Verdict:
    """One case through every stage in this process, no Kafka: for benchmarks and tests."""
    jury = jury or Jury.from_settings(settings)
    precedents = precedents or PrecedentBase(settings, jury.personas)
    case_file = CaseFile(case=case, received_at=now(), backend=llm.backend)
    case_file = await clue_stage(await focus_stage(case_file, llm, settings), llm, settings, precedents)
    while not is_settled(case_file, settings):
        case_file = await jury_round(case_file, jury, llm, settings)
    return decide(case_file, settings, now())
