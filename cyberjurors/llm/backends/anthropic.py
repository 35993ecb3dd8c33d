"""The ``anthropic`` backend: the Messages API through the official SDK.

One call per request: the system prompt as a text block (a breakpoint of its own when it can
reach the model's minimum cacheable length alone, as a juror's with the verdict rules does: every
case reads it), then one user turn holding the case prefix every juror shares (marked as a
prompt-cache breakpoint with the configured TTL when it can reach the minimum), a juror's own
persona and memory (a further breakpoint where it pays, ``llm.stage_request``), then the stage's
prompt. Roles do not share one prefix across stages: each asks for its own output schema (and
effort), and the API documents that another ``output_config.format`` invalidates the prompt cache
and another effort or thinking setting the cached message blocks. The role's thinking
and effort go as ``thinking`` and ``output_config.effort``, with ``max_tokens`` keeping room for
the thinking as well as the answer; thinking blocks in the reply are not the answer.
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
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import anthropic
import pydantic
from anthropic.types import Message
from pydantic import BaseModel

from ...config import LLMSettings
from ...config.catalog import facts
from ...observability import metrics
from ...schemas import Usage
from ..port import LLMError, LLMRequest, LLMResult, Part, T, TextPart, with_labels

STOP_KINDS = {"refusal": "refused", "max_tokens": "truncated", "model_context_window_exceeded": "truncated"}


@lru_cache(maxsize=64)
def output_schema(output_type: type) -> dict[str, Any]:
    """The SDK's structured-output schema of an output type, built once per type: building it walks
    the type's JSON schema, and a case asks for the same few types hundreds of times
    (docs/benchmarks.md, "Worker CPU per case"). Shared between requests: read, never changed."""
    return anthropic.transform_schema(output_type)


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
    return [
        {"type": "text", "text": part.text}
        if isinstance(part, TextPart)
        else {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": part.media_type,
                "data": base64.b64encode(part.data).decode("ascii"),
            },
        }
        for part in with_labels(parts)
    ]


def system_content(request: LLMRequest, cache: bool = True) -> list[dict]:
    """The system prompt as one text block, a cache breakpoint when it can be cached on its own
    (``cache_system``): the same for every case, so a case's first call reads it from the others'."""
    block: dict[str, Any] = {"type": "text", "text": request.system}
    if cache and request.cache_system:
        block["cache_control"] = {"type": "ephemeral", "ttl": request.cache_ttl}
    return [block]


def user_content(request: LLMRequest, cache: bool = True) -> list[dict]:
    """The case prefix, the caller's own part, then the stage prompt; the prefix's last block is a
    cache breakpoint when the request says it can be cached (``stage_request`` checks the model's
    minimum length), and so is the own part's when the request marks it (``cache_own``)."""
    shared, own = blocks(request.shared), blocks(request.own)
    for part, marked in ((shared, request.cache_prefix), (own, request.cache_own)):
        if part and cache and marked:
            part[-1]["cache_control"] = {"type": "ephemeral", "ttl": request.cache_ttl}
    return [*shared, *own, *blocks(request.prompt)]


@dataclass(frozen=True)
class ThinkingParams:
    thinking: dict[str, Any] | None
    effort: str | None
    max_tokens: int


MIN_BUDGET_TOKENS = 1024  # the API refuses a smaller budget_tokens


def thinking_params(request: LLMRequest) -> ThinkingParams:
    """The request's ``thinking``, ``output_config.effort`` and ``max_tokens`` for its model.

    auto sends no thinking parameter (the model's default: Sonnet 5.5 thinks adaptively) and keeps
    the thinking budget in max_tokens, unless the model is known not to think by default (Haiku
    4.5); budget sends ``enabled`` with it; off sends the model's own
    way to turn thinking off (none known: nothing) and keeps the budget unless that is "disabled"
    (Sonnet 5.5's between_tools is about thinking before tool calls). Effort goes only to models
    known to take it: an unknown one may refuse it."""
    known = facts(request.model)
    effort = request.effort if known is not None and known.effort else None
    match request.thinking:
        case "adaptive":
            return ThinkingParams({"type": "adaptive"}, effort, request.max_tokens())
        case "budget":
            budget = max(request.thinking_budget, MIN_BUDGET_TOKENS)
            return ThinkingParams(
                {"type": "enabled", "budget_tokens": budget}, effort, request.max_output_tokens + budget
            )
        case "off":
            way = known.thinking_off if known else "disabled"
            return ThinkingParams(
                {"type": way} if way else None, effort, request.max_tokens(thinking_off=way == "disabled")
            )
    return ThinkingParams(
        None, effort, request.max_tokens(thinking_off=known is not None and not known.thinks_by_default)
    )


def usage_of(message: Message) -> Usage:
    """Output tokens include thinking (as billed); the thinking share and the 1-hour share of cache
    writes are kept apart when the API reports them."""
    u = message.usage
    details, created = u.output_tokens_details, u.cache_creation
    return Usage(
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cache_read_tokens=u.cache_read_input_tokens or 0,
        cache_write_tokens=u.cache_creation_input_tokens or 0,
        thinking_tokens=details.thinking_tokens if details else 0,
        cache_write_1h_tokens=created.ephemeral_1h_input_tokens if created else 0,
    )


def invalid(output_type: type, error: pydantic.ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(map(str, first["loc"])) or "reply"
    return f"reply is not a valid {output_type.__name__}: {where}: {first['msg']} ({error.error_count()} errors)"


def stopped(message: Message, role: str, max_tokens: int) -> str:
    """Why a reply is unusable, with what to change when thinking ate the room for the answer."""
    text = f"anthropic: stop_reason {message.stop_reason}"
    details = message.usage.output_tokens_details
    if message.stop_reason == "max_tokens" and details is not None and details.thinking_tokens:
        text += (
            f" after {details.thinking_tokens} of {max_tokens} tokens spent thinking: raise {role}'s "
            "thinking_budget or max_output_tokens, or lower its effort (llm_roles)"
        )
    return text


def read_message(message: Message, request: LLMRequest, output_type: type[T], max_tokens: int) -> LLMResult[T]:
    """The answer in a reply, checked in order: stop reason, then JSON, then the schema. A reply
    that fails them was billed all the same: the error carries its usage."""
    if message.stop_reason in STOP_KINDS:
        raise LLMError(
            STOP_KINDS[message.stop_reason], stopped(message, request.role, max_tokens), usage=usage_of(message)
        )
    # the answer is the text; thinking blocks (and redacted ones) are the model's own, counted in usage
    text = "".join(block.text for block in message.content if block.type == "text")
    try:
        output = output_type.model_validate_json(text)
    except pydantic.ValidationError as e:
        raise LLMError("invalid_output", f"anthropic: {invalid(output_type, e)}", usage=usage_of(message)) from e
    return LLMResult(
        output, usage_of(message), model=message.model, backend="anthropic", finish_reason=message.stop_reason
    )


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
    def from_settings(cls, settings: LLMSettings) -> AnthropicLLM:
        return cls(
            anthropic.AsyncAnthropic(
                api_key=settings.anthropic_api_key,
                base_url=settings.anthropic_base_url,
                timeout=settings.llm_timeout_s,
                max_retries=settings.llm_max_retries,
                middleware=[count_retries],
            ),
            settings.prompt_caching,
        )

    def params(self, request: LLMRequest, output_type: type[BaseModel]) -> dict[str, Any]:
        """The body of one Messages call: what ``messages.create`` sends, and what a Message Batches
        entry carries as its ``params`` (``llm/backends/batch.py``)."""
        params = thinking_params(request)
        output_config: dict[str, Any] = {"format": {"type": "json_schema", "schema": output_schema(output_type)}}
        if params.effort is not None:
            output_config["effort"] = params.effort
        return {
            "model": request.model,
            "max_tokens": params.max_tokens,
            "system": system_content(request, self.prompt_caching),
            "messages": [{"role": "user", "content": user_content(request, self.prompt_caching)}],
            "output_config": output_config,
            **({"thinking": params.thinking} if params.thinking else {}),
        }

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        body = self.params(request, output_type)
        try:
            message = await self.client.messages.create(**body)
        except anthropic.APITimeoutError as e:  # before APIConnectionError: it is a subclass
            raise LLMError("timeout", f"anthropic: no reply within the timeout ({e})") from e
        except anthropic.APIConnectionError as e:
            raise LLMError("connection", f"anthropic: {e}") from e
        except anthropic.APIStatusError as e:
            raise LLMError(status_kind(e.status_code), f"anthropic: {e.message}"[:500]) from e
        return read_message(message, request, output_type, body["max_tokens"])

    async def aclose(self) -> None:
        await self.client.close()
