"""The LLM port: one structured call, many backends.

A stage builds an ``LLMRequest`` (system text, the case prefix every juror shares, the
stage-specific prompt, and the structured task it was rendered from) and asks for a pydantic
output type. Backends return the parsed object and the usage of the call. ``GuardedLLM`` wraps
any backend with the limits every backend needs: a concurrency cap, an input-token rate limit,
and an append-only call log; it also records every call's metrics (calls, errors, latency,
tokens, estimated cost), so no backend has to.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from aiolimiter import AsyncLimiter
from pydantic import BaseModel

from . import metrics
from .config import Role, Settings
from .errors import FINAL_LLM_KINDS, CyberJurorsError
from .schemas import Usage

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    data: bytes
    media_type: str
    label: str = ""


Part = TextPart | ImagePart


def with_labels(parts: list[Part]) -> list[Part]:
    """Each image preceded by its label as text ("evidence s2 (seller, video) frame 7 at 3.50s"), so
    the model can cite it."""
    out: list[Part] = []
    for part in parts:
        if isinstance(part, ImagePart):
            out.append(TextPart(part.label))
        out.append(part)
    return out


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

    def __post_init__(self) -> None:
        # a model cannot cite, and a reader cannot trace, a picture that says nothing of where it came from
        if any(not image.label.strip() for image in self.images()):
            raise ValueError("every image sent to a model needs its evidence label")

    def text(self) -> str:
        return "\n".join(p.text for p in [*self.shared, *self.prompt] if isinstance(p, TextPart))

    def images(self) -> list[ImagePart]:
        return [p for p in [*self.shared, *self.prompt] if isinstance(p, ImagePart)]


def stage_request(role: Role, settings: Settings, *, system: str, prompt: Sequence[str | Part], task: Any,
                  case_id: str, shared: Sequence[str | Part] = (), juror: int | None = None) -> LLMRequest:
    """The request a stage sends: the model the settings give this role (or this juror) and their
    output cap, with plain strings taken as text parts."""
    return LLMRequest(role=role, model=settings.model_for(role, juror), system=system, shared=_parts(shared),
                      prompt=_parts(prompt), task=task, case_id=case_id, max_output_tokens=settings.max_output_tokens)


def _parts(items: Sequence[str | Part]) -> list[Part]:
    return [TextPart(i) if isinstance(i, str) else i for i in items]


@dataclass
class LLMResult(Generic[T]):
    output: T
    usage: Usage
    model: str
    backend: str


class LLMError(CyberJurorsError, RuntimeError):
    """A call failed after the backend's own retries; ``kind`` is a short bounded label
    (``errors.LLM_KINDS``). Replayable unless the kind is one the same input meets again
    (``errors.FINAL_LLM_KINDS``)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message, kind=kind)

    @property
    def replayable(self) -> bool:  # type: ignore[override]
        return self.kind not in FINAL_LLM_KINDS


class LLM(Protocol):
    backend: str
    # A backend that answers every request with one stand-in (offline, scripted) may set
    # ``model_label`` to its name; metrics then label its calls with that, not the requested model.

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]: ...


async def gather_all(*calls: Awaitable[R]) -> list[R]:
    """Run calls concurrently; if one fails, cancel the rest (no paying for answers that will be
    thrown away) and raise that first error itself, not an ExceptionGroup."""
    tasks: list[asyncio.Task[R]] = []
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]  # type: ignore[arg-type]
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None
    return [t.result() for t in tasks]


def estimate_tokens(request: LLMRequest) -> int:
    """Rough pre-call estimate for rate limiting (4 characters a token, ~1.5k per image)."""
    return len(request.system + request.text()) // 4 + 1500 * len(request.images()) + 1


@dataclass
class GuardedLLM:
    inner: LLM
    concurrency: int = 16
    tokens_per_minute: int | None = None
    call_log: Path | None = None
    prices: metrics.PriceTable | None = None
    _slots: asyncio.Semaphore = field(init=False)
    _rate: AsyncLimiter | None = field(init=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.concurrency)
        self._rate = AsyncLimiter(self.tokens_per_minute, 60) if self.tokens_per_minute else None

    @property
    def backend(self) -> str:
        return self.inner.backend

    def model_label(self, request: LLMRequest) -> str:
        """The model a call is labelled with in metrics: the one requested, the same for answered
        and failed calls (a provider may answer with a dated name for an alias)."""
        return self.labels(request)[1]

    def labels(self, request: LLMRequest) -> tuple[str, str]:
        """(backend, model) for a call's metrics and log line; a backend that routes each call to
        another (``backends.routed``) says which one this call goes to."""
        routed = getattr(self.inner, "labels", None)
        if routed is not None:
            return routed(request)
        return self.backend, getattr(self.inner, "model_label", None) or request.model

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        if self._rate is not None:
            await self._rate.acquire(min(estimate_tokens(request), self.tokens_per_minute or 1))
        backend, model = self.labels(request)
        async with self._slots:
            started = time.perf_counter()
            try:
                result = await self.inner.generate(request, output_type)
            except LLMError as err:
                elapsed = time.perf_counter() - started
                self._log(request, elapsed, backend, error=err.kind)
                metrics.record_llm_error(backend, model, request.role, elapsed, err.kind)
                raise
            except Exception:  # a backend bug: still a call that failed (cancellation is not)
                elapsed = time.perf_counter() - started
                self._log(request, elapsed, backend, error="unexpected")
                metrics.record_llm_error(backend, model, request.role, elapsed, "unexpected")
                raise
            elapsed = time.perf_counter() - started
        usage = result.usage.model_copy(update={"calls": 1, "latency_s": elapsed})
        cost = metrics.record_llm_call(backend, model, request.role, elapsed, usage, self.prices)
        result.usage = usage.model_copy(update={"cost_usd": cost})  # what the per-case budget adds up
        self._log(request, elapsed, backend, result=result)
        return result

    def _log(self, request: LLMRequest, elapsed: float, backend: str, result: LLMResult[Any] | None = None,
             error: str | None = None) -> None:
        if self.call_log is None:
            return
        line = {
            "at": time.time(),
            "case_id": request.case_id,
            "role": request.role,
            "party": getattr(request.task, "party", None),
            "backend": backend,
            "model": result.model if result else request.model,
            "error": error,
            **(result.usage.model_dump(exclude={"calls"}) if result else {"latency_s": elapsed}),
        }
        with self.call_log.open("a", encoding="utf-8") as log:  # type: ignore[union-attr]
            log.write(json.dumps(line) + "\n")
