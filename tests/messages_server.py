"""A local HTTP server that plays an LLM provider: scripted replies, recorded requests.

It speaks whatever the script says, so one server serves both the Anthropic Messages API
(``POST /v1/messages``) and the OpenAI chat completions API (``POST /v1/chat/completions``).
Each request gets the next scripted ``Reply``; the last one repeats once the script runs out.
The helpers build bodies shaped like the real APIs' responses.
"""

from __future__ import annotations

import asyncio
import json
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
    def __init__(self) -> None:
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
        self.requests.append(Received(request.method, request.path, dict(request.headers),
                                      json.loads(raw) if raw else {}))
        if not self.script:
            return web.json_response({"error": "no scripted reply"}, status=599)
        reply = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        return web.json_response(reply.body, status=reply.status, headers=reply.headers)


# --- Anthropic Messages API ------------------------------------------------------------------


def anthropic_message(text: str, *, stop_reason: str = "end_turn", model: str = "claude-sonnet-4-6",
                      input_tokens: int = 120, output_tokens: int = 85, cache_read: int | None = 0,
                      cache_write: int | None = 0) -> Reply:
    return Reply(body={
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read,
            "cache_creation_input_tokens": cache_write,
            "service_tier": "standard",
        },
    }, headers={"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"})


def anthropic_error(status: int, error_type: str, message: str, **headers: str) -> Reply:
    return Reply(status=status, headers={"request-id": "req_err", **headers}, body={
        "type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_err"})


# --- OpenAI chat completions API -------------------------------------------------------------


def chat_completion(content: str | None, *, finish_reason: str = "stop", model: str = "qwen2.5-vl-7b",
                    prompt_tokens: int = 300, completion_tokens: int = 60, cached_tokens: int | None = None,
                    refusal: str | None = None) -> Reply:
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
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
