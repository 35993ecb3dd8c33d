"""Metrics: a real worker's /metrics endpoint against what the topics and the call log say
(tests/unit/observability/test_metrics.py has the pieces on their own)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

import cyberjurors
from cyberjurors.observability import metrics
from cyberjurors.schemas import (
    CaseFile,
    DeadLetter,
    OutcomeReported,
    Verdict,
)
from cyberjurors.tooling.broker import free_port
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, calls, read_topic, worker_process
from ..unit.observability.test_metrics import labelled, scrape, scrape_until, value

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
            assert value(before, "cyberjurors_seller_win_share_reference_ratio") == pytest.approx(0.626)
            # what runs: one series, 1, labelled with this install's version and Python
            [build] = [dict(labels) for (name, labels) in before if name == "cyberjurors_build_info"]
            assert value(before, "cyberjurors_build_info") == 1
            assert build == metrics.build_labels() and build["version"] == cyberjurors.__version__

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
