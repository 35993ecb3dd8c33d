"""The ``openai`` backend: any OpenAI-compatible chat completions endpoint (vLLM, llama.cpp
server, Ollama) through the official ``openai`` SDK.

The system prompt is a system message; the user message holds the shared case prefix first, then
the caller's own part and the stage's prompt, so servers with automatic prefix caching (vLLM,
llama.cpp) reuse the prefix across a role's calls (OpenAI's own API puts the answer schema before
the system message, so there too a role reads only its own prefix). Images go as ``image_url`` parts with ``data:`` URLs, each preceded by its label.
``chat.completions.parse`` sends ``response_format`` = strict ``json_schema`` built from the
output type and parses the reply; it raises on ``finish_reason`` "length"/"content_filter".
Reasoning models (``openai_reasoning_models``) get ``max_completion_tokens`` with room for their
reasoning and ``reasoning_effort``; their reasoning tokens are counted as thinking. Thinking
``auto`` and ``adaptive`` both leave the reasoning to the model (it has no other mode); ``off``
sends the lowest effort the endpoint takes (``openai_reasoning_efforts``) and keeps no room for
reasoning only when that is "none"; ``budget`` and efforts the endpoint does not list are refused
when the settings load (``LLMSettings._check_openai_reasoning``). Other models get none of these.
Retries and timeouts are the SDK's own; failures become ``LLMError`` with the same kinds as the
``anthropic`` backend. This SDK has no middleware: a request event hook on its HTTP client reads
the ``x-stainless-retry-count`` header the SDK puts on every attempt, so
``cyberjurors_llm_retries_total`` counts its retries.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import openai
import pydantic
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionContentPartParam

from ...config import OPENAI_EFFORTS, LLMSettings, OpenAIEffort, reasons
from ...observability import metrics
from ...schemas import Usage
from ..port import LLMError, LLMRequest, LLMResult, Part, T, TextPart, with_labels
from .anthropic import invalid, status_kind

if TYPE_CHECKING:
    import httpx2  # the SDK's HTTP client library
    from openai._legacy_response import LegacyAPIResponse


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


def billed(raw: LegacyAPIResponse[Any]) -> Usage:
    """The usage of a reply whose content did not parse, read from the raw body."""
    body = raw.http_response.json()
    return usage_of(
        CompletionUsage.model_validate(body["usage"]) if isinstance(body, dict) and body.get("usage") else None
    )


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


class OpenAICompatibleLLM:
    backend = "openai"

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        reasoning_models: Sequence[str] = (),
        reasoning_efforts: Sequence[OpenAIEffort] = ("low", "medium", "high"),
    ):
        self.client = client
        self.reasoning_models = tuple(reasoning_models)
        self.reasoning_efforts = tuple(reasoning_efforts)

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
        )

    def reasons(self, model: str) -> bool:
        return reasons(model, self.reasoning_models)

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        limits = output_limits(request, self.reasons(request.model), self.reasoning_efforts)
        calling = _calling.set(request.model)
        try:
            # the raw response first: a reply that does not parse was billed, and its usage is only there
            raw = await self.client.chat.completions.with_raw_response.parse(
                model=request.model,
                messages=[
                    {"role": "system", "content": request.system},
                    {"role": "user", "content": content_parts(request.parts())},
                ],
                response_format=output_type,
                **limits,  # type: ignore[arg-type]  # a dict of the keys output_limits chose, not a TypedDict
            )
            completion = raw.parse()
        except openai.APITimeoutError as e:  # before APIConnectionError: it is a subclass
            raise LLMError("timeout", f"openai: no reply within the timeout ({e})") from e
        except openai.APIConnectionError as e:
            raise LLMError("connection", f"openai: {e}") from e
        except openai.APIStatusError as e:
            raise LLMError(status_kind(e.status_code), f"openai: {e.message}"[:500]) from e
        except openai.LengthFinishReasonError as e:
            raise LLMError(
                "truncated", cut_off(e.completion, request.role, limits), usage=usage_of(e.completion.usage)
            ) from e
        except openai.ContentFilterFinishReasonError as e:
            raise LLMError(
                "refused",
                "openai: finish_reason content_filter",
                usage=usage_of(e.completion.usage) if e.completion else None,
            ) from e
        except pydantic.ValidationError as e:
            raise LLMError("invalid_output", f"openai: {invalid(output_type, e)}", usage=billed(raw)) from e
        finally:
            _calling.reset(calling)

        message = completion.choices[0].message if completion.choices else None
        if message is not None and message.refusal:
            raise LLMError("refused", f"openai: refusal: {message.refusal}"[:500], usage=usage_of(completion.usage))
        if message is None or message.parsed is None:
            raise LLMError("invalid_output", "openai: the reply has no content", usage=usage_of(completion.usage))
        return LLMResult(
            message.parsed,
            usage_of(completion.usage),
            model=completion.model,
            backend=self.backend,
            finish_reason=completion.choices[0].finish_reason,
        )

    async def aclose(self) -> None:
        await self.client.close()
