"""Prometheus metrics, defined in one place, and the worker's HTTP endpoint.

Everything here is process-wide (prometheus-client's default registry), so one scrape of a
worker shows the pipeline's metrics and Faust's own sensor (``cyberjurors_faust_*``) together.
Labels are small closed sets: backend, model, role, stage, category, winner, kind, reason,
agreement, real_winner.
Never a case id. Names follow Prometheus's conventions: a unit as the last word (``_seconds``,
``_records``, ``_usd``), ``_total`` on counters, ``_ratio`` on a share between 0 and 1, and
``cyberjurors_build_info`` for what runs (docs/renamed.md lists the names this changed).

What counts, and when:

* LLM metrics are recorded once per model call by ``GuardedLLM`` (llm.py), whatever the
  backend. ``model`` is the model the call asked for (the offline and scripted backends report
  their own name), so calls and errors share labels and error rates divide cleanly.
  ``cyberjurors_llm_calls_total`` counts completed calls, answered or failed, as the call log
  does; cancelled calls (a sibling failed) are not counted.
* Verdict metrics are recorded when a verdict is first decided. A replayed case re-sends the
  verdict stored in ``stage_results`` and is not counted again.
* Drift is counters only: verdicts by winner and category, reported outcomes by agreement, real
  winner and category, and the vote error of each outcome. Counters add up across workers and
  survive a restart as a counter reset, so the fleet's seller-win share, outcome accuracy, recall
  and vote MAE are computed by Prometheus recording rules (infra/recording.yml) from
  ``sum by (...) (rate(...))``. An outcome is counted once per case, whichever worker sees it and
  however often it is redelivered (streams/outcome.py keeps the mark in the stage-results table).
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import platform
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, start_http_server

from .. import __version__
from ..schemas import CATEGORIES, CONSISTENCY_OUTCOMES, ESCALATION_REASONS

if TYPE_CHECKING:
    import faust

    from ..schemas import BudgetStop, JuryComposition, PrecedentConsistency, Usage, Verification, Votes

log = logging.getLogger("cyberjurors.metrics")

# Seconds-to-minutes LLM work: a case is a few dozen model calls, partly in parallel.
CASE_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800)
STAGE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
LLM_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)
RETRIEVAL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

STAGES = ("focus", "clues", "rounds", "verdict", "letters")
SIDES = ("buyer", "seller")
# A partition of a call's tokens, so summing every kind gives its total: output is the answer and
# thinking the reasoning (Usage.output_tokens holds both, as providers bill them).
TOKEN_KINDS = ("input", "output", "thinking", "cache_read", "cache_write")

# --- the build -------------------------------------------------------------------------------

BUILD_INFO = Gauge(
    "cyberjurors_build_info",
    "Always 1, labelled with what this process runs: the package version, the git revision it was built from "
    "(unknown when no build recorded one) and the Python version. Multiply or join on instance to label another "
    "series by release, e.g. during a rollout",
    ["version", "revision", "python"],
)
# Where the image build writes the commit it was built from (the Dockerfile's REVISION argument): under
# the environment's prefix, beside the embedding model, because an installed package has no .git to ask.
REVISION_FILE = Path(sys.prefix) / "share" / "cyberjurors" / "revision"
UNKNOWN = "unknown"


def revision_of(revision_file: Path, direct_url: str | None) -> str:
    """The git commit an install was built from: the image build's file, else the commit pip recorded
    for an install from a git URL (PEP 610's ``direct_url.json``, its ``vcs_info.commit_id``), else
    ``unknown`` (a source checkout installed with ``pip install -e .`` records none)."""
    try:
        written = revision_file.read_text(encoding="utf-8").strip()
    except OSError:
        written = ""
    if written and written != UNKNOWN:
        return written
    try:
        commit = json.loads(direct_url or "{}").get("vcs_info", {}).get("commit_id")
    except (ValueError, AttributeError):  # a damaged or foreign record says nothing about the commit
        commit = None
    return commit if isinstance(commit, str) and commit else UNKNOWN


def build_labels() -> dict[str, str]:
    """The labels of ``cyberjurors_build_info`` for this process."""
    try:
        direct_url = importlib.metadata.distribution("cyberjurors").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        direct_url = None
    return {
        "version": __version__,
        "revision": revision_of(REVISION_FILE, direct_url),
        "python": platform.python_version(),
    }


# --- latency ---------------------------------------------------------------------------------

CASE_LATENCY = Histogram(
    "cyberjurors_case_latency_seconds",
    "From intake (CaseFile.received_at) to the verdict, for cases first decided here",
    ["category"],
    buckets=CASE_BUCKETS,
)
STAGE_LATENCY = Histogram(
    "cyberjurors_stage_latency_seconds",
    "Time a stage spent working on a case (not the time the case waited in Kafka); every "
    "deliberation round is stage=rounds",
    ["stage"],
    buckets=STAGE_BUCKETS,
)

# --- LLM calls -------------------------------------------------------------------------------

LLM_CALLS = Counter(
    "cyberjurors_llm_calls_total",
    "Model calls completed (answered or failed), as in the call log",
    ["backend", "model", "role"],
)
LLM_ERRORS = Counter(
    "cyberjurors_llm_errors_total",
    "Model calls that failed after the provider SDK's retries, by LLMError kind",
    ["backend", "model", "role", "kind"],
)
LLM_LATENCY = Histogram(
    "cyberjurors_llm_latency_seconds",
    "Model call latency including the SDK's retries, failed calls included (excludes waiting for "
    "a concurrency slot or the token rate limit)",
    ["backend", "model", "role"],
    buckets=LLM_BUCKETS,
)
LLM_RETRIES = Counter(
    "cyberjurors_llm_retries_total",
    "HTTP retries the provider SDK made (429, 5xx, 529, timeouts)",
    ["backend", "model"],
)
LLM_TOKENS = Counter(
    "cyberjurors_llm_tokens_total",
    "Tokens the backend reported: input (uncached), output (the answer), thinking (reasoning, billed as "
    "output), cache_read, cache_write; the kinds do not overlap",
    ["backend", "model", "role", "kind"],
)
LLM_COST = Counter(
    "cyberjurors_llm_cost_usd_total",
    "Estimated spend in USD, by where the prices came from (price_source): catalog (the dated list "
    "prices), llm_prices (set by the operator), genai-prices (its bundled list, for models neither has), "
    "stand-in (offline: 0), unpriced (no price anywhere: 0 here, counted in cyberjurors_llm_unpriced_calls_total)",
    ["backend", "model", "role", "price_source"],
)
LLM_UNPRICED = Counter(
    "cyberjurors_llm_unpriced_calls_total",
    "Calls to a model no price source knows (llm_prices, genai-prices): left out of the cost, so spend is "
    "under-reported",
    ["backend", "model"],
)

LLM_STRUCTURED_OUTPUT = Gauge(
    "cyberjurors_llm_structured_output",
    "1 for the structured-output mode an OpenAI-compatible server took for a model (json_schema, "
    "json_object_schema, tool, prompt: openai_structured_output), 0 for one it took before",
    ["backend", "model", "mode"],
)

# --- cases and verdicts ----------------------------------------------------------------------

CASES_IN_FLIGHT = Gauge(
    "cyberjurors_cases_in_flight",
    "Cases admitted and not yet decided or dead-lettered, on this worker's partitions",
)
SEALED_UNREADABLE = Counter(
    "cyberjurors_sealed_unreadable_total",
    "Sealed records read that nothing opens (payload_encryption), by topic and why: case_erased (its "
    "key destroyed: dropped on purpose), sealed_unknown_key, sealed_tampered",
    ["topic", "reason"],
)
VERDICTS = Counter(
    "cyberjurors_verdicts_total",
    "First-instance verdicts first decided here (an appeal's are cyberjurors_appeal_verdicts_total)",
    ["winner", "category"],
)
VOTE_MARGIN = Histogram(
    "cyberjurors_vote_margin",
    "|seller - buyer| votes of a verdict (a narrow split is a weak verdict)",
    buckets=(1, 3, 5, 7, 9, 11, 13, 15, 17),
)
ROUNDS_USED = Histogram("cyberjurors_rounds_used", "Deliberation rounds a verdict took", buckets=(1, 2, 3, 4, 5))
EARLY_STOPS = Counter(
    "cyberjurors_early_stops_total", "Verdicts reached before the last round (majority share >= early_stop)"
)
BUDGET_STOPS = Counter(
    "cyberjurors_budget_stops_total",
    "Verdicts the per-case budget cut short, by the limit reached (tokens, cost) and where: clues = select "
    "steps skipped, round = deliberation stopped with the last round's majority, verdict = verification or JURIS "
    "skipped or cut short (a case can count at several)",
    ["limit", "stage"],
)
BALLOTS = Counter(
    "cyberjurors_ballots_total",
    "Final-round ballots of verdicts first decided here, by the model the juror seat was given, its vote and the "
    "verdict's majority (vote share and agreement with the majority per model)",
    ["model", "vote", "majority"],
)
# tier, not "instance": Prometheus gives every scraped series an instance label of its own
TIERS = {1: "first", 2: "appeal"}
ESCALATIONS = Counter(
    "cyberjurors_escalations_total",
    "Verdicts first decided here and escalated to disputes.escalations, once per reason (a verdict with two reasons "
    "counts under both), by tier (first instance, or appeal)",
    ["reason", "tier"],
)
ESCALATED_VERDICTS = Counter(
    "cyberjurors_escalated_verdicts_total",
    "Verdicts first decided here and escalated, whatever the reasons",
    ["tier"],
)
APPEALS = Counter(
    "cyberjurors_appeals_total",
    "Appeals accepted for a second instance (refused ones are dead letters at stage appeal), by the appellant",
    ["appellant"],
)
APPEAL_VERDICTS = Counter(
    "cyberjurors_appeal_verdicts_total",
    "Second-instance verdicts first decided here: reversed (the appellant won) or upheld",
    ["result"],
)
HUMAN_DECISIONS = Counter(
    "cyberjurors_human_decisions_total",
    "Outcomes a human panel reported (source human_panel) for an escalated verdict, by agreement with it",
    ["agreement"],
)
VERIFICATIONS = Counter(
    "cyberjurors_verifications_total",
    "Verdict justifications verified (verifier or JURIS on), by outcome: passed within verifier_max_turns, or "
    "failed (still rejected; its untraceable sentences removed)",
    ["status"],
)
VERIFIER_TURNS = Histogram(
    "cyberjurors_verifier_turns",
    "Verifier calls a verified justification took (1 = accepted as first drafted)",
    buckets=(1, 2, 3, 4, 5, 8),
)
CLAIMS_REMOVED = Counter(
    "cyberjurors_verifier_claims_removed_total",
    "Untraceable sentences removed from justifications that failed verification",
)
DEAD_LETTERS = Counter(
    "cyberjurors_dead_letters_total",
    "Messages sent to disputes.dlq; stage round-N is counted as rounds",
    ["stage", "reason"],
)

TABLE_ENTRIES = Gauge(
    "cyberjurors_table_entries",
    "Keys in each Faust table on this worker, counted after each expiry sweep (memory store only: "
    "counting a RocksDB table reads every key)",
    ["table"],
)

MEDIA_DELETED = Counter(
    "cyberjurors_media_objects_deleted_total",
    "Media store objects this process deleted as expired (a sweep on another worker, or the CLI, "
    "counts its own; an object two sweeps removed at once may be counted by both)",
)

# --- consumer lag ----------------------------------------------------------------------------

CONSUMER_LAG = Gauge(
    "cyberjurors_consumer_lag_records",
    "Records the consumer group has not committed yet, per topic and partition it consumes: the end offset "
    "minus the committed offset (minus the log start offset where nothing is committed), read from the broker "
    "every lag_interval_s. Every worker reports the whole group's lag: aggregate with max by (group, topic, "
    "partition), never sum over workers",
    ["group", "topic", "partition"],
)

# --- precedents ------------------------------------------------------------------------------

PRECEDENT_RETRIEVAL = Histogram(
    "cyberjurors_precedent_retrieval_seconds",
    "Precedent retrieval per case, retries and fallbacks included",
    buckets=RETRIEVAL_BUCKETS,
)
PRECEDENT_FALLBACKS = Counter(
    "cyberjurors_precedent_fallbacks_total",
    "Cases that went on without precedents because retrieval failed, by error kind",
    ["reason"],
)
PRECEDENT_COLD_STARTS = Counter(
    "cyberjurors_precedent_cold_starts_total",
    "Cases whose category had too few guidelines, so cross-category ones were added",
    ["category"],
)
PRECEDENT_CONSISTENCY = Counter(
    "cyberjurors_precedent_consistency_total",
    "First-instance verdicts first decided here against their nearest decided precedents (jury/consistency.py): "
    "consistent, inconsistent (most went the other way) or no_precedent (too few near enough); the consistency "
    "rate is consistent over consistent + inconsistent. Not counted without a precedent base",
    ["outcome"],
)
for _outcome in CONSISTENCY_OUTCOMES:  # every outcome reads 0 from the start, so the rate is defined at once
    PRECEDENT_CONSISTENCY.labels(_outcome)


def record_consistency(found: PrecedentConsistency | None) -> None:
    if found is not None:
        PRECEDENT_CONSISTENCY.labels(found.outcome).inc()


# --- drift -----------------------------------------------------------------------------------

SELLER_WIN_SHARE_REFERENCE = Gauge(
    "cyberjurors_seller_win_share_reference_ratio",
    "The expected seller-win share (setting drift_reference_seller_share; the paper's data: 0.626); the "
    "recording rules take the max over the workers",
)
OUTCOMES = Counter(
    "cyberjurors_outcomes_total",
    "Reported outcomes compared with our verdict, once per case: agreement on the winner, the real winner",
    ["agreement", "real_winner", "category"],
)
VOTE_ERROR_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 17)
OUTCOME_VOTE_ERROR = Histogram(
    "cyberjurors_outcome_vote_error",
    "|our seller votes - the real jury's seller votes| per reported outcome, on the 17-vote scale "
    "(rate of _sum over rate of _count is the vote MAE)",
    ["category"],
    buckets=VOTE_ERROR_BUCKETS,
)

# --- juror qualification (jury/qualify.py): set when the worker seats its jury ---------------------
JUROR_ACCURACY = Gauge(
    "cyberjurors_juror_qualification_accuracy_ratio",
    "Share of its mock cases a persona decided as the real jury did, on its seat's model",
    ["persona", "model"],
)
JUROR_SELLER_SHARE = Gauge(
    "cyberjurors_juror_qualification_seller_share_ratio",
    "Share of a persona's mock-case votes for the seller (the mock cases are half the seller's)",
    ["persona", "model"],
)
JUROR_WEIGHT = Gauge(
    "cyberjurors_juror_weight",
    "What a scored persona's ballot counts on this worker's jury: 1 serving (less under reweight), 0 replaced",
    ["persona", "model"],
)


def _prime() -> None:
    """Create the series of known label values up front, so they read 0 (or NaN) rather than
    being absent until the first event, which makes rate() and alerts behave from the start."""
    BUILD_INFO.labels(**build_labels()).set(1)
    for stage in STAGES:
        STAGE_LATENCY.labels(stage)
    for category in CATEGORIES:
        CASE_LATENCY.labels(category)
        for side in SIDES:
            VERDICTS.labels(side, category)
        OUTCOME_VOTE_ERROR.labels(category)
        for agreement in ("agree", "disagree"):
            for side in SIDES:
                OUTCOMES.labels(agreement, side, category)
    for limit in ("tokens", "cost"):
        for stage in ("clues", "rounds", "verdict"):
            BUDGET_STOPS.labels(limit, stage)
    for tier in TIERS.values():
        ESCALATED_VERDICTS.labels(tier)
        for reason in ESCALATION_REASONS:
            ESCALATIONS.labels(reason, tier)
    for side in SIDES:
        APPEALS.labels(side)
    for result in ("reversed", "upheld"):
        APPEAL_VERDICTS.labels(result)
    for agreement in ("agree", "disagree"):
        HUMAN_DECISIONS.labels(agreement)
    for status in ("passed", "failed"):
        VERIFICATIONS.labels(status)
    for check in LETTER_CHECKS:
        for source in LETTER_LOCALE_SOURCES:
            LETTERS.labels(check, source)


# --- letters to the parties ------------------------------------------------------------------

LETTER_CHECKS = ("passed", "corrected")
LETTER_LOCALE_SOURCES = ("party", "case", "detected", "default")
LETTERS = Counter(
    "cyberjurors_letters_total",
    "Letters to the parties first written here: check = passed, or corrected (statements removed); "
    "locale_source = where the language came from (default: none given or detected, or one letters are "
    "not written in)",
    ["check", "locale_source"],
)


def record_letter(check: str, locale_source: str) -> None:
    LETTERS.labels(check, locale_source).inc()


_prime()


# stage labels of an earlier release, before each stage had one name (docs/renamed.md); dead letters
# written then still carry them
RENAMED_STAGES = {"ingest": "intake", "jury": "rounds", "round": "rounds", "outcomes": "outcome"}


def stage_label(stage: str) -> str:
    """round-1, round-2, ... -> rounds: one series per stage, not per round number (a case file the
    rounds stage could not read has no round number and is dead-lettered as "rounds")."""
    return "rounds" if stage.startswith("round-") else RENAMED_STAGES.get(stage, stage)


# --- LLM calls -------------------------------------------------------------------------------


def token_kinds(usage: Usage) -> dict[str, int]:
    """A call's tokens by metric kind (``TOKEN_KINDS``): answer and thinking apart."""
    thinking = min(usage.thinking_tokens, usage.output_tokens)  # a provider's count never exceeds its total
    return {
        "input": usage.input_tokens,
        "output": usage.output_tokens - thinking,
        "thinking": thinking,
        "cache_read": usage.cache_read_tokens,
        "cache_write": usage.cache_write_tokens,
    }


def record_llm_call(
    backend: str, model: str, role: str, elapsed_s: float, usage: Usage, cost: float | None, price_source: str
) -> None:
    """Count one answered call and its estimated cost in USD (None: the model has no price)."""
    LLM_CALLS.labels(backend, model, role).inc()
    LLM_LATENCY.labels(backend, model, role).observe(elapsed_s)
    record_llm_spend(backend, model, role, usage, cost, price_source)


def record_llm_spend(backend: str, model: str, role: str, usage: Usage, cost: float | None, price_source: str) -> None:
    """Count a billed reply's tokens and estimated cost: an answer's, or one the provider sent and
    billed that failed our checks (cut, refused, not a valid answer). An unpriced reply adds 0 under
    price_source "unpriced" and one to the unpriced calls."""
    for kind, tokens in token_kinds(usage).items():
        LLM_TOKENS.labels(backend, model, role, kind).inc(tokens)
    if cost is None:
        LLM_UNPRICED.labels(backend, model).inc()
    LLM_COST.labels(backend, model, role, price_source).inc(cost or 0.0)


def record_llm_error(backend: str, model: str, role: str, elapsed_s: float, kind: str) -> None:
    LLM_CALLS.labels(backend, model, role).inc()
    LLM_LATENCY.labels(backend, model, role).observe(elapsed_s)
    LLM_ERRORS.labels(backend, model, role, kind).inc()


def record_structured_output(backend: str, model: str, mode: str, previous: str | None) -> None:
    """The mode a server now answers a model's structured output in (and not the one before)."""
    if previous is not None:
        LLM_STRUCTURED_OUTPUT.labels(backend, model, previous).set(0)
    LLM_STRUCTURED_OUTPUT.labels(backend, model, mode).set(1)


def record_retry(backend: str, model: str, retries_taken: int) -> None:
    """Called per HTTP attempt with the SDK's retry count for it: every attempt after the first is a retry."""
    if retries_taken > 0:
        LLM_RETRIES.labels(backend, model).inc()


# --- verdicts --------------------------------------------------------------------------------


def record_verdict(
    category: str, winner: str, margin: int, rounds_used: int, early_stopped: bool, latency_s: float
) -> None:
    """Once per case, when its verdict is first decided (never for a replay's re-send)."""
    VERDICTS.labels(winner, category).inc()
    VOTE_MARGIN.observe(margin)
    ROUNDS_USED.observe(rounds_used)
    if early_stopped:
        EARLY_STOPS.inc()
    CASE_LATENCY.labels(category).observe(latency_s)


def record_budget_stops(stops: Collection[BudgetStop]) -> None:
    """Once per verdict first decided, for each place the budget cut it short."""
    for stop in stops:
        BUDGET_STOPS.labels(stop.limit, stage_label(stop.stage)).inc()


def record_ballots(votes_by_model: Mapping[str, Votes], winner: str) -> None:
    """Once per verdict first decided: its final round's ballots by seat model and vote."""
    for model, votes in votes_by_model.items():
        for side in SIDES:
            if count := getattr(votes, side):
                BALLOTS.labels(model, side, winner).inc(count)


def record_escalation(reasons: Collection[str], instance: int) -> None:
    """Once per verdict first decided, for each reason it was escalated for."""
    if reasons:
        ESCALATED_VERDICTS.labels(TIERS[instance]).inc()
    for reason in reasons:
        ESCALATIONS.labels(reason, TIERS[instance]).inc()


def record_verification(verification: Verification | None) -> None:
    """Once per verdict first decided, when its justification was verified."""
    if verification is None:
        return
    VERIFICATIONS.labels(verification.status).inc()
    VERIFIER_TURNS.observe(verification.turns)
    CLAIMS_REMOVED.inc(len(verification.removed_claims))


def record_jury(composition: JuryComposition | None) -> None:
    """Once the worker's jury is seated: each scored persona's accuracy, seller share and weight."""
    for seat in composition.seats if composition else []:
        for score, serving in ((seat.score, True), (seat.replaced, False)):
            if score is None:
                continue
            JUROR_ACCURACY.labels(score.persona, score.model).set(score.accuracy)
            JUROR_SELLER_SHARE.labels(score.persona, score.model).set(score.seller_share)
            JUROR_WEIGHT.labels(score.persona, score.model).set(seat.weight if serving else 0.0)


def record_dead_letter(stage: str, reason: str) -> None:
    DEAD_LETTERS.labels(stage_label(stage), reason).inc()


class CasesInFlight:
    """Derives ``cyberjurors_cases_in_flight`` from the set of case ids this worker is handling,
    so the gauge cannot go negative, and a replayed case (re-added, then removed by its re-sent
    verdict) cannot make it drift upward.

    A case is added when admitted and whenever a stage picks it up (so cases already under way
    when a worker restarts count again), removed by its verdict or its dead letter, and dropped
    when a rebalance moves its partition to another worker. Every topic of the pipeline has the
    same partition count and key, so a case has one partition number throughout.
    """

    def __init__(self, gauge: Gauge = CASES_IN_FLIGHT):
        self.gauge = gauge
        self.cases: dict[str, int] = {}
        self.gauge.set(0)

    def add(self, case_id: str, partition: int) -> None:
        self.cases[case_id] = partition
        self.gauge.set(len(self.cases))

    def discard(self, case_id: str) -> None:
        self.cases.pop(case_id, None)
        self.gauge.set(len(self.cases))

    def keep_partitions(self, partitions: Collection[int]) -> None:
        self.cases = {c: p for c, p in self.cases.items() if p in partitions}
        self.gauge.set(len(self.cases))

    def __len__(self) -> int:
        return len(self.cases)


# --- drift -----------------------------------------------------------------------------------


def set_seller_share_reference(share: float) -> None:
    SELLER_WIN_SHARE_REFERENCE.set(share)


def seller_votes_on_17(buyer: int, seller: int, jury_size: int = 17) -> float:
    """Seller votes scaled to the 17-vote split the paper's MAE is measured on."""
    return seller * jury_size / max(buyer + seller, 1)


def record_outcome(category: str, real_buyer: int, real_seller: int, our_buyer: int, our_seller: int) -> bool:
    """Count one reported outcome against our verdict (the caller counts each case once); True
    when our winner was the real one."""
    real = "seller" if real_seller > real_buyer else "buyer"
    ours = "seller" if our_seller > our_buyer else "buyer"
    OUTCOMES.labels("agree" if real == ours else "disagree", real, category).inc()
    error = abs(seller_votes_on_17(our_buyer, our_seller) - seller_votes_on_17(real_buyer, real_seller))
    OUTCOME_VOTE_ERROR.labels(category).observe(round(error, 6))
    return real == ours


# --- the endpoint and Faust's sensor ----------------------------------------------------------

FAUST_PREFIX = "cyberjurors_faust"
_faust_metrics: Any = None


def instrument_faust(app: faust.App) -> None:
    """Faust's own Prometheus sensor (consumer, commits, offsets, sends, rebalances, tables) in
    the default registry, under a fixed prefix (``cyberjurors_faust_*``, not the app id, so
    dashboards do not depend on it). Call before the app starts.

    Not ``setup_prometheus_sensors``: that also mounts a /metrics page on Faust's web server
    (which workers run without) and registers its metrics anew on every call, which fails the
    second time in one process. Its metric set and monitor are used as they are.
    """
    from faust.sensors.prometheus import FaustMetrics, PrometheusMonitor

    global _faust_metrics
    if _faust_metrics is None:
        _faust_metrics = FaustMetrics.create(REGISTRY, FAUST_PREFIX)
    app.monitor = PrometheusMonitor(metrics=_faust_metrics)


def serve(port: int | None, host: str = "0.0.0.0") -> bool:
    """Expose the default registry on http://host:port/metrics (a daemon thread). Port 0 or None:
    off. A port already taken is logged, not fatal: the worker still judges cases."""
    if not port:
        return False
    try:
        start_http_server(port, addr=host)
    except OSError as err:
        log.error("metrics endpoint not started on %s:%s: %s", host, port, err)
        return False
    log.info("metrics on http://%s:%s/metrics", host, port)
    return True
