"""Stage I: focus extraction, O_I = F_extract(d, T^b, T^s)."""

from __future__ import annotations

from ..config import Settings
from ..llm.port import LLM, stage_request
from ..schemas import DisputeCase, Focus, Usage
from . import prompts
from .answers import ask
from .model_inputs import FocusTask


async def extract_focus(case: DisputeCase, llm: LLM, settings: Settings) -> tuple[Focus, Usage]:
    request = stage_request(
        "focus",
        settings,
        system=prompts.FOCUS_SYSTEM,
        prompt=[prompts.focus_prompt(case)],
        task=FocusTask(case),
        case_id=case.case_id,
    )
    result = await ask(llm, request, Focus)
    return result.output, result.usage
