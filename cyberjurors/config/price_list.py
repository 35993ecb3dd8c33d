"""The maintained price list behind the dated catalog: genai-prices (Pydantic's), for a model that
neither ``llm_prices`` nor ``config/catalog.py`` lists (a model called through the OpenAI-compatible
backend, a Claude model newer or older than the catalog's).

Offline by construction: the list ships inside the installed wheel (``genai_prices.data``), and this
module prices from a snapshot of its own made from that data. genai-prices fetches newer data only
when something starts its ``UpdatePrices``; nothing here does, and a snapshot another library of the
same process fetched is not the one used here. So a price is always the pinned version's (the
lockfiles'), and that version is named with every cost (``SOURCE``). Loaded on first use, in about
half a second: a worker whose models are all in the table never loads it.

Which provider's list price applies: the anthropic backend's calls are Anthropic's; the OpenAI-
compatible backend's are those of the provider its base URL belongs to (OpenAI's when none is set),
and where the URL is no provider genai-prices knows (a self-hosted server, a gateway), of the
provider whose model the name is. A model that provider does not list is not priced: no other
provider's price is taken for it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot
    from genai_prices.types import ModelInfo, Provider

NAME = "genai-prices"
SOURCE = f"{NAME} {version(NAME)}"
"""How a cost priced from this list names its source: the package and its version."""


@dataclass(frozen=True)
class Listed:
    """One model as genai-prices lists it at one provider."""

    provider: Provider
    model: ModelInfo

    @property
    def provider_id(self) -> str:
        return self.provider.id

    @property
    def pricing_pages(self) -> tuple[str, ...]:
        return tuple(self.provider.pricing_urls or ())

    def per_million(self, at: datetime | None = None) -> ListPrices:
        """Its prices on a date (today by default) by our token kinds."""
        price = self.model.get_prices(at or datetime.now(UTC))
        kinds = {
            "input": price.input_mtok,
            "output": price.output_mtok,
            "cache_read": price.cache_read_mtok,
            "cache_write": price.cache_write_mtok,
            "cache_write_1h": price.cache_write_1h_mtok,
        }
        tiered = any(v is not None and not isinstance(v, Decimal) for v in kinds.values())
        return ListPrices(**{k: _base(v) for k, v in kinds.items()}, tiered=tiered)

    def cost(self, tokens: Tokens, batch: bool = False, at: datetime | None = None) -> float:
        """USD for the tokens, with genai-prices' own rules (tiers, the price on the date, the batch
        price where the provider has one)."""
        from genai_prices import Usage

        usage = Usage(
            input_tokens=tokens.input + tokens.cache_read + tokens.cache_write,  # its input counts them all
            cache_read_tokens=tokens.cache_read,
            cache_write_tokens=tokens.cache_write,
            cache_write_1h_tokens=tokens.cache_write_1h,
            output_tokens=tokens.output,
        )
        price = self.model.calc_price(
            usage,
            self.provider,
            genai_request_timestamp=at or datetime.now(UTC),
            price_context={"processing": "batch"} if batch else None,
        )
        return float(price.total_price)


@dataclass(frozen=True)
class ListPrices:
    """USD per million tokens of each kind as the list gives them (None: no price of its own for that
    kind; genai-prices charges those tokens at the price of the kind they are part of: a 1-hour write
    as a write, a write or a read as input).
    Where a price rises past an input size (``tiered``), these are the lowest tier's; costs apply
    every tier."""

    input: float | None
    output: float | None
    cache_read: float | None
    cache_write: float | None
    cache_write_1h: float | None
    tiered: bool


@dataclass(frozen=True)
class Tokens:
    """A call's tokens as we count them: ``input`` uncached, the cache kinds apart; ``output`` with
    the thinking; ``cache_write_1h`` a part of ``cache_write``."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0


def _base(value: Any) -> float | None:
    if value is None:
        return None
    return float(value if isinstance(value, Decimal) else value.base)


@functools.cache
def _snapshot() -> DataSnapshot:
    """The bundled list, in a snapshot of ours (see the module's docstring)."""
    from genai_prices import data
    from genai_prices.data_snapshot import DataSnapshot

    return DataSnapshot(providers=data.providers, from_auto_update=False)


@functools.cache
def lookup(backend: str, model: str, base_url: str | None = None) -> Listed | None:
    """The list's entry for a call to ``model`` through ``backend`` (anthropic or openai; any other
    has no list price), or None when genai-prices has none."""
    snapshot = _snapshot()
    if backend == "anthropic":
        places: list[dict[str, str | None]] = [{"provider_id": "anthropic"}]
    elif backend == "openai" and base_url:
        # the URL's provider; a URL genai-prices does not know (self-hosted, a gateway): the model's
        places = [{"provider_api_url": base_url}, {}]
    elif backend == "openai":
        places = [{"provider_id": "openai"}]
    else:
        return None
    for place in places:
        try:
            provider = snapshot.find_provider(model.lower(), place.get("provider_id"), place.get("provider_api_url"))
        except LookupError:
            continue  # no such provider: the next way of finding one
        found = provider.find_model(model, all_providers=snapshot.providers)
        return Listed(provider, found) if found is not None else None
    return None
