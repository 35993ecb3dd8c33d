"""The LLM section: the backends, the models per role and per juror seat, effort and thinking,
limits, prompt caching, prices, and ``eval --batch``'s Message Batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, Field, field_validator

from ..schemas import (
    ArgumentDraft,
    BallotDraft,
    CandidateSentences,
    Focus,
    JustificationDraft,
    Perception,
    RoundSummaryDraft,
    Selection,
    SentenceVotes,
    VerificationDraft,
)
from ..schemas.bounds import room
from .catalog import TokenPrices, facts, list_prices
from .fields import ConfigModel, nested, unset

Role = Literal[
    "focus",
    "select",
    "perceive",
    "juror",
    "summary",
    "distil",
    "advocate",
    "judge",
    "verify",
    "draft",
    "qualify",
    "letter",
]
ROLES: tuple[Role, ...] = get_args(Role)
Provider = Literal["anthropic", "openai", "offline"]
PROVIDERS: tuple[Provider, ...] = get_args(Provider)


def split_model(spec: str) -> tuple[Provider | None, str]:
    """``"openai:gpt-5-mini"`` -> ("openai", "gpt-5-mini"); a name without a known provider prefix
    (``"claude-sonnet-5-5"``, or Ollama's ``"qwen2.5vl:7b"``) -> (None, the name): the default backend's."""
    provider, sep, name = spec.partition(":")
    if sep and name and provider in PROVIDERS:
        return provider, name
    return None, spec


# Dated, sourced list prices (config/catalog.py); ``llm_prices`` replaces the whole table when set.
DEFAULT_LLM_PRICES = list_prices()

Effort = Literal["low", "medium", "high", "xhigh", "max"]
Thinking = Literal["auto", "adaptive", "budget", "off"]
# The Chat Completions API's reasoning_effort values, lowest first; which of them a model takes
# varies (o-series low..high, gpt-5 adds minimal, gpt-5.1 none, later models xhigh and max), so
# ``openai_reasoning_efforts`` says which the endpoint's reasoning models take.
OpenAIEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
OPENAI_EFFORTS: tuple[OpenAIEffort, ...] = get_args(OpenAIEffort)


def reasons(model: str, reasoning_models: list[str] | tuple[str, ...]) -> bool:
    """An OpenAI-compatible reasoning model: named in ``openai_reasoning_models`` (exactly or as a prefix)."""
    return any(model.startswith(name) for name in reasoning_models)


class RoleCall(ConfigModel):
    """One role's model and how its calls are made (an entry of ``llm_roles``). A field left unset
    takes the role's built-in value (``ROLE_CALLS``); the model, ``model``; max_output_tokens, the
    setting of that name when it is set."""

    model: str | None = unset(
        "the role's model, provider prefix allowed (anthropic:NAME, openai:NAME, offline:NAME); "
        "juror_models and juris_drafter_models spread the jurors' and drafters' seats instead"
    )
    effort: Effort | None = unset(
        "output_config.effort (reasoning_effort on openai reasoning models, one of "
        "openai_reasoning_efforts); sent only to models that take it"
    )
    thinking: Thinking | None = unset(
        "auto = the model's default, with room kept for it; adaptive; budget = {type: enabled, "
        "budget_tokens}; off = the model's way to turn it off (openai reasoning models: the lowest of "
        "openai_reasoning_efforts; budget is refused there)"
    )
    thinking_budget: int | None = Field(
        None,
        ge=0,
        le=64_000,
        description="tokens of max_tokens kept for thinking (budget_tokens in budget mode, at least 1024 there)",
    )
    max_output_tokens: int | None = Field(None, ge=1, le=64_000, description="room for the structured answer")


# Thinking tokens count toward a reply's max_tokens, so a call asks for max_output_tokens (the
# structured answer) + thinking_budget unless thinking is off. The answer's room is what the role's
# output schema can hold at its bounds (schemas/bounds.py: every string has a maxLength, every list
# a maxItems), so a model decoding under the schema's grammar always has room to finish and a
# rambling one is stopped by the grammar, not by the cap; 4,096 tokens of thinking on top leave a
# reply that thinks 2,000 tokens room to spare. Distil's answer (guidelines for up to 8 cases) is
# the precedent base's and not bounded: it keeps 4,096. Effort follows the work: picking one
# item or summarising ballots needs little, the judge's single ruling the most; the verifier checks
# every claim of a justification against the clues (medium); a JURIS drafter restates the
# majority's reasons as sentences (low), which the jurors and the verifier then check.
_BASE_CALL: dict[str, Any] = {"effort": "medium", "thinking": "auto", "thinking_budget": 4096}
_ROLE_OVERRIDES: dict[str, dict[str, Any]] = {
    "focus": {"max_output_tokens": room(Focus)},
    "select": {"effort": "low", "max_output_tokens": room(Selection)},
    "perceive": {"max_output_tokens": room(Perception)},
    "juror": {"max_output_tokens": room(BallotDraft, SentenceVotes)},  # JURIS's sentence votes are a juror's
    "summary": {"effort": "low", "max_output_tokens": room(RoundSummaryDraft, JustificationDraft)},
    "distil": {"max_output_tokens": 4096},
    "advocate": {"max_output_tokens": room(ArgumentDraft)},
    "judge": {"effort": "high", "max_output_tokens": room(BallotDraft)},
    "verify": {"max_output_tokens": room(VerificationDraft)},
    "draft": {"effort": "low", "max_output_tokens": room(CandidateSentences)},
    # a mock-case ballot: a juror's call, so a juror's room and effort
    "qualify": {"max_output_tokens": room(BallotDraft)},
    # restating a decided verdict for a party, from sources it is given (its schema is not bounded)
    "letter": {"effort": "low", "max_output_tokens": 2048},
}
ROLE_CALLS: dict[str, RoleCall] = {role: RoleCall(**(_BASE_CALL | over)) for role, over in _ROLE_OVERRIDES.items()}
# llm_roles' entry for what a role's own entry leaves unset
DEFAULT_ROLE: Literal["default"] = "default"
# the per-role settings this release removed, onto llm_roles (config/deprecated.py)
DEPRECATED_ROLE_SETTINGS = {
    **{f"model_{role}": f"llm_roles.{role}.model" for role in ROLES if role != "qualify"},
    "llm_effort": "llm_roles.default.effort",
    "llm_thinking": "llm_roles.default.thinking",
    "llm_thinking_budget": "llm_roles.default.thinking_budget",
    "max_output_tokens": "llm_roles.default.max_output_tokens",
}


StructuredOutput = Literal["auto", "json_schema", "json_object_schema", "tool", "prompt"]
STRUCTURED_OUTPUTS: tuple[StructuredOutput, ...] = get_args(StructuredOutput)


class ModelCapabilities(ConfigModel):
    """What one model can read, as the operator states it (``llm_capabilities``): each field set
    wins over the server's word and the catalog's; a field left unset takes theirs."""

    images: bool | None = unset("reads images; false: every role on it reads captions only")
    context_window: int | None = Field(None, ge=512, description="tokens of prompt and answer together, as served")
    max_output_tokens: int | None = Field(None, ge=1, description="the most one answer may hold")
    plumbing_only: bool | None = unset(
        "a tiny model whose verdicts show the plumbing, labelled never to pass for judgement"
    )


class BatchSettings(ConfigModel):
    """How ``eval --batch`` sends its calls as Message Batches (the setting ``llm_batch``)."""

    poll_s: float = Field(30.0, gt=0, description="eval --batch: seconds between status checks of a Message Batch")
    max_wait_s: float = Field(
        90_000.0,
        gt=0,
        description="eval --batch: seconds a Message Batch is polled "
        "before the run stops (the same command resumes): a little over the API's "
        "24-hour processing limit",
    )
    retry_s: float = Field(
        600.0,
        gt=0,
        description="eval --batch: seconds a status check or a result "
        "download is tried again on connection errors and 5xx, with backoff",
    )
    max_attempts: int = Field(
        3,
        ge=1,
        description="eval --batch: batches an entry may be sent in; an errored "
        "(retryable) or expired entry goes again in the next one",
    )
    max_cases: int = Field(
        500,
        ge=1,
        description="eval --batch: cases judged side by side in one set of waves "
        "(bounds memory; a larger set means fewer, larger batches)",
    )


class LLMSettings(BaseModel):
    """What ``llm/`` needs, and what any stage asks of it: which model a role or seat calls, and how."""

    llm_backend: Literal["auto", "anthropic", "openai", "offline"] = Field(
        "auto",
        description="auto = anthropic when ANTHROPIC_API_KEY is set, else offline (the labelled stand-in); or anthropic, openai, offline",
    )
    anthropic_api_key: str | None = Field(None, description="the Anthropic API key (or ANTHROPIC_API_KEY)")
    anthropic_base_url: str | None = Field(
        None, description="another Messages API endpoint (a gateway or proxy); unset = Anthropic's"
    )
    openai_api_key: str | None = Field(
        None, description="the key of the OpenAI-compatible endpoint (or OPENAI_API_KEY)"
    )
    openai_base_url: str | None = Field(
        None, description="the OpenAI-compatible endpoint: vLLM, llama.cpp server, Ollama, ... (or OPENAI_BASE_URL)"
    )
    openai_structured_output: StructuredOutput = Field(
        "auto",
        description="how the openai backend asks for a structured answer: json_schema (response_format "
        "json_schema, strict), json_object_schema (json_object with a schema, as llama-cpp-python takes it), "
        "tool (one forced tool call whose parameters are the schema), prompt (the schema in the system "
        "prompt, JSON mode where the server offers it); auto = each in that order until the server takes one, "
        "learnt from its refusal and remembered per server and model",
    )
    openai_server_info: bool = Field(
        True,
        description="ask the OpenAI-compatible server what it serves: context window and images from "
        "/v1/models (vLLM), /props (llama.cpp), /api/show (Ollama), and its tokenizer (/tokenize, "
        "/extras/tokenize/count) to measure prompts; false = the catalog and llm_capabilities only, "
        "prompts estimated",
    )
    llm_capabilities: dict[str, ModelCapabilities] = Field(
        default_factory=dict,
        description="per model (as a model setting names it, or its catalog name): images, context_window, "
        "max_output_tokens, plumbing_only; wins over the server's word and the catalog (config/catalog.py)",
    )
    model: str = Field("claude-sonnet-5-5", description="the model of every role llm_roles gives none")
    juror_models: list[str] = Field(
        default_factory=list,
        description="spread jurors over these models, round robin; any model setting may name "
        "its provider: anthropic:NAME, openai:NAME (OPENAI_BASE_URL), offline:NAME",
    )
    juris_drafter_models: list[str] = Field(
        default_factory=list,
        description="the two JURIS drafters' models (drafter i gets entry i mod the length); "
        "empty = both on llm_roles' draft model (or model)",
    )
    # Per role (issues 13 and 41): what a role leaves unset takes model, else its built-in value.
    llm_roles: dict[Role | Literal["default"], RoleCall] = Field(
        default_factory=dict,
        description="per role (focus, select, perceive, juror, summary, distil, advocate, judge, verify, "
        "draft, qualify, letter): model, effort, thinking, thinking_budget, max_output_tokens, e.g. "
        '{"juror": {"model": "claude-haiku-4-5"}, "judge": {"effort": "max"}, "default": {"thinking": "off"}}. '
        "What a role's entry leaves unset takes the default entry's, else the role's built-in value: model "
        "= model; effort medium (select, summary, draft, letter low; judge high); thinking auto with 4096 "
        "tokens kept for it; the answer's room what the role's output schema can hold at its bounds "
        "(docs/guides/llm-backends.md#answers-bounded-by-their-schema), distil 4096, letter 2048. "
        "qualify takes juror's entry unless it has its own",
    )
    openai_reasoning_models: list[str] = Field(
        default_factory=lambda: ["o1", "o3", "o4", "gpt-5"],
        description="openai backend: models (or name prefixes) that reason: sent max_completion_tokens and "
        "reasoning_effort instead of max_tokens",
    )
    openai_reasoning_efforts: list[OpenAIEffort] = Field(
        default_factory=lambda: list[OpenAIEffort](["low", "medium", "high"]),
        min_length=1,
        description="the reasoning_effort values the openai endpoint's reasoning models take (the o-series and "
        "gpt-5 models take low, medium, high); a role's effort outside it is refused at start, "
        "and thinking=off sends the lowest of them",
    )
    # Both limits are per worker process, not shared: the provider sees the sum over the fleet
    # (docs/operations/scaling.md#provider-limits-are-per-worker).
    llm_concurrency: int = Field(
        16,
        ge=1,
        description="model calls in flight per worker process, not per fleet: the provider sees up to "
        "replicas x this (KEDA's maxReplicaCount 8: 8x); set it to the fleet's share / max replicas",
    )
    llm_tokens_per_minute: int | None = Field(
        None,
        description="input tokens a minute per worker process (estimated before the call: 4 characters a "
        "token, 1,500 an image), not per fleet: the provider sees up to replicas x this (KEDA's "
        "maxReplicaCount 8: 8x); set it to the account's input-token limit / max replicas; unset (or 0) = no limit",
    )
    llm_timeout_s: float = Field(120.0, description="one model call's deadline, per attempt")
    llm_max_retries: int = Field(
        4, description="retries of a model call on 429, 5xx, overloaded and connection errors, with backoff"
    )
    offline_latency_s: float = Field(0.0, ge=0, description="simulated per-call latency (offline backend)")
    llm_call_log: Path | None = Field(None, description="append one JSON line per LLM call")
    prompt_caching: bool = Field(True, description="mark the per-case shared prefix cacheable at the provider")
    prompt_cache_ttl: Literal["5m", "1h"] = Field(
        "5m",
        description="how long a cached prefix lives; 1h where a case's calls may be further apart (eval uses "
        "1h unless this is set)",
    )
    llm_prices: dict[str, TokenPrices] = Field(
        default_factory=lambda: dict(DEFAULT_LLM_PRICES),
        description="USD per million tokens by model (exact name, or a prefix of it) and kind: "
        "input, output, cache_read, cache_write. Setting it replaces the whole table. "
        "A model it does not list is priced from genai-prices' bundled list (llm_prices_fallback); "
        "one neither lists is unpriced: left out of cost_usd, counted in tokens.unpriced_calls and "
        "cyberjurors_llm_unpriced_calls_total; the offline backend always costs 0",
    )
    llm_prices_fallback: bool = Field(
        True,
        description="price a model llm_prices does not list from genai-prices' list as bundled in the "
        "installed package (never fetched): the provider's list price, with the source named in "
        "tokens.cost_sources, the cost metric's price_source label and eval reports; false = such a "
        "model is unpriced",
    )
    llm_batch: BatchSettings = nested(
        BatchSettings, 'eval --batch, any of them by itself (llm_batch={"poll_s": 5}, CYBERJURORS_LLM_BATCH__POLL_S)'
    )

    @field_validator("llm_roles")
    @classmethod
    def _default_has_no_model(cls, roles: dict[str, RoleCall]) -> dict[str, RoleCall]:
        if DEFAULT_ROLE in roles and roles[DEFAULT_ROLE].model:
            raise ValueError("llm_roles' default entry takes no model: the model of every role is model")
        return roles

    @property
    def backend(self) -> Literal["anthropic", "openai", "offline"]:
        if self.llm_backend != "auto":
            return self.llm_backend
        return "anthropic" if self.anthropic_api_key else "offline"

    def model_specs(self) -> set[str]:
        """Every model some role or juror may be sent to, as configured (provider prefix included)."""
        return {self.model_for(role) for role in ROLES} | set(self.juror_models) | set(self.juris_drafter_models)

    def providers_named(self) -> set[Provider]:
        """The providers model settings name by prefix (``openai:...``); bare names go to ``backend``."""
        return {p for p in (split_model(m)[0] for m in self.model_specs()) if p is not None}

    def call_for(self, role: Role) -> RoleCall:
        """The role's effort, thinking, thinking budget and answer room, every field resolved: the
        role's entry in llm_roles, else the default entry, else the role's built-in value (its model
        is ``model_for``'s)."""
        # a mock-case ballot qualifies the juror that will serve: it is made as the juror's unless named
        given = self.llm_roles.get(role) or (self.llm_roles.get("juror") if role == "qualify" else None) or RoleCall()
        builtin = ROLE_CALLS.get(role, ROLE_CALLS["juror"])
        default = self.llm_roles.get(DEFAULT_ROLE) or RoleCall()
        resolved = {}
        for field in ("effort", "thinking", "thinking_budget", "max_output_tokens"):
            for value in (getattr(given, field), getattr(default, field), getattr(builtin, field)):
                if value is not None:
                    resolved[field] = value
                    break
        return RoleCall(**resolved)

    def models_of(self, role: Role) -> list[str]:
        """Every model a role's calls may go to."""
        seats = {"juror": self.juror_models, "qualify": self.juror_models, "draft": self.juris_drafter_models}.get(
            role, []
        )
        return list(dict.fromkeys([self.model_for(role), *seats]))

    def model_for(self, role: Role, juror_index: int | None = None) -> str:
        """The role's model; a juror seat (or a JURIS drafter, by its index) takes its entry of
        juror_models (juris_drafter_models), round robin, when that list is set."""
        if role == "juror" and juror_index is not None and self.juror_models:
            return self.juror_models[juror_index % len(self.juror_models)]
        if role == "qualify":  # a persona is qualified on the model of the seat it is to take
            return self.model_for("juror", juror_index)
        if role == "draft" and juror_index is not None and self.juris_drafter_models:
            return self.juris_drafter_models[juror_index % len(self.juris_drafter_models)]
        given = self.llm_roles.get(role)
        return (given.model if given else None) or self.model

    def openai_reasons(self, spec: str) -> bool:
        """Whether calls to this model setting go to the openai backend, as a reasoning model."""
        provider, name = split_model(spec)
        return (provider or self.backend) == "openai" and reasons(name, self.openai_reasoning_models)

    def _check_thinking(self) -> None:
        """A thinking type or effort a model refuses would dead-letter every case (400): refuse it here."""
        for role in ROLE_CALLS:
            call = self.call_for(role)  # type: ignore[arg-type]
            if call.thinking == "budget" and (call.thinking_budget or 0) < 1024:
                raise ValueError(f"thinking=budget for {role} needs a thinking_budget of at least 1024 tokens")
            self._check_openai_reasoning(role, call)  # type: ignore[arg-type]
            if call.thinking not in ("adaptive", "budget"):
                continue
            for model in self.models_of(role):  # type: ignore[arg-type]
                provider, name = split_model(model)
                known = facts(name) if (provider or self.backend) != "openai" else None
                if known is not None and call.thinking not in known.thinking_types:
                    takes = ", ".join(sorted(known.thinking_types)) or "no thinking"
                    raise ValueError(
                        f"thinking={call.thinking} for {role} is refused by {model} (it takes {takes}; use auto)"
                    )

    def _check_openai_reasoning(self, role: Role, call: RoleCall) -> None:
        """On an OpenAI-compatible reasoning model effort goes as ``reasoning_effort`` and there is
        no thinking parameter: ``budget`` has nothing to go to (``max_completion_tokens`` caps the
        reasoning and the answer together), and an effort the endpoint does not list is a 400."""
        for spec in self.models_of(role):
            if not self.openai_reasons(spec):
                continue
            if call.thinking == "budget":
                raise ValueError(
                    f"thinking=budget for {role} is refused by {spec}: an OpenAI-compatible reasoning "
                    "model takes no thinking budget (use auto; thinking_budget is still the room kept "
                    "for its reasoning)"
                )
            if call.thinking != "off" and call.effort not in self.openai_reasoning_efforts:
                raise ValueError(
                    f"effort={call.effort} for {role} is refused by {spec}: its reasoning_effort may be "
                    f"{', '.join(self.openai_reasoning_efforts)} (openai_reasoning_efforts); set "
                    f"{role}'s effort (llm_roles) to one of them, or list {call.effort} in "
                    "openai_reasoning_efforts if the model takes it"
                )
