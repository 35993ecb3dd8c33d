"""What the OpenAI-compatible backend learns about one model on one server, and how it reads the
server's refusals.

Per (base URL, model) a ``ServedModel`` holds the model's capabilities (``llm/capabilities.py``:
the catalog, then what the server says about itself, then ``llm_capabilities``), the structured-
output mode that worked, whether JSON mode is offered (for ``prompt``), and which tokenizer
endpoint the server has. The server is asked once, at the model's first call, where
``openai_server_info`` allows it:

* ``GET {base}/models``: vLLM lists each model's ``max_model_len``;
* ``GET {root}/props``: llama.cpp's ``llama-server`` gives ``default_generation_settings.n_ctx``
  (older builds: ``n_ctx``) and ``modalities.vision``;
* ``POST {root}/api/show``: Ollama gives ``capabilities`` (``vision``) and the ``num_ctx`` it was
  told in ``parameters`` (else it serves its default, ``OLLAMA_NUM_CTX``, whatever the model could);
* tokenizers, tried in turn at the first prompt that needs measuring: ``POST {root}/tokenize``
  (vLLM's ``prompt``, llama.cpp's ``content``), ``POST {root}/extras/tokenize/count``
  (llama-cpp-python's server, which has neither ``/props`` nor ``max_model_len``).

A refusal (``refusal_of``) is read by its status and words, as the servers word them (quoted in
``tests/unit/llm/backends/servers.py``): about the request's shape (``response_format``,
``json_schema``, tools), about images, or about the context length (with the window the server
really has, which then wins over any listing that claimed more).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import httpx2
import openai

from ...config import LLMSettings
from ...config.llm import StructuredOutput
from ...observability import metrics
from ..capabilities import Capabilities, ServerWord, lookup

log = logging.getLogger(__name__)

Mode = Literal["json_schema", "json_object_schema", "tool", "prompt"]
MODES: tuple[Mode, ...] = ("json_schema", "json_object_schema", "tool", "prompt")
Refusal = Literal["shape", "images", "context"]

PROBE_TIMEOUT_S = 10.0
OLLAMA_NUM_CTX = 4096  # what Ollama serves a model with unless num_ctx is set (its default since 0.6)
TOKEN_COUNTS_KEPT = 512

# the words of a refusal, by what it refuses (see the module's docstring for whose words these are)
CONTEXT_WORDS = re.compile(
    r"context[ _](length|window|size)|maximum context|exceeds? the available context|too many tokens|prompt is too long",
    re.I,
)
IMAGE_WORDS = re.compile(
    r"image|vision|mmproj|multimodal|"
    r'concatenate str \(not "list"\)|content must be a string|valid string',  # a text-only chat template's
    re.I,
)
SHAPE_WORDS = re.compile(
    r"response_format|json_schema|json_object|'text' or 'json_object'|\btools?\b|tool_choice|function|--jinja|"
    r"grammar|structured output|schema",
    re.I,
)
WINDOW_NUMBER = re.compile(r"maximum context length is (\d+)|context window of (\d+)|n_ctx[\"' :=]+(\d+)", re.I)


def refusal_of(err: openai.APIStatusError, had_images: bool) -> Refusal | None:
    """What a 400/422/500 refuses, from its words; None for any other failure (a status the
    backend reports as it is)."""
    if err.status_code not in (400, 413, 422, 500):
        return None
    words = f"{err.message} {err.body!s}"
    if CONTEXT_WORDS.search(words):
        return "context"
    if had_images and IMAGE_WORDS.search(words):
        return "images"
    if err.status_code != 413 and SHAPE_WORDS.search(words):
        return "shape"
    return None


def window_in(err: openai.APIStatusError) -> int | None:
    """The context window a refusal names (llama-cpp-python's and vLLM's "maximum context length is
    N", llama-server's ``n_ctx`` in the error body)."""
    body = err.body if isinstance(err.body, dict) else {}
    inner = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
    if isinstance(inner.get("n_ctx"), int):
        return int(inner["n_ctx"])
    found = WINDOW_NUMBER.search(f"{err.message} {err.body!s}")
    return next((int(g) for g in found.groups() if g), None) if found else None


@dataclass
class ServedModel:
    base_url: str
    model: str
    capabilities: Capabilities
    mode: Mode | None = None
    """the structured-output mode the server took (None: not known yet)"""
    json_mode: bool = True
    """prompt mode: the server takes response_format json_object"""
    tokenizer: str | None = None
    """the endpoint that counted a prompt ("" once none did)"""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    counts: OrderedDict[str, int] = field(default_factory=OrderedDict)

    @property
    def key(self) -> str:
        return f"{self.model} at {self.base_url}"

    def learnt(self, mode: Mode) -> None:
        """Remember the mode that worked; said once in the log, and as the metric's label."""
        if mode != self.mode:
            log.info("openai: %s answers structured output as %s", self.key, mode)
            metrics.record_structured_output("openai", self.model, mode, self.mode)
            self.mode = mode

    def refused_images(self) -> None:
        log.warning("openai: %s refused images: its roles read captions from now on", self.key)
        self.capabilities = self.capabilities.with_fact("images", False, "learnt from a refusal")

    def refused_length(self, window: int) -> None:
        log.warning("openai: %s has a context window of %d tokens (from its refusal)", self.key, window)
        self.capabilities = self.capabilities.with_fact("context_window", window, "learnt from a refusal")


class Servers:
    """The models of one OpenAI-compatible endpoint as far as they are known, each asked once."""

    def __init__(self, client: openai.AsyncOpenAI, settings: LLMSettings, structured_output: StructuredOutput):
        self.client, self.settings, self.structured_output = client, settings, structured_output
        self.base_url = str(client.base_url).rstrip("/")
        self.root = self.base_url.removesuffix("/v1")
        self._models: dict[str, ServedModel] = {}
        self._asking = asyncio.Lock()

    async def of(self, model: str) -> ServedModel:
        if model not in self._models:
            async with self._asking:
                if model not in self._models:
                    word = await self._ask(model) if self.settings.openai_server_info else None
                    served = ServedModel(self.base_url, model, lookup(model, self.settings, word))
                    if self.structured_output != "auto":
                        served.mode = self.structured_output
                    self._models[model] = served
        return self._models[model]

    def known(self) -> dict[str, ServedModel]:
        return dict(self._models)

    async def _get(self, url: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON a server endpoint answers, or None (not there, not JSON, not reachable)."""
        options: Any = {"max_retries": 0, "timeout": PROBE_TIMEOUT_S}
        try:
            if body is None:
                response = await self.client.get(url, cast_to=httpx2.Response, options=options)
            else:
                response = await self.client.post(url, cast_to=httpx2.Response, body=body, options=options)
            return response.json()
        except (openai.APIError, ValueError):
            return None

    async def _ask(self, model: str) -> ServerWord | None:
        """What the server says about the model: its window and whether it reads images."""
        listed = await self._get(f"{self.base_url}/models")
        entries = listed.get("data", []) if isinstance(listed, dict) else []
        entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == model), None)
        if entry is None and len(entries) == 1 and isinstance(entries[0], dict):
            entry = entries[0]  # a server of one model answers to any name (llama-cpp-python's, llama-server's)
        served_as = str(entry["id"]) if entry is not None and entry.get("id") else None
        if entry is not None and isinstance(entry.get("max_model_len"), int):
            return ServerWord(
                context_window=entry["max_model_len"], source="server /v1/models max_model_len", served_as=served_as
            )
        if "api.openai.com" in self.base_url:  # OpenAI's own API lists no window and has neither of the others
            return ServerWord(served_as=served_as)
        props = await self._get(f"{self.root}/props")
        if isinstance(props, dict) and (word := _llama_server(props)) is not None:
            return replace(word, served_as=served_as)
        shown = await self._get(f"{self.root}/api/show", {"model": model})
        if isinstance(shown, dict) and ("capabilities" in shown or "model_info" in shown):
            return replace(_ollama(shown), served_as=served_as)
        return ServerWord(served_as=served_as)

    async def count(self, served: ServedModel, text: str) -> int | None:
        """The server's token count of ``text`` (None: it has no tokenizer endpoint we know)."""
        if text in served.counts:
            served.counts.move_to_end(text)
            return served.counts[text]
        endpoints = [served.tokenizer] if served.tokenizer else [] if served.tokenizer == "" else list(TOKENIZERS)
        for endpoint in endpoints:
            answer = await self._get(f"{self.root}{endpoint}", TOKENIZERS[endpoint](served.model, text))
            counted = _counted(answer)
            if counted is not None:
                served.tokenizer = endpoint
                served.counts[text] = counted
                if len(served.counts) > TOKEN_COUNTS_KEPT:
                    served.counts.popitem(last=False)
                return counted
        served.tokenizer = ""
        return None


# vLLM reads "prompt", llama-server "content": one body serves both (each ignores the other's field)
TOKENIZERS = {
    "/tokenize": lambda model, text: {"model": model, "prompt": text, "content": text},
    "/extras/tokenize/count": lambda model, text: {"input": text},
}


def _counted(answer: Any) -> int | None:
    if not isinstance(answer, dict):
        return None
    if isinstance(answer.get("count"), int):
        return int(answer["count"])
    tokens = answer.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


def _llama_server(props: dict[str, Any]) -> ServerWord | None:
    settings = props.get("default_generation_settings")
    n_ctx = (settings.get("n_ctx") if isinstance(settings, dict) else None) or props.get("n_ctx")
    modalities = props.get("modalities")
    vision = modalities.get("vision") if isinstance(modalities, dict) else None
    if not isinstance(n_ctx, int) and not isinstance(vision, bool):
        return None
    return ServerWord(
        images=vision if isinstance(vision, bool) else None,
        context_window=n_ctx if isinstance(n_ctx, int) else None,
        source="server /props",
    )


def _ollama(shown: dict[str, Any]) -> ServerWord:
    found = re.search(r"^num_ctx\s+(\d+)", str(shown.get("parameters") or ""), re.M)
    info = shown.get("model_info")
    info = info if isinstance(info, dict) else {}
    trained = next((v for k, v in info.items() if k.endswith(".context_length") and isinstance(v, int)), None)
    window = int(found.group(1)) if found else min(trained or OLLAMA_NUM_CTX, OLLAMA_NUM_CTX)
    capabilities = shown.get("capabilities")
    return ServerWord(
        images="vision" in capabilities if isinstance(capabilities, list) else None,
        context_window=window,
        source="server /api/show",
    )
