"""The ``openai`` backend: any OpenAI-compatible chat completions endpoint (vLLM, llama.cpp's
``llama-server``, llama-cpp-python's server, Ollama, LM Studio, OpenAI) through the official
``openai`` SDK.

The system prompt is a system message; the user message holds the shared case prefix first, then
the caller's own part and the stage's prompt, so servers with automatic prefix caching (vLLM,
llama.cpp) reuse the prefix across a role's calls. The user message is one string when all its
parts are text (text-only chat templates join contents as strings); it is a list of parts only
when an image is in it, each image an ``image_url`` part with a ``data:`` URL after its label.

What differs per server is learnt per (base URL, model) (``openai_server.py``): how it takes a
structured answer (``openai_structured_output``: ``json_schema``, ``json_object_schema``, ``tool``,
``prompt``, or ``auto``, which tries them in that order and moves on only on a refusal that names
the request's shape; ``openai_modes.py``), whether the model reads images (else every image goes as
its label and the party's caption: ``llm/fitting.captioned``), and its context window (each request
measured, by the server's tokenizer where it has one, and fitted by ``llm/fitting.fit`` when it
would not fit: never sent to be refused for its length). A refusal of images or of the length
teaches the backend and the call is made again, once each.

Every reply is validated against the output type whatever the mode; one that fails gets one
repair request quoting what was wrong, then fails as ``invalid_output`` with the raw reply kept.
Reasoning models (``openai_reasoning_models``) get ``max_completion_tokens`` with room for their
reasoning and ``reasoning_effort``; their reasoning tokens are counted as thinking. Thinking
``auto`` and ``adaptive`` both leave the reasoning to the model (it has no other mode); ``off``
sends the lowest effort the endpoint takes (``openai_reasoning_efforts``) and keeps no room for
reasoning only when that is "none"; ``budget`` and efforts the endpoint does not list are refused
when the settings load (``LLMSettings._check_openai_reasoning``). Other models get ``max_tokens``,
at most the model's output limit and half its window. Retries and timeouts are the SDK's own;
failures become ``LLMError`` with the same kinds as the ``anthropic`` backend. This SDK has no
middleware: a request event hook on its HTTP client reads the ``x-stainless-retry-count`` header
the SDK puts on every attempt, so ``cyberjurors_llm_retries_total`` counts its retries.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import openai
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionContentPartParam

from ...config import OPENAI_EFFORTS, LLMSettings, OpenAIEffort, reasons
from ...errors import CyberJurorsError
from ...observability import metrics
from ...schemas import Usage
from ..fitting import MIN_CLIPPED, Fitted, captioned, fit, has_images
from ..port import IMAGE_TOKENS_HIGH, ImagePart, LLMError, LLMRequest, LLMResult, Part, T, TextPart, with_labels
from .anthropic import status_kind
from .openai_modes import Unusable, answer_text, parsed, prompt_rule, repair_messages, request_shape, schema_of
from .openai_server import MODES, Mode, ServedModel, Servers, refusal_of, window_in

if TYPE_CHECKING:
    import httpx2  # the SDK's HTTP client library


def content_parts(parts: list[Part]) -> list[ChatCompletionContentPartParam]:
    return [
        {"type": "text", "text": part.text}
        if isinstance(part, TextPart)
        else {
            "type": "image_url",
            "image_url": {"url": f"data:{part.media_type};base64,{base64.b64encode(part.data).decode('ascii')}"},
        }
        for part in with_labels(parts)
    ]


def usage_of(usage: CompletionUsage | None) -> Usage:
    """``prompt_tokens`` includes cached tokens; ``Usage.input_tokens`` counts the uncached ones.
    ``completion_tokens`` includes reasoning tokens, as Anthropic's output tokens include thinking."""
    if usage is None:
        return Usage()
    details, completion = usage.prompt_tokens_details, usage.completion_tokens_details
    cached = (details.cached_tokens or 0) if details else 0
    return Usage(
        input_tokens=usage.prompt_tokens - cached,
        output_tokens=usage.completion_tokens,
        cache_read_tokens=cached,
        thinking_tokens=(completion.reasoning_tokens or 0) if completion else 0,
    )


def user_content(parts: list[Part]) -> str | list[ChatCompletionContentPartParam]:
    """One string when every part is text (what text-only chat templates take); parts only with an image."""
    if not has_images(parts):
        return "\n\n".join(p.text for p in parts if isinstance(p, TextPart))
    return content_parts(parts)


def output_limits(
    request: LLMRequest, reasoning: bool, efforts: Sequence[OpenAIEffort] = ("low", "medium", "high")
) -> dict[str, object]:
    """A reasoning model counts its reasoning toward ``max_completion_tokens`` (it refuses
    ``max_tokens``): room for the thinking budget and the answer, and the role's effort as
    ``reasoning_effort``. Other models get ``max_tokens`` for the answer alone, as servers of every
    kind (vLLM, llama.cpp, Ollama) take it: a local model's context may have no room for more.

    Thinking off: the lowest of the efforts the endpoint takes; only "none" stops the reasoning, so
    below that the budget stays, or the little reasoning minimal or low still does could cut the answer."""
    if not reasoning:
        return {"max_tokens": request.max_output_tokens}
    if request.thinking == "off":
        lowest = min(efforts, key=OPENAI_EFFORTS.index)
        return {"max_completion_tokens": request.max_tokens(thinking_off=lowest == "none"), "reasoning_effort": lowest}
    limits: dict[str, object] = {"max_completion_tokens": request.max_tokens()}
    if request.effort is not None:
        limits["reasoning_effort"] = request.effort
    return limits


def cut_off(completion: ChatCompletion, role: str, limits: dict[str, object]) -> str:
    """Why a reply was cut, with what to change (as the anthropic backend's ``stopped``)."""
    usage = completion.usage
    details = usage.completion_tokens_details if usage else None
    spent = (details.reasoning_tokens or 0) if details else 0
    cap = "max_completion_tokens" if "max_completion_tokens" in limits else "max_tokens"
    if not spent:
        return f"openai: finish_reason length at {cap} {limits[cap]}: raise {role}'s max_output_tokens (llm_roles)"
    text = f"openai: finish_reason length after {spent} of {limits[cap]} tokens ({cap}) spent reasoning: "
    if cap == "max_tokens":  # a model that reasons but is not listed gets no room kept for its reasoning
        return text + f"list the model in openai_reasoning_models, or raise {role}'s max_output_tokens (llm_roles)"
    return text + f"raise {role}'s thinking_budget or max_output_tokens, or lower its effort (llm_roles)"


# the model of the call in progress, for the retry hook (the hook sees only the HTTP request)
_calling: ContextVar[str] = ContextVar("openai_calling_model", default="")


async def count_retries(request: httpx2.Request) -> None:
    """httpx request hook: the SDK numbers its attempts in ``x-stainless-retry-count``; any
    attempt after the first is a retry."""
    try:
        retries_taken = int(request.headers.get("x-stainless-retry-count", "0"))
    except ValueError:
        return
    metrics.record_retry("openai", _calling.get(), retries_taken)


# Measuring a prompt: the server's tokenizer where it has one, else this many bytes of UTF-8 a token
# (English runs about 4 characters a token, so this errs high; CJK text about 3 bytes a character, one
# token each: about right), plus the chat template's own tokens and, for a model that reads them,
# IMAGE_TOKENS_HIGH an image. A token is at least one byte, so a prompt whose bytes fit is never measured.
BYTES_PER_TOKEN = 3
TEMPLATE_TOKENS = 32  # role markers and turn separators of two messages and the assistant's opening
FIT_ATTEMPTS = 3
ANSWER_SHARE = 2  # an answer gets at most half the window: the case comes first


# the server's refusals the backend answers itself (another shape, captions, a smaller prompt); they
# never leave it, but stay under the package's one root
class ShapeRefused(CyberJurorsError):
    """The server refused the request's structured-output shape (its words in the detail)."""

    kind = "shape_refused"


class ImagesRefused(CyberJurorsError):
    """The server (or its model) takes no images."""

    kind = "images_refused"


class LengthRefused(CyberJurorsError):
    """The prompt is longer than the server's context window (``window`` when it says it)."""

    kind = "length_refused"

    def __init__(self, window: int | None, message: str):
        super().__init__(message)
        self.window = window


class OpenAICompatibleLLM:
    backend = "openai"

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        reasoning_models: Sequence[str] = (),
        reasoning_efforts: Sequence[OpenAIEffort] = ("low", "medium", "high"),
        settings: LLMSettings | None = None,
    ):
        self.client = client
        self.reasoning_models = tuple(reasoning_models)
        self.reasoning_efforts = tuple(reasoning_efforts)
        self.settings = settings or LLMSettings()
        self.structured_output = self.settings.openai_structured_output
        self.servers = Servers(client, self.settings, self.structured_output)

    @classmethod
    def from_settings(cls, settings: LLMSettings) -> OpenAICompatibleLLM:
        return cls(
            openai.AsyncOpenAI(
                base_url=settings.openai_base_url,
                api_key=settings.openai_api_key or "not-needed",  # local servers need none
                timeout=settings.llm_timeout_s,
                max_retries=settings.llm_max_retries,
                http_client=openai.DefaultAsyncHttpxClient(event_hooks={"request": [count_retries]}),
            ),
            settings.openai_reasoning_models,
            settings.openai_reasoning_efforts,
            settings,
        )

    def reasons(self, model: str) -> bool:
        return reasons(model, self.reasoning_models)

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        served = await self.servers.of(request.model)
        calling = _calling.set(request.model)
        try:
            if served.mode is None:  # the first call finds the mode; the model's others wait for it
                async with served.lock:
                    if served.mode is None:
                        return await self._learn(request, output_type, served, MODES)
            mode = served.mode
            try:
                return await self._ask(request, output_type, served, mode)
            except ShapeRefused as refused:
                if self.structured_output != "auto":
                    raise LLMError(
                        "bad_request",
                        f"openai: {served.key} refused structured output as {mode} ({refused}): set "
                        "openai_structured_output to auto, or to the way this server takes",
                    ) from refused
                async with served.lock:  # the server changed (restarted with other flags): learn again
                    rest = [m for m in MODES if m != mode]
                    return await self._learn(request, output_type, served, rest, [f"{mode}: {refused}"])
        finally:
            _calling.reset(calling)

    async def _learn(
        self,
        request: LLMRequest,
        output_type: type[T],
        served: ServedModel,
        modes: Sequence[Mode],
        refusals: list[str] | None = None,
    ) -> LLMResult[T]:
        """The first mode the server takes, remembered; each refusal of the shape tries the next."""
        refused = list(refusals or [])
        for mode in modes:
            try:
                result = await self._ask(request, output_type, served, mode)
            except ShapeRefused as refusal:
                refused.append(f"{mode}: {refusal}")
                continue
            served.learnt(mode)
            return result
        raise LLMError(
            "bad_request",
            f"openai: {served.key} refused every structured-output mode ({'; '.join(refused)}): it cannot give "
            "a structured answer as asked; check its version and flags (docs/guides/llm-backends.md)",
        )

    async def _ask(self, request: LLMRequest, output_type: type[T], served: ServedModel, mode: Mode) -> LLMResult[T]:
        """One call in ``mode``: fitted to the window, images as captions where they cannot be read,
        the reply checked and, if unusable, repaired once."""
        limits = self._limits(request, served)
        completion, usage, body, fitting = await self._sent(request, output_type, served, mode, limits)
        text: str | None = None
        try:
            text = self._answer(completion, mode, request, limits, usage)
            output = parsed(text, output_type)
        except Unusable as problem:
            repair = {**body, "messages": [*body["messages"], *repair_messages(mode, text, str(problem))]}
            try:
                completion, again = await self._send(repair, has_images(request.parts()))
            except (ShapeRefused, ImagesRefused, LengthRefused) as refused:
                raise LLMError("bad_request", f"openai: the repair request was refused: {refused}", usage) from refused
            usage += again
            text = None
            try:
                text = self._answer(completion, mode, request, limits, usage)
                output = parsed(text, output_type)
            except Unusable as still:
                raise LLMError(
                    "invalid_output",
                    f"openai: {still}, after one repair request quoting the first reply's fault ({problem})",
                    usage=usage,
                    raw=text if text is not None else _body_text(completion),
                ) from still
        return LLMResult(
            output,
            self._noted(usage, request, served, fitting),
            model=str(getattr(completion, "model", request.model)),
            backend=self.backend,
            finish_reason=completion.choices[0].finish_reason,
            structured_output=mode,
        )

    async def _sent(
        self, request: LLMRequest, output_type: type[T], served: ServedModel, mode: Mode, limits: dict[str, object]
    ) -> tuple[ChatCompletion, Usage, dict[str, Any], Fitted | None]:
        """The first reply, after what a refusal of images, of JSON mode or of the length teaches (once each)."""
        for _ in range(4):
            parts = captioned(request.parts()) if served.capabilities.images is False else request.parts()
            # once per attempt, for the fitting to count and the body to send: a JSON-mode refusal changes the shape
            rule = prompt_rule(schema_of(output_type)) if mode == "prompt" else ""
            shape = request_shape(mode, output_type, served.json_mode)
            parts, fitting = await self._fit(request, parts, served, limits, str(shape.get("tools", "")) + rule)
            body: dict[str, Any] = {
                "model": request.model,
                "messages": [
                    {"role": "system", "content": request.system + rule},
                    {"role": "user", "content": user_content(parts)},
                ],
                **limits,
                **shape,
            }
            try:
                completion, usage = await self._send(body, has_images(parts))
                return completion, usage, body, fitting
            except ImagesRefused:
                served.refused_images()
            except ShapeRefused:
                if mode != "prompt" or not served.json_mode:
                    raise
                served.json_mode = False  # the schema in the prompt still holds: ask without JSON mode
            except LengthRefused as refused:
                self._shrink(served, refused)
        raise LLMError("bad_request", f"openai: {served.key} kept refusing the {request.role}'s request")

    def _shrink(self, served: ServedModel, refused: LengthRefused) -> None:
        """The window a length refusal shows: the one it names when smaller than believed, else a
        quarter less (the server counts the prompt higher than it was measured)."""
        known = served.capabilities.context_window
        window = refused.window if refused.window and (known is None or refused.window < known) else None
        if window is None and known is not None:
            window = known * 3 // 4
        if window is None:
            raise LLMError("bad_request", f"openai: {served.key} refused the request's length: {refused}")
        served.refused_length(window)

    def _limits(self, request: LLMRequest, served: ServedModel) -> dict[str, object]:
        """``output_limits``, capped at the model's output limit and at half its window."""
        limits = output_limits(request, self.reasons(request.model), self.reasoning_efforts)
        key = "max_completion_tokens" if "max_completion_tokens" in limits else "max_tokens"
        cap = int(limits[key])  # type: ignore[call-overload]  # an int, as output_limits sets it
        known = served.capabilities
        if known.max_output_tokens:
            cap = min(cap, known.max_output_tokens)
        if known.context_window:
            cap = min(cap, known.context_window // ANSWER_SHARE)
        return {**limits, key: cap}

    async def _fit(
        self, request: LLMRequest, parts: list[Part], served: ServedModel, limits: dict[str, object], extra: str
    ) -> tuple[list[Part], Fitted | None]:
        """The parts, cut by the fitting rule when the request would not fit the model's window;
        ``extra`` is the prompt text the request sends besides the system prompt and the parts."""
        window = served.capabilities.context_window
        if window is None:
            return parts, None
        cap = int(limits.get("max_completion_tokens") or limits["max_tokens"])  # type: ignore[call-overload]
        budget = window - cap - TEMPLATE_TOKENS
        tokens = await self._tokens(served, request.system + extra, parts, budget)
        if tokens <= budget:
            return parts, None
        cut = 0
        for _ in range(FIT_ATTEMPTS):
            chars = sum(len(p.text) for p in parts if isinstance(p, TextPart)) + len(request.system + extra)
            cut += math.ceil((tokens - budget) * chars / tokens * 1.1) + 1
            fitted = fit(parts, cut)
            if fitted is None:
                break
            tokens = await self._tokens(served, request.system + extra, fitted.parts, budget)
            if tokens <= budget:
                return fitted.parts, fitted
        raise LLMError(
            "bad_request",
            f"openai: the {request.role}'s prompt does not fit {served.key}'s context window of {window} tokens "
            f"({budget} for the prompt after {cap} for the answer), even with every precedent dropped and the "
            f"parties' texts clipped to {MIN_CLIPPED} characters: give the role a model with a larger window, "
            "or set the real window in llm_capabilities",
        )

    async def _tokens(self, served: ServedModel, system: str, parts: list[Part], budget: int) -> int:
        """The request's prompt tokens: sure to fit when its bytes do; else the server's count, or the estimate."""
        text = "\n\n".join([system, *(p.text for p in parts if isinstance(p, TextPart))])
        images = sum(isinstance(p, ImagePart) for p in parts) * IMAGE_TOKENS_HIGH + TEMPLATE_TOKENS
        size = len(text.encode())
        if size + images <= budget:
            return size + images
        counted = await self.servers.count(served, text) if self.settings.openai_server_info else None
        return (counted if counted is not None else math.ceil(size / BYTES_PER_TOKEN)) + images

    async def _send(self, body: dict[str, Any], had_images: bool) -> tuple[ChatCompletion, Usage]:
        try:
            raw = await self.client.chat.completions.with_raw_response.create(**body)
            completion = raw.parse()
        except openai.APITimeoutError as e:  # before APIConnectionError: it is a subclass
            raise LLMError("timeout", f"openai: no reply within the timeout ({e})") from e
        except openai.APIConnectionError as e:
            raise LLMError("connection", f"openai: {e}") from e
        except openai.APIStatusError as e:
            said = f"{e.status_code} {e.message}"[:300]
            match refusal_of(e, had_images):
                case "context":
                    raise LengthRefused(window_in(e), said) from e
                case "images":
                    raise ImagesRefused(said) from e
                case "shape":
                    raise ShapeRefused(said) from e
            raise LLMError(status_kind(e.status_code), f"openai: {e.message}"[:500]) from e
        if not isinstance(completion, ChatCompletion) or not isinstance(getattr(completion, "choices", None), list):
            raise LLMError(
                "server_error",
                "openai: the server answered 200 with a body that is no chat completion",
                raw=raw.http_response.text,
            )
        return completion, usage_of(getattr(completion, "usage", None))

    def _answer(
        self, completion: ChatCompletion, mode: Mode, request: LLMRequest, limits: dict[str, object], usage: Usage
    ) -> str | None:
        """The reply's answer text; a reply cut at the cap or refused fails here (billed, its text kept)."""
        if not completion.choices:
            raise Unusable("the reply has no choices")
        choice = completion.choices[0]
        text = answer_text(completion, mode)
        if choice.finish_reason == "length":
            raise LLMError("truncated", cut_off(completion, request.role, limits), usage=usage, raw=text or "")
        if choice.finish_reason == "content_filter":
            raise LLMError("refused", "openai: finish_reason content_filter", usage=usage)
        if choice.message.refusal:
            raise LLMError("refused", f"openai: refusal: {choice.message.refusal}"[:500], usage=usage)
        return text

    def _noted(self, usage: Usage, request: LLMRequest, served: ServedModel, fitting: Fitted | None) -> Usage:
        """The call's usage with what the verdict says of it: images read as captions, a prompt fitted."""
        notes: dict[str, Any] = {}
        if served.capabilities.images is False and has_images(request.parts()):
            notes["caption_calls"] = {request.role: 1}
        if served.capabilities.plumbing_only:
            notes["plumbing_calls"] = {request.model: 1}
        if fitting is not None:
            window = served.capabilities.context_window
            notes["fitted_calls"] = {f"{request.role} on {request.model} ({window}-token window): {fitting.note()}": 1}
        return usage.model_copy(update=notes) if notes else usage

    async def aclose(self) -> None:
        await self.client.close()


def _body_text(completion: ChatCompletion) -> str:
    try:
        return completion.model_dump_json()
    except Exception:  # a body the SDK built without checking: its repr is what there is
        return repr(completion)
