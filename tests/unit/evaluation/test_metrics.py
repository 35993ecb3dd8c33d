"""Evaluation metrics: a worked example by hand, the edge cases, and agreement with scikit-learn."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime

import pytest
from sklearn.metrics import accuracy_score, f1_score, mean_absolute_error, mean_squared_error, recall_score

from cyberjurors.evaluation.results import CaseResult
from cyberjurors.evaluation.scores import (
    accuracy,
    f1_per_class,
    macro_f1,
    percentile,
    recall_by_side,
    summarize,
    vote_errors,
    weighted_f1,
)
from cyberjurors.schemas import GroundTruthVotes, Usage, Verdict, Votes


def verdict(
    case_id: str,
    buyer: int,
    seller: int,
    *,
    latency: float = 1.0,
    rounds: int = 1,
    early: bool = False,
    tokens: Usage | None = None,
    category: str = "food",
) -> Verdict:
    votes = Votes(buyer=buyer, seller=seller)
    return Verdict(
        verdict_id=f"v-{case_id}",
        case_id=case_id,
        category=category,
        winner=votes.winner,
        votes=votes,
        margin=abs(seller - buyer),
        rounds_used=rounds,
        early_stopped=early,
        justification="test",
        cited_clues=[],
        focus="test",
        tokens=tokens or Usage(),
        latency_s=latency,
        backend="scripted",
        models=["m"],
        decided_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def result(
    case_id: str,
    truth: tuple[int, int],
    pred: tuple[int, int] | None,
    *,
    category: str = "food",
    failure: str | None = None,
    swapped: tuple[int, int] | None = None,
    swapped_failure: str | None = None,
    **kw,
) -> CaseResult:
    return CaseResult(
        case_id=case_id,
        category=category,
        truth=GroundTruthVotes(buyer=truth[0], seller=truth[1]),
        verdict=verdict(case_id, *pred, category=category, **kw) if pred else None,
        failure=failure,
        swapped=verdict(case_id + ":swap", *swapped) if swapped else None,
        swapped_failure=swapped_failure,
    )


# Worked example, votes as (buyer, seller):
#   case  truth  -> winner   pred   -> winner   seller-vote error   band (margin)    category
#   c1    14:3      buyer    12:5      buyer     5-3  = +2           medium (11)      appliances
#   c2    10:7      buyer     6:11     seller   11-7  = +4           hard (3)         appliances
#   c3     5:12     seller    4:13     seller   13-12 = +1           medium (7)       food
#   c4     2:15     seller    9:8      buyer     8-15 = -7           easy (13)        food
#   c5     9:8      buyer    17:0      buyer     0-8  = -8           hard (1)         food
#   c6    17:0      buyer    (timeout: no verdict, left out of every metric)
# accuracy = 3/5 = 0.6
# buyer:  TP 2 (c1, c5), FP 1 (c4), FN 1 (c2) -> F1 = 2*2/(2*2+1+1) = 4/6 = 2/3
# seller: TP 1 (c3),     FP 1 (c2), FN 1 (c4) -> F1 = 2*1/(2*1+1+1) = 2/4 = 1/2
# weighted F1 = (3 * 2/3 + 2 * 1/2) / 5 = 3/5 = 0.6;  macro F1 = (2/3 + 1/2) / 2 = 7/12
# recall buyer = 2/3, seller = 1/2
# MAE = (2+4+1+7+8)/5 = 22/5 = 4.4;  RMSE = sqrt((4+16+1+49+64)/5) = sqrt(26.8)
# latency 1, 2, 3, 4, 10: p50 = 3; p95 at rank 0.95*4 = 3.8 -> 4 + 0.8*(10-4) = 8.8
# swap: c1 twin 5:12 (seller: flipped, |5 - 5| = 0); c2 twin 8:9 (seller again: not flipped,
#       |11 - 8| = 3); c3 twin failed -> 3 pairs, consistency 1/3, twin vote MAE (0+3)/2 = 1.5
def worked_example() -> list[CaseResult]:
    return [
        result(
            "c1",
            (14, 3),
            (12, 5),
            category="appliances",
            latency=1,
            swapped=(5, 12),
            tokens=Usage(input_tokens=100, output_tokens=10, cache_read_tokens=1000, calls=20, cost_usd=0.25),
            rounds=1,
            early=True,
        ),
        result(
            "c2",
            (10, 7),
            (6, 11),
            category="appliances",
            latency=2,
            swapped=(8, 9),
            tokens=Usage(
                input_tokens=300, output_tokens=30, cache_write_tokens=500, thinking_tokens=20, calls=40, cost_usd=0.5
            ),
            rounds=3,
        ),
        result("c3", (5, 12), (4, 13), latency=3, swapped_failure="llm_timeout", rounds=2),
        result("c4", (2, 15), (9, 8), latency=4, rounds=3),
        result("c5", (9, 8), (17, 0), latency=10, rounds=1, early=True),
        result("c6", (17, 0), None, failure="timeout"),
    ]


def test_worked_example_by_hand() -> None:
    s = summarize(worked_example())
    assert (s.cases, s.verdicts, s.failed) == (6, 5, {"timeout": 1})
    assert s.accuracy == pytest.approx(0.6)
    assert s.weighted_f1 == pytest.approx(0.6)
    assert s.macro_f1 == pytest.approx(7 / 12)
    assert s.recall_buyer == pytest.approx(2 / 3)
    assert s.recall_seller == pytest.approx(1 / 2)
    assert s.vote_mae == pytest.approx(4.4)
    assert s.vote_rmse == pytest.approx(math.sqrt(26.8))
    assert s.votes_scaled is False
    assert s.seller_share_predicted == pytest.approx(2 / 5)  # c2, c3
    assert s.seller_share_real == pytest.approx(2 / 5)  # c3, c4; c6 (no verdict) not counted
    assert s.latency_p50_s == pytest.approx(3)
    assert s.latency_p95_s == pytest.approx(8.8)
    assert s.rounds_mean == pytest.approx(10 / 5)
    assert s.early_stop_share == pytest.approx(2 / 5)
    assert s.calls_per_case == pytest.approx(60 / 5)
    assert s.tokens_per_case == pytest.approx(
        {"input": 80, "output": 8, "thinking": 4, "cache_read": 200, "cache_write": 100, "total": 388}
    )  # thinking is part of output
    assert s.cost_per_case_usd == pytest.approx(0.75 / 5)
    assert (s.swap_pairs, s.swap_failed) == (3, {"llm_timeout": 1})
    assert s.swap_consistency == pytest.approx(1 / 3)
    assert s.swap_vote_mae == pytest.approx(1.5)


def test_worked_example_by_category_and_band() -> None:
    s = summarize(worked_example())
    assert set(s.by_category) == {"appliances", "food"}
    food = s.by_category["food"]
    assert (food.cases, food.verdicts, food.failed) == (4, 3, {"timeout": 1})
    assert food.accuracy == pytest.approx(2 / 3)  # c3, c5 right; c4 wrong
    assert s.by_category["appliances"].accuracy == pytest.approx(1 / 2)
    assert list(s.by_band) == ["hard", "medium", "easy"]
    assert s.by_band["hard"].cases == 2 and s.by_band["hard"].accuracy == pytest.approx(1 / 2)  # c2 x, c5 ok
    assert s.by_band["medium"].accuracy == pytest.approx(1.0)  # c1, c3
    assert s.by_band["easy"].verdicts == 1 and s.by_band["easy"].accuracy == 0.0  # c4; c6 (17:0) failed
    assert s.by_band["easy"].failed == {"timeout": 1}
    # nested summaries do not nest further
    assert all(not sub.by_category and not sub.by_band for sub in [*s.by_category.values(), *s.by_band.values()])


def test_class_never_predicted_has_f1_zero() -> None:
    y_true = ["buyer", "seller", "seller", "buyer"]
    y_pred = ["buyer"] * 4
    assert f1_per_class(y_true, y_pred) == pytest.approx({"buyer": 2 / 3, "seller": 0.0})  # 2*2/(4+2+0)
    assert macro_f1(y_true, y_pred) == pytest.approx(1 / 3)
    assert weighted_f1(y_true, y_pred) == pytest.approx((2 * 2 / 3 + 0) / 4)
    assert recall_by_side(y_true, y_pred) == {"buyer": 1.0, "seller": 0.0}


def test_all_one_class() -> None:
    y_true = ["seller"] * 3
    assert accuracy(y_true, y_true) == 1.0
    assert macro_f1(y_true, y_true) == 1.0  # only "seller" is present anywhere
    assert recall_by_side(y_true, y_true) == {"buyer": None, "seller": 1.0}
    # a label only predicted, never true, still counts in macro F1, with F1 0
    y_pred = ["seller", "seller", "buyer"]
    assert f1_per_class(y_true, y_pred) == pytest.approx({"buyer": 0.0, "seller": 0.8})
    assert macro_f1(y_true, y_pred) == pytest.approx(0.4)
    assert weighted_f1(y_true, y_pred) == pytest.approx(0.8)  # buyer has no support


def test_single_judge_has_no_vote_errors() -> None:
    assert vote_errors([3, 12], [Votes(buyer=1, seller=0), Votes(buyer=0, seller=1)]) is None
    s = summarize([result("a", (14, 3), (1, 0)), result("b", (5, 12), (0, 1))])
    assert s.accuracy == 1.0
    assert s.vote_mae is None and s.vote_rmse is None and s.votes_scaled is False


def test_nine_juror_votes_are_scaled_to_seventeen() -> None:
    # 3 of 9 for the seller is 3/9*17 = 5.667 on the 17 scale; truth 3 -> error 2.667
    # 6 of 9 -> 11.333; truth 12 -> error -0.667
    errors = vote_errors([3, 12], [Votes(buyer=6, seller=3), Votes(buyer=3, seller=6)])
    assert errors.scaled is True
    assert errors.mae == pytest.approx((8 / 3 + 2 / 3) / 2)
    assert errors.rmse == pytest.approx(math.sqrt(((8 / 3) ** 2 + (2 / 3) ** 2) / 2))
    assert vote_errors([3], [Votes(buyer=14, seller=3)]).scaled is False
    s = summarize([result("a", (14, 3), (6, 3))])
    assert s.votes_scaled is True and s.vote_mae == pytest.approx(8 / 3)


def test_no_verdicts_at_all() -> None:
    s = summarize(
        [
            result("a", (14, 3), None, failure="llm_error"),
            result("b", (5, 12), None, failure="timeout"),
            result("c", (5, 12), None),
        ]
    )
    assert (s.cases, s.verdicts) == (3, 0)
    assert s.failed == {"llm_error": 1, "timeout": 1, "unknown": 1}
    for field in (
        "accuracy",
        "weighted_f1",
        "macro_f1",
        "vote_mae",
        "vote_rmse",
        "recall_buyer",
        "recall_seller",
        "seller_share_predicted",
        "seller_share_real",
        "swap_consistency",
        "swap_vote_mae",
        "tokens_per_case",
        "cost_per_case_usd",
        "calls_per_case",
        "rounds_mean",
        "early_stop_share",
        "latency_p50_s",
        "latency_p95_s",
    ):
        assert getattr(s, field) is None, field
    empty = summarize([])
    assert (empty.cases, empty.accuracy, empty.by_category) == (0, None, {})
    assert accuracy([], []) is None and percentile([], 50) is None


def test_failures_do_not_change_the_metrics() -> None:
    base = [result("a", (14, 3), (12, 5)), result("b", (5, 12), (12, 5))]
    with_failures = [
        *base,
        result("c", (17, 0), None, failure="timeout"),
        result("d", (0, 17), None, failure="invalid_json"),
    ]
    a, b = summarize(base), summarize(with_failures)
    assert b.failed == {"timeout": 1, "invalid_json": 1}
    assert (b.cases, b.verdicts) == (4, 2)
    for field in ("accuracy", "weighted_f1", "macro_f1", "vote_mae", "vote_rmse", "seller_share_real"):
        assert getattr(a, field) == getattr(b, field), field


def test_swapped_twins_count_only_in_swap_fields() -> None:
    # a twin's verdict agrees with the truth of the original only by accident; it must not
    # raise or lower accuracy, even when a driver hands it over as a case of its own
    plain = summarize([result("a", (14, 3), (12, 5))])
    paired = summarize([result("a", (14, 3), (12, 5), swapped=(12, 5)), result("a:swap", (3, 14), (12, 5))])
    assert paired.cases == 1 and paired.accuracy == plain.accuracy == 1.0
    assert paired.tokens_per_case == plain.tokens_per_case
    assert (paired.swap_pairs, paired.swap_consistency, paired.swap_vote_mae) == (1, 0.0, 7.0)  # |5 - 12|
    assert plain.swap_pairs == 0 and plain.swap_consistency is None and plain.swap_vote_mae is None


def test_percentile_interpolates() -> None:
    assert percentile([10.0], 95) == 10.0
    assert percentile([0, 10], 50) == 5.0
    assert percentile([4, 1, 3, 2], 25) == pytest.approx(1.75)  # rank 0.75 between 1 and 2


@pytest.mark.parametrize("seed", range(8))
def test_agrees_with_scikit_learn(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    skew = rng.random()
    truth = [rng.randint(0, 17) for _ in range(n)]
    jury = rng.choice([17, 9, 5])
    pred = [rng.randint(0, jury) if rng.random() > skew else jury for _ in range(n)]  # often all-seller
    y_true = ["seller" if s > 17 - s else "buyer" for s in truth]
    y_pred = ["seller" if s > jury - s else "buyer" for s in pred]

    assert accuracy(y_true, y_pred) == pytest.approx(accuracy_score(y_true, y_pred))
    assert weighted_f1(y_true, y_pred) == pytest.approx(f1_score(y_true, y_pred, average="weighted", zero_division=0))
    assert macro_f1(y_true, y_pred) == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0))
    labels = sorted(set(y_true))
    sk_recall = dict(
        zip(labels, recall_score(y_true, y_pred, labels=labels, average=None, zero_division=0), strict=True)
    )
    ours = recall_by_side(y_true, y_pred)
    for side in ("buyer", "seller"):
        assert ours[side] == (pytest.approx(sk_recall[side]) if side in sk_recall else None)

    scaled = [s / jury * 17 for s in pred]
    errors = vote_errors(truth, [Votes(buyer=jury - s, seller=s) for s in pred])
    assert errors.scaled is (jury != 17)
    assert errors.mae == pytest.approx(mean_absolute_error(truth, scaled))
    assert errors.rmse == pytest.approx(math.sqrt(mean_squared_error(truth, scaled)))

    s = summarize(
        [result(f"c{i}", (17 - t, t), (jury - p, p)) for i, (t, p) in enumerate(zip(truth, pred, strict=False))]
    )
    assert s.accuracy == pytest.approx(accuracy_score(y_true, y_pred))
    assert s.macro_f1 == pytest.approx(f1_score(y_true, y_pred, average="macro", zero_division=0))


# Risk-coverage by hand, votes as (buyer, seller):
#   case  truth  pred   margin  other reason  right?  seller-vote error
#   r1    14:3   16:1   15      -             yes     |1-3|  = 2
#   r2    10:7    8:9    1      -             no      |9-7|  = 2
#   r3     5:12   6:11   5      -             yes     |11-12| = 1
#   r4     2:15  10:7    3      -             no      |7-15| = 8
#   r5    12:5   13:4    9      injection     yes     |4-5|  = 1
#   r6    (timeout: not in the table)
# nothing escalated: 5 auto, acc 3/5, MAE 14/5;  other reasons only (r5 out): acc 2/4, MAE 13/4, 20% escalated
# margin < 3 (r2, r5 out): acc 2/3, MAE 11/3;  < 5 (r2, r4, r5 out): acc 2/2, MAE 3/2, 60% escalated
# < 7 and < 9 ... < 15 (only r1 left): acc 1, MAE 2;  < 17: nothing left, acc and MAE undefined
# 95% on what is auto-decided: margin < 5 keeps the most (2 of 5)
def test_risk_coverage_by_hand():
    from cyberjurors.evaluation.scores import risk_coverage

    results = [
        result("r1", (14, 3), (16, 1)),
        result("r2", (10, 7), (8, 9)),
        result("r3", (5, 12), (6, 11)),
        result("r4", (2, 15), (10, 7)),
        result("r5", (12, 5), (13, 4)),
        result("r6", (17, 0), None, failure="timeout"),
    ]
    results[4] = results[4].model_copy(
        update={
            "verdict": results[4].verdict.model_copy(update={"escalated": True, "escalation_reasons": ["injection"]})
        }
    )
    # a verdict's own narrow_margin flag is the run's threshold: the table applies its own instead
    results[1] = results[1].model_copy(
        update={
            "verdict": results[1].verdict.model_copy(
                update={"escalated": True, "escalation_reasons": ["narrow_margin"]}
            )
        }
    )
    rc = risk_coverage(results)
    table = {p.margin_below: (p.escalated_share, p.auto_decided, p.accuracy, p.vote_mae) for p in rc.points}
    assert list(table) == [None, 0, 3, 5, 7, 9, 11, 13, 15, 17]
    assert table[None] == pytest.approx((0.0, 5, 3 / 5, 14 / 5))
    assert table[0] == pytest.approx((1 / 5, 4, 2 / 4, 13 / 4))
    assert table[3] == pytest.approx((2 / 5, 3, 2 / 3, 11 / 3))
    assert table[5] == pytest.approx((3 / 5, 2, 1.0, 3 / 2))
    for t in (7, 9, 11, 13, 15):
        assert table[t] == pytest.approx((4 / 5, 1, 1.0, 2.0)), t
    assert table[17] == (1.0, 0, None, None)
    assert rc.other_reasons_share == pytest.approx(1 / 5)
    assert rc.operating_point.margin_below == 5
    assert risk_coverage(results, target=0.6).operating_point.margin_below is None  # nothing needs escalating
    assert risk_coverage([results[5]]) is None
    assert summarize(results).risk_coverage == rc


def test_summaries_per_court_and_the_consistency_rate():
    from cyberjurors.config import DEFAULT_LLM_PRICES
    from cyberjurors.evaluation.scores import Pricing
    from cyberjurors.schemas import Court, PrecedentConsistency

    small = Court(name="small", jurors=5, rounds=1, model="claude-haiku-4-5", verifier=False, base_currency="EUR")
    paper = Court(name="standard", jurors=17, rounds=3, verifier=False, base_currency="EUR")
    spent = Usage(input_tokens=1_000_000)  # 1 M uncached input: the model's input price in USD

    def judged(case_id, truth, pred, court, outcome=None):  # type: ignore[no-untyped-def]
        r = result(case_id, truth, pred, tokens=spent)
        found = PrecedentConsistency(outcome=outcome, min_similarity=0.6) if outcome else None
        return r.model_copy(
            update={"verdict": r.verdict.model_copy(update={"court": court, "precedent_consistency": found})}
        )

    s = summarize(
        [
            judged("a", (14, 3), (4, 1), small, "consistent"),
            judged("b", (3, 14), (4, 1), small, "inconsistent"),
            judged("c", (3, 14), (2, 15), paper, "consistent"),
            judged("d", (3, 14), (2, 15), paper, "no_precedent"),
            judged("e", (3, 14), (2, 15), paper),  # judged without a precedent base
            result("f", (3, 14), None, failure="timeout"),
        ],
        Pricing(DEFAULT_LLM_PRICES, "claude-sonnet-5-5"),
    )
    assert s.precedent_consistency == {"consistent": 2, "inconsistent": 1, "no_precedent": 1}
    assert s.consistency_rate == pytest.approx(2 / 3)  # no_precedent and unchecked verdicts are not compared
    assert list(s.by_court) == ["small", "standard"]
    by_small, by_paper = s.by_court["small"], s.by_court["standard"]
    assert (by_small.summary.verdicts, by_small.summary.accuracy, by_small.summary.consistency_rate) == (2, 0.5, 0.5)
    assert (by_paper.summary.verdicts, by_paper.summary.accuracy, by_paper.paper, by_small.paper) == (
        3,
        1.0,
        True,
        False,
    )
    # each court's tokens at its own model's dated list price: haiku 1 USD, the run's sonnet 2 USD per M input
    assert (by_small.usd_per_case_listed, by_paper.usd_per_case_listed) == (pytest.approx(1.0), pytest.approx(2.0))
    assert summarize([judged("g", (3, 14), (2, 15), paper)]).by_court["standard"].usd_per_case_listed is None
