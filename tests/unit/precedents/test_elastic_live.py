"""``ElasticsearchIndex`` against a real cluster with the real embedding model: the store contract
(store_contract.py) under a prefix of its own per test, then what only a real cluster tells
(whether it serves the rrf retriever, the alias swap of a rebuild).

Skipped unless ``ELASTICSEARCH_URL`` is set (e.g. the docker-compose cluster); credentials come
from the usual settings (``ELASTICSEARCH_API_KEY``, or ``CYBERJURORS_ELASTICSEARCH__USERNAME`` /
``_PASSWORD``, ``CYBERJURORS_ELASTICSEARCH__CA_CERTS``, ...). Everything lives under a unique
index prefix and is deleted at the end.
"""

from __future__ import annotations

import logging
import os
import uuid

import pytest

from cyberjurors.config import Settings
from cyberjurors.precedents.elastic import ElasticsearchIndex

from .store_contract import CASES, PROBES, StoreContract
from .test_elastic import Cluster

pytestmark = pytest.mark.skipif(
    not os.environ.get("ELASTICSEARCH_URL"), reason="set ELASTICSEARCH_URL to run against a real Elasticsearch cluster"
)
log = logging.getLogger(__name__)


class LiveCluster(Cluster):
    """The configured cluster, its client made as the worker makes it (``from_settings``)."""

    def __init__(self, prefix: str):
        super().__init__(os.environ["ELASTICSEARCH_URL"], prefix)
        self.settings = Settings(
            llm_backend="offline", precedent_backend="elasticsearch", elasticsearch={"index_prefix": prefix}
        )

    async def open(self, embedder, *, create: bool = True) -> ElasticsearchIndex:
        index = ElasticsearchIndex.from_settings(self.settings, embedder, scan_page=4)
        self.opened.append(index)
        await index.ensure(create=create)
        return index

    async def close(self) -> None:
        if self.opened:
            client = self.opened[-1].client
            try:
                made = await client.indices.get_alias(index=f"{self.prefix}-*", ignore_unavailable=True)
                if made.body:
                    await client.indices.delete(index=",".join(made.body))
                await client.indices.delete_index_template(name=f"{self.prefix}-precedents")
            except Exception as err:  # already gone, or never made
                log.warning("could not clean up %s-*: %s", self.prefix, err)
        await super().close()


@pytest.fixture
async def live():
    cluster = LiveCluster(f"cjtest-{uuid.uuid4().hex[:10]}")
    yield cluster
    await cluster.close()


class TestLiveElasticsearch(StoreContract):
    @pytest.fixture
    async def backend(self, live: LiveCluster):
        return live


async def test_rrf_or_its_fallback_and_a_rebuild_on_a_real_cluster(live: LiveCluster, shared_embedder):
    index = await live.open(shared_embedder)
    assert not (await index.upsert(CASES[:40] + PROBES)).failed
    code = PROBES[1]
    hybrid = await index.search(f"stand mixer {code.text[:60]}", kind="case", k=4)
    assert index.rrf is not None and hybrid[0].id == code.id
    log.warning("rrf retriever %s", "used" if index.rrf else f"refused ({index.rrf_refusal}): client-side fusion")
    if index.rrf:
        assert all(h.sources == {} for h in hybrid)
    else:
        assert "license" in index.rrf_refusal or "retriever" in index.rrf_refusal
        assert all(set(h.sources) <= {"bm25", "vector"} and h.sources for h in hybrid)
    explained = ElasticsearchIndex(index.client, shared_embedder, prefix=live.prefix, rrf_sources=True)
    traced = await explained.search(f"stand mixer {code.text[:60]}", kind="case", k=4)
    assert [h.id for h in traced] == [h.id for h in hybrid] and traced[0].sources  # known either way when asked

    old = await index._current(index.alias("case"))
    rebuilt = await index.rebuild("case", CASES[:3])
    assert rebuilt.failed == {} and len(rebuilt.indexed) == 3
    new = await index._current(index.alias("case"))
    assert new != old and len(new) == 1 and new[0].endswith("-v2")
    assert not await index.client.indices.exists(index=old[0])
    assert await index.count("case") == 3
