"""Spotting evidence text that addresses the jury instead of the dispute.

Detection is only for the record (the verdict notes it) and for the offline stand-in, which
has no judgement of its own; real models are protected by quoting (see prompts.py), not by this.
"""

from __future__ import annotations

import re

_INSTRUCTION = re.compile(
    r"(ignore (all |any )?(previous|prior|above) (instructions|prompts?)"
    r"|disregard (the |all )?(previous|prior|above|system)"
    r"|you are now|system prompt|as an ai"
    r"|(jury|jurors?|model|assistant|ai)\s*[,:]?\s*(must|should|have to)\s+vote"
    r"|vote (for|in favou?r of) the (buyer|seller))",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def instruction_sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text) if _INSTRUCTION.search(s)]


def without_instructions(text: str) -> str:
    return " ".join(s for s in _SENTENCE.split(text) if not _INSTRUCTION.search(s))
