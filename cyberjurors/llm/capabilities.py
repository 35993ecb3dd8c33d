"""What a model can read: images or not, its context window, its output limit.

Three sources, the later winning fact by fact: the dated catalog (``config/catalog.py``, by any of
the model's names), what the server says about the model it serves (``ServerWord``, read by the
OpenAI-compatible backend from vLLM's ``/v1/models``, llama.cpp's ``/props``, Ollama's
``/api/show``, and learnt from its refusals), and the operator's ``llm_capabilities``. A fact none
of them gives is unknown: images are then sent (a refusal teaches otherwise) and a prompt is not
fitted to any window.

``lookup`` is the jury's way to ask (no server involved: catalog and settings); the backend builds
the same ``Capabilities`` with the server's word folded in.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..config import LLMSettings, ModelCapabilities, split_model
from ..config.catalog import capabilities as catalog_entry
from ..config.catalog import normalised

FACTS = ("images", "context_window", "max_output_tokens", "plumbing_only")


@dataclass(frozen=True)
class Capabilities:
    images: bool | None = None
    """None: unknown, images are sent"""
    context_window: int | None = None
    """None: unknown, no prompt is fitted"""
    max_output_tokens: int | None = None
    plumbing_only: bool = False
    sources: dict[str, str] = field(default_factory=dict)
    """fact -> where it came from: "catalog", "llm_capabilities", "server /props", ..."""

    def with_fact(self, fact: str, value: object, source: str) -> Capabilities:
        changes: dict[str, Any] = {fact: value, "sources": {**self.sources, fact: source}}
        return replace(self, **changes)


@dataclass(frozen=True)
class ServerWord:
    """What a server said about the model it serves (each None where it said nothing)."""

    images: bool | None = None
    context_window: int | None = None
    source: str = "server"
    served_as: str | None = None
    """the name the server lists the model under (llama-cpp-python's: the GGUF's path), by which the
    catalog may know it when it does not know the name the settings give"""


def setting_for(model: str, settings: LLMSettings) -> ModelCapabilities | None:
    """The operator's entry for a model: by the name a model setting gives it (provider prefix
    and all, or without it), else by its normalised name."""
    table = settings.llm_capabilities
    bare = split_model(model)[1]
    for name in (model, bare):
        if name in table:
            return table[name]
    wanted = normalised(bare)
    return next((entry for key, entry in table.items() if normalised(split_model(key)[1]) == wanted), None)


def lookup(model: str, settings: LLMSettings, server: ServerWord | None = None) -> Capabilities:
    """The model's capabilities: the catalog's, the server's word over them, the settings' over all."""
    found = Capabilities()
    entry, source = catalog_entry(split_model(model)[1]), "catalog"
    if entry is None and server is not None and server.served_as:
        entry, source = catalog_entry(server.served_as), f"catalog, as the server lists it ({server.served_as})"
    if entry is not None:
        for fact in FACTS:
            found = found.with_fact(fact, getattr(entry, fact), source)
    if server is not None:
        for fact in ("images", "context_window"):
            if (value := getattr(server, fact)) is not None:
                found = found.with_fact(fact, value, server.source)
    given = setting_for(model, settings)
    if given is not None:
        for fact in FACTS:
            if (value := getattr(given, fact)) is not None:
                found = found.with_fact(fact, value, "llm_capabilities")
    return found


def plumbing_only(model: str, settings: LLMSettings) -> bool:
    """Whether a model is one whose answers show the plumbing only (a tiny model): its verdicts are
    labelled like the offline stand-in's (``config.catalog.PLUMBING_LABEL``)."""
    return lookup(model, settings).plumbing_only
