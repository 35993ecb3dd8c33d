"""Effort and thinking per role, through the real SDK code paths (issue 13, item 1).

A local server plays a model that thinks 2,000 tokens before every answer and counts them toward
the output cap as the Messages API does (tests/messages_server.py, ``ThinkingModel``). The sample
cases are judged by the same stage functions the workers run (``jury.stages.judge``), through
``build_llm`` (GuardedLLM over the official anthropic / openai SDKs): with the defaults every case
gets a verdict; with the old output cap (2,048 tokens, nothing kept for thinking) every case is cut.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cyberjurors.assembly import build_llm
from cyberjurors.config import ROLE_CALLS, Settings
from cyberjurors.jury import prompts
from cyberjurors.jury.stages import judge
from cyberjurors.llm.backends.anthropic import system_content, thinking_params, user_content
from cyberjurors.llm.backends.openai import output_limits
from cyberjurors.llm.port import GuardedLLM, ImagePart, LLMError, LLMRequest, TextPart, can_cache, stage_request
from cyberjurors.schemas import BallotDraft, DisputeCase, Selection, Verdict
from cyberjurors.schemas.bounds import room

from ....conftest import EXAMPLES
from ....factories import anthropic_settings
from ....messages_server import Received, ScriptedServer, ThinkingModel, anthropic_message

CASES = [DisputeCase.model_validate_json(p.read_text()) for p in sorted((EXAMPLES / "cases").glob("*.json"))]
THINKING = 2000


pytestmark = pytest.mark.usefixtures("no_provider_env")


@pytest.fixture
async def thinker() -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer(respond=ThinkingModel(thinking_tokens=THINKING))
    await server.start()
    yield server
    await server.stop()


async def judge_all(settings: Settings) -> list[Verdict | LLMError]:
    llm = build_llm(settings)
    try:
        return list(await asyncio.gather(*(judge(case, llm, settings) for case in CASES), return_exceptions=True))
    finally:
        await llm.inner.aclose()  # type: ignore[attr-defined]


def by_role(requests: list[Received]) -> dict[str, list[dict]]:
    """Requests grouped by the role their system prompt belongs to (the schema's title names it)."""
    roles: dict[str, list[dict]] = {}
    for r in requests:
        schema = r.body.get("output_config", {}).get("format", {}).get("schema") or r.body.get(
            "response_format", {}
        ).get("json_schema", {}).get("schema", {})
        roles.setdefault(schema.get("title", "?"), []).append(r.body)
    return roles


# each output type's role in a case judged on the defaults (its room is the role's: ROLE_CALLS)
ROLE_OF = {"Focus": "focus", "Selection": "select", "Perception": "perceive", "BallotDraft": "juror"}
ROLE_OF |= {"RoundSummaryDraft": "summary", "VerificationDraft": "verify", "JustificationDraft": "summary"}


# --- the issue's check: every sample case gets a verdict --------------------------------------


async def test_every_sample_case_gets_a_verdict_when_every_reply_thinks_2000_tokens(thinker: ScriptedServer) -> None:
    settings = anthropic_settings(thinker.url)
    results = await judge_all(settings)

    failed = {c.case_id: r for c, r in zip(CASES, results, strict=False) if not isinstance(r, Verdict)}
    assert not failed and len(results) == len(CASES) == 16
    verdicts = [r for r in results if isinstance(r, Verdict)]
    # thinking counted in usage (inside output, as billed), for every call of every case
    assert all(v.tokens.thinking_tokens == THINKING * v.tokens.calls for v in verdicts)
    assert all(v.tokens.output_tokens > v.tokens.thinking_tokens for v in verdicts)
    assert all(v.tokens.cost_usd > 0 for v in verdicts)  # priced at claude-sonnet-5-5's list prices

    roles = by_role(thinker.requests)
    assert {"Focus", "Selection", "Perception", "BallotDraft", "RoundSummaryDraft"} <= set(roles)
    for title, role in [
        ("Focus", "focus"),
        ("Selection", "select"),
        ("Perception", "perceive"),
        ("BallotDraft", "juror"),
        ("RoundSummaryDraft", "summary"),
    ]:
        call = ROLE_CALLS[role]
        for body in roles[title]:
            # auto on Sonnet 5.5: its default (adaptive) thinking, the role's effort, room for both
            assert "thinking" not in body, title
            assert body["output_config"]["effort"] == call.effort, title
            assert body["max_tokens"] == call.max_output_tokens + call.thinking_budget, title


async def test_the_old_output_cap_truncates_every_case(thinker: ScriptedServer) -> None:
    # before issue 13: max_tokens 2,048 with nothing kept for thinking
    settings = anthropic_settings(thinker.url, llm_roles={"default": {"max_output_tokens": 2048, "thinking_budget": 0}})
    results = await judge_all(settings)
    assert all(isinstance(r, LLMError) and r.kind == "truncated" for r in results), results
    assert "spent thinking" in str(results[0]) and "thinking_budget" in str(results[0])
    assert all(r.body["max_tokens"] == 2048 for r in thinker.requests)


async def test_every_sample_case_gets_a_verdict_from_an_openai_reasoning_model(thinker: ScriptedServer) -> None:
    settings = Settings(
        llm_backend="openai",
        openai_base_url=f"{thinker.url}/v1",
        model="gpt-5-mini",
        llm_max_retries=0,
        precedent_backend="none",
        media_root=EXAMPLES,
        metrics_port=0,
    )
    results = await judge_all(settings)
    assert all(isinstance(r, Verdict) for r in results), [r for r in results if not isinstance(r, Verdict)]
    assert all(r.tokens.thinking_tokens == THINKING * r.tokens.calls for r in results)  # type: ignore[union-attr]
    for title, bodies in by_role(thinker.requests).items():
        role = ROLE_OF[title]
        for body in bodies:
            assert "max_tokens" not in body
            assert body["max_completion_tokens"] == ROLE_CALLS[role].max_output_tokens + 4096
            assert body["reasoning_effort"] == ROLE_CALLS[role].effort


# --- the request, per model ---------------------------------------------------------------------


def request(model: str, **over: object) -> LLMRequest:
    fields: dict = dict(
        role="juror",
        model=model,
        system="s",
        shared=[TextPart("the case")],
        prompt=[TextPart("vote")],
        max_output_tokens=2048,
        thinking_budget=4096,
        effort="medium",
    )
    return LLMRequest(**(fields | over))


@pytest.mark.parametrize(
    ("model", "thinking", "sent", "effort", "max_tokens"),
    [
        ("claude-sonnet-5-5", "auto", None, "medium", 6144),
        ("claude-sonnet-5-5", "adaptive", {"type": "adaptive"}, "medium", 6144),
        ("claude-sonnet-5-5", "off", {"type": "between_tools"}, "medium", 6144),  # it refuses "disabled"
        ("claude-sonnet-5-5-20260928", "auto", None, "medium", 6144),  # a dated name
        ("claude-haiku-4-5", "auto", None, None, 2048),  # thinks only if asked; no effort
        ("claude-haiku-4-5", "budget", {"type": "enabled", "budget_tokens": 4096}, None, 6144),
        ("claude-haiku-4-5", "off", {"type": "disabled"}, None, 2048),  # no thinking: answer only
        ("claude-sonnet-5", "off", None, "medium", 6144),  # no known way: keep the room
        ("some-new-model", "auto", None, None, 6144),  # unknown: provider defaults
        ("some-new-model", "off", {"type": "disabled"}, None, 2048),
    ],
)
def test_thinking_and_effort_per_model(
    model: str, thinking: str, sent: dict | None, effort: str | None, max_tokens: int
) -> None:
    params = thinking_params(request(model, thinking=thinking))
    assert (params.thinking, params.effort, params.max_tokens) == (sent, effort, max_tokens)


def test_a_budget_below_the_apis_minimum_is_raised_to_it() -> None:
    params = thinking_params(request("claude-haiku-4-5", thinking="budget", thinking_budget=300))
    assert params.thinking == {"type": "enabled", "budget_tokens": 1024} and params.max_tokens == 2048 + 1024


async def test_budget_thinking_on_the_wire_is_accepted_and_capped(thinker: ScriptedServer) -> None:
    settings = anthropic_settings(
        thinker.url, model="claude-haiku-4-5", llm_roles={"default": {"thinking": "budget", "thinking_budget": 1500}}
    )
    llm = build_llm(settings)
    try:
        result = await llm.generate(
            stage_request("juror", settings, system="s", prompt=["vote"], task=None, case_id="c", shared=["the case"]),
            BallotDraft,
        )
    finally:
        await llm.inner.aclose()  # type: ignore[attr-defined]
    [body] = [r.body for r in thinker.requests]
    juror = ROLE_CALLS["juror"].max_output_tokens or 0
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1500} and body["max_tokens"] == juror + 1500
    assert "effort" not in body["output_config"]  # Haiku 4.5 takes none
    assert result.usage.thinking_tokens == 1500  # the server thinks up to the budget, not its 2,000


def test_a_thinking_type_a_known_model_refuses_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match=r"thinking=budget for .* refused by claude-sonnet-5-5"):
        Settings(llm_roles={"default": {"thinking": "budget"}})
    with pytest.raises(ValueError, match="thinking=adaptive for juror is refused by claude-haiku-4-5"):
        Settings(juror_models=["claude-sonnet-5-5", "claude-haiku-4-5"], llm_roles={"juror": {"thinking": "adaptive"}})
    # a seat that names its provider is checked as its model (a mixed jury names them)
    with pytest.raises(ValueError, match="thinking=adaptive for juror is refused by anthropic:claude-haiku-4-5"):
        Settings(
            anthropic_api_key="k",
            juror_models=["claude-sonnet-5-5", "anthropic:claude-haiku-4-5"],
            llm_roles={"juror": {"thinking": "adaptive"}},
        )
    with pytest.raises(ValueError, match="at least 1024"):
        Settings(model="claude-haiku-4-5", llm_roles={"default": {"thinking": "budget", "thinking_budget": 512}})


def test_role_settings_resolve_role_then_default_then_builtin(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings()
    assert (s.call_for("select").effort, s.call_for("select").max_output_tokens) == ("low", room(Selection))
    assert (s.call_for("judge").effort, s.call_for("distil").max_output_tokens) == ("high", 4096)
    monkeypatch.setenv(
        "CYBERJURORS_LLM_ROLES",
        json.dumps({"select": {"effort": "medium", "thinking_budget": 0}, "default": {"effort": "max"}}),
    )
    s = Settings()
    assert s.call_for("select").effort == "medium" and s.call_for("select").thinking_budget == 0
    assert s.call_for("juror").effort == "max" and s.call_for("juror").thinking_budget == 4096
    assert stage_request("select", s, system="s", prompt=["p"], task=None, case_id="c").max_tokens() == room(Selection)


def test_openai_limits_for_reasoning_and_other_models() -> None:
    req = request("gpt-5-mini")
    assert output_limits(req, reasoning=True) == {"max_completion_tokens": 6144, "reasoning_effort": "medium"}
    assert output_limits(req, reasoning=False) == {"max_tokens": 2048}  # a local model's context is small
    # adaptive is what a reasoning model does anyway: as auto
    assert output_limits(request("gpt-5-mini", thinking="adaptive"), reasoning=True) == output_limits(
        req, reasoning=True
    )
    assert output_limits(request("qwen3", thinking="off"), reasoning=False) == {"max_tokens": 2048}


async def test_a_reply_that_thinks_first_is_parsed_from_its_text_block(server: ScriptedServer) -> None:
    ballot = {
        "conflicts": [],
        "buyer_conflicts": [],
        "seller_conflicts": [],
        "vote": "seller",
        "justification": "[s1] shows it intact",
        "cited_clues": ["s1"],
        "cited_guidelines": [],
    }
    server.reply(
        anthropic_message(
            json.dumps(ballot),
            thinking='{"vote": "buyer"} is what I first thought',
            output_tokens=2300,
            thinking_tokens=2000,
            cache_write=3000,
            cache_write_1h=3000,
            model="claude-sonnet-5-5",
        )
    )
    settings = anthropic_settings(server.url)
    llm = build_llm(settings)
    try:
        result = await llm.generate(request("claude-sonnet-5-5"), BallotDraft)
    finally:
        await llm.inner.aclose()  # type: ignore[attr-defined]
    assert result.output.vote == "seller"  # the text block, not the thinking
    assert (result.usage.output_tokens, result.usage.thinking_tokens) == (2300, 2000)
    assert (result.usage.cache_write_tokens, result.usage.cache_write_1h_tokens) == (3000, 3000)
    # 120 input at $2, 2,300 output (thinking included) at $10, 3,000 one-hour writes at $4 per million
    assert result.usage.cost_usd == pytest.approx((120 * 2 + 2300 * 10 + 3000 * 4) / 1e6)


async def test_a_reply_cut_while_thinking_is_truncated_and_says_why(server: ScriptedServer) -> None:
    server.reply(
        anthropic_message(None, thinking="...", stop_reason="max_tokens", output_tokens=6144, thinking_tokens=6144)
    )
    llm = GuardedLLM(build_llm(anthropic_settings(server.url)).inner)
    try:
        with pytest.raises(LLMError) as err:
            await llm.generate(request("claude-sonnet-5-5"), Selection)
    finally:
        await llm.inner.aclose()  # type: ignore[attr-defined]
    assert err.value.kind == "truncated"
    assert "6144 of 6144 tokens spent thinking" in str(err.value) and "juror" in str(err.value)


# --- cache breakpoints and TTL --------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "chars", "images", "cacheable"),
    [
        ("claude-sonnet-5-5", 600, 0, False),  # ~200 tokens: below Sonnet 5.5's 512
        ("claude-sonnet-5-5", 1600, 0, True),  # ~533
        ("claude-sonnet-5-5", 30, 1, True),  # an image is ~800
        ("claude-haiku-4-5", 9000, 0, False),  # ~3,000: below Haiku 4.5's 4,096
        ("claude-haiku-4-5", 12_600, 0, True),
        ("claude-opus-4-7", 6000, 0, False),  # 2,000 < 2,048
        ("mystery-model", 10, 0, True),  # unknown minimum: a breakpoint costs nothing
    ],
)
def test_breakpoints_only_where_the_prefix_can_reach_the_models_minimum(
    model: str, chars: int, images: int, cacheable: bool
) -> None:
    shared = [TextPart("x" * chars), *[ImagePart(b"\xff\xd8", "image/jpeg", "evidence b1") for _ in range(images)]]
    assert can_cache(model, "", shared) is cacheable
    req = stage_request("select", Settings(model=model), system="", prompt=["p"], task=None, case_id="c", shared=shared)
    assert req.cache_prefix is cacheable
    assert any("cache_control" in block for block in user_content(req)) is cacheable


def test_the_cache_ttl_setting_and_caching_off() -> None:
    long = ["y" * 3000]
    for ttl in ("5m", "1h"):
        req = stage_request(
            "juror", Settings(prompt_cache_ttl=ttl), system="s", prompt=["p"], task=None, case_id="c", shared=long
        )
        assert user_content(req)[0]["cache_control"] == {"type": "ephemeral", "ttl": ttl}
    off = stage_request(
        "juror", Settings(prompt_caching=False), system="s", prompt=["p"], task=None, case_id="c", shared=long
    )
    assert not off.cache_prefix and all("cache_control" not in b for b in user_content(off))
    with pytest.raises(ValueError):
        Settings(prompt_cache_ttl="10m")


def test_a_system_prompt_long_enough_to_cache_alone_gets_a_breakpoint_of_its_own() -> None:
    """A juror's system prompt with the verdict rules is the same for every case and long enough for
    Sonnet 5.5 (512) on its own: each case's first juror reads it instead of writing it again."""
    with_rules = prompts.with_rules(prompts.JUROR_SYSTEM, prompts.verdict_rules())

    def marks(system: str, **settings: object) -> list[dict]:
        req = stage_request(
            "juror", Settings(**settings), system=system, prompt=["p"], task=None, case_id="c", shared=["y" * 3000]
        )
        return [b["cache_control"] for b in system_content(req) if "cache_control" in b]

    assert marks(with_rules) == [{"type": "ephemeral", "ttl": "5m"}]
    assert marks(with_rules, prompt_cache_ttl="1h") == [{"type": "ephemeral", "ttl": "1h"}]
    assert marks(prompts.JUROR_SYSTEM) == []  # ~270 tokens without the rules
    assert marks(with_rules, model="claude-sonnet-5") == []  # below Sonnet 5's 1,024
    assert marks(with_rules, prompt_caching=False) == []


async def test_on_the_sample_cases_only_prefixes_that_can_cache_are_marked(thinker: ScriptedServer) -> None:
    await judge_all(anthropic_settings(thinker.url, prompt_cache_ttl="1h"))
    roles = by_role(thinker.requests)

    def marked(body: dict) -> list[dict]:
        return [b["cache_control"] for b in body["messages"][0]["content"] if "cache_control" in b]

    # the jurors' case prefix reaches Sonnet 5.5's 512 tokens: one 1-hour breakpoint on every call
    assert all(marked(b) == [{"type": "ephemeral", "ttl": "1h"}] for b in roles["BallotDraft"])
    # the summary's prefix (the case metadata) cannot: no breakpoint that would never cache
    assert all(marked(b) == [] for b in roles["RoundSummaryDraft"])
    # the jurors' system prompt (with the verdict rules) caches on its own; the summariser's cannot
    assert all(b["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"} for b in roles["BallotDraft"])
    assert all("cache_control" not in b["system"][0] for b in roles["RoundSummaryDraft"])


def test_eval_caches_for_an_hour_unless_the_ttl_is_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from cyberjurors.evaluation.ladder import LADDER
    from cyberjurors.evaluation.runner import worker_settings
    from cyberjurors.evaluation.runs import Options

    def ttl(base: Settings) -> str:
        dataset, run = SimpleNamespace(media_root=EXAMPLES), SimpleNamespace(run_id="r1")
        return worker_settings(base, LADDER[-1], dataset, run, "127.0.0.1:9092", Options(out=tmp_path)).prompt_cache_ttl  # type: ignore[arg-type]

    assert Settings().prompt_cache_ttl == "5m" and ttl(Settings()) == "1h"
    assert ttl(Settings(prompt_cache_ttl="5m")) == "5m"
    monkeypatch.setenv("CYBERJURORS_PROMPT_CACHE_TTL", "5m")
    assert ttl(Settings()) == "5m"


# --- what reaches an OpenAI-compatible reasoning model (effort, thinking, truncation) ---------------


def openai_settings(url: str, **over: object) -> Settings:
    return Settings(
        llm_backend="openai",
        openai_base_url=f"{url}/v1",
        model="gpt-5-mini",
        llm_max_retries=0,
        precedent_backend="none",
        media_root=EXAMPLES,
        metrics_port=0,
        **over,
    )


async def one_call(settings: Settings) -> object:
    llm = build_llm(settings)
    try:
        return await llm.generate(
            stage_request("juror", settings, system="s", prompt=["vote"], task=None, case_id="c", shared=["the case"]),
            BallotDraft,
        )
    finally:
        await llm.inner.aclose()  # type: ignore[attr-defined]


def test_an_effort_an_openai_reasoning_model_does_not_take_is_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    openai_url = "http://127.0.0.1:9/v1"
    monkeypatch.setenv("CYBERJURORS_LLM_ROLES__DEFAULT__EFFORT", "max")  # the trial's repro
    with pytest.raises(
        ValueError,
        match=r"effort=max for focus is refused by gpt-5-mini: its reasoning_effort may "
        r"be low, medium, high \(openai_reasoning_efforts\)",
    ):
        Settings(llm_backend="openai", openai_base_url=openai_url, model="gpt-5-mini")
    # listed as one the endpoint's models take (gpt-5.6 takes max), it goes
    Settings(
        llm_backend="openai",
        openai_base_url=openai_url,
        model="gpt-5-mini",
        openai_reasoning_efforts=["none", "low", "medium", "high", "xhigh", "max"],
    )
    monkeypatch.delenv("CYBERJURORS_LLM_ROLES__DEFAULT__EFFORT")

    # a juror seat on an openai: model while the default backend is anthropic
    mixed = dict(anthropic_api_key="sk-ant-test", openai_base_url=openai_url, llm_roles={"juror": {"effort": "xhigh"}})
    with pytest.raises(ValueError, match="effort=xhigh for juror is refused by openai:gpt-5-mini"):
        Settings(juror_models=["claude-sonnet-5-5", "openai:gpt-5-mini"], **mixed)
    # where no call of the role goes to an OpenAI reasoning model, nothing is refused: Sonnet 5.5
    # takes xhigh, and a model not in openai_reasoning_models is sent no reasoning_effort at all
    Settings(juror_models=["claude-sonnet-5-5", "openai:qwen2.5-vl-7b"], **mixed)
    # thinking off sends the endpoint's lowest effort instead of the role's
    Settings(
        llm_backend="openai",
        openai_base_url=openai_url,
        model="gpt-5-mini",
        llm_roles={"default": {"effort": "max", "thinking": "off"}},
    )
    # no budget goes to an OpenAI reasoning model: max_completion_tokens caps reasoning and answer together
    with pytest.raises(ValueError, match="thinking=budget for juror is refused by openai:gpt-5-mini"):
        Settings(
            anthropic_api_key="sk-ant-test",
            openai_base_url=openai_url,
            model="claude-haiku-4-5",
            juror_models=["openai:gpt-5-mini"],
            llm_roles={"default": {"thinking": "budget"}},
        )


async def test_an_effort_listed_for_the_endpoint_reaches_it(thinker: ScriptedServer) -> None:
    await one_call(
        openai_settings(
            thinker.url,
            llm_roles={"default": {"effort": "max"}},
            openai_reasoning_efforts=["low", "medium", "high", "xhigh", "max"],
        )
    )
    assert [r.body["reasoning_effort"] for r in thinker.requests] == ["max"]


async def test_thinking_off_on_an_openai_reasoning_model_sends_the_lowest_effort_it_takes() -> None:
    # gpt-5.1 and later take "none" (no reasoning); o-series models reason at least at "low"
    server = ScriptedServer(
        respond=ThinkingModel(thinking_tokens=THINKING, reasoning_efforts=frozenset({"none", "low", "medium", "high"}))
    )
    await server.start()
    try:
        low = await one_call(openai_settings(server.url, llm_roles={"default": {"thinking": "off", "effort": "high"}}))
        none = await one_call(
            openai_settings(
                server.url,
                llm_roles={"default": {"thinking": "off"}},
                openai_reasoning_efforts=["none", "low", "medium", "high"],
            )
        )
    finally:
        await server.stop()
    sent = [(r.body["reasoning_effort"], r.body["max_completion_tokens"]) for r in server.requests]
    # "low" still reasons: the room for it stays, or the answer would be cut
    juror = ROLE_CALLS["juror"].max_output_tokens or 0
    assert sent == [("low", juror + 4096), ("none", juror)]
    assert (low.usage.thinking_tokens, none.usage.thinking_tokens) == (THINKING, 0)  # type: ignore[attr-defined]


async def test_an_openai_reply_cut_while_reasoning_says_how_much_and_what_to_raise() -> None:
    server = ScriptedServer(respond=ThinkingModel(thinking_tokens=8000))
    await server.start()
    try:
        with pytest.raises(LLMError) as err:
            await one_call(openai_settings(server.url))
    finally:
        await server.stop()
    cap = (ROLE_CALLS["juror"].max_output_tokens or 0) + 4096
    assert err.value.kind == "truncated"
    assert str(err.value) == (
        f"openai: finish_reason length after {cap} of {cap} tokens (max_completion_tokens) spent "
        "reasoning: raise juror's thinking_budget or max_output_tokens, or lower its effort "
        "(llm_roles)"
    )
