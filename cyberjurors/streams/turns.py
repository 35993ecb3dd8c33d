"""One case at a time on this worker: a lock per case id, held while a handler works on the case,
and dropped when no one holds or waits for it (so the map is bounded by the cases in flight)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class CaseTurns:
    def __init__(self) -> None:
        self.locks: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # case_id -> its lock, who holds or waits

    @contextlib.asynccontextmanager
    async def one_at_a_time(self, case_id: str) -> AsyncIterator[None]:
        entry = self.locks.setdefault(case_id, (asyncio.Lock(), [0]))
        entry[1][0] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1][0] -= 1
            if not entry[1][0]:
                del self.locks[case_id]
