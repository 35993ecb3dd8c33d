"""What every precedent store promises, as one class of tests each backend's module subclasses
(``TestEmbeddedStore`` in test_embedded.py, ``TestFakeElasticsearch`` in test_elastic.py,
``TestLiveElasticsearch`` in test_elastic_live.py), the way haystack tests its document stores.
A subclass gives a ``backend`` fixture: where one store lives for the test, how to open it (again),
how to spoil a stored document. A new backend passes this class before anything else relies on it.

The real embedding model throughout (remembered by text, so filling a store costs nothing after
the first time); the synthetic corpus of ``precedent_data`` with its two probes: a case found only
by meaning, one found only by its product code."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import numpy as np
import pytest

from cyberjurors.config import Settings
from cyberjurors.precedents import learning
from cyberjurors.precedents.erasure import EXPIRED, erase_case, expire_cases
from cyberjurors.precedents.index import MAX_QUERY_CHARS, RRF_K
from cyberjurors.precedents.models import Document, Guideline, GuidelineChange, PrecedentCase, PrecedentError
from cyberjurors.schemas import CaseFile, OutcomeReported, Usage, Verdict, Votes

from ... import precedent_data as data
from ...factories import case as dispute

MODEL = "all-MiniLM-L6-v2"
SCAN_PAGE = 4  # a store that reads page by page is opened with pages this small
CASES = [Document.of_case(c) for c in data.cases(270)]
GUIDELINES = [Document.of_guideline(g) for g in data.guidelines(60)]
PROBES = [Document.of_case(data.PROBE_SEMANTIC), Document.of_case(data.PROBE_CODE)]
CORPUS = CASES + GUIDELINES + PROBES
LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)
SAYS = "Quillfeather-7731 returned the kettle with the lid cracked"


class CachingEmbedder:
    """The real model, remembering vectors by text so fresh stores in each test cost nothing to
    fill; anything new goes through the model. Same name and dims as the model."""

    def __init__(self, model):
        self.model, self.name, self.dims = model, model.name, model.dims
        self.cache: dict[str, np.ndarray] = {}
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            self.cache.update(zip(missing, self.model.encode(missing), strict=True))
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.dims), np.float32)


class OtherEmbedder:
    def __init__(self, name: str, dims: int):
        self.name, self.dims = name, dims

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), self.dims), np.float32) / np.sqrt(self.dims)


class FailingEmbedder(CachingEmbedder):
    def encode(self, texts: list[str]) -> np.ndarray:
        if any("EXPLODE" in t for t in texts):
            raise RuntimeError("model crashed")
        return super().encode(texts)


class Backend(Protocol):
    """One store's place for one test."""

    where: str  # what its errors name: the folder, the index alias
    reports_sources: bool  # hybrid hits say which retriever found them (Elasticsearch's rrf does not)

    async def open(self, embedder: Any, *, create: bool = True) -> Any:
        """A new handle on the store (made when ``create``), closed when the test ends."""
        ...

    async def damage(self, doc_id: str) -> None:
        """Leave the stored document unreadable as a Document, as a buggy writer would."""
        ...


def ranks(hits) -> dict[str, int]:
    return {h.id: h.rank for h in hits}


def precedent(case_id: str, summary: str, decided_at: datetime | None = None) -> Document:
    return Document.of_case(
        PrecedentCase(
            case_id=case_id,
            category="appliances",
            summary=summary,
            winner="buyer",
            votes=Votes(buyer=12, seller=5),
            decided_at=decided_at,
        )
    )


def citing(gid: str, cases: list[str], history: list[str]) -> Document:
    changes = [GuidelineChange(version=n + 2, reason="outcome_agreed", confidence=0.6, case_id=c) for n, c in
               enumerate(history)]  # fmt: skip
    return Document.of_guideline(
        Guideline(
            id=gid,
            version=1 + len(history),
            rule="A kettle cracked on arrival is the seller's to refund",
            category="appliances",
            dispute_type="damaged_in_transit",
            supporting_cases=cases,
            confidence=0.6,
            history=changes,
        )
    )


class StoreContract:
    @pytest.fixture
    def embedder(self, shared_embedder) -> CachingEmbedder:
        return shared_embedder

    @pytest.fixture
    def backend(self) -> Backend:
        raise NotImplementedError("a store's test class gives its backend")

    async def fresh(self, backend: Backend, embedder, docs: list[Document] | None = None):
        store = await backend.open(embedder)
        if docs:
            report = await store.upsert(docs)
            assert not report.failed and len(report.indexed) == len({d.id for d in docs})
        return store

    @pytest.fixture
    async def index(self, backend: Backend, embedder):
        """The whole synthetic corpus in a store of its own."""
        return await self.fresh(backend, embedder, CORPUS)

    # --- what each retriever finds ----------------------------------------------------------------

    async def test_meaning_without_shared_words_is_found_by_vectors_not_bm25(self, index):
        target = PROBES[0]
        vector = await index.search(data.PROBE_SEMANTIC_QUERY, kind="case", k=10, mode="vector")
        bm25 = await index.search(data.PROBE_SEMANTIC_QUERY, kind="case", k=50, mode="bm25")
        assert ranks(vector).get(target.id, 99) <= 3
        assert target.id not in ranks(bm25)
        assert all(h.sources == {"bm25": h.rank} for h in bm25)  # whatever BM25 found, it found by words
        assert all(h.sources == {"vector": h.rank} for h in vector)
        # BM25 returns only documents sharing a term with the query, however large k is
        only = await index.search("the border", kind="case", k=10, mode="bm25")
        assert [h.id for h in only] == [target.id]

    async def test_exact_product_code_is_found_by_bm25_not_vectors(self, index):
        target = PROBES[1]
        assert sum("SKU-" in d.text for d in CASES) > 30  # plenty of other codes to confuse a fuzzy match
        bm25 = await index.search(data.PROBE_CODE_QUERY, kind="case", k=10, mode="bm25")
        vector = await index.search(data.PROBE_CODE_QUERY, kind="case", k=10, mode="vector")
        assert bm25[0].id == target.id and bm25[0].sources == {"bm25": 1}
        assert bm25[0].score == pytest.approx(1 / (RRF_K + 1))
        assert target.id not in ranks(vector)

    async def test_hybrid_finds_both_and_ranks_by_fused_score(self, index, backend):
        semantic, code = PROBES
        by_meaning = await index.search(data.PROBE_SEMANTIC_QUERY, kind="case", k=10)
        # k=30, not 10: with plain RRF a document only BM25 finds (at rank 1) scores 1/61, below any
        # document both retrievers put in their top ~50; ~80 other summaries share the token "sku"
        by_code = await index.search(data.PROBE_CODE_QUERY, kind="case", k=30)
        assert ranks(by_meaning)[semantic.id] <= 3 and code.id in ranks(by_code)
        for hits, k in ((by_meaning, 10), (by_code, 30)):
            assert [h.rank for h in hits] == list(range(1, k + 1))
            scores = [h.score for h in hits]
            assert scores == sorted(scores, reverse=True)
            assert all(h.document.id == h.id and h.kind == "case" == h.document.kind for h in hits)
        if backend.reports_sources:  # the score is the RRF sum over the retrievers that found it
            for h in by_meaning + by_code:
                assert h.score == pytest.approx(sum(1 / (RRF_K + r) for r in h.sources.values()))
            hit = next(h for h in by_code if h.id == code.id)
            assert hit.sources["bm25"] == 1 and hit.sources.get("vector", 99) > 50
            # no summary says "package", "seized", "import" or "authorities": BM25 adds nothing there
            assert all(set(h.sources) == {"vector"} for h in by_meaning)
            assert sum(set(h.sources) == {"bm25", "vector"} for h in by_code) >= 20

    async def test_hybrid_ranks_the_code_first_when_the_query_also_describes_it(self, index, backend):
        hits = await index.search(f"stand mixer {data.PROBE_CODE_QUERY}", kind="case", k=10)
        assert hits[0].id == PROBES[1].id
        if backend.reports_sources:
            assert hits[0].sources["bm25"] == 1 and "vector" in hits[0].sources

    async def test_a_query_vector_given_is_searched_as_the_text_would_be(self, index, embedder):
        query = "the seam of the shirt tore the first time it was worn"
        vector = embedder.encode([query])[0]
        for mode in ("hybrid", "vector"):
            calls = embedder.calls
            given = await index.search(query, kind="guideline", k=5, mode=mode, vector=vector)
            assert embedder.calls == calls  # the text is not embedded again
            assert [h.id for h in given] == [h.id for h in await index.search(query, kind="guideline", k=5, mode=mode)]
        with pytest.raises(PrecedentError) as err:
            await index.search(query, kind="guideline", k=5, vector=vector[:10])
        assert err.value.kind == "bad_query"

    # --- filters ------------------------------------------------------------------------------------

    async def test_category_filter_admits_only_that_category(self, index):
        query = "the buyer says the item arrived broken and wants a refund"
        for category in data.CATEGORY_NAMES:
            for mode in ("hybrid", "bm25", "vector"):
                hits = await index.search(query, kind="case", category=category, k=25, mode=mode)
                assert len(hits) == 25 and {h.document.category for h in hits} == {category}, (category, mode)
        unfiltered = await index.search(query, kind="case", k=25)
        assert len({h.document.category for h in unfiltered}) > 1

    async def test_guideline_filter_adds_cross_category_rules_and_never_returns_cases(self, index):
        query = "specific dated evidence outweighs general assertions"
        hits = await index.search(query, kind="guideline", category="food", k=30)
        assert {h.document.category for h in hits} == {"food", "all"}
        assert all(h.kind == "guideline" and h.document.guideline is not None for h in hits)
        assert hits[0].document.category == "all"  # the cross-category evidence rule itself
        cases = await index.search(query, kind="case", k=30)
        assert cases and all(h.document.case is not None for h in cases)

    async def test_count_follows_the_filters(self, index):
        assert await index.count("case") == len(CASES) + len(PROBES)
        assert await index.count("case", "food") == sum(d.category == "food" for d in CASES)
        active = [d for d in GUIDELINES if d.keywords["active"] == ["true"]]
        assert await index.count("guideline") == len(active)
        assert await index.count("guideline", "food") == sum(d.category in ("food", "all") for d in active)
        with pytest.raises(PrecedentError) as err:
            await index.count("case", "furniture")
        assert err.value.kind == "unknown_category"

    async def test_bad_queries_are_refused_and_stopwords_alone_still_answer(self, index):
        for query, k, category, kind in (("", 5, None, "bad_query"), ("   \n\t", 5, None, "bad_query"),
                                         ("refund", 0, None, "bad_query"), ("refund", 5, "furniture",
                                                                            "unknown_category")):  # fmt: skip
            with pytest.raises(PrecedentError) as err:
                await index.search(query, kind="case", category=category, k=k)
            assert err.value.kind == kind
        with pytest.raises(PrecedentError) as err:
            await index.search("refund", kind="case", mode="fuzzy")
        assert err.value.kind == "bad_query"
        # only stopwords: BM25 has nothing to match, the vector side still answers
        assert await index.search("the of and", kind="case", k=5, mode="bm25") == []
        assert len(await index.search("the of and", kind="case", k=5)) == 5

    async def test_a_huge_query_is_searched_by_its_head(self, index):
        filler = " ".join(q for q, _ in data.queries(400))
        query = (data.PROBE_SEMANTIC_QUERY + " " + filler * 10)[:100_000]
        hits = await asyncio.wait_for(index.search(query, kind="case", k=10), timeout=60)  # a hang guard
        assert len(hits) == 10
        # only the head is used (MAX_QUERY_CHARS), so the tail cannot change the answer
        head = await index.search(query[:MAX_QUERY_CHARS] + " SKU-7Q4-ZX81 customs", kind="case", k=10)
        assert [h.id for h in hits] == [h.id for h in head]

    async def test_get_returns_what_was_stored_in_the_order_asked(self, index):
        g = GUIDELINES[3].guideline
        [doc] = await index.get([g.doc_id])
        assert isinstance(doc.guideline, Guideline) and doc.guideline == g
        assert await index.get(["guideline:missing", g.doc_id, CASES[0].id, "free-id"]) == [GUIDELINES[3], CASES[0]]
        assert await index.get([d.id for d in PROBES]) == PROBES

    # --- writes ---------------------------------------------------------------------------------------

    async def test_upsert_twice_does_not_duplicate_and_replaces_by_id(self, backend, embedder):
        docs = CASES[:40] + GUIDELINES[:10]
        idx = await self.fresh(backend, embedder, docs)
        counts = (await idx.count("case"), await idx.count("guideline"))
        again = await idx.upsert(docs)
        assert sorted(again.indexed) == sorted(d.id for d in docs) and not again.failed
        assert (await idx.count("case"), await idx.count("guideline")) == counts
        hits = await idx.search(docs[0].text, kind="case", k=40)
        assert len({h.id for h in hits}) == len(hits) == 40
        # same id, new text: the old words no longer find it, the new ones do
        changed = docs[0].model_copy(update={"text": "A toaster shipped with a Martian plug adaptor nobody can use."})
        await idx.upsert([changed])
        assert (await idx.search("martian plug adaptor", kind="case", k=1, mode="bm25"))[0].id == changed.id
        assert changed.id not in ranks(await idx.search(docs[0].text, kind="case", k=5, mode="bm25"))
        assert (await idx.get([changed.id]))[0].text == changed.text
        assert await idx.count("case") == 40

    async def test_duplicate_ids_in_one_batch_keep_the_last(self, backend, embedder):
        first, second = CASES[0], CASES[0].model_copy(update={"text": "Second version of the summary about a kettle."})
        idx = await self.fresh(backend, embedder)
        report = await idx.upsert([first, second])
        assert report.indexed == [first.id] and not report.failed
        assert (await idx.get([first.id]))[0].text == second.text and await idx.count("case") == 1

    async def test_upsert_reports_bad_documents_and_goes_on(self, backend, embedder):
        idx = await self.fresh(backend, FailingEmbedder(embedder.model))
        unknown = CASES[0].model_copy(update={"category": "furniture"})
        empty = CASES[1].model_copy(update={"text": "   "})
        case_for_all = CASES[2].model_copy(update={"category": "all"})
        report = await idx.upsert([unknown, empty, case_for_all, CASES[3]])
        assert report.indexed == [CASES[3].id]
        assert set(report.failed) == {unknown.id, empty.id, case_for_all.id}
        assert "furniture" in report.failed[unknown.id]
        exploding = CASES[4].model_copy(update={"text": "EXPLODE " + CASES[4].text})
        try:
            report = await idx.upsert([exploding])
        except PrecedentError as err:  # nothing in the batch indexed: a store may raise with its report
            report = err.report
        assert report.failed == {exploding.id: "embedding failed: RuntimeError: model crashed"}
        assert await idx.count("case") == 1 and await idx.get([exploding.id]) == []

    async def test_delete_counts_what_existed(self, backend, embedder):
        docs = CASES[:30] + GUIDELINES[:5]
        idx = await self.fresh(backend, embedder, docs)
        gone = [docs[0].id, docs[7].id, GUIDELINES[0].id]
        assert await idx.delete([*gone, "case:never-existed"]) == 3
        assert await idx.delete(gone) == 0
        assert await idx.get(gone) == []
        assert await idx.count("case") == 28
        for doc in (docs[0], docs[7]):
            for mode in ("hybrid", "bm25", "vector"):
                assert doc.id not in ranks(await idx.search(doc.text, kind="case", k=30, mode=mode))
        remaining = await idx.get([d.id for d in docs])
        assert len(remaining) == 32 and all(d.id not in gone for d in remaining)
        reopened = await backend.open(embedder, create=False)
        assert await reopened.count("case") == 28 and await reopened.get(gone) == []

    async def test_inactive_guidelines_are_stored_but_not_searched(self, backend, embedder):
        inactive = next(d for d in GUIDELINES if d.keywords["active"] == ["false"])
        rule = inactive.guideline.rule
        idx = await self.fresh(backend, embedder, GUIDELINES)
        for mode in ("hybrid", "bm25", "vector"):
            assert inactive.id not in ranks(await idx.search(rule, kind="guideline", k=60, mode=mode))
        assert [d.id for d in await idx.get([inactive.id])] == [inactive.id]
        active_count = sum(d.keywords["active"] == ["true"] for d in GUIDELINES)
        assert await idx.count("guideline") == active_count

        revived = Document.of_guideline(inactive.guideline.model_copy(update={"active": True}))
        await idx.upsert([revived])
        hits = await idx.search(rule, kind="guideline", k=5)
        assert hits[0].id == inactive.id and await idx.count("guideline") == active_count + 1
        if backend.reports_sources:
            assert hits[0].sources == {"bm25": 1, "vector": 1}

    async def test_a_guideline_retired_and_revived_leaves_and_reenters_the_searches(self, backend, embedder):
        active = next(d for d in GUIDELINES if d.keywords["active"] == ["true"])
        idx = await self.fresh(backend, embedder, GUIDELINES)
        rule = active.guideline.rule
        assert (await idx.search(rule, kind="guideline", k=1))[0].id == active.id
        count = await idx.count("guideline")
        retired = Document.of_guideline(active.guideline.model_copy(update={"active": False, "version": 2}))
        await idx.upsert([retired])
        for mode in ("hybrid", "bm25", "vector"):
            assert active.id not in ranks(await idx.search(rule, kind="guideline", k=60, mode=mode))
        assert await idx.count("guideline") == count - 1
        assert (await idx.get([active.id]))[0].guideline.version == 2  # stored, with its history
        await idx.upsert([Document.of_guideline(retired.guideline.model_copy(update={"active": True, "version": 3}))])
        hits = await idx.search(rule, kind="guideline", k=1)
        assert hits[0].id == active.id and hits[0].document.guideline.version == 3
        if backend.reports_sources:
            assert hits[0].sources == {"bm25": 1, "vector": 1}

    async def test_concurrent_upserts_and_searches(self, backend, embedder):
        idx = await self.fresh(backend, embedder, CASES[:20])
        batches = [CASES[i : i + 25] for i in range(20, 270, 25)]
        jobs = [idx.upsert(b) for b in batches] + [idx.search(q, kind="case", k=5) for q, _ in data.queries(20)]
        results = await asyncio.gather(*jobs)
        assert all(not r.failed for r in results[: len(batches)])
        assert all(1 <= len(r) <= 5 for r in results[len(batches) :])
        assert await idx.count("case") == 270
        assert len({h.id for h in await idx.search("seller", kind="case", k=270, mode="bm25")}) > 200

    # --- persistence, handles, failures ------------------------------------------------------------------

    async def test_a_reopened_store_answers_as_before_without_the_model(self, backend, embedder):
        docs = CASES[:60] + GUIDELINES + PROBES
        idx = await self.fresh(backend, embedder, docs)
        await idx.delete([CASES[5].id])
        asks = [(q, "case", c) for q, c in data.queries(8)] + [(q, "guideline", c) for q, c in data.queries(4, seed=5)]
        asks.append((data.PROBE_CODE_QUERY, "case", None))
        before = [await idx.search(q, kind=kind, category=c, k=8) for q, kind, c in asks]
        await idx.close()
        calls = embedder.calls
        again = await backend.open(embedder, create=False)
        assert await again.count("case") == 61 and await again.get([d.id for d in PROBES]) == PROBES
        assert embedder.calls == calls  # vectors come from the store, not from the model
        after = [await again.search(q, kind=kind, category=c, k=8) for q, kind, c in asks]
        assert [[h.model_dump() for h in hits] for hits in after] == [[h.model_dump() for h in hits] for hits in before]

    async def test_a_second_handle_sees_and_builds_on_the_first(self, backend, embedder):
        """Two handles on one store (as two worker processes have): neither loses the other's writes."""
        a = await self.fresh(backend, embedder, CASES[:10])
        b = await backend.open(embedder, create=False)
        await a.upsert([CASES[10]])
        await b.upsert([CASES[11]])
        await a.delete([CASES[0].id])
        assert await b.count("case") == 11 and await a.count("case") == 11
        assert (await b.search(CASES[10].text, kind="case", k=1))[0].id == CASES[10].id
        reopened = await backend.open(embedder, create=False)
        assert {d.id for d in await reopened.get([d.id for d in CASES[:12]])} == {d.id for d in CASES[1:12]}

    async def test_a_store_built_with_another_model_is_a_mismatch(self, backend, embedder):
        await self.fresh(backend, embedder, CASES[:5])
        for other, says in (
            (OtherEmbedder("other-minilm", embedder.dims), "other-minilm"),
            (OtherEmbedder(MODEL, 512), "512"),
        ):
            with pytest.raises(PrecedentError) as err:
                await backend.open(other, create=False)
            assert err.value.kind == "model_mismatch"
            assert MODEL in str(err.value) and says in str(err.value) and "embedding.model" in str(err.value)

    async def test_a_missing_store_is_index_missing_unless_created(self, backend, embedder):
        with pytest.raises(PrecedentError) as err:
            await backend.open(embedder, create=False)
        assert err.value.kind == "index_missing" and backend.where in str(err.value)
        created = await backend.open(embedder)
        assert await created.count("case") == 0 and await created.count("guideline") == 0
        assert await created.search("anything at all", kind="guideline") == []
        reopened = await backend.open(embedder, create=False)
        assert await reopened.get([CASES[0].id]) == []

    async def test_a_stored_document_that_does_not_parse_is_corrupt(self, backend, embedder):
        idx = await self.fresh(backend, embedder, CASES[:5])
        await backend.damage(CASES[2].id)
        with pytest.raises(PrecedentError) as err:
            await idx.get([CASES[2].id])
        assert err.value.kind == "corrupt" and "rebuild" in str(err.value)
        assert await idx.get([CASES[1].id]) == [CASES[1]]  # the others still read

    # --- erasure and retention (precedents/erasure.py) ------------------------------------------------------

    async def erasable(self, backend: Backend, embedder):
        return await self.fresh(
            backend,
            embedder,
            [
                precedent("c-1", SAYS, LONG_AGO),
                precedent(
                    "c-10", "A toaster that never heated, decided for the buyer", LONG_AGO + timedelta(days=3000)
                ),
                precedent("c-undated", "A blender without a decision date"),
                citing("g-1", ["c-1", "c-10"], ["c-1", "c-1@console:e-1:2", "c-10"]),
                citing("g-2", ["c-10"], ["c-10"]),
            ],
        )

    async def test_an_erased_case_leaves_the_store_and_its_guidelines_provenance(self, backend, embedder):
        index = await self.erasable(backend, embedder)
        done = await erase_case(index, "c-1", "erased:ref0")
        assert (done.cases, done.guidelines, done.notes) == (1, 1, [])
        assert await index.get(["case:c-1"]) == []
        [g1, g2] = [d.guideline for d in await index.get(["guideline:g-1", "guideline:g-2"])]
        assert g1.supporting_cases == ["c-10"] and [c.case_id for c in g1.history] == ["erased:ref0"] * 2 + ["c-10"]
        assert g1.version == 4 and g1.rule.startswith("A kettle")  # what jurors saw under g-1@4 is unchanged
        assert g2.supporting_cases == ["c-10"]  # a guideline that never named it is left alone
        for mode in ("hybrid", "bm25", "vector"):
            assert "case:c-1" not in ranks(await index.search("kettle cracked lid", kind="case", k=5, mode=mode))
        assert (await index.search(g1.rule, kind="guideline", k=1))[0].id == "guideline:g-1"
        again = await erase_case(index, "c-1", "erased:ref0")
        assert (again.cases, again.guidelines) == (0, 0)

    async def test_retention_takes_out_the_cases_decided_longer_ago(self, backend, embedder):
        index = await self.erasable(backend, embedder)
        now = LONG_AGO + timedelta(days=3001)
        done = await expire_cases(index, retention_s=10 * 86400, now=now)  # c-1 is that old, c-10 is not
        assert done.cases == 1 and await index.get(["case:c-1"]) == []
        assert {d.id for d in await index.get(["case:c-10", "case:c-undated"])} == {"case:c-10", "case:c-undated"}
        [g1] = [d.guideline for d in await index.get(["guideline:g-1"])]
        assert [c.case_id for c in g1.history] == [EXPIRED, EXPIRED, "c-10"]
        assert (await expire_cases(index, retention_s=10 * 86400, now=now)).cases == 0
        assert (await expire_cases(index, retention_s=3600, now=now)).cases == 1  # c-10; never the undated

    async def test_the_erasure_reads_find_every_match_beyond_one_page(self, backend, embedder):
        many = [citing(f"g-{n:02d}", ["c-1"] if n % 5 == 2 else ["c-10"], ["c-10"]) for n in range(4 * SCAN_PAGE + 1)]
        many.append(citing("g-zz", ["c-other"], ["c-9", "c-1"]))  # named in its history only
        old = [precedent(f"c-{n:02d}", "A kettle", LONG_AGO + timedelta(days=n)) for n in range(3 * SCAN_PAGE + 2)]
        index = await self.fresh(backend, embedder, many + old)
        found = await index.guidelines_citing("c-1")
        assert sorted(d.id for d in found) == sorted(d.id for d in many if d.guideline.cites("c-1"))
        assert len(found) == 4 and all(isinstance(d.guideline, Guideline) for d in found)
        assert await index.cases_decided_before(LONG_AGO + timedelta(days=2 * SCAN_PAGE + 1)) == [
            f"c-{n:02d}" for n in range(2 * SCAN_PAGE + 1)
        ]
        assert await index.guidelines_citing("c-nobody") == []

    # --- learning from an outcome (precedents/learning.py) ------------------------------------------------

    async def test_an_outcome_is_learnt_into_the_store(self, backend, embedder):
        settings = Settings(llm_backend="offline", guideline_min_confidence=0.3)
        base = Guideline(id="g-l", rule="A torn seam on arrival favours the buyer.", category="clothing",
                         dispute_type="quality", favours="buyer", confidence=0.3)  # fmt: skip
        index = await self.fresh(backend, embedder, [Document.of_guideline(base)])
        case = dispute("learn-1")
        now = datetime(2026, 11, 1, tzinfo=UTC)

        def verdict(winner: str) -> Verdict:
            return Verdict(verdict_id="v", case_id=case.case_id, category="clothing", winner=winner,
                           votes=Votes(buyer=12, seller=5) if winner == "buyer" else Votes(buyer=5, seller=12),
                           margin=7, rounds_used=1, early_stopped=True, justification="j", cited_clues=[],
                           cited_precedents=[base.ref], focus="f", tokens=Usage(), latency_s=1, backend="scripted",
                           models=["scripted"], decided_at=now)  # fmt: skip

        real = OutcomeReported(case_id=case.case_id, votes={"buyer": 11, "seller": 6}, decided_at=now)
        report = await learning.learn(
            real, verdict("buyer"), CaseFile(case=case, received_at=now), index, settings, now
        )
        assert report.agreed and report.case_added == case.case_id and report.raised == ["g-l@2"]
        [stored] = await index.get(["guideline:g-l"])
        assert stored.guideline.version == 2 and stored.guideline.confidence == pytest.approx(0.37)
        [added] = await index.get([f"case:{case.case_id}"])
        assert added.case.decided_at == now and await index.count("case") == 1
        assert await index.cases_decided_before(now + timedelta(seconds=1)) == [case.case_id]

        other = dispute("learn-2")
        wrong = OutcomeReported(case_id=other.case_id, votes={"buyer": 3, "seller": 14})
        mistaken = verdict("buyer").model_copy(update={"case_id": other.case_id})
        report = await learning.learn(wrong, mistaken, CaseFile(case=other, received_at=now), index, settings, now)
        assert report.retired == ["g-l"]  # 0.37 * 0.8 < 0.3
        assert await index.count("guideline") == 0 and await index.search(base.rule, kind="guideline") == []
        assert (await index.get(["guideline:g-l"]))[0].guideline.active is False
