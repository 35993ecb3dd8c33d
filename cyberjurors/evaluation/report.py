"""Evaluation reports: one ``EvalReport`` per configuration of the ablation ladder, its tables built
once (tables.Tabled) and drawn for the terminal (rich) or written as Markdown. Saving and loading
them is report_files'; the prices behind every USD figure are pricing's.

A report from the offline backend measures the pipeline (plumbing, tokens, latency), not model
judgement; every rendering says so where a reader cannot miss it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator
from rich.console import Group
from rich.text import Text

from .pricing import ModelPrice, price_line
from .scores import CourtScores, ModelBallots, PersonaBallots, RiskCoverage, RiskPoint, Summary
from .tables import Tabled, tabled

STAND_IN_BACKENDS = frozenset({"offline", "scripted"})
MD_FAILED_SHOWN = 50
STAND_IN_WARNING = (
    "stand-in (offline backend or a plumbing-only model): these numbers measure the pipeline, not model judgement"
)
DASH = "–"


class DatasetInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    sha256: str
    cases: int


class BatchRun(BaseModel):
    """How an ``eval --batch`` run was answered, and what it cost against streaming."""

    model_config = ConfigDict(extra="forbid")

    executor: Literal["message-batches", "in-process"] = Field(
        description="message-batches: Anthropic's Message Batches API; in-process: the offline stand-in answered "
        "each wave in process (no batch API, no discount)"
    )
    waves: int = Field(description="waves the cases were judged in (this run)")
    batches: int = Field(0, description="Message Batches created by this run")
    requests: int = Field(0, description="entries sent in them, retries included")
    retried: int = Field(0, description="entries sent again after an errored or expired result")
    resumed: int = Field(0, description="answers taken from OUT/batches: paid for by an earlier run")
    collected: int = Field(0, description="batches an earlier run had submitted, collected by this one")
    cost_per_case_standard_usd: float | None = Field(
        None,
        description="the same tokens at standard (streaming) prices: what the batch discount saved, not a "
        "streaming measurement",
    )
    streaming_cost_per_case_usd: float | None = Field(
        None,
        description="a streaming run of the same configuration in the same OUT (its own tokens, standard "
        "prices), over the same cases; None when there is none",
    )
    streaming_verdicts: int = 0


class EvalReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="configuration name, e.g. IV-CoT")
    description: str = ""
    dataset: DatasetInfo
    backend: str
    models: list[str] = Field(default_factory=list)
    settings: dict[str, Any] = Field(default_factory=dict, description="as passed in; already secret-free")
    started_at: datetime
    finished_at: datetime
    wall_s: float
    summary: Summary
    failed_cases: dict[str, str] = Field(
        default_factory=dict,
        description="every case sent without a verdict, party-swap twins included: case id -> "
        "the dead letter's stage:reason, or timeout",
    )
    stand_in: bool = Field(
        False,
        description="true for the offline (lexical) and scripted backends, and when any verdict was decided by "
        "a stand-in (a plumbing-only tiny model: Verdict.stand_in)",
    )
    mode: Literal["stream", "batch"] = Field(
        "stream", description="stream: through the Faust topology; batch: in waves (eval --batch)"
    )
    batch: BatchRun | None = None
    prices: list[ModelPrice] = Field(
        default_factory=list, description="the prices every USD figure of this report was computed with, per model used"
    )

    @model_validator(mode="after")
    def _stand_in(self) -> EvalReport:
        # cannot be switched off for a stand-in backend, even by a hand-edited report.json
        self.stand_in = self.stand_in or self.backend in STAND_IN_BACKENDS
        return self


# --- cells ---------------------------------------------------------------------------------


def _num(value: float | None, digits: int = 3) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return DASH if value is None else f"{100 * value:.1f}%"


def _share(pred: float | None, real: float | None) -> str:
    return DASH if pred is None and real is None else f"{_pct(pred)} / {_pct(real)}"


def _tokens(s: Summary) -> str:
    return DASH if s.tokens_per_case is None else f"{s.tokens_per_case['total']:,.0f}"


def _usd_per_case(s: Summary) -> str:
    if s.cost_per_case_usd is None:
        return DASH
    return f"{s.cost_per_case_usd:.4f}" + ("+" if s.unpriced_calls else "")  # a floor: see NOTES


def _mae(s: Summary) -> str:
    return _num(s.vote_mae, 2) + ("*" if s.vote_mae is not None and s.votes_scaled else "")


COLUMNS: list[tuple[str, Callable[[Summary], str]]] = [
    ("Cases", lambda s: f"{s.verdicts}/{s.cases}"),
    ("Acc", lambda s: _pct(s.accuracy)),
    ("wF1", lambda s: _pct(s.weighted_f1)),
    ("mF1", lambda s: _pct(s.macro_f1)),
    ("MAE", _mae),
    ("RMSE", lambda s: _num(s.vote_rmse, 2)),
    ("Buyer recall", lambda s: _pct(s.recall_buyer)),
    ("Seller recall", lambda s: _pct(s.recall_seller)),
    ("Seller share pred/real", lambda s: _share(s.seller_share_predicted, s.seller_share_real)),
    ("Swap consistency", lambda s: _pct(s.swap_consistency)),
    ("Tokens/case", _tokens),
    ("USD/case", lambda s: _usd_per_case(s)),
    ("Calls/case", lambda s: _num(s.calls_per_case, 1)),
    ("Rounds", lambda s: _num(s.rounds_mean, 2)),
    (
        "Verified pass/turns",
        lambda s: DASH if not s.verified else f"{_pct(s.verification_passed)} / {_num(s.verifier_turns_mean, 1)}",
    ),
    ("Escalated", lambda s: _pct(s.escalated_share)),
    ("p50/p95 s", lambda s: DASH if s.latency_p50_s is None else f"{s.latency_p50_s:.1f} / {s.latency_p95_s:.1f}"),
]
NOTES = (
    "Cases = verdicts/cases; failures are counted apart and left out of the metrics. "
    "USD/case at llm_prices (the dated list prices of config/catalog.py unless overridden), else at "
    "genai-prices' bundled list (the prices section names each model's source; 0 offline); "
    "+ = some calls had no price anywhere and are left out: the figure is a floor. "
    "MAE/RMSE: seller votes out of 17; * = a jury of another size, scaled to 17; "
    "Verified: share of verified justifications that passed / verifier calls per verdict; "
    "– = not defined (no cases, or a single judge)."
)


MODEL_COLUMNS: list[tuple[str, Callable[[ModelBallots], str]]] = [
    ("Ballots", lambda m: f"{m.ballots}"),
    ("Seller share", lambda m: _pct(m.seller_share)),
    ("With majority", lambda m: _pct(m.majority_agreement)),
    ("With real jury", lambda m: _pct(m.truth_agreement)),
]
MODEL_NOTES = (
    "Final-round ballots of each model's juror seats (juror_models, round robin) over the cases "
    "with a verdict: share for the seller, share siding with the verdict's majority, and with the "
    "real jury's majority."
)


def failures_said(r: EvalReport) -> str:
    """Every case without a verdict (the ids of failed_cases), the dataset's and their party-swap twins
    counted apart: the summary's ``failed`` and its metrics are over the dataset's cases only."""
    from .swap import is_swapped

    def by_reason(reasons: Counter[str]) -> str:
        return ", ".join(f"{k} ×{v}" for k, v in sorted(reasons.items()))

    if r.failed_cases:
        mine = Counter(why for i, why in r.failed_cases.items() if not is_swapped(i))
        twins = Counter(why for i, why in r.failed_cases.items() if is_swapped(i))
    else:  # a report from before failed_cases existed
        mine, twins = Counter(r.summary.failed), Counter(r.summary.swap_failed)
    n, t = sum(mine.values()), sum(twins.values())
    said = f"{n + t} without a verdict: {n} of the {r.summary.cases} cases" + (f" ({by_reason(mine)})" if n else "")
    return said + (f" and {t} party-swap twins ({by_reason(twins)})" if t else "")


def consistency_said(s: Summary) -> str | None:
    """The consistency rate with what it is over; None when no verdict was compared (no precedent base)."""
    if not s.precedent_consistency:
        return None
    counts = ", ".join(f"{n} {outcome}" for outcome, n in s.precedent_consistency.items())
    return (
        f"consistency with precedent: {_pct(s.consistency_rate)} of the verdicts with enough near decided "
        f"precedents went the way most of them did ({counts})"
    )


def _usd(value: float | None) -> str:
    return DASH if value is None else f"{value:.4f}"


def _ratio(r: EvalReport) -> str:
    b = r.batch
    if b is None or b.streaming_cost_per_case_usd in (None, 0) or r.summary.cost_per_case_usd is None:
        return DASH
    return f"{r.summary.cost_per_case_usd / b.streaming_cost_per_case_usd:.3f}x"


COST_COLUMNS: list[tuple[str, Callable[[EvalReport], str]]] = [
    ("Answered", lambda r: r.batch.executor if r.batch else "stream"),
    ("Waves", lambda r: f"{r.batch.waves}" if r.batch else DASH),
    ("Batches", lambda r: f"{r.batch.batches}" if r.batch else DASH),
    ("USD/case batch", lambda r: _usd_per_case(r.summary)),
    ("Same tokens, streaming prices", lambda r: _usd(r.batch.cost_per_case_standard_usd) if r.batch else DASH),
    (
        "Streaming run USD/case",
        lambda r: (
            DASH
            if not r.batch or r.batch.streaming_cost_per_case_usd is None
            else f"{r.batch.streaming_cost_per_case_usd:.4f} (n={r.batch.streaming_verdicts})"
        ),
    ),
    ("Batch / streaming run", _ratio),
]
COST_NOTES = (
    "USD/case batch: this run's tokens at the Message Batches price (each model's batch share, "
    "config/catalog.py). Same tokens, streaming prices: what the discount saved on these very tokens, not a "
    "streaming measurement. Streaming run: `eval` without --batch of the same configuration into the same "
    "--out, its own tokens at standard prices (cache hits differ: in a batch they are best-effort); batch / "
    "streaming run compares the two measured runs. In process (offline) nothing is priced."
)


def mixed(summary: Summary) -> bool:
    """Whether the jury had seats on more than one model: then its figures are shown per model."""
    return len(summary.by_model) > 1


TILT_BOUND = 0.25  # the qualification gate's default bound on a persona's side bias (qualification_max_bias)
PERSONA_COLUMNS: list[tuple[str, Callable[[PersonaBallots], str]]] = [
    ("Ballots", lambda p: f"{p.ballots}"),
    ("Seller share", lambda p: _pct(p.seller_share)),
    ("Real seller share", lambda p: _pct(p.real_seller_share)),
    ("Tilt", lambda p: f"{p.tilt:+.2f}" + (" ⚠ tilted" if abs(p.tilt) > TILT_BOUND else "")),
    ("With majority", lambda p: _pct(p.majority_agreement)),
    ("With real jury", lambda p: _pct(p.truth_agreement)),
]
PERSONA_NOTES = (
    "Jury balance: each persona's final-round ballots over the cases with a verdict: share for the "
    "seller against the real jury's seller share on the same cases (tilt; ⚠ beyond "
    f"±{TILT_BOUND:g}, the qualification gate's default bound), and the share siding with the "
    "verdict's majority and with the real jury's."
)


class CourtRow(NamedTuple):
    """One court's line of the per-court table, with its cost against the paper's court's."""

    configuration: str
    court: str
    scores: CourtScores
    tokens_ratio: float | None = None
    usd_ratio: float | None = None


def court_rows(reports: Sequence[EvalReport]) -> list[CourtRow]:
    """Every court of every report, each with its tokens and list-price USD per case over those of the
    reference: the first court that is the paper's (17 jurors, 3 rounds, unverified, the configured
    model). Courts judged over the same cases (``--ablation courts``) compare like for like; within
    one run of a policy each court judged its own cases, and the ratios say only that much."""
    rows = [CourtRow(r.name, name, c) for r in reports for name, c in r.summary.by_court.items()]
    paper = next((row.scores for row in rows if row.scores.paper), None)
    if paper is None:
        return rows

    def ratio(value: float | None, reference: float | None) -> float | None:
        return None if value is None or not reference else value / reference

    def total(c: CourtScores) -> float | None:
        return c.summary.tokens_per_case["total"] if c.summary.tokens_per_case else None

    return [
        row._replace(
            tokens_ratio=ratio(total(row.scores), total(paper)),
            usd_ratio=ratio(row.scores.usd_per_case_listed, paper.usd_per_case_listed),
        )
        for row in rows
    ]


def sized(reports: Sequence[EvalReport]) -> bool:
    """Whether a court policy sat (a court other than the default one): then the per-court table is shown."""
    return any(name != "default" for r in reports for name in r.summary.by_court)


def _seated(c: CourtScores) -> str:
    return f"{c.jurors} × {c.rounds}" + (" +verifier" if c.verifier else "") + (f", {c.model}" if c.model else "")


def _times(value: float | None) -> str:
    return DASH if value is None else f"{value:.3f}×"


COURT_COLUMNS: list[tuple[str, Callable[[CourtRow], str]]] = [
    ("Configuration", lambda r: r.configuration),
    ("Jurors × rounds", lambda r: _seated(r.scores) + (" (paper)" if r.scores.paper else "")),
    ("Cases", lambda r: f"{r.scores.summary.verdicts}"),
    ("Acc", lambda r: _pct(r.scores.summary.accuracy)),
    ("MAE", lambda r: _mae(r.scores.summary)),
    ("Escalated", lambda r: _pct(r.scores.summary.escalated_share)),
    ("Consistent", lambda r: _pct(r.scores.summary.consistency_rate)),
    ("Tokens/case", lambda r: _tokens(r.scores.summary)),
    ("Tokens × paper", lambda r: _times(r.tokens_ratio)),
    ("USD/case at list", lambda r: _usd(r.scores.usd_per_case_listed)),
    ("USD × paper", lambda r: _times(r.usd_ratio)),
]
COURT_NOTES = (
    "Per court that sat (Verdict.court), over its cases with a verdict. Jurors × rounds: N and T (at most; "
    "early stop may end sooner), the verifier when on, the model the court put every call on when it names "
    "one. Consistent: verdicts whose nearest decided precedents mostly went their way, over those with "
    "enough near precedents. USD/case at list: the court's tokens at the dated list prices of its model "
    "(llm_prices; the run's model when the court names none), so on a stand-in these are what the same "
    "tokens would cost on that model. × paper: over the paper's court (17 jurors, 3 rounds, unverified)."
)


RISK_COLUMNS: list[tuple[str, Callable[[RiskPoint], str]]] = [
    ("Escalated", lambda p: _pct(p.escalated_share)),
    ("Auto-decided", lambda p: f"{p.auto_decided}"),
    ("Acc (auto)", lambda p: _pct(p.accuracy)),
    ("MAE (auto)", lambda p: _num(p.vote_mae, 2)),
]


def risk_label(point: RiskPoint) -> str:
    if point.margin_below is None:
        return "nothing escalated"
    return "other reasons only" if point.margin_below == 0 else f"margin < {point.margin_below:g}"


def risk_notes(rc: RiskCoverage) -> str:
    chosen = rc.operating_point
    pick = (
        f"the most cases stay automatic at {risk_label(chosen)} ({_pct(1 - chosen.escalated_share)} of them)"
        if chosen is not None
        else "no threshold reaches it"
    )
    return (
        f"Verdicts that would go to people: margin on the 17-vote scale below the threshold, or any other "
        f"escalation reason the run's settings (escalate_on) set on the verdict ({_pct(rc.other_reasons_share)} "
        f"of verdicts); accuracy and vote MAE on the rest. For {_pct(rc.target_accuracy)} accuracy on what is "
        f"decided automatically, {pick}."
    )


def rows(summary: Summary) -> list[tuple[str, Summary]]:
    return (
        [("overall", summary)]
        + [(f"category: {k}", v) for k, v in summary.by_category.items()]
        + [(f"band: {k}", v) for k, v in summary.by_band.items()]
    )


# --- tables: each built once, drawn by render and written by to_markdown --------------------


def summary_table(first: str, labelled: Sequence[tuple[str, Summary]], title: str = "") -> Tabled:
    return tabled(first, COLUMNS, labelled, title, NOTES)


def ladder_table(reports: Sequence[EvalReport], title: str = "") -> Tabled:
    labelled = [(r.name + (" (stand-in)" if r.stand_in else ""), r.summary) for r in reports]
    return summary_table("Configuration", labelled, title)


def model_table(summary: Summary) -> Tabled:
    return tabled(
        "Model", MODEL_COLUMNS, summary.by_model.items(), "Juror seats by model", MODEL_NOTES, code_labels=True
    )


def court_table(reports: Sequence[EvalReport]) -> Tabled:
    labelled = [(row.court, row) for row in court_rows(reports)]
    return tabled("Court", COURT_COLUMNS, labelled, "Courts", COURT_NOTES)


def persona_table(summary: Summary) -> Tabled:
    return tabled("Persona", PERSONA_COLUMNS, summary.by_persona.items(), "Jury balance by persona", PERSONA_NOTES)


def risk_table(rc: RiskCoverage) -> Tabled:
    labelled = [(risk_label(p), p) for p in rc.points]
    return tabled("Escalate when", RISK_COLUMNS, labelled, "Risk–coverage", risk_notes(rc))


def cost_table(reports: Sequence[EvalReport]) -> Tabled:
    labelled = [(r.name, r) for r in reports if r.batch is not None]
    return tabled("Configuration", COST_COLUMNS, labelled, "Batch and streaming cost", COST_NOTES)


# --- the terminal -----------------------------------------------------------------------------


def _warning() -> Text:
    return Text(f"⚠ {STAND_IN_WARNING}", style="bold yellow")


def render(report: EvalReport) -> Group:
    parts: list[Any] = [_warning()] if report.stand_in else []
    title = f"{report.name} — {report.backend} ({', '.join(report.models) or 'no model'})"
    parts.append(summary_table("", rows(report.summary), title).rich())
    if mixed(report.summary):
        parts.append(model_table(report.summary).rich())
    if sized([report]):
        parts.append(court_table([report]).rich())
    if report.summary.by_persona:
        parts.append(persona_table(report.summary).rich())
    if report.summary.risk_coverage is not None:
        parts.append(risk_table(report.summary.risk_coverage).rich())
    if said := consistency_said(report.summary):
        parts.append(Text(said))
    if report.summary.budget_stops:
        parts.append(Text(f"per-case budget reached: {report.summary.budget_stops} verdicts cut short", style="yellow"))
    if report.batch is not None:
        parts.append(cost_table([report]).rich())
    if report.failed_cases or report.summary.failed or report.summary.swap_failed:
        parts.append(Text(failures_said(report), style="red"))
    if report.prices:
        parts.append(Text("USD at these prices: " + "; ".join(price_line(p) for p in report.prices)))
    if said := cost_said(report.summary):
        parts.append(Text(said, style="yellow" if report.summary.unpriced_calls else ""))
    return Group(*parts)


def cost_said(s: Summary) -> str:
    """Where the run's USD came from, and the calls it leaves out."""
    parts = []
    if s.cost_sources:
        parts.append("USD by price source: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(s.cost_sources.items())))
    if s.unpriced_calls:
        parts.append(f"{s.unpriced_calls} calls to models no price source knows are left out (USD/case is a floor)")
    return "; ".join(parts)


def render_ladder(reports: Sequence[EvalReport]) -> Group:
    title = "Ablation ladder" + (f" — {STAND_IN_WARNING}" if any(r.stand_in for r in reports) else "")
    parts: list[Any] = [ladder_table(reports, title).rich()]
    if sized(reports):
        parts.append(court_table(reports).rich())
    if any(r.batch is not None for r in reports):
        parts.append(cost_table(reports).rich())
    return Group(*parts)


# --- markdown ------------------------------------------------------------------------------


def _md_tables(r: EvalReport) -> list[str]:
    """One configuration's tables in Markdown: the summary, and each table its figures call for."""
    warned = f" ({STAND_IN_WARNING})" if r.stand_in else ""
    lines = ["", *summary_table("", rows(r.summary)).markdown(), "", NOTES, ""]
    if mixed(r.summary):
        lines += model_table(r.summary).markdown_section()
    if sized([r]):
        lines += court_table([r]).markdown_section()
    if r.summary.by_persona:
        table = persona_table(r.summary)
        lines += table.markdown_section(f"{table.title}{warned}:")
    if r.summary.risk_coverage is not None:
        table = risk_table(r.summary.risk_coverage)
        lines += table.markdown_section(f"{table.title}{warned}:")
    lines += [
        "Configuration:",
        "",
        "```json",
        json.dumps(r.settings, indent=2, sort_keys=True, default=str),
        "```",
        "",
    ]
    return lines


def to_markdown(reports: Sequence[EvalReport]) -> str:
    lines = ["# CyberJurors evaluation", ""]
    if any(r.stand_in for r in reports):
        names = ", ".join(r.name for r in reports if r.stand_in)
        lines += [f"> **Warning — {STAND_IN_WARNING}.** Stand-in configurations: {names}.", ""]
    if len(reports) > 1:
        lines += ["## Ladder", "", *ladder_table(reports).markdown(), ""]
    if len(reports) > 1 and sized(reports):
        lines += court_table(reports).markdown_section("## Courts")
    if any(r.batch is not None for r in reports):
        lines += cost_table(reports).markdown_section("## Batch and streaming cost")
    for r in reports:
        lines += [f"## {r.name}", ""]
        if r.stand_in:
            lines += [f"> **{STAND_IN_WARNING}.**", ""]
        if r.description:
            lines += [r.description, ""]
        lines += [
            f"- backend: `{r.backend}`; models: {', '.join(f'`{m}`' for m in r.models) or 'none'}",
            f"- dataset: `{r.dataset.source}` ({r.dataset.cases} cases, sha256 `{r.dataset.sha256}`)",
            f"- run: {r.started_at.isoformat()} to {r.finished_at.isoformat()} ({r.wall_s:.1f} s)",
        ]
        if r.failed_cases or r.summary.failed or r.summary.swap_failed:
            lines.append(f"- {failures_said(r)}")
        if r.failed_cases:
            lines.append(f"- cases without a verdict: {failed_list(r.failed_cases, MD_FAILED_SHOWN, '`')}")
        if r.summary.swap_pairs:
            lines.append(
                f"- party-swap pairs: {r.summary.swap_pairs}; twin vote MAE {_num(r.summary.swap_vote_mae, 2)}"
            )
        if said := consistency_said(r.summary):
            lines.append(f"- {said}")
        if r.summary.budget_stops:
            lines.append(f"- per-case budget reached: {r.summary.budget_stops} verdicts cut short (budget_reached)")
        if r.summary.claims_removed:
            lines.append(f"- untraceable sentences removed from failed justifications: {r.summary.claims_removed}")
        if r.batch is not None:
            b = r.batch
            lines.append(
                f"- batch: {b.executor}, {b.waves} waves, {b.batches} Message Batches ({b.requests} entries, "
                f"{b.retried} sent again, {b.resumed} answers and {b.collected} batches taken from an earlier "
                f"run); USD/case {_usd_per_case(r.summary)} at batch prices, "
                f"{_usd(b.cost_per_case_standard_usd)} for the same tokens at streaming prices"
            )
        if r.prices:
            lines.append(
                "- USD at these prices: "
                + "; ".join(price_line(p.model_copy(update={"model": f"`{p.model}`"})) for p in r.prices)
            )
        if said := cost_said(r.summary):
            lines.append(f"- {said}")
        lines += _md_tables(r)
    return "\n".join(lines)


def failed_list(failed: dict[str, str], shown: int, quote: str = "") -> str:
    """``id (reason), ...``: the first ``shown`` of them, then how many more."""
    items = [f"{quote}{case_id}{quote} ({reason})" for case_id, reason in list(failed.items())[:shown]]
    more = len(failed) - shown
    return ", ".join(items) + (f" and {more} more (all in the JSON report)" if more > 0 else "")
