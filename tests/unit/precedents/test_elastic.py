"""``ElasticsearchIndex`` through the real AsyncElasticsearch client and transport against a local
fake Elasticsearch (``fake_elasticsearch.py``) that records every request and answers like
Elasticsearch 9: the store contract (store_contract.py, ``TestFakeElasticsearch``), then the
request/response level with scripted rankings and failures."""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import socket
from typing import Any

import numpy as np
import pytest
from elasticsearch import AsyncElasticsearch

from cyberjurors.config import Settings
from cyberjurors.precedents.base import open_index
from cyberjurors.precedents.elastic import ElasticsearchIndex
from cyberjurors.precedents.index import RRF_K, fuse
from cyberjurors.precedents.models import Document, Guideline, PrecedentCase, PrecedentError
from cyberjurors.schemas import Votes

from ...fake_elasticsearch import (
    FakeElasticsearch,
    Index,
    authentication_error,
    error_body,
    rrf_licence_error,
    unauthorized_search_error,
    unknown_retriever_error,
)
from ...fake_elasticsearch import fake_es as fake_es  # a fixture, requested by name
from .store_contract import SCAN_PAGE, StoreContract

PREFIX = "cjt"
CASES, GUIDELINES = f"{PREFIX}-cases", f"{PREFIX}-guidelines"


class HashEmbedder:
    """Deterministic stand-in for the sentence model: words hashed into 8 signed buckets, normalised."""

    def __init__(self, name: str = "hash-8", dims: int = 8):
        self.name, self.dims = name, dims

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
                out[row, h % self.dims] += 1.0 if h & 1 << 20 else -1.0
            if not out[row].any():
                out[row, 0] = 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def precedent(n: int, category: str = "clothing", winner: str = "buyer", summary: str | None = None) -> Document:
    return Document.of_case(
        PrecedentCase(
            case_id=f"h{n}",
            category=category,
            winner=winner,
            votes=Votes(buyer=12, seller=5),
            tags=["seam"],
            summary=summary or f"Shirt number {n}: the seam tore on first wear; buyer sent an unboxing photo",
        )
    )


def guideline(n: int, category: str = "clothing", active: bool = True) -> Document:
    return Document.of_guideline(
        Guideline(
            id=f"g{n}",
            rule=f"Rule {n}: an unboxing photo of a torn seam wins the buyer a refund",
            category=category,
            dispute_type="quality",
            favours="buyer",
            confidence=0.7,
            active=active,
            tags=["seam"],
        )
    )


def client_for(url: str, *, timeout: float = 5.0, max_retries: int = 2, **kw) -> AsyncElasticsearch:
    return AsyncElasticsearch(
        url,
        request_timeout=timeout,
        max_retries=max_retries,
        retry_on_status=(429, 502, 503, 504),
        retry_on_timeout=True,
        **kw,
    )


class Cluster:
    """One store: the indexes under one prefix of a cluster (the fake here; a live one in
    test_elastic_live.py), each handle with a client of its own."""

    reports_sources = False  # the rrf retriever reports fused scores only

    def __init__(self, url: str, prefix: str, **client: Any):
        self.url, self.prefix, self.client = url, prefix, client
        self.where = f"{prefix}-cases"
        self.opened: list[ElasticsearchIndex] = []

    async def open(self, embedder, *, create: bool = True) -> ElasticsearchIndex:
        index = ElasticsearchIndex(
            AsyncElasticsearch(self.url, request_timeout=30, max_retries=2, **self.client),
            embedder,
            prefix=self.prefix,
            scan_page=SCAN_PAGE,
            bulk_initial_backoff=0.01,
        )
        self.opened.append(index)
        await index.ensure(create=create)
        return index

    async def damage(self, doc_id: str) -> None:
        [index, *_] = self.opened
        kind = doc_id.split(":", 1)[0]
        garbled = {"id": doc_id, "kind": kind, "category": "clothing", "text": "garbled", kind: {"votes": "many"}}
        await index.client.bulk(
            operations=[{"index": {"_index": index.alias(kind), "_id": doc_id}}, garbled], refresh="wait_for"
        )

    async def close(self) -> None:
        for index in self.opened:
            await index.close()


class TestFakeElasticsearch(StoreContract):
    @pytest.fixture
    async def backend(self, fake_es: FakeElasticsearch):
        cluster = Cluster(fake_es.url, PREFIX)
        yield cluster
        await cluster.close()


@pytest.fixture
async def make_index(fake_es: FakeElasticsearch):
    made: list[ElasticsearchIndex] = []

    async def make(embedder=None, *, ensure: bool = True, client=None, **options) -> ElasticsearchIndex:
        options.setdefault("bulk_initial_backoff", 0.01)
        index = ElasticsearchIndex(
            client or client_for(fake_es.url), embedder or HashEmbedder(), prefix=PREFIX, **options
        )
        made.append(index)
        if ensure:
            await index.ensure()
        return index

    yield make
    for index in made:
        await index.close()


def expected_mappings(model: str = "hash-8", dims: int = 8) -> dict:
    keyword = {"type": "keyword"}
    return {
        "dynamic": False,
        "_meta": {"embedding_model": model, "embedding_dims": dims, "layout": 1},
        "dynamic_templates": [{"keywords": {"path_match": "keywords.*", "mapping": keyword}}],
        "properties": {
            "id": keyword,
            "kind": keyword,
            "category": keyword,
            "text": {"type": "text", "analyzer": "english"},
            "keywords": {
                "type": "object",
                "dynamic": True,
                "properties": {"outcome": keyword, "dispute_type": keyword, "tags": keyword, "active": keyword},
            },
            "embedding": {
                "type": "dense_vector",
                "dims": dims,
                "index": True,
                "similarity": "cosine",
                "index_options": {"type": "hnsw", "m": 16, "ef_construction": 100},
            },
            "case": {"type": "object", "enabled": False},
            "guideline": {"type": "object", "enabled": False},
        },
    }


# --- layout ------------------------------------------------------------------------------------


async def test_ensure_sends_the_template_creates_versioned_indexes_behind_aliases(fake_es, make_index):
    await make_index()
    [put] = fake_es.requests_to("PUT", f"/_index_template/{PREFIX}-precedents")
    assert put.body == {
        "index_patterns": [f"{CASES}-*", f"{GUIDELINES}-*"],
        "priority": 200,
        "template": {
            "settings": {"number_of_shards": 1, "auto_expand_replicas": "0-1"},
            "mappings": expected_mappings(),
        },
        "_meta": {
            "description": "cyberjurors precedent base (cases H, guidelines N)",
            "embedding_model": "hash-8",
            "embedding_dims": 8,
            "layout": 1,
        },
    }
    for alias in (CASES, GUIDELINES):
        [create] = fake_es.requests_to("PUT", f"/{alias}-v1")
        assert create.body == {
            "settings": {"number_of_shards": 1, "auto_expand_replicas": "0-1"},
            "mappings": expected_mappings(),
            "aliases": {alias: {"is_write_index": True}},
        }
        assert fake_es.alias_target(alias) == [f"{alias}-v1"]
    # every request went through the real client: compatibility headers, JSON bodies
    assert put.headers["content-type"] == "application/vnd.elasticsearch+json; compatible-with=9"

    # idempotent: a second worker opening the same indexes creates nothing
    before = len(fake_es.requests)
    await make_index()
    assert all(r.method == "GET" for r in fake_es.requests[before:])
    assert sorted(fake_es.indices) == [f"{CASES}-v1", f"{GUIDELINES}-v1"]


async def test_an_index_without_cyberjurors_meta_is_corrupt(fake_es, make_index):
    fake_es.indices["foreign"] = Index("foreign", {"properties": {}}, {}, {CASES: {}})
    index = await make_index(ensure=False)
    with pytest.raises(PrecedentError) as err:
        await index.ensure()
    assert err.value.kind == "corrupt" and "_meta" in str(err.value)


# --- writes ------------------------------------------------------------------------------------


async def test_upsert_sends_one_bulk_with_alias_ids_and_vectors_and_is_idempotent(fake_es, make_index):
    index = await make_index()
    docs = [precedent(1), precedent(2, "food"), guideline(1)]
    report = await index.upsert(docs)
    assert report.indexed == [d.id for d in docs] and report.failed == {}

    [bulk] = fake_es.requests_to("PUT", "/_bulk") + fake_es.requests_to("POST", "/_bulk")
    assert bulk.query == {"refresh": "wait_for", "require_alias": "true"}
    assert bulk.headers["content-type"] == "application/vnd.elasticsearch+x-ndjson; compatible-with=9"
    actions, sources = bulk.ndjson[0::2], bulk.ndjson[1::2]
    assert actions == [
        {"index": {"_index": CASES, "_id": "case:h1"}},
        {"index": {"_index": CASES, "_id": "case:h2"}},
        {"index": {"_index": GUIDELINES, "_id": "guideline:g1"}},
    ]
    for doc, source in zip(docs, sources, strict=False):
        vector = source.pop("embedding")
        assert len(vector) == 8 and np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
        assert np.allclose(vector, HashEmbedder().encode([doc.text])[0], atol=1e-6)
        assert source == doc.model_dump(mode="json")
    assert sources[2]["keywords"]["active"] == ["true"] and sources[0]["case"]["case_id"] == "h1"

    assert await index.get(["case:h2", "guideline:g1", "case:nope", "free-id"]) == [docs[1], docs[2]]
    [mget] = fake_es.requests_to("POST", "/_mget")
    assert mget.query == {"_source_excludes": "embedding"}
    assert {"_index": CASES, "_id": "free-id"} in mget.body["docs"] and {
        "_index": GUIDELINES,
        "_id": "free-id",
    } in mget.body["docs"]

    again = await index.upsert(docs)  # same ids: overwritten, not duplicated
    assert again.indexed == report.indexed
    assert len(fake_es.indices[f"{CASES}-v1"].docs) == 2 and fake_es.indices[f"{CASES}-v1"].versions["case:h1"] == 2
    assert await index.count("case") == 2 and await index.count("case", "clothing") == 1


async def test_partial_bulk_failure_names_the_failed_documents_and_429_items_are_retried(fake_es, make_index):
    index = await make_index()
    fake_es.fail_item("case:h2", 400, "document_parsing_exception", "[1:42] failed to parse field [text]", times=None)
    fake_es.fail_item(
        "case:h3",
        429,
        "es_rejected_execution_exception",
        "rejected execution of coordinating operation [shard_detail=[cjt-cases-v1][0][P]]",
        times=2,
    )
    report = await index.upsert([precedent(1), precedent(2), precedent(3), precedent(4)])
    assert report.failed == {"case:h2": "400 document_parsing_exception: [1:42] failed to parse field [text]"}
    assert report.indexed == ["case:h1", "case:h3", "case:h4"]
    bulks = fake_es.requests_to("PUT", "/_bulk") + fake_es.requests_to("POST", "/_bulk")
    assert [[a["index"]["_id"] for a in b.ndjson[0::2]] for b in bulks] == [
        ["case:h1", "case:h2", "case:h3", "case:h4"],
        ["case:h3"],
        ["case:h3"],
    ]  # only the 429 item, twice
    assert sorted(fake_es.indices[f"{CASES}-v1"].docs) == ["case:h1", "case:h3", "case:h4"]


async def test_a_bulk_where_nothing_is_indexed_raises_with_the_report(fake_es, make_index):
    index = await make_index(bulk_max_retries=1)
    for n in (1, 2):
        fake_es.fail_item(f"case:h{n}", 400, "document_parsing_exception", "bad document", times=None)
    with pytest.raises(PrecedentError) as err:
        await index.upsert([precedent(1), precedent(2)])
    assert err.value.kind == "bulk_failed" and "case:h1" in str(err.value) and "case:h2" in str(err.value)
    assert set(err.value.report.failed) == {"case:h1", "case:h2"}

    fake_es.item_failures.clear()
    fake_es.fail_item("case:h5", 429, "es_rejected_execution_exception", "queue full", times=None)
    with pytest.raises(PrecedentError) as err:
        await index.upsert([precedent(5)])
    assert err.value.kind == "rate_limited"


async def test_upsert_into_a_missing_alias_does_not_auto_create_an_index(fake_es, make_index):
    index = await make_index(ensure=False)
    with pytest.raises(PrecedentError) as err:
        await index.upsert([precedent(1)])
    assert err.value.kind == "index_missing"
    assert fake_es.indices == {}


# --- search --------------------------------------------------------------------------------------


async def seeded(make_index, fake_es, **options) -> ElasticsearchIndex:
    index = await make_index(**options)
    await index.upsert(
        [precedent(n) for n in range(1, 7)]
        + [precedent(9, "food")]
        + [guideline(1), guideline(2, "all"), guideline(3, active=False), guideline(4, "food")]
    )
    fake_es.script("bm25", ["case:h3", "case:h1", "case:h5", "case:h9"])
    fake_es.script("knn", ["case:h1", "case:h4", "case:h3", "case:h6"])
    return index


def filters(kind: str, categories: list[str] | None) -> dict:
    clauses = [{"term": {"kind": kind}}] + ([{"terms": {"category": categories}}] if categories else [])
    return {"bool": {"filter": clauses, "must_not": [{"term": {"keywords.active": "false"}}]}}


async def test_hybrid_search_sends_one_rrf_retriever_request(fake_es, make_index):
    index = await seeded(make_index, fake_es)
    before = len(fake_es.searches())
    hits = await index.search("torn seam on a shirt", kind="case", category="clothing", k=3)
    [req] = fake_es.searches()[before:]
    assert req.path == f"/{CASES}/_search"
    rrf = req.body["retriever"]["rrf"]
    [standard, knn] = rrf["retrievers"]
    assert standard == {
        "standard": {
            "query": {
                "bool": {
                    "must": [{"match": {"text": {"query": "torn seam on a shirt"}}}],
                    "filter": [filters("case", ["clothing"])],
                }
            }
        }
    }
    assert knn["knn"]["field"] == "embedding" and knn["knn"]["filter"] == filters("case", ["clothing"])
    assert knn["knn"]["query_vector"] == pytest.approx(
        HashEmbedder().encode(["torn seam on a shirt"])[0].tolist(), abs=1e-6
    )
    assert knn["knn"]["k"] == rrf["rank_window_size"] == 50 and knn["knn"]["num_candidates"] == 100
    assert rrf["rank_constant"] == RRF_K == 60
    assert req.body["size"] == 3 and req.body["_source"] == {"excludes": ["embedding"]}
    assert "query" not in req.body and "knn" not in req.body

    # the fake fuses its scripted lists as Elasticsearch does; h9 (food) is filtered out
    expected = fuse({"bm25": ["case:h3", "case:h1", "case:h5"], "vector": ["case:h1", "case:h4", "case:h3", "case:h6"]})
    assert [h.id for h in hits] == [d for d, _, _ in expected[:3]]
    assert [h.rank for h in hits] == [1, 2, 3]
    assert [h.score for h in hits] == pytest.approx([s for _, s, _ in expected[:3]], rel=1e-6)
    assert all(h.sources == {} for h in hits)  # rrf reports fused scores only
    assert hits[0].document == precedent(1) and hits[0].kind == "case"
    assert index.rrf is True

    # guidelines: the category filter admits cross-category rules ('all')
    await index.search("torn seam", kind="guideline", category="clothing", k=2)
    rrf = fake_es.searches()[-1].body["retriever"]["rrf"]
    assert rrf["retrievers"][1]["knn"]["filter"] == filters("guideline", ["clothing", "all"])


async def test_rrf_with_sources_also_sends_the_two_sub_queries(fake_es, make_index):
    index = await seeded(make_index, fake_es, rrf_sources=True)
    before = len(fake_es.searches())
    hits = await index.search("torn seam", kind="case", category="clothing", k=4)
    assert sorted("retriever" in r.body for r in fake_es.searches()[before:]) == [False, False, True]
    expected = fuse({"bm25": ["case:h3", "case:h1", "case:h5"], "vector": ["case:h1", "case:h4", "case:h3", "case:h6"]})
    assert [(h.id, h.sources) for h in hits] == [(d, src) for d, _, src in expected[:4]]


@pytest.mark.parametrize(
    "status,refusal",
    [(403, rrf_licence_error()), (400, unknown_retriever_error())],
    ids=["basic-licence", "unknown-retriever"],
)
async def test_a_refused_rrf_retriever_falls_back_to_client_side_fusion_once(
    fake_es, make_index, caplog, status, refusal
):
    caplog.set_level(logging.INFO, logger="cyberjurors.precedents.elastic")
    index = await seeded(make_index, fake_es)
    fake_es.fail(status, refusal, method="POST", path=r".*/_search", when=lambda r: "retriever" in r.body, times=None)

    before = len(fake_es.searches())
    hits = await index.search("torn seam", kind="case", category="clothing", k=4)
    first = fake_es.searches()[before:]
    assert len(first) == 3 and "retriever" in first[0].body  # tried once, then the two sub-queries
    lexical = next(r.body for r in first[1:] if "query" in r.body)
    semantic = next(r.body for r in first[1:] if "knn" in r.body)
    assert lexical == {
        "query": {
            "bool": {"must": [{"match": {"text": {"query": "torn seam"}}}], "filter": [filters("case", ["clothing"])]}
        },
        "size": 50,
        "_source": {"excludes": ["embedding"]},
    }
    assert semantic["knn"]["filter"] == filters("case", ["clothing"]) and semantic["knn"]["k"] == 50
    assert semantic["size"] == 50 and "query" not in semantic

    expected = fuse({"bm25": ["case:h3", "case:h1", "case:h5"], "vector": ["case:h1", "case:h4", "case:h3", "case:h6"]})
    assert [(h.id, h.rank, h.sources) for h in hits] == [(d, n, src) for n, (d, _, src) in enumerate(expected[:4], 1)]
    assert [h.score for h in hits] == [s for _, s, _ in expected[:4]]
    assert index.rrf is False and str(status) in index.rrf_refusal

    before = len(fake_es.searches())
    again = await index.search("torn seam", kind="case", category="clothing", k=4)
    assert len(fake_es.searches()[before:]) == 2  # straight to the fallback
    assert not any("retriever" in r.body for r in fake_es.searches()[before:])
    assert [h.id for h in again] == [h.id for h in hits]
    assert len([r for r in caplog.records if "refused the rrf retriever" in r.getMessage()]) == 1


async def test_a_403_that_is_not_the_licence_is_an_auth_error_not_a_fallback(fake_es, make_index):
    index = await seeded(make_index, fake_es)
    fake_es.fail(403, unauthorized_search_error(CASES), method="POST", path=r".*/_search", times=None)
    before = len(fake_es.searches())
    with pytest.raises(PrecedentError) as err:
        await index.search("torn seam", kind="case")
    assert err.value.kind == "auth" and "privilege" in str(err.value)
    assert len(fake_es.searches()[before:]) == 1 and index.rrf is None


async def test_bm25_and_vector_modes_run_one_side(fake_es, make_index):
    index = await seeded(make_index, fake_es)
    before = len(fake_es.searches())
    lexical = await index.search("seam", kind="case", category="clothing", k=2, mode="bm25")
    semantic = await index.search("seam", kind="case", category="clothing", k=2, mode="vector")
    [b, v] = fake_es.searches()[before:]
    assert "query" in b.body and "knn" not in b.body and "retriever" not in b.body and b.body["size"] == 2
    assert "knn" in v.body and "query" not in v.body and v.body["knn"]["k"] == 2 and v.body["size"] == 2
    assert [(h.id, h.rank, h.sources) for h in lexical] == [("case:h3", 1, {"bm25": 1}), ("case:h1", 2, {"bm25": 2})]
    assert [(h.id, h.sources) for h in semantic] == [("case:h1", {"vector": 1}), ("case:h4", {"vector": 2})]
    assert lexical[0].score == pytest.approx(1 / (RRF_K + 1))


# --- rebuild --------------------------------------------------------------------------------------


async def test_rebuild_loads_a_new_index_and_swaps_the_alias_atomically(fake_es, make_index):
    index = await make_index()
    await index.upsert([precedent(1), precedent(2)])
    before = len(fake_es.requests)
    report = await index.rebuild("case", [precedent(2), precedent(3)])
    assert report.indexed == ["case:h2", "case:h3"]
    new = fake_es.requests[before:]
    [create] = [r for r in new if r.method == "PUT" and r.path == f"/{CASES}-v2"]
    assert "aliases" not in create.body and create.body["mappings"] == expected_mappings()
    [bulk] = [r for r in new if r.path == "/_bulk"]
    assert {a["index"]["_index"] for a in bulk.ndjson[0::2]} == {f"{CASES}-v2"}  # the concrete new index
    [swap] = [r for r in new if r.path == "/_aliases"]
    assert swap.body == {
        "actions": [
            {"remove": {"index": f"{CASES}-v1", "alias": CASES}},
            {"add": {"index": f"{CASES}-v2", "alias": CASES, "is_write_index": True}},
        ]
    }
    [delete] = [r for r in new if r.method == "DELETE"]
    assert delete.path == f"/{CASES}-v1"
    order = [r.path for r in new if r.method != "GET"]
    assert order.index(f"/{CASES}-v2/_refresh") < order.index("/_aliases") < order.index(f"/{CASES}-v1")
    assert fake_es.alias_target(CASES) == [f"{CASES}-v2"] and f"{CASES}-v1" not in fake_es.indices
    assert [d.id for d in await index.get(["case:h1", "case:h2", "case:h3"])] == ["case:h2", "case:h3"]


async def test_a_failed_rebuild_leaves_the_alias_alone(fake_es, make_index):
    index = await make_index()
    await index.upsert([precedent(1)])
    fake_es.fail_item("case:h3", 400, "document_parsing_exception", "bad", times=None)
    with pytest.raises(PrecedentError) as err:
        await index.rebuild("case", [precedent(2), precedent(3)])
    assert err.value.kind == "bulk_failed" and "case:h3" in str(err.value)
    assert fake_es.alias_target(CASES) == [f"{CASES}-v1"] and f"{CASES}-v2" not in fake_es.indices
    assert not fake_es.requests_to("POST", "/_aliases")


async def test_rebuild_moves_an_index_to_a_new_embedding_model(fake_es, make_index):
    await (await make_index()).upsert([precedent(1)])
    newer = await make_index(HashEmbedder(name="hash-16", dims=16), ensure=False)
    await newer.rebuild("case", [precedent(1)])
    await newer.rebuild("guideline", [guideline(1)])
    await newer.ensure(create=False)  # no mismatch any more
    assert fake_es.indices[f"{CASES}-v2"].mappings["_meta"]["embedding_model"] == "hash-16"


# --- errors, auth, transport -----------------------------------------------------------------------


async def test_401_is_an_auth_error_that_says_what_to_check(fake_es, make_index):
    index = await make_index(ensure=False)
    refused = fake_es.fail(401, authentication_error("/_alias"), times=None, headers={"WWW-Authenticate": "ApiKey"})
    with pytest.raises(PrecedentError) as err:
        await index.ensure()
    assert err.value.kind == "auth" and "ELASTICSEARCH_API_KEY" in str(err.value)
    assert len(fake_es.requests) == 1  # 401 is not retried
    fake_es.failures.remove(refused)  # credentials fixed: the same object opens fine
    await index.ensure()
    assert fake_es.alias_target(CASES) == [f"{CASES}-v1"]


async def test_429_is_retried_by_the_client_then_rate_limited(fake_es, make_index):
    index = await seeded(make_index, fake_es)
    too_many = error_body(429, "es_rejected_execution_exception", "rejected execution of search")
    fake_es.fail(429, too_many, path=r".*/_search", times=2)
    before = len(fake_es.searches())
    assert await index.search("seam", kind="case", mode="bm25")  # two 429s, then the answer
    assert len(fake_es.searches()[before:]) == 3

    fake_es.fail(429, too_many, path=r".*/_search", times=None)
    before = len(fake_es.searches())
    with pytest.raises(PrecedentError) as err:
        await index.search("seam", kind="case", mode="bm25")
    assert err.value.kind == "rate_limited" and len(fake_es.searches()[before:]) == 3  # 1 + max_retries


async def test_5xx_is_a_server_error(fake_es, make_index):
    index = await seeded(make_index, fake_es)
    fake_es.fail(
        503, error_body(503, "search_phase_execution_exception", "all shards failed"), path=r".*/_search", times=None
    )
    with pytest.raises(PrecedentError) as err:
        await index.search("seam", kind="case")
    assert err.value.kind == "server_error" and "_cluster/health" in str(err.value)


async def test_a_slow_cluster_times_out_after_the_clients_retries(fake_es, make_index):
    index = await make_index(client=client_for(fake_es.url, timeout=0.2, max_retries=1), ensure=False)
    fake_es.slow(1.0, times=None)
    with pytest.raises(PrecedentError) as err:
        await index.ensure()
    assert err.value.kind == "timeout" and "elasticsearch.timeout_s" in str(err.value)
    assert len(fake_es.requests) == 2  # retried once on timeout


async def test_nothing_listening_is_unreachable(make_index):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    index = await make_index(client=client_for(f"http://127.0.0.1:{port}", max_retries=1), ensure=False)
    with pytest.raises(PrecedentError) as err:
        await index.ensure()
    assert err.value.kind == "unreachable" and "ELASTICSEARCH_URL" in str(err.value)


async def test_a_server_that_is_not_elasticsearch_is_refused(fake_es, make_index):
    fake_es.product_header = False
    index = await make_index(ensure=False)
    with pytest.raises(PrecedentError) as err:
        await index.ensure()
    assert err.value.kind == "unreachable" and "X-Elastic-Product" in str(err.value)


def es_settings(url: str, monkeypatch, **es) -> Settings:
    for var in (
        "ELASTICSEARCH_URL",
        "ELASTICSEARCH_API_KEY",
        "CYBERJURORS_ELASTICSEARCH__URL",
        "CYBERJURORS_ELASTICSEARCH__API_KEY",
        "CYBERJURORS_SETTINGS_FILE",
    ):
        monkeypatch.delenv(var, raising=False)
    return Settings(
        llm_backend="offline",
        precedent_backend="elasticsearch",
        elasticsearch={"url": url, "index_prefix": PREFIX, **es},
    )


async def test_api_key_and_basic_auth_reach_the_server(fake_es, monkeypatch):
    index = ElasticsearchIndex.from_settings(
        es_settings(fake_es.url, monkeypatch, api_key="a2V5OnNlY3JldA=="), HashEmbedder()
    )
    await index.ensure()
    await index.close()
    assert {r.headers["authorization"] for r in fake_es.requests} == {"ApiKey a2V5OnNlY3JldA=="}

    fake_es.requests.clear()
    index = ElasticsearchIndex.from_settings(
        es_settings(fake_es.url, monkeypatch, username="elastic", password="p@ss:word"),
        HashEmbedder(),
    )
    await index.ensure()
    await index.close()
    assert {r.headers["authorization"] for r in fake_es.requests} == {
        "Basic " + base64.b64encode(b"elastic:p@ss:word").decode()
    }


async def test_from_settings_sets_timeout_and_client_retries(fake_es, monkeypatch):
    index = ElasticsearchIndex.from_settings(
        es_settings(fake_es.url, monkeypatch, timeout_s=3.5, max_retries=5), HashEmbedder()
    )
    assert index.client._request_timeout == 3.5 and index.client._max_retries == 5
    assert tuple(index.client._retry_on_status) == (429, 502, 503, 504) and index.client._retry_on_timeout is True
    assert index.prefix == PREFIX and index.embedding_model == "hash-8"
    await index.close()
    with pytest.raises(PrecedentError) as err:  # a CA file only makes sense with https
        ElasticsearchIndex.from_settings(es_settings(fake_es.url, monkeypatch, ca_certs="/tmp/ca.pem"), HashEmbedder())
    assert "https" in str(err.value)


async def test_open_index_with_the_elasticsearch_backend(fake_es, monkeypatch):
    index = await open_index(es_settings(fake_es.url, monkeypatch), HashEmbedder())
    try:
        assert isinstance(index, ElasticsearchIndex)
        assert sorted(fake_es.indices) == [f"{CASES}-v1", f"{GUIDELINES}-v1"]
        await index.upsert([precedent(1)])
        fake_es.script("bm25", ["case:h1"])
        fake_es.script("knn", ["case:h1"])
        [hit] = await index.search("seam", kind="case", category="clothing", k=1)
        assert hit.id == "case:h1" and hit.rank == 1
    finally:
        await index.close()
