"""The metrics the paper reports (accuracy, weighted F1, vote MAE/RMSE) and the ones a fairness
audit needs besides (macro F1, recall per side, seller share, party-swap consistency), written
out by hand over a confusion matrix so they have no scikit-learn dependency at run time; the
tests hold them to scikit-learn's numbers.

Conventions: labels are "buyer"/"seller"; a case's truth is the real 17-vote majority. F1 of a
class that is never predicted, or never true, is 0 (scikit-learn's ``zero_division=0``). A
metric over no cases is None, never NaN.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, Self

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..config import TokenPrices
from ..jury.escalation import scaled_margin
from ..jury.stakes import is_paper_court
from ..llm.prices import PriceTable
from ..schemas import JURY_SIZE, Court, Party, Usage, Verdict, Votes
from .dataset import difficulty_band
from .results import CaseResult
from .swap import is_swapped

LABELS: tuple[Party, ...] = ("buyer", "seller")
TOKEN_KINDS = ("input", "output", "cache_read", "cache_write", "total")


def _labels(y_true: Sequence[str], y_pred: Sequence[str]) -> list[str]:
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} labels, y_pred {len(y_pred)}")
    return sorted(set(y_true) | set(y_pred))


def confusion(y_true: Sequence[str], y_pred: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """Rows: true label; columns: predicted label."""
    index = {label: i for i, label in enumerate(labels)}
    matrix = np.zeros((len(labels), len(labels)), dtype=int)
    for t, p in zip(y_true, y_pred, strict=False):
        matrix[index[t], index[p]] += 1
    return matrix


def accuracy(y_true: Sequence[str], y_pred: Sequence[str]) -> float | None:
    _labels(y_true, y_pred)
    return sum(t == p for t, p in zip(y_true, y_pred, strict=True)) / len(y_true) if y_true else None


def f1_per_class(y_true: Sequence[str], y_pred: Sequence[str]) -> dict[str, float]:
    """F1 = 2TP / (2TP + FP + FN): the harmonic mean of precision and recall, 0 when TP is 0."""
    labels = _labels(y_true, y_pred)
    m = confusion(y_true, y_pred, labels)
    tp = np.diag(m)
    fp = m.sum(axis=0) - tp
    fn = m.sum(axis=1) - tp
    return {label: float(2 * tp[i] / (2 * tp[i] + fp[i] + fn[i])) for i, label in enumerate(labels)}


def weighted_f1(y_true: Sequence[str], y_pred: Sequence[str]) -> float | None:
    """Mean of per-class F1 weighted by each class's true count (the paper's F1)."""
    if not y_true:
        return None
    support = Counter(y_true)
    return sum(f * support[label] for label, f in f1_per_class(y_true, y_pred).items()) / len(y_true)


def macro_f1(y_true: Sequence[str], y_pred: Sequence[str]) -> float | None:
    """Unweighted mean over the labels in y_true or y_pred: a jury that always says "buyer"
    cannot hide behind a buyer-heavy dataset."""
    scores = f1_per_class(y_true, y_pred)
    return sum(scores.values()) / len(scores) if scores else None


def recall_by_side(y_true: Sequence[str], y_pred: Sequence[str]) -> dict[str, float | None]:
    """Share of buyer-won and of seller-won cases the jury got right; None for a side that
    never won."""
    _labels(y_true, y_pred)
    out: dict[str, float | None] = {}
    for side in LABELS:
        hits = [p == side for t, p in zip(y_true, y_pred, strict=True) if t == side]
        out[side] = sum(hits) / len(hits) if hits else None
    return out


class VoteErrors(NamedTuple):
    mae: float
    rmse: float
    scaled: bool  # some jury had N != 17 jurors; its seller votes were scaled to 17


def scaled_seller_votes(votes: Votes) -> float | None:
    """Seller votes on the real jury's 17-vote scale; None for a single judge (N < 2), whose
    one vote says nothing about a split."""
    n = votes.total
    if n < 2:
        return None
    return votes.seller if n == JURY_SIZE else votes.seller / n * JURY_SIZE


def vote_errors(true_seller_votes: Sequence[int], pred_votes: Sequence[Votes]) -> VoteErrors | None:
    """MAE and RMSE of the seller-vote count out of 17. None when there is nothing to compare or
    any prediction came from a single judge: the paper reports these for juries only."""
    if len(true_seller_votes) != len(pred_votes):
        raise ValueError(f"{len(true_seller_votes)} true vote counts, {len(pred_votes)} predictions")
    scaled = [scaled_seller_votes(v) for v in pred_votes]
    if not scaled or any(s is None for s in scaled):
        return None
    errors = np.asarray(scaled, dtype=float) - np.asarray(true_seller_votes, dtype=float)
    return VoteErrors(
        mae=float(np.mean(np.abs(errors))),
        rmse=float(np.sqrt(np.mean(errors**2))),
        scaled=any(v.total != JURY_SIZE for v in pred_votes),
    )


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between the closest ranks (numpy's default)."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else None


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


class BallotShares(BaseModel):
    """Final-round ballots over the evaluated cases: how they voted and how often they sided with the
    jury's majority and with the real jury."""

    model_config = ConfigDict(extra="forbid")

    ballots: int
    seller_share: float = Field(description="share of its ballots for the seller")
    majority_agreement: float = Field(description="share of its ballots for the verdict's winner")
    truth_agreement: float = Field(description="share of its ballots for the real jury's majority")

    @classmethod
    def of(cls, tally: Counter[str], **more: float) -> Self:
        """The shares of ``_tally``'s counts for one key, with what the subclass adds."""
        n = tally["ballots"]
        return cls(
            ballots=n,
            seller_share=tally["seller"] / n,
            majority_agreement=tally["majority"] / n,
            truth_agreement=tally["truth"] / n,
            **more,
        )


class ModelBallots(BallotShares):
    """One model's juror seats over the evaluated cases (final-round ballots)."""


class PersonaBallots(BallotShares):
    """One persona's final-round ballots over the evaluated cases (the jury balance report): a persona
    tilted to one side shows here before it serves."""

    real_seller_share: float = Field(description="share of the cases it voted on that the real jury gave the seller")
    tilt: float = Field(description="seller_share - real_seller_share: above 0 leans to the seller")


def _tally(
    judged: Sequence[CaseResult], split: Callable[[Verdict], Iterable[tuple[str, Votes]]]
) -> dict[str, Counter[str]]:
    """Over every judged case's final round, per key of ``split`` (a seat model, a persona): the
    ballots, those for the seller, for the verdict's winner and for the real jury's majority, and
    those cast on cases the real jury gave the seller. In the order the keys first come."""
    tally: dict[str, Counter[str]] = defaultdict(Counter)
    for r in judged:
        assert r.verdict is not None
        for key, votes in split(r.verdict):
            t = tally[key]
            t["ballots"] += votes.total
            t["seller"] += votes.seller
            t["real_seller"] += votes.total if r.truth.winner == "seller" else 0
            t["majority"] += getattr(votes, r.verdict.winner)
            t["truth"] += getattr(votes, r.truth.winner)
    return tally


def by_model(judged: Sequence[CaseResult]) -> dict[str, ModelBallots]:
    """Per seat model, over every judged case's final round (``Verdict.votes_by_model``)."""
    tally = _tally(judged, lambda verdict: verdict.votes_by_model.items())
    return {model: ModelBallots.of(t) for model, t in sorted(tally.items()) if t["ballots"]}


def _seat_votes(verdict: Verdict) -> list[tuple[str, Votes]]:
    """Each seat's final-round ballot as one vote, by persona; a seat that abstained casts none."""
    seats = verdict.jury.seats if verdict.jury else []
    return [
        (s.persona, Votes(buyer=int(s.vote == "buyer"), seller=int(s.vote == "seller")))
        for s in seats
        if s.vote is not None
    ]


def by_persona(judged: Sequence[CaseResult]) -> dict[str, PersonaBallots]:
    """Per persona, over every judged case's final round (``Verdict.jury``: who sat where, how each voted)."""
    return {
        persona: PersonaBallots.of(
            t,
            real_seller_share=t["real_seller"] / t["ballots"],
            tilt=(t["seller"] - t["real_seller"]) / t["ballots"],
        )
        for persona, t in _tally(judged, _seat_votes).items()
    }


# Margin thresholds of the risk-coverage table, on the 17-vote scale: a verdict is escalated when its
# margin is below the threshold (0: never for the margin; 3: 9:8; 5: 9:8 and 10:7; ... 17: all but 17:0)
MARGIN_THRESHOLDS = (0, 3, 5, 7, 9, 11, 13, 15, 17)
TARGET_ACCURACY = 0.95


class RiskPoint(BaseModel):
    """One operating point: escalate below ``margin_below`` (and for the other reasons the verdicts
    carry), decide the rest automatically."""

    model_config = ConfigDict(extra="forbid")

    margin_below: float | None = Field(description="None: nothing escalated, every verdict stands")
    escalated_share: float
    auto_decided: int
    accuracy: float | None = Field(None, description="on the cases decided automatically")
    vote_mae: float | None = Field(None, description="on the cases decided automatically")


class RiskCoverage(BaseModel):
    """Accuracy and vote MAE of what would be decided automatically against the share escalated, for
    a range of margin thresholds combined with the other escalation reasons as the run's settings
    (``escalate_on``) recorded them on each verdict. Computed from the verdicts: no model call."""

    model_config = ConfigDict(extra="forbid")

    points: list[RiskPoint]
    other_reasons_share: float = Field(description="verdicts escalated for a reason other than the margin")
    target_accuracy: float = TARGET_ACCURACY
    operating_point: RiskPoint | None = Field(
        None, description="the threshold keeping the most cases automatic whose automatic accuracy reaches the target"
    )


def _other_reasons(verdict: Verdict) -> bool:
    return any(r != "narrow_margin" for r in verdict.escalation_reasons)


def _point(judged: Sequence[CaseResult], margin_below: float | None) -> RiskPoint:
    def escalated(r: CaseResult) -> bool:
        assert r.verdict is not None
        if margin_below is None:
            return False
        return _other_reasons(r.verdict) or scaled_margin(r.verdict) < margin_below

    auto = [(r, r.verdict) for r in judged if r.verdict is not None and not escalated(r)]  # (all have one)
    errors = vote_errors([r.truth.seller for r, _ in auto], [v.votes for _, v in auto])
    return RiskPoint(
        margin_below=margin_below,
        escalated_share=(len(judged) - len(auto)) / len(judged),
        auto_decided=len(auto),
        accuracy=accuracy([r.truth.winner for r, _ in auto], [v.winner for _, v in auto]),
        vote_mae=errors.mae if errors else None,
    )


def risk_coverage(
    results: Sequence[CaseResult], thresholds: Sequence[float] = MARGIN_THRESHOLDS, target: float = TARGET_ACCURACY
) -> RiskCoverage | None:
    """The table for the cases with a verdict (None without any)."""
    judged = [r for r in results if r.verdict is not None]
    if not judged:
        return None
    points = [_point(judged, None), *(_point(judged, t) for t in thresholds)]
    reaching = [p for p in points if p.accuracy is not None and p.accuracy >= target]
    best = max(reaching, key=lambda p: (p.auto_decided, -(p.margin_below or 0)), default=None)
    return RiskCoverage(
        points=points,
        other_reasons_share=_mean([_other_reasons(r.verdict) for r in judged if r.verdict is not None]) or 0.0,
        target_accuracy=target,
        operating_point=best,
    )


class Summary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cases: int = Field(description="cases evaluated (swapped twins not counted)")
    verdicts: int
    failed: dict[str, int] = Field(
        default_factory=dict,
        description="the dataset's cases without a verdict, by "
        "reason; their party-swap twins are in swap_failed, both in failed_cases",
    )
    accuracy: float | None = None
    weighted_f1: float | None = None
    macro_f1: float | None = None
    vote_mae: float | None = None
    vote_rmse: float | None = None
    votes_scaled: bool = False
    recall_buyer: float | None = None
    recall_seller: float | None = None
    seller_share_predicted: float | None = None
    seller_share_real: float | None = Field(None, description="over the same cases that have a verdict")
    swap_pairs: int = Field(0, description="cases whose party-swapped twin was also run")
    swap_failed: dict[str, int] = Field(default_factory=dict, description="twins without a verdict, by reason")
    swap_consistency: float | None = None
    swap_vote_mae: float | None = None
    tokens_per_case: dict[str, float] | None = Field(
        None, description="mean per verdict by kind; thinking is part of output, total is input + output + cache"
    )
    cost_per_case_usd: float | None = Field(
        None,
        description="mean per verdict, at llm_prices or else genai-prices' list (0: offline); without the "
        "unpriced calls, so a floor when there are any",
    )
    cost_sources: dict[str, float] = Field(
        default_factory=dict, description="the run's USD by where the prices came from (Usage.cost_sources)"
    )
    unpriced_calls: int = Field(0, description="calls to a model no price source knows, over every verdict")
    calls_per_case: float | None = None
    rounds_mean: float | None = None
    early_stop_share: float | None = None
    latency_p50_s: float | None = None
    latency_p95_s: float | None = None
    budget_stops: int = Field(0, description="verdicts the per-case budget cut short (budget_reached)")
    verified: int = Field(0, description="verdicts whose justification was verified (verifier or JURIS on)")
    verification_passed: float | None = Field(None, description="of those, the share that passed")
    verifier_turns_mean: float | None = Field(None, description="verifier calls per verified verdict")
    claims_removed: int = Field(0, description="untraceable sentences removed from justifications that failed")
    by_model: dict[str, ModelBallots] = Field(default_factory=dict, description="juror seats by model")
    by_persona: dict[str, PersonaBallots] = Field(
        default_factory=dict, description="the jury balance: each persona's ballots (overall only)"
    )
    escalated_share: float | None = Field(None, description="verdicts published escalated, under the run's settings")
    precedent_consistency: dict[str, int] = Field(
        default_factory=dict,
        description="verdicts by their consistency with precedent: consistent, inconsistent, "
        "no_precedent (none without a precedent base)",
    )
    consistency_rate: float | None = Field(
        None, description="consistent over consistent + inconsistent: how often the nearest precedents agreed"
    )
    risk_coverage: RiskCoverage | None = Field(None, description="overall only")
    by_court: dict[str, CourtScores] = Field(
        default_factory=dict,
        description="per court that sat (Verdict.court), over its cases with a verdict (overall only)",
    )
    by_category: dict[str, Summary] = Field(default_factory=dict)
    by_band: dict[str, Summary] = Field(default_factory=dict)


class CourtScores(BaseModel):
    """One court's cases (Verdict.court): what it was, what it scored, and what it cost at list prices."""

    model_config = ConfigDict(extra="forbid")

    jurors: int
    rounds: int
    model: str | None = Field(None, description="the model the court put every call on; None = as configured")
    verifier: bool
    paper: bool = Field(description="the paper's court: 17 jurors, 3 rounds, unverified, the configured model")
    usd_per_case_listed: float | None = Field(
        None,
        description="its tokens at the dated list prices (llm_prices) of its model (the run's model setting "
        "when it names none): on a stand-in, what the same tokens would cost on that model; None if unpriced",
    )
    summary: Summary


class Pricing(NamedTuple):
    """What a court's tokens are priced with: the price table, and the model of a court that names none."""

    prices: dict[str, TokenPrices]
    model: str


def _consistency_fields(verdicts: Sequence[Verdict]) -> dict:
    outcomes = Counter(v.precedent_consistency.outcome for v in verdicts if v.precedent_consistency is not None)
    decided = outcomes["consistent"] + outcomes["inconsistent"]
    return {
        "precedent_consistency": dict(sorted(outcomes.items())),
        "consistency_rate": outcomes["consistent"] / decided if decided else None,
    }


def listed_cost(verdicts: Sequence[Verdict], court: Court, pricing: Pricing) -> float | None:
    """Mean USD per verdict at the list prices of the court's model (not the backend's bill: a
    stand-in bills nothing, and its token counts are what is priced here)."""
    table = PriceTable(pricing.prices)
    # priced as a billing backend would be: the stand-ins' own label would price everything at 0
    costs = [table.cost("listed", court.model or pricing.model, v.tokens) for v in verdicts]
    return None if not costs or any(c is None for c in costs) else _mean([c for c in costs if c is not None])


def by_court(judged: Sequence[CaseResult], pricing: Pricing | None) -> dict[str, CourtScores]:
    """Per court, in order of first appearance; verdicts without a court record (written before courts
    existed) are left out: what sat on them is not known."""
    groups: dict[str, list[CaseResult]] = defaultdict(list)
    courts: dict[str, Court] = {}
    for r in judged:
        assert r.verdict is not None
        if (court := r.verdict.court) is not None:
            groups[court.name].append(r)
            courts.setdefault(court.name, court)
    scores = {}
    for name, results in groups.items():
        court = courts[name]
        verdicts = [r.verdict for r in results if r.verdict is not None]
        scores[name] = CourtScores(
            jurors=court.jurors,
            rounds=court.rounds,
            model=court.model,
            verifier=court.verifier,
            paper=is_paper_court(court),
            usd_per_case_listed=listed_cost(verdicts, court, pricing) if pricing else None,
            summary=_summary(results),
        )
    return scores


def _swap_fields(results: Sequence[CaseResult]) -> dict:
    pairs = [r for r in results if r.swapped is not None or r.swapped_failure is not None]
    both = [(r.verdict, r.swapped) for r in pairs if r.verdict is not None and r.swapped is not None]
    consistent = sum(v.winner != s.winner for v, s in both)
    # the twin's buyer votes should equal the original's seller votes (both on the 17 scale)
    scaled = [(scaled_seller_votes(v.votes), scaled_seller_votes(s.votes)) for v, s in both]
    known = [(a, b) for a, b in scaled if a is not None and b is not None]
    single_judge = len(known) < len(scaled)  # a single judge's verdict has no votes to compare
    return {
        "swap_pairs": len(pairs),
        "swap_failed": dict(Counter(r.swapped_failure or "unknown" for r in pairs if r.swapped is None)),
        "swap_consistency": consistent / len(pairs) if pairs else None,
        "swap_vote_mae": None if single_judge else _mean([abs(a - (JURY_SIZE - b)) for a, b in known]),
    }


def _verification_fields(verdicts: Sequence[Verdict]) -> dict:
    checked = [v.verification for v in verdicts if v.verification is not None]
    return {
        "verified": len(checked),
        "verification_passed": _mean([c.status == "passed" for c in checked]),
        "verifier_turns_mean": _mean([c.turns for c in checked]),
        "claims_removed": sum(len(c.removed_claims) for c in checked),
    }


def _summary(results: Sequence[CaseResult]) -> Summary:
    judged = [r for r in results if r.verdict is not None]
    verdicts = [r.verdict for r in results if r.verdict is not None]
    y_true = [r.truth.winner for r in judged]
    y_pred = [v.winner for v in verdicts]
    errors = vote_errors([r.truth.seller for r in judged], [v.votes for v in verdicts])
    recall = recall_by_side(y_true, y_pred)
    usage = [v.tokens for v in verdicts]
    tokens = {
        "input": [u.input_tokens for u in usage],
        "output": [u.output_tokens for u in usage],
        "thinking": [u.thinking_tokens for u in usage],
        "cache_read": [u.cache_read_tokens for u in usage],
        "cache_write": [u.cache_write_tokens for u in usage],
        "total": [u.total_tokens for u in usage],
    }
    latencies = [v.latency_s for v in verdicts]
    return Summary(
        cases=len(results),
        verdicts=len(verdicts),
        failed=dict(Counter(r.failure or "unknown" for r in results if r.verdict is None)),
        accuracy=accuracy(y_true, y_pred),
        weighted_f1=weighted_f1(y_true, y_pred),
        macro_f1=macro_f1(y_true, y_pred),
        vote_mae=errors.mae if errors else None,
        vote_rmse=errors.rmse if errors else None,
        votes_scaled=bool(errors and errors.scaled),
        recall_buyer=recall["buyer"],
        recall_seller=recall["seller"],
        seller_share_predicted=_mean([p == "seller" for p in y_pred]),
        seller_share_real=_mean([t == "seller" for t in y_true]),
        tokens_per_case={k: _mean(v) for k, v in tokens.items()} if verdicts else None,
        cost_per_case_usd=_mean([u.cost_usd for u in usage]),
        cost_sources={k: round(v, 6) for k, v in sum(usage, Usage()).cost_sources.items()},
        unpriced_calls=sum(u.unpriced_calls for u in usage),
        calls_per_case=_mean([u.calls for u in usage]),
        rounds_mean=_mean([v.rounds_used for v in verdicts]),
        early_stop_share=_mean([v.early_stopped for v in verdicts]),
        latency_p50_s=percentile(latencies, 50),
        latency_p95_s=percentile(latencies, 95),
        budget_stops=sum(v.budget_reached for v in verdicts),
        escalated_share=_mean([v.escalated for v in verdicts]),
        **_consistency_fields(verdicts),
        **_verification_fields(verdicts),
        by_model=by_model(judged),
        **_swap_fields(results),
    )


def summarize(results: Sequence[CaseResult], pricing: Pricing | None = None) -> Summary:
    """Overall, per court, per category and per difficulty band. Results for swapped twins passed as
    cases of their own (id ending ":swap") are left out: twins count only in the swap fields.
    ``pricing`` prices each court's tokens at list prices (``CourtScores.usd_per_case_listed``)."""
    results = [r for r in results if not is_swapped(r.case_id)]
    by_category: dict[str, list[CaseResult]] = defaultdict(list)
    by_band: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        by_category[r.category].append(r)
        by_band[difficulty_band(r.truth)].append(r)
    overall = _summary(results)
    overall.risk_coverage = risk_coverage(results)
    overall.by_persona = by_persona([r for r in results if r.verdict is not None])
    overall.by_court = by_court([r for r in results if r.verdict is not None], pricing)
    overall.by_category = {k: _summary(v) for k, v in sorted(by_category.items())}
    overall.by_band = {b: _summary(by_band[b]) for b in ("hard", "medium", "easy") if b in by_band}
    return overall


Summary.model_rebuild()  # by_court names CourtScores, defined after it
