"""Mixed-model juries: jurors seated on several models and providers, each call routed to its
provider through that provider's real SDK client (against local servers speaking the Messages and
Chat Completions APIs), the final round's votes kept per seat model, and per-model vote share and
agreement in the eval report and in metrics. The mixed-jury rung through a worker:
tests/integration/test_mixed_jury.py."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from cyberjurors.assembly import build_llm
from cyberjurors.config import PIPELINES, Settings, TokenPrices, split_model
from cyberjurors.evaluation.ladder import ABLATIONS, LADDER, select
from cyberjurors.evaluation.report import DatasetInfo, EvalReport, render, to_markdown
from cyberjurors.evaluation.results import CaseResult
from cyberjurors.evaluation.scores import summarize
from cyberjurors.jury.stages import judge
from cyberjurors.llm.backends.routed import RoutedLLM
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.observability import metrics
from cyberjurors.schemas import BallotDraft, DisputeCase, RoundSummaryDraft, Votes

from ....conftest import EXAMPLES, calls
from ....factories import case
from ....messages_server import ScriptedServer, anthropic_message, chat_completion

NOW = datetime(2026, 11, 1, tzinfo=UTC)


def ballot(vote: str) -> str:
    return json.dumps(
        {
            "conflicts": [],
            "buyer_conflicts": [],
            "seller_conflicts": [],
            "vote": vote,
            "justification": f"for the {vote} [s1]",
            "cited_clues": ["s1"],
            "cited_guidelines": [],
        }
    )


@pytest.fixture
async def openai_server() -> AsyncIterator[ScriptedServer]:
    s = ScriptedServer()
    await s.start()
    yield s
    await s.stop()


pytestmark = pytest.mark.usefixtures("no_provider_env")


def calls_metric(backend: str, model: str) -> float:
    return metrics.LLM_CALLS.labels(backend, model, "juror")._value.get()


async def test_each_jurors_call_goes_to_its_provider_through_the_real_sdk_clients(
    server: ScriptedServer, openai_server: ScriptedServer, tmp_path: Path
):
    server.reply(anthropic_message(ballot("buyer"), input_tokens=1000, output_tokens=100))
    openai_server.reply(chat_completion(ballot("seller"), prompt_tokens=2000, completion_tokens=50))
    settings = Settings(
        llm_backend="offline",
        precedent_backend="none",
        metrics_port=0,
        jurors=4,
        rounds=1,
        juror_models=["anthropic:claude-a", "openai:qwen2.5vl:7b"],
        anthropic_api_key="sk-test",
        anthropic_base_url=server.url,
        openai_base_url=f"{openai_server.url}/v1",
        llm_call_log=tmp_path / "calls.jsonl",
        llm_max_retries=0,
        llm_prices={"claude-a": TokenPrices(input=3, output=15), "qwen2.5vl:7b": TokenPrices(input=1, output=2)},
    )
    llm = build_llm(settings)
    assert isinstance(llm.inner, RoutedLLM) and set(llm.inner.backends) == {"anthropic", "openai", "offline"}
    before = calls_metric("anthropic", "claude-a"), calls_metric("openai", "qwen2.5vl:7b")
    try:
        verdict = await judge(case(), llm, settings)  # a text-only case
    finally:
        await llm.inner.aclose()

    # seats 0 and 2 on Anthropic, 1 and 3 on the OpenAI-compatible server, each sent the bare name
    assert [(r.path, r.body["model"]) for r in server.requests] == [("/v1/messages", "claude-a")] * 2
    assert [(r.path, r.body["model"]) for r in openai_server.requests] == [("/v1/chat/completions", "qwen2.5vl:7b")] * 2
    assert server.requests[0].headers["Authorization"] == "Bearer sk-test"
    assert verdict.votes_by_model == {
        "anthropic:claude-a": Votes(buyer=2, seller=0),
        "openai:qwen2.5vl:7b": Votes(buyer=0, seller=2),
    }
    assert verdict.winner == "buyer" and verdict.backend == "anthropic+offline+openai"

    # the call log and metrics name the backend that answered each call, priced at its model's rate
    logged = calls(settings.llm_call_log)
    assert Counter((c["role"], c["backend"]) for c in logged if c["role"] == "juror") == {
        ("juror", "anthropic"): 2,
        ("juror", "openai"): 2,
    }
    assert {c["backend"] for c in logged if c["role"] != "juror"} == {"offline"}
    costs = sorted(c["cost_usd"] for c in logged if c["role"] == "juror")
    assert costs == pytest.approx([(2000 * 1 + 50 * 2) / 1e6] * 2 + [(1000 * 3 + 100 * 15) / 1e6] * 2)
    assert verdict.tokens.cost_usd == pytest.approx(sum(costs))
    assert (calls_metric("anthropic", "claude-a") - before[0], calls_metric("openai", "qwen2.5vl:7b") - before[1]) == (
        2,
        2,
    )


def test_provider_prefixes_and_their_credentials():
    assert split_model("openai:gpt-5-mini") == ("openai", "gpt-5-mini")
    assert split_model("anthropic:claude-sonnet-5-5") == ("anthropic", "claude-sonnet-5-5")
    assert split_model("qwen2.5vl:7b") == (None, "qwen2.5vl:7b")  # an Ollama tag, not a provider
    assert split_model("claude-sonnet-5-5") == (None, "claude-sonnet-5-5")
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        Settings(llm_backend="offline", juror_models=["anthropic:claude-a", "b"])
    with pytest.raises(ValueError, match="OPENAI_BASE_URL"):
        Settings(llm_backend="offline", llm_roles={"summary": {"model": "openai:gpt-5-mini"}})
    bare = Settings(llm_backend="offline", juror_models=["model-a", "model-b"])
    assert not bare.providers_named() and not isinstance(build_llm(bare).inner, RoutedLLM)


# --- per-model figures in the eval report ------------------------------------------------------


def sample_cases() -> list[DisputeCase]:
    return [DisputeCase.model_validate_json(p.read_text()) for p in sorted((EXAMPLES / "cases").glob("*.json"))]


def seat_answer(truth: dict[str, str]):  # type: ignore[no-untyped-def]
    """model-a seats always vote for the seller; model-b seats vote as the real jury did."""

    def answer(request, output_type):  # type: ignore[no-untyped-def]
        if output_type is RoundSummaryDraft:
            return RoundSummaryDraft(summary="s", buyer_arguments=[], seller_arguments=[])
        vote = "seller" if request.model == "model-a" else truth[request.case_id]
        return BallotDraft(conflicts=[], buyer_conflicts=[], seller_conflicts=[], vote=vote, justification="j")

    return answer


async def test_a_jury_spread_over_two_models_shows_per_model_figures_in_the_report():
    cases = sample_cases()
    truth = {c.case_id: c.ground_truth.winner for c in cases}  # type: ignore[union-attr]
    settings = ABLATIONS["mixed-jury"].settings(
        Settings(llm_backend="offline", precedent_backend="none", metrics_port=0, juror_models=["model-a", "model-b"])
    )
    # stages I-II off: the scripted jury answers only ballots and summaries
    settings = settings.model_copy(
        update={"pipeline_overrides": {"focus_stage": False}, "max_select_steps": 0, "media_root": EXAMPLES}
    )
    llm = ScriptedLLM(seat_answer(truth))
    verdicts = await asyncio.gather(*(judge(c, llm, settings) for c in cases))
    results = [
        CaseResult(case_id=c.case_id, category=c.metadata.category, truth=c.ground_truth, verdict=v)
        for c, v in zip(cases, verdicts, strict=True)
    ]
    summary = summarize(results)

    # 17 seats: 9 on model-a (even seats), 8 on model-b; 9 seller votes always carry the verdict
    sellers = sum(w == "seller" for w in truth.values()) / len(cases)
    assert all(v.winner == "seller" for v in verdicts)
    a, b = summary.by_model["model-a"], summary.by_model["model-b"]
    assert (a.ballots, b.ballots) == (9 * len(cases), 8 * len(cases))
    assert (a.seller_share, a.majority_agreement, a.truth_agreement) == (1.0, 1.0, pytest.approx(sellers))
    assert (b.seller_share, b.majority_agreement, b.truth_agreement) == (
        pytest.approx(sellers),
        pytest.approx(sellers),
        1.0,
    )
    assert 0 < sellers < 1  # the samples have cases won by each side, so the two models differ

    report = EvalReport(
        name="+MixedJury",
        backend="scripted",
        models=["model-a", "model-b"],
        dataset=DatasetInfo(source="examples", sha256="ab" * 32, cases=len(cases)),
        started_at=NOW,
        finished_at=NOW,
        wall_s=1.0,
        summary=summary,
    )
    markdown = to_markdown([report])
    assert "Juror seats by model:" in markdown
    assert f"| `model-a` | {9 * len(cases)} | 100.0% | 100.0% | {100 * sellers:.1f}% |" in markdown
    assert f"| `model-b` | {8 * len(cases)} | {100 * sellers:.1f}% | {100 * sellers:.1f}% | 100.0% |" in markdown
    console = Console(width=250, record=True, color_system=None)
    console.print(render(report))
    assert "Juror seats by model" in console.export_text()

    # a jury on one model has nothing to compare: no per-model table
    one = summarize(
        [
            r.model_copy(
                update={
                    "verdict": r.verdict.model_copy(
                        update={  # type: ignore[union-attr]
                            "votes_by_model": {"m": r.verdict.votes}
                        }
                    )
                }
            )
            for r in results
        ]
    )  # type: ignore[union-attr]
    assert "Juror seats by model" not in to_markdown([report.model_copy(update={"summary": one})])


def test_the_mixed_jury_rung_runs_only_with_two_models_and_is_the_only_one_that_mixes():
    plain = Settings(llm_backend="offline")
    mixed = Settings(llm_backend="offline", juror_models=["model-a", "model-b"])
    assert ABLATIONS["mixed-jury"] not in select("ladder", plain) and ABLATIONS["mixed-jury"] in select("all", mixed)
    assert select("ladder") == LADDER  # without settings: every rung
    with pytest.raises(ValueError, match="two or more juror_models"):
        select("mixed-jury", plain)
    assert ABLATIONS["mixed-jury"].settings(mixed).juror_models == ["model-a", "model-b"]
    for key in ("precedent", "jury", "baseline", "chateval"):
        assert ABLATIONS[key].settings(mixed).juror_models == [], key
    precedent, mixed_rung = ABLATIONS["precedent"].settings(mixed), ABLATIONS["mixed-jury"].settings(mixed)
    # the rung's name is its pipeline's, whose switches are +Precedent's: the mix is the only change
    assert {k for k, v in precedent.model_dump().items() if v != mixed_rung.model_dump()[k]} == {
        "juror_models",
        "pipeline",
    }
    assert PIPELINES[mixed_rung.pipeline] == PIPELINES[precedent.pipeline]


def test_ballots_are_counted_by_model_vote_and_majority():
    def count(*labels: str) -> float:
        return metrics.BALLOTS.labels(*labels)._value.get()

    before = [count("m-a", "seller", "buyer"), count("m-a", "buyer", "buyer"), count("m-b", "seller", "buyer")]
    metrics.record_ballots({"m-a": Votes(buyer=6, seller=3), "m-b": Votes(buyer=2, seller=0)}, "buyer")
    after = [count("m-a", "seller", "buyer"), count("m-a", "buyer", "buyer"), count("m-b", "seller", "buyer")]
    assert [x - y for x, y in zip(after, before, strict=True)] == [3, 6, 0]
