"""Prices that are dated and sourced (issue 13, item 2): the table in config/catalog.py, the cost of a
call by token kind, cache TTL and batch, and what the cost metric and a call's usage record."""

from __future__ import annotations

from datetime import date
from urllib.parse import urlparse

import pytest
from prometheus_client import REGISTRY

from cyberjurors.config import Settings
from cyberjurors.config.catalog import MODELS, TokenPrices, facts, list_prices
from cyberjurors.llm.port import GuardedLLM, LLMRequest, LLMResult, TextPart
from cyberjurors.llm.prices import PriceTable
from cyberjurors.schemas import Selection, Usage

# Sonnet 5.5: 1M uncached input, 100k output of which 40k thinking, 2M cache reads, 300k cache
# writes of which 100k with the 1-hour TTL
USAGE = Usage(
    input_tokens=1_000_000,
    output_tokens=100_000,
    thinking_tokens=40_000,
    cache_read_tokens=2_000_000,
    cache_write_tokens=300_000,
    cache_write_1h_tokens=100_000,
)
# $2 + 0.1M x $10 + 2M x $0.20 + 0.2M x $2.50 + 0.1M x $4 = 2 + 1 + 0.4 + 0.5 + 0.4
SONNET_5_5_COST = 4.30


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_model_has_a_date_and_sources(model: str) -> None:
    entry = MODELS[model]
    assert date(2026, 1, 1) <= entry.checked
    assert entry.sources and all(urlparse(s).scheme == "https" and urlparse(s).netloc for s in entry.sources)
    assert any(urlparse(s).netloc == "platform.claude.com" for s in entry.sources)  # the provider's own pages
    assert entry.prices.input > 0 and entry.prices.output > 0 and entry.min_cacheable_tokens >= 512


@pytest.mark.parametrize("model", sorted(MODELS))
def test_cache_and_batch_rates_follow_the_providers_multipliers(model: str) -> None:
    p = MODELS[model].prices
    assert p.cache_write == pytest.approx(1.25 * p.input)  # 5-minute write
    assert p.write_1h == pytest.approx(2 * p.input)  # 1-hour write
    assert p.cache_read == pytest.approx(0.1 * p.input)
    assert p.batch == 0.5


def test_sonnet_5_5_as_its_page_lists_it() -> None:
    p = MODELS["claude-sonnet-5-5"].prices
    assert (p.input, p.output, p.cache_write, p.write_1h, p.cache_read) == (2.0, 10.0, 2.5, 4.0, 0.2)
    assert facts("claude-sonnet-5-5-20260928") is MODELS["claude-sonnet-5-5"]
    assert facts("claude-sonnet-5-20260630") is MODELS["claude-sonnet-5"]  # a snapshot of Sonnet 5, not of 5.5


def test_the_cost_of_a_known_usage_by_hand() -> None:
    table = PriceTable(list_prices())
    assert table.cost("anthropic", "claude-sonnet-5-5", USAGE) == pytest.approx(SONNET_5_5_COST)
    assert table.cost("anthropic", "claude-sonnet-5-5", USAGE, batch=True) == pytest.approx(SONNET_5_5_COST / 2)
    # thinking is billed inside output, once
    assert table.cost(
        "anthropic", "claude-sonnet-5-5", USAGE.model_copy(update={"thinking_tokens": 0})
    ) == pytest.approx(SONNET_5_5_COST)
    # the same writes all with the 5-minute TTL: 300k x $2.50 instead of 200k x $2.50 + 100k x $4
    five_minutes = USAGE.model_copy(update={"cache_write_1h_tokens": 0})
    assert table.cost("anthropic", "claude-sonnet-5-5", five_minutes) == pytest.approx(SONNET_5_5_COST - 0.15)
    assert table.cost("anthropic", "claude-haiku-4-5", USAGE) == pytest.approx(SONNET_5_5_COST / 2)
    assert table.cost("offline", "claude-sonnet-5-5", USAGE) == 0
    assert table.cost("anthropic", "not-a-listed-model", USAGE) is None


def test_llm_prices_default_to_the_table_and_can_still_be_overridden() -> None:
    assert Settings().llm_prices == list_prices()
    mine = Settings(llm_prices={"claude-sonnet-5-5": {"input": 1, "output": 4, "cache_read": 0.05, "cache_write": 1.5}})
    price = mine.llm_prices["claude-sonnet-5-5"]
    assert price.write_1h == 2 and price.batch == 0.5  # unstated: 2x input, half price in batches
    cost = PriceTable(mine.llm_prices).cost("anthropic", "claude-sonnet-5-5", USAGE)
    assert cost == pytest.approx(1 + 0.4 + 0.1 + 0.3 + 0.2)
    assert set(mine.llm_prices) == {"claude-sonnet-5-5"}  # setting it replaces the whole table
    with pytest.raises(ValueError):
        TokenPrices(input=1, batch=0)


class Thinker:
    """A provider backend that reports fixed usage with thinking and 1-hour cache writes."""

    backend = "anthropic"

    async def generate(self, request: LLMRequest, output_type):  # type: ignore[no-untyped-def]
        usage = Usage(
            input_tokens=500,
            output_tokens=2600,
            thinking_tokens=2000,
            cache_read_tokens=3000,
            cache_write_tokens=1000,
            cache_write_1h_tokens=1000,
        )
        return LLMResult(
            Selection(evidence_id=None, reason="r"), usage, model="claude-sonnet-5-5-20260928", backend=self.backend
        )


async def test_the_cost_metric_and_the_calls_usage_agree() -> None:
    keys = {"backend": "anthropic", "model": "claude-sonnet-5-5", "role": "perceive"}

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, {**keys, **labels}) or 0.0

    kinds = ("input", "output", "thinking", "cache_read", "cache_write")
    before = {k: sample("cyberjurors_llm_tokens_total", kind=k) for k in kinds}
    cost_before = sample("cyberjurors_llm_cost_usd_total")

    req = LLMRequest(role="perceive", model="claude-sonnet-5-5", system="s", shared=[], prompt=[TextPart("p")])
    result = await GuardedLLM(Thinker(), prices=PriceTable(Settings().llm_prices)).generate(req, Selection)

    expected = (500 * 2 + 2600 * 10 + 3000 * 0.2 + 1000 * 4) / 1e6
    assert result.usage.cost_usd == pytest.approx(expected)
    assert sample("cyberjurors_llm_cost_usd_total") - cost_before == pytest.approx(expected)
    added = {k: sample("cyberjurors_llm_tokens_total", kind=k) - before[k] for k in kinds}
    # the kinds split the call: the answer's 600 output tokens and the 2,000 thinking apart
    assert added == {"input": 500, "output": 600, "thinking": 2000, "cache_read": 3000, "cache_write": 1000}
    assert sum(added.values()) == result.usage.total_tokens


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-5-5-20260928",
        "claude-sonnet-5-5@20260928",
        "claude-sonnet-5-5-2026-09-28",
        "claude-sonnet-5-5@20260928-v1:0",
    ],
)
def test_a_dated_snapshot_is_priced_as_its_model(model: str) -> None:
    assert PriceTable(list_prices()).price(model) is MODELS["claude-sonnet-5-5"].prices
    assert facts(model) is MODELS["claude-sonnet-5-5"]


@pytest.mark.parametrize(
    "model", ["claude-sonnet-5-6", "claude-sonnet-50", "claude-sonnet-5-5-turbo", "claude-haiku-4-5x"]
)
def test_another_model_whose_name_starts_like_a_known_one_has_no_price_and_no_facts(model: str) -> None:
    # priced as Sonnet 5 it would be billed, budgeted and sent thinking settings of another model
    assert PriceTable(list_prices()).price(model) is None
    assert facts(model) is None


def test_a_cost_ceiling_refuses_a_model_without_a_price() -> None:
    haiku_only = {"claude-haiku-4-5": MODELS["claude-haiku-4-5"].prices}
    with pytest.raises(ValueError, match=r"case_cost_budget_usd .* none for claude-sonnet-5-5\b"):
        Settings(llm_backend="anthropic", anthropic_api_key="k", case_cost_budget_usd=0.01, llm_prices=haiku_only)
    with pytest.raises(ValueError, match=r"none for gpt-x\b"):  # a juror seat on another provider counts too
        Settings(
            llm_backend="anthropic",
            anthropic_api_key="k",
            openai_base_url="http://localhost:1/v1",
            case_cost_budget_usd=0.01,
            juror_models=["claude-sonnet-5-5", "openai:gpt-x"],
        )
    # priced (a self-hosted model at 0 is a price), or no ceiling, or the offline stand-in: it starts
    Settings(
        llm_backend="anthropic",
        anthropic_api_key="k",
        openai_base_url="http://localhost:1/v1",
        case_cost_budget_usd=0.01,
        juror_models=["claude-sonnet-5-5", "openai:gpt-x"],
        llm_prices={**list_prices(), "gpt-x": TokenPrices()},
    )
    Settings(llm_backend="anthropic", anthropic_api_key="k", llm_prices=haiku_only)
    Settings(llm_backend="offline", case_cost_budget_usd=0.01, llm_prices=haiku_only)
