"""A call that fails after the provider answered (cut at max_tokens, refused, not a valid answer)
was billed all the same: its tokens and estimated cost are counted as an answer's, in the metrics
and in its calls.jsonl row (trial report, defect 3: 6,144 billed tokens a call counted as $0).

Through the real SDK client code paths against the local servers of tests/messages_server.py:
``ThinkingModel`` thinking past max_tokens (a reply cut while thinking), scripted replies that are
not JSON, and the Message Batches API answering an entry with such a message. A failure with no
reply (an HTTP error status) stays without usage.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from cyberjurors.config import Settings
from cyberjurors.config.catalog import TokenPrices
from cyberjurors.llm.backends.anthropic import AnthropicLLM
from cyberjurors.llm.backends.batch import BatchStore, WaveLLM
from cyberjurors.llm.backends.batch import MessageBatches as Batches
from cyberjurors.llm.backends.openai import OpenAICompatibleLLM
from cyberjurors.llm.port import GuardedLLM, LLMError, LLMRequest, TextPart
from cyberjurors.llm.prices import CATALOG, GENAI, SETTING, STAND_IN, UNPRICED, PriceTable
from cyberjurors.llm.waves import Waves
from cyberjurors.schemas import Focus, Usage

from ....messages_server import (
    MessageBatches,
    ScriptedServer,
    ThinkingModel,
    anthropic_error,
    anthropic_message,
    chat_completion,
    request_text,
    tokens_of,
)

SONNET = "claude-sonnet-5-5"
REASONER = "o-reasoner-test"
PRICES = PriceTable(
    {**Settings().llm_prices, REASONER: TokenPrices(input=1.0, output=4.0, cache_read=0.1, cache_write=1.25)}
)
TOKEN_KINDS = ("input", "output", "thinking", "cache_read", "cache_write")
PRICE_SOURCES = (CATALOG, SETTING, GENAI, STAND_IN, UNPRICED)


pytestmark = pytest.mark.usefixtures("no_provider_env")


@pytest.fixture
async def thinker() -> AsyncIterator[ScriptedServer]:
    """A model that thinks 8,000 tokens before any answer: more than the 6,144 max_tokens allows."""
    server = ScriptedServer(respond=ThinkingModel(thinking_tokens=8000), batches=MessageBatches())
    await server.start()
    yield server
    await server.stop()


def focus_request(model: str, role: str) -> LLMRequest:
    return LLMRequest(
        role=role,
        model=model,
        system="Extract the focus.",
        shared=[],
        prompt=[TextPart("the case")],
        case_id="case-usage",
        max_output_tokens=2048,
        thinking_budget=4096,
    )


def anthropic(url: str) -> AnthropicLLM:
    return AnthropicLLM.from_settings(
        Settings(llm_backend="anthropic", anthropic_api_key="sk-ant-test", anthropic_base_url=url, llm_max_retries=0)
    )


def openai(url: str) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM.from_settings(
        Settings(
            llm_backend="openai", openai_base_url=f"{url}/v1", llm_max_retries=0, openai_reasoning_models=[REASONER]
        )
    )


class Counters:
    """The guard's counters for one (backend, model, role), read before a call and compared after."""

    def __init__(self, backend: str, model: str, role: str):
        self.keys = {"backend": backend, "model": model, "role": role}
        self.before = self.read()

    def read(self) -> dict[str, float]:
        values = {f"tokens:{k}": self.value("cyberjurors_llm_tokens_total", kind=k) for k in TOKEN_KINDS}
        # the cost over every price source (the label says where each call's price came from)
        values["cost"] = sum(self.value("cyberjurors_llm_cost_usd_total", price_source=s) for s in PRICE_SOURCES)
        values["calls"] = self.value("cyberjurors_llm_calls_total")
        return values

    def value(self, name: str, **more: str) -> float:
        return REGISTRY.get_sample_value(name, {**self.keys, **more}) or 0.0

    def delta(self) -> dict[str, float]:
        now = self.read()
        return {k: now[k] - self.before[k] for k in now}

    def errors(self, kind: str) -> float:
        return self.value("cyberjurors_llm_errors_total", kind=kind)


def expected(counters: Counters, usage: Usage, cost: float) -> dict[str, float]:
    thinking = usage.thinking_tokens
    return {
        "tokens:input": usage.input_tokens,
        "tokens:output": usage.output_tokens - thinking,
        "tokens:thinking": thinking,
        "tokens:cache_read": usage.cache_read_tokens,
        "tokens:cache_write": usage.cache_write_tokens,
        "cost": pytest.approx(cost),
        "calls": 1,
    }


def rows(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def assert_billed_row(row: dict[str, Any], error: str, usage: Usage, cost: float) -> None:
    assert row["error"] == error and row["case_id"] == "case-usage"
    for kind in ("input_tokens", "output_tokens", "thinking_tokens", "cache_read_tokens", "cache_write_tokens"):
        assert row[kind] == getattr(usage, kind), kind
    assert row["cost_usd"] == pytest.approx(cost) and cost > 0
    assert "latency_s" in row and "calls" not in row


async def test_a_reply_cut_while_thinking_is_billed_in_the_metrics_and_the_call_log(
    thinker: ScriptedServer, tmp_path: Path
) -> None:
    backend = anthropic(thinker.url)
    llm = GuardedLLM(backend, call_log=tmp_path / "calls.jsonl", prices=PRICES)
    counters = Counters("anthropic", SONNET, "focus")
    errors_before = counters.errors("truncated")
    try:
        with pytest.raises(LLMError) as failed:
            await llm.generate(focus_request(SONNET, "focus"), Focus)
    finally:
        await backend.aclose()

    (sent,) = thinker.requests
    assert sent.body["max_tokens"] == 6144 and failed.value.kind == "truncated"
    billed = Usage(input_tokens=tokens_of(request_text(sent.body)), output_tokens=6144, thinking_tokens=6144)
    cost = PRICES.cost("anthropic", SONNET, billed)
    assert cost is not None
    assert counters.delta() == expected(counters, billed, cost)
    assert counters.errors("truncated") - errors_before == 1
    (row,) = rows(tmp_path / "calls.jsonl")
    assert_billed_row(row, "truncated", billed, cost)
    # what a case's spend adds up, if the stage hands it on
    assert failed.value.usage is not None and failed.value.usage.cost_usd == pytest.approx(cost)
    assert failed.value.usage.calls == 1


async def test_an_answer_that_is_not_json_is_billed_and_an_error_status_is_not(
    server: ScriptedServer, tmp_path: Path
) -> None:
    server.reply(
        anthropic_message(
            "{not json", model=SONNET, input_tokens=120, output_tokens=85, cache_read=1000, cache_write=500
        ),
        anthropic_error(500, "api_error", "Internal server error"),
    )
    backend = anthropic(server.url)
    llm = GuardedLLM(backend, call_log=tmp_path / "calls.jsonl", prices=PRICES)
    counters = Counters("anthropic", SONNET, "select")
    try:
        with pytest.raises(LLMError) as invalid:
            await llm.generate(focus_request(SONNET, "select"), Focus)
        billed = Usage(input_tokens=120, output_tokens=85, cache_read_tokens=1000, cache_write_tokens=500)
        cost = PRICES.cost("anthropic", SONNET, billed)
        assert cost is not None
        assert invalid.value.kind == "invalid_output"
        assert counters.delta() == expected(counters, billed, cost)

        counters = Counters("anthropic", SONNET, "select")
        with pytest.raises(LLMError) as status:
            await llm.generate(focus_request(SONNET, "select"), Focus)
    finally:
        await backend.aclose()

    assert status.value.kind == "server_error" and status.value.usage is None
    assert counters.delta() == {**{f"tokens:{k}": 0 for k in TOKEN_KINDS}, "cost": 0, "calls": 1}
    first, second = rows(tmp_path / "calls.jsonl")
    assert_billed_row(first, "invalid_output", billed, cost)
    assert second["error"] == "server_error" and "output_tokens" not in second and "cost_usd" not in second


async def test_an_openai_reasoning_reply_cut_at_the_limit_is_billed(thinker: ScriptedServer, tmp_path: Path) -> None:
    backend = openai(thinker.url)
    llm = GuardedLLM(backend, call_log=tmp_path / "calls.jsonl", prices=PRICES)
    counters = Counters("openai", REASONER, "focus")
    try:
        with pytest.raises(LLMError) as failed:
            await llm.generate(focus_request(REASONER, "focus"), Focus)
    finally:
        await backend.aclose()

    (sent,) = thinker.requests
    limit = sent.body["max_completion_tokens"]
    assert failed.value.kind == "truncated" and limit < 8000
    billed = Usage(input_tokens=tokens_of(request_text(sent.body)), output_tokens=limit, thinking_tokens=limit)
    cost = PRICES.cost("openai", REASONER, billed)
    assert cost is not None
    assert counters.delta() == expected(counters, billed, cost)
    (row,) = rows(tmp_path / "calls.jsonl")
    assert_billed_row(row, "truncated", billed, cost)


async def test_an_openai_answer_that_is_not_json_is_billed(server: ScriptedServer, tmp_path: Path) -> None:
    server.reply(
        chat_completion(
            "{not json", model=REASONER, prompt_tokens=300, completion_tokens=60, cached_tokens=100, reasoning_tokens=20
        )
    )
    backend = openai(server.url)
    llm = GuardedLLM(backend, call_log=tmp_path / "calls.jsonl", prices=PRICES)
    counters = Counters("openai", REASONER, "select")
    try:
        with pytest.raises(LLMError) as failed:
            await llm.generate(focus_request(REASONER, "select"), Focus)
    finally:
        await backend.aclose()

    assert failed.value.kind == "invalid_output" and len(server.requests) == 2  # the reply and its one repair
    billed = Usage(input_tokens=400, output_tokens=120, cache_read_tokens=200, thinking_tokens=40)
    cost = PRICES.cost("openai", REASONER, billed)
    assert cost is not None
    assert counters.delta() == expected(counters, billed, cost)
    (row,) = rows(tmp_path / "calls.jsonl")
    assert_billed_row(row, "invalid_output", billed, cost)


async def test_a_refusal_on_openai_is_billed(server: ScriptedServer, tmp_path: Path) -> None:
    server.reply(
        chat_completion(
            None, model=REASONER, prompt_tokens=300, completion_tokens=12, refusal="I can't help with that."
        )
    )
    backend = openai(server.url)
    llm = GuardedLLM(backend, call_log=tmp_path / "calls.jsonl", prices=PRICES)
    counters = Counters("openai", REASONER, "juror")
    try:
        with pytest.raises(LLMError) as failed:
            await llm.generate(focus_request(REASONER, "juror"), Focus)
    finally:
        await backend.aclose()

    assert failed.value.kind == "refused"
    billed = Usage(input_tokens=300, output_tokens=12)
    cost = PRICES.cost("openai", REASONER, billed)
    assert cost is not None
    assert counters.delta() == expected(counters, billed, cost)
    (row,) = rows(tmp_path / "calls.jsonl")
    assert_billed_row(row, "refused", billed, cost)


async def test_a_batch_entry_cut_while_thinking_is_billed_at_the_batch_price(
    thinker: ScriptedServer, tmp_path: Path
) -> None:
    backend = anthropic(thinker.url)
    executor = Batches(backend, BatchStore(tmp_path / "store"), poll_s=0.01)
    waves: Waves[Any] = Waves(executor.answer)
    llm = GuardedLLM(WaveLLM(waves, executor.backend), call_log=tmp_path / "calls.jsonl", prices=PRICES, batch=True)
    counters = Counters("anthropic", SONNET, "summary")
    try:
        with pytest.raises(LLMError) as failed:
            await waves.gather(llm.generate(focus_request(SONNET, "summary"), Focus))
    finally:
        await backend.aclose()

    (params,) = [r["params"] for b in thinker.batches.batches.values() for r in b.requests]  # type: ignore[union-attr]
    assert failed.value.kind == "truncated" and executor.stats.requests == 1
    billed = Usage(input_tokens=tokens_of(request_text(params)), output_tokens=6144, thinking_tokens=6144)
    cost = PRICES.cost("anthropic", SONNET, billed, batch=True)
    assert cost is not None and cost < PRICES.cost("anthropic", SONNET, billed)  # type: ignore[operator]
    assert counters.delta() == expected(counters, billed, cost)
    (row,) = rows(tmp_path / "calls.jsonl")
    assert_billed_row(row, "truncated", billed, cost)
    assert row["batch"] is True
