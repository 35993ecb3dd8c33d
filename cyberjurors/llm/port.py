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
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar, cast

from aiolimiter import AsyncLimiter
from pydantic import BaseModel

from ..config import Effort, LLMSettings, Role, Thinking
from ..config.catalog import facts
from ..errors import FINAL_LLM_KINDS, CyberJurorsError
from ..observability import metrics, tracing
from ..schemas import Usage
from . import waves
from .prices import Cost, PriceTable

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")
R2 = TypeVar("R2")


@dataclass(frozen=True)
class Span:
    """A stretch of a text part a prompt may lose to fit a model's context window
    (``llm/fitting.py``): a precedent to drop whole, or a party's text to clip."""

    start: int
    end: int
    kind: Literal["drop", "clip"]
    name: str
    """what a note on the verdict calls it: precedent g-12, evidence b2"""
    rank: int = 0
    """drop: spans of higher rank go first (a precedent's retrieval rank: the lowest-ranked first)"""


class Marked(str):
    """A rendered prompt text that knows its droppable and clippable spans. It is a ``str`` (every
    caller that reads text reads it unchanged); ``stage_request`` hands its spans on to the text part."""

    spans: tuple[Span, ...]

    def __new__(cls, text: str, spans: Sequence[Span] = ()) -> Marked:
        made = super().__new__(cls, text)
        made.spans = tuple(spans)
        return made


@dataclass(frozen=True)
class TextPart:
    text: str
    spans: tuple[Span, ...] = ()
    """what ``llm/fitting.py`` may drop or clip when the request does not fit the model's window"""


@dataclass(frozen=True)
class ImagePart:
    data: bytes
    media_type: str
    label: str = ""
    caption: str = ""
    """what a model that reads no images reads instead of the pixels, after the label: the party's
    caption of the item, quoted as evidence (set where the jury builds the part)"""
    text: str = ""
    """the text read in the image (``privacy.ocr``), its personal data masked: read with the caption
    by a model that reads no images (a video's frames carry their item's whole text, each alike)"""


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
    """What this call asks, after the shared prefix (and the caller's own part)."""
    task: Any = None
    """The structured input the prompt was rendered from; read by the offline and scripted backends."""
    case_id: str = ""
    max_output_tokens: int = 2048
    """Room for the structured answer itself."""
    thinking: Thinking = "auto"
    thinking_budget: int = 0
    """Tokens of max_tokens kept for thinking on top of the answer (see ``max_tokens``)."""
    effort: Effort | None = None
    cache_prefix: bool = True
    """Mark the end of ``shared`` as a prompt-cache breakpoint (``stage_request`` decides)."""
    cache_system: bool = False
    """Mark the end of the system prompt too: it is long enough to cache on its own (a juror's, with
    the verdict rules), so every case's calls of the role read it, not only those of one case."""
    cache_ttl: Literal["5m", "1h"] = "5m"
    own: list[Part] = field(default_factory=list)
    """Between the shared prefix and the prompt: the caller's own part, the same in each of its calls
    (a juror's persona and memory, every round of a case)."""
    cache_own: bool = False
    """Mark the end of ``own`` as a second breakpoint, so the caller's later calls read it too."""

    def __post_init__(self) -> None:
        # a model cannot cite, and a reader cannot trace, a picture that says nothing of where it came from
        if any(not image.label.strip() for image in self.images()):
            raise ValueError("every image sent to a model needs its evidence label")

    def parts(self) -> list[Part]:
        """Everything after the system prompt, in the order the model reads it."""
        return [*self.shared, *self.own, *self.prompt]

    def text(self) -> str:
        return "\n".join(p.text for p in self.parts() if isinstance(p, TextPart))

    def images(self) -> list[ImagePart]:
        return [p for p in self.parts() if isinstance(p, ImagePart)]

    def max_tokens(self, thinking_off: bool = False) -> int:
        """The output cap to send: a provider counts thinking toward it, so it keeps the thinking
        budget on top of the answer's room unless thinking is known to be off."""
        return self.max_output_tokens + (0 if thinking_off else self.thinking_budget)


def stage_request(
    role: Role,
    settings: LLMSettings,
    *,
    system: str,
    prompt: Sequence[str | Part],
    task: Any,
    case_id: str,
    shared: Sequence[str | Part] = (),
    juror: int | None = None,
    own: Sequence[str | Part] = (),
) -> LLMRequest:
    """The request a stage sends: the model the settings give this role (or this juror), the role's
    effort, thinking and output room, and a cache breakpoint only where the prefix can be cached;
    plain strings are taken as text parts. ``own`` (a juror's persona and memory) gets a breakpoint
    of its own where it pays (``cache_own``), and so does a system prompt that can be cached on its
    own (``cache_system``)."""
    model, call, shared_parts, own_parts = (
        settings.model_for(role, juror),
        settings.call_for(role),
        _parts(shared),
        _parts(own),
    )
    cache_prefix = settings.prompt_caching and can_cache(model, system, shared_parts)
    return LLMRequest(
        role=role,
        model=model,
        system=system,
        shared=shared_parts,
        prompt=_parts(prompt),
        task=task,
        case_id=case_id,
        max_output_tokens=call.max_output_tokens or 2048,
        thinking=call.thinking or "auto",
        thinking_budget=call.thinking_budget or 0,
        effort=call.effort,
        cache_ttl=settings.prompt_cache_ttl,
        cache_prefix=cache_prefix,
        cache_system=settings.prompt_caching and reaches_minimum(model, prefix_tokens(system, ())),
        own=own_parts,
        cache_own=cache_prefix and bool(own_parts) and settings.prompt_cache_ttl == "5m",
    )


# What a prefix may come to, in tokens, erring high: a breakpoint on a prefix below the provider's
# minimum costs nothing (it just does not cache), one wrongly left out costs every read. Newer
# Claude tokenizers count ~30% more tokens than the old 4 characters each; an image downscaled to
# max_image_side (768 px) is about 768 * 768 / 750 ~ 790 tokens.
CHARS_PER_TOKEN_LOW = 3
IMAGE_TOKENS_HIGH = 800


def prefix_tokens(system: str, shared: Sequence[Part]) -> int:
    """A generous estimate of a cached prefix's length: the system prompt and the shared parts."""
    text = system + "".join(p.text for p in shared if isinstance(p, TextPart))
    return len(text) // CHARS_PER_TOKEN_LOW + IMAGE_TOKENS_HIGH * sum(isinstance(p, ImagePart) for p in shared)


def can_cache(model: str, system: str, shared: Sequence[Part]) -> bool:
    """Whether a breakpoint after ``shared`` can cache anything: there is a prefix, and it may reach
    the model's minimum cacheable length (config/catalog.py; unknown models: assume it can)."""
    return bool(shared) and reaches_minimum(model, prefix_tokens(system, shared))


def reaches_minimum(model: str, tokens: int) -> bool:
    """Whether a prefix of about ``tokens`` may reach the model's minimum cacheable length
    (config/catalog.py; unknown models: assume it can)."""
    known = facts(model)
    return known is None or tokens >= known.min_cacheable_tokens


def _parts(items: Sequence[str | Part]) -> list[Part]:
    return [TextPart(i, getattr(i, "spans", ())) if isinstance(i, str) else i for i in items]


@dataclass
class LLMResult(Generic[T]):
    output: T
    usage: Usage
    model: str
    backend: str
    finish_reason: str | None = None
    """Why the model stopped, as the provider says (Anthropic's stop_reason, OpenAI's finish_reason)."""
    structured_output: str | None = None
    """How the structured answer was asked for, where a backend chooses (openai: json_schema,
    json_object_schema, tool or prompt: ``openai_structured_output``)."""


# a reply that failed our checks is kept in the error, and so in the dead letter's detail, up to this
MAX_RAW_REPLY = 1500


class LLMError(CyberJurorsError, RuntimeError):
    """A call failed after the backend's own retries; ``kind`` is a short bounded label
    (``errors.LLM_KINDS``). Replayable unless the kind is one the same input meets again
    (``errors.FINAL_LLM_KINDS``). ``usage``: what the provider billed for a reply it sent that failed
    our checks (cut at max_tokens, refused, not a valid answer); None when no reply came (connection,
    timeout, an HTTP error status). ``GuardedLLM`` counts it and adds its cost, as for an answer."""

    def __init__(self, kind: str, message: str, usage: Usage | None = None, raw: str | None = None):
        if raw:  # what the model said, for whoever reads the dead letter: bounded
            shown = raw if len(raw) <= MAX_RAW_REPLY else raw[:MAX_RAW_REPLY] + "…"
            message = f"{message} | the raw reply ({len(raw)} characters): {shown}"
        super().__init__(message, kind=kind)
        self.usage = usage
        self.raw = raw

    @property
    def replayable(self) -> bool:  # type: ignore[override]  # a class attribute on CyberJurorsError, read only here
        return self.kind not in FINAL_LLM_KINDS


class LLM(Protocol):
    @property
    def backend(self) -> str: ...  # read only: a router's or a guard's is derived from the backends it holds

    # A backend that answers every request with one stand-in (offline, scripted) may set
    # ``model_label`` to its name; metrics then label its calls with that, not the requested model.

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]: ...


async def gather_all(*calls: Coroutine[Any, Any, R]) -> list[R]:
    """Run calls concurrently; if one fails, cancel the rest (no paying for answers that will be
    thrown away) and raise that first error itself, not an ExceptionGroup. Inside a run in waves
    (``waves.py``) each call is a flow of its own while it runs."""
    tasks: list[asyncio.Task[R]] = []
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(call) for call in calls]
            if (run := waves.current()) is not None:
                run.fork(tasks)
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None
    return [t.result() for t in tasks]


async def gather_pair(first: Coroutine[Any, Any, R], second: Coroutine[Any, Any, R2]) -> tuple[R, R2]:
    """``gather_all`` of two calls that answer different types, each answer typed."""
    a, b = await gather_all(first, second)  # in the order given
    return cast(R, a), cast(R2, b)


def estimate_tokens(request: LLMRequest) -> int:
    """Rough pre-call estimate for rate limiting (4 characters a token, ~1.5k per image)."""
    return len(request.system + request.text()) // 4 + 1500 * len(request.images()) + 1


@dataclass
class GuardedLLM:
    inner: LLM
    concurrency: int = 16
    tokens_per_minute: int | None = None
    call_log: Path | None = None
    prices: PriceTable | None = None
    batch: bool = False
    """the inner backend answers through the Message Batches API: calls are priced at its share"""
    _slots: asyncio.Semaphore = field(init=False)
    _rate: AsyncLimiter | None = field(init=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.concurrency)
        self._rate = AsyncLimiter(self.tokens_per_minute, 60) if self.tokens_per_minute else None

    @property
    def backend(self) -> str:
        return self.inner.backend

    async def aclose(self) -> None:
        """Close the backend's HTTP client inside the event loop that opened it: left to the garbage
        collector after ``asyncio.run`` returns, it fails on the closed loop with a traceback."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

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
        arrived = time.perf_counter()
        if self._rate is not None:
            await self._rate.acquire(min(estimate_tokens(request), self.tokens_per_minute or 1))
        backend, model = self.labels(request)
        async with self._slots:
            started = time.perf_counter()
            with tracing.model_call(backend, request, queued_s=started - arrived) as span:
                try:
                    result = await self.inner.generate(request, output_type)
                except LLMError as err:
                    elapsed = time.perf_counter() - started
                    tracing.failed(span, err.kind)
                    if err.usage is not None:  # a reply came and was billed: its tokens and cost count as an answer's
                        usage = err.usage.model_copy(update={"calls": 1, "latency_s": elapsed})
                        cost = self._cost(backend, model, usage)
                        metrics.record_llm_spend(backend, model, request.role, usage, cost.usd, cost.source)
                        err.usage = cost.on(usage)
                    self._log(request, elapsed, backend, error=err.kind, usage=err.usage)
                    metrics.record_llm_error(backend, model, request.role, elapsed, err.kind)
                    raise
                except Exception:  # a backend bug: still a call that failed (cancellation is not)
                    elapsed = time.perf_counter() - started
                    tracing.failed(span, "unexpected")
                    self._log(request, elapsed, backend, error="unexpected")
                    metrics.record_llm_error(backend, model, request.role, elapsed, "unexpected")
                    raise
                tracing.answered(span, result)
            elapsed = time.perf_counter() - started
        usage = result.usage.model_copy(update={"calls": 1, "latency_s": elapsed})
        cost = self._cost(backend, model, usage)
        metrics.record_llm_call(backend, model, request.role, elapsed, usage, cost.usd, cost.source)
        result.usage = cost.on(usage)  # what the per-case budget adds up, with where its prices came from
        self._log(request, elapsed, backend, result=result, usage=result.usage)
        return result

    def _cost(self, backend: str, model: str, usage: Usage) -> Cost:
        """A call's cost, at the Message Batches share when ``batch``, and its price's source."""
        cost = (self.prices or PriceTable()).quote(backend, model, usage, batch=self.batch)
        if cost.usd is None and self.prices is not None:
            self.prices.warn_once(backend, model)
        return cost

    def _log(
        self,
        request: LLMRequest,
        elapsed: float,
        backend: str,
        result: LLMResult[Any] | None = None,
        error: str | None = None,
        usage: Usage | None = None,
    ) -> None:
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
            **({"batch": True} if self.batch else {}),
            **({"structured_output": result.structured_output} if result and result.structured_output else {}),
            **(usage.model_dump(exclude={"calls"}) if usage is not None else {"latency_s": elapsed}),
        }
        with self.call_log.open("a", encoding="utf-8") as log:
            log.write(json.dumps(line) + "\n")
