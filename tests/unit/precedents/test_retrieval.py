"""Retrieval inside the pipeline, per-juror memory, cold start, failure fallback, and learning
from confirmed outcomes — with the real embedding model and the real embedded index."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import numpy as np
import pytest

from cyberjurors.jury.rounds import Jury
from cyberjurors.observability.metrics import PRECEDENT_FALLBACKS
from cyberjurors.precedents import learning
from cyberjurors.precedents.base import PrecedentBase
from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.embeddings import CachedVectors
from cyberjurors.precedents.index import query_form
from cyberjurors.precedents.models import Document, Guideline, PrecedentCase
from cyberjurors.precedents.retrieval import PersonaMatcher, query_text, retrieve
from cyberjurors.schemas import (
    CaseFile,
    DisputeCase,
    Focus,
    OutcomeReported,
    PrecedentRef,
    Usage,
    Verdict,
    Votes,
)
from cyberjurors.schemas.personas import load_personas

from ...conftest import EXAMPLES
from ...factories import example_case, settings

NOW = datetime(2026, 11, 1, tzinfo=UTC)

RULES = [  # (category, favours, rule)
    ("clothing", "buyer", "When the buyer's unboxing photo shows a torn seam, the buyer wins a refund."),
    ("clothing", "seller", "When returned clothing shows make-up stains or a cut tag, it was worn: the seller wins."),
    ("clothing", "seller", "A return requested after the 14-day window is refused unless the item was defective."),
    ("clothing", "buyer", "If the garment differs from the listing photos in colour or fabric, the buyer wins."),
    (
        "clothing",
        "seller",
        "Signed proof of delivery to the buyer's address decides a non-delivery claim for the seller.",
    ),
    ("clothing", "buyer", "Sizing that contradicts the seller's own size chart entitles the buyer to a return."),
    ("all", "buyer", "A seller who does not answer the buyer's messages for a week loses the benefit of the doubt."),
    ("all", "seller", "A buyer who keeps using an item for months before complaining weakens a defect claim."),
    ("clothing", "buyer", "Close-up photographs of fabric pilling after one wash support a quality complaint."),
    ("clothing", "seller", "Platform rules require original tags attached for any clothing return."),
    ("clothing", "seller", "An experienced seller's dispatch video showing the intact garment outweighs vague claims."),
    ("clothing", "buyer", "Risky bargain listings with stock photos are read against the seller."),
]


def guideline(n: int, category: str, favours: str, rule: str, confidence: float = 0.7) -> Guideline:
    return Guideline(
        id=f"g-test{n:02d}",
        rule=rule,
        category=category,
        dispute_type="quality",
        favours=favours,
        confidence=confidence,
        supporting_cases=[f"hist-{n}"],
    )


@pytest.fixture
def case() -> DisputeCase:
    return example_case("clot-001-shirt-torn-seam")


def focus(case: DisputeCase) -> Focus:
    return Focus(
        focus=f"Should the buyer get a refund for the {case.metadata.product}? {case.metadata.dispute_reason}",
        buyer_claims=["the seam tore the first time the shirt was worn"],
        seller_claims=["the shirt left the warehouse intact"],
    )


async def test_jurors_with_different_personas_get_different_subsets_of_the_same_pool(embedder):
    pool = [
        PrecedentRef(
            id=f"g-{i}",
            kind="guideline",
            version=1,
            text=rule,
            category=cat,
            favours=fav,
            confidence=0.7,
            score=1.0 / (i + 1),
            rank=i + 1,
        )
        for i, (cat, fav, rule) in enumerate(RULES)
    ]
    personas = load_personas(17)
    memory = PersonaMatcher(personas, embedder).memory(pool, k=3)
    pool_ids = {g.id for g in pool}
    assert set(memory) == set(range(17)) and all(len(m) == 3 and set(m) <= pool_ids for m in memory.values())
    mei, katrin = (next(i for i, p in enumerate(personas) if p.name == n) for n in ("Mei", "Katrin"))
    assert set(memory[mei]) != set(memory[katrin]), (memory[mei], memory[katrin])
    assert len({tuple(sorted(m)) for m in memory.values()}) >= 4  # the jury does not all hold one subset


async def test_persona_matcher_embeds_each_rule_once(embedder):
    encoded: list[str] = []

    class Counting:
        name, dims = embedder.name, embedder.dims

        def encode(self, texts):
            encoded.extend(texts)
            return embedder.encode(texts)

    pool = [
        PrecedentRef(
            id=f"g-{i}", kind="guideline", version=1, text=rule, category=cat, favours=fav, score=1.0, rank=i + 1
        )
        for i, (cat, fav, rule) in enumerate(RULES)
    ]
    matcher = PersonaMatcher(load_personas(5), Counting())
    encoded.clear()
    first = matcher.memory(pool[:8], k=3)
    assert matcher.memory(pool[:8], k=3) == first and len(encoded) == 8  # the next case with the same pool
    matcher.memory(pool[4:], k=3)
    assert len(encoded) == 12  # only the four rules not seen before


async def test_retrieval_fills_pool_and_memory_and_widens_on_cold_start(tmp_path, embedder, case):
    index = await EmbeddedIndex.open(tmp_path / "idx", embedder)
    await index.upsert([Document.of_guideline(guideline(i, c, f, r)) for i, (c, f, r) in enumerate(RULES)])
    await index.upsert(
        [
            Document.of_case(
                PrecedentCase(
                    case_id="hist-9",
                    category="clothing",
                    summary="Linen shirt seam split after first wear; buyer photo of tear",
                    winner="buyer",
                    votes=Votes(buyer=12, seller=5),
                )
            )
        ]
    )
    s = settings(precedents=tmp_path / "precedents", precedent_pool_k=6, memory_k=3, jurors=5)
    matcher = PersonaMatcher(Jury.from_settings(s).personas, embedder)

    found = await retrieve(case, focus(case), index, matcher, s)
    assert found.coverage == "high" and len(found.guidelines) == 6 and found.problem is None
    assert found.cases and found.cases[0].id == "hist-9" and found.cases[0].favours == "buyer"
    assert {g.category for g in found.guidelines} <= {"clothing", "all"}
    assert all(set(m) <= {g.id for g in found.guidelines} for m in found.memory.values()) and len(found.memory) == 5

    food = case.model_copy(update={"metadata": case.metadata.model_copy(update={"category": "food"})})
    cold = await retrieve(food, focus(food), index, matcher, s)
    assert cold.coverage == "low"
    assert any(g.category == "clothing" for g in cold.guidelines)  # borrowed across categories
    await index.close()


async def test_each_retrieved_case_carries_its_cosine_with_the_query_for_the_consistency_check(
    tmp_path, embedder, case
):
    index = await EmbeddedIndex.open(tmp_path / "idx", embedder)
    summaries = {
        "hist-near": "Linen shirt seam split after first wear; buyer photo of the torn seam",
        "hist-far": "Frozen pizza delivered thawed; the courier left the box in the sun",
    }
    await index.upsert(
        [
            Document.of_case(
                PrecedentCase(
                    case_id=i, category="clothing", summary=text, winner="buyer", votes=Votes(buyer=12, seller=5)
                )
            )
            for i, text in summaries.items()
        ]
    )
    s = settings(precedents=tmp_path / "precedents", jurors=3)
    found = await retrieve(case, focus(case), index, PersonaMatcher(Jury.from_settings(s).personas, embedder), s)
    near = {c.id: c.similarity for c in found.cases}
    query, *texts = embedder.encode([query_text(case, focus(case)), *summaries.values()])
    assert near == pytest.approx({i: float(v @ query) for i, v in zip(summaries, texts, strict=True)}, abs=1e-4)
    assert near["hist-near"] > 0.5 > near["hist-far"]  # the fused rank alone would not say how far each is
    assert all(g.similarity is None for g in found.guidelines)
    await index.close()


async def test_retrieval_failure_goes_on_without_precedents_and_is_counted(tmp_path, case):
    # an Elasticsearch URL where nothing listens: the real client path fails, retries, then gives up
    s = settings(
        precedents=tmp_path / "precedents",
        precedent_backend="elasticsearch",
        elasticsearch={"url": "http://127.0.0.1:9", "timeout_s": 1.0},
        precedent_retries=1,
        jurors=3,
    )
    before = PRECEDENT_FALLBACKS.labels("unreachable")._value.get()
    found = await PrecedentBase(s, load_personas(3)).retrieve(case, focus(case))
    assert found.coverage == "none" and not found.guidelines and "unreachable" in (found.problem or "")
    assert PRECEDENT_FALLBACKS.labels("unreachable")._value.get() == before + 1


def verdict_for(case: DisputeCase, winner: str, cited: list[str]) -> Verdict:
    votes = Votes(buyer=12, seller=5) if winner == "buyer" else Votes(buyer=5, seller=12)
    return Verdict(
        verdict_id="v",
        case_id=case.case_id,
        category=case.metadata.category,
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
        backend="offline",
        models=["offline"],
        decided_at=NOW,
    )


async def test_outcomes_raise_lower_and_retire_guidelines_with_versions(tmp_path, embedder, case):
    index = await EmbeddedIndex.open(tmp_path / "idx", embedder)
    rule = guideline(1, "clothing", "buyer", RULES[0][2], confidence=0.5)
    await index.upsert([Document.of_guideline(rule)])
    s = settings(precedents=tmp_path / "precedents", guideline_min_confidence=0.3)
    case_file = CaseFile(case=case, received_at=NOW)
    buyer_won = OutcomeReported(case_id=case.case_id, votes={"buyer": 11, "seller": 6})

    agreed = await learning.learn(buyer_won, verdict_for(case, "buyer", ["g-test01@1"]), case_file, index, s, NOW)
    assert agreed.agreed and agreed.case_added == case.case_id and agreed.raised == ["g-test01@2"]
    [doc] = await index.get(["guideline:g-test01"])
    assert doc.guideline.version == 2 and doc.guideline.confidence == pytest.approx(0.55)
    assert doc.guideline.history[-1].case_id == case.case_id
    [added] = await index.get([f"case:{case.case_id}"])
    assert added.case.winner == "buyer" and added.case.votes.buyer == 11

    again = await learning.learn(buyer_won, verdict_for(case, "buyer", ["g-test01@1"]), case_file, index, s, NOW)
    assert again.unchanged == ["g-test01"] and not again.raised  # a replayed outcome changes nothing
    assert (await index.get(["guideline:g-test01"]))[0].guideline.version == 2

    for n in range(4):  # our buyer verdicts keep being overturned
        other = case.model_copy(update={"case_id": f"{case.case_id}-{n}"})
        seller_won = OutcomeReported(case_id=other.case_id, votes={"buyer": 4, "seller": 13})
        report = await learning.learn(
            seller_won,
            verdict_for(other, "buyer", ["g-test01@2"]),
            CaseFile(case=other, received_at=NOW),
            index,
            s,
            NOW,
        )
        assert not report.agreed and report.case_added is None
    retired = (await index.get(["guideline:g-test01"]))[0].guideline
    # 0.55 -> 0.44 -> 0.352 -> 0.2816 < 0.3: retired at version 5; the fourth overturn finds it retired
    assert not retired.active and retired.version == 5 and retired.history[-1].reason == "retired"
    assert not await index.search("torn seam unboxing photo refund", kind="guideline", category="clothing")
    await index.close()


async def test_a_supervisors_override_moves_the_precedent_base_to_its_decision_once(tmp_path, embedder, case):
    from cyberjurors.schemas import DecidedBy

    index = await EmbeddedIndex.open(tmp_path / "idx", embedder)
    await index.upsert([Document.of_guideline(guideline(1, "clothing", "buyer", RULES[0][2], confidence=0.5))])
    s = settings(precedents=tmp_path / "precedents")
    case_file, verdict = CaseFile(case=case, received_at=NOW), verdict_for(case, "buyer", ["g-test01@1"])
    panel = dict(case_id=case.case_id, source="human_panel", escalation_id="e1")
    first = OutcomeReported(**panel, votes={"buyer": 3, "seller": 0}, event_id="console:e1:1")
    await learning.learn(first, verdict, case_file, index, s, NOW)  # agreed: the case confirmed, the rule raised
    assert (await index.get(["guideline:g-test01"]))[0].guideline.confidence == pytest.approx(0.55)

    reversed_ = OutcomeReported(
        **panel,
        votes={"buyer": 0, "seller": 1},
        event_id="console:e1:2",
        decided_by=DecidedBy(reviewer="sue", role="supervisor", override_of="console:e1:1"),
    )
    for _ in range(2):  # a redelivered override applies once
        report = await learning.learn(reversed_, verdict, case_file, index, s, NOW, replacing=first)
    assert not report.agreed and report.case_added is None
    assert await index.get([f"case:{case.case_id}"]) == []  # no longer a precedent for the buyer
    rule = (await index.get(["guideline:g-test01"]))[0].guideline
    assert (rule.version, rule.history[-1].reason) == (3, "outcome_disagreed")
    assert rule.confidence == pytest.approx(0.55 * 0.8) and rule.history[-1].case_id == f"{case.case_id}@console:e1:2"

    split = OutcomeReported.model_validate(
        reversed_.model_dump() | {"votes": {"buyer": 4, "seller": 1}, "event_id": "console:e1:3"}
    )
    report = await learning.learn(split, verdict, case_file, index, s, NOW, replacing=reversed_)
    [again] = await index.get([f"case:{case.case_id}"])
    assert report.agreed and again.case.votes.buyer == 4  # the override's own votes
    assert (await index.get(["guideline:g-test01"]))[0].guideline.version == 4  # raised back, one step

    kept = OutcomeReported.model_validate(split.model_dump() | {"votes": {"buyer": 2, "seller": 0}, "event_id": "e:4"})
    report = await learning.learn(kept, verdict, case_file, index, s, NOW, replacing=split)
    [still] = await index.get([f"case:{case.case_id}"])  # agreement kept: the case stays, with these votes
    assert report.agreed and still.case.votes.buyer == 2 and not report.raised and not report.lowered
    assert (await index.get(["guideline:g-test01"]))[0].guideline.version == 4
    await index.close()


async def test_redistilling_a_category_from_confirmed_cases_folds_rules_into_the_base(tmp_path, embedder):
    from cyberjurors.jury.offline import OfflineLLM
    from cyberjurors.precedents.distill import summarize_case

    index = await EmbeddedIndex.open(tmp_path / "idx", embedder)
    confirmed = [
        summarize_case(DisputeCase.model_validate_json(p.read_text()))
        for p in sorted((EXAMPLES / "precedents").glob("hist-clot-*.json"))
    ]
    await index.upsert([Document.of_case(c) for c in confirmed])
    ids = [c.case_id for c in confirmed]
    s = settings(precedents=tmp_path / "precedents")

    first = await learning.redistil("clothing", ids, index, embedder, OfflineLLM(), s)
    assert first.guidelines_created > 0
    made = [
        h.document.guideline
        for h in await index.search("clothing return refund", kind="guideline", category="clothing", k=50)
    ]
    assert made and all(set(g.supporting_cases) <= set(ids) for g in made)
    again = await learning.redistil("clothing", ids, index, embedder, OfflineLLM(), s)
    assert again.guidelines_created == 0  # the same rules: nothing new
    assert await index.count("guideline", "clothing") == len(made)
    await index.close()


class CountingEmbedder:
    """The real embedder, counting every text it is asked to encode."""

    def __init__(self, inner):
        self.inner, self.name, self.dims = inner, inner.name, inner.dims
        self.texts: list[str] = []

    def encode(self, texts):
        self.texts.extend(texts)
        return self.inner.encode(texts)


async def seeded_base(folder, embedder) -> None:
    """The sample precedent cases (H) and the test rules (N), in an embedded index at ``folder``."""
    from cyberjurors.precedents.distill import summarize_case

    index = await EmbeddedIndex.open(folder, embedder)
    history = [
        summarize_case(DisputeCase.model_validate_json(p.read_text()))
        for p in sorted((EXAMPLES / "precedents").glob("hist-*.json"))
    ]
    await index.upsert([Document.of_case(c) for c in history])
    await index.upsert([Document.of_guideline(guideline(i, c, f, r)) for i, (c, f, r) in enumerate(RULES)])
    await index.close()


async def test_a_cases_retrieval_embeds_each_text_once(tmp_path, embedder, monkeypatch):
    """Through the worker's PrecedentBase with the real model: a case's query is embedded once for
    its three searches (cold start included) and its cosines; the rules and summaries are matched
    with the vectors the store holds, and what came back for an earlier case, another jury or an
    appeal's panel is not embedded again."""
    from cyberjurors.precedents import base

    await seeded_base(tmp_path / "precedents", embedder)
    counting = CountingEmbedder(embedder)
    monkeypatch.setattr(base, "open_embedder", lambda s: counting)
    s = settings(precedents=tmp_path / "precedents", jurors=5, precedent_pool_k=6)
    precedents = PrecedentBase(s, load_personas(5))
    await precedents.open()
    counting.texts.clear()  # the personas, once at start
    calls = 0
    original = counting.encode

    def encode(texts):
        nonlocal calls
        calls += 1
        return original(texts)

    counting.encode = encode
    shirt, food = example_case("clot-001-shirt-torn-seam"), example_case("food-001-granola-past-best-before")
    first = await precedents.retrieve(shirt, focus(shirt))
    assert first.cases and first.guidelines and first.memory and first.problem is None
    assert counting.texts == [query_form(query_text(shirt, focus(shirt)))] and calls == 1
    cold = await precedents.retrieve(food, focus(food))  # three searches: the category has no rules
    assert cold.coverage == "low" and cold.problem is None
    await precedents.seat(load_personas(6)[1:])  # another jury: its memories follow, from the same vectors
    jacket = example_case("clot-002-jacket-signed-delivery")
    assert (await precedents.retrieve(jacket, focus(jacket))).memory
    assert await precedents.memory(first.guidelines, load_personas(8)[5:]) != {}  # an appeal's panel
    counting.texts = [t for t in counting.texts if t not in {p.card() for p in load_personas(8)}]
    repeated = {t: n for t, n in Counter(counting.texts).items() if n > 1}
    assert not repeated, f"embedded more than once: {list(repeated)[:3]}"
    await precedents.close()


async def test_the_vector_cache_is_bounded_by_its_setting(tmp_path, embedder):
    """The least recently used text goes first; the setting bounds the worker's cache."""
    counting = CountingEmbedder(embedder)
    cache = CachedVectors(counting, 3)
    rules = [r for _, _, r in RULES[:5]]
    cache(rules[:3])
    cache(rules[:1])  # the first is used again: the second is now the oldest
    cache(rules[3:5])
    assert len(cache) == 3 and len(counting.texts) == 5
    counting.texts.clear()
    np.testing.assert_allclose(cache([rules[0], rules[4]]), embedder.encode([rules[0], rules[4]]), atol=1e-6)
    assert counting.texts == []  # both kept
    cache([rules[1]])
    assert counting.texts == [rules[1]]  # dropped, so embedded again
    await seeded_base(tmp_path / "precedents", embedder)
    precedents = PrecedentBase(
        settings(precedents=tmp_path / "precedents", embedding={"cache_size": 4}), load_personas(3)
    )
    shirt = example_case("clot-001-shirt-torn-seam")
    assert (await precedents.retrieve(shirt, focus(shirt))).guidelines
    _, matcher = await precedents.open()
    assert len(matcher.texts) == 4
    await precedents.close()


async def test_without_the_stores_vectors_the_rules_and_summaries_are_embedded_in_one_batch(tmp_path, embedder):
    """A store that hands back no vectors (Elasticsearch's hits leave them out): the query, then
    every rule and summary of the case in one batch, each once."""
    await seeded_base(tmp_path / "precedents", embedder)
    index = await EmbeddedIndex.open(tmp_path / "precedents", embedder)
    search = index.search

    async def without_vectors(*args, **kwargs):
        return [h.model_copy(update={"vector": None}) for h in await search(*args, **kwargs)]

    index.search = without_vectors  # type: ignore[method-assign]
    counting = CountingEmbedder(embedder)
    calls: list[int] = []
    encode = counting.encode
    counting.encode = lambda texts: calls.append(len(texts)) or encode(texts)  # type: ignore[method-assign]
    s = settings(precedents=tmp_path / "precedents", jurors=3)
    shirt = example_case("clot-001-shirt-torn-seam")
    found = await retrieve(shirt, focus(shirt), index, PersonaMatcher(load_personas(3), counting), s)
    assert calls[1:] == [1, len(found.guidelines) + len(found.cases)]  # personas, the query, one batch
    assert len(set(counting.texts)) == len(counting.texts)
    await index.close()
