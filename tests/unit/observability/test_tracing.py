"""One trace per case, in process: the stream handlers (no Kafka: list-backed topics, events that
carry the previous hop's headers) and the model port, traced through the OpenTelemetry SDK into
its in-memory exporter. tests/integration/test_tracing_worker.py checks the same with a real worker exporting
over OTLP.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from types import SimpleNamespace

import anthropic
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.trace import SpanKind, StatusCode

from cyberjurors.config import Settings
from cyberjurors.jury.rounds import Jury
from cyberjurors.jury.stages import NoPrecedents
from cyberjurors.llm.backends.anthropic import AnthropicLLM
from cyberjurors.llm.backends.openai import OpenAICompatibleLLM
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import GuardedLLM, LLMError
from cyberjurors.observability import metrics, tracing
from cyberjurors.schemas import SCHEMA_VERSION, BallotDraft, CaseFile, DeadLetter, Selection, Verdict
from cyberjurors.state.results import StageResults
from cyberjurors.streams.app import Handlers, next_round
from cyberjurors.streams.dead_letters import DeadLetters
from cyberjurors.streams.intake import Intake
from cyberjurors.streams.stage_hop import StageHop, StageWork
from cyberjurors.streams.verdict import Verdicts

from ... import factories
from ...messages_server import ScriptedServer, anthropic_error, anthropic_message, chat_completion
from ...schema_model import SchemaModel
from ..llm.backends.test_backends import BALLOT, juror_request
from ..llm.test_port import request
from ..streams.test_app_handlers import NOW, Topic, text_case

STAGES = ("intake", "focus", "clues", "round-1", "round-2", "verdict")
ROLES = {
    "focus": {"focus"},
    "clues": {"select", "perceive"},
    "round-1": {"juror", "summary"},
    "round-2": {"juror", "summary"},
}


def message(
    value: bytes, headers: dict[str, bytes] | None, topic: str, key: bytes = b"c-1", offset: int = 0
) -> SimpleNamespace:
    """What a Faust event gives a handler: the value, the headers, the Kafka message."""
    return SimpleNamespace(
        value=value,
        headers=dict(headers or {}),
        message=SimpleNamespace(key=key, value=value, topic=topic, partition=0, offset=offset),
    )


def last(topic: Topic, name: str) -> SimpleNamespace:
    return message(topic.sent[-1][1], topic.headers[-1], name, topic.sent[-1][0], offset=len(topic.sent))


def parent_of(headers: dict[str, bytes]) -> tuple[str, str]:
    """(trace id, parent span id) of a ``traceparent`` header: version-traceid-spanid-flags."""
    _, trace_id, span_id, _ = headers["traceparent"].decode().split("-")
    return trace_id, span_id


def hexes(span: ReadableSpan) -> tuple[str, str]:
    return trace.format_trace_id(span.context.trace_id), trace.format_span_id(span.context.span_id)


def produced(case_id: str = "c-1") -> dict[str, bytes]:
    """The headers a platform's producer sends a case with, from a span of its own (already ended)."""
    span = tracing.start_producing(case_id, "disputes.events", "produce")
    headers = tracing.headers(tracing.in_span(span))
    span.end()
    return headers


class Pipeline:
    """The five handlers wired as the Faust app wires them, each topic a list."""

    def __init__(self, settings: Settings, llm: GuardedLLM) -> None:
        self.settings = settings
        self.topics = {name: Topic() for name in ("ready", "focus", "clues", "rounds", "verdicts", "dlq")}
        in_flight = metrics.CasesInFlight()
        self.results = StageResults({})
        self.letters = DeadLetters(self.topics["dlq"], in_flight)
        verdicts = Verdicts(settings, self.results, self.topics["verdicts"], in_flight)
        self.hop = StageHop(self.results, self.letters, in_flight, verdicts.resend)
        intake = Intake(settings, llm.backend, {}, self.results, self.topics["ready"], self.letters, in_flight)
        work = StageWork(settings, llm, Jury.from_settings(settings), NoPrecedents())  # type: ignore[arg-type]
        self.h = Handlers(intake, self.hop, work, verdicts, None, self.letters)  # type: ignore[arg-type]

    async def judge(self, submitted: bytes, headers: dict[str, bytes]) -> None:
        t = self.topics
        await self.h.intake(message(submitted, headers, "disputes.events"))
        await self.hop(last(t["ready"], "disputes.intake"), "focus", t["focus"], self.h.work.focus)
        await self.hop(last(t["focus"], "disputes.focus"), "clues", t["clues"], self.h.work.clues)
        incoming = last(t["clues"], "disputes.clues")
        while not t["verdicts"].sent:
            await next_round(self.h, self.settings, incoming, t["rounds"])
            incoming = last(t["rounds"], "disputes.rounds")


def submitted(case_id: str = "c-1") -> bytes:
    return json.dumps({"type": "case", "case": text_case(case_id).model_dump(mode="json")}).encode()


# two full rounds, so the trace shows round-1, round-2 and then the verdict
jury_settings = functools.partial(factories.settings, jurors=3, rounds=2, early_stop=0)


async def test_a_case_through_every_handler_is_one_trace_with_a_span_per_stage_and_per_model_call(spans):
    pipeline = Pipeline(jury_settings(), GuardedLLM(SchemaModel()))
    headers = produced()
    trace_id, produce_span = parent_of(headers)
    await pipeline.judge(submitted(), headers)

    finished = spans.get_finished_spans()
    assert {hexes(s)[0] for s in finished} == {trace_id}, "one trace for the case, from its produce on"
    stages = {s.name: s for s in finished if s.name in STAGES}
    assert sorted(stages) == sorted(STAGES) and len([s for s in finished if s.name in STAGES]) == len(STAGES)
    # each stage continues from the message the previous one sent: produce -> intake -> ... -> verdict
    parent = produce_span
    for name in STAGES:
        span = stages[name]
        assert trace.format_span_id(span.parent.span_id) == parent, name
        assert span.kind is SpanKind.CONSUMER and span.attributes["cyberjurors.case_id"] == "c-1", name
        assert span.attributes["cyberjurors.stage"] == name and span.attributes["messaging.system"] == "kafka"
        parent = hexes(span)[1]
    assert stages["round-1"].attributes["messaging.destination.name"] == "disputes.clues"

    # every message sent carries the headers, its traceparent naming the span that sent it
    sent_by = {"ready": "intake", "focus": "focus", "clues": "clues", "verdicts": "verdict"}
    for topic, stage in sent_by.items():
        [headers] = pipeline.topics[topic].headers
        assert parent_of(headers) == hexes(stages[stage]), topic
        assert headers["content-type"] == b"application/json"
        assert headers["schema-version"] == str(SCHEMA_VERSION).encode()
    assert [parent_of(h) for h in pipeline.topics["rounds"].headers] == [
        hexes(stages["round-1"]),
        hexes(stages["round-2"]),
    ]

    # a span per model call, under the stage that made it, with the GenAI conventions' attributes
    calls = [s for s in finished if s.name.startswith("chat ")]
    verdict = Verdict.model_validate_json(pipeline.topics["verdicts"].sent[0][1])
    assert len(calls) == verdict.tokens.calls > 0
    by_id = {hexes(s)[1]: s.name for s in stages.values()}
    for call in calls:
        a = call.attributes
        assert call.kind is SpanKind.CLIENT and call.name == f"chat {a['gen_ai.request.model']}"
        assert a["cyberjurors.llm.role"] in ROLES[by_id[trace.format_span_id(call.parent.span_id)]]
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == SchemaModel.backend
        assert (
            a["gen_ai.request.model"] == "claude-sonnet-5-5" and a["gen_ai.response.model"] == SchemaModel.model_label
        )
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["gen_ai.response.finish_reasons"] == ("stop",) and a["cyberjurors.case_id"] == "c-1"
    tokens = sum(c.attributes["gen_ai.usage.input_tokens"] for c in calls)
    assert tokens == verdict.tokens.input_tokens + verdict.tokens.cache_read_tokens + verdict.tokens.cache_write_tokens
    assert sum(c.attributes["gen_ai.usage.output_tokens"] for c in calls) == verdict.tokens.output_tokens
    assert stages["verdict"].attributes["cyberjurors.verdict_id"] == verdict.verdict_id


async def test_a_replayed_stage_result_is_resent_in_the_cases_trace(spans):
    """A redelivered input (its original headers and all) re-sends the stored output, under a span of
    the case's trace whose context the re-sent message carries; the model is not called again."""
    pipeline = Pipeline(jury_settings(), GuardedLLM(SchemaModel()))
    t = pipeline.topics
    trace_id, _ = parent_of(headers := produced())
    await pipeline.h.intake(message(submitted(), headers, "disputes.events"))
    ready = last(t["ready"], "disputes.intake")
    await pipeline.hop(ready, "focus", t["focus"], pipeline.h.work.focus)
    await pipeline.hop(ready, "focus", t["focus"], pipeline.h.work.focus)  # the same message again
    assert t["focus"].sent[0] == t["focus"].sent[1]
    first, again = [s for s in spans.get_finished_spans() if s.name == "focus"]
    assert hexes(first)[0] == hexes(again)[0] == trace_id and first.parent == again.parent
    assert again.attributes["cyberjurors.replayed"] is True and "cyberjurors.replayed" not in first.attributes
    assert [parent_of(h) for h in t["focus"].headers] == [hexes(first), hexes(again)]
    assert len([s for s in spans.get_finished_spans() if s.name.startswith("chat ")]) == 1  # focus ran once

    # once decided, a redelivered input re-sends the stored verdict, in the same trace
    await pipeline.judge(submitted(), headers)  # intake ignores the resubmission; the stages run on
    ready_again = message(t["ready"].sent[0][1], t["ready"].headers[0], "disputes.intake", offset=99)
    await pipeline.hop(ready_again, "focus", t["focus"], pipeline.h.work.focus)
    resend = [s for s in spans.get_finished_spans() if s.name == "focus"][-1]
    assert resend.attributes["cyberjurors.replayed"] is True
    assert parent_of(t["verdicts"].headers[-1]) == hexes(resend) and len(t["verdicts"].sent) == 2


async def test_dead_letters_carry_the_cases_trace(spans):
    pipeline = Pipeline(jury_settings(), GuardedLLM(SchemaModel()))
    t = pipeline.topics
    case_file = CaseFile(case=text_case(), received_at=NOW)
    headers = produced()

    async def overloaded(cf: CaseFile) -> CaseFile:
        raise LLMError("overloaded", "try later")

    await pipeline.hop(
        message(case_file.model_dump_json().encode(), headers, "disputes.intake"), "focus", t["focus"], overloaded
    )
    [letter_headers] = t["dlq"].headers
    focus = next(s for s in spans.get_finished_spans() if s.name == "focus")
    letter = next(s for s in spans.get_finished_spans() if s.name == "dead-letter")
    assert letter.parent.span_id == focus.context.span_id and parent_of(letter_headers) == hexes(letter)
    assert letter.status.status_code is StatusCode.ERROR
    assert letter.attributes["cyberjurors.dead_letter.reason"] == "llm_overloaded"
    assert letter.attributes["cyberjurors.dead_letter.replayable"] is True
    assert DeadLetter.model_validate_json(t["dlq"].sent[0][1]).reason == "llm_overloaded"

    # a letter written outside any stage (an expiry sweep) starts a trace of its own, never none
    await pipeline.letters.write(
        message(b"x", None, "disputes.events"), "intake", "case_never_opened", "late", replayable=True
    )
    assert parent_of(t["dlq"].headers[-1])[0] != parent_of(headers)[0]


async def test_a_message_without_trace_context_starts_the_cases_trace_at_ingest(spans):
    pipeline = Pipeline(jury_settings(), GuardedLLM(SchemaModel()))
    await pipeline.judge(submitted(), {})
    finished = spans.get_finished_spans()
    [intake] = [s for s in finished if s.name == "intake"]
    assert intake.parent is None and len({hexes(s)[0] for s in finished}) == 1
    assert parent_of(pipeline.topics["verdicts"].headers[0])[0] == hexes(intake)[0]


# --- model calls through a real SDK backend --------------------------------------------------------


async def test_a_model_call_span_has_the_genai_attributes(spans, server: ScriptedServer):
    server.reply(
        anthropic_message(
            json.dumps(BALLOT),
            model="claude-sonnet-4-6-20260101",
            input_tokens=37,
            output_tokens=85,
            cache_read=1200,
            cache_write=300,
            thinking_tokens=40,
        ),
        anthropic_error(400, "invalid_request_error", "bad image"),
    )
    client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=server.url, max_retries=0)
    guard = GuardedLLM(AnthropicLLM(client))
    try:
        await guard.generate(juror_request(), BallotDraft)
        with pytest.raises(LLMError):
            await guard.generate(juror_request(), BallotDraft)
    finally:
        await client.close()
    ok, failed = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert ok.name == "chat claude-sonnet-4-6" and ok.kind is SpanKind.CLIENT
    assert dict(ok.attributes) | {"cyberjurors.llm.queued_s": 0} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-6",
        "gen_ai.request.max_tokens": 900,
        "gen_ai.output.type": "json",
        "gen_ai.response.model": "claude-sonnet-4-6-20260101",
        "gen_ai.usage.input_tokens": 37 + 1200 + 300,  # every input token, cached ones included
        "gen_ai.usage.output_tokens": 85,  # the thinking included
        "gen_ai.usage.cache_read.input_tokens": 1200,
        "gen_ai.usage.cache_creation.input_tokens": 300,
        "gen_ai.usage.reasoning.output_tokens": 40,
        "gen_ai.response.finish_reasons": ("end_turn",),
        "cyberjurors.case_id": "case-42",
        "cyberjurors.llm.role": "juror",
        "cyberjurors.llm.queued_s": 0,
    }
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.attributes["error.type"] == "bad_request" and failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["gen_ai.response.finish_reasons"] == ("error",)
    assert "gen_ai.usage.input_tokens" not in failed.attributes
    assert "bad image" not in str(failed.status.description)  # the provider's words may quote the request


async def test_an_openai_compatible_call_reports_cache_reads_and_reasoning_by_the_conventions(
    spans, server: ScriptedServer
):
    """Chat Completions counts cached tokens inside prompt_tokens and reasoning inside completion_tokens,
    as the conventions count them: the span's totals are the provider's, their parts named apart."""
    server.reply(
        chat_completion(
            json.dumps(BALLOT),
            model="gpt-5",
            prompt_tokens=900,
            completion_tokens=300,
            cached_tokens=600,
            reasoning_tokens=250,
        )
    )
    llm = OpenAICompatibleLLM.from_settings(
        Settings(llm_backend="openai", openai_base_url=f"{server.url}/v1", llm_max_retries=0)
    )
    try:
        await GuardedLLM(llm).generate(replace(juror_request(), model="gpt-5"), BallotDraft)
    finally:
        await llm.aclose()
    [call] = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    usage = {k: v for k, v in call.attributes.items() if k.startswith("gen_ai.usage.")}
    assert usage == {
        "gen_ai.usage.input_tokens": 900,
        "gen_ai.usage.output_tokens": 300,
        "gen_ai.usage.cache_read.input_tokens": 600,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "gen_ai.usage.reasoning.output_tokens": 250,
    }
    assert call.attributes["gen_ai.provider.name"] == "openai"


async def test_every_genai_attribute_of_a_model_call_is_a_name_the_conventions_define(spans, server: ScriptedServer):
    """Checked against OpenTelemetry's own registry of GenAI attribute names (the
    opentelemetry-semantic-conventions package, which the SDK brings), not against names this test
    spells itself: a misspelt or invented ``gen_ai.*`` name fails here whatever the other tests expect."""
    server.reply(anthropic_message(json.dumps(BALLOT), cache_read=10, cache_write=20, thinking_tokens=5))
    client = anthropic.AsyncAnthropic(api_key="sk-test", base_url=server.url, max_retries=0)
    try:
        await GuardedLLM(AnthropicLLM(client)).generate(juror_request(), BallotDraft)
    finally:
        await client.close()
    [call] = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    registry = {v for k, v in vars(gen_ai_attributes).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
    registry.discard(gen_ai_attributes.GEN_AI_USAGE_PROMPT_TOKENS)  # replaced by input_tokens
    registry.discard(gen_ai_attributes.GEN_AI_USAGE_COMPLETION_TOKENS)  # replaced by output_tokens
    emitted = {k for k in call.attributes if k.startswith("gen_ai.")}
    assert emitted - registry == set()
    usage = {
        gen_ai_attributes.GEN_AI_USAGE_INPUT_TOKENS,
        gen_ai_attributes.GEN_AI_USAGE_OUTPUT_TOKENS,
        gen_ai_attributes.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        gen_ai_attributes.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        gen_ai_attributes.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    }
    assert usage <= emitted  # every token count the reply had is there


async def test_a_model_call_inside_a_stage_is_its_child(spans):
    def answer(req, out):
        return Selection(evidence_id=None, reason="r")

    guard = GuardedLLM(ScriptedLLM(answer))
    with tracing.consuming(message(b"{}", produced(), "disputes.focus"), "clues"):
        await guard.generate(request("c-1"), Selection)
    call = next(s for s in spans.get_finished_spans() if s.name.startswith("chat "))
    stage = next(s for s in spans.get_finished_spans() if s.name == "clues")
    assert call.parent.span_id == stage.context.span_id
    assert "gen_ai.response.finish_reasons" not in call.attributes  # the scripted backend gives none


# --- off by default ------------------------------------------------------------------------------


def test_tracing_is_off_without_an_endpoint_and_the_headers_still_go_out(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    settings = Settings(llm_backend="offline")
    assert settings.otlp_endpoint is None and tracing.setup(settings) is None
    tracing.install(trace.NoOpTracerProvider())
    try:
        assert tracing.headers() == {"content-type": b"application/json", "schema-version": b"1"}
        # a producer's trace context is passed on untouched: nothing recorded, nothing lost
        incoming = {"traceparent": b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
        with tracing.consuming(message(b"{}", incoming, "disputes.intake"), "focus") as span:
            assert not span.is_recording()
            assert tracing.headers()["traceparent"] == incoming["traceparent"]
    finally:
        tracing.install(None)


def test_the_trace_id_of_a_message():
    span_context = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert tracing.trace_id_of([("traceparent", span_context.encode())]) == "0af7651916cd43dd8448eb211c80319c"
    assert tracing.trace_id_of({"traceparent": b"garbage"}) is None and tracing.trace_id_of(None) is None
