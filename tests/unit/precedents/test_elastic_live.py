"""``ElasticsearchIndex`` against a real cluster with the real embedding model.

Skipped unless ``ELASTICSEARCH_URL`` is set (e.g. the docker-compose cluster); credentials come
from the usual settings (``ELASTICSEARCH_API_KEY``, or ``CYBERJURORS_ELASTICSEARCH_USERNAME`` /
``_PASSWORD``, ``CYBERJURORS_ELASTICSEARCH_CA_CERTS``, ...). Everything lives under a unique
index prefix and is deleted at the end.
"""

from __future__ import annotations

import itertools
import logging
import os
import uuid

import pytest

from cyberjurors.config import Settings
from cyberjurors.precedents.elastic import ElasticsearchIndex
from cyberjurors.precedents.embeddings import load_embedder
from cyberjurors.precedents.models import Document, Guideline, PrecedentCase, PrecedentError
from cyberjurors.schemas import Votes

pytestmark = pytest.mark.skipif(
    not os.environ.get("ELASTICSEARCH_URL"), reason="set ELASTICSEARCH_URL to run against a real Elasticsearch cluster"
)
log = logging.getLogger(__name__)

CASES = [  # (id, category, winner, summary)
    (
        "customs",
        "others",
        "seller",
        "The parcel was held by customs at the border; the import authority demanded "
        "duties before releasing it and the buyer refused to pay them.",
    ),
    (
        "sku",
        "clothing",
        "buyer",
        "Jacket ordered as product code SKU-7Q4-ZX81 arrived in the wrong colour; the "
        "listing photo shows navy, the buyer received bright orange.",
    ),
    ("seam", "clothing", "buyer", "Linen shirt seam split on first wear; the buyer's unboxing photo shows the tear."),
    (
        "coffee",
        "appliances",
        "seller",
        "Espresso machine leaks water; the seller's dispatch video shows it tested "
        "and sealed, the buyer used tap water with heavy limescale.",
    ),
    ("key", "digital", "buyer", "Game activation key was already redeemed when the buyer entered it."),
    ("cake", "food", "buyer", "Birthday cake arrived crushed and melted after a two-day courier delay."),
]
RULES = [  # (id, category, active, rule)
    ("tear", "clothing", True, "An unboxing photo of a torn seam wins the buyer a refund."),
    ("silent", "all", True, "A seller who ignores the buyer's messages for a week loses the benefit of the doubt."),
    ("retired", "clothing", False, "A torn seam photographed after a month of wear is the buyer's fault."),
    ("melted", "food", True, "Perishable food delayed in transit is refunded to the buyer."),
]


def documents() -> tuple[list[Document], list[Document]]:
    cases = [
        Document.of_case(
            PrecedentCase(
                case_id=f"live-{i}",
                category=c,
                winner=w,
                summary=s,
                votes=Votes(buyer=12, seller=5) if w == "buyer" else Votes(buyer=5, seller=12),
            )
        )
        for i, c, w, s in CASES
    ]
    rules = [
        Document.of_guideline(
            Guideline(
                id=f"g-live-{i}", rule=r, category=c, active=a, dispute_type="quality", favours="buyer", confidence=0.7
            )
        )
        for i, c, a, r in RULES
    ]
    return cases, rules


class Renamed:
    """The same vectors under another model name: what a changed embedding_model looks like."""

    def __init__(self, embedder, name: str):
        self.name, self.dims, self._embedder = name, embedder.dims, embedder

    def encode(self, texts):
        return self._embedder.encode(texts)


def check_contract(hits) -> None:
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))


async def test_index_search_fallback_and_rebuild_on_a_real_cluster():
    prefix = f"cjtest-{uuid.uuid4().hex[:10]}"
    settings = Settings(llm_backend="offline", precedent_backend="elasticsearch", elasticsearch_index_prefix=prefix)
    embedder = load_embedder()
    index = ElasticsearchIndex.from_settings(settings, embedder)
    cases, rules = documents()
    try:
        await index.ensure()
        await index.ensure()  # idempotent
        report = await index.upsert(cases + rules)
        assert report.failed == {} and len(report.indexed) == len(cases) + len(rules)
        assert await index.count("case") == len(cases)
        assert await index.count("guideline", "clothing") == 2  # 'tear' and the cross-category 'silent'

        lexical = await index.search("SKU-7Q4-ZX81", kind="case", k=3, mode="bm25")
        assert lexical[0].id == "case:live-sku" and lexical[0].sources == {"bm25": 1}
        check_contract(lexical)

        meaning = "package stuck at the frontier, officials want a tariff paid before handing it over"
        semantic = await index.search(meaning, kind="case", k=3, mode="vector")
        assert semantic[0].id == "case:live-customs" and semantic[0].sources == {"vector": 1}
        check_contract(semantic)

        hybrid = await index.search(f"SKU-7Q4-ZX81 {meaning}", kind="case", k=4)
        check_contract(hybrid)
        assert {"case:live-sku", "case:live-customs"} <= {h.id for h in hybrid[:3]}
        assert index.rrf is not None
        log.warning("rrf retriever %s", "used" if index.rrf else f"refused ({index.rrf_refusal}): client-side fusion")
        if index.rrf:
            assert all(h.sources == {} for h in hybrid)
        else:
            assert "license" in index.rrf_refusal or "retriever" in index.rrf_refusal
            assert all(set(h.sources) <= {"bm25", "vector"} and h.sources for h in hybrid)

        explained = ElasticsearchIndex(index.client, embedder, prefix=prefix, rrf_sources=True)
        traced = await explained.search(f"SKU-7Q4-ZX81 {meaning}", kind="case", k=4)
        assert [h.id for h in traced] == [h.id for h in hybrid]
        assert traced[0].sources  # known either way when asked for

        clothing = await index.search("torn seam photographed when unboxing", kind="guideline", category="clothing")
        assert {h.id for h in clothing} == {"guideline:g-live-tear", "guideline:g-live-silent"}  # not the retired one
        assert clothing[0].id == "guideline:g-live-tear"

        assert [d.id for d in await index.get(["case:live-seam", "guideline:g-live-melted", "case:none"])] == [
            "case:live-seam",
            "guideline:g-live-melted",
        ]
        assert await index.delete(["case:live-cake", "case:none"]) == 1
        assert await index.count("case") == len(cases) - 1

        old = await index._current(index.alias("case"))
        rebuilt = await index.rebuild("case", cases[:3])
        assert rebuilt.failed == {} and len(rebuilt.indexed) == 3
        new = await index._current(index.alias("case"))
        assert new != old and len(new) == 1 and new[0].endswith("-v2")
        assert not await index.client.indices.exists(index=old[0])
        assert await index.count("case") == 3
        assert (await index.search("SKU-7Q4-ZX81", kind="case", k=1))[0].id == "case:live-sku"

        other = ElasticsearchIndex(index.client, Renamed(embedder, "some-other-model"), prefix=prefix)
        with pytest.raises(PrecedentError) as err:
            await other.ensure(create=False)
        assert err.value.kind == "model_mismatch"
    finally:
        try:
            made = await index.client.indices.get_alias(index=f"{prefix}-*")
            if made.body:
                await index.client.indices.delete(index=",".join(made.body))
            await _delete_template(index, f"{prefix}-precedents")
        finally:
            await index.close()


async def _delete_template(index: ElasticsearchIndex, name: str) -> None:
    try:
        await index.client.indices.delete_index_template(name=name)
    except Exception as err:  # already gone
        log.warning("could not delete index template %s: %s", name, err)
