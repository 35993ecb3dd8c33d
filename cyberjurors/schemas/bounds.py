"""Bounds on what a model writes: every string of a model output carries a ``maxLength`` and every
list a ``maxItems`` in the JSON schema the backends send, so a server that decodes under a grammar
built from the schema (llama.cpp, llama-cpp-python, vLLM, Ollama) cannot ramble to the output cap.

A provider that reads the bounds only as a hint (Anthropic's structured output moves them into the
field's description) may still write past one; such an answer is cut at the bound (a string ends
in "…", a list keeps its first items) rather than refused: the answer is still the model's, the
reader of a stored ballot sees where it was cut, and a case is not lost for a sentence too many.
The sizes are the room a role's answer needs, none above ``MAX_STRING`` (``config/llm.py`` sizes each role's output cap by
them, ``tests/unit/config/test_output_room.py`` checks that it does).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, StringConstraints

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


# a clue id ("b1") or a candidate sentence's ("A3")
Tag = Annotated[str, _clip(16), StringConstraints(max_length=16)]
# a cited id (a clue "b1", a guideline "g-12@3", an evidence id: the case schema's 64 characters at most)
Ref = Annotated[str, _clip(64), StringConstraints(max_length=64)]
# a claim, a conflict, an argument of one side: a sentence or two
Line = Annotated[str, _clip(300), StringConstraints(max_length=300)]
# a clue or its assessment, the verifier's feedback, an untraceable claim quoted whole
Passage = Annotated[str, _clip(600), StringConstraints(max_length=600)]
# a justification, a round summary, an advocate's statement: the longest a string may be bounded at
Reasons = Annotated[str, _clip(1000), StringConstraints(max_length=1000)]
# llama.cpp builds a grammar from the schema, and its parser refuses a repetition of more than about
# 1,000 (a string of maxLength 1,100 fails "number of rules that are going to be repeated multiplied
# by the new repetition exceeds sane defaults"; llama-cpp-python 0.3.36's server then dies in the
# generation that follows). No bound here may pass it.
MAX_STRING = 1000


# What the room for an answer is reckoned in: a JSON answer's longest form, in characters, at 3 a
# token (English prose runs about 4; JSON punctuation and short ids fewer), and a tenth more for the
# whitespace a model may put between the tokens of JSON.
CHARS_PER_TOKEN = 3
UNBOUNDED_STRING = 200  # a string the schema leaves unbounded (none of the model outputs has one)


def longest(node: dict[str, Any], defs: dict[str, Any]) -> int:
    """The most characters a JSON value of this schema can take (a list at its maxItems, a string
    at its maxLength, escapes aside)."""
    if "$ref" in node:
        return longest(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
    if options := node.get("anyOf"):
        return max(longest(o, defs) for o in options)
    if "enum" in node:
        return max(len(str(v)) + 2 for v in node["enum"])
    match node.get("type"):
        case "object":
            props = node.get("properties", {})
            return 2 + sum(len(k) + 4 + longest(v, defs) for k, v in props.items())
        case "array":
            return 2 + node.get("maxItems", 8) * (longest(node.get("items", {}), defs) + 2)
        case "string":
            return node.get("maxLength", UNBOUNDED_STRING) + 2
        case "integer" | "number":
            return 12
        case _:
            return 5


def room(*outputs: type[BaseModel]) -> int:
    """Output tokens that hold the longest answer of any of these types, in steps of 64."""
    most = max(longest(t.model_json_schema(), t.model_json_schema().get("$defs", {})) for t in outputs)
    tokens = math.ceil(most / CHARS_PER_TOKEN * 1.1)
    return math.ceil(tokens / 64) * 64
