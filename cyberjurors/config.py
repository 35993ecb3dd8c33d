"""Settings: environment variables (prefix ``CYBERJURORS_``) or a TOML file.

A few names follow their ecosystems' conventions and are read without the prefix too (see
``ECOSYSTEM_ENV``): ``KAFKA_BOOTSTRAP_SERVERS``, ``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``,
``OPENAI_BASE_URL``, ``ELASTICSEARCH_URL``, ``ELASTICSEARCH_API_KEY``, ``OTEL_EXPORTER_OTLP_ENDPOINT``.

Precedence, first found wins: values passed in code (a command's options), ``CYBERJURORS_*``
variables, the settings file, the ecosystem names, the defaults. So anything said to CyberJurors
by name beats a name other tools share: an exported ``KAFKA_BOOTSTRAP_SERVERS`` cannot redirect a
child worker whose parent hands it ``CYBERJURORS_KAFKA_BOOTSTRAP_SERVERS``.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from .errors import install_extra
from .llm.catalog import TokenPrices, facts, find, list_prices
from .schemas.reasoning import ESCALATION_REASONS, EscalationReason

Role = Literal[
    "focus", "select", "perceive", "juror", "summary", "distil", "advocate", "judge", "verify", "draft", "qualify"
]
ROLES: tuple[Role, ...] = get_args(Role)
Provider = Literal["anthropic", "openai", "offline"]
# what a person may do in the console: read; publish decisions; override another's decision; replay dead letters
ConsoleRole = Literal["viewer", "reviewer", "supervisor", "operator"]
CONSOLE_ROLES: tuple[ConsoleRole, ...] = get_args(ConsoleRole)
# what a worker never needs: who may sign in to the console, and how
CONSOLE_SECRETS = ("console_token", "console_users", "console_user_roles", "console_group_roles", "console_tls_key")
PROVIDERS: tuple[Provider, ...] = get_args(Provider)


def split_model(spec: str) -> tuple[Provider | None, str]:
    """``"openai:gpt-5-mini"`` -> ("openai", "gpt-5-mini"); a name without a known provider prefix
    (``"claude-sonnet-5-5"``, or Ollama's ``"qwen2.5vl:7b"``) -> (None, the name): the default backend's."""
    provider, sep, name = spec.partition(":")
    if sep and name and provider in PROVIDERS:
        return provider, name
    return None, spec


SETTINGS_FILE_ENV = "CYBERJURORS_SETTINGS_FILE"


ENV_PREFIX = "CYBERJURORS_"
# ecosystem variable -> setting; read after CYBERJURORS_* and the settings file (see the module docstring)
ECOSYSTEM_ENV: dict[str, str] = {
    "KAFKA_BOOTSTRAP_SERVERS": "kafka_bootstrap_servers",
    "ANTHROPIC_API_KEY": "anthropic_api_key",
    "OPENAI_API_KEY": "openai_api_key",
    "OPENAI_BASE_URL": "openai_base_url",
    "ELASTICSEARCH_URL": "elasticsearch_url",
    "ELASTICSEARCH_API_KEY": "elasticsearch_api_key",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "otlp_endpoint",
}


class EcosystemEnvSource(PydanticBaseSettingsSource):
    """The ecosystem names, as they are (no prefix, exact case); an empty one counts as unset."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        for env, name in ECOSYSTEM_ENV.items():
            if name == field_name and os.environ.get(env):
                return os.environ[env], field_name, False
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        return {name: os.environ[env] for env, name in ECOSYSTEM_ENV.items() if os.environ.get(env)}


# Dated, sourced list prices (llm/catalog.py); ``llm_prices`` replaces the whole table when set.
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


class RoleCall(BaseModel):
    """How one role's model calls are made. A field left unset takes the ``llm_*`` setting of the
    same name when that is set, else the role's built-in value (``ROLE_CALLS``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    effort: Effort | None = None
    thinking: Thinking | None = None
    thinking_budget: int | None = Field(None, ge=0, le=64_000)
    max_output_tokens: int | None = Field(None, ge=1, le=64_000)


# Thinking tokens count toward a reply's max_tokens, so a call asks for max_output_tokens (the
# structured answer) + thinking_budget unless thinking is off: 2,048 + 4,096 leaves a reply that
# thinks 2,000 tokens room for a ballot several times over. Effort follows the work: picking one
# item or summarising ballots needs little, the judge's single ruling the most; distil's answer is
# a list of guidelines for up to 8 cases. The verifier checks every claim of a justification against
# the clues (medium); a JURIS drafter restates the majority's reasons as sentences (low), which the
# jurors and the verifier then check.
_BASE_CALL: dict[str, Any] = {
    "effort": "medium",
    "thinking": "auto",
    "thinking_budget": 4096,
    "max_output_tokens": 2048,
}
_ROLE_OVERRIDES: dict[str, dict[str, Any]] = {
    "focus": {},
    "select": {"effort": "low", "max_output_tokens": 1024},
    "perceive": {},
    "juror": {},
    "summary": {"effort": "low"},
    "distil": {"max_output_tokens": 4096},
    "advocate": {},
    "judge": {"effort": "high"},
    "verify": {},
    "draft": {"effort": "low"},
    "qualify": {},  # a mock-case ballot: a juror's call, so a juror's room and effort
}
ROLE_CALLS: dict[str, RoleCall] = {role: RoleCall(**(_BASE_CALL | over)) for role, over in _ROLE_OVERRIDES.items()}
GLOBAL_CALL = {
    "effort": "llm_effort",
    "thinking": "llm_thinking",
    "thinking_budget": "llm_thinking_budget",
    "max_output_tokens": "max_output_tokens",
}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    # --- Kafka -----------------------------------------------------------------------------
    kafka_bootstrap_servers: str = "127.0.0.1:9092"
    kafka_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    kafka_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "PLAIN"
    kafka_sasl_username: str | None = None
    kafka_sasl_password: str | None = None
    kafka_ssl_cafile: Path | None = None
    kafka_ssl_certfile: Path | None = None
    kafka_ssl_keyfile: Path | None = None
    topic_prefix: str = ""
    partitions: int = Field(4, ge=1)
    replication_factor: int = Field(1, ge=1)
    app_id: str = "cyberjurors"
    datadir: Path = Path("data/faust")
    # Short timeouts suit the embedded broker and tests; raise them on a real cluster.
    session_timeout_s: float = 10.0
    heartbeat_interval_s: float = 1.0
    commit_interval_s: float = 1.0
    kafka_fetch_max_wait_ms: int = Field(
        50,
        ge=1,
        description="how long an empty fetch waits at the broker; the embedded broker never answers "
        "early, so each topic hop costs up to this. On Apache Kafka 500 saves requests",
    )
    # Faust's exactly-once needs Kafka transactions; the embedded broker has none.
    processing_guarantee: Literal["at_least_once", "exactly_once"] = "at_least_once"
    stage_concurrency: int = Field(8, ge=1, description="cases each stage agent works on at once")
    web_port: int | None = Field(None, description="Faust's web server port; off when unset")

    # --- Broker faults (issue 11): a worker that lost its broker exits for its supervisor ----------
    broker_loss_exit_s: float = Field(
        30.0,
        gt=0,
        description="a worker that cannot reach its broker this long exits with status 75; one whose "
        "broker lost its topics or answers as another cluster exits at once",
    )
    broker_check_interval_s: float = Field(2.0, gt=0, description="how often a worker reads its broker's metadata")
    stop_deadline_s: float = Field(
        15.0, gt=0, description="after SIGTERM or SIGINT, a worker not yet stopped exits at once with status 124"
    )

    # --- LLM -------------------------------------------------------------------------------
    llm_backend: Literal["auto", "anthropic", "openai", "offline"] = "auto"
    anthropic_api_key: str | None = None
    anthropic_base_url: str | None = None
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    model: str = "claude-sonnet-5-5"
    model_focus: str | None = None
    model_select: str | None = None
    model_perceive: str | None = None
    model_juror: str | None = None
    model_summary: str | None = None
    model_distil: str | None = None
    model_advocate: str | None = None
    model_judge: str | None = None
    model_verify: str | None = None
    model_draft: str | None = None
    juror_models: list[str] = Field(
        default_factory=list,
        description="spread jurors over these models, round robin; any model setting may name "
        "its provider: anthropic:NAME, openai:NAME (OPENAI_BASE_URL), offline:NAME",
    )
    # Effort and thinking (issue 13): unset (None), each role takes its own value from ROLE_CALLS.
    max_output_tokens: int | None = Field(
        None,
        ge=1,
        le=64_000,
        description="room for the structured answer itself, thinking not included; "
        "unset = 2048 (select 1024, distil 4096)",
    )
    llm_effort: Effort | None = Field(
        None,
        description="output_config.effort (reasoning_effort on openai reasoning models, one of "
        "openai_reasoning_efforts) for every role; unset = medium (select and summary low, judge "
        "high); sent only to models that take it",
    )
    llm_thinking: Thinking | None = Field(
        None,
        description="auto (unset) = the model's default, with room kept for it; adaptive; budget = "
        "{type: enabled, budget_tokens}; off = the model's way to turn it off (openai reasoning "
        "models: the lowest of openai_reasoning_efforts; budget is refused there)",
    )
    llm_thinking_budget: int | None = Field(
        None,
        ge=0,
        le=64_000,
        description="tokens of max_tokens kept for thinking (budget_tokens in budget mode, "
        "at least 1024 there); unset = 4096",
    )
    llm_roles: dict[Role, RoleCall] = Field(
        default_factory=dict, description="per role: effort, thinking, thinking_budget, max_output_tokens"
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
        "and llm_thinking=off sends the lowest of them",
    )
    llm_concurrency: int = Field(16, ge=1, description="LLM calls in flight per worker")
    llm_tokens_per_minute: int | None = Field(None, description="input-token rate limit per worker")
    llm_timeout_s: float = 120.0
    llm_max_retries: int = 4
    offline_latency_s: float = Field(0.0, ge=0, description="simulated per-call latency (offline backend)")
    llm_call_log: Path | None = Field(None, description="append one JSON line per LLM call")
    # --- eval --batch: the Message Batches API (backends/batch.py, evaluation/batch.py) ---------------
    batch_poll_s: float = Field(
        30.0, gt=0, description="eval --batch: seconds between status checks of a Message Batch"
    )
    batch_max_wait_s: float = Field(
        90_000.0,
        gt=0,
        description="eval --batch: seconds a Message Batch is polled "
        "before the run stops (the same command resumes): a little over the API's "
        "24-hour processing limit",
    )
    batch_retry_s: float = Field(
        600.0,
        gt=0,
        description="eval --batch: seconds a status check or a result "
        "download is tried again on connection errors and 5xx, with backoff",
    )
    batch_max_attempts: int = Field(
        3,
        ge=1,
        description="eval --batch: batches an entry may be sent in; an errored "
        "(retryable) or expired entry goes again in the next one",
    )
    batch_max_cases: int = Field(
        500,
        ge=1,
        description="eval --batch: cases judged side by side in one set of waves "
        "(bounds memory; a larger set means fewer, larger batches)",
    )

    # --- Per-case budget (issue 13): a ceiling checked between steps, never a silent truncation ----
    # 0 = off (not None: a child worker gets its settings as env vars, where None would be left out
    # and the default come back)
    case_token_budget: int = Field(
        400_000,
        ge=0,
        description="tokens of every kind (input, output, cache read and write) one case may use; "
        "once reached, no further select step or jury round starts: the verdict is the "
        "last round's majority, marked budget_reached. 0 = off",
    )
    case_cost_budget_usd: float = Field(
        0.0, ge=0, description="the same ceiling in estimated USD (llm_prices); 0 = off"
    )

    # --- Recourse (issue 14): escalation to human jurors, appeals ------------------------------
    escalation_margin: float = Field(
        5,
        ge=0,
        description="escalate a verdict whose vote margin, on the 17-vote scale, is below this (5: 9:8 and "
        "10:7); 0 = never for the margin",
    )
    escalate_on: list[EscalationReason] = Field(
        default_factory=lambda: list[EscalationReason](r for r in ESCALATION_REASONS if r != "low_precedent_coverage"),
        description="which reasons escalate a verdict to disputes.escalations: narrow_margin, low_precedent_coverage, "
        "no_precedent_coverage (both only with a precedent base configured), verification_failed, "
        "injection, decisive_evidence_unreadable, budget_reached; [] = never",
    )
    appeal_window_s: float = Field(
        30 * 86400,
        ge=0,
        description="how long after a first-instance verdict its loser may appeal (eBay: 30 days); "
        "a decided case's state is kept at least this long; 0 = appeals off",
    )
    appeal_jurors: int = Field(31, ge=1, description="the second instance's panel (Taobao's appeal panels: 31)")
    clock_skew_s: float = Field(
        300,
        ge=0,
        description="how far the platform's clocks may be from ours: an appeal filed (filed_at, the "
        "platform's clock) up to this long before its verdict was decided (decided_at, ours) "
        "is taken as filed after it; earlier, it is refused (appeal_before_verdict)",
    )

    # --- Metrics ---------------------------------------------------------------------------
    metrics_port: int = Field(
        9464,
        ge=0,
        le=65535,
        description="each worker serves Prometheus metrics on http://host:port/metrics; 0 (or None) = off",
    )
    metrics_host: str = Field(
        "127.0.0.1",
        description="address the metrics endpoint listens on: this machine only unless set "
        "(0.0.0.0 in a pod or container, where Prometheus scrapes it from outside)",
    )
    # --- Probes and consumer lag (issue 12) --------------------------------------------------
    probe_port: int = Field(
        9465,
        ge=0,
        le=65535,
        description="each worker answers /livez, /readyz and /startupz on http://host:port, "
        "from its event loop; 0 (or None) = off",
    )
    probe_host: str = Field(
        "127.0.0.1",
        description="address the probe endpoints listen on: this machine only unless set "
        "(0.0.0.0 in a pod, where the kubelet calls them)",
    )
    lag_interval_s: float = Field(
        15.0,
        ge=0,
        description="how often a worker reads its consumer group's lag from the broker "
        "(cyberjurors_consumer_lag, with the metrics endpoint); 0 = never",
    )
    llm_prices: dict[str, TokenPrices] = Field(
        default_factory=lambda: dict(DEFAULT_LLM_PRICES),
        description="USD per million tokens by model (exact name, or a prefix of it) and kind: "
        "input, output, cache_read, cache_write. Setting it replaces the whole table. "
        "Unlisted models cost 0 (counted in cyberjurors_llm_unpriced_calls_total); "
        "the offline backend always costs 0",
    )
    drift_reference_seller_share: float = Field(
        0.626,
        ge=0,
        le=1,
        description="the seller-win share verdicts are expected to show (the paper's data: "
        "62.6%); exported as cyberjurors_seller_win_share_reference for the "
        "recording rules: set it alike on every worker",
    )

    # --- Tracing and logs (issue 12) ---------------------------------------------------------
    otlp_endpoint: str | None = Field(
        None,
        description="base URL of an OTLP/HTTP receiver (an OpenTelemetry collector, e.g. "
        "http://otel-collector:4318): spans go to <url>/v1/traces. Unset = tracing off (a no-op "
        "tracer; trace context a message arrives with is still passed on)",
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        description="json = one JSON object per line (time, level, logger, message, and case_id, stage, "
        "trace_id, span_id where known), Faust's and the Kafka client's lines included",
    )
    log_redact_pii: bool = Field(False, description="replace e-mail addresses and phone numbers in log messages")

    # --- Method (paper defaults) -----------------------------------------------------------
    jurors: int = Field(17, ge=1, description="N")
    rounds: int = Field(3, ge=1, description="T, discussion rounds")
    focus_stage: bool = Field(True, description="stage I, focus extraction; off = jurors read the raw case")
    max_select_steps: int = Field(
        3,
        ge=0,
        description="T_max, select-perceive steps per party; 1 = SR-CoT's single-step selection; "
        "0 = stage II off: jurors get every item at once, media attached (passive perception)",
    )
    passive_frames_per_video: int = Field(8, ge=1, description="frames per video attached when stage II is off")
    memory_k: int = Field(3, ge=0, description="K, guidelines per juror memory (read once precedents land)")
    early_stop: float = Field(0.8, gt=0.5, le=1.0, description="delta, majority share that ends deliberation")
    early_stopping: bool = Field(True, description="off = always deliberate all T rounds")
    round_summary: bool = Field(
        True,
        description="F_sum: a summary call after each round; off = jurors see only the jurors they follow, "
        "and the verdict's justification is the majority's first ballot",
    )
    social_graph: Literal["small_world", "complete"] = Field(
        "small_world", description="who follows whom; complete = everyone reads everyone (ChatEval's simultaneous talk)"
    )
    verdict_rules: bool = Field(True, description="the platform's verdict rules in the juror prompt (+Rules)")
    verdict_rules_file: Path | None = Field(None, description="your platform's rules; default: the packaged ones")
    deliberation: Literal["jury", "court"] = Field(
        "jury", description="jury = JCV; court = an AgentsCourt-style debate of two advocates, then one judge"
    )
    court_rounds: int = Field(2, ge=1, description="debate turns per advocate (deliberation=court)")
    # --- Trust (issue 14): the justification verified, or voted by the jury --------------------
    verifier: bool = Field(
        False,
        description="after the final round a verifier checks that every factual claim of the verdict's "
        "justification traces to a perceived clue or a cited guideline (Pass / Reject with "
        "feedback; the summariser revises, up to verifier_max_turns); off: no verify calls "
        "(the paper's method has none)",
    )
    verifier_max_turns: int = Field(
        3,
        ge=1,
        description="T_max: verifier calls per verdict; a justification still rejected after them has "
        "its untraceable claims removed (verification failed)",
    )
    justification: Literal["summary", "juris"] = Field(
        "summary",
        description="summary = the final round's summary S_T (the paper); juris = two drafters propose "
        "sentences, juris_voters jurors vote on each, an editor consolidates the accepted "
        "ones, and the verifier checks the result (JURIS: always verified)",
    )
    juris_voters: int = Field(
        5,
        ge=1,
        description="jurors (seats 0..K-1) who vote on JURIS's candidate sentences: "
        "the JURIS paper's K = 5; capped at the jury's size",
    )
    juris_max_sentences: int = Field(6, ge=1, description="candidate sentences kept per JURIS drafter")
    juris_drafter_models: list[str] = Field(
        default_factory=list,
        description="the two JURIS drafters' models (drafter i gets entry i mod the length); "
        "empty = both on model_draft (or model)",
    )
    per_juror_stages: bool = Field(
        False, description="naive baseline for cost benchmarks: every juror re-runs stages I-II itself in every round"
    )
    prompt_caching: bool = Field(True, description="mark the per-case shared prefix cacheable at the provider")
    prompt_cache_ttl: Literal["5m", "1h"] = Field(
        "5m",
        description="how long a cached prefix lives; 1h where a case's calls may be further apart (eval uses "
        "1h unless this is set)",
    )
    warm_cache_first: bool = Field(
        True,
        description="in round 1, one juror runs before the others so they read the cached case prefix; in "
        "stage II, the buyer's first selection runs before the seller's chain so the seller's "
        "selector reads the prefix it wrote (only where that prefix is marked cacheable)",
    )
    graph_out_degree: int = Field(4, ge=0, description="accounts each juror follows")
    graph_rewire_p: float = Field(0.2, ge=0, le=1)
    graph_seed: int = 7
    personas_file: Path | None = None
    # --- Juror qualification (issue 15): mock cases from the precedent base before a persona serves ---
    qualification: Literal["off", "report", "replace", "reweight"] = Field(
        "off",
        description="off = the paper's unvetted jury; report = qualify every persona at worker start and say "
        "so, change nothing; replace = a failing persona's seat goes to the first qualified reserve "
        "of personas_file; reweight = a failing persona's ballot counts less in the verdict's "
        "majority (see README, Juror qualification)",
    )
    qualification_cases: int = Field(12, ge=2, le=200, description="K mock cases per persona, half won by each side")
    qualification_min_accuracy: float = Field(
        0.6, ge=0, le=1, description="below this share of mock cases decided as the real jury did, a persona fails"
    )
    qualification_max_bias: float = Field(
        0.25,
        ge=0,
        le=1,
        description="a persona whose seller-vote share on the mock cases differs from their "
        "labelled seller share by more than this fails",
    )

    # --- Precedents (B = <H, N>) -------------------------------------------------------------
    precedent_backend: Literal["embedded", "elasticsearch", "none"] = "embedded"
    precedent_dir: Path = Field(Path("data/precedents"), description="the embedded index's folder")
    embedding_model: str = Field(
        "all-MiniLM-L6-v2",
        description="the sentence-embedding model, recorded with "
        "the vectors (an index built with another refuses to open)",
    )
    embedding_runtime: Literal["numpy", "sentence-transformers"] = Field(
        "numpy",
        description="numpy = BERT models such as the default, no torch; sentence-transformers = any "
        "sentence-transformers model (the torch extra), from embedding_model_dir or the local "
        "Hugging Face cache",
    )
    embedding_model_dir: Path | None = Field(
        None,
        description="the folder holding the model's files (a platform "
        "mounts its vetted copy here); default: where `cyberjurors embedder "
        "fetch` puts it, inside the Python environment",
    )
    embedding_model_sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-fA-F]{64}$",
        description="sha256 of "
        "model.safetensors, checked at load; pinned for all-MiniLM-L6-v2, "
        "needed for any other model on the numpy runtime",
    )
    embedding_batch_size: int = Field(
        32, ge=1, le=1024, description="texts per forward pass (also capped at 4,096 word pieces a pass)"
    )
    elasticsearch_url: str | None = None
    elasticsearch_api_key: str | None = None
    elasticsearch_username: str | None = None
    elasticsearch_password: str | None = None
    elasticsearch_ca_certs: Path | None = None
    elasticsearch_verify_certs: bool = True
    elasticsearch_index_prefix: str = "cyberjurors"
    elasticsearch_timeout_s: float = Field(10.0, description="per request attempt")
    elasticsearch_max_retries: int = Field(2, ge=0, description="the client's retries on 429/502/503/504/timeouts")
    precedent_cases_k: int = Field(5, ge=0, description="top-H historical cases retrieved per case")
    precedent_pool_k: int = Field(12, ge=1, description="guidelines retrieved per case, the pool jurors draw from")
    precedent_min_in_category: int = Field(
        3, ge=0, description="fewer guidelines than this in the category: add cross-category ones, coverage low"
    )
    precedent_retries: int = Field(
        1, ge=0, description="retrieval retries (each with the client's own) before a case goes on without"
    )
    guideline_min_confidence: float = Field(0.2, ge=0, le=1, description="guidelines below this are retired")
    redistil_after: int = Field(20, ge=1, description="confirmed outcomes in a category before it is re-distilled")

    # --- Evidence --------------------------------------------------------------------------
    media_root: Path = Path(".")
    url_allowlist: list[str] = Field(
        default_factory=list,
        description="allowed origins: host (http on 80, https on 443), host:port, or scheme://host[:port]",
    )
    max_text_chars: int = 20_000
    max_media_items: int = 40
    max_inline_bytes: int = 512_000
    max_media_bytes: int = 50_000_000
    frames_per_video: int = Field(30, ge=1)
    # Which frames of a video (issue 15): evenly spaced, or a uniform skeleton plus the clip's visual
    # events (cuts, brief changes), found by decoding up to frame_event_max_frames small frames.
    frame_sampling: Literal["uniform", "events"] = "uniform"
    frame_event_share: float = Field(0.5, ge=0, le=1, description="most of a video's frame budget spent on events")
    frame_event_max_frames: int = Field(1800, ge=2, description="most frames the event pass decodes per video")
    max_image_side: int = Field(768, ge=64, description="images are downscaled to this before the model")
    # Media within bounds (issue 11): every cap is checked from the header before a full decode; an
    # item over a cap is noted on that item ("image_too_large", "video_too_long", ...), never fatal.
    max_image_pixels: int = Field(50_000_000, ge=1, description="width x height an image may declare")
    max_image_dimension: int = Field(16_384, ge=64, description="longest side an image may declare, in pixels")
    max_video_pixels: int = Field(4096 * 2160, ge=1, description="width x height of a video's frames (DCI 4K)")
    max_video_dimension: int = Field(4096, ge=64, description="longest side of a video's frames, in pixels")
    max_video_duration_s: float = Field(600.0, gt=0, description="longest video, by its header and its timestamps")
    max_video_frames: int = Field(36_000, ge=1, description="most frames a video may hold (10 min at 60 fps)")
    media_decode_concurrency: int = Field(2, ge=1, description="image and video decodes at once per process")
    media_fetch_timeout_s: float = Field(30.0, gt=0, description="one deadline for a URL fetch, body included")
    max_url_redirects: int = Field(
        3, ge=0, description="redirects followed by a URL fetch, each target checked against url_allowlist again"
    )

    # --- Sizes (issue 11): every message a worker sends fits the broker's limit ---------------
    # Kafka's broker message.max.bytes / topic max.message.bytes default to 1 MiB (1,048,588); keep
    # max_event_bytes below whatever your cluster sets. The producers allow it plus record overhead.
    max_event_bytes: int = Field(
        1_000_000,
        ge=16_384,
        description="largest message taken or sent: a bigger event "
        "is dead-lettered (event_too_large), a bigger stage output too (output_too_large)",
    )
    max_case_bytes: int = Field(
        400_000,
        ge=4_096,
        description="the case file at admission (inline media moved to "
        "the media store); the rest of max_event_bytes is room for what the stages add",
    )
    media_store: str = Field(
        "data/media",
        description="content-addressed store for inline media and dead-letter "
        "originals too large to carry: a folder or file:// URL, or an object store by URL "
        "(s3://bucket/prefix, gs://, az://, memory://) through fsspec",
    )
    # A stored object must outlive everything that can still name it: the case it came with (its stage
    # inputs are processed up to state_retention_s after admission) and the dead letters written for
    # it, which `dlq --replay` may send back for as long as disputes.dlq keeps them.
    dlq_retention_s: float = Field(
        7 * 86400,
        gt=0,
        description="retention.ms given to disputes.dlq when it is created (Kafka's default, "
        "7 days): how long a dead letter can be replayed",
    )
    media_retention_s: float | None = Field(
        None,
        gt=0,
        description="a media store object is deleted this long (at most a day more) after the last "
        "put or reference that named it; default state_retention_s + dlq_retention_s; "
        "never below either",
    )
    media_sweep_interval_s: float = Field(3600.0, gt=0, description="how often a worker deletes expired media")

    # --- State that expires (issue 11): tables hold cases in flight plus a retention, no more ---
    state_retention_s: float = Field(
        7 * 86400,
        gt=0,
        description="a case's stored verdict and admitted case file (what outcomes and "
        "redeliveries read) are deleted this long after its last stage result; "
        "keep it >= the pipeline topics' retention.ms (Kafka's default: 7 days)",
    )
    state_sweep_interval_s: float = Field(60.0, gt=0, description="how often a worker deletes expired state")
    table_store: Literal["memory", "rocksdb"] = Field(
        "memory",
        description="memory = tables rebuilt from their changelogs at start (the embedded default); "
        "rocksdb = on local disk under datadir (production), recovery reads only what is new",
    )
    rocksdb_partition_mb: int = Field(
        16,
        ge=2,
        description="rocksdb: memory one table partition's database may hold, half in its write "
        "buffers (two memtables), half in its block cache; a worker holds up to this x 4 "
        "tables x its partitions (Faust's defaults: 192 MB of memtables and a 2 GB cache each)",
    )

    # --- Intake that keeps everything (issue 11): early evidence, abandoned drafts, case caps ---
    early_evidence_wait_s: float = Field(
        300.0,
        gt=0,
        description="evidence (or evidence_closed) for a case not yet opened is held this long after "
        "the case's first such event, then dead-lettered (case_never_opened, replayable); "
        "checked every state_sweep_interval_s",
    )
    early_evidence_per_case: int = Field(
        21,
        ge=1,
        description="events held per unopened case; more are dead-lettered (early_evidence_overflow, replayable)",
    )
    early_evidence_total: int = Field(10_000, ge=1, description="events held per worker across unopened cases")
    intake_draft_ttl_s: float = Field(
        7 * 86400,
        gt=0,
        description="an incremental case whose evidence is not closed this long after its last event "
        "is dead-lettered (draft_expired, with what was received) and forgotten",
    )
    max_rounds_per_party: int = Field(10, ge=1, description="evidence rounds one party may submit in a case")
    max_case_text_chars: int = Field(60_000, ge=1, description="all evidence text and captions of a case together")
    # each item costs its tags and ids in every juror's prompt whatever its text: 7,000 one-character
    # items (within the text cap and max_case_bytes) cost 2.3M tokens against a normal case's 74k
    max_case_items: int = Field(200, ge=1, description="evidence items of a case, both parties' rounds together")

    # --- Console (issue 16): the web console for operations staff, human jurors and auditors ---
    console_host: str = Field("127.0.0.1", description="address `cyberjurors console` listens on")
    console_port: int = Field(8080, ge=1, le=65535, description="its port")
    console_db: Path = Field(
        Path("data/console.sqlite3"),
        description="the console's SQLite store: what it read from the topics, its offsets, the decisions made in it",
    )
    console_users: dict[str, str] = Field(
        default_factory=dict,
        description="people who sign in with a password: user name -> its argon2 hash "
        "(`cyberjurors console-password` makes one; a plain password is refused)",
    )
    console_user_roles: dict[str, list[ConsoleRole]] = Field(
        default_factory=dict,
        description="user name -> roles (viewer, reviewer, supervisor, operator); a signed-in "
        "person with none named here, and none from an SSO group, is a viewer",
    )
    console_group_roles: dict[str, list[ConsoleRole]] = Field(
        default_factory=dict, description="SSO group (from console_sso_groups_header) -> roles"
    )
    console_token: str | None = Field(
        None,
        description="a service token for scripts (Authorization: Bearer): it acts as itself "
        "(actor `service`), never as a named person, with console_token_roles",
    )
    console_token_roles: list[ConsoleRole] = Field(["viewer"], description="what the service token may do")
    console_trusted_proxies: list[str] = Field(
        default_factory=list,
        description="addresses or networks (CIDR) of the single-sign-on proxy in front of the console "
        "(oauth2-proxy, an ingress with OIDC): only from these is console_sso_user_header believed; "
        "empty = no SSO",
    )
    console_sso_user_header: str = Field(
        "X-Forwarded-User", description="the header in which the trusted proxy names the signed-in person"
    )
    console_sso_groups_header: str = Field(
        "X-Forwarded-Groups", description="the header with that person's groups, comma-separated"
    )
    console_behind_proxy: bool = Field(
        False,
        description="a proxy in front terminates TLS: cookies are Secure (__Host-), and a bind to a "
        "non-loopback address is allowed without console_tls_cert",
    )
    console_tls_cert: Path | None = Field(None, description="certificate (PEM) the console serves HTTPS with")
    console_tls_key: Path | None = Field(None, description="its private key (PEM)")
    console_session_ttl_s: float = Field(
        8 * 3600, gt=0, description="a console session ends this long after sign-in, whatever its use"
    )
    console_session_idle_s: float = Field(3600, gt=0, description="...or after this long unused")
    console_signin_max_failures: int = Field(
        5,
        ge=1,
        description="wrong passwords for one user name (or 4x as many from one address) within "
        "console_signin_lockout_s before sign-in is locked for that long, the right password included",
    )
    console_signin_lockout_s: float = Field(900, gt=0, description="the sign-in lockout's window and length")
    console_max_body_bytes: int = Field(
        65_536, ge=1024, description="a request body over this is refused (413) before it is read"
    )
    console_public_pages: bool = Field(
        False,
        description="the pages that only show open without signing in (always with --embedded, "
        "which serves on loopback only); every action still needs a person with its role",
    )
    outcome_signing_key: str | None = Field(
        None,
        description="the key (32+ characters) the console signs human-panel decisions with and workers "
        "verify them by: a human-panel outcome without a valid signature is a dead letter and changes nothing",
    )
    outcome_previous_keys: list[str] = Field(
        default_factory=list, description="keys still accepted while a new outcome_signing_key rolls out"
    )
    audit_topic_retention_s: float | None = Field(
        None,
        description="how long disputes.audit keeps entries; unset = kept for good (compacted on each "
        "entry's own id, so nothing is dropped)",
    )

    def for_worker(self) -> Settings:
        """These settings without what only the console needs (who may sign in, and how): a worker
        child process is handed no one's password hash and no service token. It keeps
        outcome_signing_key, which it verifies human-panel decisions with."""
        return self.model_copy(
            update={
                name: Settings.model_fields[name].get_default(call_default_factory=True) for name in CONSOLE_SECRETS
            }
        )

    @field_validator("console_users")
    @classmethod
    def _hashed(cls, users: dict[str, str]) -> dict[str, str]:
        plain = sorted(name for name, value in users.items() if not value.startswith("$argon2"))
        if plain:
            raise ValueError(
                f"console_users: {', '.join(plain)} has a plain password, not an argon2 hash: "
                "make one with `cyberjurors console-password` and set that instead"
            )
        return users

    @field_validator("outcome_signing_key", "outcome_previous_keys")
    @classmethod
    def _long_enough(cls, key: str | list[str] | None) -> str | list[str] | None:
        keys = [key] if isinstance(key, str) else key or []
        if any(len(k) < 32 for k in keys):
            raise ValueError("an outcome signing key has 32 characters at least (`openssl rand -base64 32`)")
        return key

    @field_validator("metrics_port", "probe_port", mode="before")
    @classmethod
    def _port_off(cls, port: object) -> object:
        # stored as 0, not None: a child worker gets settings as env vars, where None would be left
        # out and the default port come back
        return 0 if port is None or port == "" else port

    @field_validator("case_token_budget", "case_cost_budget_usd", mode="before")
    @classmethod
    def _budget_off(cls, value: object) -> object:
        return 0 if value is None or value == "" else value

    @model_validator(mode="after")
    def _backend(self) -> Settings:
        if self.llm_backend == "anthropic" and not self.anthropic_api_key:
            raise ValueError("llm_backend=anthropic needs ANTHROPIC_API_KEY")
        if self.precedent_backend == "elasticsearch" and not self.elasticsearch_url:
            raise ValueError("precedent_backend=elasticsearch needs ELASTICSEARCH_URL")
        if self.llm_backend == "openai" and not self.openai_base_url:
            raise ValueError("llm_backend=openai needs OPENAI_BASE_URL (an OpenAI-compatible endpoint)")
        named = self.providers_named()
        if "anthropic" in named and not self.anthropic_api_key:
            raise ValueError("a model named anthropic:... needs ANTHROPIC_API_KEY")
        if "openai" in named and not self.openai_base_url:
            raise ValueError("a model named openai:... needs OPENAI_BASE_URL (an OpenAI-compatible endpoint)")
        if self.max_case_bytes >= self.max_event_bytes:
            raise ValueError("max_case_bytes must be below max_event_bytes: the stages add to the case file")
        if self.media_retention_s is not None and self.media_retention_s < max(
            self.state_retention_s, self.dlq_retention_s
        ):
            raise ValueError(
                "media_retention_s must be at least state_retention_s and dlq_retention_s: a case or "
                "a dead letter would name media already deleted"
            )
        self._check_thinking()
        self._check_cost_budget()
        self._check_extras()
        return self

    def _check_extras(self) -> None:
        """A configured feature whose extra is not installed: refused here in one line, not as an
        ImportError from deep inside a worker."""
        wanted = [
            ("table_store=rocksdb", self.table_store == "rocksdb", "rocksdict", "rocksdb"),
            (
                "precedent_backend=elasticsearch",
                self.precedent_backend == "elasticsearch",
                "elasticsearch",
                "elasticsearch",
            ),
            (f"media_store={self.media_store}", self.media_store.startswith(("s3://", "s3a://")), "s3fs", "s3"),
            (
                "embedding_runtime=sentence-transformers",
                self.embedding_runtime == "sentence-transformers",
                "sentence_transformers",
                "torch",
            ),
        ]
        for setting, used, module, extra in wanted:
            if used and importlib.util.find_spec(module) is None:
                raise ValueError(f"{setting} needs the {extra} extra: {install_extra(extra)}")

    def _check_cost_budget(self) -> None:
        """A cost ceiling counts a model without a price as free: it would never stop a case."""
        if not self.case_cost_budget_usd:
            return
        unpriced = sorted(
            {
                name
                for provider, name in map(split_model, self.model_specs())
                if (provider or self.backend) != "offline" and find(self.llm_prices, name) is None
            }
        )
        if unpriced:
            raise ValueError(
                f"case_cost_budget_usd needs a price for every model a call may go to; llm_prices has "
                f"none for {', '.join(unpriced)} (add them to llm_prices, or use case_token_budget)"
            )

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
                    f"{role}'s effort (llm_roles, llm_effort) to one of them, or list {call.effort} in "
                    "openai_reasoning_efforts if the model takes it"
                )

    def openai_reasons(self, spec: str) -> bool:
        """Whether calls to this model setting go to the openai backend, as a reasoning model."""
        provider, name = split_model(spec)
        return (provider or self.backend) == "openai" and reasons(name, self.openai_reasoning_models)

    @property
    def media_retention(self) -> float:
        """How long a media store object is kept after its last put (``media_retention_s`` or its default)."""
        if self.media_retention_s is not None:
            return self.media_retention_s
        return self.state_retention_s + self.dlq_retention_s

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

    @property
    def verifies(self) -> bool:
        """Whether the verdict's justification is verified: the verifier is on, or JURIS asks for it."""
        return self.verifier or self.justification == "juris"

    @property
    def clues_stage(self) -> bool:
        """Stage II runs (it needs stage I's focus); off, jurors get every item at once, media attached."""
        return self.focus_stage and self.max_select_steps > 0

    def call_for(self, role: Role) -> RoleCall:
        """The role's effort, thinking, thinking budget and answer room, every field resolved: the
        role's entry in llm_roles, else the llm_* setting, else the role's built-in value."""
        # a mock-case ballot qualifies the juror that will serve: it is made as the juror's unless named
        given = self.llm_roles.get(role) or (self.llm_roles.get("juror") if role == "qualify" else None) or RoleCall()
        builtin = ROLE_CALLS.get(role, ROLE_CALLS["juror"])
        resolved = {}
        for field, setting in GLOBAL_CALL.items():
            for value in (getattr(given, field), getattr(self, setting), getattr(builtin, field)):
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
        return getattr(self, f"model_{role}") or self.model

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # first found wins: code, CYBERJURORS_*, the settings file, then the ecosystem names
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        toml_file = os.environ.get(SETTINGS_FILE_ENV)
        if toml_file:
            if not Path(toml_file).is_file():
                raise FileNotFoundError(f"{SETTINGS_FILE_ENV}={toml_file}: no such settings file")
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_file))
        sources.append(EcosystemEnvSource(settings_cls))
        return tuple(sources)
