"""A local HTTP server that plays an LLM provider: scripted replies, recorded requests.

It speaks whatever the script says, so one server serves both the Anthropic Messages API
(``POST /v1/messages``) and the OpenAI chat completions API (``POST /v1/chat/completions``).
Each request gets the next scripted ``Reply``; the last one repeats once the script runs out.
The helpers build bodies shaped like the real APIs' responses.

Or, with no script, a ``respond`` function answers each request from what it asks: ``ThinkingModel``
plays a model that thinks before it answers any structured request (a schema-valid answer built
from the request's own schema), counting its thinking toward the output cap as the real APIs do;
``StrictModel`` checks each request the way the Messages API documents its limits and accounts for
the prompt cache by prefix (``PromptCache``), so its usage is what the API would bill.

Given ``batches`` (``MessageBatches``), the server also speaks the Message Batches API (create,
retrieve, results as JSONL, cancel), answering each entry with the same ``respond`` function, and can
make chosen entries come back errored or expired on their first attempt.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import io
import itertools
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from aiohttp import web
from PIL import Image

MAX_BODY_BYTES = 300 * 1024 * 1024  # a Message Batch may be 256 MB


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    text: str | None = None
    """a raw body instead of JSON (the batch results' JSONL)"""
    drop: bool = False
    """close the connection without an answer (a network blip)"""


# what the openai backend asks a server about itself before and between its calls
SERVER_INFO_PATHS = frozenset({"/v1/models", "/props", "/api/show", "/tokenize", "/extras/tokenize/count"})


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class ScriptedServer:
    def __init__(
        self, respond: Callable[[Received], Reply] | None = None, batches: MessageBatches | None = None
    ) -> None:
        self.respond = respond
        self.batches = batches
        self.script: list[Reply] = []
        self.requests: list[Received] = []
        self.routes: dict[str, Reply] = {}
        """replies by path for what a backend asks a server about itself (``/v1/models``, ``/props``,
        ``/api/show``, ``/tokenize``, ...): each answers 404, as on a server that lacks it, unless set"""
        self.asked: list[Received] = []
        self.url = ""
        self._runner: web.AppRunner | None = None

    def reply(self, *replies: Reply) -> ScriptedServer:
        self.script.extend(replies)
        return self

    async def start(self, port: int = 0) -> str:
        """On 127.0.0.1, at ``port`` (any free one by default); returns the URL."""
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a handler still sleeping when its client gave up (timeout tests)
        # is cancelled, so shutting down does not wait for it.
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
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
        if received.path in self.routes or received.path in SERVER_INFO_PATHS:
            self.asked.append(received)
            reply = self.routes.get(received.path, Reply(status=404, body={"detail": "Not Found"}))
            return web.json_response(reply.body, status=reply.status, headers=reply.headers)
        self.requests.append(received)
        if self.batches is not None and received.path.startswith(BATCHES_PATH):
            reply = self.batches.handle(received, self.url, self.respond)  # type: ignore[arg-type]
        elif not self.script and self.respond is not None:
            reply = self.respond(received)
        elif not self.script:
            return web.json_response({"error": "no scripted reply"}, status=599)
        else:
            reply = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.drop:
            assert request.transport is not None
            request.transport.close()
            raise ConnectionResetError("dropped by the test server")
        if reply.text is not None:
            return web.Response(
                text=reply.text, status=reply.status, headers=reply.headers, content_type="application/binary"
            )
        return web.json_response(reply.body, status=reply.status, headers=reply.headers)


# --- Anthropic Messages API ------------------------------------------------------------------


def anthropic_message(
    text: str | None,
    *,
    stop_reason: str = "end_turn",
    model: str = "claude-sonnet-4-6",
    input_tokens: int = 120,
    output_tokens: int = 85,
    cache_read: int | None = 0,
    cache_write: int | None = 0,
    thinking: str | None = None,
    thinking_tokens: int | None = None,
    cache_write_1h: int | None = None,
) -> Reply:
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
        usage["cache_creation"] = {
            "ephemeral_1h_input_tokens": cache_write_1h,
            "ephemeral_5m_input_tokens": (cache_write or 0) - cache_write_1h,
        }
    return Reply(
        body={
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage,
        },
        headers={"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"},
    )


def anthropic_error(status: int, error_type: str, message: str, **headers: str) -> Reply:
    return Reply(
        status=status,
        headers={"request-id": "req_err", **headers},
        body={"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_err"},
    )


# --- OpenAI chat completions API -------------------------------------------------------------


def chat_completion(
    content: str | None,
    *,
    finish_reason: str = "stop",
    model: str = "qwen2.5-vl-7b",
    prompt_tokens: int = 300,
    completion_tokens: int = 60,
    cached_tokens: int | None = None,
    refusal: str | None = None,
    reasoning_tokens: int | None = None,
) -> Reply:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return Reply(
        body={
            "id": "chatcmpl-9b1f0c",
            "object": "chat.completion",
            "created": 1735689600,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": finish_reason,
                    "logprobs": None,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                }
            ],
            "usage": usage,
        }
    )


def openai_error(status: int, message: str, error_type: str = "server_error", **headers: str) -> Reply:
    return Reply(
        status=status,
        headers=headers,
        body={"error": {"message": message, "type": error_type, "param": None, "code": None}},
    )


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
    ``max_completion_tokens``, ``max_tokens`` is refused, ``finish_reason: length`` when cut;
    ``reasoning_effort: none`` means no reasoning, and one outside ``reasoning_efforts`` (when set)
    is refused as OpenAI refuses an effort a model does not take. Usage reports the thinking
    (``output_tokens_details.thinking_tokens`` / ``completion_tokens_details.reasoning_tokens``)
    inside the output total."""

    thinking_tokens: int = 2000
    reasoning_efforts: frozenset[str] | None = None

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
                return anthropic_error(
                    400, "invalid_request_error", "thinking.budget_tokens: must be >= 1024 and less than max_tokens"
                )
            spend = min(spend, budget)
        elif thinking.get("type") in ("disabled", "between_tools"):
            spend = 0
        text = json.dumps(answer_for(body["output_config"]["format"]["schema"], request_text(body)))
        spent = min(spend, max_tokens)
        room = max_tokens - spent
        cut = spent + tokens_of(text) > max_tokens
        answer = None if room == 0 else (text[: room * 4] if cut else text)
        return anthropic_message(
            answer,
            stop_reason="max_tokens" if cut else "end_turn",
            model=body["model"],
            input_tokens=tokens_of(request_text(body)),
            output_tokens=spent + (tokens_of(answer) if answer else 0),
            thinking="(thinking)" if spent else None,
            thinking_tokens=spent,
        )

    def completion(self, body: dict[str, Any]) -> Reply:
        if "max_tokens" in body:
            return openai_error(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "invalid_request_error",
            )
        effort = body.get("reasoning_effort")
        if effort is not None and self.reasoning_efforts is not None and effort not in self.reasoning_efforts:
            return openai_error(
                400,
                f"Unsupported value: '{effort}' is not supported with this model. Supported "
                f"values are: {', '.join(sorted(self.reasoning_efforts))}.",
                "invalid_request_error",
            )
        limit = body.get("max_completion_tokens") or 1_000_000
        schema = body["response_format"]["json_schema"]["schema"]
        text = json.dumps(answer_for(schema, request_text(body)))
        spent = min(0 if effort == "none" else self.thinking_tokens, limit)
        cut = spent + tokens_of(text) > limit
        answer = text[: (limit - spent) * 4] if cut else text
        return chat_completion(
            answer or None,
            finish_reason="length" if cut else "stop",
            model=body["model"],
            prompt_tokens=tokens_of(request_text(body)),
            completion_tokens=spent + tokens_of(answer),
            reasoning_tokens=spent,
        )


# --- a strict Messages API: the documented request limits and prompt-cache accounting --------
#
# The provider's facts are stated here on their own, not read from cyberjurors/config/catalog.py,
# so a wrong entry there shows up as a difference here. Minimum cacheable prefix per model (issue
# 13, the models' pages): a breakpoint on a shorter prefix caches nothing.
MIN_CACHEABLE = {"claude-sonnet-5-5": 512, "claude-sonnet-5": 1024, "claude-opus-4-7": 2048, "claude-haiku-4-5": 4096}
TTL_S = {"5m": 300.0, "1h": 3600.0}
LOOKBACK_BLOCKS = 20  # a breakpoint finds an earlier entry at most this many blocks before it
MAX_BREAKPOINTS = 4
MAX_IMAGES = 100
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_IMAGE_SIDE = 8000
MAX_REQUEST_BYTES = 32 * 1024 * 1024
EFFORTS = {"low", "medium", "high", "xhigh", "max"}
IMAGE_TYPES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/gif": "GIF", "image/webp": "WEBP"}
# tokens: a word in pieces of up to 5 letters, digits in threes, every other visible character one
# (whitespace is free): close to a BPE tokenizer's count on English and JSON, and deterministic
PIECE = re.compile(r"[A-Za-z]+|[0-9]{1,3}|[^\sA-Za-z0-9]")


def count_tokens(text: str) -> int:
    return sum(math.ceil(len(p) / 5) if p[0].isalpha() else 1 for p in PIECE.findall(text))


class Invalid(Exception):
    """A request the API would refuse with 400 invalid_request_error."""


def image_tokens(block: dict[str, Any]) -> int:
    """The API's count for an image: width x height / 750 after it is scaled to at most 1568 px a side
    and about 1.15 megapixels; the image is checked as the API checks it (type, size, dimensions)."""
    source = block.get("source") or {}
    if source.get("type") != "base64" or source.get("media_type") not in IMAGE_TYPES:
        raise Invalid(f"image source: base64 with media_type one of {sorted(IMAGE_TYPES)}")
    try:
        raw = base64.b64decode(source.get("data", ""), validate=True)
    except (binascii.Error, ValueError) as err:
        raise Invalid("image source data: not valid base64") from err
    if len(raw) > MAX_IMAGE_BYTES:
        raise Invalid(f"image exceeds 5 MB maximum: {len(raw)} bytes")
    try:
        with Image.open(io.BytesIO(raw)) as image:
            kind, (width, height) = image.format, image.size
    except Exception as err:  # Pillow raises several kinds for bytes that are no image
        raise Invalid("image source data: could not process image") from err
    if kind != IMAGE_TYPES[source["media_type"]]:
        raise Invalid(f"image media_type {source['media_type']} does not match the data ({kind})")
    if max(width, height) > MAX_IMAGE_SIDE:
        raise Invalid(f"image dimensions exceed max allowed size: {MAX_IMAGE_SIDE} pixels")
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return math.ceil(width * scale * height * scale / 750)


def block_tokens(block: dict[str, Any]) -> int:
    if block.get("type") == "text":
        return count_tokens(block.get("text", ""))
    if block.get("type") == "image":
        return image_tokens(block)
    raise Invalid(f"content block type {block.get('type')!r} is not one this server takes")


def prompt_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """tools, system, messages in the API's order, as content blocks; checks their shape."""
    if body.get("tools"):
        raise Invalid("tools: this server takes none")
    system = body.get("system") or []
    system = [{"type": "text", "text": system}] if isinstance(system, str) else system
    messages = body.get("messages") or []
    if not messages or messages[0].get("role") != "user":
        raise Invalid("messages: the first message must use the user role")
    for before, after in itertools.pairwise(messages):
        if before.get("role") == after.get("role"):
            raise Invalid("messages: roles must alternate between user and assistant")
    out = [*system]
    for message in messages:
        content = message.get("content")
        out += [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    for block in out:
        if block.get("type") == "text" and not block.get("text"):
            raise Invalid("text content blocks must be non-empty")
    return out


def breakpoints(blocks: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """(block index, ttl) of every cache_control, checked: at most 4, ephemeral, 1h ones before 5m ones."""
    found = []
    for i, block in enumerate(blocks):
        control = block.get("cache_control")
        if control is None:
            continue
        ttl = control.get("ttl", "5m")
        if control.get("type") != "ephemeral" or ttl not in TTL_S:
            raise Invalid("cache_control: type ephemeral with ttl 5m or 1h")
        found.append((i, ttl))
    if len(found) > MAX_BREAKPOINTS:
        raise Invalid(f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(found)}.")
    ttls = [ttl for _, ttl in found]
    if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
        raise Invalid("cache_control: a ttl='1h' entry must not come after a ttl='5m' entry")
    return found


def check_request(body: dict[str, Any]) -> None:
    """What the Messages API refuses besides the prompt's blocks: size, model, limits, thinking, output."""
    if len(json.dumps(body)) > MAX_REQUEST_BYTES:
        raise Invalid("request_too_large: request exceeds 32 MB")
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        raise Invalid("max_tokens: must be an integer >= 1")
    thinking = body.get("thinking") or {}
    if thinking.get("type") == "enabled" and not 1024 <= thinking.get("budget_tokens", 0) < body["max_tokens"]:
        raise Invalid("thinking.budget_tokens: must be >= 1024 and less than max_tokens")
    if thinking and thinking.get("type") not in ("enabled", "adaptive", "disabled", "between_tools"):
        raise Invalid(f"thinking.type: unknown {thinking.get('type')!r}")
    config = body.get("output_config") or {}
    if "effort" in config and config["effort"] not in EFFORTS:
        raise Invalid(f"output_config.effort: one of {sorted(EFFORTS)}")
    form = config.get("format")
    if form is not None:
        if form.get("type") != "json_schema" or not isinstance(form.get("schema"), dict):
            raise Invalid("output_config.format: type json_schema with a schema")
        closed_objects(form["schema"])


UNSUPPORTED_SCHEMA_KEYS = {
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "uniqueItems",
}


def closed_objects(node: Any, where: str = "schema") -> None:
    """Structured outputs' JSON Schema limits: objects set additionalProperties to false; no numeric or
    length constraints; minItems only 0 or 1 (the SDK's transform_schema moves the rest into descriptions)."""
    if isinstance(node, dict):
        if node.get("type") == "object" and node.get("additionalProperties") is not False:
            raise Invalid(f"output_config.format.{where}: objects must set additionalProperties to false")
        if node.get("type") in ("integer", "number", "string", "array") and UNSUPPORTED_SCHEMA_KEYS & node.keys():
            raise Invalid(
                f"output_config.format.{where}: {sorted(UNSUPPORTED_SCHEMA_KEYS & node.keys())} are not supported"
            )
        if node.get("type") == "array" and node.get("minItems", 0) not in (0, 1):
            raise Invalid(f"output_config.format.{where}: minItems must be 0 or 1")
        for key, value in node.items():
            if key != "properties" or not isinstance(value, dict):
                closed_objects(value, f"{where}.{key}")
            else:  # property names are names, not schema keywords
                for name, sub in value.items():
                    closed_objects(sub, f"{where}.properties.{name}")
    elif isinstance(node, list):
        for value in node:
            closed_objects(value, where)


@dataclass
class CacheEntry:
    ttl_s: float
    expires_at: float
    visible_at: float
    """a write can be read only once the response that wrote it is out (never, while its batch runs)"""


@dataclass
class Accounted:
    """One request's bill, as the server worked it out."""

    usage: dict[str, Any]
    blocks: int
    breakpoints: list[tuple[int, str]]
    prefix_tokens: list[int]
    """the prefix length at each breakpoint"""
    answers: str = ""
    """the title of the output schema (Focus, Selection, BallotDraft, ...): which stage asked"""


@dataclass
class PromptCache:
    """The prompt cache by prefix, as the API documents it: the key of a block is everything up to it
    (tools, system, messages) plus the request's model, thinking and output settings; a breakpoint
    reads the longest live entry at or up to 20 blocks before it, and writes its prefix if that is at
    least the model's minimum. A read refreshes the entry's TTL. Reads, writes (by TTL) and the
    uncached rest make up the request's input side."""

    clock: Callable[[], float] = time.monotonic
    entries: dict[str, CacheEntry] = field(default_factory=dict)
    deferred: list[str] | None = None
    """while a batch runs: its writes, made visible when it ends"""

    def keys(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> list[str]:
        settings = {k: body.get(k) for k in ("model", "thinking", "output_config")}
        chain = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
        out = []
        for block in blocks:
            chain.update(json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True).encode())
            out.append(chain.copy().hexdigest())
        return out

    def live(self, key: str, now: float) -> CacheEntry | None:
        entry = self.entries.get(key)
        return entry if entry and entry.visible_at <= now < entry.expires_at else None

    def account(self, body: dict[str, Any], blocks: list[dict[str, Any]], visible_after_s: float = 0.0) -> Accounted:
        marks = breakpoints(blocks)
        sizes = list(itertools.accumulate(block_tokens(b) for b in blocks))
        keys, now = self.keys(body, blocks), self.clock()
        hit = max(
            (i for b, _ in marks for i in range(b, max(b - LOOKBACK_BLOCKS - 1, -1), -1) if self.live(keys[i], now)),
            default=-1,
        )
        read = sizes[hit] if hit >= 0 else 0
        if hit >= 0:
            entry = self.entries[keys[hit]]
            entry.expires_at = now + entry.ttl_s
        minimum = MIN_CACHEABLE[body["model"]]
        written, by_ttl, start = [], {"5m": 0, "1h": 0}, read
        for b, ttl in marks:
            if b > hit and sizes[b] >= minimum:
                by_ttl[ttl] += sizes[b] - start
                start = sizes[b]
                written.append(keys[b])
                visible = math.inf if self.deferred is not None else now + visible_after_s
                self.entries[keys[b]] = CacheEntry(TTL_S[ttl], now + TTL_S[ttl], visible)
        if self.deferred is not None:
            self.deferred += written
        creation = by_ttl["5m"] + by_ttl["1h"]
        usage = {
            "input_tokens": sizes[-1] - read - creation,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": creation,
            "cache_creation": {"ephemeral_5m_input_tokens": by_ttl["5m"], "ephemeral_1h_input_tokens": by_ttl["1h"]},
        }
        return Accounted(usage, len(blocks), marks, [sizes[b] for b, _ in marks])

    def end_batch(self) -> None:
        now = self.clock()
        for key in self.deferred or []:
            if key in self.entries:
                self.entries[key].visible_at = now
        self.deferred = None


Answers = Callable[[dict[str, Any]], Any]


@dataclass
class StrictModel:
    """Plays the Messages API strictly: refuses what the API documents it refuses (400
    invalid_request_error, 404 for an unknown model), bills input by the prompt cache
    (``PromptCache``) and output by the answer's tokens, thinking included.

    The answer to a structured request comes from ``answers`` (given the request body; None = no
    opinion) or is a schema-valid filler (``answer_for``). A write becomes readable
    ``latency_s`` after the request arrived: calls sent at the same moment do not read each other's
    writes, as on the API, where an entry is readable once the response that writes it has begun."""

    cache: PromptCache = field(default_factory=PromptCache)
    answers: Answers | None = None
    thinking_tokens: int = 0
    latency_s: float = 0.0
    billed: list[Accounted] = field(default_factory=list)

    def __call__(self, received: Received) -> Reply:
        return self.message(received.body)

    def message(self, body: dict[str, Any]) -> Reply:
        if body.get("model") not in MIN_CACHEABLE:
            return anthropic_error(404, "not_found_error", f"model: {body.get('model')}")
        try:
            check_request(body)
            blocks = prompt_blocks(body)
            if sum(b.get("type") == "image" for b in blocks) > MAX_IMAGES:
                raise Invalid(f"too many images: at most {MAX_IMAGES} per request")
            bill = self.cache.account(body, blocks, self.latency_s)
        except Invalid as err:
            return anthropic_error(400, "invalid_request_error", str(err))
        bill.answers = ((body.get("output_config") or {}).get("format") or {}).get("schema", {}).get("title", "")
        self.billed.append(bill)
        return self.reply(body, bill)

    def reply(self, body: dict[str, Any], bill: Accounted) -> Reply:
        schema = body["output_config"]["format"]["schema"]
        answer = self.answers(body) if self.answers else None
        text = json.dumps(answer if answer is not None else answer_for(schema, request_text(body)))
        thinking = (body.get("thinking") or {}).get("type")
        spend = 0 if thinking in ("disabled", "between_tools") else self.thinking_tokens
        if thinking == "enabled":
            spend = min(spend, body["thinking"]["budget_tokens"])
        spent, tokens = min(spend, body["max_tokens"]), count_tokens(text)
        cut = spent + tokens > body["max_tokens"]
        reply = anthropic_message(
            None if cut else text,
            stop_reason="max_tokens" if cut else "end_turn",
            model=body["model"],
            output_tokens=min(spent + tokens, body["max_tokens"]),
            thinking="(thinking)" if spent else None,
            thinking_tokens=spent,
        )
        reply.delay_s = self.latency_s
        reply.body["usage"].update(bill.usage)
        bill.usage = reply.body["usage"]
        return reply

    def deferred(self) -> _Deferred:
        return _Deferred(self.cache)


@dataclass
class _Deferred:
    """Within it, cache writes stay unreadable until it ends: the entries of one batch run side by side."""

    cache: PromptCache

    def __enter__(self) -> None:
        self.cache.deferred = []

    def __exit__(self, *exc: object) -> None:
        self.cache.end_batch()


# --- the Message Batches API -----------------------------------------------------------------

BATCHES_PATH = "/v1/messages/batches"
Fault = Literal["errored", "expired", "invalid"]


@dataclass
class Batch:
    id: str
    requests: list[dict[str, Any]]
    created_at: datetime
    polls: int = 0
    status: Literal["in_progress", "canceling", "ended"] = "in_progress"
    results: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class MessageBatches:
    """The batch endpoints: create (each entry's custom_id checked, unique in its batch), retrieve
    (in_progress for ``polls_to_end`` retrieves, then every entry is answered by the server's
    ``respond`` function, side by side: no entry reads another's cache write), results as JSONL in
    the API's shapes (succeeded with the message, errored with the error, expired, canceled), and
    cancel. ``fault(custom_id, attempt, params)`` makes an entry come back errored (an api_error, or
    an invalid_request_error for "invalid") or expired; ``attempt`` counts from 1 over every batch that
    carried that custom_id. ``canceled(n)``: an operator
    cancels the n-th batch created (from 1) right after its creation. Results come in reverse order:
    the API does not keep the order of the requests either. ``unavailable(call, n)``: the n-th
    (from 1) "retrieve" or "results" call gets that status (a 5xx) or, for "drop", its connection
    closed without an answer, instead of being served."""

    polls_to_end: int = 1
    fault: Callable[[str, int, dict[str, Any]], Fault | None] = lambda custom_id, attempt, params: None
    canceled: Callable[[int], bool] = lambda n: False
    unavailable: Callable[[str, int], int | Literal["drop"] | None] = lambda call, n: None
    batches: dict[str, Batch] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    creates: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    """retrieve and results calls received, served or not"""

    def handle(self, received: Received, url: str, respond: Callable[[Received], Reply]) -> Reply:
        rest = received.path[len(BATCHES_PATH) :].strip("/").split("/")
        if received.method == "POST" and rest == [""]:
            return self.create(received.body)
        if received.method == "GET" and len(rest) <= 2:
            call = "retrieve" if len(rest) == 1 else "results"
            self.calls[call] = n = self.calls.get(call, 0) + 1
            if (down := self.unavailable(call, n)) == "drop":
                return Reply(drop=True)
            if down is not None:
                return anthropic_error(down, "api_error", "Internal server error")
        batch = self.batches.get(rest[0])
        if batch is None:
            return anthropic_error(404, "not_found_error", f"message batch {rest[0]} not found")
        if received.method == "GET" and len(rest) == 1:
            batch.polls += 1
            if batch.status != "ended" and batch.polls >= self.polls_to_end:
                self.process(batch, respond)
            return Reply(body=self.view(batch, url))
        if received.method == "GET" and rest[1:] == ["results"]:
            if batch.status != "ended":
                return anthropic_error(400, "invalid_request_error", "batch has not ended")
            return Reply(text="".join(json.dumps(r) + "\n" for r in batch.results))
        if received.method == "POST" and rest[1:] == ["cancel"]:
            self.cancel(batch.id)
            return Reply(body=self.view(batch, url))
        return anthropic_error(404, "not_found_error", f"{received.method} {received.path}")

    def create(self, body: dict[str, Any]) -> Reply:
        requests = body.get("requests") or []
        ids = [r.get("custom_id", "") for r in requests]
        if not requests or len(set(ids)) != len(ids) or not all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids):
            return anthropic_error(
                400,
                "invalid_request_error",
                "requests: custom_id must be unique in a batch and match ^[a-zA-Z0-9_-]{1,64}$",
            )
        self.creates += 1
        batch = Batch(
            f"msgbatch_{self.creates:04d}{hashlib.sha256(str(ids).encode()).hexdigest()[:12]}",
            requests,
            datetime.now(UTC),
        )
        self.batches[batch.id] = batch
        for custom_id in ids:
            self.attempts[custom_id] = self.attempts.get(custom_id, 0) + 1
        if self.canceled(self.creates):
            self.cancel(batch.id)
        return Reply(body=self.view(batch, ""))

    def process(self, batch: Batch, respond: Callable[[Received], Reply]) -> None:
        deferred = getattr(respond, "deferred", None)
        with deferred() if deferred else contextlib.nullcontext():
            for request in batch.requests:
                batch.results.append(self.result(request, respond))
        batch.results.reverse()
        self.end(batch)

    def result(self, request: dict[str, Any], respond: Callable[[Received], Reply]) -> dict[str, Any]:
        custom_id = request["custom_id"]
        fault = self.fault(custom_id, self.attempts[custom_id], request["params"])
        if fault == "expired":
            return {"custom_id": custom_id, "result": {"type": "expired"}}
        if fault == "errored":
            return errored(custom_id, "api_error", "Internal server error")
        if fault == "invalid":
            return errored(custom_id, "invalid_request_error", "messages: this request is refused")
        reply = respond(Received("POST", "/v1/messages", {}, request["params"]))
        if reply.status != 200:
            return errored(custom_id, reply.body["error"]["type"], reply.body["error"]["message"])
        return {"custom_id": custom_id, "result": {"type": "succeeded", "message": reply.body}}

    def cancel(self, batch_id: str) -> None:
        """An operator's cancel: entries not yet processed end canceled."""
        batch = self.batches[batch_id]
        if batch.status == "in_progress":
            batch.results = [{"custom_id": r["custom_id"], "result": {"type": "canceled"}} for r in batch.requests]
            self.end(batch)

    def end(self, batch: Batch) -> None:
        batch.status = "ended"
        kinds = [r["result"]["type"] for r in batch.results]
        batch.counts = {k: kinds.count(k) for k in ("succeeded", "errored", "expired", "canceled")}

    def view(self, batch: Batch, url: str) -> dict[str, Any]:
        ended = batch.status == "ended"
        counts = {
            "processing": 0 if ended else len(batch.requests),
            "succeeded": 0,
            "errored": 0,
            "expired": 0,
            "canceled": 0,
            **batch.counts,
        }
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": batch.status,
            "request_counts": counts,
            "created_at": batch.created_at.isoformat(),
            "expires_at": (batch.created_at + timedelta(hours=24)).isoformat(),
            "ended_at": datetime.now(UTC).isoformat() if ended else None,
            "cancel_initiated_at": None,
            "archived_at": None,
            "results_url": f"{url}{BATCHES_PATH}/{batch.id}/results" if ended else None,
        }


def errored(custom_id: str, error_type: str, message: str) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "result": {
            "type": "errored",
            "error": {"type": "error", "error": {"type": error_type, "message": message}, "request_id": "req_batch"},
        },
    }


@contextlib.contextmanager
def serving(server: ScriptedServer) -> Iterator[str]:
    """The server on a loop of its own in a thread, for code that runs its own event loop (the CLI's
    ``asyncio.run``, a command in a subprocess); yields its URL."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=lambda: (asyncio.set_event_loop(loop), loop.run_forever()), daemon=True)
    thread.start()
    url = asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=30)
    try:
        yield url
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()
