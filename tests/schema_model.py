"""A test model that answers any output type with a valid instance built from its JSON schema.

For the tests that need the pipeline to get *an* answer at every stage, not a particular one: the
offline stand-in (``cyberjurors/jury/offline.py``) computes its verdicts from lexical cues, and a test
that leans on it ties itself to that logic without meaning to. ``SchemaModel`` reads only the
schema the real backends send (the same bounds: ``cyberjurors/schemas/bounds.py``' maxLength and
maxItems, the enums, the numeric limits), so what it writes is what a model under a grammar could
write. It is deterministic: the answer is seeded by the output type and the request's text, so a
test run twice sees the same answers, and two different prompts see different ones.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from pydantic import BaseModel, ValidationError

from cyberjurors.llm.port import LLMError, LLMRequest, LLMResult, T, estimate_tokens
from cyberjurors.schemas import Usage

WORDS = [
    "buyer",
    "seller",
    "parcel",
    "refund",
    "delivered",
    "damaged",
    "photo",
    "receipt",
    "window",
    "stamp",
    "label",
    "seam",
    "crack",
]
LONGEST_LIST = 3  # the lists it writes are short: enough to exercise "many", cheap to carry through a case
TRIES = 20  # a model validator may refuse a draw (a total that must add up): draw again, at most this often


class SchemaInvalid(AssertionError):
    """The schema allowed an answer its model refused ``TRIES`` times over: the schema says less than
    the model checks, which a grammar-constrained backend would trip on too."""


def instance(node: dict[str, Any], defs: dict[str, Any], rng: random.Random) -> Any:
    """A JSON value valid under ``node``, drawn with ``rng``."""
    if "$ref" in node:
        return instance(defs[node["$ref"].rsplit("/", 1)[-1]], defs, rng)
    if "const" in node:
        return node["const"]
    if "enum" in node:
        return rng.choice(node["enum"])
    for key in ("anyOf", "oneOf"):
        if options := node.get(key):
            present = [o for o in options if o.get("type") != "null"] or options
            return instance(rng.choice(present), defs, rng)
    if options := node.get("allOf"):
        return instance(options[0], defs, rng)
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    match kind:
        case "object":
            props = node.get("properties", {})
            return {name: instance(sub, defs, rng) for name, sub in props.items()}
        case "array":
            low = node.get("minItems", 0)
            high = max(low, min(node.get("maxItems", LONGEST_LIST), LONGEST_LIST))
            return [instance(node.get("items", {}), defs, rng) for _ in range(rng.randint(max(low, 1), high))]
        case "string":
            return text(node.get("minLength", 0), node.get("maxLength", 80), rng)
        case "integer":
            low, high = _bounds(node, 0, 10)
            return rng.randint(int(low), int(high))
        case "number":
            low, high = _bounds(node, 0.0, 1.0)
            return rng.uniform(low, high)
        case "boolean":
            return rng.random() < 0.5
        case "null":
            return None
    return text(0, 40, rng)  # an unconstrained value: a string is valid JSON for it


def text(least: int, most: int, rng: random.Random) -> str:
    words: list[str] = []
    while len(" ".join(words)) < max(least, min(most, 60) // 2):
        words.append(rng.choice(WORDS))
    said = " ".join(words)[:most]
    return said.ljust(least, "x")


def _bounds(node: dict[str, Any], low: float, high: float) -> tuple[float, float]:
    low = node.get("minimum", node.get("exclusiveMinimum", low - 1) + 1)
    high = node.get("maximum", node.get("exclusiveMaximum", max(high, low) + 1) - 1)
    return low, max(low, high)


def answer(output_type: type[T], seed: str) -> T:
    """A valid ``output_type``, the same for the same seed."""
    schema = output_type.model_json_schema()  # with its bounds (Anthropic's transform moves them to prose)
    defs = schema.get("$defs", {})
    errors: list[ValidationError] = []
    for attempt in range(TRIES):
        rng = random.Random(hashlib.sha256(f"{seed}\n{attempt}".encode()).digest())
        try:
            return output_type.model_validate(instance(schema, defs, rng))
        except ValidationError as err:
            errors.append(err)
    raise SchemaInvalid(f"{output_type.__name__}: no draw passed its validators: {errors[-1]}")


class SchemaModel:
    """The LLM port, answered from the output type's schema alone."""

    backend = "scripted"  # a stand-in the price table bills nothing for, like the offline backend
    model_label = "schema"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []  # (task type, output type), in call order

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        if not issubclass(output_type, BaseModel):
            raise LLMError("unsupported_task", f"no schema for {output_type!r}")
        self.calls.append((type(request.task).__name__, output_type.__name__))
        made = answer(output_type, f"{output_type.__name__}\n{request.text()}")
        usage = Usage(input_tokens=estimate_tokens(request), output_tokens=len(made.model_dump_json()) // 3, calls=1)
        return LLMResult(made, usage, model=self.model_label, backend=self.backend, finish_reason="stop")
