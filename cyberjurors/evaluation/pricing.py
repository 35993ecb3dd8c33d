"""What a run's USD figures were computed with: each model's prices, where they came from (the
dated list of config/catalog.py, the operator's llm_prices, genai-prices' bundled list) and the line a
report prints for them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from pydantic import BaseModel, ConfigDict, Field

from ..config import Settings, price_list, split_model
from ..config.catalog import facts
from ..config.price_list import Listed
from ..llm.prices import CATALOG, FREE_BACKENDS, STAND_IN, PriceTable
from ..llm.prices import UNPRICED as UNPRICED_SOURCE

UNPRICED = "no price in llm_prices or genai-prices: its calls are left out of every USD figure"


class ModelPrice(BaseModel):
    """The prices a run's costs were computed with, for one model: USD per million tokens, from the
    same place the cost metric and ``tokens.cost_usd`` took them (``source``)."""

    model_config = ConfigDict(extra="forbid")

    model: str
    source: str = Field(
        "",
        description="catalog (config/catalog.py's dated list price), llm_prices (set by the operator), "
        "genai-prices <version> (its bundled list, for a model neither has), stand-in, or unpriced",
    )
    input: float | None = None
    output: float | None = None
    cache_write: float | None = Field(None, description="5-minute TTL")
    cache_write_1h: float | None = None
    cache_read: float | None = None
    batch_share: float | None = Field(
        None,
        description="the share of each price paid, when the run was priced at "
        "the Message Batches price; None: full price",
    )
    checked: date | None = Field(None, description="when the list price was checked (config/catalog.py)")
    sources: list[str] = Field(default_factory=list, description="the pages the price is from")
    note: str = Field("", description="why a price is missing, or where a price that is not the dated list's came from")


def model_prices(settings: Settings, models: Sequence[str], backend: str, batch: bool) -> list[ModelPrice]:
    """What each model used was priced at, with the list price's date and sources when the table's
    entry is config/catalog.py's, or genai-prices' provider and pricing pages when it came from there."""
    table = PriceTable.for_settings(settings)
    found = []
    for spec in models:
        provider, name = split_model(spec)
        if (provider or backend) in FREE_BACKENDS:
            found.append(
                ModelPrice(model=spec, source=STAND_IN, note=f"{provider or backend} stand-in: not priced, cost 0")
            )
            continue
        listing = table.listing(provider or backend, name)
        if listing is None:
            found.append(ModelPrice(model=spec, source=UNPRICED_SOURCE, note=UNPRICED))
        elif listing.listed is not None:
            found.append(_listed_price(spec, listing.listed, batch))
        else:
            assert listing.prices is not None
            price, listed = listing.prices, facts(name)
            dated = listing.source == CATALOG and listed is not None
            found.append(
                ModelPrice(
                    model=spec,
                    source=listing.provenance,
                    input=price.input,
                    output=price.output,
                    cache_write=price.cache_write,
                    cache_write_1h=price.write_1h,
                    cache_read=price.cache_read,
                    batch_share=price.batch if batch else None,
                    checked=listed.checked if dated and listed else None,
                    sources=list(listed.sources) if dated and listed else [],
                    note=listed.note if dated and listed else "set in llm_prices: no date or source",
                )
            )
    return found


def _listed_price(spec: str, listed: Listed, batch: bool) -> ModelPrice:
    """A genai-prices entry, at the prices it charges each kind today: a kind without a price of its
    own at the price of the kind it is part of (a 1-hour write as a write, a write or a read as input)."""
    p = listed.per_million()
    write = p.cache_write if p.cache_write is not None else p.input
    notes = [f"{price_list.SOURCE}: {listed.provider_id}'s list price for {listed.model.id}, bundled with the package"]
    if p.tiered:
        notes.append("the lowest tier shown: costs apply the higher prices past the tier's input size")
    if batch:
        notes.append("at genai-prices' batch price where it lists one")
    return ModelPrice(
        model=spec,
        source=price_list.SOURCE,
        input=p.input,
        output=p.output,
        cache_write=write,
        cache_write_1h=p.cache_write_1h if p.cache_write_1h is not None else write,
        cache_read=p.cache_read if p.cache_read is not None else p.input,
        sources=list(listed.pricing_pages),
        note="; ".join(notes),
    )


def price_line(p: ModelPrice) -> str:
    if p.input is None:
        return f"{p.model}: {p.note}"
    line = (
        f"{p.model}: input {p.input:g}, output {p.output:g}, cache write {p.cache_write:g} (5 min) / "
        f"{p.cache_write_1h:g} (1 h), cache read {p.cache_read:g} USD per million tokens"
    )
    if p.batch_share is not None:
        line += f", x{p.batch_share:g} at the batch price"
    line += f"; from {p.source}" if p.source else ""
    line += f"; checked {p.checked.isoformat()}" if p.checked else ""
    line += f"; sources: {', '.join(p.sources)}" if p.sources else ""
    return line + (f" ({p.note})" if p.note else "")
