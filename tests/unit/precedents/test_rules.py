"""The precedent base's numeric rules at their edges: guideline confidence after an outcome, from
many starting confidences (agree: c + 0.1(1 - c); disagree: 0.8 c; retired below
``guideline_min_confidence``), and the cold start exactly at ``precedent_min_in_category``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from cyberjurors.config import Settings
from cyberjurors.precedents import learning
from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.models import Document, Guideline, UpsertReport
from cyberjurors.precedents.retrieval import PersonaMatcher, retrieve
from cyberjurors.schemas import CaseFile, Focus, OutcomeReported, Usage, Verdict, Votes
from cyberjurors.schemas.personas import load_personas

from ...factories import case

NOW = datetime(2026, 11, 1, tzinfo=UTC)
STARTS = [0.0, 0.05, 0.1, 0.2, 0.25, 0.3, 0.333, 0.5, 0.55, 0.7, 0.9, 0.99, 1.0]
MIN = 0.2


def agreed(c: float) -> float:
    return c + 0.1 * (1 - c)  # docs/concepts/precedents.md: c + 0.1(1 - c), a tenth of the way to 1


def disagreed(c: float) -> float:
    return 0.8 * c  # docs/concepts/precedents.md: 0.8 c, loses a fifth


def rule(
    gid: str = "g-r1", confidence: float = 0.5, category: str = "clothing", text: str | None = None, **kw
) -> Guideline:
    return Guideline(
        id=gid,
        rule=text or f"Rule {gid}: a torn seam on arrival favours the buyer.",
        category=category,
        dispute_type="quality",
        favours="buyer",
        confidence=confidence,
        supporting_cases=["hist-1"],
        **kw,
    )


# --- confidence after an outcome ------------------------------------------------------------


@pytest.mark.parametrize("c", STARTS)
def test_agreement_moves_confidence_a_tenth_of_the_way_to_one(c):
    new = learning.adjust(rule(confidence=c), True, "case-1", MIN, NOW)
    assert new.confidence == pytest.approx(agreed(c), abs=5e-5)
    assert new.version == 2 and new.history[-1].case_id == "case-1" and new.history[-1].confidence == new.confidence
    assert new.confidence >= c and new.active
    assert new.history[-1].reason == "outcome_agreed"


@pytest.mark.parametrize("c", STARTS)
def test_disagreement_takes_a_fifth_off_and_retires_below_the_minimum(c):
    new = learning.adjust(rule(confidence=c), False, "case-1", MIN, NOW)
    assert new.confidence == pytest.approx(disagreed(c), abs=5e-5)
    assert new.version == 2 and new.history[-1].case_id == "case-1"
    retired = disagreed(c) < MIN - 5e-5
    assert new.active is not retired
    assert new.history[-1].reason == ("retired" if retired else "outcome_disagreed")


@pytest.mark.parametrize(
    "c, minimum, retired",
    [
        (0.25, 0.2, False),  # 0.8 x 0.25 = 0.2: at the minimum is not below it
        (0.2499, 0.2, True),  # 0.19992
        (0.5, 0.4, False),  # 0.4 exactly
        (0.5, 0.4001, True),
        (0.375, 0.3, False),  # 0.3 exactly
        (0.9, 0.0, False),  # a minimum of 0 retires nothing
    ],
)
def test_retirement_is_strictly_below_the_minimum(c, minimum, retired):
    new = learning.adjust(rule(confidence=c), False, "case-1", minimum, NOW)
    assert new.active is not retired


@pytest.mark.parametrize("c", [0.0, 0.05, 0.1, 0.15])
def test_agreement_never_retires_a_guideline(c):
    """A rule distilled with a confidence under the minimum that an outcome then confirms gains
    confidence; it is not retired for it."""
    new = learning.adjust(rule(confidence=c), True, "case-1", MIN, NOW)
    assert new.active and new.confidence == pytest.approx(agreed(c), abs=5e-5)


@pytest.mark.parametrize("c", [0.3, 0.7])
def test_repeated_outcomes_compound(c):
    g = rule(confidence=c)
    expected = c
    for n, agree in enumerate([True, False, True, True, False]):
        g = learning.adjust(g, agree, f"case-{n}", MIN, NOW)
        expected = round(agreed(expected) if agree else disagreed(expected), 4)
        assert g.confidence == pytest.approx(expected, abs=1e-9) and g.version == n + 2
    assert [h.case_id for h in g.history] == [f"case-{n}" for n in range(5)]


def test_a_replayed_outcome_or_a_retired_guideline_changes_nothing():
    once = learning.adjust(rule(confidence=0.5), True, "case-1", MIN, NOW)
    assert learning.adjust(once, True, "case-1", MIN, NOW) is None
    assert learning.adjust(once, False, "case-1", MIN, NOW) is None
    assert learning.adjust(rule(confidence=0.9, active=False), True, "case-2", MIN, NOW) is None


class DictIndex:
    """Just enough of the PrecedentIndex protocol for learning: get and upsert."""

    embedding_model = "none"

    def __init__(self, documents: Sequence[Document]):
        self.docs = {d.id: d for d in documents}

    async def get(self, ids: Sequence[str]) -> list[Document]:
        return [self.docs[i] for i in ids if i in self.docs]

    async def upsert(self, documents: Sequence[Document]) -> UpsertReport:
        self.docs.update({d.id: d for d in documents})
        return UpsertReport(indexed=[d.id for d in documents])


CASE = case("learn-1")


def verdict(winner: str, cited: list[str]) -> Verdict:
    votes = Votes(buyer=12, seller=5) if winner == "buyer" else Votes(buyer=5, seller=12)
    return Verdict(
        verdict_id="v",
        case_id=CASE.case_id,
        category="clothing",
        winner=winner,
        votes=votes,
        margin=7,
        rounds_used=1,
        early_stopped=True,
        justification="j",
        cited_clues=[],
        cited_precedents=cited,
        focus="f",
        tokens=Usage(),
        latency_s=1,
        backend="scripted",
        models=["scripted"],
        decided_at=NOW,
    )


@pytest.mark.parametrize("starts", [(0.1, 0.5, 0.9), (0.0, 0.26, 1.0)])
@pytest.mark.parametrize("ours, real", [("buyer", "buyer"), ("buyer", "seller"), ("seller", "seller")])
async def test_learn_applies_the_rule_to_every_cited_guideline_and_stores_it(starts, ours, real):
    guidelines = [rule(f"g-{n}", c) for n, c in enumerate(starts)]
    untouched = rule("g-other", 0.6)
    index = DictIndex([Document.of_guideline(g) for g in [*guidelines, untouched]])
    s = Settings(llm_backend="offline", precedent_backend="embedded", guideline_min_confidence=0.25)
    outcome = OutcomeReported(
        case_id=CASE.case_id, votes={"buyer": 11, "seller": 6} if real == "buyer" else {"buyer": 3, "seller": 14}
    )
    report = await learning.learn(
        outcome, verdict(ours, [g.ref for g in guidelines]), CaseFile(case=CASE, received_at=NOW), index, s, NOW
    )
    agree = ours == real
    assert report.agreed is agree and (report.case_added == CASE.case_id) is agree
    for g in guidelines:
        stored = index.docs[g.doc_id].guideline
        expected = agreed(g.confidence) if agree else disagreed(g.confidence)
        assert stored.confidence == pytest.approx(expected, abs=5e-5) and stored.version == 2
        assert stored.active is (agree or expected >= 0.25)
    assert (report.raised if agree else report.lowered) == [f"{g.id}@2" for g in guidelines]
    assert report.retired == [g.id for g in guidelines if not agree and disagreed(g.confidence) < 0.25]
    assert index.docs[untouched.doc_id].guideline == untouched  # not cited: not touched


# --- cold start at precedent_min_in_category -------------------------------------------------

CLOTHING = [
    "A torn seam in the buyer's unboxing photo wins the buyer a refund.",
    "Make-up stains on returned clothing mean it was worn: the seller wins.",
    "A garment that differs from the listing photos in colour entitles the buyer to a return.",
    "Sizing that contradicts the seller's own size chart entitles the buyer to a return.",
    "Platform rules require original tags attached for any clothing return.",
]
FOOD = [
    "Food delivered past its best-before date is refunded to the buyer.",
    "A melted chocolate parcel in summer heat is the carrier's fault, refunded by the seller.",
    "An opened jar of honey cannot be returned unless it was spoiled on arrival.",
    "A broken seal on a baby formula tin decides the dispute for the buyer.",
]


FOCUS = Focus(
    focus="Was the linen shirt's seam torn on arrival, and should the buyer get a refund?",
    buyer_claims=["the seam was torn when the parcel was opened"],
    seller_claims=["the shirt left the warehouse intact"],
)


@pytest.mark.parametrize("minimum", [1, 2, 3, 5])
@pytest.mark.parametrize("in_category", ["exactly", "one_short"])
async def test_cold_start_begins_just_below_the_minimum_in_the_category(tmp_path, embedder, minimum, in_category):
    have = minimum if in_category == "exactly" else minimum - 1
    index = await EmbeddedIndex.open(tmp_path / "idx", embedder)
    try:
        await index.upsert(
            [Document.of_guideline(rule(f"g-c{n}", 0.7, "clothing", text)) for n, text in enumerate(CLOTHING[:have])]
        )
        await index.upsert([Document.of_guideline(rule(f"g-f{n}", 0.7, "food", text)) for n, text in enumerate(FOOD)])
        s = Settings(
            llm_backend="offline",
            precedent_backend="embedded",
            precedent_dir=tmp_path,
            precedent_min_in_category=minimum,
            precedent_pool_k=12,
            precedent_cases_k=0,
            jurors=3,
        )
        found = await retrieve(CASE, FOCUS, index, PersonaMatcher(load_personas(3), embedder), s)
    finally:
        await index.close()
    mine = [g.id for g in found.guidelines if g.category == "clothing"]
    borrowed = [g.id for g in found.guidelines if g.category != "clothing"]
    assert sorted(mine) == [f"g-c{n}" for n in range(have)]
    if in_category == "exactly":
        assert found.coverage == "high" and borrowed == []
    else:
        assert found.coverage == "low" and sorted(borrowed) == [f"g-f{n}" for n in range(len(FOOD))]


@pytest.mark.parametrize("pool_k", [3, 4, 5, 6, 9])
async def test_a_cold_start_fills_the_pool_up_to_its_size_keeping_the_category_first(tmp_path, embedder, pool_k):
    index = await EmbeddedIndex.open(tmp_path / "idx", embedder)
    try:
        await index.upsert(
            [Document.of_guideline(rule(f"g-c{n}", 0.7, "clothing", text)) for n, text in enumerate(CLOTHING[:2])]
        )
        await index.upsert([Document.of_guideline(rule(f"g-f{n}", 0.7, "food", text)) for n, text in enumerate(FOOD)])
        s = Settings(
            llm_backend="offline",
            precedent_backend="embedded",
            precedent_dir=tmp_path,
            precedent_min_in_category=3,
            precedent_pool_k=pool_k,
            precedent_cases_k=0,
            jurors=3,
        )
        found = await retrieve(CASE, FOCUS, index, PersonaMatcher(load_personas(3), embedder), s)
    finally:
        await index.close()
    assert found.coverage == "low"
    assert len(found.guidelines) == min(pool_k, 2 + len(FOOD)) == len({g.id for g in found.guidelines})
    assert sorted(g.id for g in found.guidelines[:2]) == ["g-c0", "g-c1"]  # the category's own come first
