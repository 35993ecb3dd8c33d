"""A local HTTP server speaking enough of the Elasticsearch REST API for ``ElasticsearchIndex``.

It is a real aiohttp server on 127.0.0.1 (random port), so the adapter is exercised through the
real ``AsyncElasticsearch`` client and ``elastic_transport`` (serialisation, compatibility
headers, the ``X-Elastic-Product`` check, the client's own retries and timeouts).

What it does:

* records every request: method, path, query, headers, body (JSON, or NDJSON as a list);
* keeps indexes, aliases and index templates in memory and answers with responses shaped like
  Elasticsearch 9's (``GET /`` info, bulk items with per-item status and errors, search hits with
  ``_id``/``_score``/``_source``, errors as ``{"error": {"root_cause": [...], "type", "reason"},
  "status"}``), every one with ``X-Elastic-Product: Elasticsearch``;
* evaluates the filters the adapter sends (bool/term/terms/ids/match_all), and ranks as a cluster
  does: a ``match`` on ``text`` by BM25 (Lucene's formula, k1=1.2 b=0.75, statistics over the
  index; the english analyzer stood in for by the embedded store's, ``bm25_terms``), only the
  documents sharing a term; a ``knn`` exactly, by cosine over the stored ``embedding`` (score
  (1 + cos) / 2). A test may instead script which ids the lexical and the ``knn`` sides return,
  in which order; an ``rrf`` retriever fuses the two lists with the request's ``rank_constant``
  and ``rank_window_size``, as Elasticsearch would;
* models paged reads as a cluster does them: a point in time (``POST /{index}/_pit``, ``DELETE
  /_pit``) is a snapshot of the documents when it was opened; a search on it (``POST /_search`` with
  ``pit``, no index in the path) needs a ``sort`` (``_shard_doc``) and pages with ``search_after``,
  every hit carrying its ``sort`` values; and every search refuses ``from`` + ``size`` beyond
  ``index.max_result_window`` (``max_result_window``, 10,000 by default), ``from`` with
  ``search_after``, an index with ``pit``, a closed or unknown point in time;
* lets a test script failures: any status and body for matching requests (a number of times or
  always, optionally after a delay), per-document bulk item failures, slow answers.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from aiohttp import web

JSON_TYPE = "application/vnd.elasticsearch+json;compatible-with=9"
VERSION = "9.1.5"


def error_body(status: int, type_: str, reason: str, *, caused_by: dict | None = None, **extra: Any) -> dict:
    """An error body the way Elasticsearch renders an exception (ElasticsearchException.toXContent)."""
    cause = {"type": type_, "reason": reason, **extra}
    error = dict(cause)
    error["root_cause"] = [cause]
    if caused_by:
        error["caused_by"] = caused_by
    return {"error": {"root_cause": error.pop("root_cause"), **error}, "status": status}


# Shapes seen from real clusters (see ElasticsearchIndex's docstring for their sources).
def rrf_licence_error() -> dict:
    """``retriever.rrf`` on a basic licence: RRFRetrieverBuilder.fromXContent throws
    LicenseUtils.newComplianceException("Reciprocal Rank Fusion (RRF)"), an
    ElasticsearchSecurityException with RestStatus.FORBIDDEN whose ``es.license.expired.feature``
    metadata is rendered without the ``es.`` prefix."""
    return error_body(
        403,
        "security_exception",
        "current license is non-compliant for [Reciprocal Rank Fusion (RRF)]",
        **{"license.expired.feature": "Reciprocal Rank Fusion (RRF)"},
    )


def unknown_retriever_error() -> dict:
    """A cluster without the rrf retriever: RetrieverBuilder.parseInnerRetrieverBuilder turns
    NamedObjectNotFoundException into ParsingException("unknown retriever [rrf]")."""
    return error_body(400, "parsing_exception", "unknown retriever [rrf]", line=1, col=27)


def unauthorized_search_error(index: str) -> dict:
    return error_body(
        403,
        "security_exception",
        f"action [indices:data/read/search] is unauthorized for user [reader] with effective roles "
        f"[viewer] on indices [{index}], this action is granted by the index privileges [read,all]",
    )


def authentication_error(path: str) -> dict:
    return error_body(
        401,
        "security_exception",
        "unable to authenticate with provided credentials and anonymous access is not allowed for this request",
        additional_unsuccessful_credentials=f"API key: unable to find apikey for [{path}]",
    )


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any  # parsed JSON, a list of objects for NDJSON, or None
    raw: bytes

    @property
    def ndjson(self) -> list[dict]:
        return self.body if isinstance(self.body, list) else []


@dataclass
class Failure:
    status: int
    body: Any
    method: str | None = None
    path: str | None = None  # a regular expression matched against the whole path
    when: Callable[[Request], bool] | None = None
    times: int | None = 1  # None: always
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    hits: int = 0

    def matches(self, req: Request) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if self.method and req.method != self.method:
            return False
        if self.path and not re.fullmatch(self.path, req.path):
            return False
        return self.when is None or self.when(req)


@dataclass
class ItemFailure:
    doc_id: str
    status: int
    type: str
    reason: str
    times: int | None = 1
    hits: int = 0


@dataclass
class Index:
    name: str
    mappings: dict
    settings: dict
    aliases: dict[str, dict] = field(default_factory=dict)
    docs: dict[str, dict] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    uuid: str = field(default_factory=lambda: uuid.uuid4().hex[:22])


class FakeElasticsearch:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.indices: dict[str, Index] = {}
        self.templates: dict[str, dict] = {}
        self.failures: list[Failure] = []
        self.item_failures: list[ItemFailure] = []
        self.scripted: dict[str, list[str]] = {}  # "bm25" | "knn" -> ids in rank order
        self._terms: dict[str, list[str]] = {}  # text -> its BM25 terms, analysed once
        self.product_header = True
        self.max_result_window = 10_000  # index.max_result_window
        self.pits: dict[str, list[tuple[Index, str, dict]]] = {}  # open points in time: their snapshot
        self.pits_opened = 0
        self.seq_no = 0
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle -------------------------------------------------------------------------
    async def start(self) -> FakeElasticsearch:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- scripting ---------------------------------------------------------------------------
    def fail(
        self,
        status: int,
        body: Any = None,
        *,
        method: str | None = None,
        path: str | None = None,
        when: Callable[[Request], bool] | None = None,
        times: int | None = 1,
        delay: float = 0.0,
        headers: dict[str, str] | None = None,
    ) -> Failure:
        body = body if body is not None else error_body(status, "fake_exception", f"scripted {status}")
        failure = Failure(status, body, method, path, when, times, delay, headers or {})
        self.failures.append(failure)
        return failure

    def slow(
        self, seconds: float, *, method: str | None = None, path: str | None = None, times: int | None = None
    ) -> Failure:
        """Answer matching requests normally, but only after ``seconds``."""
        failure = Failure(0, None, method, path, None, times, seconds)
        self.failures.append(failure)
        return failure

    def fail_item(self, doc_id: str, status: int, type_: str, reason: str, times: int | None = 1) -> None:
        """Make the bulk item for ``doc_id`` fail (``times`` times, or always with None)."""
        self.item_failures.append(ItemFailure(doc_id, status, type_, reason, times))

    def script(self, retriever: str, ids: list[str]) -> None:
        assert retriever in ("bm25", "knn")
        self.scripted[retriever] = list(ids)

    def requests_to(self, method: str | None = None, path: str | None = None) -> list[Request]:
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and (path is None or re.fullmatch(path, r.path))
        ]

    def searches(self) -> list[Request]:
        return self.requests_to("POST", r"/[^_/][^/]*/_search")

    def alias_target(self, alias: str) -> list[str]:
        return sorted(n for n, ix in self.indices.items() if alias in ix.aliases)

    # --- dispatch -----------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        req = Request(
            request.method,
            request.path,
            dict(request.query),
            {k.lower(): v for k, v in request.headers.items()},
            _parse(raw, request.content_type),
            raw,
        )
        self.requests.append(req)
        failure = next((f for f in self.failures if f.matches(req)), None)
        if failure is not None:
            failure.hits += 1
            if failure.delay:
                await asyncio.sleep(failure.delay)
            if failure.status:
                return self._respond(failure.status, failure.body, failure.headers)
        try:
            status, body = self._route(req)
        except _EsError as err:
            status, body = err.status, err.body
        return self._respond(status, body)

    def _respond(self, status: int, body: Any, headers: dict[str, str] | None = None) -> web.Response:
        out = dict(headers or {})
        if self.product_header:
            out["X-Elastic-Product"] = "Elasticsearch"
        if body is None:
            return web.Response(status=status, headers=out)
        out["Content-Type"] = JSON_TYPE
        return web.Response(status=status, body=json.dumps(body).encode(), headers=out)

    def _route(self, req: Request) -> tuple[int, Any]:
        parts = [p for p in req.path.split("/") if p]
        m = req.method
        if not parts:
            return 200, {
                "name": "fake-node",
                "cluster_name": "fake",
                "cluster_uuid": "fakeuuid",
                "version": {
                    "number": VERSION,
                    "build_flavor": "default",
                    "build_type": "docker",
                    "lucene_version": "10.2.2",
                    "minimum_wire_compatibility_version": "8.19.0",
                    "minimum_index_compatibility_version": "8.0.0",
                },
                "tagline": "You Know, for Search",
            }
        head = parts[0]
        if head == "_index_template" and len(parts) == 2:
            if m == "PUT":
                self.templates[parts[1]] = req.body
                return 200, {"acknowledged": True}
            if m == "DELETE":
                if self.templates.pop(parts[1], None) is None:
                    raise _EsError.of(
                        404, "resource_not_found_exception", f"index template matching [{parts[1]}] not found"
                    )
                return 200, {"acknowledged": True}
        if head == "_alias" and len(parts) == 2 and m == "GET":
            return self._get_alias_by_name(parts[1])
        if head == "_aliases" and m == "POST":
            return self._update_aliases(req.body)
        if head == "_bulk" and m in ("POST", "PUT"):
            return self._bulk(req)
        if head == "_mget" and m in ("POST", "GET"):
            return self._mget(req)
        if head == "_pit" and len(parts) == 1 and m == "DELETE":
            return self._close_pit(req.body or {})
        if head == "_search" and len(parts) == 1 and m in ("POST", "GET"):
            return self._search_pit(req.body or {})
        if head.startswith("_"):
            raise _EsError.of(400, "illegal_argument_exception", f"fake: unsupported endpoint [{m} {req.path}]")
        if len(parts) == 1:
            if m == "HEAD":  # indices.exists
                try:
                    self._resolve(head)
                except _EsError:
                    return 404, None
                return 200, None
            if m == "PUT":
                return self._create(head, req.body or {})
            if m == "DELETE":
                return self._delete_indices(head)
        if len(parts) == 2:
            action = parts[1]
            if action == "_alias" and m == "GET":
                return self._get_alias_by_index(head)
            if action == "_mapping" and m == "GET":
                return 200, {ix.name: {"mappings": ix.mappings} for ix in self._resolve(head)}
            if action == "_search" and m in ("POST", "GET"):
                if "pit" in (req.body or {}):
                    raise _EsError.of(
                        400,
                        "action_request_validation_exception",
                        "Validation Failed: 1: [indices] cannot be used with point in time. Do not specify any "
                        "index with point in time.;",
                    )
                return self._search(head, req.body or {}, req.query)
            if action == "_pit" and m == "POST":
                return self._open_pit(head, req.query)
            if action == "_count" and m in ("POST", "GET"):
                query = (req.body or {}).get("query", {"match_all": {}})
                n = sum(_matches(query, d, i) for ix in self._resolve(head) for i, d in ix.docs.items())
                return 200, {"count": n, "_shards": _shards()}
            if action in ("_refresh", "_forcemerge") and m in ("POST", "GET"):  # nothing to merge in memory
                self._resolve(head)
                return 200, {"_shards": _shards()}
        raise _EsError.of(400, "illegal_argument_exception", f"fake: unsupported endpoint [{m} {req.path}]")

    # --- indices and aliases -------------------------------------------------------------------
    def _resolve(self, expression: str, *, allow_missing_wildcards: bool = True) -> list[Index]:
        out: dict[str, Index] = {}
        for name in expression.split(","):
            if any(c in name for c in "*?"):
                for ix in self.indices.values():
                    if fnmatch.fnmatchcase(ix.name, name):
                        out[ix.name] = ix
                continue
            if name in self.indices:
                out[name] = self.indices[name]
                continue
            targets = [ix for ix in self.indices.values() if name in ix.aliases]
            if not targets:
                raise _EsError.of(
                    404,
                    "index_not_found_exception",
                    f"no such index [{name}]",
                    **{"resource.type": "index_or_alias", "resource.id": name, "index_uuid": "_na_", "index": name},
                )
            for ix in targets:
                out[ix.name] = ix
        return list(out.values())

    def _write_index(self, name: str, *, require_alias: bool) -> Index | None:
        if name in self.indices:
            if require_alias:
                raise _EsError.of(
                    404,
                    "index_not_found_exception",
                    f"no such index [{name}] and [require_alias] request flag is [true] and [{name}] is not an alias",
                    index=name,
                )
            return self.indices[name]
        targets = [ix for ix in self.indices.values() if name in ix.aliases]
        if not targets:
            if require_alias:
                raise _EsError.of(
                    404,
                    "index_not_found_exception",
                    f"no such index [{name}] and [require_alias] request flag is [true] and [{name}] is not an alias",
                    index=name,
                )
            return None
        if len(targets) == 1:
            return targets[0]
        writers = [ix for ix in targets if ix.aliases[name].get("is_write_index")]
        if len(writers) != 1:
            raise _EsError.of(
                400,
                "illegal_argument_exception",
                f"no write index is defined for alias [{name}]. The write index may be explicitly "
                f"disabled using is_write_index=false or the alias points to multiple indices without "
                f"one being designated as a write index",
            )
        return writers[0]

    def _create(self, name: str, body: dict) -> tuple[int, Any]:
        if name in self.indices:
            ix = self.indices[name]
            raise _EsError.of(
                400,
                "resource_already_exists_exception",
                f"index [{name}/{ix.uuid}] already exists",
                index_uuid=ix.uuid,
                index=name,
            )
        mappings: dict = {}
        settings: dict = {}
        for template in sorted(self.templates.values(), key=lambda t: t.get("priority", 0)):
            if any(fnmatch.fnmatchcase(name, p) for p in template.get("index_patterns", [])):
                mappings = json.loads(json.dumps(template.get("template", {}).get("mappings", {})))
                settings = dict(template.get("template", {}).get("settings", {}))
        mappings.update(body.get("mappings", {}))
        settings.update(body.get("settings", {}))
        for alias in body.get("aliases", {}):
            if alias in self.indices:
                raise _EsError.of(
                    400,
                    "invalid_alias_name_exception",
                    f"Invalid alias name [{alias}]: an index or data stream exists with the same name as the alias",
                    index=alias,
                )
        self.indices[name] = Index(name, mappings, settings, dict(body.get("aliases", {})))
        return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}

    def _delete_indices(self, expression: str) -> tuple[int, Any]:
        if any(c in expression for c in "*?") or expression in ("_all",):
            raise _EsError.of(400, "illegal_argument_exception", "Wildcard expressions or all indices are not allowed")
        names = expression.split(",")
        for n in names:
            if n not in self.indices:
                raise _EsError.of(404, "index_not_found_exception", f"no such index [{n}]", index=n)
        for n in names:
            del self.indices[n]
        return 200, {"acknowledged": True}

    def _get_alias_by_name(self, names: str) -> tuple[int, Any]:
        out = {}
        missing = []
        for alias in names.split(","):
            targets = [ix for ix in self.indices.values() if alias in ix.aliases]
            if not targets:
                missing.append(alias)
            for ix in targets:
                out.setdefault(ix.name, {"aliases": {}})["aliases"][alias] = ix.aliases[alias]
        if missing:
            which = ",".join(missing)
            body = {"error": f"alias [{which}] missing", "status": 404, **out}
            return 404, body
        return 200, out

    def _get_alias_by_index(self, expression: str) -> tuple[int, Any]:
        return 200, {ix.name: {"aliases": dict(ix.aliases)} for ix in self._resolve(expression)}

    def _update_aliases(self, body: dict) -> tuple[int, Any]:
        actions = body.get("actions", [])
        for action in actions:  # validate everything first: the call is atomic
            ((op, spec),) = action.items()
            if op not in ("add", "remove", "remove_index"):
                raise _EsError.of(400, "illegal_argument_exception", f"fake: unsupported alias action [{op}]")
            if spec["index"] not in self.indices:
                raise _EsError.of(
                    404, "index_not_found_exception", f"no such index [{spec['index']}]", index=spec["index"]
                )
            if op == "remove" and spec["alias"] not in self.indices[spec["index"]].aliases:
                raise _EsError.of(404, "aliases_not_found_exception", f"aliases [{spec['alias']}] missing")
        for action in actions:
            ((op, spec),) = action.items()
            if op == "add":
                self.indices[spec["index"]].aliases[spec["alias"]] = {
                    k: v for k, v in spec.items() if k not in ("index", "alias")
                }
            elif op == "remove":
                del self.indices[spec["index"]].aliases[spec["alias"]]
            else:
                del self.indices[spec["index"]]
        return 200, {"acknowledged": True, "errors": False}

    # --- documents -------------------------------------------------------------------------------
    def _bulk(self, req: Request) -> tuple[int, Any]:
        lines = req.ndjson
        require_alias = req.query.get("require_alias") == "true"
        items = []
        i = 0
        while i < len(lines):
            ((op, meta),) = lines[i].items()
            source = None
            if op != "delete":
                source = lines[i + 1]
                i += 1
            i += 1
            items.append({op: self._bulk_item(op, meta, source, require_alias)})
        return 200, {"errors": any("error" in next(iter(it.values())) for it in items), "took": 3, "items": items}

    def _bulk_item(self, op: str, meta: dict, source: dict | None, require_alias: bool) -> dict:
        name, doc_id = meta["_index"], meta["_id"]
        for failure in self.item_failures:
            if failure.doc_id == doc_id and (failure.times is None or failure.hits < failure.times):
                failure.hits += 1
                return {
                    "_index": name,
                    "_id": doc_id,
                    "status": failure.status,
                    "error": {"type": failure.type, "reason": failure.reason},
                }
        try:
            if op == "delete":
                ix = self._resolve(name)[0]
            else:
                ix = self._write_index(name, require_alias=require_alias)
                if ix is None:  # auto-create, like action.auto_create_index
                    self._create(name, {})
                    ix = self.indices[name]
                self._check_source(ix, doc_id, source or {})
        except _EsError as err:
            error = err.body["error"]
            return {
                "_index": name,
                "_id": doc_id,
                "status": err.status,
                "error": {k: v for k, v in error.items() if k != "root_cause"},
            }
        self.seq_no += 1
        base = {
            "_index": ix.name,
            "_id": doc_id,
            "_shards": {"total": 1, "successful": 1, "failed": 0},
            "_seq_no": self.seq_no,
            "_primary_term": 1,
        }
        if op == "delete":
            if doc_id not in ix.docs:
                return {**base, "_version": 1, "result": "not_found", "status": 404}
            del ix.docs[doc_id]
            ix.versions[doc_id] += 1
            return {**base, "_version": ix.versions[doc_id], "result": "deleted", "status": 200}
        existed = doc_id in ix.docs
        ix.docs[doc_id] = source or {}
        ix.versions[doc_id] = ix.versions.get(doc_id, 0) + 1
        return {
            **base,
            "_version": ix.versions[doc_id],
            "result": "updated" if existed else "created",
            "status": 200 if existed else 201,
        }

    def _check_source(self, ix: Index, doc_id: str, source: dict) -> None:
        props = ix.mappings.get("properties", {})
        if ix.mappings.get("dynamic") == "strict":
            for key in source:
                if key not in props:
                    raise _EsError.of(
                        400,
                        "strict_dynamic_mapping_exception",
                        f"[1:2] mapping set to strict, dynamic introduction of [{key}] within [_doc] is not allowed",
                    )
        for key, spec in props.items():
            if spec.get("type") == "dense_vector" and source.get(key) is not None:
                n = len(source[key])
                if n != spec.get("dims"):
                    raise _EsError.of(
                        400,
                        "document_parsing_exception",
                        f"[1:{n}] The [dense_vector] field [{key}] in doc [document with id '{doc_id}'] "
                        f"has a different number of dimensions [{n}] than defined in the mapping "
                        f"[{spec.get('dims')}]",
                    )

    def _mget(self, req: Request) -> tuple[int, Any]:
        excludes = set(filter(None, req.query.get("_source_excludes", "").split(",")))
        out = []
        for spec in (req.body or {}).get("docs", []):
            name, doc_id = spec["_index"], spec["_id"]
            try:
                ix = self._resolve(name)[0]
            except _EsError as err:
                out.append({"_index": name, "_id": doc_id, "error": err.body["error"]})
                continue
            if doc_id in ix.docs:
                out.append(
                    {
                        "_index": ix.name,
                        "_id": doc_id,
                        "_version": ix.versions[doc_id],
                        "_seq_no": 1,
                        "_primary_term": 1,
                        "found": True,
                        "_source": {k: v for k, v in ix.docs[doc_id].items() if k not in excludes},
                    }
                )
            else:
                out.append({"_index": ix.name, "_id": doc_id, "found": False})
        return 200, {"docs": out}

    # --- points in time ----------------------------------------------------------------------------
    def _open_pit(self, expression: str, query: dict[str, str]) -> tuple[int, Any]:
        if "keep_alive" not in query:
            raise _EsError.of(
                400, "action_request_validation_exception", "Validation Failed: 1: [keep_alive] is missing;"
            )
        indices = self._resolve(expression)
        pit = uuid.uuid4().hex
        self.pits[pit] = [(ix, d, dict(src)) for ix in indices for d, src in sorted(ix.docs.items())]
        self.pits_opened += 1
        return 200, {"id": pit, "_shards": _shards()}

    def _close_pit(self, body: dict) -> tuple[int, Any]:
        found = self.pits.pop(str(body.get("id")), None)
        return (200 if found is not None else 404), {
            "succeeded": found is not None,
            "num_freed": int(found is not None),
        }

    def _search_pit(self, body: dict) -> tuple[int, Any]:
        """A search on a point in time: its snapshot, in ``_shard_doc`` order, after ``search_after``."""
        pit = body.get("pit")
        if not isinstance(pit, dict) or pit.get("id") not in self.pits:
            if pit is None:
                raise _EsError.of(400, "illegal_argument_exception", "fake: a search without an index needs a pit")
            raise _EsError.of(
                404,
                "search_context_missing_exception",
                f"No search context found for id [{(pit or {}).get('id')}]",
            )
        size, start = self._window(body)
        sort = body.get("sort") or []
        if sort not in (["_shard_doc"], [{"_shard_doc": "asc"}], [{"_shard_doc": {"order": "asc"}}]):
            raise _EsError.of(
                400, "illegal_argument_exception", f"fake: sort {sort!r} on a point in time is not modelled"
            )
        after = body.get("search_after")
        first = start if after is None else int(after[0]) + 1
        snapshot = self.pits[pit["id"]]
        q = body.get("query", {"match_all": {}})
        matching = [(n, ix, d, src) for n, (ix, d, src) in enumerate(snapshot) if _matches(q, src, d)]
        page = [m for m in matching if m[0] >= first][:size]
        hits = [{"_index": ix.name, "_id": d, "_score": None, "_source": src, "sort": [n]} for n, ix, d, src in page]
        return 200, {
            "pit_id": pit["id"],
            "took": 2,
            "timed_out": False,
            "_shards": _shards(),
            "hits": {"max_score": None, "hits": hits},
        }

    def _window(self, body: dict) -> tuple[int, int]:
        """(size, from) of a search, refused as a cluster refuses them."""
        size, start = body.get("size", 10), body.get("from", 0)
        if body.get("search_after") is not None:
            if start > 0:
                raise _EsError.of(
                    400, "illegal_argument_exception", "`from` parameter must be set to 0 when `search_after` is used."
                )
            if not body.get("sort"):
                raise _EsError.of(400, "illegal_argument_exception", "Sort must contain at least one field.")
        if start + size > self.max_result_window:
            cause = {
                "type": "illegal_argument_exception",
                "reason": f"Result window is too large, from + size must be less than or equal to: "
                f"[{self.max_result_window}] but was [{start + size}]. See the scroll api for a more efficient "
                f"way to request large data sets. This limit can be set by changing the "
                f"[index.max_result_window] index level setting.",
            }
            raise _EsError(
                400,
                {
                    "error": {
                        "root_cause": [cause],
                        "type": "search_phase_execution_exception",
                        "reason": "all shards failed",
                        "phase": "query",
                        "grouped": True,
                        "caused_by": cause,
                    },
                    "status": 400,
                },
            )
        return size, start

    # --- search ------------------------------------------------------------------------------------
    def _search(self, expression: str, body: dict, query: dict[str, str]) -> tuple[int, Any]:
        indices = self._resolve(expression)
        size, start = self._window(body)
        source_spec = body.get("_source", True)
        excludes = set(source_spec.get("excludes", [])) if isinstance(source_spec, dict) else set()
        dims = next(
            (
                p.get("dims")
                for ix in indices
                for p in ix.mappings.get("properties", {}).values()
                if p.get("type") == "dense_vector"
            ),
            None,
        )
        if "retriever" in body:
            ranked = self._retriever(indices, body["retriever"], size, dims)
        elif "knn" in body:
            ranked = self._knn(indices, body["knn"], dims)[:size]
        else:
            q = body.get("query", {"match_all": {}})
            side = "bm25" if _has(q, "match") else None
            ranked = self._ranked(indices, q, side)[start : start + size]
            ranked = [(ix, d, 10.0 / r) for r, (ix, d) in enumerate(ranked, 1)]
        hits = [
            {
                "_index": ix.name,
                "_id": d,
                "_score": score,
                "_source": {k: v for k, v in ix.docs[d].items() if k not in excludes},
            }
            for ix, d, score in ranked
        ]
        return 200, {
            "took": 2,
            "timed_out": False,
            "_shards": _shards(),
            "hits": {
                "total": {"value": len(hits), "relation": "eq"},
                "max_score": hits[0]["_score"] if hits else None,
                "hits": hits,
            },
        }

    def _ranked(
        self, indices: list[Index], query: dict, side: str | None, vector: list[float] | None = None
    ) -> list[tuple[Index, str]]:
        found = [(ix, d) for ix in indices for d, src in sorted(ix.docs.items()) if _matches(query, src, d)]
        if side and side in self.scripted:
            order = {d: r for r, d in enumerate(self.scripted[side])}
            return sorted((f for f in found if f[1] in order), key=lambda f: order[f[1]])
        scores = self._bm25(indices, _match_text(query)) if side == "bm25" else {}
        if side == "knn" and vector is not None:
            q = np.asarray(vector, np.float64)
            q /= np.linalg.norm(q) or 1.0
            for ix, d in found:
                v = np.asarray(ix.docs[d].get("embedding") or (), np.float64)
                if v.shape == q.shape:
                    scores[(ix.name, d)] = (1.0 + float(v @ q) / (float(np.linalg.norm(v)) or 1.0)) / 2
        if side in ("bm25", "knn"):
            found = sorted((f for f in found if (f[0].name, f[1]) in scores), key=lambda f: -scores[(f[0].name, f[1])])
        return found

    def _analysed(self, text: str, analyse: Callable[[str], list[str]]) -> list[str]:
        if text not in self._terms:
            self._terms[text] = analyse(text)
        return self._terms[text]

    def _bm25(self, indices: list[Index], text: str) -> dict[tuple[str, str], float]:
        """Lucene's BM25 of every document sharing a term with ``text``; each index its own statistics."""
        from cyberjurors.precedents.embedded import bm25_terms

        out: dict[tuple[str, str], float] = {}
        terms = bm25_terms(text)
        for ix in indices:
            docs = {d: self._analysed(src.get("text", ""), bm25_terms) for d, src in ix.docs.items()}
            if not docs:
                continue
            avgdl = sum(map(len, docs.values())) / len(docs) or 1.0
            for term in terms:
                having = [d for d, ts in docs.items() if term in ts]
                idf = np.log(1 + (len(docs) - len(having) + 0.5) / (len(having) + 0.5))
                for d in having:
                    tf, dl = docs[d].count(term), len(docs[d])
                    key = (ix.name, d)
                    out[key] = out.get(key, 0.0) + idf * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
        return out

    def _knn(self, indices: list[Index], knn: dict, dims: int | None) -> list[tuple[Index, str, float]]:
        k, candidates = knn.get("k", 10), knn.get("num_candidates", 100)
        if candidates < k:
            raise _EsError.of(400, "illegal_argument_exception", "[num_candidates] cannot be less than [k]")
        if dims is not None and len(knn["query_vector"]) != dims:
            raise _EsError.of(
                400,
                "illegal_argument_exception",
                f"The query vector has a different number of dimensions [{len(knn['query_vector'])}] "
                f"than the document vectors [{dims}].",
            )
        flt = knn.get("filter", {"match_all": {}})
        ranked = self._ranked(indices, flt, "knn", knn["query_vector"])[:k]
        return [(ix, d, 1.0 - 0.01 * r) for r, (ix, d) in enumerate(ranked, 1)]

    def _retriever(self, indices: list[Index], retriever: dict, size: int, dims: int | None):
        ((name, spec),) = retriever.items()
        if name != "rrf":
            raise _EsError.of(400, "parsing_exception", f"fake: unsupported retriever [{name}]")
        window, constant = spec.get("rank_window_size", 10), spec.get("rank_constant", 60)
        if window < size:
            raise _EsError.of(
                400,
                "action_request_validation_exception",
                f"Validation Failed: 1: [rrf] requires [rank_window_size: {window}] be greater than "
                f"or equal to [size: {size}];",
            )
        scores: dict[tuple[str, str], float] = {}
        where: dict[tuple[str, str], Index] = {}
        for child in spec["retrievers"]:
            ((kind, sub),) = child.items()
            if kind == "standard":
                q = sub["query"]
                ranked = [(ix, d) for ix, d in self._ranked(indices, q, "bm25" if _has(q, "match") else None)]
            elif kind == "knn":
                ranked = [(ix, d) for ix, d, _ in self._knn(indices, sub, dims)]
            else:
                raise _EsError.of(400, "parsing_exception", f"unknown retriever [{kind}]")
            for r, (ix, d) in enumerate(ranked[:window], 1):
                key = (ix.name, d)
                scores[key] = float(np.float32(scores.get(key, 0.0)) + np.float32(1.0) / np.float32(constant + r))
                where[key] = ix
        ordered = sorted(scores, key=lambda key: -scores[key])[:size]
        return [(where[key], key[1], scores[key]) for key in ordered]


class _EsError(Exception):
    def __init__(self, status: int, body: dict):
        super().__init__(body)
        self.status, self.body = status, body

    @classmethod
    def of(cls, status: int, type_: str, reason: str, **extra: Any) -> _EsError:
        return cls(status, error_body(status, type_, reason, **extra))


def _shards() -> dict:
    return {"total": 1, "successful": 1, "skipped": 0, "failed": 0}


def _parse(raw: bytes, content_type: str) -> Any:
    if not raw:
        return None
    text = raw.decode()
    if "ndjson" in content_type:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def _has(query: Any, key: str) -> bool:
    if isinstance(query, dict):
        return key in query or any(_has(v, key) for v in query.values())
    if isinstance(query, list):
        return any(_has(v, key) for v in query)
    return False


def _match_text(query: Any) -> str:
    """The text of the ``match`` clauses in a query."""
    if isinstance(query, list):
        return " ".join(_match_text(q) for q in query)
    if not isinstance(query, dict):
        return ""
    if "match" in query:
        return " ".join(str(v["query"] if isinstance(v, dict) else v) for v in query["match"].values())
    return " ".join(_match_text(v) for v in query.values())


def _field(source: dict, path: str) -> list:
    value: Any = source
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return []
        value = value[part]
    return value if isinstance(value, list) else [value]


def _clauses(value: Any) -> list:
    return value if isinstance(value, list) else [value] if value else []


def _matches(query: dict, source: dict, doc_id: str) -> bool:
    """Filter semantics only: ``match`` matches every document (the fake has no BM25)."""
    ((kind, spec),) = query.items()
    if kind == "bool":
        return all(
            _matches(q, source, doc_id) for q in _clauses(spec.get("must")) + _clauses(spec.get("filter"))
        ) and not any(_matches(q, source, doc_id) for q in _clauses(spec.get("must_not")))
    if kind == "term":
        ((path, value),) = spec.items()
        value = value["value"] if isinstance(value, dict) else value
        return value in _field(source, path)
    if kind == "terms":
        ((path, values),) = spec.items()
        return any(v in _field(source, path) for v in values)
    if kind == "ids":
        return doc_id in spec["values"]
    if kind in ("match", "match_all"):
        return True
    raise _EsError.of(400, "parsing_exception", f"fake: unknown query [{kind}]")


@pytest.fixture
async def fake_es() -> AsyncIterator[FakeElasticsearch]:
    server = await FakeElasticsearch().start()
    try:
        yield server
    finally:
        await server.stop()
