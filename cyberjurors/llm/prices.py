"""What a model call costs, and where its prices came from: USD per million tokens by model and token
kind from the setting ``llm_prices`` (by default the dated, sourced list prices of
``config/catalog.py``), else from genai-prices' bundled list (``config/price_list.py``,
``llm_prices_fallback``). A model neither knows is unpriced, and said to be so wherever cost is
reported: never a silent 0."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from ..config import LLMSettings, price_list
from ..config.catalog import TokenPrices, facts, find
from ..schemas import Usage

log = logging.getLogger("cyberjurors.metrics")
FREE_BACKENDS = {"offline", "scripted"}  # they bill nothing, whatever the model name says

# where a price came from: the label of the cost metric, the key of Usage.cost_sources
CATALOG = "catalog"  # config/catalog.py's dated list price (the default llm_prices)
SETTING = "llm_prices"  # an llm_prices entry that is not the catalog's
GENAI = price_list.NAME  # genai-prices' bundled list (Usage.cost_sources names its version)
STAND_IN = "stand-in"  # the offline and scripted backends: nothing billed
UNPRICED = "unpriced"  # no source knows the model: what its calls cost is not known


@dataclass(frozen=True)
class Listing:
    """One model's prices and their provenance, in USD per million tokens."""

    source: str  # CATALOG, SETTING or GENAI
    prices: TokenPrices | None  # the table's (CATALOG, SETTING)
    listed: price_list.Listed | None = None  # genai-prices' entry (GENAI)

    @property
    def provenance(self) -> str:
        """The source as a cost names it: genai-prices with its version."""
        return price_list.SOURCE if self.source == GENAI else self.source


@dataclass(frozen=True)
class Cost:
    """One call's cost (or a sum of one model's calls): ``usd`` None when unpriced; ``source`` the
    metric's label (CATALOG, SETTING, GENAI, STAND_IN or UNPRICED); ``provenance`` the key of
    ``Usage.cost_sources`` (genai-prices with its version), empty when nothing was priced."""

    usd: float | None
    source: str
    provenance: str = ""

    def on(self, usage: Usage) -> Usage:
        """The usage with this cost: cost_usd, cost_sources, unpriced_calls."""
        if self.usd is None:
            return usage.model_copy(update={"cost_usd": 0.0, "cost_sources": {}, "unpriced_calls": 1})
        sources = {self.provenance: self.usd} if self.provenance else {}
        return usage.model_copy(update={"cost_usd": self.usd, "cost_sources": sources, "unpriced_calls": 0})


class PriceTable:
    """USD per million tokens, by model and token kind (setting ``llm_prices``; by default the dated,
    sourced list prices of config/catalog.py), with genai-prices' list behind it (``fallback``).

    A model is priced by its exact name in the table, else as a dated snapshot of a table key (so
    "claude-sonnet-5-5" also prices "claude-sonnet-5-5-20260101", and nothing prices an unknown
    "claude-sonnet-5-6"), else from genai-prices' list at the provider the call goes to
    (``config/price_list.py``). The offline and scripted backends cost nothing. A model no source
    knows is unpriced: counted in ``cyberjurors_llm_unpriced_calls_total`` and ``Usage.unpriced_calls``,
    left out of ``cost_usd``, and warned about once.
    """

    def __init__(
        self,
        prices: Mapping[str, TokenPrices] | None = None,
        *,
        fallback: bool = True,
        openai_base_url: str | None = None,
    ):
        self.prices = dict(prices or {})
        self.fallback = fallback
        self.openai_base_url = openai_base_url
        self._said: set[tuple[str, str, int]] = set()

    @classmethod
    def for_settings(cls, settings: LLMSettings) -> PriceTable:
        return cls(settings.llm_prices, fallback=settings.llm_prices_fallback, openai_base_url=settings.openai_base_url)

    def price(self, model: str) -> TokenPrices | None:
        """The table's price (``llm_prices``) alone."""
        return find(self.prices, model)

    def listing(self, backend: str, model: str) -> Listing | None:
        """Where ``model``'s prices come from for a call through ``backend``, or None: unpriced."""
        price = self.price(model)
        if price is not None:
            listed = facts(model)
            return Listing(CATALOG if listed is not None and listed.prices == price else SETTING, price)
        if not self.fallback:
            return None
        found = price_list.lookup(backend, model, self.openai_base_url if backend == "openai" else None)
        return Listing(GENAI, None, found) if found is not None else None

    def quote(self, backend: str, model: str, usage: Usage, batch: bool = False) -> Cost:
        """What one call's usage (or a sum of one model's calls) cost and at whose prices. Cache
        writes are priced by TTL; ``batch``: made through the Message Batches API."""
        if backend in FREE_BACKENDS:
            return Cost(0.0, STAND_IN)
        listing = self.listing(backend, model)
        if listing is None:
            return Cost(None, UNPRICED)
        if listing.listed is not None:
            usd = listing.listed.cost(tokens_of(usage), batch=batch)
            self._say_once(
                backend,
                model,
                logging.INFO,
                f"model %r (%s backend) is priced from {price_list.SOURCE}: {listing.listed.provider_id}'s list "
                "price (set it in llm_prices to use your own)",
            )
        else:
            assert listing.prices is not None
            usd = by_table(listing.prices, usage, batch)
        return Cost(usd, listing.source, listing.provenance)

    def cost(self, backend: str, model: str, usage: Usage, batch: bool = False) -> float | None:
        """USD for the usage; None when the model has no price anywhere."""
        return self.quote(backend, model, usage, batch).usd

    def warn_once(self, backend: str, model: str) -> None:
        fallback = f" or {price_list.SOURCE}" if self.fallback else ""
        self._say_once(
            backend,
            model,
            logging.WARNING,
            f"no price for model %r (%s backend) in llm_prices{fallback}: its calls are counted as unpriced "
            "(cyberjurors_llm_unpriced_calls_total, tokens.unpriced_calls) and left out of cost_usd; set its "
            "price in llm_prices",
        )

    def _say_once(self, backend: str, model: str, level: int, message: str) -> None:
        if (backend, model, level) not in self._said:
            self._said.add((backend, model, level))
            log.log(level, message, model, backend)


def tokens_of(usage: Usage) -> price_list.Tokens:
    return price_list.Tokens(
        input=usage.input_tokens,
        output=usage.output_tokens,
        cache_read=usage.cache_read_tokens,
        cache_write=usage.cache_write_tokens,
        cache_write_1h=usage.cache_write_1h_tokens,
    )


def by_table(price: TokenPrices, usage: Usage, batch: bool) -> float:
    """USD at a table price; thinking is inside output, billed once."""
    write_5m = usage.cache_write_tokens - usage.cache_write_1h_tokens
    full = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
        + write_5m * price.cache_write
        + usage.cache_write_1h_tokens * price.write_1h
    ) / 1e6
    return full * price.batch if batch else full
