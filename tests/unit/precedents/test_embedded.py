"""The embedded precedent stores with the real embedding model: what each retriever finds, fusion,
filters, idempotent upserts, deletes, persistence, and the failures they report (model mismatch,
corrupt files, missing index, bad queries). Every test that holds for a store runs on both: the
SQLite store (``EmbeddedIndex``, the default) and the previous file store (``LegacyIndex``, kept for
the migration); the tests of one store's own files say which. The SQLite store's crash safety,
two-process visibility and the migration are in test_store.py."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from cyberjurors.precedents import legacy
from cyberjurors.precedents.embedded import DB_FILE, EmbeddedIndex, bm25_terms
from cyberjurors.precedents.embeddings import load_embedder
from cyberjurors.precedents.index import MAX_QUERY_CHARS, RRF_K
from cyberjurors.precedents.legacy import LegacyIndex
from cyberjurors.precedents.models import Document, Guideline, PrecedentError

from ... import precedent_data as data

MODEL = "all-MiniLM-L6-v2"


class CachingEmbedder:
    """The real model, remembering vectors by text so fresh indexes in each test cost nothing to
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


CASES = [Document.of_case(c) for c in data.cases(270)]
GUIDELINES = [Document.of_guideline(g) for g in data.guidelines(60)]
PROBES = [Document.of_case(data.PROBE_SEMANTIC), Document.of_case(data.PROBE_CODE)]
CORPUS = CASES + GUIDELINES + PROBES


Store = type[EmbeddedIndex] | type[LegacyIndex]
STORES = {"sqlite": EmbeddedIndex, "legacy": LegacyIndex}


@pytest.fixture(scope="module")
def embedder() -> CachingEmbedder:
    return CachingEmbedder(load_embedder(MODEL))


@pytest.fixture(scope="module", params=list(STORES))
def store(request: pytest.FixtureRequest) -> Store:
    return STORES[request.param]


@pytest.fixture(scope="module")
def index(store: Store, embedder: CachingEmbedder, tmp_path_factory: pytest.TempPathFactory) -> EmbeddedIndex:
    """The full synthetic corpus, built once per store and only read by the tests that use it."""

    async def build() -> EmbeddedIndex:
        idx = await store.open(tmp_path_factory.mktemp("shared") / "precedents", embedder)
        report = await idx.upsert(CORPUS)
        assert not report.failed and len(report.indexed) == len(CORPUS)
        return idx  # type: ignore[return-value]  # both stores answer the same protocol

    return asyncio.run(build())


async def fresh(store: Store, folder: Path, embedder, docs: list[Document] | None = None) -> EmbeddedIndex:
    idx = await store.open(folder, embedder)
    if docs:
        assert not (await idx.upsert(docs)).failed
    return idx  # type: ignore[return-value]


def ranks(hits) -> dict[str, int]:
    return {h.id: h.rank for h in hits}


# --- what each retriever finds --------------------------------------------------------------------


async def test_meaning_without_shared_words_is_found_by_vectors_not_bm25(index: EmbeddedIndex):
    target = PROBES[0]
    query = data.PROBE_SEMANTIC_QUERY
    assert bm25_terms(query) and not set(bm25_terms(query)) & set(bm25_terms(target.text))

    vector = await index.search(query, kind="case", k=10, mode="vector")
    bm25 = await index.search(query, kind="case", k=50, mode="bm25")

    assert ranks(vector).get(target.id, 99) <= 3
    assert target.id not in ranks(bm25)
    assert all(h.sources == {"bm25": h.rank} for h in bm25)  # whatever BM25 found, it found by words
    # BM25 returns only documents sharing a term with the query, however large k is
    only = await index.search("the border", kind="case", k=10, mode="bm25")
    assert [h.id for h in only] == [target.id]


async def test_exact_product_code_is_found_by_bm25_not_vectors(index: EmbeddedIndex):
    target = PROBES[1]
    sku_docs = [d for d in CASES if "SKU-" in d.text]
    assert len(sku_docs) > 30  # plenty of other product codes to confuse a fuzzy match

    bm25 = await index.search(data.PROBE_CODE_QUERY, kind="case", k=10, mode="bm25")
    vector = await index.search(data.PROBE_CODE_QUERY, kind="case", k=10, mode="vector")

    assert bm25[0].id == target.id and bm25[0].sources == {"bm25": 1}
    assert target.id not in ranks(vector)
    assert all(h.sources == {"vector": h.rank} for h in vector)


async def test_hybrid_finds_both_and_says_which_retriever_did(index: EmbeddedIndex):
    semantic, code = PROBES
    by_meaning = await index.search(data.PROBE_SEMANTIC_QUERY, kind="case", k=10)
    # k=30, not 10: with plain RRF a document only BM25 finds (at rank 1) scores 1/61, below any
    # document both retrievers put in their top ~60. Here ~80 other summaries share the token
    # "sku", so the exact match lands at fused rank 25 (see the report; a contract question).
    by_code = await index.search(data.PROBE_CODE_QUERY, kind="case", k=30)

    hit = next(h for h in by_meaning if h.id == semantic.id)
    assert set(hit.sources) == {"vector"} and hit.rank <= 3
    hit = next(h for h in by_code if h.id == code.id)
    assert hit.sources["bm25"] == 1 and hit.sources.get("vector", 99) > 50

    for hits, k in ((by_meaning, 10), (by_code, 30)):
        assert [h.rank for h in hits] == list(range(1, k + 1))
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        for h in hits:  # the score is the RRF sum over the retrievers that found it
            assert h.score == pytest.approx(sum(1 / (RRF_K + r) for r in h.sources.values()))
            assert h.document.id == h.id and h.kind == "case" == h.document.kind
    # no summary uses "package", "seized", "import" or "authorities": BM25 contributes nothing there
    assert all(set(h.sources) == {"vector"} for h in by_meaning)
    assert sum(set(h.sources) == {"bm25", "vector"} for h in by_code) >= 20


async def test_hybrid_ranks_the_code_first_when_the_query_also_describes_it(index: EmbeddedIndex):
    hits = await index.search(f"stand mixer {data.PROBE_CODE_QUERY}", kind="case", k=10)
    assert hits[0].id == PROBES[1].id and hits[0].sources["bm25"] == 1 and "vector" in hits[0].sources


# --- filters ----------------------------------------------------------------------------------------


async def test_category_filter_admits_only_that_category(index: EmbeddedIndex):
    for category in data.CATEGORY_NAMES:
        hits = await index.search(
            "the buyer says the item arrived broken and wants a refund", kind="case", category=category, k=25
        )
        assert len(hits) == 25 and {h.document.category for h in hits} == {category}

    unfiltered = await index.search("the buyer says the item arrived broken", kind="case", k=25)
    assert len({h.document.category for h in unfiltered}) > 1


async def test_guideline_filter_adds_cross_category_rules_and_never_returns_cases(index: EmbeddedIndex):
    hits = await index.search(
        "specific dated evidence outweighs general assertions", kind="guideline", category="food", k=30
    )
    categories = {h.document.category for h in hits}
    assert categories == {"food", "all"}
    assert all(h.kind == "guideline" and h.document.guideline is not None for h in hits)
    assert hits[0].document.category == "all"  # the cross-category evidence rule itself

    cases = await index.search("specific dated evidence outweighs general assertions", kind="case", k=30)
    assert all(h.document.case is not None for h in cases)


async def test_inactive_guidelines_are_stored_but_not_searched(store: Store, embedder, tmp_path: Path):
    inactive = next(d for d in GUIDELINES if d.keywords["active"] == ["false"])
    rule = inactive.guideline.rule
    idx = await fresh(store, tmp_path / "idx", embedder, GUIDELINES)

    for mode in ("hybrid", "bm25", "vector"):
        assert inactive.id not in ranks(await idx.search(rule, kind="guideline", k=60, mode=mode))
    assert [d.id for d in await idx.get([inactive.id])] == [inactive.id]
    active_count = sum(d.keywords["active"] == ["true"] for d in GUIDELINES)
    assert await idx.count("guideline") == active_count

    revived = Document.of_guideline(inactive.guideline.model_copy(update={"active": True}))
    await idx.upsert([revived])
    hits = await idx.search(rule, kind="guideline", k=5)
    assert hits[0].id == inactive.id and hits[0].sources == {"bm25": 1, "vector": 1}
    assert await idx.count("guideline") == active_count + 1


async def test_count_follows_the_filters(index: EmbeddedIndex):
    assert await index.count("case") == len(CASES) + len(PROBES)
    assert await index.count("case", "food") == sum(d.category == "food" for d in CASES)
    active = [d for d in GUIDELINES if d.keywords["active"] == ["true"]]
    assert await index.count("guideline", "food") == sum(d.category in ("food", "all") for d in active)
    with pytest.raises(PrecedentError) as err:
        await index.count("case", "furniture")
    assert err.value.kind == "unknown_category"


# --- writes -----------------------------------------------------------------------------------------


async def test_upsert_twice_does_not_duplicate_and_replaces_by_id(store: Store, embedder, tmp_path: Path):
    docs = CASES[:40] + GUIDELINES[:10]
    idx = await fresh(store, tmp_path / "idx", embedder, docs)
    counts = (await idx.count("case"), await idx.count("guideline"))

    again = await idx.upsert(docs)
    assert sorted(again.indexed) == sorted(d.id for d in docs) and not again.failed
    assert (await idx.count("case"), await idx.count("guideline")) == counts
    if store is LegacyIndex:
        manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
        assert manifest["parts"]["case"]["count"] == 40 and manifest["parts"]["guideline"]["count"] == 10
    else:  # one row per id
        with sqlite3.connect(tmp_path / "idx" / DB_FILE) as db:
            assert db.execute("SELECT kind, count(*) FROM documents GROUP BY kind ORDER BY kind").fetchall() == [
                ("case", 40),
                ("guideline", 10),
            ]
    hits = await idx.search(docs[0].text, kind="case", k=40)
    assert len({h.id for h in hits}) == len(hits) == 40

    # same id, new text: the old words no longer find it, the new ones do
    changed = docs[0].model_copy(update={"text": "A toaster shipped with a Martian plug adaptor nobody can use."})
    await idx.upsert([changed])
    assert (await idx.search("martian plug adaptor", kind="case", k=1, mode="bm25"))[0].id == changed.id
    assert (await idx.get([changed.id]))[0].text == changed.text
    assert await idx.count("case") == 40


async def test_duplicate_ids_in_one_batch_keep_the_last(store: Store, embedder, tmp_path: Path):
    first, second = CASES[0], CASES[0].model_copy(update={"text": "Second version of the summary about a kettle."})
    idx = await fresh(store, tmp_path / "idx", embedder)
    report = await idx.upsert([first, second])
    assert report.indexed == [first.id]
    assert (await idx.get([first.id]))[0].text == second.text and await idx.count("case") == 1


async def test_upsert_reports_bad_documents_and_goes_on(store: Store, embedder, tmp_path: Path):
    idx = await fresh(store, tmp_path / "idx", FailingEmbedder(embedder.model))
    unknown = CASES[0].model_copy(update={"category": "furniture"})
    empty = CASES[1].model_copy(update={"text": "   "})
    case_for_all = CASES[2].model_copy(update={"category": "all"})
    report = await idx.upsert([unknown, empty, case_for_all, CASES[3]])
    assert report.indexed == [CASES[3].id]
    assert set(report.failed) == {unknown.id, empty.id, case_for_all.id}
    assert "furniture" in report.failed[unknown.id]

    exploding = CASES[4].model_copy(update={"text": "EXPLODE " + CASES[4].text})
    report = await idx.upsert([exploding])
    assert report.failed == {exploding.id: "embedding failed: RuntimeError: model crashed"}
    assert await idx.count("case") == 1


async def test_delete(store: Store, embedder, tmp_path: Path):
    docs = CASES[:30] + GUIDELINES[:5]
    idx = await fresh(store, tmp_path / "idx", embedder, docs)
    gone = [docs[0].id, docs[7].id, GUIDELINES[0].id]
    assert await idx.delete([*gone, "case:never-existed"]) == 3
    assert await idx.delete(gone) == 0
    assert await idx.get(gone) == []
    assert await idx.count("case") == 28
    for doc in (docs[0], docs[7]):
        assert doc.id not in ranks(await idx.search(doc.text, kind="case", k=30))
    remaining = await idx.get([d.id for d in docs])
    assert len(remaining) == 32 and all(d.id not in gone for d in remaining)
    await idx.close()

    reopened = await store.open(tmp_path / "idx", embedder, create=False)
    assert await reopened.count("case") == 28 and await reopened.get(gone) == []


async def test_concurrent_upserts_and_searches(store: Store, embedder, tmp_path: Path):
    idx = await fresh(store, tmp_path / "idx", embedder, CASES[:20])
    batches = [CASES[i : i + 25] for i in range(20, 270, 25)]
    jobs = [idx.upsert(b) for b in batches] + [idx.search(q, kind="case", k=5) for q, _ in data.queries(20)]
    results = await asyncio.gather(*jobs)
    assert all(not r.failed for r in results[: len(batches)])
    assert all(1 <= len(r) <= 5 for r in results[len(batches) :])
    assert await idx.count("case") == 270
    assert len({h.id for h in await idx.search("seller", kind="case", k=270, mode="bm25")}) > 200


# --- persistence --------------------------------------------------------------------------------------


async def test_persistence_round_trip(store: Store, embedder, tmp_path: Path):
    docs = CASES[:60] + GUIDELINES + PROBES
    folder = tmp_path / "idx"
    idx = await fresh(store, folder, embedder, docs)
    await idx.delete([CASES[5].id])
    asks = [(q, "case", c) for q, c in data.queries(8)] + [(q, "guideline", c) for q, c in data.queries(4, seed=5)]
    asks.append((data.PROBE_CODE_QUERY, "case", None))
    before = [await idx.search(q, kind=kind, category=c, k=8) for q, kind, c in asks]
    await idx.close()
    with pytest.raises(PrecedentError):
        await idx.search("anything", kind="case")

    calls = embedder.calls
    again = await store.open(folder, embedder, create=False)
    assert embedder.calls == calls  # vectors come from disk, not from the model
    after = [await again.search(q, kind=kind, category=c, k=8) for q, kind, c in asks]
    assert [[h.model_dump() for h in hits] for hits in after] == [[h.model_dump() for h in hits] for hits in before]
    assert await again.count("case") == 61 and await again.get([d.id for d in PROBES]) == PROBES
    files = sorted(p.name for p in folder.iterdir())
    if store is LegacyIndex:
        assert files == [
            ".lock",
            "case.000003.jsonl",
            "case.000003.npy",
            "guideline.000002.jsonl",
            "guideline.000002.npy",
            "manifest.json",
        ]  # old generations and temp files cleaned up
    else:  # the database and SQLite's write-ahead log and its index
        assert set(files) <= {DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm"} and DB_FILE in files


async def test_a_second_writer_builds_on_the_first(store: Store, embedder, tmp_path: Path):
    """Two handles on one folder (as two worker processes would have): neither loses the other's
    upserts, and a reader sees the other's writes."""
    folder = tmp_path / "idx"
    a = await fresh(store, folder, embedder, CASES[:10])
    b = await store.open(folder, embedder, create=False)
    await a.upsert([CASES[10]])
    await b.upsert([CASES[11]])
    await a.delete([CASES[0].id])
    assert await b.count("case") == 11 and await a.count("case") == 11
    hits = await b.search(CASES[10].text, kind="case", k=1)
    assert hits[0].id == CASES[10].id
    reopened = await store.open(folder, embedder, create=False)
    assert {d.id for d in await reopened.get([d.id for d in CASES[:12]])} == {d.id for d in CASES[1:12]}


async def test_a_bad_write_by_another_process_does_not_break_searches(embedder, tmp_path: Path):
    """The legacy store: a garbled manifest written by another process (SQLite's own
    transactions leave no such state to the SQLite store)."""
    store = LegacyIndex
    folder = tmp_path / "idx"
    a = await fresh(store, folder, embedder, CASES[:10])
    before = await a.search(CASES[3].text, kind="case", k=3)
    (folder / "manifest.json").write_text('{"format": 1, "garbled')
    assert await a.search(CASES[3].text, kind="case", k=3) == before  # from memory
    assert await a.count("case") == 10
    with pytest.raises(PrecedentError) as err:  # but nothing is written over what it cannot read
        await a.upsert([CASES[11]])
    assert err.value.kind == "corrupt"


# --- failures --------------------------------------------------------------------------------------------


async def test_model_mismatch(store: Store, embedder, tmp_path: Path):
    folder = tmp_path / "idx"
    await (await fresh(store, folder, embedder, CASES[:5])).close()
    with pytest.raises(PrecedentError) as err:
        await store.open(folder, OtherEmbedder("other-minilm", 384))
    assert err.value.kind == "model_mismatch"
    assert MODEL in str(err.value) and "other-minilm" in str(err.value) and "rebuild" in str(err.value)
    with pytest.raises(PrecedentError) as err:
        await store.open(folder, OtherEmbedder(MODEL, 512))
    assert err.value.kind == "model_mismatch" and "512" in str(err.value)


async def corrupted(folder: Path, embedder, store: Store = LegacyIndex) -> PrecedentError:
    with pytest.raises(PrecedentError) as err:
        await store.open(folder, embedder, create=False)
    assert err.value.kind == "corrupt"
    return err.value


def reseal(folder: Path, kind: str, what: str, content: bytes) -> None:
    """Rewrite a data file and fix its manifest entry, as a buggy writer would: the checksums pass,
    the content is wrong."""
    manifest = json.loads((folder / "manifest.json").read_text())
    entry = manifest["parts"][kind][what]
    (folder / entry["file"]).write_bytes(content)
    entry.update(bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
    (folder / "manifest.json").write_text(json.dumps(manifest))


async def test_corrupt_files(embedder, tmp_path: Path):
    """The legacy store's files: checksums, sizes and rows checked at open."""
    store = LegacyIndex
    folder = tmp_path / "idx"
    await (await fresh(store, folder, embedder, CASES[:12] + GUIDELINES[:3])).close()
    manifest = json.loads((folder / "manifest.json").read_text())
    vectors = folder / manifest["parts"]["case"]["vectors"]["file"]
    documents = folder / manifest["parts"]["case"]["documents"]["file"]
    original = {p: p.read_bytes() for p in (vectors, documents, folder / "manifest.json")}

    vectors.write_bytes(original[vectors][:-1000])  # truncated
    err = await corrupted(folder, embedder)
    assert vectors.name in str(err) and "truncated" in str(err)
    vectors.write_bytes(original[vectors])

    lines = original[documents].splitlines(keepends=True)
    documents.write_bytes(b"".join([*lines[:3], lines[4], lines[3], *lines[5:]]))  # same size, other bytes
    err = await corrupted(folder, embedder)
    assert documents.name in str(err) and "checksum" in str(err)
    documents.write_bytes(original[documents])

    buf = io.BytesIO()
    np.save(buf, np.load(io.BytesIO(original[vectors]))[:-1])
    reseal(folder, "case", "vectors", buf.getvalue())  # one vector row short
    err = await corrupted(folder, embedder)
    assert "11 vector rows" in str(err) and "12 documents" in str(err)
    (folder / "manifest.json").write_bytes(original[folder / "manifest.json"])
    vectors.write_bytes(original[vectors])

    reseal(folder, "case", "documents", b"{not json\n" + b"".join(lines[1:]))
    err = await corrupted(folder, embedder)
    assert "line 1" in str(err)
    (folder / "manifest.json").write_bytes(original[folder / "manifest.json"])
    documents.write_bytes(original[documents])

    (folder / "manifest.json").write_bytes(original[folder / "manifest.json"][:-40] + b"#garbled")
    err = await corrupted(folder, embedder)
    assert "manifest.json" in str(err) and "JSON" in str(err)

    (folder / "manifest.json").write_bytes(original[folder / "manifest.json"])
    ok = await store.open(folder, embedder, create=False)  # and all is well again
    assert await ok.count("case") == 12


async def test_a_damaged_database_is_reported_as_corrupt(embedder, tmp_path: Path):
    folder = tmp_path / "idx"
    await (await fresh(EmbeddedIndex, folder, embedder, CASES[:12])).close()
    database = folder / DB_FILE
    original = database.read_bytes()
    database.write_bytes(b"not a database at all" + original[22:])  # the header overwritten
    err = await corrupted(folder, embedder, EmbeddedIndex)
    assert DB_FILE in str(err) and "SQLite" in str(err)
    database.write_bytes(original)
    ok = await EmbeddedIndex.open(folder, embedder, create=False)
    assert await ok.count("case") == 12


async def test_the_analyzer_makes_the_legacy_stores_terms():
    """tantivy's analyzer (the SQLite store's) and bm25s with PyStemmer (the legacy store's)
    give every text of the corpus and every query the same terms."""
    texts = [d.text for d in CORPUS] + [q for q, _ in data.queries(200)] + ["Café déjà-vu, the RE-shipped item_42!"]
    assert [bm25_terms(t) for t in texts] == [legacy.bm25_terms(t) for t in texts]


async def test_index_missing(store: Store, embedder, tmp_path: Path):
    for folder in (tmp_path / "nowhere", tmp_path):
        with pytest.raises(PrecedentError) as err:
            await store.open(folder, embedder, create=False)
        assert err.value.kind == "index_missing" and str(folder) in str(err.value)
    assert not (tmp_path / "nowhere").exists()

    created = await store.open(tmp_path / "new" / "idx", embedder)
    assert (tmp_path / "new" / "idx" / ("manifest.json" if store is LegacyIndex else DB_FILE)).is_file()
    assert await created.count("case") == 0
    assert await created.search("anything at all", kind="guideline") == []
    reopened = await store.open(tmp_path / "new" / "idx", embedder, create=False)
    assert await reopened.count("guideline") == 0


async def test_bad_queries(index: EmbeddedIndex):
    for query in ("", "   \n\t"):
        with pytest.raises(PrecedentError) as err:
            await index.search(query, kind="case")
        assert err.value.kind == "bad_query"
    with pytest.raises(PrecedentError) as err:
        await index.search("refund", kind="case", k=0)
    assert err.value.kind == "bad_query"
    with pytest.raises(PrecedentError) as err:
        await index.search("refund", kind="case", category="furniture")
    assert err.value.kind == "unknown_category"
    # only stopwords: BM25 has nothing to match, the vector side still answers
    hits = await index.search("the of and", kind="case", k=5)
    assert len(hits) == 5 and all(set(h.sources) == {"vector"} for h in hits)


async def test_huge_query_still_answers(index: EmbeddedIndex):
    filler = " ".join(q for q, _ in data.queries(400))
    query = (data.PROBE_SEMANTIC_QUERY + " " + filler * 10)[:100_000]
    assert len(query) == 100_000
    hits = await asyncio.wait_for(index.search(query, kind="case", k=10), timeout=10)
    assert len(hits) == 10
    # only the head is used (MAX_QUERY_CHARS), so the tail cannot change the answer
    head = await index.search(query[:MAX_QUERY_CHARS] + " SKU-7Q4-ZX81 customs", kind="case", k=10)
    assert [h.id for h in hits] == [h.id for h in head]


async def test_guideline_payload_round_trips(index: EmbeddedIndex):
    g = GUIDELINES[3].guideline
    [doc] = await index.get([g.doc_id])
    assert isinstance(doc.guideline, Guideline) and doc.guideline == g
    assert await index.get(["guideline:missing", g.doc_id, CASES[0].id]) == [GUIDELINES[3], CASES[0]]
