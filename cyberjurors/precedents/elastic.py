"""The Elasticsearch backend of the precedent base: ``ElasticsearchIndex``.

Vectors are computed client-side by the configured ``Embedder``; Elasticsearch stores them in a
``dense_vector`` field (HNSW, cosine) next to the ``text`` field it scores with BM25.

Layout
    Two logical indexes, ``{prefix}-cases`` and ``{prefix}-guidelines``, are *aliases* over
    concrete versioned indexes ``{prefix}-cases-v{n}`` / ``{prefix}-guidelines-v{n}``. An index
    template ``{prefix}-precedents`` (patterns ``{prefix}-cases-*``, ``{prefix}-guidelines-*``)
    carries the settings and mappings; index creation sends them explicitly as well, so a
    higher-priority template elsewhere on the cluster cannot change the layout. The mapping's
    ``_meta`` names the embedding model and its dimensions: opening an index built with another
    model raises ``PrecedentError('model_mismatch')``. ``_source`` is the ``Document`` as JSON
    plus ``embedding``; ``case`` / ``guideline`` are stored but not indexed (``enabled: false``).
    ``rebuild(kind, documents)`` loads a new concrete index, swaps the alias in one atomic
    ``_aliases`` call (remove old + add new), then deletes the old index. It is also how an index
    moves to a new embedding model. Pause writers while it runs: an upsert to the old index after
    the bulk load started is not carried over.

Hybrid search
    Tried first: one request with the ``rrf`` retriever (a ``standard`` retriever with a BM25
    ``match`` on ``text`` and a ``knn`` retriever on ``embedding``, both filtered on kind, category
    and ``keywords.active``; ``rank_constant`` = ``RRF_K``; ``rank_window_size`` = max(4k,
    ``rank_window``), as deep as the embedded store looks). If the cluster refuses the retriever itself, the index falls back, for the
    rest of the object's life, to a BM25 search and a kNN search sent concurrently and fused
    client-side with ``index.fuse``; the switch is logged once. The refusals recognised (and only
    these: any other error is raised, never hidden behind the fallback):

    * 403 ``security_exception`` carrying ``license.expired.feature`` or the reason
      ``current license is non-compliant for [Reciprocal Rank Fusion (RRF)]`` — a basic licence.
      ``RRFRetrieverBuilder.fromXContent`` throws ``LicenseUtils.newComplianceException("Reciprocal
      Rank Fusion (RRF)")``: an ``ElasticsearchSecurityException`` with ``RestStatus.FORBIDDEN``
      whose ``es.license.expired.feature`` metadata Elasticsearch renders as
      ``license.expired.feature`` in the error object (elastic/elasticsearch, x-pack rank-rrf and
      x-pack core ``LicenseUtils``; reported from basic-licence clusters 8.15 to 9.5).
    * 400 ``parsing_exception`` (or ``x_content_parse_exception``) whose reason is ``unknown
      retriever [rrf]`` (``RetrieverBuilder.parseInnerRetrieverBuilder`` on a cluster without the
      rank-rrf plugin) or ``Unknown key for a START_OBJECT in [retriever]`` (a cluster that
      predates retrievers; with the 9.x client such a cluster refuses every request anyway).

    The reason is looked for in the error object, its ``root_cause`` list and its ``caused_by``
    chain, so a wrapped refusal is recognised too.

    Scores are RRF scores either way (Elasticsearch computes them in float32). ``Hit.sources``:
    with the fallback, or ``mode='bm25'`` / ``'vector'``, it holds each retriever's 1-based rank
    (``{'bm25': 2, 'vector': 1}``). The ``rrf`` retriever returns fused scores only, so there
    ``sources`` is empty — unless the index was made with ``rrf_sources=True``, which sends the
    two sub-queries as well (concurrently) and fills ``sources`` from their ranks within the rank
    window. Ranks are 1..n in descending score.

Upserts
    ``helpers.async_bulk`` with ``_id`` = ``Document.id`` (so upserts are idempotent), ``_index``
    = the alias, ``require_alias=true`` (a missing alias fails instead of auto-creating a
    dynamically mapped index) and ``refresh=wait_for``. Items rejected with 429 are retried by the
    helper itself (``bulk_max_retries`` times, backoff from ``bulk_initial_backoff`` doubling);
    for that the helper runs with ``raise_on_error=False`` (with ``True`` it raises on the first
    failed item of a chunk, 429s included, before retrying any). Then:

    * every document indexed: the report lists them;
    * some failed: the report's ``failed`` maps each failed id to ``"<status> <type>: <reason>"``,
      the others are in ``indexed``, a warning names the failures; nothing is raised;
    * none indexed: ``PrecedentError`` — ``rate_limited`` if every failure was a 429,
      ``index_missing`` if every failure was a missing alias, ``bulk_failed`` otherwise; the
      message names the failed ids and the report is attached as ``err.report``;
    * the bulk request itself failing (unreachable, 401, 429 or 5xx after the client's retries,
      timeout) raises that error's kind; chunks sent before stay indexed, rerunning is safe.

Scans
    What reads every document (an erasure's ``guidelines_citing``, retention's
    ``cases_decided_before``: ``case`` and ``guideline`` are stored, not indexed, so they are checked
    client-side) pages through a point in time (``_pit``) with ``search_after`` on ``_shard_doc``,
    ``scan_page`` hits a request: one consistent view of the index, any number of documents. A single
    search returns at most ``index.max_result_window`` (10,000) hits, and a cluster refuses ``from``
    + ``size`` beyond it; no read here pages with ``from``.

Errors and retries
    Retries are the client's: ``max_retries`` (3) on 429/502/503/504 and on timeouts and
    connection errors (connection errors and timeouts back off, 0.2 s doubling up to 2 s; retries
    on a status do not sleep in elastic-transport 9). What is left becomes ``PrecedentError``:
    connection refused / DNS / TLS -> ``unreachable``, a server without the ``X-Elastic-Product:
    Elasticsearch`` header -> ``unreachable``, 401 and 403 (other than the RRF licence) -> ``auth``,
    404 -> ``index_missing``, 429 -> ``rate_limited``, the client's request timeout -> ``timeout``,
    5xx (502/503/504 after retries included) -> ``server_error``, other 4xx (the index does not
    have the layout this code expects) -> ``corrupt``, except a 400 ``media_type_header_exception``
    (a pre-9 cluster) -> ``server_error``. Each message says what to check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar

import numpy as np
from elasticsearch import AsyncElasticsearch
from elasticsearch.exceptions import (
    ApiError,
    ConnectionError,
    ConnectionTimeout,
    NotFoundError,
    SerializationError,
    SSLError,
    TransportError,
    UnsupportedProductError,
)
from elasticsearch.helpers import async_bulk
from pydantic import ValidationError

from ..config import PrecedentSettings
from .embeddings import Embedder, canonical
from .index import (
    ENCODE_CHUNK,
    RRF_K,
    PrecedentIndex,
    candidates,
    category_filter,
    embedding_failed,
    fuse,
    problem,
)
from .models import KINDS, Document, Hit, Kind, PrecedentError, SearchMode, UpsertReport, decided_before

T = TypeVar("T")
log = logging.getLogger("cyberjurors.precedents.elastic")

PLURAL = {"case": "cases", "guideline": "guidelines"}
LAYOUT = 1  # bump when the mapping changes incompatibly; stored in _meta
RETRY_ON_STATUS = (429, 502, 503, 504)
NUM_CANDIDATES_MIN = 100
KEYWORD_FIELDS = ("outcome", "dispute_type", "tags", "active")
INACTIVE = {"term": {"keywords.active": "false"}}
SCAN_PAGE = 1_000  # hits a page of a scan asks for: well within index.max_result_window (10,000 by default)
SCAN_KEEP_ALIVE = "2m"  # how long the cluster keeps a scan's point in time from one page to the next

# What a cluster answers when it will not run the rrf retriever (see the module docstring).
LICENCE_REASON = "current license is non-compliant"
UNKNOWN_RETRIEVER = re.compile(r"unknown retriever \[rrf\]|Unknown key for a START_OBJECT in \[retriever\]", re.I)


class ElasticsearchIndex(PrecedentIndex):
    """``PrecedentIndex`` on an Elasticsearch 9 cluster (see the module docstring)."""

    def __init__(
        self,
        client: AsyncElasticsearch,
        embedder: Embedder,
        *,
        prefix: str = "cyberjurors",
        rank_window: int = 50,
        rrf_sources: bool = False,
        bulk_chunk_size: int = 250,
        bulk_max_retries: int = 3,
        bulk_initial_backoff: float = 0.5,
        bulk_max_backoff: float = 30.0,
        refresh: str | bool = "wait_for",
        scan_page: int = SCAN_PAGE,
    ):
        self.client = client
        self.scan_page = scan_page
        self.embedder = embedder
        self.embedding_model = embedder.name
        self.prefix = prefix
        self.rank_window = rank_window
        self.rrf_sources = rrf_sources
        self.bulk_chunk_size = bulk_chunk_size
        self.bulk_max_retries = bulk_max_retries
        self.bulk_initial_backoff = bulk_initial_backoff
        self.bulk_max_backoff = bulk_max_backoff
        self.refresh = refresh
        self.rrf: bool | None = None  # None: not tried yet; False: the cluster refused it, fuse client-side
        self.rrf_refusal: str | None = None
        try:
            self.where = ", ".join(node.base_url for node in client.transport.node_pool.all())
        except Exception:  # a client built on a custom transport
            self.where = "the Elasticsearch cluster"

    @classmethod
    def from_settings(cls, settings: PrecedentSettings, embedder: Embedder, **options: Any) -> ElasticsearchIndex:
        """A client from the ``elasticsearch`` settings: API key (preferred) or basic auth, TLS CA
        file / verification, request timeout, and the client's retries on 429/502/503/504,
        connection errors and timeouts."""
        url = settings.elasticsearch.url
        if not url:
            raise PrecedentError("unreachable", "precedent_backend=elasticsearch needs ELASTICSEARCH_URL")
        auth: dict[str, Any] = {}
        if settings.elasticsearch.api_key:
            auth["api_key"] = settings.elasticsearch.api_key
        elif settings.elasticsearch.username:
            auth["basic_auth"] = (settings.elasticsearch.username, settings.elasticsearch.password or "")
        tls: dict[str, Any] = {"verify_certs": settings.elasticsearch.verify_certs}
        if settings.elasticsearch.ca_certs is not None:
            if not url.lower().startswith("https://"):
                raise PrecedentError(
                    "unreachable",
                    f"elasticsearch.ca_certs is set but ELASTICSEARCH_URL={url} is "
                    f"not https: use an https:// URL or unset the CA file",
                )
            tls["ca_certs"] = str(settings.elasticsearch.ca_certs)
        client = AsyncElasticsearch(
            url,
            **auth,
            **tls,
            request_timeout=settings.elasticsearch.timeout_s,
            max_retries=settings.elasticsearch.max_retries,
            retry_on_status=RETRY_ON_STATUS,
            retry_on_timeout=True,
            retry_backoff_base=0.2,
            retry_backoff_cap=2.0,
        )
        return cls(client, embedder, prefix=settings.elasticsearch.index_prefix, **options)

    # --- layout ----------------------------------------------------------------------------------
    def alias(self, kind: Kind) -> str:
        return f"{self.prefix}-{PLURAL[kind]}"

    @property
    def template_name(self) -> str:
        return f"{self.prefix}-precedents"

    def meta(self) -> dict[str, Any]:
        return {"embedding_model": self.embedder.name, "embedding_dims": int(self.embedder.dims), "layout": LAYOUT}

    def index_settings(self) -> dict[str, Any]:
        return {"number_of_shards": 1, "auto_expand_replicas": "0-1"}

    def mappings(self) -> dict[str, Any]:
        keyword = {"type": "keyword"}
        return {
            "dynamic": False,  # a field added to Document later is kept in _source, not rejected
            "_meta": self.meta(),
            "dynamic_templates": [{"keywords": {"path_match": "keywords.*", "mapping": keyword}}],
            "properties": {
                "id": keyword,
                "kind": keyword,
                "category": keyword,
                "text": {"type": "text", "analyzer": "english"},
                "keywords": {
                    "type": "object",
                    "dynamic": True,
                    "properties": {name: keyword for name in KEYWORD_FIELDS},
                },
                "embedding": {
                    "type": "dense_vector",
                    "dims": int(self.embedder.dims),
                    "index": True,
                    "similarity": "cosine",
                    "index_options": {"type": "hnsw", "m": 16, "ef_construction": 100},
                },
                "case": {"type": "object", "enabled": False},
                "guideline": {"type": "object", "enabled": False},
            },
        }

    def template(self) -> dict[str, Any]:
        return {
            "index_patterns": [f"{self.alias(kind)}-*" for kind in KINDS],
            "priority": 200,
            "template": {"settings": self.index_settings(), "mappings": self.mappings()},
            "_meta": {"description": "cyberjurors precedent base (cases H, guidelines N)", **self.meta()},
        }

    async def ensure(self, create: bool = True) -> None:
        """Make sure both aliases exist (creating the template, the first concrete indexes and the
        aliases when ``create``) and that they hold vectors of this embedder's model.

        On failure the client's connections are closed (it reopens them on its next request), so
        an index dropped after a failed open leaks no HTTP session."""
        try:
            await self._ensure(create)
        except Exception:
            with contextlib.suppress(Exception):
                await self.client.close()
            raise

    async def _ensure(self, create: bool) -> None:
        put_template = True
        for kind in KINDS:
            alias = self.alias(kind)
            with self._errors(f"opening {alias}"):
                if not await self._current(alias):
                    if not create:
                        raise PrecedentError(
                            "index_missing",
                            f"{self.where} has no precedent index {alias}; "
                            f"create it with: cyberjurors precedents build FILE|DIR, or "
                            f"check elasticsearch.index_prefix={self.prefix!r}",
                        )
                    if put_template:
                        await self.client.indices.put_index_template(name=self.template_name, **self.template())
                        put_template = False
                    await self._create_first(alias)
                await self._check_model(alias)

    async def _current(self, alias: str) -> list[str]:
        """The concrete indexes behind ``alias`` (none if it does not exist)."""
        try:
            resp = await self.client.indices.get_alias(name=alias)
        except NotFoundError:
            return []
        return sorted(name for name, body in resp.body.items() if alias in body.get("aliases", {}))

    async def _versions(self, alias: str) -> dict[str, int]:
        resp = await self.client.indices.get_alias(index=f"{alias}-v*")
        out = {}
        for name in resp.body:
            m = re.fullmatch(re.escape(alias) + r"-v(\d+)", name)
            if m:
                out[name] = int(m.group(1))
        return out

    async def _create(self, name: str, alias: str | None = None) -> None:
        body: dict[str, Any] = {"settings": self.index_settings(), "mappings": self.mappings()}
        if alias is not None:
            body["aliases"] = {alias: {"is_write_index": True}}
        try:
            await self.client.indices.create(index=name, **body)
        except ApiError as err:
            if _error_type(err.body) == "invalid_alias_name_exception":
                raise PrecedentError(
                    "corrupt",
                    f"cannot create alias {alias} on {self.where}: an index named {alias} "
                    f"exists that is not an alias; delete it or choose another "
                    f"elasticsearch.index_prefix",
                ) from err
            raise

    async def _create_first(self, alias: str) -> None:
        try:
            await self._create(f"{alias}-v1", alias)
        except ApiError as err:
            if _error_type(err.body) != "resource_already_exists_exception":
                raise
            if await self._current(alias):  # another worker created it meanwhile
                return
            n = max((await self._versions(alias)).values(), default=1) + 1
            await self._create(f"{alias}-v{n}", alias)

    async def _check_model(self, alias: str) -> None:
        resp = await self.client.indices.get_mapping(index=alias)
        for name, body in resp.body.items():
            meta = (body.get("mappings") or {}).get("_meta") or {}
            model, dims = meta.get("embedding_model"), meta.get("embedding_dims")
            if model is None:
                raise PrecedentError(
                    "corrupt",
                    f"{name} (behind {alias}) has no _meta.embedding_model: it was not "
                    f"made by cyberjurors; choose another elasticsearch.index_prefix or "
                    f"delete it",
                )
            if canonical(str(model)) != canonical(self.embedder.name) or dims != self.embedder.dims:
                raise PrecedentError(
                    "model_mismatch",
                    (
                        f"{alias} ({name}) holds vectors of {model!r} ({dims} dims) but the configured embedding.model is "
                        f"{self.embedder.name!r} ({self.embedder.dims} dims); set embedding.model={model!r}, or rebuild "
                        f"the index with the new model"
                    ),
                )

    async def rebuild(self, kind: Kind, documents: Sequence[Document]) -> UpsertReport:
        """Load ``documents`` into a new concrete index, point the alias at it in one atomic
        ``_aliases`` call (remove old, add new), then delete the old index. If any document fails,
        the new index is deleted and the alias is left alone (``PrecedentError('bulk_failed')``)."""
        docs = list(documents)
        wrong = sorted({d.id for d in docs if d.kind != kind})
        if wrong:
            raise PrecedentError("bad_query", f"rebuild({kind!r}) got documents of another kind: {_few(wrong)}")
        alias = self.alias(kind)
        with self._errors(f"rebuilding {alias}"):
            await self.client.indices.put_index_template(name=self.template_name, **self.template())
            old = await self._current(alias)
            n = max((await self._versions(alias)).values(), default=0) + 1
            new = f"{alias}-v{n}"
            await self._create(new)
        try:
            report = await self._bulk(docs, index=new, require_alias=False, refresh=False, doing=f"loading {new}")
            if report.failed:
                raise PrecedentError(
                    "bulk_failed",
                    f"rebuild of {alias} abandoned, {alias} unchanged: "
                    f"{len(report.failed)} of {len(docs)} documents failed "
                    f"({_reasons(report.failed)})",
                )
            with self._errors(f"rebuilding {alias}"):
                await self.client.indices.refresh(index=new)
                actions: list[dict[str, Any]] = [{"remove": {"index": name, "alias": alias}} for name in old]
                actions.append({"add": {"index": new, "alias": alias, "is_write_index": True}})
                await self.client.indices.update_aliases(actions=actions)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.client.indices.delete(index=new)
            raise
        if old:
            with self._errors(f"deleting the old {', '.join(old)} after rebuilding {alias}"):
                await self.client.indices.delete(index=",".join(old))
        log.info("rebuilt %s: %d documents in %s (was %s)", alias, len(report.indexed), new, ", ".join(old) or "none")
        return report

    # --- writes ------------------------------------------------------------------------------------
    async def upsert(self, documents: Sequence[Document]) -> UpsertReport:
        docs = list(documents)
        if not docs:
            return UpsertReport()
        return await self._bulk(
            docs, index=None, require_alias=True, refresh=self.refresh, doing=f"indexing {len(docs)} documents"
        )

    async def _bulk(
        self, docs: list[Document], *, index: str | None, require_alias: bool, refresh: str | bool, doing: str
    ) -> UpsertReport:
        if not docs:
            return UpsertReport()
        failed: dict[str, str] = {}
        actions: list[dict[str, Any]] = []
        valid = []
        for doc in docs:
            refused = problem(doc)
            if refused:
                failed[doc.id] = refused
            else:
                valid.append(doc)
        for start in range(0, len(valid), ENCODE_CHUNK):
            chunk = valid[start : start + ENCODE_CHUNK]
            try:
                vectors = await self._encode([d.text for d in chunk])
            except PrecedentError:  # the model answers in another shape: no document can be indexed
                raise
            except Exception as model_err:
                failed.update(dict.fromkeys((d.id for d in chunk), embedding_failed(model_err)))
                continue
            actions += [
                {
                    "_op_type": "index",
                    "_index": index or self.alias(d.kind),
                    "_id": d.id,
                    "_source": {**d.model_dump(mode="json"), "embedding": v},
                }
                for d, v in zip(chunk, vectors, strict=True)
            ]
        if not actions:  # nothing the cluster could be sent: a report, as the embedded store gives
            return UpsertReport(failed=failed)
        params: dict[str, Any] = {"refresh": refresh}
        if require_alias:
            params["require_alias"] = True
        with self._errors(doing):
            _, errors = await self._send_bulk(actions, **params)
        statuses: dict[str, tuple[int, str]] = {}
        for item in errors:
            ((_, info),) = item.items()
            doc_id = str(info.get("_id"))
            status, etype, reason = int(info.get("status", 0)), _error_type(info), _error_reason(info)
            failed[doc_id] = f"{status} {etype}: {reason}"[:500]
            statuses[doc_id] = (status, etype)
        report = UpsertReport(indexed=[i for i in dict.fromkeys(d.id for d in docs) if i not in failed], failed=failed)
        if statuses and not report.indexed:
            if all(s == 429 for s, _ in statuses.values()):
                kind, hint = "rate_limited", "the cluster kept rejecting writes (429) after retries: it is overloaded"
            elif all(t == "index_not_found_exception" for _, t in statuses.values()):
                kind, hint = (
                    "index_missing",
                    "the alias does not exist: create it with cyberjurors precedents build FILE|DIR",
                )
            else:
                kind, hint = "bulk_failed", "see the reasons"
            err = PrecedentError(
                kind,
                f"{doing} on {self.where}: none of {len(failed)} documents was indexed; {hint} ({_reasons(failed)})",
            )
            err.report = report  # type: ignore[attr-defined]
            raise err
        if failed:
            log.warning(
                "%s: %d of %d documents failed: %s",
                doing,
                len(failed),
                len(report.indexed) + len(failed),
                _reasons(failed),
            )
        return report

    async def _send_bulk(self, actions: list[dict[str, Any]], **params: Any) -> tuple[int, Any]:
        """One bulk request in chunks, 429s retried by the helper; failed items come back, not raised
        (with ``raise_on_error`` the helper stops at a chunk's first failure before retrying any)."""
        return await async_bulk(
            self.client,
            actions,
            chunk_size=self.bulk_chunk_size,
            raise_on_error=False,
            raise_on_exception=True,
            max_retries=self.bulk_max_retries,
            initial_backoff=self.bulk_initial_backoff,
            max_backoff=self.bulk_max_backoff,
            **params,
        )

    async def delete(self, ids: Sequence[str]) -> int:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return 0
        actions = [{"_op_type": "delete", "_index": alias, "_id": i} for i in wanted for alias in self._aliases_for(i)]
        with self._errors(f"deleting {len(wanted)} documents"):
            deleted, errors = await self._send_bulk(actions, refresh=self.refresh)
        other = {}
        for item in errors:
            ((_, info),) = item.items()
            if int(info.get("status", 0)) != 404:  # not found (document or index): nothing to delete
                other[str(info.get("_id"))] = f"{info.get('status')} {_error_type(info)}: {_error_reason(info)}"
        if other:
            raise PrecedentError(
                "bulk_failed", f"deleting on {self.where}: {len(other)} deletions failed ({_reasons(other)})"
            )
        return int(deleted)

    # --- reads -------------------------------------------------------------------------------------
    async def get(self, ids: Sequence[str]) -> list[Document]:
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return []
        specs = [{"_index": alias, "_id": i} for i in wanted for alias in self._aliases_for(i)]
        with self._errors(f"reading {len(wanted)} documents"):
            resp = await self.client.mget(docs=specs, source_excludes=["embedding"])
        found: dict[str, dict] = {}
        for doc in resp.body.get("docs", []):
            if doc.get("found"):
                found.setdefault(doc["_id"], doc["_source"])
        return [self._document(found[i]) for i in wanted if i in found]

    async def counted(self, kind: Kind, category: str | None) -> int:
        """The category filter admits cross-category ('all') guidelines; retired ones are not counted."""
        alias = self.alias(kind)
        with self._errors(f"counting {alias}"):
            resp = await self.client.count(index=alias, query=self._filter(kind, category))
        return int(resp.body["count"])

    async def ranked(
        self, text: str, kind: Kind, category: str | None, k: int, mode: SearchMode, vector: np.ndarray | None
    ) -> list[Hit]:
        alias, flt = self.alias(kind), self._filter(kind, category)
        window = max(candidates(k), self.rank_window)
        if mode == "bm25":
            query_vector = None
        elif vector is None:
            query_vector = (await self._encode([text]))[0]
        else:
            query_vector = vector.astype(np.float64).round(7).tolist()
        bm25 = {"query": {"bool": {"must": [{"match": {"text": {"query": text}}}], "filter": [flt]}}}
        knn = {
            "field": "embedding",
            "query_vector": query_vector,
            "k": window,
            "num_candidates": min(10_000, max(NUM_CANDIDATES_MIN, 2 * window)),
            "filter": flt,
        }
        source = {"excludes": ["embedding"]}
        with self._errors(f"searching {alias}"):
            if mode == "bm25":
                hits = await self._search(alias, size=k, source=source, **bm25)
                return self._hits(kind, fuse({"bm25": _ids(hits)})[:k], hits)
            if mode == "vector":
                hits = await self._search(alias, size=k, source=source, knn={**knn, "k": k})
                return self._hits(kind, fuse({"vector": _ids(hits)})[:k], hits)
            return await self._hybrid(kind, alias, k, window, bm25, knn, source)

    async def _hybrid(
        self, kind: Kind, alias: str, k: int, window: int, bm25: dict, knn: dict, source: dict
    ) -> list[Hit]:
        lexical = {"size": window, "source": source, **bm25}
        semantic = {"size": window, "source": source, "knn": knn}
        if self.rrf is not False:
            rrf = {
                "retriever": {
                    "rrf": {
                        "retrievers": [{"standard": bm25}, {"knn": knn}],
                        "rank_window_size": window,
                        "rank_constant": RRF_K,
                    }
                },
                "size": k,
                "source": source,
            }
            bodies = [rrf, lexical, semantic] if self.rrf_sources else [rrf]
            fused, *subs = await asyncio.gather(*(self._search(alias, **b) for b in bodies), return_exceptions=True)
            why = rrf_refusal(fused) if isinstance(fused, ApiError) else None
            if why is None:
                body, *lists_of = _raise_first([fused, *subs])
                self.rrf = True
                lists = {"bm25": _ids(lists_of[0]), "vector": _ids(lists_of[1])} if lists_of else {}
                ranked = [(h["_id"], float(h["_score"] or 0.0), _ranks(h["_id"], lists)) for h in body["hits"]["hits"]]
                return self._hits(kind, ranked, body)
            self._give_up_rrf(why)
            if subs and not any(isinstance(r, BaseException) for r in subs):
                lexical_body, semantic_body = _raise_first(subs)  # the sub-queries already ran
                return self._fused(kind, k, lexical_body, semantic_body)
        results = await asyncio.gather(
            self._search(alias, **lexical), self._search(alias, **semantic), return_exceptions=True
        )
        lexical_body, semantic_body = _raise_first(results)
        return self._fused(kind, k, lexical_body, semantic_body)

    async def close(self) -> None:
        await self.client.close()

    # --- erasure (`cyberjurors erase`, precedents/erasure.py) ----------------------------------------
    async def guidelines_citing(self, case_id: str) -> list[Document]:
        """Every guideline, retired ones too, whose provenance names the case. ``guideline`` is
        stored, not indexed: every guideline is read (``_scan``, page by page) and checked here."""
        found = []
        async for hit in self._scan(self.alias("guideline"), source_excludes=["embedding"]):
            doc = self._document(hit["_source"])
            if doc.guideline is not None and doc.guideline.cites(case_id):
                found.append(doc)
        return found

    async def cases_decided_before(self, before: datetime) -> list[str]:
        """The ids of the historical cases decided before ``before`` (``case`` is stored, not indexed:
        every case is read, page by page, and checked here)."""
        found = []
        async for hit in self._scan(self.alias("case"), source_includes=["case"]):
            case = hit["_source"].get("case") or {}
            if case.get("case_id") and decided_before(case.get("decided_at"), before):
                found.append(case["case_id"])
        return sorted(found)

    async def _scan(self, alias: str, **body: Any) -> AsyncIterator[dict]:
        """Every document behind ``alias``, as hits, a page of ``scan_page`` at a time: a point in
        time (one view of the index for the whole scan, whatever is written meanwhile) read in
        ``_shard_doc`` order with ``search_after``. A single search stops at index.max_result_window
        (10,000) hits, and ``from`` past it is refused; this reads any number. The point in time is
        closed at the end, or when the caller stops early (the cluster drops it after
        ``SCAN_KEEP_ALIVE`` otherwise)."""
        doing = f"reading {alias}"
        with self._errors(doing):
            opened = await self.client.open_point_in_time(index=alias, keep_alive=SCAN_KEEP_ALIVE)
        pit = opened.body["id"]
        after: list[Any] | None = None
        try:
            while True:
                page: dict[str, Any] = {"search_after": after} if after is not None else {}
                with self._errors(doing):
                    resp = await self.client.search(
                        pit={"id": pit, "keep_alive": SCAN_KEEP_ALIVE},
                        sort=["_shard_doc"],
                        size=self.scan_page,
                        track_total_hits=False,
                        query={"match_all": {}},
                        **page,
                        **body,
                    )
                pit = resp.body.get("pit_id") or pit  # the cluster may hand back a new id: the next page uses it
                hits = resp.body["hits"]["hits"]
                for hit in hits:
                    yield hit
                if len(hits) < self.scan_page:
                    return
                after = hits[-1]["sort"]
        finally:
            with contextlib.suppress(Exception):  # expires by itself after SCAN_KEEP_ALIVE
                await self.client.close_point_in_time(id=pit)

    async def rewrite(self, documents: Sequence[Document]) -> None:
        """Replace documents whose provenance changed (an upsert: their text is embedded again)."""
        if documents:
            await self.upsert(documents)

    async def purge(self, needles: Sequence[str]) -> list[str]:
        """A deleted or replaced document stays in a segment, marked deleted, until a merge: ask for
        one that expunges deletes. What could not be done, as notes."""
        notes = []
        for kind in KINDS:
            try:
                with self._errors(f"expunging deletes from {self.alias(kind)}"):
                    await self.client.indices.forcemerge(index=self.alias(kind), only_expunge_deletes=True)
            except PrecedentError as err:
                notes.append(f"{self.alias(kind)}: deleted documents not yet expunged ({err.kind})")
        return notes

    # --- helpers -----------------------------------------------------------------------------------
    def _give_up_rrf(self, why: str) -> None:
        if self.rrf is not False:
            self.rrf, self.rrf_refusal = False, why
            log.info(
                "%s refused the rrf retriever (%s): hybrid search now sends a BM25 and a kNN query and "
                "fuses them client-side (RRF, k=%d)",
                self.where,
                why,
                RRF_K,
            )

    async def _search(self, alias: str, **body: Any) -> dict:
        resp = await self.client.search(index=alias, **body)
        return resp.body

    def _fused(self, kind: Kind, k: int, lexical: dict, semantic: dict) -> list[Hit]:
        ranked = fuse({"bm25": _ids(lexical), "vector": _ids(semantic)})[:k]
        return self._hits(kind, ranked, lexical, semantic)

    def _hits(self, kind: Kind, ranked: list[tuple[str, float, dict[str, int]]], *responses: dict) -> list[Hit]:
        sources = {h["_id"]: h["_source"] for r in responses for h in r["hits"]["hits"] if "_source" in h}
        ranked = sorted((r for r in ranked if r[0] in sources), key=lambda r: -r[1])  # stable: keeps ties' order
        return [
            Hit(id=i, kind=kind, score=score, rank=n, sources=src, document=self._document(sources[i]))
            for n, (i, score, src) in enumerate(ranked, 1)
        ]

    def _document(self, source: dict) -> Document:
        try:
            return Document.model_validate({k: v for k, v in source.items() if k != "embedding"})
        except ValidationError as err:
            raise PrecedentError(
                "corrupt",
                f"a stored precedent on {self.where} does not parse as a Document "
                f"({err.error_count()} errors, first: {err.errors()[0]['msg']}); "
                f"rebuild the index",
            ) from err

    def _filter(self, kind: Kind, category: str | None) -> dict[str, Any]:
        clauses: list[dict[str, Any]] = [{"term": {"kind": kind}}]
        admitted = category_filter(category, kind)
        if admitted is not None:
            clauses.append({"terms": {"category": list(admitted)}})
        return {"bool": {"filter": clauses, "must_not": [INACTIVE]}}

    def _aliases_for(self, doc_id: str) -> list[str]:
        kind = doc_id.split(":", 1)[0]
        return [self.alias(kind)] if kind in KINDS else [self.alias(k) for k in KINDS]

    async def _encode(self, texts: list[str]) -> list[list[float]]:
        vectors = np.asarray(await asyncio.to_thread(self.embedder.encode, texts))
        if vectors.shape != (len(texts), self.embedder.dims):
            raise PrecedentError(
                "model_mismatch",
                f"embedding model {self.embedder.name!r} returned shape "
                f"{vectors.shape}, expected ({len(texts)}, {self.embedder.dims})",
            )
        return vectors.astype(np.float64).round(7).tolist()  # short JSON; Elasticsearch stores float32

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Translate the client's exceptions into ``PrecedentError``s that say what to check."""
        try:
            yield
        except PrecedentError:
            raise
        except UnsupportedProductError as err:
            raise PrecedentError(
                "unreachable",
                f"{doing}: the server at {self.where} is not Elasticsearch (no "
                f"'X-Elastic-Product: Elasticsearch' header); check "
                f"ELASTICSEARCH_URL",
            ) from err
        except ApiError as err:
            raise api_error(err, doing, self.where, self.prefix) from err
        except ConnectionTimeout as err:
            raise PrecedentError(
                "timeout",
                f"{doing}: {self.where} did not answer in time after its "
                f"retries ({err}); check the cluster's health and load, or raise "
                f"elasticsearch.timeout_s",
            ) from err
        except SSLError as err:
            raise PrecedentError(
                "unreachable",
                f"{doing}: TLS to {self.where} failed ({err}); check "
                f"elasticsearch.ca_certs and elasticsearch.verify_certs",
            ) from err
        except ConnectionError as err:
            raise PrecedentError(
                "unreachable",
                f"{doing}: cannot connect to {self.where} ({err}); check "
                f"ELASTICSEARCH_URL and that the cluster is up and reachable",
            ) from err
        except SerializationError as err:
            raise PrecedentError(
                "server_error",
                f"{doing}: {self.where} sent an unreadable answer ({err}); check "
                f"that ELASTICSEARCH_URL points at Elasticsearch 9",
            ) from err
        except TransportError as err:
            raise PrecedentError(
                "unreachable",
                f"{doing}: talking to {self.where} failed ({err}); check ELASTICSEARCH_URL and the network",
            ) from err


def api_error(err: ApiError, doing: str, where: str, prefix: str) -> PrecedentError:
    status, etype, reason = err.meta.status, _error_type(err.body), _error_reason(err.body)
    said = f"{status} {etype}: {reason}"[:400]
    if status == 401:
        return PrecedentError(
            "auth",
            f"{doing}: {where} refused the credentials ({said}); check "
            f"ELASTICSEARCH_API_KEY, or elasticsearch.username / elasticsearch.password",
        )
    if status == 403:
        return PrecedentError(
            "auth",
            f"{doing}: the credentials lack a privilege ({said}); the API key or user "
            f"needs index privileges read, write, create_index, manage on {prefix}-* "
            f"and the cluster privilege manage_index_templates",
        )
    if status == 404:
        return PrecedentError(
            "index_missing",
            f"{doing}: not found on {where} ({said}); create the precedent "
            f"indexes (cyberjurors precedents build FILE|DIR) or check "
            f"elasticsearch.index_prefix={prefix!r}",
        )
    if status == 429:
        return PrecedentError(
            "rate_limited",
            f"{doing}: {where} still rejects requests (429) after "
            f"retries ({said}); the cluster is overloaded: "
            f"slow down or scale it",
        )
    if status >= 500:
        return PrecedentError(
            "server_error",
            f"{doing}: {where} failed ({said}); check the cluster's health (GET _cluster/health) and its logs",
        )
    if etype == "media_type_header_exception":
        return PrecedentError(
            "server_error",
            f"{doing}: {where} refused the client's compatibility header "
            f"({said}); this client needs an Elasticsearch 9 cluster",
        )
    return PrecedentError(
        "corrupt",
        f"{doing}: {where} rejected the request ({said}); the indexes under "
        f"{prefix}-* do not have the layout this version expects: rebuild them",
    )


def rrf_refusal(err: ApiError) -> str | None:
    """Why the cluster refused the rrf retriever, or None if ``err`` is some other error."""
    status = err.meta.status
    for node in _error_nodes(err.body):
        etype, reason = str(node.get("type", "")), str(node.get("reason", ""))
        if (
            status == 403
            and etype == "security_exception"
            and ("license.expired.feature" in node or reason.startswith(LICENCE_REASON))
        ):
            return f"403 {etype}: {reason}"
        if (
            status == 400
            and etype in ("parsing_exception", "x_content_parse_exception", "illegal_argument_exception")
            and UNKNOWN_RETRIEVER.search(reason)
        ):
            return f"400 {etype}: {reason}"
    return None


def _error_nodes(body: Any) -> Iterator[dict]:
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return
    seen = 0
    stack = [error]
    while stack and seen < 20:
        node = stack.pop(0)
        seen += 1
        yield node
        stack += [c for c in node.get("root_cause", []) if isinstance(c, dict)]
        if isinstance(node.get("caused_by"), dict):
            stack.append(node["caused_by"])


def _error_type(body: Any) -> str:
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        return str(error.get("type", "error"))
    return "error"


def _error_reason(body: Any) -> str:
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        reason = str(error.get("reason", ""))
        cause = error.get("caused_by")
        if isinstance(cause, dict) and cause.get("reason"):
            reason += f" (caused by {cause.get('type')}: {cause['reason']})"
        return reason
    return str(error)


def _raise_first(results: Sequence[T | BaseException]) -> list[T]:
    """``asyncio.gather(..., return_exceptions=True)``'s results, or the first exception among them."""
    found = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        found.append(result)
    return found


def _ranks(doc_id: str, lists: dict[str, list[str]]) -> dict[str, int]:
    return {name: ids.index(doc_id) + 1 for name, ids in lists.items() if doc_id in ids}


def _ids(response: dict) -> list[str]:
    return [h["_id"] for h in response["hits"]["hits"]]


def _few(ids: Sequence[str], n: int = 5) -> str:
    return ", ".join(ids[:n]) + (f" and {len(ids) - n} more" if len(ids) > n else "")


def _reasons(failed: dict[str, str], n: int = 5) -> str:
    items = list(failed.items())
    text = "; ".join(f"{i}: {why}" for i, why in items[:n])
    return text + (f"; and {len(items) - n} more" if len(items) > n else "")
