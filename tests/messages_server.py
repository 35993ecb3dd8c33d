"""A local HTTP server that plays an LLM provider: scripted replies, recorded requests.

It speaks whatever the script says, so one server serves both the Anthropic Messages API
(``POST /v1/messages``) and the OpenAI chat completions API (``POST /v1/chat/completions``).
Each request gets the next scripted ``Reply``; the last one repeats once the script runs out.
The helpers build bodies shaped like the real APIs' responses.

Or, with no script, a ``respond`` function answers each request from what it asks: ``ThinkingModel``
plays a model that thinks before it answers any structured request (a schema-valid answer built
from the request's own schema), counting its thinking toward the output cap as the real APIs do.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class ScriptedServer:
    def __init__(self, respond: Callable[[Received], Reply] | None = None) -> None:
        self.respond = respond
        self.script: list[Reply] = []
        self.requests: list[Received] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    def reply(self, *replies: Reply) -> "ScriptedServer":
        self.script.extend(replies)
        return self

    async def start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a handler still sleeping when its client gave up (timeout tests)
        # is cancelled, so shutting down does not wait for it.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        received = Received(request.method, request.path, dict(request.headers), json.loads(raw) if raw else {})
        self.requests.append(received)
        if not self.script and self.respond is not None:
            reply = self.respond(received)
        elif not self.script:
            return web.json_response({"error": "no scripted reply"}, status=599)
        else:
            reply = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        return web.json_response(reply.body, status=reply.status, headers=reply.headers)


# --- Anthropic Messages API ------------------------------------------------------------------


def anthropic_message(text: str | None, *, stop_reason: str = "end_turn", model: str = "claude-sonnet-4-6",
                      input_tokens: int = 120, output_tokens: int = 85, cache_read: int | None = 0,
                      cache_write: int | None = 0, thinking: str | None = None, thinking_tokens: int | None = None,
                      cache_write_1h: int | None = None) -> Reply:
    """A Messages API reply; ``thinking`` puts a thinking block before the text (``text`` None: the
    reply was cut while thinking), ``thinking_tokens`` the usage's output_tokens_details, and
    ``cache_write_1h`` the 1-hour share of the cache write in usage.cache_creation."""
    content: list[dict[str, Any]] = []
    if thinking is not None:
        content.append({"type": "thinking", "thinking": thinking, "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"})
    if text is not None:
        content.append({"type": "text", "text": text})
    usage: dict[str, Any] = {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
        "service_tier": "standard",
    }
    if thinking_tokens is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    if cache_write_1h is not None:
        usage["cache_creation"] = {"ephemeral_1h_input_tokens": cache_write_1h,
                                   "ephemeral_5m_input_tokens": (cache_write or 0) - cache_write_1h}
    return Reply(body={
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }, headers={"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"})


def anthropic_error(status: int, error_type: str, message: str, **headers: str) -> Reply:
    return Reply(status=status, headers={"request-id": "req_err", **headers}, body={
        "type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_err"})


# --- OpenAI chat completions API -------------------------------------------------------------


def chat_completion(content: str | None, *, finish_reason: str = "stop", model: str = "qwen2.5-vl-7b",
                    prompt_tokens: int = 300, completion_tokens: int = 60, cached_tokens: int | None = None,
                    refusal: str | None = None, reasoning_tokens: int | None = None) -> Reply:
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return Reply(body={
        "id": "chatcmpl-9b1f0c",
        "object": "chat.completion",
        "created": 1735689600,
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason, "logprobs": None,
                     "message": {"role": "assistant", "content": content, "refusal": refusal}}],
        "usage": usage,
    })


def openai_error(status: int, message: str, error_type: str = "server_error", **headers: str) -> Reply:
    return Reply(status=status, headers=headers,
                 body={"error": {"message": message, "type": error_type, "param": None, "code": None}})


# --- a model that thinks before it answers ---------------------------------------------------

FILLER = "A sentence the test model writes into every text field of its answer."
EVIDENCE_ID = re.compile(r'<evidence id="([^"]+)"')


def tokens_of(text: str) -> int:
    return math.ceil(len(text) / 4)


def answer_for(schema: dict[str, Any], prompt: str) -> Any:
    """A schema-valid answer to a structured request: every property, two items per list, the
    first choice of every enum; an ``evidence_id`` is the first evidence the prompt lists (or null)."""
    defs = schema.get("$defs", {})

    def build(node: dict[str, Any], name: str = "") -> Any:
        if "$ref" in node:
            return build(defs[node["$ref"].rsplit("/", 1)[-1]], name)
        if "anyOf" in node:
            options = [o for o in node["anyOf"] if o.get("type") != "null"]
            if name == "evidence_id":
                found = EVIDENCE_ID.search(prompt)
                return found.group(1) if found else None
            return build(options[0], name) if options else None
        if "enum" in node:
            return node["enum"][0]
        kind = node.get("type")
        if kind == "object":
            return {key: build(sub, key) for key, sub in node.get("properties", {}).items()}
        if kind == "array":
            return [build(node.get("items", {}), name) for _ in range(2)]
        return {"string": FILLER, "integer": 1, "number": 0.5, "boolean": False, "null": None}.get(kind, FILLER)

    return build(schema)


def request_text(body: dict[str, Any]) -> str:
    """Every text of a Messages or Chat Completions request, system included."""
    texts: list[str] = [b.get("text", "") for b in body.get("system", []) if isinstance(b, dict)]
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        texts += [part.get("text", "") for part in content or [] if isinstance(part, dict)]
    return "\n".join(texts)


@dataclass
class ThinkingModel:
    """Plays a model that thinks ``thinking_tokens`` tokens before every answer, on both APIs.

    Messages API, as documented: thinking counts toward ``max_tokens``; a reply whose thinking and
    answer do not fit is cut there with ``stop_reason: max_tokens`` (no text at all when thinking
    used it up); ``thinking: {type: enabled}`` needs 1024 <= budget_tokens < max_tokens and caps
    the thinking at the budget; ``disabled`` and ``between_tools`` mean no thinking before the
    answer. Chat Completions, as a reasoning model: reasoning counts toward
    ``max_completion_tokens``, ``max_tokens`` is refused, ``finish_reason: length`` when cut.
    Usage reports the thinking (``output_tokens_details.thinking_tokens`` /
    ``completion_tokens_details.reasoning_tokens``) inside the output total."""

    thinking_tokens: int = 2000

    def __call__(self, received: Received) -> Reply:
        if received.path.endswith("/chat/completions"):
            return self.completion(received.body)
        return self.message(received.body)

    def message(self, body: dict[str, Any]) -> Reply:
        max_tokens, thinking = body["max_tokens"], body.get("thinking") or {}
        spend = self.thinking_tokens
        if thinking.get("type") == "enabled":
            budget = thinking.get("budget_tokens", 0)
            if not 1024 <= budget < max_tokens:
                return anthropic_error(400, "invalid_request_error",
                                       "thinking.budget_tokens: must be >= 1024 and less than max_tokens")
            spend = min(spend, budget)
        elif thinking.get("type") in ("disabled", "between_tools"):
            spend = 0
        text = json.dumps(answer_for(body["output_config"]["format"]["schema"], request_text(body)))
        spent = min(spend, max_tokens)
        room = max_tokens - spent
        cut = spent + tokens_of(text) > max_tokens
        answer = None if room == 0 else (text[:room * 4] if cut else text)
        return anthropic_message(answer, stop_reason="max_tokens" if cut else "end_turn", model=body["model"],
                                 input_tokens=tokens_of(request_text(body)),
                                 output_tokens=spent + (tokens_of(answer) if answer else 0),
                                 thinking="(thinking)" if spent else None, thinking_tokens=spent)

    def completion(self, body: dict[str, Any]) -> Reply:
        if "max_tokens" in body:
            return openai_error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                     "Use 'max_completion_tokens' instead.", "invalid_request_error")
        limit = body.get("max_completion_tokens") or 1_000_000
        schema = body["response_format"]["json_schema"]["schema"]
        text = json.dumps(answer_for(schema, request_text(body)))
        spent = min(self.thinking_tokens, limit)
        cut = spent + tokens_of(text) > limit
        answer = text[:(limit - spent) * 4] if cut else text
        return chat_completion(answer or None, finish_reason="length" if cut else "stop", model=body["model"],
                               prompt_tokens=tokens_of(request_text(body)),
                               completion_tokens=spent + tokens_of(answer), reasoning_tokens=spent)
