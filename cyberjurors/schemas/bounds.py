"""Bounds on what a model writes: every string of a model output carries a ``maxLength`` and every
list a ``maxItems`` in the JSON schema the backends send, so a server that decodes under a grammar
built from the schema (llama.cpp, llama-cpp-python, vLLM, Ollama) cannot ramble to the output cap.

A provider that reads the bounds only as a hint (Anthropic's structured output moves them into the
field's description) may still write past one; such an answer is cut at the bound (a string ends
in "…", a list keeps its first items) rather than refused: the answer is still the model's, the
reader of a stored ballot sees where it was cut, and a case is not lost for a sentence too many.
The sizes are the room a role's answer needs (``config/llm.py`` sizes each role's output cap by
them, ``tests/unit/config/test_output_room.py`` checks that it does).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, StringConstraints

ELLIPSIS = "…"


def _clip(limit: int) -> Any:
    def clip(value: Any) -> Any:
        if isinstance(value, str) and len(value) > limit:
            return value[: limit - len(ELLIPSIS)] + ELLIPSIS
        return value

    return BeforeValidator(clip)


def first(count: int) -> Any:
    """For a list field's ``Annotated``: keep its first ``count`` items (pair with ``Field(max_length=count)``)."""

    def keep(value: Any) -> Any:
        return value[:count] if isinstance(value, list) else value

    return BeforeValidator(keep)


# a cited id (a clue "b1", a guideline "g-12@3", an evidence id: the case schema's 64 characters at most)
Ref = Annotated[str, _clip(64), StringConstraints(max_length=64)]
# a claim, a conflict, an argument of one side: a sentence or two
Line = Annotated[str, _clip(300), StringConstraints(max_length=300)]
# a clue or its assessment, the verifier's feedback, an untraceable claim quoted whole
Passage = Annotated[str, _clip(600), StringConstraints(max_length=600)]
# a justification, a round summary, an advocate's statement
Reasons = Annotated[str, _clip(1200), StringConstraints(max_length=1200)]
# a revised or consolidated justification: a drafted one, corrected
Ruling = Annotated[str, _clip(1600), StringConstraints(max_length=1600)]
