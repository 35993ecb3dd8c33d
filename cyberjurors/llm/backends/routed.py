"""Mixed-model juries across providers: a backend that holds backends and sends each call to the
one its model names (a small wrapper in the spirit of pydantic-ai's ``FallbackModel``, which
holds models too, but routes instead of falling back).

A model setting may carry its provider: ``anthropic:claude-sonnet-5-5``, ``openai:gpt-5-mini`` (the
OpenAI-compatible server at ``OPENAI_BASE_URL``), ``offline:anything``; a bare name goes to the
configured ``llm_backend``. So ``juror_models = ["anthropic:claude-sonnet-5-5",
"openai:qwen2.5-vl-72b"]`` seats jurors of both, round robin, each provider with its own client.
The provider sees the bare name; metrics and the call log are labelled with the backend that
answered and that name (``GuardedLLM.labels``), so cost is priced at that model's rate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ...config import LLMSettings, Provider, split_model
from ..port import LLM, LLMRequest, LLMResult, T


@dataclass
class RoutedLLM:
    default: Provider
    """where a model without a provider prefix goes"""
    backends: dict[Provider, LLM]

    @property
    def backend(self) -> str:
        """The case file's and verdict's backend: one name, or the providers joined ("anthropic+openai")."""
        return "+".join(sorted({b.backend for b in self.backends.values()}))

    def route(self, request: LLMRequest) -> tuple[LLM, LLMRequest]:
        provider, name = split_model(request.model)
        backend = self.backends[provider or self.default]
        return backend, replace(request, model=name)

    def labels(self, request: LLMRequest) -> tuple[str, str]:
        backend, routed = self.route(request)
        return backend.backend, getattr(backend, "model_label", None) or routed.model

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        backend, routed = self.route(request)
        return await backend.generate(routed, output_type)

    async def aclose(self) -> None:
        for backend in self.backends.values():
            close = getattr(backend, "aclose", None)
            if close is not None:
                await close()


def routed(settings: LLMSettings, build: Callable[[Provider], LLM]) -> RoutedLLM:
    """A router over the providers the model settings use, each backend built once by ``build``."""
    used = {split_model(m)[0] or settings.backend for m in settings.model_specs()}
    return RoutedLLM(settings.backend, {provider: build(provider) for provider in sorted(used)})
