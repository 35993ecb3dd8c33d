"""A case erased from a precedent store beyond what every store does alike (the store contract,
store_contract.py: the case gone, its guidelines' provenance rewritten, retention): in the embedded
store no byte of it is left in the database or its write-ahead log, the vector snapshot that held
its vector is dropped, a rewritten guideline keeps its vector; on Elasticsearch the deletes are
expunged and the reads page past index.max_result_window. The whole command:
tests/integration/test_erasure.py."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pytest

from cyberjurors.evidence.scrub import residue
from cyberjurors.precedents.embedded import DB_FILE, EmbeddedIndex
from cyberjurors.precedents.erasure import erase_case, expire_cases, without_case
from cyberjurors.precedents.models import Document, PrecedentError

from ...fake_elasticsearch import fake_es as fake_es  # a fixture, requested by name
from .store_contract import LONG_AGO, SAYS, precedent
from .store_contract import citing as guideline
from .test_elastic import make_index as make_index  # a fixture, requested by name


async def base(tmp_path, embedder) -> EmbeddedIndex:
    index = await EmbeddedIndex.open(tmp_path / "precedents", embedder)
    await index.upsert(
        [
            precedent("c-1", SAYS, LONG_AGO),
            precedent("c-10", "A toaster that never heated, decided for the buyer", LONG_AGO + timedelta(days=3000)),
            guideline("g-1", ["c-1", "c-10"], ["c-1", "c-1@console:e-1:2", "c-10"]),
            guideline("g-2", ["c-10"], ["c-10"]),
        ]
    )
    return index


async def test_no_byte_of_an_erased_case_is_left_in_the_embedded_stores_files(tmp_path, embedder):
    index = await base(tmp_path, embedder)
    index._writer.execute("INSERT INTO vector_snapshot VALUES (0, 1, 'spec', x'00')")  # as a writer leaves one
    done = await erase_case(index, "c-1", "erased:ref0")  # what it leaves in the store: the store contract
    assert (done.cases, done.guidelines, done.notes) == (1, 1, [])
    path = tmp_path / "precedents" / DB_FILE
    for needle in ('"c-1"', "c-1@", "Quillfeather", "lid cracked"):
        assert not residue(path, [needle]) and not residue(path.with_name(DB_FILE + "-wal"), [needle]), needle
    assert index._reader.execute("SELECT count(*) FROM vector_snapshot").fetchone()[0] == 0
    await index.close()


async def test_a_rewritten_guideline_keeps_its_vector(tmp_path, embedder):
    index = await base(tmp_path, embedder)
    before = index.stored(["guideline:g-1"])["guideline:g-1"][1]
    await erase_case(index, "c-1", "erased:ref0")
    assert np.array_equal(
        np.frombuffer(index.stored(["guideline:g-1"])["guideline:g-1"][1], "<f4"), np.frombuffer(before, "<f4")
    )
    await index.close()


def test_without_case_leaves_an_id_that_only_starts_the_same():
    g = guideline("g-1", ["c-1", "c-10"], ["c-10", "c-1"]).guideline
    out = without_case(g, "c-1", "erased:x")
    assert out.supporting_cases == ["c-10"] and [c.case_id for c in out.history] == ["c-10", "erased:x"]


async def test_on_elasticsearch_the_deletes_of_an_erasure_are_expunged(make_index, fake_es):
    index = await make_index()
    await index.upsert(
        [
            precedent("c-1", SAYS, LONG_AGO),
            precedent("c-10", "A toaster that never heated", LONG_AGO + timedelta(days=3000)),
            guideline("g-1", ["c-1", "c-10"], ["c-1", "c-1@console:e-1:2", "c-10"]),
            guideline("g-2", ["c-10"], ["c-10"]),
        ]
    )
    done = await erase_case(index, "c-1", "erased:ref0")  # what it leaves: the store contract
    assert (done.cases, done.guidelines, done.notes) == (1, 1, [])
    assert fake_es.requests_to("POST", r"/.*-cases/_forcemerge")  # the deleted document expunged from its segment
    assert "c-1" not in json.dumps([doc for ix in fake_es.indices.values() for doc in ix.docs.values()]).replace(
        "c-10", ""
    )
    before = len(fake_es.requests_to("POST", r"/.*-cases/_forcemerge"))
    assert (await expire_cases(index, retention_s=3600, now=LONG_AGO + timedelta(days=3001))).cases == 1
    assert len(fake_es.requests_to("POST", r"/.*-cases/_forcemerge")) == before + 1  # retention expunges too


def _file_directly(fake_es, alias: str, documents: list[Document]) -> None:
    """Documents put in the fake cluster's index behind ``alias`` without a bulk request (ten thousand
    of them through the embedder would take minutes): what the scan reads is the same."""
    [ix] = [ix for ix in fake_es.indices.values() if alias in ix.aliases]
    for doc in documents:
        ix.docs[doc.id] = doc.model_dump(mode="json")
        ix.versions[doc.id] = 1


async def test_on_elasticsearch_erasure_and_retention_read_past_ten_thousand_documents(make_index, fake_es):
    """index.max_result_window is 10,000: a guideline or a case past the first 10,000 is found too."""
    index = await make_index()
    many = [guideline(f"g-{n:05d}", ["c-other"], ["c-other"]) for n in range(10_020)]
    many.append(guideline("g-99999", ["c-1"], ["c-1"]))  # last in _shard_doc order
    _file_directly(fake_es, index.alias("guideline"), many)
    cases = [precedent(f"c-{n:05d}", "A recent kettle", LONG_AGO + timedelta(days=4000)) for n in range(10_010)]
    cases.append(precedent("c-zz-old", SAYS, LONG_AGO))
    _file_directly(fake_es, index.alias("case"), cases)
    assert [d.id for d in await index.guidelines_citing("c-1")] == ["guideline:g-99999"]
    assert await index.cases_decided_before(LONG_AGO + timedelta(days=1)) == ["c-zz-old"]
    assert fake_es.pits == {}  # every point in time closed


async def test_on_elasticsearch_a_scan_pages_a_point_in_time_with_search_after(make_index, fake_es):
    index = await make_index(scan_page=3)
    fake_es.max_result_window = 5  # a cluster whose window is lowered: any single read of more is refused
    await index.upsert(
        [guideline(f"g-{n}", ["c-1"] if n in (2, 7) else ["c-10"], ["c-10"]) for n in range(10)]
        + [precedent(f"c-{n}", "A kettle", LONG_AGO + timedelta(days=n)) for n in range(8)]
    )
    citing = await index.guidelines_citing("c-1")
    assert sorted(d.id for d in citing) == ["guideline:g-2", "guideline:g-7"]
    pages = [r.body for r in fake_es.requests_to("POST", "/_search")]
    assert len(pages) == 4 and all(p["size"] == 3 and p["sort"] == ["_shard_doc"] for p in pages)
    assert "search_after" not in pages[0] and [p["search_after"] for p in pages[1:]] == [[2], [5], [8]]
    assert len(await index.cases_decided_before(LONG_AGO + timedelta(days=5))) == 5
    assert fake_es.pits == {} and fake_es.pits_opened == 2


async def test_on_elasticsearch_a_scan_that_fails_midway_says_so_and_closes_its_point_in_time(make_index, fake_es):
    index = await make_index(scan_page=2)
    await index.upsert([guideline(f"g-{n}", ["c-1"], ["c-1"]) for n in range(5)])
    fake_es.fail(503, method="POST", path="/_search", when=lambda r: "search_after" in (r.body or {}), times=None)
    with pytest.raises(PrecedentError) as err:
        await index.guidelines_citing("c-1")
    assert err.value.kind == "server_error"
    assert fake_es.pits == {}


async def test_the_fake_cluster_refuses_a_window_past_max_result_window(make_index, fake_es):
    """What a real cluster answers a read past index.max_result_window: the refusal the scan avoids."""
    index = await make_index()
    with pytest.raises(PrecedentError) as err, index._errors("reading"):
        await index._search(index.alias("case"), query={"match_all": {}}, size=10_001)
    assert err.value.kind == "corrupt" and "Result window is too large" in str(err.value)
    with pytest.raises(PrecedentError), index._errors("reading"):
        await index._search(index.alias("case"), query={"match_all": {}}, size=10, **{"from": 9_995})
