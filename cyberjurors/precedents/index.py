"""The ``PrecedentIndex`` protocol, reciprocal rank fusion, and query checks shared by backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from .embeddings import Embedder
from .models import ANY_CATEGORY, CATEGORIES, KINDS, Document, Hit, Kind, PrecedentError, SearchMode, UpsertReport

RRF_K = 60  # the constant from Cormack et al. (2009), also Elasticsearch's default rank_constant
MAX_QUERY_CHARS = 4000
MIN_CANDIDATES = 50  # per retriever in hybrid mode: max(4k, MIN_CANDIDATES)
ENCODE_CHUNK = 256  # texts per embedder call at upsert (failures are reported per chunk)


class PrecedentIndex(Protocol):
    """H and N behind one interface. Implementations: ``EmbeddedIndex`` (default, on disk) and
    ``ElasticsearchIndex``, both subclassing it for ``search`` and ``count``: the query checked
    here, then the store's ``ranked`` and ``counted``. ``embedding_model`` is the name of the model
    whose vectors the index holds (``embedder``'s); opening an index built with another model raises
    ``PrecedentError('model_mismatch')``."""

    embedding_model: str
    embedder: Embedder

    async def upsert(self, documents: Sequence[Document]) -> UpsertReport: ...

    async def search(
        self,
        query: str,
        *,
        kind: Kind,
        category: str | None = None,
        k: int = 10,
        mode: SearchMode = "hybrid",
        vector: np.ndarray | None = None,
    ) -> list[Hit]:
        """``vector``: the query's embedding by this index's model, when the caller has it (a case's
        retrieval embeds its query once for every search); else the index embeds ``query``."""
        text = check_search(query, kind, category, k, mode)
        if mode == "bm25":
            vector = None
        elif vector is not None:
            vector = given_vector(vector, self.embedder.dims)
        return await self.ranked(text, kind, category, k, mode, vector)

    async def ranked(
        self, text: str, kind: Kind, category: str | None, k: int, mode: SearchMode, vector: np.ndarray | None
    ) -> list[Hit]:
        """``search`` once its query is checked: ``text`` is the query's searched form (``query_form``);
        ``vector`` the caller's embedding of it, checked, or None: the store embeds ``text`` unless
        ``mode`` is bm25."""
        ...

    async def get(self, ids: Sequence[str]) -> list[Document]: ...

    async def delete(self, ids: Sequence[str]) -> int: ...

    async def count(self, kind: Kind, category: str | None = None) -> int:
        """Documents a search with the same kind and category could return: the category's
        (guidelines marked 'all' included for guidelines), retired guidelines left out. An unknown
        kind or category is an error, as in a search."""
        check_count(kind, category)
        return await self.counted(kind, category)

    async def counted(self, kind: Kind, category: str | None) -> int:
        """``count`` once its kind and category are checked."""
        ...

    async def close(self) -> None: ...


def query_form(query: str) -> str:
    """The text a query is searched (and embedded) as: whitespace collapsed, cut at MAX_QUERY_CHARS
    (the head of a case summary carries the product and dispute)."""
    return " ".join(query.split())[:MAX_QUERY_CHARS]


def check_query(query: str, category: str | None, k: int) -> str:
    """Empty text is an error; text past MAX_QUERY_CHARS is cut (``query_form``); an unknown
    category is an error, not an empty result."""
    text = query_form(query)
    if not text:
        raise PrecedentError("bad_query", "the query text is empty")
    if category is not None and category not in (*CATEGORIES, ANY_CATEGORY):
        raise PrecedentError(
            "unknown_category",
            f"unknown category {category!r}; expected one of {', '.join((*CATEGORIES, ANY_CATEGORY))}",
        )
    if k < 1:
        raise PrecedentError("bad_query", f"k must be at least 1, got {k}")
    return text


def check_kind(kind: Kind) -> None:
    if kind not in KINDS:
        raise PrecedentError("bad_query", f"unknown kind {kind!r}; expected case or guideline")


def check_search(query: str, kind: Kind, category: str | None, k: int, mode: SearchMode) -> str:
    """A search's query (``check_query``), kind and mode checked; the query's searched form."""
    text = check_query(query, category, k)
    check_kind(kind)
    if mode not in ("hybrid", "bm25", "vector"):
        raise PrecedentError("bad_query", f"unknown search mode {mode!r}; expected hybrid, bm25 or vector")
    return text


def check_count(kind: Kind, category: str | None) -> None:
    """A count's kind and category, checked as a search's are."""
    check_kind(kind)
    if category is not None:
        check_query("count", category, 1)


def given_vector(vector: np.ndarray, dims: int) -> np.ndarray:
    """A query vector the caller embedded, checked: one row of this index's dimensions, finite."""
    out = np.asarray(vector, dtype=np.float32).reshape(-1)
    if out.shape != (dims,) or not np.isfinite(out).all():
        raise PrecedentError(
            "bad_query", f"the query vector has shape {np.shape(vector)}, not ({dims},), or is not finite"
        )
    return out


def category_filter(category: str | None, kind: Kind) -> tuple[str, ...] | None:
    """Which stored categories a category filter admits: guidelines marked 'all' apply everywhere."""
    if category is None:
        return None
    return (category, ANY_CATEGORY) if kind == "guideline" else (category,)


def fuse(rankings: dict[str, list[str]], k: int = RRF_K) -> list[tuple[str, float, dict[str, int]]]:
    """Reciprocal rank fusion: score(d) = sum over retrievers of 1 / (k + rank). Returns
    (id, score, {retriever: rank}) best first; ties broken by id so results are stable."""
    scores: dict[str, float] = {}
    sources: dict[str, dict[str, int]] = {}
    for retriever, ids in rankings.items():
        for rank, doc_id in enumerate(ids, 1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
            sources.setdefault(doc_id, {})[retriever] = rank
    ordered = sorted(scores, key=lambda d: (-scores[d], d))
    return [(d, scores[d], sources[d]) for d in ordered]


def candidates(k: int) -> int:
    """How deep each retriever looks in a hybrid search for the top ``k``: every store the same, so
    that a document one retriever ranks low has the same chance of being fused in whichever serves."""
    return max(4 * k, MIN_CANDIDATES)


def problem(doc: Document) -> str | None:
    """Why a store refuses a document at upsert, or None: what every store refuses alike."""
    if doc.category not in (*CATEGORIES, ANY_CATEGORY):
        return f"unknown category {doc.category!r}"
    if doc.kind == "case" and doc.category == ANY_CATEGORY:
        return "a case belongs to one category, not 'all'"
    if not doc.text.strip():
        return "empty text"
    return None


def embedding_failed(err: Exception) -> str:
    """The report's reason for each document of a chunk the embedding model failed on."""
    return f"embedding failed: {type(err).__name__}: {err}"[:300]
