"""What a model call costs: USD per million tokens by model and token kind (the setting
``llm_prices``; by default the dated, sourced list prices of ``config/catalog.py``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..config.catalog import TokenPrices, find
from ..schemas import Usage

log = logging.getLogger("cyberjurors.metrics")
FREE_BACKENDS = {"offline", "scripted"}  # they bill nothing, whatever the model name says


class PriceTable:
    """USD per million tokens, by model and token kind (setting ``llm_prices``; by default the dated,
    sourced list prices of config/catalog.py).

    A model is priced by its exact name, else as a dated snapshot of a table key (so
    "claude-sonnet-5-5" also prices "claude-sonnet-5-5-20260101", and nothing prices an unknown
    "claude-sonnet-5-6"). The offline and
    scripted backends cost nothing. A model not in the table costs 0 and is counted in
    ``cyberjurors_llm_unpriced_calls_total``.
    """

    def __init__(self, prices: Mapping[str, TokenPrices] | None = None):
        self.prices = dict(prices or {})
        self._warned: set[str] = set()

    def price(self, model: str) -> TokenPrices | None:
        return find(self.prices, model)

    def cost(self, backend: str, model: str, usage: Usage, batch: bool = False) -> float | None:
        """USD for one call's usage (or a sum of one model's calls); None when the model has no
        price. Cache writes are priced by TTL; ``batch``: made through the Message Batches API."""
        if backend in FREE_BACKENDS:
            return 0.0
        price = self.price(model)
        if price is None:
            return None
        write_5m = usage.cache_write_tokens - usage.cache_write_1h_tokens
        full = (
            usage.input_tokens * price.input
            + usage.output_tokens * price.output
            + usage.cache_read_tokens * price.cache_read
            + write_5m * price.cache_write
            + usage.cache_write_1h_tokens * price.write_1h
        ) / 1e6
        return full * price.batch if batch else full

    def warn_once(self, model: str) -> None:
        if model not in self._warned:
            self._warned.add(model)
            log.warning("no price for model %r in llm_prices: its cost is counted as 0", model)
