"""The LLM port: one structured call, many backends.

A stage builds an ``LLMRequest`` (system text, the case prefix every juror shares, the
stage-specific prompt, and the structured task it was rendered from) and asks for a pydantic
output type. Backends return the parsed object and the usage of the call. ``GuardedLLM`` wraps
any backend with the limits every backend needs: a concurrency cap, an input-token rate limit,
and an append-only call log.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from aiolimiter import AsyncLimiter
from pydantic import BaseModel

from ..config import Role
from ..schemas import Usage

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    data: bytes
    media_type: str
    label: str = ""


Part = TextPart | ImagePart


@dataclass
class LLMRequest:
    role: Role
    model: str
    system: str
    shared: list[Part]
    """The per-case prefix, identical for every juror of a case: backends cache it."""
    prompt: list[Part]
    task: Any = None
    """The structured input the prompt was rendered from; read by the offline and scripted backends."""
    case_id: str = ""
    max_output_tokens: int = 2048

    def text(self) -> str:
        return "\n".join(p.text for p in [*self.shared, *self.prompt] if isinstance(p, TextPart))

    def images(self) -> list[ImagePart]:
        return [p for p in [*self.shared, *self.prompt] if isinstance(p, ImagePart)]


@dataclass
class LLMResult(Generic[T]):
    output: T
    usage: Usage
    model: str
    backend: str


class LLMError(RuntimeError):
    """A call failed after the backend's own retries; ``kind`` is a short bounded label."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class LLM(Protocol):
    backend: str

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]: ...


def estimate_tokens(request: LLMRequest) -> int:
    """Rough pre-call estimate for rate limiting (4 characters a token, ~1.5k per image)."""
    return len(request.system + request.text()) // 4 + 1500 * len(request.images()) + 1


@dataclass
class GuardedLLM:
    inner: LLM
    concurrency: int = 16
    tokens_per_minute: int | None = None
    call_log: Path | None = None
    _slots: asyncio.Semaphore = field(init=False)
    _rate: AsyncLimiter | None = field(init=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.concurrency)
        self._rate = AsyncLimiter(self.tokens_per_minute, 60) if self.tokens_per_minute else None

    @property
    def backend(self) -> str:
        return self.inner.backend

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        if self._rate is not None:
            await self._rate.acquire(min(estimate_tokens(request), self.tokens_per_minute or 1))
        async with self._slots:
            started = time.perf_counter()
            result = await self.inner.generate(request, output_type)
            elapsed = time.perf_counter() - started
        result.usage = result.usage.model_copy(update={"calls": 1, "latency_s": elapsed})
        if self.call_log is not None:
            self._log(request, result)
        return result

    def _log(self, request: LLMRequest, result: LLMResult[Any]) -> None:
        line = {
            "at": time.time(),
            "case_id": request.case_id,
            "role": request.role,
            "party": getattr(request.task, "party", None),
            "backend": result.backend,
            "model": result.model,
            **result.usage.model_dump(exclude={"calls"}),
        }
        with self.call_log.open("a", encoding="utf-8") as log:  # type: ignore[union-attr]
            log.write(json.dumps(line) + "\n")
