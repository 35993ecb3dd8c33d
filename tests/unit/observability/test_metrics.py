"""Metrics: the pieces (drift counters, price table, in-flight set, SDK retry counting) on their own,
and the scrape helpers other tests read a worker's /metrics with. A real worker's /metrics endpoint
against what the topics and the call log say: tests/integration/test_metrics.py."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import platform
import socket
import time
import urllib.request
from collections import Counter

import faust
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

import cyberjurors
from cyberjurors.config import Settings, TokenPrices
from cyberjurors.llm.backends.anthropic import AnthropicLLM
from cyberjurors.llm.backends.openai import OpenAICompatibleLLM
from cyberjurors.llm.port import GuardedLLM, LLMError, LLMRequest, LLMResult, TextPart
from cyberjurors.llm.prices import PriceTable
from cyberjurors.observability import metrics
from cyberjurors.schemas import (
    CATEGORIES,
    BallotDraft,
    Selection,
    Usage,
)

from ...messages_server import Reply, ScriptedServer, anthropic_message, chat_completion

Samples = dict[tuple[str, frozenset], float]


def scrape(port: int) -> Samples:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include these."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def labelled(samples: Samples, name: str, label: str) -> dict[str, float]:
    out: Counter = Counter()
    for (n, ls), v in samples.items():
        if n == name:
            out[dict(ls)[label]] += v
    return {k: v for k, v in out.items() if v}


async def scrape_until(port: int, done, timeout_s: float = 30) -> Samples:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            samples = await asyncio.to_thread(scrape, port)
            if done(samples) or time.monotonic() > deadline:
                return samples
        except OSError:
            if time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


# --- drift ---------------------------------------------------------------------------------


def gauge(name: str, **labels: str) -> float:
    got = REGISTRY.get_sample_value(name, labels)
    assert got is not None, name
    return got


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_outcome_counters_by_agreement_real_winner_and_category_with_the_vote_error():
    keys = [("agree", "seller", "food"), ("agree", "buyer", "food"), ("disagree", "seller", "food")]
    before = {k: sample("cyberjurors_outcomes_total", agreement=k[0], real_winner=k[1], category=k[2]) for k in keys}
    error_before = sample("cyberjurors_outcome_vote_error_sum", category="food")
    count_before = sample("cyberjurors_outcome_vote_error_count", category="food")
    small_before = sample("cyberjurors_outcome_vote_error_bucket", category="food", le="2.0")
    # (category, real buyer, real seller, our buyer, our seller)
    assert metrics.record_outcome("food", 5, 12, 3, 14)  # real seller, ours seller, |14-12| = 2
    assert metrics.record_outcome("food", 12, 5, 9, 8)  # real buyer, ours buyer, |8-5| = 3
    assert not metrics.record_outcome("food", 4, 13, 10, 7)  # real seller, ours buyer, |7-13| = 6
    after = {k: sample("cyberjurors_outcomes_total", agreement=k[0], real_winner=k[1], category=k[2]) for k in keys}
    assert {k: after[k] - before[k] for k in keys} == dict.fromkeys(keys, 1)
    assert sample("cyberjurors_outcome_vote_error_sum", category="food") - error_before == pytest.approx(2 + 3 + 6)
    assert sample("cyberjurors_outcome_vote_error_count", category="food") - count_before == 3
    assert sample("cyberjurors_outcome_vote_error_bucket", category="food", le="2.0") - small_before == 1


def test_a_smaller_jury_is_scaled_to_the_17_vote_split():
    before = sample("cyberjurors_outcome_vote_error_sum", category="digital")
    metrics.record_outcome("digital", 8, 9, 1, 4)  # our 4 of 5 for the seller = 13.6 of 17
    assert sample("cyberjurors_outcome_vote_error_sum", category="digital") - before == pytest.approx(4 * 17 / 5 - 9)


def test_every_label_combination_exists_from_the_start():
    """rate() over a series that appears only with its first event misses that event; primed, it reads 0."""
    for category in CATEGORIES:
        for agreement in ("agree", "disagree"):
            for side in ("buyer", "seller"):
                assert (
                    REGISTRY.get_sample_value(
                        "cyberjurors_outcomes_total",
                        {"agreement": agreement, "real_winner": side, "category": category},
                    )
                    is not None
                )
        assert REGISTRY.get_sample_value("cyberjurors_outcome_vote_error_count", {"category": category}) is not None


# --- prices and the LLM guard ------------------------------------------------------------


def test_price_table_exact_snapshot_unknown_and_free_backends():
    table = PriceTable(
        {
            "claude-sonnet": TokenPrices(input=1, output=2),
            "claude-sonnet-5-5": TokenPrices(input=3, output=15, cache_read=0.3, cache_write=3.75),
        }
    )
    usage = Usage(
        input_tokens=1_000_000, output_tokens=200_000, cache_read_tokens=2_000_000, cache_write_tokens=400_000
    )
    assert table.cost("anthropic", "claude-sonnet-5-5", usage) == pytest.approx(3 + 3 + 0.6 + 1.5)
    assert table.price("claude-sonnet-5-5-20260101").input == 3  # a dated snapshot of the longest name
    assert table.price("claude-sonnet-20260101").input == 1
    assert table.price("claude-sonnet-4-6") is None  # another model, not a snapshot of "claude-sonnet"
    assert table.cost("anthropic", "gpt-oss", usage) is None
    assert table.cost("offline", "claude-sonnet-5-5", usage) == 0


def test_price_settings_default_and_from_the_environment(monkeypatch):
    assert Settings().llm_prices["claude-sonnet-5-5"].output == 10  # config/catalog.py, dated and sourced
    monkeypatch.setenv("CYBERJURORS_LLM_PRICES", json.dumps({"qwen2.5-vl-7b": {"input": 0.1, "output": 0.2}}))
    prices = Settings().llm_prices
    assert set(prices) == {"qwen2.5-vl-7b"} and prices["qwen2.5-vl-7b"].cache_read == 0
    monkeypatch.setenv("CYBERJURORS_LLM_PRICES", json.dumps({"m": {"input": -1}}))
    with pytest.raises(ValueError):
        Settings()


class Billed:
    """A backend that says it is a provider and reports fixed usage (or fails)."""

    backend = "anthropic"

    def __init__(self, fail: bool = False):
        self.fail = fail

    async def generate(self, request: LLMRequest, output_type):  # type: ignore[no-untyped-def]
        if self.fail:
            raise LLMError("overloaded", "529")
        return LLMResult(
            Selection(evidence_id=None, reason="r"),
            Usage(input_tokens=1000, output_tokens=500, cache_read_tokens=4000, cache_write_tokens=2000),
            model="claude-sonnet-5-5-20260101",
            backend=self.backend,
        )


def delta(name: str, labels: dict[str, str], before: float | None) -> float:
    return (REGISTRY.get_sample_value(name, labels) or 0) - (before or 0)


async def test_guard_records_calls_tokens_cost_and_errors_with_the_requested_model():
    model = "claude-sonnet-5-5"
    req = LLMRequest(role="select", model=model, system="s", shared=[], prompt=[TextPart("p")])
    keys = {"backend": "anthropic", "model": model, "role": "select"}
    names = ["cyberjurors_llm_calls_total", "cyberjurors_llm_cost_usd_total", "cyberjurors_llm_latency_seconds_count"]
    before = {n: REGISTRY.get_sample_value(n, keys) for n in names}
    catalog = {**keys, "price_source": "catalog"}  # the cost by where its price came from
    before[names[1]] = REGISTRY.get_sample_value(names[1], catalog)
    cache_before = REGISTRY.get_sample_value("cyberjurors_llm_tokens_total", {**keys, "kind": "cache_read"})
    errors_before = REGISTRY.get_sample_value("cyberjurors_llm_errors_total", {**keys, "kind": "overloaded"})

    prices = PriceTable(Settings().llm_prices)
    await GuardedLLM(Billed(), prices=prices).generate(req, Selection)
    with pytest.raises(LLMError):
        await GuardedLLM(Billed(fail=True), prices=prices).generate(req, Selection)

    assert delta("cyberjurors_llm_calls_total", keys, before[names[0]]) == 2  # answered + failed
    assert delta("cyberjurors_llm_latency_seconds_count", keys, before[names[2]]) == 2
    assert delta("cyberjurors_llm_errors_total", {**keys, "kind": "overloaded"}, errors_before) == 1
    assert delta("cyberjurors_llm_tokens_total", {**keys, "kind": "cache_read"}, cache_before) == 4000
    expected = (1000 * 2 + 500 * 10 + 4000 * 0.2 + 2000 * 2.5) / 1e6  # Sonnet 5.5 list prices, 5-minute writes
    assert delta("cyberjurors_llm_cost_usd_total", catalog, before[names[1]]) == pytest.approx(expected)


async def test_an_unpriced_model_is_flagged_in_the_metrics_and_in_the_calls_usage():
    req = LLMRequest(role="juror", model="mystery-model", system="s", shared=[], prompt=[TextPart("p")])
    keys = {"backend": "anthropic", "model": "mystery-model"}
    before = REGISTRY.get_sample_value("cyberjurors_llm_unpriced_calls_total", keys)
    result = await GuardedLLM(Billed(), prices=PriceTable(Settings().llm_prices)).generate(req, Selection)
    assert delta("cyberjurors_llm_unpriced_calls_total", keys, before) == 1
    cost = {**keys, "role": "juror", "price_source": "unpriced"}
    assert REGISTRY.get_sample_value("cyberjurors_llm_cost_usd_total", cost) == 0
    assert result.usage.unpriced_calls == 1 and result.usage.cost_sources == {} and result.usage.cost_usd == 0


# --- SDK retries ----------------------------------------------------------------------------

FAST = {"retry-after-ms": "5"}
BALLOT = {
    "conflicts": [],
    "buyer_conflicts": [],
    "seller_conflicts": [],
    "vote": "buyer",
    "justification": "[b1]",
    "cited_clues": ["b1"],
    "cited_guidelines": [],
}


def ballot_request(model: str) -> LLMRequest:
    return LLMRequest(role="juror", model=model, system="s", shared=[], prompt=[TextPart("vote")])


async def test_anthropic_sdk_retries_are_counted(server: ScriptedServer, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    model = "claude-retry-test"
    server.reply(
        Reply(
            status=529, headers=FAST, body={"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
        ),
        Reply(
            status=429, headers=FAST, body={"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}
        ),
        anthropic_message(json.dumps(BALLOT), model=model),
    )
    llm = AnthropicLLM.from_settings(
        Settings(llm_backend="anthropic", anthropic_api_key="sk-test", anthropic_base_url=server.url, llm_max_retries=3)
    )
    keys = {"backend": "anthropic", "model": model}
    before = REGISTRY.get_sample_value("cyberjurors_llm_retries_total", keys)
    try:
        result = await llm.generate(ballot_request(model), BallotDraft)
    finally:
        await llm.aclose()
    assert result.output.vote == "buyer" and len(server.requests) == 3
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0", "1", "2"]
    assert delta("cyberjurors_llm_retries_total", keys, before) == 2


async def test_openai_sdk_retries_are_counted(server: ScriptedServer, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = "qwen-retry-test"
    server.reply(
        Reply(status=429, headers=FAST, body={"error": {"message": "slow", "type": "rate_limit"}}),
        chat_completion(json.dumps(BALLOT), model=model),
    )
    llm = OpenAICompatibleLLM.from_settings(
        Settings(llm_backend="openai", openai_base_url=f"{server.url}/v1", llm_max_retries=2, llm_timeout_s=5)
    )
    keys = {"backend": "openai", "model": model}
    before = REGISTRY.get_sample_value("cyberjurors_llm_retries_total", keys)
    try:
        result = await llm.generate(ballot_request(model), BallotDraft)
    finally:
        await llm.aclose()
    assert result.output.vote == "buyer" and len(server.requests) == 2
    assert delta("cyberjurors_llm_retries_total", keys, before) == 1


# --- the build -------------------------------------------------------------------------------


def test_build_info_is_one_series_of_value_1_naming_the_version_python_and_revision():
    [family] = [f for f in REGISTRY.collect() if f.name == "cyberjurors_build_info"]
    assert family.type == "gauge"
    [only] = family.samples
    assert only.value == 1
    assert set(only.labels) == {"version", "revision", "python"}
    assert only.labels["version"] == cyberjurors.__version__ == importlib.metadata.version("cyberjurors")
    assert only.labels["python"] == platform.python_version()
    assert only.labels["revision"] == metrics.build_labels()["revision"] != ""


def test_the_revision_is_the_image_builds_file_else_the_commit_pip_recorded_else_unknown(tmp_path):
    written, absent = tmp_path / "revision", tmp_path / "none"
    from_git = json.dumps(
        {"url": "https://example.org/cyberjurors.git", "vcs_info": {"vcs": "git", "commit_id": "c0ffee"}}
    )
    editable = json.dumps({"url": "file:///src/cyberjurors", "dir_info": {"editable": True}})
    written.write_text("4b825dc642cb6eb9a060e54bf8d69288fbee4904\n")
    assert metrics.revision_of(written, from_git) == "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    assert metrics.revision_of(absent, from_git) == "c0ffee"
    assert metrics.revision_of(absent, editable) == "unknown"  # pip install -e . records no commit
    assert metrics.revision_of(absent, None) == "unknown"
    # the Dockerfile's default (no --build-arg REVISION) says nothing: a commit pip recorded still counts
    written.write_text("unknown\n")
    assert metrics.revision_of(written, from_git) == "c0ffee"
    written.write_text("\n")
    assert metrics.revision_of(written, None) == "unknown"
    # a damaged or foreign record is no commit, and no reason to stop a worker
    for damaged in ("{not json", "[]", json.dumps({"vcs_info": "c0ffee"}), json.dumps({"vcs_info": {"commit_id": 7}})):
        assert metrics.revision_of(absent, damaged) == "unknown", damaged


# --- in flight, labels, endpoint, Faust's sensor -------------------------------------------


def test_cases_in_flight_is_derived_from_the_set_of_cases():
    tracker = metrics.CasesInFlight()
    tracker.add("a", 0)
    tracker.add("a", 0)  # a replay of the same case
    tracker.add("b", 1)
    tracker.discard("a")
    tracker.discard("a")  # a re-sent verdict
    tracker.discard("never-seen")
    assert gauge("cyberjurors_cases_in_flight") == 1
    tracker.add("c", 0)
    tracker.keep_partitions({0})  # partition 1 moved to another worker
    assert gauge("cyberjurors_cases_in_flight") == 1 and set(tracker.cases) == {"c"}
    tracker.discard("c")
    assert gauge("cyberjurors_cases_in_flight") == 0


def test_round_stages_share_one_label_and_an_earlier_releases_names_map_to_todays():
    labels = [metrics.stage_label(s) for s in ("focus", "clues", "round-1", "round-3", "rounds")]
    assert labels == ["focus", "clues", "rounds", "rounds", "rounds"]
    earlier = [metrics.stage_label(s) for s in ("ingest", "round", "jury", "outcomes", "appeal")]
    assert earlier == ["intake", "rounds", "rounds", "outcome", "appeal"]


def test_the_endpoint_is_off_at_port_zero_and_a_taken_port_is_not_fatal():
    assert metrics.serve(0) is False and metrics.serve(None) is False
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert metrics.serve(taken.getsockname()[1], "127.0.0.1") is False


def test_faust_sensor_can_be_attached_to_more_than_one_app():
    apps = [faust.App(f"sensor-{i}", broker="kafka://127.0.0.1:1", autodiscover=False) for i in range(2)]
    for app in apps:
        metrics.instrument_faust(app)
    assert all(type(app.monitor).__name__ == "PrometheusMonitor" for app in apps)
    assert apps[0].monitor._metrics is apps[1].monitor._metrics
    assert REGISTRY.get_sample_value("cyberjurors_faust_messages_received_total") is not None
