"""A real worker traced and logging JSON: it exports its spans over OTLP/HTTP to a small collector
the test runs (tests/otlp_collector.py), judges a sample case produced from here, and writes only
JSON lines, redacted, with no secret in them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka.structs import ConsumerRecord
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.kafka.producers import producer_for
from cyberjurors.schemas import Verdict
from cyberjurors.tooling.clients import Outgoing, produce, read_events, records
from cyberjurors.tooling.worker_process import WorkerProcess

from ..conftest import EXAMPLES, calls, cli
from ..otlp_collector import Collector, Received

pytestmark = pytest.mark.integration

STAGES = ("intake", "focus", "clues", "round-1", "round-2", "verdict")
EMAIL, PHONE = "jane.doe@example.com", "+44 20 7946 0958"


@pytest.fixture
async def collector() -> AsyncIterator[Collector]:
    c = Collector()
    await c.start()
    yield c
    await c.stop()


@pytest.fixture
def produced_spans(spans: InMemorySpanExporter) -> InMemorySpanExporter:
    """This process plays the platform's producer: its produce spans, in memory."""
    return spans


async def wait_for_records(
    settings: Settings, topic: str, case_id: str, count: int, timeout_s: float = 120
) -> list[ConsumerRecord]:
    found: list[ConsumerRecord] = []

    async def read() -> None:
        async for record in records(settings, topic, follow=True, idle_timeout_s=0.5):
            if record.key == case_id.encode():
                found.append(record)
                if len(found) >= count:
                    return

    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(read(), timeout_s)
    return found


def traceparent(record: ConsumerRecord) -> tuple[str, str]:
    _, trace_id, span_id, _ = dict(record.headers)["traceparent"].decode().split("-")
    return trace_id, span_id


async def redeliver(settings: Settings, record: ConsumerRecord) -> None:
    """The very message again, headers and all: what a consumer sees when its commit was lost."""
    producer = producer_for(settings)
    await producer.start()
    try:
        await producer.send_and_wait(record.topic, record.value, key=record.key, headers=list(record.headers))
    finally:
        await producer.stop()


def complete(case_id: str):
    def done(spans: list[Received]) -> bool:
        names = [s.name for s in spans if s.attributes.get("cyberjurors.case_id") == case_id]
        return all(stage in names for stage in STAGES) and names.count("clues") >= 2

    return done


async def test_a_case_is_one_exported_trace_and_every_log_line_is_json(
    settings, tmp_path: Path, collector, produced_spans
):
    secret = f"sk-ant-api03-{uuid.uuid4().hex}"  # in the worker's settings; must show up nowhere
    settings = settings.model_copy(
        update={
            "otlp_endpoint": collector.url,
            "log_format": "json",
            "log_redact_pii": True,
            "anthropic_api_key": secret,
            "jurors": 5,
            "rounds": 2,
            "early_stop": 0,
        }
    )  # two full rounds: round-1, round-2, then the verdict
    [event] = read_events([EXAMPLES / "cases" / "clot-001-shirt-torn-seam.json"])
    case_id = event.case_id
    log = tmp_path / "worker.log"
    await ensure_topics(settings)
    worker = WorkerProcess(settings, log, env={"OTEL_BSP_SCHEDULE_DELAY": "200"}).start()
    try:
        # a case, and an unusable event whose key holds an e-mail address and a phone number
        await produce(settings, [event, Outgoing(f"{EMAIL} {PHONE}", b"not json", "bad")])
        [verdict] = await wait_for_records(settings, "disputes.verdicts", case_id, 1)
        [handed_on] = await wait_for_records(settings, "disputes.focus", case_id, 1, timeout_s=10)
        await redeliver(settings, handed_on)  # the clues stage meets a decided case: the stored verdict again
        [_, again] = await wait_for_records(settings, "disputes.verdicts", case_id, 2)
        assert await collector.wait_for(complete(case_id)), [s.name for s in collector.spans]
    finally:
        stopped = worker.stop()
    assert stopped == 0, "a clean stop, the exporter flushed on the way out"

    # the case's trace starts at the producer and the verdict's headers name it
    [produce_span] = [s for s in produced_spans.get_finished_spans() if s.attributes["cyberjurors.case_id"] == case_id]
    trace_id = trace.format_trace_id(produce_span.context.trace_id)
    assert traceparent(verdict)[0] == trace_id == traceparent(again)[0]
    headers = dict(verdict.headers)
    assert headers["content-type"] == b"application/json" and headers["schema-version"] == b"1"
    # a CloudEvent, and the re-sent verdict the same one: same bytes, same id and time (docs/concepts/messages.md)
    again_headers = dict(again.headers)
    assert headers["ce_type"] == b"com.cyberjurors.verdict.v1" and headers["ce_specversion"] == b"1.0"
    assert again.value == verdict.value
    assert (again_headers["ce_id"], again_headers["ce_time"]) == (headers["ce_id"], headers["ce_time"])
    assert again_headers["traceparent"] != headers["traceparent"]  # sent again under the redelivery's span
    assert Verdict.model_validate_json(verdict.value).case_id == case_id

    spans = [s for s in collector.spans if s.trace_id == trace_id]
    assert {s.trace_id for s in collector.spans if s.attributes.get("cyberjurors.case_id") == case_id} == {trace_id}
    assert all(s.service == "cyberjurors-worker" for s in spans)
    check_stage_chain(spans, trace.format_span_id(produce_span.context.span_id), case_id)
    check_model_calls(spans, settings, case_id)
    # the redelivered message re-sent the stored verdict under a span continuing its own headers
    replay = next(s for s in spans if s.name == "clues" and s.attributes.get("cyberjurors.replayed"))
    assert replay.parent_id == traceparent(handed_on)[1] and traceparent(again)[1] == replay.span_id
    check_log(log, trace_id, case_id, secret)
    assert secret not in json.dumps([s.attributes for s in collector.spans], default=str)
    # the operator's way from a verdict to its trace
    shown = cli(settings.model_copy(update={"otlp_endpoint": None}), "verdicts", "--no-follow")
    assert shown.returncode == 0 and f"trace {trace_id}" in shown.stdout, shown.stdout + shown.stderr


def check_stage_chain(spans: list[Received], produce_span: str, case_id: str) -> None:
    """produce -> intake -> focus -> clues -> round-1 -> round-2 -> verdict, each a child of the span
    that sent its message."""
    first = {}
    for span in sorted(spans, key=lambda s: s.start_ns):
        first.setdefault(span.name, span)
    parent = produce_span
    for stage in STAGES:
        span = first[stage]
        assert span.parent_id == parent and span.kind == "CONSUMER", stage
        assert span.attributes["cyberjurors.case_id"] == case_id and span.attributes["messaging.system"] == "kafka"
        parent = span.span_id


def check_model_calls(spans: list[Received], settings: Settings, case_id: str) -> None:
    """One span per model call the call log records for the case, under the stage that made it."""
    models = [s for s in spans if s.name.startswith("chat ")]
    logged = [c for c in calls(settings.llm_call_log) if c["case_id"] == case_id]
    assert len(models) == len(logged) > 0
    stage_of = {s.span_id: s.name for s in spans if s.kind == "CONSUMER"}
    roles = {}
    for span in models:
        a = span.attributes
        assert span.kind == "CLIENT" and a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "offline"
        assert a["gen_ai.request.model"] == settings.model and a["gen_ai.response.finish_reasons"] == ("stop",)
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert "gen_ai.usage.cache_read.input_tokens" in a and "gen_ai.usage.cache_creation.input_tokens" in a
        assert "gen_ai.usage.reasoning.output_tokens" in a
        roles.setdefault(stage_of[span.parent_id], set()).add(a["cyberjurors.llm.role"])
    assert roles == {
        "focus": {"focus"},
        "clues": {"select", "perceive"},
        "round-1": {"juror", "summary"},
        "round-2": {"juror", "summary"},
    }
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in models) == sum(c["output_tokens"] for c in logged)


def check_log(log: Path, trace_id: str, case_id: str, secret: str) -> None:
    """Every line the worker wrote (stdout and stderr) is a JSON object; the case's lines carry its
    case id and trace id; the bad event's key is logged redacted; the API key appears nowhere."""
    text = log.read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError:
            pytest.fail(f"not a JSON line: {line[:300]}")
    assert all({"time", "level", "logger", "message"} <= set(p) for p in parsed)
    assert any(p["logger"].startswith(("faust", "mode")) for p in parsed), "Faust's own lines are JSON too"
    about_case = [p for p in parsed if p.get("case_id") == case_id]
    assert any(p["stage"] == "verdict" and "verdict" in p["message"] for p in about_case)
    assert about_case and all(p["trace_id"] == trace_id and len(p["span_id"]) == 16 for p in about_case)
    [letter] = [p for p in parsed if p["message"].startswith("dead letter from intake: invalid_json")]
    assert "key=[email] [phone]" in letter["message"] and letter["trace_id"] != trace_id
    assert EMAIL not in text and "7946 0958" not in text
    assert secret not in text
