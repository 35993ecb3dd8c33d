"""CloudEvents on Kafka, binary content mode: the ``ce_*`` headers every message to a public topic
carries, and intake's rules for the ones a dispute event arrives with (docs/concepts/messages.md).

Binary mode leaves the value as it is (the event's JSON, as before) and puts the CloudEvents
attributes in headers, so a consumer that knows nothing of CloudEvents reads what it always read,
and an event platform routes on ``ce_type`` without parsing bodies.

Written (``attributes``), beside the trace context and ``content-type: application/json`` that
every message carries (``tracing.headers``):

- ``ce_specversion`` ``1.0``;
- ``ce_type`` ``com.cyberjurors.<event>.v<schema version>``, the event being the body's ``type``
  on disputes.events (``case``, ``case_opened``, ``evidence_submitted``, ``evidence_closed``) and the
  topic's record elsewhere (``verdict``, ``escalation``, ``appeal``, ``outcome``, ``dead_letter``);
- ``ce_id`` 32 hex digits of the sha256 of the type, the Kafka key and the value: a stage re-sends
  the bytes it stored, so a redelivered output is the same event under the same id, and two
  different outputs never share one;
- ``ce_source`` ``<cloudevents_source>/<topic>``;
- ``ce_time`` the body's own time (a verdict's ``decided_at``, a letter's ``failed_at``, ...), in
  RFC 3339 and UTC, or the time of sending for an event that has none;
- ``ce_dataschema`` the event's JSON Schema on the documentation site (``schema_base_url``).

Read (``received``), on disputes.events: a message without any ``ce_`` header is taken as before;
one with them must be a valid CloudEvent whose type is the body's, else intake dead-letters it
(``errors.REJECTIONS``: ``ce_invalid``, ``ce_unsupported_specversion``, ``ce_type_mismatch``; the
per-case ``ce_id_reused`` is intake's, which keeps the ids it took).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..config import KafkaSettings
from ..evidence.intake import Rejected
from ..observability import tracing
from ..schemas import SCHEMA_VERSION
from ..schemas.events import DisputeEvent
from .dead_letters import Sender

SPECVERSION = "1.0"
PREFIX = "ce_"
TYPE_NAMESPACE = "com.cyberjurors"
STRUCTURED = "application/cloudevents"  # the binding's media type prefix for structured mode
# the tags of the events on disputes.events, each its own ce_type
EVENT_TAGS = ("case", "case_opened", "evidence_submitted", "evidence_closed")
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


@dataclass(frozen=True)
class Kind:
    """What a public topic carries: its JSON Schema's name (``schemas.public.PUBLIC``), the event
    named in its ``ce_type`` (None: the body's ``type``), and the body fields ``ce_time`` is read
    from, the first one present."""

    schema: str
    event: str | None
    times: tuple[str, ...]


# the public topics (unprefixed); every other topic is internal and carries no ce_ headers
PUBLIC_TOPICS: dict[str, Kind] = {
    "disputes.events": Kind("dispute-event", None, ("sent_at",)),
    "disputes.verdicts": Kind("verdict", "verdict", ("decided_at",)),
    "disputes.escalations": Kind("escalation", "escalation", ("raised_at",)),
    "disputes.appeals": Kind("appeal", "appeal", ("filed_at", "sent_at")),
    "disputes.outcomes": Kind("outcome", "outcome", ("decided_at", "sent_at")),
    "disputes.dlq": Kind("dead-letter", "dead_letter", ("failed_at",)),
    "disputes.letters": Kind("letter", "letter", ("written_at",)),
}


def event_type(event: str) -> str:
    return f"{TYPE_NAMESPACE}.{event}.v{SCHEMA_VERSION}"


def dataschema(settings: KafkaSettings, schema: str) -> str:
    """Where the documentation site publishes the schema (docs/hooks/reference.py writes it there)."""
    return f"{settings.schema_base_url.rstrip('/')}/v{SCHEMA_VERSION}/{schema}.schema.json"


def event_id(ce_type: str, key: bytes, value: bytes) -> str:
    return hashlib.sha256(ce_type.encode() + b"\0" + key + b"\0" + value).hexdigest()[:32]


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _time(body: Mapping[str, Any], fields: tuple[str, ...]) -> str:
    for name in fields:
        given = body.get(name)
        if isinstance(given, str):
            try:
                at = datetime.fromisoformat(given)
            except ValueError:
                continue
            if at.tzinfo is not None:
                return rfc3339(at)
    return rfc3339(datetime.now(UTC))


def attributes(settings: KafkaSettings, topic: str, key: bytes, value: bytes) -> tracing.Headers:
    """The ``ce_*`` headers of a message to ``topic`` (its full name, prefix and all); none for an
    internal topic, for a value that is not a JSON object, and on disputes.events for one whose
    ``type`` is no dispute event's: a dead letter's original replayed as it came is then refused
    again for what it is, not for headers that would claim a type it does not have."""
    kind = (
        PUBLIC_TOPICS.get(topic.removeprefix(settings.topic_prefix))
        if topic.startswith(settings.topic_prefix)
        else None
    )
    if kind is None:
        return {}
    try:
        body = json.loads(value)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(body, dict):
        return {}
    event = kind.event if kind.event is not None else body.get("type")
    if event is None or (kind.event is None and event not in EVENT_TAGS):
        return {}
    ce_type = event_type(event)
    found = {
        "ce_specversion": SPECVERSION,
        "ce_id": event_id(ce_type, key, value),
        "ce_source": f"{settings.cloudevents_source.rstrip('/')}/{topic}",
        "ce_type": ce_type,
        "ce_time": _time(body, kind.times),
        "ce_dataschema": dataschema(settings, kind.schema),
        "content-type": tracing.CONTENT_TYPE,
    }
    return {name: text.encode() for name, text in found.items()}


class Publisher:
    """A public topic's sender: each message goes out with its CloudEvents headers beside the ones
    it was given (the trace context). Wraps the Faust topic a handler sends to (``Sender``)."""

    def __init__(self, out: Sender, settings: KafkaSettings, topic: str):
        self.out, self.settings, self.topic = out, settings, topic

    async def send(self, *, key: bytes, value: bytes, headers: tracing.Headers | None = None) -> Any:
        ce = attributes(self.settings, self.topic, key, value)
        return await self.out.send(key=key, value=value, headers={**(headers or {}), **ce})


# --- reading ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Received:
    """A dispute event's CloudEvents identity: ``id`` is unique within ``source``; ``digest`` is
    what the event says (``content_digest``), to tell a redelivery from an id reused."""

    source: str
    id: str
    type: str
    digest: str

    @property
    def key(self) -> str:
        return f"{self.source} {self.id}"


def content_digest(event: DisputeEvent) -> str:
    """The event as parsed, without ``sent_at`` (a producer's retry may restamp it): a resend of the
    same event in other JSON spacing or key order is the same content."""
    return hashlib.sha256(event.model_dump_json(exclude={"sent_at"}).encode()).hexdigest()


def _text(name: str, value: Any) -> str:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise Rejected("ce_invalid", f"header {name} is not UTF-8 (the binding's header values are)") from None
    return str(value)


def _content_type(headers: Mapping[str, Any]) -> str:
    given = headers.get("content-type", b"")
    # not a ce_ header: on a message that is no CloudEvent, bytes that are not UTF-8 refuse nothing
    return (given.decode("utf-8", errors="replace") if isinstance(given, bytes) else str(given)).strip()


def refuse_structured(headers: Any) -> None:
    """A CloudEvent in structured mode (its attributes and data wrapped in one JSON envelope, said by
    the content-type) is refused before its value is read as an event, which it is not."""
    content_type = _content_type(tracing.as_mapping(headers))
    if content_type.lower().startswith(STRUCTURED):
        raise Rejected(
            "ce_invalid",
            f"content-type {content_type[:80]}: a CloudEvent in structured mode; intake reads binary mode "
            "(the event's JSON as the value, its attributes as ce_ headers)",
        )


def received(headers: Any, event: DisputeEvent) -> Received | None:
    """The CloudEvent a dispute event arrived as, checked against its body; None for a message
    without ``ce_`` headers (a producer that does not speak CloudEvents: taken as before).
    ``Rejected`` for an invalid one, another spec version, or a type that is not the body's."""
    given = tracing.as_mapping(headers)
    ce = {name: _text(name, value) for name, value in given.items() if name.startswith(PREFIX)}
    if not ce:
        return None
    content_type = _content_type(given)
    if content_type and content_type.split(";")[0].strip().lower() != tracing.CONTENT_TYPE:
        raise Rejected("ce_invalid", f"content-type {content_type[:80]}: a dispute event's value is its JSON")
    if "ce_specversion" not in ce:
        raise Rejected("ce_invalid", f"CloudEvents headers ({', '.join(sorted(ce))[:200]}) without ce_specversion")
    if ce["ce_specversion"] != SPECVERSION:
        raise Rejected(
            "ce_unsupported_specversion",
            f"ce_specversion {ce['ce_specversion'][:40]!r}: this version reads CloudEvents {SPECVERSION}",
        )
    missing = [name for name in ("ce_id", "ce_source", "ce_type") if not ce.get(name)]
    if missing:
        raise Rejected("ce_invalid", f"a CloudEvent without {', '.join(missing)}")
    if "ce_time" in ce and not _valid_time(ce["ce_time"]):
        raise Rejected("ce_invalid", f"ce_time {ce['ce_time'][:60]!r} is not an RFC 3339 timestamp")
    expected = event_type(event.type)
    if ce["ce_type"] != expected:
        raise Rejected(
            "ce_type_mismatch",
            f"ce_type {ce['ce_type'][:120]!r}, but the body is a {event.type} event, whose type is {expected}",
        )
    return Received(ce["ce_source"], ce["ce_id"], ce["ce_type"], content_digest(event))


def _valid_time(text: str) -> bool:
    if not _RFC3339.match(text):
        return False
    try:
        datetime.fromisoformat(text.upper())
    except ValueError:  # 2026-02-30 and the like
        return False
    return True
