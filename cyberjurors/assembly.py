"""LLM backends behind the port in ``llm/port.py``."""

from __future__ import annotations

from .config import Provider, Settings
from .llm.port import LLM, GuardedLLM
from .llm.prices import PriceTable


def backend_for(provider: Provider, settings: Settings) -> LLM:
    """One provider's backend, with its own client."""
    match provider:
        case "anthropic":
            from .llm.backends.anthropic import AnthropicLLM

            return AnthropicLLM.from_settings(settings)
        case "openai":
            from .llm.backends.openai import OpenAICompatibleLLM

            return OpenAICompatibleLLM.from_settings(settings)
        case _:
            from .jury.offline import OfflineLLM

            return OfflineLLM(latency_s=settings.offline_latency_s, prompt_caching=settings.prompt_caching)


def build_llm(settings: Settings) -> GuardedLLM:
    """The configured backend, wrapped with the concurrency cap, rate limit, call log and metrics.
    When a model setting names its provider (``openai:...``, see ``routed.py``), the backend is a
    router over every provider the settings use; the cap and the rate limit stay per worker."""
    backend: LLM
    if settings.providers_named():
        from .llm.backends.routed import routed

        backend = routed(settings, lambda provider: backend_for(provider, settings))
    else:
        backend = backend_for(settings.backend, settings)
    return GuardedLLM(
        backend,
        settings.llm_concurrency,
        settings.llm_tokens_per_minute,
        settings.llm_call_log,
        PriceTable.for_settings(settings),
    )
