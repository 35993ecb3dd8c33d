"""A budget-stopped case on a real worker is decided once: its redelivered inputs re-send the stored
verdict and call no model (tests/unit/jury/test_budget.py checks the budget's boundaries)."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from cyberjurors.config import Settings
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.rounds import Jury
from cyberjurors.jury.stages import NoPrecedents, clues_stage, focus_stage, round_stage
from cyberjurors.schemas import (
    CaseFile,
    DisputeCase,
    Verdict,
)
from cyberjurors.tooling.broker import free_port
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, calls, read_topic, worker_process
from ..unit.jury.test_budget import NOW, spent
from ..unit.observability.test_metrics import scrape_until, value

# --- a real worker ---------------------------------------------------------------------------


def offline_spend(case: DisputeCase, s: Settings) -> dict[str, int]:
    """What the offline backend spends on this case after stage II and after round 1."""

    async def run() -> dict[str, int]:
        llm, jury = OfflineLLM(), Jury.from_settings(s)
        case_file = await clues_stage(
            await focus_stage(CaseFile(case=case, received_at=NOW, backend="offline"), llm, s), llm, s, NoPrecedents()
        )
        after_clues = spent(case_file).total_tokens
        return {"clues": after_clues, "round-1": spent(await round_stage(case_file, jury, llm, s)).total_tokens}

    return asyncio.run(run())


@pytest.mark.integration
async def test_a_budget_stopped_case_is_decided_once_and_its_redeliveries_call_no_model(settings, tmp_path):
    port = free_port()
    path = EXAMPLES / "cases" / "appl-001-kettle-crack.json"
    events = read_events([path])
    case_id = events[0].case_id
    unbudgeted = settings.model_copy(update={"early_stop": 0, "case_token_budget": 0})
    spend = await asyncio.to_thread(offline_spend, DisputeCase.model_validate_json(path.read_text()), unbudgeted)
    # between the two: reached by round 1, not before it
    budget = (spend["clues"] + spend["round-1"]) // 2
    settings = unbudgeted.model_copy(
        update={"case_token_budget": budget, "metrics_port": port, "metrics_host": "127.0.0.1"}
    )

    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, events)
        [(_, first)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=120)
        decided = Verdict.model_validate_json(first)
        assert decided.budget_reached and decided.rounds_used == 1
        assert [s.stage for s in decided.budget_stops] == ["round-1"] and decided.budget_stops[0].tokens > budget
        assert any("stopped after round 1 of 3" in p for p in decided.problems)
        before = Counter(c["role"] for c in calls(settings.llm_call_log))
        assert before["juror"] == settings.jurors

        redelivered = []
        for topic in ("disputes.intake", "disputes.focus", "disputes.clues", "disputes.rounds"):
            [(_, sent)] = await read_topic(settings, topic, until=1, keys={case_id}, timeout_s=30)
            redelivered.append(Outgoing(case_id, sent, "redelivery", topic=settings.topic(topic)))
        await produce(settings, redelivered)
        verdicts = await read_topic(settings, "disputes.verdicts", until=5, timeout_s=120)
        assert [v for _, v in verdicts] == [first] * 5  # the stored verdict, re-sent; not decided again
        assert Counter(c["role"] for c in calls(settings.llm_call_log)) == before

        samples = await scrape_until(port, lambda s: value(s, "cyberjurors_verdicts_total") >= 1)
        assert value(samples, "cyberjurors_budget_stops_total", limit="tokens", stage="rounds") == 1
        assert value(samples, "cyberjurors_budget_stops_total") == 1  # the re-sent verdicts counted nothing
        assert value(samples, "cyberjurors_ballots_total") == settings.jurors
        assert value(samples, "cyberjurors_ballots_total", vote=decided.winner, majority=decided.winner) == max(
            decided.votes.buyer, decided.votes.seller
        )
