"""Opening the configured precedent index (embedded by default, or Elasticsearch)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence

from ..config import PrecedentSettings
from ..observability.metrics import PRECEDENT_RETRIEVAL
from ..schemas import DisputeCase, Focus, PrecedentRef, Precedents
from ..schemas.personas import Persona
from .embeddings import CachedVectors, Embedder, load_embedder
from .index import PrecedentIndex
from .models import PrecedentError
from .retrieval import PersonaMatcher, failed, retrieve

log = logging.getLogger("cyberjurors.precedents")


def open_embedder(settings: PrecedentSettings) -> Embedder:
    return load_embedder(
        settings.embedding.model,
        settings.embedding.batch_size,
        settings.embedding.model_dir,
        settings.embedding.model_sha256,
        settings.embedding.runtime,
        settings.embedding.threads,
    )


async def open_index(
    settings: PrecedentSettings, embedder: Embedder | None = None, create: bool = True
) -> PrecedentIndex:
    """The index named by ``precedent_backend``; raises PrecedentError (index_missing,
    model_mismatch, corrupt, unreachable, ...) with a message that says what to do."""
    embedder = embedder or open_embedder(settings)
    if settings.precedent_backend == "elasticsearch":
        from .elastic import ElasticsearchIndex

        index = ElasticsearchIndex.from_settings(settings, embedder)
        try:
            await index.ensure(create=create)
        except BaseException:
            await index.close()
            raise
        return index
    from .embedded import EmbeddedIndex

    return await EmbeddedIndex.open(settings.precedent_dir, embedder, create=create)


async def open_base(settings: PrecedentSettings, create: bool = True) -> tuple[PrecedentIndex, Embedder]:
    """The embedding model (loaded in a thread: it takes seconds) and the index opened with it."""
    embedder = await asyncio.to_thread(open_embedder, settings)
    return await open_index(settings, embedder, create=create), embedder


@contextlib.asynccontextmanager
async def opened_base(
    settings: PrecedentSettings, create: bool = True
) -> AsyncIterator[tuple[PrecedentIndex, Embedder]]:
    """``async with opened_base(settings) as (index, embedder):`` the configured index for the
    block, closed after it however the block is left."""
    index, embedder = await open_base(settings, create)
    try:
        yield index, embedder
    finally:
        await index.close()


class PrecedentBase:
    """The worker's handle on B: opens the index and the persona matcher once (loading the
    embedding model takes seconds, so ``open`` is called at worker start), then retrieves per case."""

    def __init__(self, settings: PrecedentSettings, personas: Sequence[Persona]):
        self.settings = settings
        self.personas = list(personas)
        self._opened: tuple[PrecedentIndex, PersonaMatcher] | None = None
        self._lock = asyncio.Lock()
        self._panels: dict[tuple[str, ...], PersonaMatcher] = {}  # the persona matchers of other panels

    @property
    def enabled(self) -> bool:
        return self.settings.precedent_backend != "none"

    @property
    def is_open(self) -> bool:
        return self._opened is not None

    async def open(self) -> tuple[PrecedentIndex, PersonaMatcher]:
        async with self._lock:
            if self._opened is None:
                index, embedder = await open_base(self.settings)
                # one cache for every panel's matcher: a rule is encoded once, whichever jury reads it
                self._texts = CachedVectors(embedder, self.settings.embedding.cache_size)
                matcher = await asyncio.to_thread(PersonaMatcher, self.personas, embedder, self._texts)
                self._opened = (index, matcher)
            return self._opened

    async def seat(self, personas: Sequence[Persona]) -> None:
        """The jury's personas changed (a persona replaced after qualification): memories follow them."""
        async with self._lock:
            if [p.card() for p in personas] == [p.card() for p in self.personas]:
                return
            self.personas = list(personas)
            if self._opened is not None:
                index, matcher = self._opened
                self._opened = (
                    index,
                    await asyncio.to_thread(PersonaMatcher, self.personas, matcher.embedder, matcher.texts),
                )

    async def retrieve(self, case: DisputeCase, focus: Focus | None) -> Precedents:
        if not self.enabled:
            return Precedents(coverage="none")
        try:
            index, matcher = await self.open()
        except PrecedentError as err:  # e.g. model_mismatch: stated on every verdict until fixed
            return failed(case.case_id, err)
        started = time.perf_counter()  # the search itself, not the one-off opening above
        try:
            return await retrieve(case, focus, index, matcher, self.settings)
        finally:
            PRECEDENT_RETRIEVAL.observe(time.perf_counter() - started)

    async def memory(self, guidelines: list[PrecedentRef], personas: Sequence[Persona]) -> dict[int, list[str]]:
        """M_k for another panel than the one the base was opened for (an appeal's): the top-K of
        ``guidelines`` by match with each of ``personas``. Empty when the base cannot be opened now."""
        if not self.enabled or not guidelines:
            return {}
        try:
            _, matcher = await self.open()
        except PrecedentError as err:
            log.warning("no memories for the panel: the precedent base could not be opened (%s)", err.kind)
            return {}
        key = tuple(p.card() for p in personas)
        if key not in self._panels:
            if len(self._panels) >= 4:  # one or two panels in practice; never grows with the cases
                self._panels.clear()
            self._panels[key] = await asyncio.to_thread(PersonaMatcher, personas, matcher.embedder, matcher.texts)
        return await asyncio.to_thread(self._panels[key].memory, guidelines, self.settings.memory_k)

    async def close(self) -> None:
        if self._opened is not None:
            await self._opened[0].close()
            self._opened = None
