"""The ``anthropic`` backend: the Messages API through the official SDK.

One call per request: the system prompt as a text block, then one user turn holding the case
prefix every juror shares (marked as a prompt-cache breakpoint) followed by the stage's prompt.
Images go as base64 blocks, each preceded by its label ("frame 7 at 3.50s") so the model can cite
frames. The reply is constrained to the output type's JSON schema (``output_config.format``).

Retries with backoff on 408/409/429/5xx/529 (honouring ``retry-after``/``retry-after-ms``) and
timeouts are the SDK's own, set from ``llm_max_retries`` and ``llm_timeout_s``; what still fails
becomes an ``LLMError`` with a short kind. The SDK's middleware runs once per HTTP attempt with
the attempt's retry count, which is how ``cyberjurors_llm_retries_total`` counts its retries.

Why ``messages.create`` and not ``messages.parse``: ``parse`` validates the reply inside the HTTP
call and raises a bare pydantic error, which drops ``stop_reason``, so a refusal or a reply cut
off at ``max_tokens`` could not be told apart from bad output. Here the request is the same
(``output_config.format`` built by the SDK's ``transform_schema``, as ``parse`` does) and the
reply is checked in order: stop reason, then JSON, then the schema.
"""

from __future__ import annotations

import base64
from typing import Any

import anthropic
import pydantic
from anthropic.types import Message

from .. import metrics
from ..config import Settings
from ..llm import LLMError, LLMRequest, LLMResult, Part, T, TextPart, with_labels
from ..schemas import Usage

CACHE = {"type": "ephemeral"}
STOP_KINDS = {"refusal": "refused", "max_tokens": "truncated", "model_context_window_exceeded": "truncated"}


def status_kind(status: int) -> str:
    """A bounded label for an HTTP error status (shared by the OpenAI-compatible backend)."""
    if status == 429:
        return "rate_limited"
    if status == 529:
        return "overloaded"
    if status >= 500:
        return "server_error"
    if status in (401, 403):
        return "auth"
    return "bad_request"


def blocks(parts: list[Part]) -> list[dict]:
    return [{"type": "text", "text": part.text} if isinstance(part, TextPart) else
            {"type": "image", "source": {"type": "base64", "media_type": part.media_type,
                                         "data": base64.b64encode(part.data).decode("ascii")}}
            for part in with_labels(parts)]


def user_content(request: LLMRequest, cache: bool = True) -> list[dict]:
    shared = blocks(request.shared)
    if shared and cache:
        shared[-1]["cache_control"] = CACHE
    return [*shared, *blocks(request.prompt)]


def usage_of(message: Message) -> Usage:
    u = message.usage
    return Usage(input_tokens=u.input_tokens, output_tokens=u.output_tokens,
                 cache_read_tokens=u.cache_read_input_tokens or 0,
                 cache_write_tokens=u.cache_creation_input_tokens or 0)


def invalid(output_type: type, error: pydantic.ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(map(str, first["loc"])) or "reply"
    return f"reply is not a valid {output_type.__name__}: {where}: {first['msg']} ({error.error_count()} errors)"


async def count_retries(request: anthropic.APIRequest, call_next: anthropic.AsyncCallNext) -> Any:
    """SDK middleware: invoked inside the SDK's retry loop, once per attempt; an attempt with
    ``retries_taken`` > 0 is a retry (the same number the SDK sends as ``x-stainless-retry-count``)."""
    body = request.json if isinstance(request.json, dict) else {}
    metrics.record_retry("anthropic", str(body.get("model", "")), request.retries_taken)
    return await call_next(request)


class AnthropicLLM:
    backend = "anthropic"

    def __init__(self, client: anthropic.AsyncAnthropic, prompt_caching: bool = True):
        self.client = client
        self.prompt_caching = prompt_caching

    @classmethod
    def from_settings(cls, settings: Settings) -> "AnthropicLLM":
        return cls(anthropic.AsyncAnthropic(api_key=settings.anthropic_api_key, base_url=settings.anthropic_base_url,
                                            timeout=settings.llm_timeout_s, max_retries=settings.llm_max_retries,
                                            middleware=[count_retries]), settings.prompt_caching)

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        try:
            message = await self.client.messages.create(
                model=request.model,
                max_tokens=request.max_output_tokens,
                system=[{"type": "text", "text": request.system}],
                messages=[{"role": "user", "content": user_content(request, self.prompt_caching)}],
                output_config={"format": {"type": "json_schema", "schema": anthropic.transform_schema(output_type)}},
            )
        except anthropic.APITimeoutError as e:  # before APIConnectionError: it is a subclass
            raise LLMError("timeout", f"anthropic: no reply within the timeout ({e})") from e
        except anthropic.APIConnectionError as e:
            raise LLMError("connection", f"anthropic: {e}") from e
        except anthropic.APIStatusError as e:
            raise LLMError(status_kind(e.status_code), f"anthropic: {e.message}"[:500]) from e

        if message.stop_reason in STOP_KINDS:
            raise LLMError(STOP_KINDS[message.stop_reason], f"anthropic: stop_reason {message.stop_reason}")
        text = "".join(block.text for block in message.content if block.type == "text")
        try:
            output = output_type.model_validate_json(text)
        except pydantic.ValidationError as e:
            raise LLMError("invalid_output", f"anthropic: {invalid(output_type, e)}") from e
        return LLMResult(output, usage_of(message), model=message.model, backend=self.backend,
                         finish_reason=message.stop_reason)

    async def aclose(self) -> None:
        await self.client.close()
