"""The ``anthropic`` and ``openai`` backends over real HTTP against a local scripted server.

Each test starts an aiohttp server on 127.0.0.1 that answers like the provider (Messages API or
chat completions) from a script and records what it received, so the SDKs' own request
building, retries, timeouts and response parsing are exercised end to end.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import anthropic
import pytest

from cyberjurors.assembly import build_llm
from cyberjurors.config import Settings
from cyberjurors.llm.backends.anthropic import AnthropicLLM, user_content
from cyberjurors.llm.backends.openai import OpenAICompatibleLLM
from cyberjurors.llm.port import GuardedLLM, ImagePart, LLMError, LLMRequest, TextPart
from cyberjurors.schemas import BallotDraft

from ....messages_server import Reply, ScriptedServer, anthropic_error, anthropic_message, chat_completion, openai_error

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 24
BALLOT = {
    "conflicts": ["[s1] says the vase left intact; [b1] shows it cracked on arrival"],
    "buyer_conflicts": [],
    "seller_conflicts": ["[b1]"],
    "vote": "buyer",
    "justification": "The unboxing video [b1] shows the crack before the vase leaves the box.",
    "cited_clues": ["b1"],
    "cited_guidelines": [],
}
FAST = {"retry-after-ms": "5"}  # the SDKs wait this long before retrying instead of their 0.5 s backoff


pytestmark = pytest.mark.usefixtures("no_provider_env")


OPENED: list[AnthropicLLM | OpenAICompatibleLLM] = []


@pytest.fixture(autouse=True)
async def _close_clients() -> AsyncIterator[None]:
    """Close the SDK clients a test opened, so no keep-alive connection outlives its test."""
    yield
    while OPENED:
        await OPENED.pop().aclose()


def juror_request() -> LLMRequest:
    return LLMRequest(
        role="juror",
        model="claude-sonnet-4-6",
        system="You are juror 3 of 17.",
        shared=[TextPart("<case>vase arrived cracked</case>"), ImagePart(PNG, "image/png", "listing photo")],
        prompt=[
            TextPart("Cast your ballot."),
            ImagePart(JPEG, "image/jpeg", "frame 7 at 3.50s"),
            ImagePart(JPEG, "image/jpeg", "frame 8 at 4.00s"),
        ],
        case_id="case-42",
        max_output_tokens=900,
    )


def anthropic_llm(url: str, *, timeout: float = 5.0, retries: int = 2) -> AnthropicLLM:
    client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=url, timeout=timeout, max_retries=retries)
    OPENED.append(llm := AnthropicLLM(client))
    return llm


def openai_llm(url: str, *, retries: int = 2) -> OpenAICompatibleLLM:
    settings = Settings(llm_backend="openai", openai_base_url=f"{url}/v1", llm_timeout_s=5, llm_max_retries=retries)
    OPENED.append(llm := OpenAICompatibleLLM.from_settings(settings))
    return llm


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# --- anthropic -------------------------------------------------------------------------------


async def test_anthropic_parses_structured_output_and_maps_usage(server: ScriptedServer) -> None:
    server.reply(
        anthropic_message(
            json.dumps(BALLOT),
            model="claude-sonnet-4-6",
            input_tokens=37,
            output_tokens=112,
            cache_read=2048,
            cache_write=0,
        )
    )
    result = await anthropic_llm(server.url).generate(juror_request(), BallotDraft)

    assert isinstance(result.output, BallotDraft)
    assert result.output.vote == "buyer" and result.output.cited_clues == ["b1"]
    assert (result.usage.input_tokens, result.usage.output_tokens) == (37, 112)
    assert (result.usage.cache_read_tokens, result.usage.cache_write_tokens) == (2048, 0)
    assert (result.backend, result.model) == ("anthropic", "claude-sonnet-4-6")


async def test_anthropic_usage_without_cache_fields_counts_zero(server: ScriptedServer) -> None:
    server.reply(anthropic_message(json.dumps(BALLOT), cache_read=None, cache_write=None))
    result = await anthropic_llm(server.url).generate(juror_request(), BallotDraft)
    assert (result.usage.cache_read_tokens, result.usage.cache_write_tokens) == (0, 0)


async def test_anthropic_request_body(server: ScriptedServer) -> None:
    server.reply(anthropic_message(json.dumps(BALLOT)))
    await anthropic_llm(server.url).generate(juror_request(), BallotDraft)

    [seen] = server.requests
    assert (seen.method, seen.path) == ("POST", "/v1/messages")
    assert seen.headers["Authorization"] == "Bearer sk-test"  # how anthropic 2.12 sends an api_key
    body = seen.body
    assert body["model"] == "claude-sonnet-4-6" and body["max_tokens"] == 900
    assert body["system"] == [{"type": "text", "text": "You are juror 3 of 17."}]
    assert "stream" not in body
    # a model the catalog does not know gets the provider's defaults: no thinking, no effort
    assert "thinking" not in body and "effort" not in body["output_config"]

    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"] == anthropic.transform_schema(BallotDraft)
    assert fmt["schema"]["additionalProperties"] is False
    assert fmt["schema"]["properties"]["vote"]["enum"] == ["buyer", "seller"]
    assert set(fmt["schema"]["required"]) >= {"conflicts", "vote", "justification"}

    [message] = body["messages"]
    assert message["role"] == "user"
    assert message["content"] == [
        {"type": "text", "text": "<case>vase arrived cracked</case>"},
        {"type": "text", "text": "listing photo"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)},
            "cache_control": {"type": "ephemeral", "ttl": "5m"},
        },
        {"type": "text", "text": "Cast your ballot."},
        {"type": "text", "text": "frame 7 at 3.50s"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": b64(JPEG)}},
        {"type": "text", "text": "frame 8 at 4.00s"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": b64(JPEG)}},
    ]
    assert [i for i, b in enumerate(message["content"]) if "cache_control" in b] == [2]


def test_no_cache_breakpoint_without_a_shared_prefix() -> None:
    request = juror_request()
    request.shared = []
    assert all("cache_control" not in block for block in user_content(request))


async def test_anthropic_429_is_retried_by_the_sdk(server: ScriptedServer) -> None:
    server.reply(
        anthropic_error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your rate limit.",
            **{"retry-after": "0", **FAST},
        ),
        anthropic_message(json.dumps(BALLOT)),
    )
    result = await anthropic_llm(server.url).generate(juror_request(), BallotDraft)

    assert result.output.vote == "buyer"
    assert len(server.requests) == 2
    assert server.requests[1].headers["x-stainless-retry-count"] == "1"
    assert server.requests[1].body == server.requests[0].body


async def test_anthropic_529_overloaded_is_retried_by_the_sdk(server: ScriptedServer) -> None:
    server.reply(anthropic_error(529, "overloaded_error", "Overloaded", **FAST), anthropic_message(json.dumps(BALLOT)))
    result = await anthropic_llm(server.url).generate(juror_request(), BallotDraft)
    assert result.output.vote == "buyer"
    assert len(server.requests) == 2


async def test_anthropic_timeout(server: ScriptedServer) -> None:
    server.reply(Reply(delay_s=2.0, body={}))
    with pytest.raises(LLMError) as err:
        await anthropic_llm(server.url, timeout=0.2, retries=0).generate(juror_request(), BallotDraft)
    assert err.value.kind == "timeout"
    assert len(server.requests) == 1


async def test_anthropic_persistent_500_fails_after_the_sdk_retries(server: ScriptedServer) -> None:
    server.reply(anthropic_error(500, "api_error", "Internal server error", **FAST))
    with pytest.raises(LLMError) as err:
        await anthropic_llm(server.url, retries=2).generate(juror_request(), BallotDraft)
    assert err.value.kind == "server_error"
    assert len(server.requests) == 3


@pytest.mark.parametrize(
    ("status", "error_type", "kind", "attempts"),
    [
        (400, "invalid_request_error", "bad_request", 1),
        (401, "authentication_error", "auth", 1),
        (403, "permission_error", "auth", 1),
        (429, "rate_limit_error", "rate_limited", 2),
        (529, "overloaded_error", "overloaded", 2),
    ],
)
async def test_anthropic_http_errors(
    server: ScriptedServer, status: int, error_type: str, kind: str, attempts: int
) -> None:
    server.reply(anthropic_error(status, error_type, "no", **FAST))
    with pytest.raises(LLMError) as err:
        await anthropic_llm(server.url, retries=1).generate(juror_request(), BallotDraft)
    assert err.value.kind == kind
    assert len(server.requests) == attempts  # 4xx other than 429 are not retried


async def test_anthropic_connection_refused() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(LLMError) as err:
        await anthropic_llm(f"http://127.0.0.1:{port}", retries=0).generate(juror_request(), BallotDraft)
    assert err.value.kind == "connection"


@pytest.mark.parametrize(
    ("text", "stop_reason", "kind"),
    [
        ('{"vote": "maybe"}', "end_turn", "invalid_output"),  # JSON, but not a BallotDraft
        ("I think the buyer is right.", "end_turn", "invalid_output"),  # not JSON at all
        (json.dumps(BALLOT)[:60], "max_tokens", "truncated"),  # cut off mid-object
        ("I can't help with that.", "refusal", "refused"),
    ],
)
async def test_anthropic_unusable_replies(server: ScriptedServer, text: str, stop_reason: str, kind: str) -> None:
    server.reply(anthropic_message(text, stop_reason=stop_reason))
    with pytest.raises(LLMError) as err:
        await anthropic_llm(server.url).generate(juror_request(), BallotDraft)
    assert err.value.kind == kind
    assert len(server.requests) == 1  # a bad reply is not retried


async def test_guarded_anthropic_logs_cache_tokens(server: ScriptedServer, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    server.reply(
        anthropic_message(json.dumps(BALLOT), input_tokens=40, output_tokens=90, cache_write=1800),
        anthropic_message(json.dumps(BALLOT), input_tokens=41, output_tokens=95, cache_read=1800),
    )
    llm = GuardedLLM(anthropic_llm(server.url), concurrency=2, call_log=log)
    first = await llm.generate(juror_request(), BallotDraft)
    await llm.generate(juror_request(), BallotDraft)

    assert first.usage.calls == 1 and first.usage.latency_s > 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(x["cache_write_tokens"], x["cache_read_tokens"]) for x in lines] == [(1800, 0), (0, 1800)]
    assert [x["input_tokens"] for x in lines] == [40, 41]
    assert {(x["backend"], x["case_id"], x["role"]) for x in lines} == {("anthropic", "case-42", "juror")}


async def test_build_llm_anthropic(server: ScriptedServer, tmp_path: Path) -> None:
    settings = Settings(
        llm_backend="anthropic",
        anthropic_api_key="sk-conf",
        anthropic_base_url=server.url,
        llm_timeout_s=7.5,
        llm_max_retries=1,
        llm_call_log=tmp_path / "calls.jsonl",
    )
    llm = build_llm(settings)
    assert isinstance(llm, GuardedLLM) and isinstance(llm.inner, AnthropicLLM)
    OPENED.append(llm.inner)
    assert (llm.inner.client.timeout, llm.inner.client.max_retries) == (7.5, 1)

    server.reply(anthropic_error(529, "overloaded_error", "Overloaded", **FAST), anthropic_message(json.dumps(BALLOT)))
    result = await llm.generate(juror_request(), BallotDraft)
    assert result.output.vote == "buyer" and llm.backend == "anthropic"
    assert len(server.requests) == 2
    assert server.requests[0].headers["Authorization"] == "Bearer sk-conf"
    assert json.loads((tmp_path / "calls.jsonl").read_text())["backend"] == "anthropic"


# --- openai-compatible -----------------------------------------------------------------------


async def test_openai_parses_structured_output_and_maps_usage(server: ScriptedServer) -> None:
    server.reply(chat_completion(json.dumps(BALLOT), prompt_tokens=1500, completion_tokens=80, cached_tokens=1024))
    result = await openai_llm(server.url).generate(juror_request(), BallotDraft)

    assert isinstance(result.output, BallotDraft) and result.output.vote == "buyer"
    # prompt_tokens includes the cached ones; Usage counts them apart, as Anthropic reports them
    assert (result.usage.input_tokens, result.usage.cache_read_tokens) == (476, 1024)
    assert (result.usage.output_tokens, result.usage.cache_write_tokens) == (80, 0)
    assert (result.backend, result.model) == ("openai", "qwen2.5-vl-7b")


async def test_openai_request_body(server: ScriptedServer) -> None:
    server.reply(chat_completion(json.dumps(BALLOT)))
    await openai_llm(server.url).generate(juror_request(), BallotDraft)

    [seen] = server.requests
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.headers["Authorization"] == "Bearer not-needed"
    body = seen.body
    assert body["model"] == "claude-sonnet-4-6" and body["max_tokens"] == 900 and not body.get("stream")
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "BallotDraft" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == set(BallotDraft.model_fields)  # strict: every field required

    system, user = body["messages"]
    assert system == {"role": "system", "content": "You are juror 3 of 17."}
    assert user["role"] == "user"
    assert user["content"] == [
        {"type": "text", "text": "<case>vase arrived cracked</case>"},
        {"type": "text", "text": "listing photo"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"}},
        {"type": "text", "text": "Cast your ballot."},
        {"type": "text", "text": "frame 7 at 3.50s"},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64(JPEG)}"}},
        {"type": "text", "text": "frame 8 at 4.00s"},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64(JPEG)}"}},
    ]


async def test_openai_429_is_retried_by_the_sdk(server: ScriptedServer) -> None:
    server.reply(
        openai_error(429, "Rate limit reached", "rate_limit_exceeded", **FAST), chat_completion(json.dumps(BALLOT))
    )
    result = await openai_llm(server.url).generate(juror_request(), BallotDraft)
    assert result.output.vote == "buyer"
    assert len(server.requests) == 2


async def test_openai_persistent_503(server: ScriptedServer) -> None:
    server.reply(openai_error(503, "model is loading", **FAST))
    with pytest.raises(LLMError) as err:
        await openai_llm(server.url, retries=1).generate(juror_request(), BallotDraft)
    assert err.value.kind == "server_error"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (chat_completion('{"vote": "maybe"}'), "invalid_output"),
        (chat_completion("The buyer should win."), "invalid_output"),
        (chat_completion(json.dumps(BALLOT)[:60], finish_reason="length"), "truncated"),
        (chat_completion(None, refusal="I can't help with that."), "refused"),
        (chat_completion(None, finish_reason="content_filter"), "refused"),
    ],
)
async def test_openai_unusable_replies(server: ScriptedServer, reply: Reply, kind: str) -> None:
    server.reply(reply)
    with pytest.raises(LLMError) as err:
        await openai_llm(server.url).generate(juror_request(), BallotDraft)
    assert err.value.kind == kind
    # an answer that is no valid ballot gets one repair request; a cut or refused one does not
    assert len(server.requests) == (2 if kind == "invalid_output" else 1)


async def test_build_llm_openai(server: ScriptedServer) -> None:
    llm = build_llm(Settings(llm_backend="openai", openai_base_url=f"{server.url}/v1", openai_api_key="local-key"))
    assert isinstance(llm.inner, OpenAICompatibleLLM)
    OPENED.append(llm.inner)
    server.reply(chat_completion(json.dumps(BALLOT)))
    result = await llm.generate(juror_request(), BallotDraft)
    assert result.output.vote == "buyer" and result.backend == "openai"
    assert server.requests[0].headers["Authorization"] == "Bearer local-key"
