"""One OpenTelemetry trace per case, across every topic hop; a span per stage and per model call.

Every message the service produces carries Kafka headers: the W3C trace context of the span that
sent it (``traceparent``, and ``tracestate``/``baggage`` when there are any, by the configured
propagator), ``content-type: application/json`` and, deprecated for one release,
``schema-version`` (the schema version of the events and records, ``schemas.SCHEMA_VERSION``;
a message to a public topic says it in its CloudEvents headers, ``streams/cloudevents.py``). Each stage continues the trace from the headers
of the message it takes, so a case's produce, intake, focus, clues, round-N and verdict spans, its
model calls and its dead letters share one trace id; a stage result replayed from the
``stage-results`` table is re-sent under the span of the redelivered input, in the same trace.

Off by default: without ``otlp_endpoint`` (or ``OTEL_EXPORTER_OTLP_ENDPOINT``) no SDK is set up,
the API's no-op tracer records nothing, and a message's incoming trace context is passed on
unchanged. With it, ``setup`` installs the SDK's tracer provider with a batching OTLP/HTTP exporter
(the SDK reads the other ``OTEL_*`` variables: service name, resource attributes, sampler, exporter
headers). Model-call spans follow the GenAI semantic conventions (``gen_ai.*``), stage spans the
messaging ones (``messaging.*``); our own attributes are ``cyberjurors.*``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..schemas import SCHEMA_VERSION, Usage
from . import logs

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from ..config import ObservabilitySettings

SCOPE = "cyberjurors"
CASE_ID = "cyberjurors.case_id"
STAGE = "cyberjurors.stage"
CONTENT_TYPE = "application/json"
Headers = dict[str, bytes]

log = logging.getLogger("cyberjurors.tracing")

_tracer: trace.Tracer = trace.get_tracer(SCOPE)  # a proxy: it follows the global provider once set


def tracer() -> trace.Tracer:
    return _tracer


def install(provider: TracerProvider | None) -> None:
    """Trace through ``provider`` in this process (tests give one with an in-memory exporter), or
    back to the global provider with None; ``setup`` does this for the configured exporter."""
    global _tracer
    _tracer = provider.get_tracer(SCOPE) if provider is not None else trace.get_tracer(SCOPE)


def setup(settings: ObservabilitySettings, service: str = "cyberjurors") -> TracerProvider | None:
    """The SDK with an OTLP/HTTP exporter to ``otlp_endpoint``, as the global provider (so the
    Anthropic SDK's own spans join in), or None when tracing is off. Call ``provider.shutdown()``
    at exit to send what is still batched."""
    if not settings.otlp_endpoint:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # OTEL_SERVICE_NAME, when set, names the service; Resource.create reads it and the other variables
    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service})
    provider = TracerProvider(resource=resource)
    endpoint = settings.otlp_endpoint.rstrip("/") + "/v1/traces"  # the base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    provider.cyberjurors_endpoint = endpoint  # type: ignore[attr-defined]  # for the shutdown warning
    trace.set_tracer_provider(provider)
    install(provider)
    return provider


def shutdown(provider: TracerProvider | None, timeout_s: float = 5.0) -> None:
    """Send what is still batched, waiting at most ``timeout_s``: an unreachable collector (whose
    exporter retries for up to OTEL_EXPORTER_OTLP_TIMEOUT) must not hold up a worker's stop."""
    if provider is None:
        return
    sending = threading.Thread(target=provider.shutdown, name="otel-shutdown", daemon=True)
    sending.start()
    sending.join(timeout_s)
    if sending.is_alive():
        log.warning(
            "spans not yet exported after %.0f s at exit are dropped (is the collector at %s up?)",
            timeout_s,
            getattr(provider, "cyberjurors_endpoint", "?"),
        )


# --- Kafka headers ------------------------------------------------------------------------------


class _KafkaHeaders(Getter[Mapping[str, Any]]):
    """Faust gives a message's headers as a dict of str to bytes; aiokafka as (str, bytes) pairs."""

    def get(self, carrier: Mapping[str, Any], key: str) -> list[str] | None:
        value = carrier.get(key)
        if value is None:
            return None
        return [value.decode("latin-1") if isinstance(value, bytes) else str(value)]

    def keys(self, carrier: Mapping[str, Any]) -> list[str]:
        return list(carrier)


_GETTER = _KafkaHeaders()


def as_mapping(headers: Any) -> Mapping[str, Any]:
    if not headers:
        return {}
    return headers if isinstance(headers, Mapping) else dict(headers)


def context_of(headers: Any) -> Context:
    """The trace context a message's headers carry (an empty context when none)."""
    return propagate.extract(as_mapping(headers), getter=_GETTER)


def headers(context: Context | None = None) -> Headers:
    """Headers for a message sent now: the trace context (of ``context``, else the current span),
    the content type and the schema version (``schema-version``: deprecated, kept for one release
    for the consumers that read it, docs/renamed.md)."""
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    out = {key: value.encode() for key, value in carrier.items()}
    out["content-type"] = CONTENT_TYPE.encode()
    out["schema-version"] = str(SCHEMA_VERSION).encode()
    return out


def trace_id_of(headers: Any) -> str | None:
    """The trace id (32 hex digits) in a message's ``traceparent``, or None."""
    span = trace.get_current_span(context_of(headers)).get_span_context()
    return trace.format_trace_id(span.trace_id) if span.is_valid else None


# --- stage spans --------------------------------------------------------------------------------


@contextlib.contextmanager
def consuming(event: Any, stage: str, case_id: str | None = None, group: str | None = None) -> Iterator[Span]:
    """The span of one stage handling one Kafka message (a Faust event, or anything with
    ``headers`` and ``message``), a child of the span that sent it; log lines inside carry the
    stage and the case. ``name_stage`` and ``name_case`` fill them in once the message is read."""
    message = getattr(event, "message", None)
    attributes: dict[str, Any] = {
        "messaging.system": "kafka",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        STAGE: stage,
    }
    if message is not None:
        attributes["messaging.destination.name"] = str(getattr(message, "topic", ""))
        if getattr(message, "partition", None) is not None:
            attributes["messaging.destination.partition.id"] = str(message.partition)
        if getattr(message, "offset", None) is not None:
            attributes["messaging.kafka.offset"] = int(message.offset)
    if group:
        attributes["messaging.consumer.group.name"] = group
    if case_id:
        attributes[CASE_ID] = case_id
    parent = context_of(getattr(event, "headers", None))
    with (
        _tracer.start_as_current_span(stage, context=parent, kind=SpanKind.CONSUMER, attributes=attributes) as span,
        logs.about(case_id, stage),
    ):
        yield span


def name_stage(stage: str) -> None:
    """The current stage span is this stage (the rounds agent learns whether a message is a
    round or the verdict only once it has read it)."""
    span = trace.get_current_span()
    span.update_name(stage)
    span.set_attribute(STAGE, stage)
    logs.stage.set(stage)  # reset when the stage's ``consuming`` block ends


def name_case(case_id: str) -> None:
    """The current span and the log lines from here on are about this case (read from the message,
    never taken from its key: a key is whatever a producer chose)."""
    trace.get_current_span().set_attribute(CASE_ID, case_id)
    logs.case_id.set(case_id)  # reset when the stage's ``consuming`` block ends


def mark(**attributes: Any) -> None:
    """``cyberjurors.<name>`` attributes on the current span (when it records)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({f"cyberjurors.{k}": v for k, v in attributes.items()})


def start_producing(case_id: str, topic: str, name: str = "send", parent: Context | None = None) -> Span:
    """A PRODUCER span for a client's messages about one case; end it when they are sent.
    ``headers(in_span(span))`` are the headers that carry it."""
    attributes = {
        "messaging.system": "kafka",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": topic,
        CASE_ID: case_id,
    }
    return _tracer.start_span(name, context=parent, kind=SpanKind.PRODUCER, attributes=attributes)


def in_span(span: Span) -> Context:
    return trace.set_span_in_context(span)


@contextlib.contextmanager
def dead_letter(stage: str, reason: str, replayable: bool) -> Iterator[Span]:
    """A span for writing one dead letter: a child of the stage that failed, or a trace of its own
    when no stage is under way (the expiry sweeps)."""
    attributes: dict[str, AttributeValue] = {
        STAGE: stage,
        "cyberjurors.dead_letter.reason": reason,
        "cyberjurors.dead_letter.replayable": replayable,
    }
    with _tracer.start_as_current_span("dead-letter", attributes=attributes) as span:
        span.set_status(Status(StatusCode.ERROR, reason))
        yield span


# --- model-call spans ---------------------------------------------------------------------------


class Call(Protocol):
    """What a model-call span reads of the port's request (llm/port.py's LLMRequest): observability
    sits below the LLM room and does not import it."""

    @property
    def model(self) -> str: ...
    @property
    def role(self) -> str: ...
    @property
    def case_id(self) -> str: ...
    @property
    def max_output_tokens(self) -> int: ...


class Answer(Protocol):
    """What a model-call span reads of the port's result (LLMResult)."""

    @property
    def model(self) -> str: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def finish_reason(self) -> str | None: ...


@contextlib.contextmanager
def model_call(provider: str, request: Call, queued_s: float = 0.0) -> Iterator[Span]:
    """A CLIENT span for one model call, named and attributed as the GenAI semantic conventions'
    inference span (``chat {model}``); ``answered`` or ``failed`` completes it."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": request.model,
        "gen_ai.request.max_tokens": request.max_output_tokens,
        "gen_ai.output.type": "json",
        "cyberjurors.llm.role": request.role,
        "cyberjurors.llm.queued_s": round(queued_s, 6),
    }
    if request.case_id:
        attributes[CASE_ID] = request.case_id
    with _tracer.start_as_current_span(
        f"chat {request.model}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield span


def answered(span: Span, result: Answer) -> None:
    """The reply's usage under the GenAI conventions' names (their attribute registry, as
    opentelemetry-semantic-conventions' ``gen_ai_attributes`` lists it): cache reads and cache writes
    ("cache_creation") are parts of ``input_tokens``, reasoning (our thinking) a part of
    ``output_tokens``. Names an earlier release used: docs/renamed.md."""
    if not span.is_recording():
        return
    usage = result.usage
    span.set_attributes(
        {
            "gen_ai.response.model": result.model,
            # input_tokens counts every input token, cached ones included (the conventions say so); ours
            # counts the uncached ones, as the provider bills them
            "gen_ai.usage.input_tokens": usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,  # thinking included, as the conventions want
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
            "gen_ai.usage.reasoning.output_tokens": usage.thinking_tokens,
        }
    )
    if result.finish_reason:
        span.set_attribute("gen_ai.response.finish_reasons", (result.finish_reason,))


def failed(span: Span, kind: str) -> None:
    """``error.type`` is the LLMError kind (``errors.LLM_KINDS``), or "unexpected" for a bug; the
    provider's message is left out (it may quote the request)."""
    if span.is_recording():
        span.set_attributes({"error.type": kind, "gen_ai.response.finish_reasons": ("error",)})
        span.set_status(Status(StatusCode.ERROR, kind))
