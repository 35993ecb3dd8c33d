"""Metrics: a real worker's /metrics endpoint against what the topics and the call log say, and
the pieces (drift counters, price table, in-flight set, SDK retry counting) on their own."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections import Counter

import faust
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from cyberjurors.config import Settings, TokenPrices
from cyberjurors.llm.backends.anthropic import AnthropicLLM
from cyberjurors.llm.backends.openai import OpenAICompatibleLLM
from cyberjurors.llm.port import GuardedLLM, LLMError, LLMRequest, LLMResult, TextPart
from cyberjurors.llm.prices import PriceTable
from cyberjurors.observability import metrics
from cyberjurors.schemas import (
    CATEGORIES,
    BallotDraft,
    CaseFile,
    DeadLetter,
    OutcomeReported,
    Selection,
    Usage,
    Verdict,
)
from cyberjurors.streams.broker import free_port
from cyberjurors.streams.clients import Outgoing, produce, read_events

from .conftest import EXAMPLES, calls, read_topic, worker_process
from .messages_server import Reply, ScriptedServer, anthropic_message, chat_completion

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


# --- a real worker -------------------------------------------------------------------------


@pytest.mark.integration
async def test_worker_metrics_match_the_topics_and_the_call_log(settings, tmp_path):
    port = free_port()
    settings = settings.model_copy(update={"metrics_port": port, "metrics_host": "127.0.0.1"})
    cases = read_events([EXAMPLES / "cases"])
    malformed = Outgoing("bad-1", b"{not json", "test")

    async with worker_process(settings, tmp_path / "worker.log"):
        try:
            before = await scrape_until(port, lambda s: True, timeout_s=30)  # the endpoint is up
            assert value(before, "cyberjurors_verdicts_total") == 0
            assert value(before, "cyberjurors_seller_win_share_reference") == pytest.approx(0.626)

            await produce(settings, [*cases, malformed])
            seen = await read_topic(settings, "disputes.verdicts", until=len(cases), timeout_s=90)
            verdicts = [Verdict.model_validate_json(v) for _, v in seen]
            assert len(verdicts) == len(cases)
            letters = [
                DeadLetter.model_validate_json(v)
                for _, v in await read_topic(settings, "disputes.dlq", until=1, timeout_s=30)
            ]
            assert [(d.stage, d.reason) for d in letters] == [("intake", "invalid_json")]

            # Faust commits on its own timer, which may run late on a loaded machine: wait for it too
            after = await scrape_until(
                port,
                lambda s: (
                    value(s, "cyberjurors_verdicts_total") >= len(verdicts)
                    and value(s, "cyberjurors_cases_in_flight") == 0
                    and value(s, "cyberjurors_faust_topic_partition_offset_commited") > 0
                ),
            )

            # verdicts, by winner and category, as seen on the topic
            assert labelled(after, "cyberjurors_verdicts_total", "winner") == Counter(v.winner for v in verdicts)
            assert labelled(after, "cyberjurors_verdicts_total", "category") == Counter(v.category for v in verdicts)
            assert value(after, "cyberjurors_vote_margin_count") == len(verdicts)
            assert value(after, "cyberjurors_vote_margin_sum") == sum(v.margin for v in verdicts)
            assert value(after, "cyberjurors_rounds_used_count") == len(verdicts)
            assert value(after, "cyberjurors_rounds_used_sum") == sum(v.rounds_used for v in verdicts)
            assert value(after, "cyberjurors_early_stops_total") == sum(v.early_stopped for v in verdicts)
            # the final round's ballots, by seat model (one here), vote and the verdict's majority
            assert value(after, "cyberjurors_ballots_total", model=settings.model) == sum(
                v.votes.total for v in verdicts
            )
            for side in ("buyer", "seller"):
                assert value(after, "cyberjurors_ballots_total", vote=side) == sum(
                    getattr(v.votes, side) for v in verdicts
                ), side
                assert value(after, "cyberjurors_ballots_total", majority=side) == sum(
                    v.votes.total for v in verdicts if v.winner == side
                ), side
            assert value(after, "cyberjurors_budget_stops_total") == sum(len(v.budget_stops) for v in verdicts)
            assert value(after, "cyberjurors_case_latency_seconds_count") == len(verdicts)
            assert value(after, "cyberjurors_case_latency_seconds_sum") == pytest.approx(
                sum(v.latency_s for v in verdicts), abs=0.001 * len(verdicts)
            )
            for stage, expected in [
                ("focus", len(verdicts)),
                ("clues", len(verdicts)),
                ("verdict", len(verdicts)),
                ("rounds", sum(v.rounds_used for v in verdicts)),
            ]:
                assert value(after, "cyberjurors_stage_latency_seconds_count", stage=stage) == expected, stage
            assert value(after, "cyberjurors_cases_in_flight") == 0

            # LLM calls and tokens, as the call log records them
            logged = calls(settings.llm_call_log)
            assert value(after, "cyberjurors_llm_calls_total") == len(logged) == sum(v.tokens.calls for v in verdicts)
            assert labelled(after, "cyberjurors_llm_calls_total", "role") == Counter(c["role"] for c in logged)
            assert value(after, "cyberjurors_llm_calls_total", backend="offline", model="offline") == len(logged)
            assert value(after, "cyberjurors_llm_latency_seconds_count") == len(logged)
            assert value(after, "cyberjurors_llm_errors_total") == 0
            for kind in metrics.TOKEN_KINDS:  # the kinds split a call's tokens: output less its thinking
                assert value(after, "cyberjurors_llm_tokens_total", kind=kind) == sum(
                    c[f"{kind}_tokens"] - (c["thinking_tokens"] if kind == "output" else 0) for c in logged
                ), kind
            assert value(after, "cyberjurors_llm_tokens_total", kind="input") > 0
            assert value(after, "cyberjurors_llm_cost_usd_total") == 0  # offline bills nothing
            assert value(after, "cyberjurors_llm_retries_total") == 0

            # dead letters and drift
            assert value(after, "cyberjurors_dead_letters_total") == 1
            assert value(after, "cyberjurors_dead_letters_total", stage="intake", reason="invalid_json") == 1

            # Faust's own sensor on the same endpoint
            assert value(after, "cyberjurors_faust_messages_received_total") >= len(cases) + 1
            assert value(after, "cyberjurors_faust_topic_partition_offset_commited") > 0

            # a redelivered settled case file (as after a rebalance): its verdict is re-sent, not counted
            rounds = [
                CaseFile.model_validate_json(v)
                for _, v in await read_topic(
                    settings, "disputes.rounds", until=sum(v.rounds_used for v in verdicts), timeout_s=30
                )
            ]
            settled = max(rounds, key=lambda c: len(c.rounds))
            await produce(
                settings,
                [Outgoing(settled.case_id, settled.model_dump_json().encode(), "replay")],
                topic="disputes.rounds",
            )
            again = await read_topic(settings, "disputes.verdicts", until=len(verdicts) + 1, timeout_s=30)
            assert [k for k, _ in again].count(settled.case_id) == 2
            replayed = await asyncio.to_thread(scrape, port)
            for name in (
                "cyberjurors_verdicts_total",
                "cyberjurors_vote_margin_count",
                "cyberjurors_case_latency_seconds_count",
                "cyberjurors_early_stops_total",
            ):
                assert value(replayed, name) == value(after, name), name
            assert value(replayed, "cyberjurors_stage_latency_seconds_count", stage="verdict") == len(verdicts)
            assert value(replayed, "cyberjurors_cases_in_flight") == 0

            # real outcomes for six cases: three agree, three do not, with known vote splits
            chosen = sorted(verdicts, key=lambda v: v.case_id)[:7]  # the 7th is reported after a restart
            real: dict[str, tuple[int, int]] = {}  # case_id -> (buyer, seller) votes of the real jury
            for i, v in enumerate(chosen):
                agree = i % 2 == 0
                winner = v.winner if agree else ("buyer" if v.winner == "seller" else "seller")
                strong = 9 + i  # 9..15 votes for the real winner
                real[v.case_id] = (strong, 17 - strong) if winner == "buyer" else (17 - strong, strong)
            outcomes = {cid: outcome_event(cid, b, s) for cid, (b, s) in real.items()}
            first, late = list(outcomes.values())[:6], list(outcomes.values())[6]
            # one repeated, then a malformed outcome under the same key: the same partition, handled in
            # order, so its dead letter shows the repeat was handled too
            repeated = chosen[0].case_id
            unknown = outcome_event("no-such-case", 9, 8)
            await produce(
                settings,
                [*first, outcomes[repeated], Outgoing(repeated, b"{not an outcome", "test"), unknown],
                topic="disputes.outcomes",
            )
            done = await scrape_until(
                port,
                lambda s: (
                    value(s, "cyberjurors_dead_letters_total", stage="outcome") >= 2
                    and value(s, "cyberjurors_outcomes_total") >= len(first)
                ),
            )
        except BaseException:
            print((tmp_path / "worker.log").read_text()[-6000:])
            raise

    ours = {v.case_id: v for v in chosen}
    errors = {cid: abs(ours[cid].votes.seller * 17 / ours[cid].votes.total - s) for cid, (_, s) in real.items()}
    counted = [cid for cid in real if cid != late.case_id]
    assert value(done, "cyberjurors_outcomes_total") == len(counted)
    assert value(done, "cyberjurors_outcomes_total", agreement="agree") == 3
    assert value(done, "cyberjurors_outcomes_total", agreement="disagree") == 3
    for side in ("buyer", "seller"):  # by the real winner, for recall
        won = [cid for cid in counted if (real[cid][1] > real[cid][0]) == (side == "seller")]
        assert value(done, "cyberjurors_outcomes_total", real_winner=side) == len(won), side
        assert value(done, "cyberjurors_outcomes_total", real_winner=side, agreement="agree") == sum(
            ours[cid].winner == side for cid in won
        ), side
    assert labelled(done, "cyberjurors_outcomes_total", "category") == Counter(ours[c].category for c in counted)
    assert value(done, "cyberjurors_outcome_vote_error_count") == len(counted)
    assert value(done, "cyberjurors_outcome_vote_error_sum") == pytest.approx(sum(errors[c] for c in counted))
    assert value(done, "cyberjurors_dead_letters_total", stage="outcome", reason="unknown_case") == 1
    assert value(done, "cyberjurors_dead_letters_total", stage="outcome", reason="invalid_outcome") == 1

    # a restarted worker (its counters start at 0, its tables recover from their changelogs) does not
    # count a redelivered outcome again, and counts a new one
    async with worker_process(settings, tmp_path / "worker-2.log"):
        try:
            await produce(
                settings,
                [outcomes[repeated], Outgoing(repeated, b"{still not one", "test"), late],
                topic="disputes.outcomes",
            )
            again = await scrape_until(
                port,
                lambda s: (
                    value(s, "cyberjurors_dead_letters_total", stage="outcome") >= 1
                    and value(s, "cyberjurors_outcomes_total") >= 1
                ),
                timeout_s=90,
            )
        except BaseException:
            print((tmp_path / "worker-2.log").read_text()[-6000:])
            raise
    assert value(again, "cyberjurors_dead_letters_total", stage="outcome", reason="invalid_outcome") == 1
    assert value(again, "cyberjurors_outcomes_total") == 1
    assert value(again, "cyberjurors_outcomes_total", category=ours[late.case_id].category) == 1
    assert value(again, "cyberjurors_outcome_vote_error_sum") == pytest.approx(errors[late.case_id])


def outcome_event(case_id: str, buyer: int, seller: int) -> Outgoing:
    votes = {"buyer": buyer, "seller": seller}
    return Outgoing(case_id, OutcomeReported(case_id=case_id, votes=votes).model_dump_json().encode(), "test")


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
    assert delta("cyberjurors_llm_cost_usd_total", keys, before[names[1]]) == pytest.approx(expected)


async def test_an_unpriced_model_counts_zero_cost_and_is_reported():
    req = LLMRequest(role="juror", model="mystery-model", system="s", shared=[], prompt=[TextPart("p")])
    keys = {"backend": "anthropic", "model": "mystery-model"}
    before = REGISTRY.get_sample_value("cyberjurors_llm_unpriced_calls_total", keys)
    await GuardedLLM(Billed(), prices=PriceTable(Settings().llm_prices)).generate(req, Selection)
    assert delta("cyberjurors_llm_unpriced_calls_total", keys, before) == 1
    assert REGISTRY.get_sample_value("cyberjurors_llm_cost_usd_total", {**keys, "role": "juror"}) == 0


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
