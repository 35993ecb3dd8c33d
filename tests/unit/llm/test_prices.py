"""Prices that are dated and sourced (issue 13, item 2): the table in config/catalog.py, the cost of a
call by token kind, cache TTL and batch, and what the cost metric and a call's usage record."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from datetime import UTC, date, datetime
from importlib.metadata import version
from pathlib import Path
from urllib.parse import urlparse

import pytest
from prometheus_client import REGISTRY

from cyberjurors.assembly import build_llm
from cyberjurors.config import Settings
from cyberjurors.config.catalog import MODELS, TokenPrices, facts, list_prices
from cyberjurors.evaluation.pricing import model_prices
from cyberjurors.evaluation.report import DatasetInfo, EvalReport, to_markdown
from cyberjurors.evaluation.results import CaseResult
from cyberjurors.evaluation.scores import summarize
from cyberjurors.jury.stages import judge
from cyberjurors.llm.port import GuardedLLM, LLMRequest, LLMResult, TextPart
from cyberjurors.llm.prices import Cost, PriceTable
from cyberjurors.schemas import GroundTruthVotes, Selection, Usage

from ...conftest import calls
from ...factories import case
from ...messages_server import ScriptedServer, anthropic_message, chat_completion

NOW = datetime(2026, 11, 27, tzinfo=UTC)

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
    cost_before = sample("cyberjurors_llm_cost_usd_total", price_source="catalog")

    req = LLMRequest(role="perceive", model="claude-sonnet-5-5", system="s", shared=[], prompt=[TextPart("p")])
    result = await GuardedLLM(Thinker(), prices=PriceTable(Settings().llm_prices)).generate(req, Selection)

    expected = (500 * 2 + 2600 * 10 + 3000 * 0.2 + 1000 * 4) / 1e6
    assert result.usage.cost_usd == pytest.approx(expected)
    assert sample("cyberjurors_llm_cost_usd_total", price_source="catalog") - cost_before == pytest.approx(expected)
    assert result.usage.cost_sources == {"catalog": pytest.approx(expected)} and result.usage.unpriced_calls == 0
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
        Settings(
            llm_backend="anthropic",
            anthropic_api_key="k",
            case_cost_budget_usd=0.01,
            llm_prices=haiku_only,
            llm_prices_fallback=False,
        )
    # genai-prices lists Sonnet 5.5 at Anthropic: the calls are priced from it, so the ceiling works
    Settings(llm_backend="anthropic", anthropic_api_key="k", case_cost_budget_usd=0.01, llm_prices=haiku_only)
    with pytest.raises(ValueError, match=r"llm_prices or genai-prices [0-9.]+ has none for claude-unknown-9\b"):
        Settings(llm_backend="anthropic", anthropic_api_key="k", case_cost_budget_usd=0.01, model="claude-unknown-9")
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


# --- genai-prices behind the table (issue 29) -----------------------------------------------------------

GENAI_SOURCE = f"genai-prices {version('genai-prices')}"


def test_a_model_the_table_lacks_is_priced_from_genai_prices_at_its_providers_list_price() -> None:
    table = PriceTable(list_prices())
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=2_000_000)
    # OpenAI's list price for gpt-4o: $2.50 input, $10 output, $1.25 a cached input token
    quote = table.quote("openai", "gpt-4o", usage)
    assert quote == Cost(pytest.approx(2.5 + 10 + 2 * 1.25), "genai-prices", GENAI_SOURCE)
    # the same model through another provider's endpoint is that provider's price, or none
    assert PriceTable(list_prices(), openai_base_url="https://openrouter.ai/api/v1").quote(
        "openai", "openai/gpt-4o", usage
    ) == Cost(pytest.approx(12.5 + 2 * 1.25), "genai-prices", GENAI_SOURCE)
    # a Claude model the dated catalog does not list, at Anthropic's: $3 / $15, a write at 1.25x
    sonnet_4_6 = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_write_tokens=1_000_000)
    assert table.cost("anthropic", "claude-sonnet-4-6", sonnet_4_6) == pytest.approx(3 + 1.5 + 3.75)
    assert table.cost("anthropic", "claude-sonnet-4-6", sonnet_4_6, batch=True) == pytest.approx((3 + 1.5 + 3.75) / 2)


def test_the_dated_table_and_llm_prices_come_before_genai_prices() -> None:
    # genai-prices lists Sonnet 5.5's cache read at $0.10; the catalog at $0.20 (see its note)
    reads = Usage(cache_read_tokens=1_000_000)
    assert PriceTable(list_prices()).quote("anthropic", "claude-sonnet-5-5", reads) == Cost(
        pytest.approx(0.20), "catalog", "catalog"
    )
    mine = PriceTable({"gpt-4o": TokenPrices(input=1, output=1)})
    assert mine.quote("openai", "gpt-4o", Usage(input_tokens=1_000_000)) == Cost(1.0, "llm_prices", "llm_prices")
    # without the fallback, a model the table lacks is unpriced, as before
    off = PriceTable(list_prices(), fallback=False)
    assert off.quote("openai", "gpt-4o", reads) == Cost(None, "unpriced")
    assert off.quote("offline", "gpt-4o", reads) == Cost(0.0, "stand-in")


@pytest.mark.parametrize(
    ("backend", "model", "base_url"),
    [
        ("openai", "qwen2.5vl:7b", "http://127.0.0.1:11434/v1"),  # self-hosted: no one's list price
        ("openai", "gpt-oss:20b", "http://127.0.0.1:11434/v1"),  # named like OpenAI's, not a model it sells
        ("openai", "gpt-4o", "https://api.groq.com/openai/v1"),  # a model the URL's provider does not list
        ("anthropic", "gpt-4o", None),  # Anthropic does not sell it: no other provider's price is taken
        ("anthropic", "claude-sonnet-5-6", None),  # not a model at all
    ],
)
def test_a_model_no_source_knows_stays_unpriced(backend: str, model: str, base_url: str | None) -> None:
    assert PriceTable(list_prices(), openai_base_url=base_url).quote(backend, model, USAGE) == Cost(None, "unpriced")


async def test_a_verdict_names_where_its_cost_came_from_and_counts_its_unpriced_calls(
    server: ScriptedServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Three juror seats through the real SDK clients: Sonnet 5.5 (the dated catalog), gpt-4o (not in
    the catalog: genai-prices) and a self-hosted model nobody prices. The verdict's usage says how
    much of its cost each source priced and how many calls no source could; so do the call log, the
    cost metric's price_source and the eval report."""
    server.reply(anthropic_message(ballot(), input_tokens=1000, output_tokens=100))
    server.reply(chat_completion(ballot(), prompt_tokens=2000, completion_tokens=50, cached_tokens=1000))
    settings = Settings(
        llm_backend="offline",
        precedent_backend="none",
        metrics_port=0,
        jurors=3,
        rounds=1,
        juror_models=["anthropic:claude-sonnet-5-5", "openai:gpt-4o", "openai:qwen2.5vl:7b"],
        anthropic_api_key="sk-test",
        anthropic_base_url=server.url,
        openai_base_url=f"{server.url}/v1",  # a local server: no provider's URL, so priced by the model's name
        llm_call_log=tmp_path / "calls.jsonl",
        llm_max_retries=0,
        prompt_caching=False,
    )
    genai_before = cost_metric("openai", "gpt-4o", "genai-prices")
    llm = build_llm(settings)
    with caplog.at_level(logging.INFO, logger="cyberjurors.metrics"):
        try:
            verdict = await judge(case(), llm, settings)
        finally:
            await llm.inner.aclose()

    sonnet, gpt = (1000 * 2 + 100 * 10) / 1e6, (1000 * 2.5 + 1000 * 1.25 + 50 * 10) / 1e6
    assert verdict.tokens.cost_sources == {"catalog": pytest.approx(sonnet), GENAI_SOURCE: pytest.approx(gpt)}
    assert verdict.tokens.cost_usd == pytest.approx(sonnet + gpt)
    assert verdict.tokens.unpriced_calls == 1  # the self-hosted seat's one ballot: counted, not costed
    jurors = [c for c in calls(settings.llm_call_log) if c["role"] == "juror"]  # each ballot's line
    assert sorted(((c["cost_sources"], c["unpriced_calls"], c["cost_usd"]) for c in jurors), key=str) == [
        ({"catalog": pytest.approx(sonnet)}, 0, pytest.approx(sonnet)),
        ({GENAI_SOURCE: pytest.approx(gpt)}, 0, pytest.approx(gpt)),
        ({}, 1, 0),
    ]
    assert cost_metric("openai", "gpt-4o", "genai-prices") - genai_before == pytest.approx(gpt)
    said = [r.getMessage() for r in caplog.records]
    assert sum("'qwen2.5vl:7b' (openai backend)" in m and "no price" in m for m in said) == 1
    assert sum(f"'gpt-4o' (openai backend) is priced from {GENAI_SOURCE}: openai's" in m for m in said) == 1

    truth = GroundTruthVotes(buyer=9, seller=8)
    summary = summarize([CaseResult(case_id="c-1", category="clothing", truth=truth, verdict=verdict)])
    assert summary.unpriced_calls == 1 and set(summary.cost_sources) == {"catalog", GENAI_SOURCE}
    prices = model_prices(settings, settings.juror_models, "offline", batch=False)
    assert [p.source for p in prices] == ["catalog", GENAI_SOURCE, "unpriced"]
    assert (prices[1].input, prices[1].output, prices[1].cache_read) == (2.5, 10, 1.25)
    assert any(urlparse(page).netloc.endswith("openai.com") for page in prices[1].sources)
    report = EvalReport(
        name="mixed",
        dataset=DatasetInfo(source="t", sha256="0", cases=1),
        backend="offline",
        started_at=NOW,
        finished_at=NOW,
        wall_s=1,
        summary=summary,
        prices=prices,
    )
    markdown = to_markdown([report])
    assert f"{summary.cost_per_case_usd:.4f}+" in markdown  # a floor: one call had no price
    assert f"from {GENAI_SOURCE}" in markdown and "1 calls to models no price source knows" in markdown


def test_prices_come_from_the_installed_package_without_the_network(tmp_path: Path) -> None:
    """In a process where every socket connect and name lookup raises, and where another library has
    put an updated (here: empty) snapshot in genai-prices' place, prices still come from the data
    bundled in the installed wheel."""
    script = """
import socket, sys

def no_network(event, args):
    if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname"):
        raise OSError(f"network used: {event}")
sys.addaudithook(no_network)

from genai_prices import data_snapshot
data_snapshot.set_custom_snapshot(data_snapshot.DataSnapshot(providers=[], from_auto_update=True))
from cyberjurors.llm.prices import PriceTable
from cyberjurors.schemas import Usage
print(PriceTable().cost("openai", "gpt-4o", Usage(input_tokens=1_000_000, output_tokens=1_000_000)))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == pytest.approx(12.5)


def cost_metric(backend: str, model: str, source: str) -> float:
    labels = {"backend": backend, "model": model, "role": "juror", "price_source": source}
    return REGISTRY.get_sample_value("cyberjurors_llm_cost_usd_total", labels) or 0.0


def ballot() -> str:
    return json.dumps(
        {
            "conflicts": [],
            "buyer_conflicts": [],
            "seller_conflicts": [],
            "vote": "buyer",
            "justification": "for the buyer [s1]",
            "cited_clues": ["s1"],
            "cited_guidelines": [],
        }
    )
