"""LLM backends behind the port in ``llm.py``."""

from __future__ import annotations

from ..config import Settings
from ..llm import LLM, GuardedLLM
from ..metrics import PriceTable


def build_llm(settings: Settings) -> GuardedLLM:
    """The configured backend, wrapped with the concurrency cap, rate limit, call log and metrics."""
    backend: LLM
    match settings.backend:
        case "anthropic":
            from .anthropic import AnthropicLLM

            backend = AnthropicLLM.from_settings(settings)
        case "openai":
            from .openai import OpenAICompatibleLLM

            backend = OpenAICompatibleLLM.from_settings(settings)
        case _:
            from .offline import OfflineLLM

            backend = OfflineLLM(latency_s=settings.offline_latency_s, prompt_caching=settings.prompt_caching)
    return GuardedLLM(backend, settings.llm_concurrency, settings.llm_tokens_per_minute, settings.llm_call_log,
                      PriceTable(settings.llm_prices))
