"""The strict local Messages server (tests/messages_server.py, ``StrictModel``/``PromptCache``) bills
the prompt cache the way the API documents it; bench/token_economy.py's figures rest on that, so the
double is held to the documented rules here, and the project's requests are checked against it."""

from __future__ import annotations

import base64
import io
from typing import Any

import pytest
from PIL import Image

from cyberjurors.config import Settings
from cyberjurors.jury import prompts
from cyberjurors.llm.backends.anthropic import AnthropicLLM
from cyberjurors.llm.port import stage_request
from cyberjurors.schemas import BallotDraft

from ....factories import example_case
from ....messages_server import MIN_CACHEABLE, PromptCache, Received, StrictModel, count_tokens

SCHEMA = {
    "type": "object",
    "title": "Answer",
    "properties": {"x": {"type": "string"}},
    "required": ["x"],
    "additionalProperties": False,
}
WORDS = "alpha beta gamma delta "  # 4 tokens


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def body(*blocks: dict[str, Any], system: str = "You judge.", model: str = "claude-sonnet-5-5") -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 512,
        "system": [{"type": "text", "text": system}],
        "messages": [{"role": "user", "content": list(blocks)}],
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
    }


def text(tokens: int, ttl: str | None = None, tag: str = "") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": tag + WORDS * (tokens // 4)}
    if ttl:
        block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return block


def usage(model: StrictModel, request: dict[str, Any]) -> dict[str, Any]:
    reply = model(Received("POST", "/v1/messages", {}, request))
    assert reply.status == 200, reply.body
    return reply.body["usage"]


def test_a_prefix_is_written_once_read_after_and_includes_the_system_prompt() -> None:
    model = StrictModel(cache=PromptCache(clock=Clock()))
    system_tokens = count_tokens("You judge.")
    first = usage(model, body(text(600, "5m"), text(40)))
    assert first["cache_creation_input_tokens"] == system_tokens + 600 and first["cache_read_input_tokens"] == 0
    assert first["input_tokens"] == 40
    second = usage(model, body(text(600, "5m"), text(80, tag="other ")))
    assert second["cache_read_input_tokens"] == system_tokens + 600 and second["cache_creation_input_tokens"] == 0
    # another system prompt is another prefix: nothing to read
    third = usage(model, body(text(600, "5m"), text(40), system="You summarise."))
    assert third["cache_read_input_tokens"] == 0 and third["cache_creation_input_tokens"] > 600


def test_below_the_models_minimum_nothing_is_cached() -> None:
    model = StrictModel(cache=PromptCache(clock=Clock()))
    short = MIN_CACHEABLE["claude-sonnet-5-5"] - 100
    for _ in range(2):
        u = usage(model, body(text(short, "5m"), text(40)))
        assert u["cache_creation_input_tokens"] == u["cache_read_input_tokens"] == 0
    # the same prefix is long enough for Sonnet 5.5 and too short for Haiku 4.5 (4,096)
    assert usage(model, body(text(1000, "5m"), model="claude-haiku-4-5"))["cache_creation_input_tokens"] == 0
    assert usage(model, body(text(1000, "5m")))["cache_creation_input_tokens"] > 0


def test_entries_expire_after_their_ttl_and_a_read_refreshes_it() -> None:
    clock = Clock()
    model = StrictModel(cache=PromptCache(clock=clock))
    usage(model, body(text(600, "5m")))
    clock.now += 299
    assert usage(model, body(text(600, "5m")))["cache_read_input_tokens"] > 0  # refreshed: 5 more minutes
    clock.now += 299
    assert usage(model, body(text(600, "5m")))["cache_read_input_tokens"] > 0
    clock.now += 301
    assert usage(model, body(text(600, "5m")))["cache_read_input_tokens"] == 0  # gone: written again
    usage(model, body(text(600, "1h", tag="kept ")))
    clock.now += 3000
    assert usage(model, body(text(600, "1h", tag="kept ")))["cache_read_input_tokens"] > 0  # a 1-hour entry


def test_two_breakpoints_bill_each_ttl_and_the_api_rules_are_enforced() -> None:
    model = StrictModel(cache=PromptCache(clock=Clock()))
    system_tokens = count_tokens("You judge.")
    u = usage(model, body(text(600, "1h"), text(200, "5m"), text(30)))
    assert u["cache_creation"] == {"ephemeral_1h_input_tokens": system_tokens + 600, "ephemeral_5m_input_tokens": 200}
    # a later call with the first part only reads it and writes its own second part
    u = usage(model, body(text(600, "1h"), text(100, "5m", tag="juror two "), text(30)))
    assert u["cache_read_input_tokens"] == system_tokens + 600 and u["cache_creation_input_tokens"] == 102
    refused = [
        body(text(600, "5m"), text(200, "1h")),  # 1h after 5m
        body(*(text(10, "5m", tag=f"b{i} ") for i in range(5))),  # five breakpoints
        body(text(600, "5m"), {"type": "text", "text": ""}),
    ]  # an empty text block
    for request in refused:
        assert model(Received("POST", "/v1/messages", {}, request)).status == 400


def test_another_output_schema_effort_or_thinking_is_another_prefix() -> None:
    """Structured outputs add a system prompt of their own ("Changing the output_config.format parameter
    will invalidate any prompt cache"), and a change of effort or thinking invalidates the message
    blocks: two roles asking for different answers cannot read one prefix, whatever their layout."""
    model = StrictModel(cache=PromptCache(clock=Clock()))
    usage(model, body(text(600, "5m"), text(40)))
    other_schema = body(text(600, "5m"), text(40))
    other_schema["output_config"]["format"]["schema"] = {**SCHEMA, "title": "Other"}
    lower_effort = body(text(600, "5m"), text(40))
    lower_effort["output_config"]["effort"] = "low"
    thinking_off = {**body(text(600, "5m"), text(40)), "thinking": {"type": "disabled"}}
    for request in (other_schema, lower_effort, thinking_off):
        u = usage(model, request)
        assert u["cache_read_input_tokens"] == 0 and u["cache_creation_input_tokens"] > 600
    assert usage(model, body(text(600, "5m"), text(80, tag="same settings ")))["cache_read_input_tokens"] > 600


def test_a_breakpoint_finds_an_entry_at_most_20_blocks_back() -> None:
    model = StrictModel(cache=PromptCache(clock=Clock()))
    usage(model, body(text(600, "5m")))
    near = body(text(600), *(text(4, tag=f"n{i} ") for i in range(19)), text(4, "5m", tag="end "))
    assert usage(model, near)["cache_read_input_tokens"] > 0
    far = body(text(600), *(text(4, tag=f"f{i} ") for i in range(20)), text(4, "5m", tag="end "))
    assert usage(model, far)["cache_read_input_tokens"] == 0


def test_a_write_is_readable_only_once_its_response_is_out_and_in_a_batch_only_at_its_end() -> None:
    clock = Clock()
    model = StrictModel(cache=PromptCache(clock=clock), latency_s=2.0)
    usage(model, body(text(600, "5m")))
    assert usage(model, body(text(600, "5m")))["cache_read_input_tokens"] == 0  # sent together: both write
    clock.now += 2
    assert usage(model, body(text(600, "5m")))["cache_read_input_tokens"] > 0
    batch = StrictModel(cache=PromptCache(clock=clock))
    with batch.deferred():
        assert [usage(batch, body(text(700, "5m")))["cache_read_input_tokens"] for _ in range(3)] == [0, 0, 0]
    assert usage(batch, body(text(700, "5m")))["cache_read_input_tokens"] > 0


def image(width: int, height: int, kind: str = "PNG") -> dict[str, Any]:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(out, kind)
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": f"image/{kind.lower()}",
            "data": base64.b64encode(out.getvalue()).decode(),
        },
    }


def test_images_cost_their_pixels_and_bad_ones_are_refused() -> None:
    model = StrictModel()
    assert usage(model, body(image(750, 100), text(4)))["input_tokens"] == 100 + 4 + count_tokens("You judge.")
    big = usage(model, body(image(3000, 3000)))["input_tokens"]  # scaled to about 1.15 megapixels
    assert 1500 <= big - count_tokens("You judge.") <= 1540
    wrong = image(10, 10)
    wrong["source"]["media_type"] = "image/jpeg"
    for bad in (wrong, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "%%"}}):
        assert model(Received("POST", "/v1/messages", {}, body(bad))).status == 400


@pytest.mark.parametrize("ttl", ["5m", "1h"])
def test_a_jurors_persona_and_memory_are_read_from_the_cache_in_later_rounds_at_5_minutes(ttl: str) -> None:
    """The juror's request as the backend builds it: the case prefix, then its own part (persona and
    memory) as a second breakpoint where that pays (5-minute writes), then the round's part."""
    case = example_case("appl-001-kettle-crack.json")
    settings = Settings(llm_backend="anthropic", anthropic_api_key="x", prompt_cache_ttl=ttl)
    llm = AnthropicLLM.from_settings(settings)
    model = StrictModel(cache=PromptCache(clock=Clock()))
    system = prompts.with_rules(prompts.JUROR_SYSTEM, prompts.verdict_rules())
    prefix, own = prompts.case_prefix(case, None, None, []), prompts.juror_own("Mei: " + WORDS * 30, [], False)
    bills = []
    for round_no in (1, 2):
        request = stage_request(
            "juror",
            settings,
            juror=0,
            system=system,
            shared=[prefix],
            own=[own],
            prompt=[prompts.juror_round(round_no, [], None)],
            task=None,
            case_id=case.case_id,
        )
        sent = llm.params(request, BallotDraft)
        assert sum("cache_control" in b for b in sent["messages"][0]["content"]) == (2 if ttl == "5m" else 1)
        bills.append(usage(model, sent))
    head = count_tokens(system) + count_tokens(prefix)
    first, second = bills
    assert first["cache_read_input_tokens"] == 0 and second["cache_read_input_tokens"] >= head
    if ttl == "5m":  # round 1 wrote the own part too; round 2 reads it and pays only for the round's part
        assert first["cache_creation_input_tokens"] == head + count_tokens(own)
        assert second["cache_read_input_tokens"] == head + count_tokens(own)
        assert second["input_tokens"] == count_tokens(prompts.juror_round(2, [], None))
    else:  # a 1-hour write costs 2x: the own part stays uncached input
        assert first["cache_creation_input_tokens"] == second["cache_read_input_tokens"] == head
        assert second["input_tokens"] == count_tokens(own) + count_tokens(prompts.juror_round(2, [], None))


def test_each_cases_first_juror_reads_the_system_prompt_with_the_rules_from_an_earlier_case() -> None:
    """The juror's system prompt with the verdict rules caches on its own (a breakpoint of its own):
    the first juror of the next case reads it and writes only its own case's prefix."""
    settings = Settings(llm_backend="anthropic", anthropic_api_key="x")
    llm = AnthropicLLM.from_settings(settings)
    model = StrictModel(cache=PromptCache(clock=Clock()))
    system = prompts.with_rules(prompts.JUROR_SYSTEM, prompts.verdict_rules())
    bills, prefixes = [], []
    for name in ("appl-001-kettle-crack.json", "clot-001-shirt-torn-seam.json"):
        case = example_case(name)
        prefixes.append(prompts.case_prefix(case, None, None, []))
        request = stage_request(
            "juror",
            settings,
            juror=0,
            system=system,
            shared=[prefixes[-1]],
            prompt=[prompts.juror_round(1, [], None)],
            task=None,
            case_id=case.case_id,
        )
        sent = llm.params(request, BallotDraft)
        assert "cache_control" in sent["system"][0]
        bills.append(usage(model, sent))
    first, second = bills
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] == count_tokens(system) + count_tokens(prefixes[0])
    assert second["cache_read_input_tokens"] == count_tokens(system)
    assert second["cache_creation_input_tokens"] == count_tokens(prefixes[1])
