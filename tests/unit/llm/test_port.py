"""The LLM port's guard (concurrency cap, call log) and helpers, with scripted backends."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from rich.console import Console

from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import GuardedLLM, LLMError, LLMRequest, TextPart, gather_all
from cyberjurors.schemas import Clue, Selection, Usage, Verdict, Votes
from cyberjurors.tooling.demo import verdict_table


def request(case_id: str = "c") -> LLMRequest:
    return LLMRequest(role="select", model="m", system="s", shared=[], prompt=[TextPart("p")], case_id=case_id)


async def test_guard_caps_calls_in_flight():
    in_flight = peak = 0

    async def answer(req, out):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return Selection(evidence_id=None, reason="r")

    guard = GuardedLLM(ScriptedLLM(answer), concurrency=3)
    results = await asyncio.gather(*(guard.generate(request(), Selection) for _ in range(12)))
    assert peak == 3 and len(results) == 12
    assert all(r.usage.calls == 1 and r.usage.latency_s > 0 for r in results)


async def test_guard_logs_failed_calls_with_their_kind(tmp_path):
    def answer(req, out):
        if req.case_id == "bad":
            raise LLMError("rate_limited", "429")
        return Selection(evidence_id="b1", reason="r")

    log = tmp_path / "calls.jsonl"
    guard = GuardedLLM(ScriptedLLM(answer), call_log=log)
    await guard.generate(request("good"), Selection)
    with pytest.raises(LLMError):
        await guard.generate(request("bad"), Selection)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["case_id"], x["error"]) for x in lines] == [("good", None), ("bad", "rate_limited")]
    assert lines[0]["output_tokens"] == 10 and "output_tokens" not in lines[1]


async def test_gather_all_cancels_the_rest_when_one_call_fails():
    finished: list[int] = []

    async def call(n: int) -> int:
        if n == 0:
            await asyncio.sleep(0.01)
            raise LLMError("overloaded", "529")
        await asyncio.sleep(1)
        finished.append(n)
        return n

    with pytest.raises(LLMError) as err:
        await gather_all(*(call(n) for n in range(5)))
    assert err.value.kind == "overloaded" and finished == []
    assert await gather_all(*(asyncio.sleep(0, result=n) for n in range(3))) == [0, 1, 2]


def test_demo_table_prints_party_and_model_text_literally():
    clue = Clue(
        id="b1",
        party="buyer",
        step=1,
        evidence_id="b1-2",
        evidence_kind="video",
        selection_reason="r",
        clue="c",
        assessment="a",
        leaning="buyer",
        frames=[7],
    )
    verdict = Verdict(
        verdict_id="v",
        case_id="c",
        category="digital",
        winner="buyer",
        votes=Votes(buyer=12, seller=5),
        margin=7,
        rounds_used=2,
        early_stopped=True,
        justification="[offline stand-in] Round 2: [b1] shows [bold]it[/bold]",
        cited_clues=[clue],
        focus="[red]f",
        tokens=Usage(calls=3),
        latency_s=1.0,
        backend="offline",
        models=["offline"],
        decided_at=datetime(2026, 11, 1, tzinfo=UTC),
    )
    console = Console(record=True, width=200)
    console.print(verdict_table(verdict))
    text = console.export_text()
    assert "[offline stand-in] Round 2: [b1] shows [bold]it[/bold]" in text
    assert "[red]f" in text and "[b1] b1-2 frames [7]" in text and "buyer 12 : seller 5 (of 17)" in text


def test_stage_request_takes_the_role_s_model_the_output_cap_and_strings_as_text():
    from cyberjurors.config import Settings
    from cyberjurors.llm.port import ImagePart, stage_request

    settings = Settings(
        llm_backend="offline",
        model="base",
        llm_roles={"summary": {"model": "summariser"}, "default": {"max_output_tokens": 321}},
        juror_models=["a", "b"],
        metrics_port=0,
    )
    image = ImagePart(b"x", "image/png", "evidence b1 (buyer, image)")
    req = stage_request(
        "summary", settings, system="sys", shared=["prefix", image], prompt=["ask"], task=None, case_id="c1"
    )
    assert (req.model, req.max_output_tokens, req.case_id, req.system) == ("summariser", 321, "c1", "sys")
    assert req.shared == [TextPart("prefix"), image] and req.prompt == [TextPart("ask")]
    assert stage_request("juror", settings, system="s", prompt=[], task=None, case_id="c", juror=3).model == "b"
    assert stage_request("focus", settings, system="s", prompt=["p"], task=None, case_id="c").shared == []


def test_votes_of_counts_ballots():
    from types import SimpleNamespace

    ballots = [SimpleNamespace(vote=v) for v in ("buyer", "seller", "seller")]
    assert Votes.of(ballots) == Votes(buyer=1, seller=2) and Votes.of([]) == Votes(buyer=0, seller=0)
