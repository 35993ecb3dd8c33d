"""Retrieval inside the pipeline: after stage I, find the case's precedents and give each juror
its memory M_k.

The query is the dispute focus, both parties' claims and the order metadata. Top-H historical
cases and a pool of guidelines come from the category (guidelines marked 'all' included); when
the category has too few guidelines (cold start), cross-category ones are added and coverage is
marked low. Each juror's memory is the top-K of the pool by Φ(P_k, N_j), the cosine between the
juror's persona and the guideline, so jurors differ in focus but draw on the same pool. Each
historical case carries its cosine with the query, for the verdict's consistency check.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import numpy as np
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from ..config import PrecedentSettings
from ..observability.metrics import PRECEDENT_COLD_STARTS, PRECEDENT_FALLBACKS
from ..schemas import DisputeCase, Focus, PrecedentRef, Precedents
from ..schemas.personas import Persona
from ..schemas.reasoning import Coverage
from .embeddings import CachedVectors, Embedder
from .index import PrecedentIndex, query_form
from .models import Hit, PrecedentError

log = logging.getLogger("cyberjurors.precedents")
RETRYABLE = {"unreachable", "rate_limited", "timeout", "server_error"}


def query_text(case: DisputeCase, focus: Focus | None) -> str:
    """Without stage I (ablations), the parties' first messages stand in for the focus and claims."""
    d = case.metadata
    claims = (
        [focus.focus, *focus.buyer_claims, *focus.seller_claims]
        if focus
        else [i.text or "" for p in ("buyer", "seller") for _, i in case.texts(p)[:2]]
    )
    return " ".join([*claims, d.product, d.dispute_reason, d.requested_remedy])


def to_ref(hit: Hit) -> PrecedentRef:
    doc = hit.document
    if doc.guideline is not None:
        g = doc.guideline
        return PrecedentRef(
            id=g.id,
            kind="guideline",
            version=g.version,
            text=g.rule,
            category=g.category,
            favours=g.favours,
            confidence=g.confidence,
            score=hit.score,
            rank=hit.rank,
            sources=hit.sources,
        )
    case = doc.case
    return PrecedentRef(
        id=case.case_id if case else doc.id,
        kind="case",
        text=doc.text,
        category=doc.category,
        favours=case.winner if case else None,
        score=hit.score,
        rank=hit.rank,
        sources=hit.sources,
    )


class PersonaMatcher:
    """Φ(P_k, N_j): cosine between each juror's persona and each guideline, both embedded. The
    guidelines' (and historical cases') vectors come from ``texts``, the cache every matcher of the
    worker shares, so a rule is encoded once however many cases and panels draw on it."""

    def __init__(self, personas: Sequence[Persona], embedder: Embedder, texts: CachedVectors | None = None):
        self.embedder = embedder
        self.texts = texts if texts is not None else CachedVectors(embedder, 10_000)
        self.vectors = embedder.encode([p.card() for p in personas])

    def memory(self, guidelines: list[PrecedentRef], k: int, rules: np.ndarray | None = None) -> dict[int, list[str]]:
        """Each juror's top-``k`` of ``guidelines``; ``rules``, their vectors, when the caller has them."""
        if not guidelines or k == 0:
            return {}
        rules = self.texts([g.text for g in guidelines]) if rules is None else rules
        match = self.vectors @ rules.T  # jurors x guidelines
        top = np.argsort(-match, axis=1, kind="stable")[:, :k]
        return {juror: [guidelines[j].id for j in row] for juror, row in enumerate(top.tolist())}

    def similar(
        self, query: np.ndarray, refs: list[PrecedentRef], texts: np.ndarray | None = None
    ) -> list[PrecedentRef]:
        """The historical cases with their cosine to the query's vector, what the verdict's consistency
        check reads (``jury/consistency.py``): the fused rank says which came first, not how near they
        are. ``texts``: their vectors, when the caller has them."""
        if not refs:
            return refs
        texts = self.texts([r.text for r in refs]) if texts is None else texts
        cosines = texts @ query  # rows L2-normalised: a dot is the cosine
        return [r.model_copy(update={"similarity": round(float(c), 4)}) for r, c in zip(refs, cosines, strict=True)]


def failed(case_id: str, err: PrecedentError) -> Precedents:
    log.warning("case %s: going on without precedents, retrieval failed (%s): %s", case_id, err.kind, err)
    PRECEDENT_FALLBACKS.labels(err.kind).inc()
    return Precedents(coverage="none", problem=f"precedent retrieval failed ({err.kind}): {err}"[:500])


async def retrieve(
    case: DisputeCase, focus: Focus | None, index: PrecedentIndex, matcher: PersonaMatcher, settings: PrecedentSettings
) -> Precedents:
    """Never raises for a retrieval failure: retries the retryable ones, then returns coverage
    'none' with the problem stated, so the case goes on without precedents."""
    # the query is embedded once, here, for every search and for the cosines below
    query, category = query_form(query_text(case, focus)), case.metadata.category
    vector = await asyncio.to_thread(matcher.embedder.encode, [query])
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(settings.precedent_retries + 1),
            wait=wait_exponential(multiplier=0.2, max=2.0),
            retry=retry_if_exception(lambda e: isinstance(e, PrecedentError) and e.kind in RETRYABLE),
            reraise=True,
        ):
            with attempt:
                cases, pool, coverage = await _search(index, query, vector[0], category, settings)
    except PrecedentError as err:
        return failed(case.case_id, err)
    if coverage == "low":
        PRECEDENT_COLD_STARTS.labels(category).inc()
    guidelines, near = [to_ref(h) for h in pool], [to_ref(h) for h in cases]
    if not guidelines and not cases:
        return Precedents(coverage="none", problem="the precedent base has nothing for this case")
    # the rules' and summaries' vectors: as the store holds them, else cached, else encoded in one
    # batch (CPU work, off the loop)
    stored = {h.document.text: np.frombuffer(h.vector, "<f4") for h in (*pool, *cases) if h.vector is not None}
    vectors = await asyncio.to_thread(matcher.texts, [r.text for r in (*guidelines, *near)], stored)
    memory = matcher.memory(guidelines, settings.memory_k, vectors[: len(guidelines)])
    near = matcher.similar(vector[0], near, vectors[len(guidelines) :])
    return Precedents(cases=near, guidelines=guidelines, memory=memory, coverage=coverage)


async def _search(
    index: PrecedentIndex, query: str, vector: np.ndarray, category: str, settings: PrecedentSettings
) -> tuple[list[Hit], list[Hit], Coverage]:
    """The top-H cases and the guideline pool, widened across categories when the category has too few."""
    cases = (
        await index.search(query, kind="case", category=category, k=settings.precedent_cases_k, vector=vector)
        if settings.precedent_cases_k
        else []
    )
    pool = await index.search(query, kind="guideline", category=category, k=settings.precedent_pool_k, vector=vector)
    if sum(h.document.category == category for h in pool) >= settings.precedent_min_in_category:
        return cases, pool, "high"
    wider = await index.search(query, kind="guideline", k=settings.precedent_pool_k, vector=vector)
    seen = {h.id for h in pool}
    return cases, pool + [h for h in wider if h.id not in seen][: settings.precedent_pool_k - len(pool)], "low"
