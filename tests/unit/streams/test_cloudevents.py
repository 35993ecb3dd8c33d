"""CloudEvents binary mode (streams/cloudevents.py, docs/concepts/messages.md): the ce_ headers of
every message to a public topic, and intake's rule for each kind of header a dispute event can
arrive with, driven through the real intake handler (a dict for its table, lists for its topics)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from types import SimpleNamespace

import pytest

from cyberjurors.config import Settings
from cyberjurors.evidence import intake
from cyberjurors.schemas.public import PUBLIC
from cyberjurors.state.intake import MAX_CLOUDEVENT_IDS
from cyberjurors.streams import cloudevents
from cyberjurors.streams.cloudevents import PUBLIC_TOPICS, Publisher, attributes

from ...factories import case_data, whole
from .test_intake_holding import Stage, closed, evidence, opened

SETTINGS = Settings(llm_backend="offline", topic_prefix="p.")
# the dead-letter reasons this file drives through the intake handler (test_dead_letters.py's table)
CLOUDEVENT_REASONS = ("ce_invalid", "ce_unsupported_specversion", "ce_type_mismatch", "ce_id_reused")
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


def text(headers: dict[str, bytes]) -> dict[str, str]:
    return {name: value.decode() for name, value in headers.items()}


# --- what is written ----------------------------------------------------------------------------


def test_the_public_topics_are_exactly_those_of_the_public_schemas():
    assert set(PUBLIC_TOPICS) == {topic for _, topic in PUBLIC.values()}
    assert {kind.schema for kind in PUBLIC_TOPICS.values()} <= set(PUBLIC)
    assert all(PUBLIC[kind.schema][1] == topic for topic, kind in PUBLIC_TOPICS.items())


@pytest.mark.parametrize(
    ("raw", "ce_type"),
    [
        (whole(case_data("c-1")), "com.cyberjurors.case.v1"),
        (opened(), "com.cyberjurors.case_opened.v1"),
        (evidence(), "com.cyberjurors.evidence_submitted.v1"),
        (closed(), "com.cyberjurors.evidence_closed.v1"),
    ],
)
def test_a_dispute_events_type_is_its_bodys(raw, ce_type):
    found = text(attributes(SETTINGS, "p.disputes.events", b"c-1", raw))
    assert found["ce_type"] == ce_type
    assert found["ce_dataschema"] == "https://docs.cyberjurors.example/schemas/v1/dispute-event.schema.json"
    assert found["ce_source"] == "/cyberjurors/p.disputes.events"
    assert RFC3339_UTC.match(found["ce_time"]), found["ce_time"]  # no sent_at: the time of sending


def verdict_bytes(case_id: str = "c-1", **changed) -> bytes:
    data = {
        "case_id": case_id,
        "verdict_id": "v-1",
        "winner": "buyer",
        "votes": {"buyer": 12, "seller": 5},
        "decided_at": "2026-11-27T11:30:00.250000+01:00",
        **changed,
    }
    return json.dumps(data).encode()


def test_a_verdict_carries_every_attribute_and_its_own_time_in_utc():
    value = verdict_bytes()
    found = text(attributes(SETTINGS, "p.disputes.verdicts", b"c-1", value))
    assert found == {
        "ce_specversion": "1.0",
        "ce_id": hashlib.sha256(b"com.cyberjurors.verdict.v1\0c-1\0" + value).hexdigest()[:32],
        "ce_source": "/cyberjurors/p.disputes.verdicts",
        "ce_type": "com.cyberjurors.verdict.v1",
        "ce_time": "2026-11-27T10:30:00.250000Z",
        "ce_dataschema": "https://docs.cyberjurors.example/schemas/v1/verdict.schema.json",
        "content-type": "application/json",
    }


def test_the_id_is_the_same_for_the_same_bytes_and_differs_for_any_other():
    def ce_id(key: bytes, value: bytes, topic: str = "p.disputes.verdicts") -> str:
        return attributes(SETTINGS, topic, key, value)["ce_id"].decode()

    first = ce_id(b"c-1", verdict_bytes())
    assert ce_id(b"c-1", verdict_bytes()) == first  # a stored verdict re-sent after a restart
    assert ce_id(b"c-1", verdict_bytes(verdict_id="v-2")) != first
    assert ce_id(b"c-2", verdict_bytes()) != first
    assert ce_id(b"c-1", verdict_bytes(), "p.disputes.escalations") != first  # another type


@pytest.mark.parametrize(
    ("topic", "kind", "field", "at"),
    [
        ("p.disputes.escalations", "escalation", "raised_at", "2026-11-27T10:00:00Z"),
        ("p.disputes.dlq", "dead_letter", "failed_at", "2026-11-27T10:00:01Z"),
        ("p.disputes.appeals", "appeal", "filed_at", "2026-11-27T10:00:02Z"),
        ("p.disputes.outcomes", "outcome", "decided_at", "2026-11-27T10:00:03Z"),
    ],
)
def test_each_public_record_has_its_type_schema_and_time(topic, kind, field, at):
    found = text(attributes(SETTINGS, topic, b"c-1", json.dumps({"case_id": "c-1", field: at}).encode()))
    assert found["ce_type"] == f"com.cyberjurors.{kind}.v1"
    assert found["ce_time"] == at
    assert found["ce_dataschema"].endswith(f"/v1/{PUBLIC_TOPICS[topic.removeprefix('p.')].schema}.schema.json")


@pytest.mark.parametrize(
    ("topic", "value"),
    [
        ("p.disputes.intake", verdict_bytes()),  # internal
        ("p.disputes.rounds", verdict_bytes()),
        ("disputes.verdicts", verdict_bytes()),  # not this deployment's prefix
        ("p.disputes.events", b"not json"),  # a dead letter's original replayed as it came
        ("p.disputes.events", json.dumps({"type": "verdict"}).encode()),  # not a dispute event
        ("p.disputes.events", b"[1, 2]"),
    ],
)
def test_no_cloudevents_headers_where_there_is_no_public_event(topic, value):
    assert attributes(SETTINGS, topic, b"c-1", value) == {}


def test_the_source_and_the_schema_base_are_settings():
    settings = SETTINGS.model_copy(
        update={"cloudevents_source": "urn:shop:cj/", "schema_base_url": "https://schemas.shop.example/cj/"}
    )
    found = text(attributes(settings, "p.disputes.verdicts", b"c-1", verdict_bytes()))
    assert found["ce_source"] == "urn:shop:cj/p.disputes.verdicts"
    assert found["ce_dataschema"] == "https://schemas.shop.example/cj/v1/verdict.schema.json"


def test_a_publisher_adds_the_cloudevents_headers_to_the_trace_context_it_is_given():
    sent = []

    class Topic:
        async def send(self, *, key, value, headers=None):
            sent.append(headers)

    publisher = Publisher(Topic(), SETTINGS, "p.disputes.verdicts")
    asyncio.run(publisher.send(key=b"c-1", value=verdict_bytes(), headers={"traceparent": b"00-x-y-01"}))
    [headers] = sent
    assert headers["traceparent"] == b"00-x-y-01"
    assert headers["ce_type"] == b"com.cyberjurors.verdict.v1"


# --- what intake does with what it gets ---------------------------------------------------------


def ce(raw: bytes, **changed: str | bytes | None) -> dict[str, bytes]:
    """A platform's binary-mode headers for ``raw``: its own id and source, the body's type."""
    body = json.loads(raw)
    found: dict[str, str | bytes | None] = {
        "ce_specversion": "1.0",
        "ce_id": f"shop-{hashlib.sha256(raw).hexdigest()[:10]}",
        "ce_source": "//shop.example/disputes",
        "ce_type": f"com.cyberjurors.{body['type']}.v1",
        "ce_time": "2026-11-27T10:00:00+01:00",
        "content-type": "application/json; charset=utf-8",
        **changed,
    }
    return {k: v if isinstance(v, bytes) else v.encode() for k, v in found.items() if v is not None}


class CloudStage(Stage):
    """The intake handler of test_intake_holding, sent messages with headers."""

    def send_with(self, raw: bytes, headers: dict[str, bytes], key: str | None = None) -> None:
        self.offset += 1
        key = key or json.loads(raw).get("case_id") or json.loads(raw)["case"]["case_id"]
        message = SimpleNamespace(key=key.encode(), value=raw, topic="disputes.events", partition=1, offset=self.offset)
        asyncio.run(self.handler(SimpleNamespace(value=raw, message=message, headers=headers)))

    @property
    def reasons(self) -> list[str]:
        return [letter.reason for letter in self.letters]


def test_an_event_without_any_cloudevents_header_is_taken_as_before(tmp_path):
    stage = CloudStage(tmp_path)
    stage.send_with(whole(case_data("c-1")), {"traceparent": b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01"})
    assert [c.case.case_id for c in stage.admitted] == ["c-1"] and not stage.letters
    assert "cloudevents" not in stage.table["c-1"]


def test_a_valid_cloudevent_is_taken_and_its_id_kept_with_the_case(tmp_path):
    stage = CloudStage(tmp_path)
    raw = whole(case_data("c-1"))
    stage.send_with(raw, ce(raw, ce_id="e-1"))
    assert [c.case.case_id for c in stage.admitted] == ["c-1"] and not stage.letters
    assert list(stage.table["c-1"]["cloudevents"]) == ["//shop.example/disputes e-1"]


@pytest.mark.parametrize(
    ("changed", "reason", "said"),
    [
        ({"ce_type": "com.cyberjurors.evidence_closed.v1"}, "ce_type_mismatch", "com.cyberjurors.case.v1"),
        ({"ce_type": "com.cyberjurors.case.v2"}, "ce_type_mismatch", "com.cyberjurors.case.v1"),
        ({"ce_type": "com.shop.dispute.opened"}, "ce_type_mismatch", "but the body is a case event"),
        ({"ce_specversion": "2.0"}, "ce_unsupported_specversion", "'2.0'"),
        ({"ce_specversion": "0.3"}, "ce_unsupported_specversion", "reads CloudEvents 1.0"),
        ({"ce_specversion": None}, "ce_invalid", "without ce_specversion"),
        ({"ce_id": None}, "ce_invalid", "without ce_id"),
        ({"ce_source": ""}, "ce_invalid", "without ce_source"),
        ({"ce_type": None, "ce_id": None}, "ce_invalid", "without ce_id, ce_type"),
        ({"ce_time": "27/11/2026 10:00"}, "ce_invalid", "not an RFC 3339 timestamp"),
        ({"ce_time": "2026-02-30T10:00:00Z"}, "ce_invalid", "not an RFC 3339 timestamp"),
        ({"content-type": "application/avro"}, "ce_invalid", "a dispute event's value is its JSON"),
        ({"content-type": "application/cloudevents+json"}, "ce_invalid", "structured mode"),
        ({"ce_source": b"\xff\xfe"}, "ce_invalid", "ce_source is not UTF-8"),
    ],
)
def test_cloudevents_headers_that_do_not_hold_are_a_final_dead_letter_and_admit_nothing(
    tmp_path, changed, reason, said
):
    stage = CloudStage(tmp_path)
    raw = whole(case_data("c-1"))
    stage.send_with(raw, ce(raw, **changed))
    [letter] = stage.letters
    assert (letter.reason, letter.stage, letter.replayable) == (reason, "intake", False)
    assert said in letter.detail, letter.detail
    assert not stage.admitted and "c-1" not in stage.table


def test_a_structured_mode_cloudevent_is_refused_for_what_it_is_without_any_ce_header(tmp_path):
    stage = CloudStage(tmp_path)
    envelope = json.dumps(
        {"specversion": "1.0", "type": "com.cyberjurors.case.v1", "id": "1", "source": "//s", "data": {}}
    ).encode()
    stage.send_with(envelope, {"content-type": b"application/cloudevents+json; charset=UTF-8"}, key="c-1")
    assert stage.reasons == ["ce_invalid"] and "structured mode" in stage.letters[0].detail


def test_a_content_type_on_a_message_that_is_no_cloudevent_is_not_read(tmp_path):
    stage = CloudStage(tmp_path)
    stage.send_with(whole(case_data("c-1")), {"content-type": b"text/plain"})  # as today: the body is what counts
    assert len(stage.admitted) == 1 and not stage.letters


def test_an_id_reused_for_another_event_of_the_case_is_refused_and_a_redelivery_is_not(tmp_path):
    stage = CloudStage(tmp_path)
    stage.send_with(opened(), ce(opened(), ce_id="e-1"))
    first = evidence()
    stage.send_with(first, ce(first, ce_id="e-2"))
    stage.send_with(first, ce(first, ce_id="e-2"))  # redelivered: the same event, a repeat as ever
    assert not stage.letters
    other = evidence(party="seller", item="s1")
    stage.send_with(other, ce(other, ce_id="e-2"))  # the same id, another event
    assert stage.reasons == ["ce_id_reused"]
    assert "e-2" in stage.letters[0].detail and not stage.letters[0].replayable
    stage.send_with(other, ce(other, ce_id="e-3"))  # under an id of its own it is taken
    stage.send_with(closed(), ce(closed(), ce_id="e-4"))
    [case_file] = stage.admitted
    assert {(r.party, r.round) for r in case_file.case.rounds} == {("buyer", 1), ("seller", 1)}
    assert stage.reasons == ["ce_id_reused"]


def test_an_id_is_unique_within_its_source_only(tmp_path):
    stage = CloudStage(tmp_path)
    stage.send_with(opened(), ce(opened(), ce_id="e-1"))
    raw = evidence()
    stage.send_with(raw, ce(raw, ce_id="e-1", ce_source="//other.example/disputes"))
    assert not stage.letters


def test_the_ids_outlive_the_draft_into_the_admitted_case(tmp_path):
    stage = CloudStage(tmp_path)
    for raw, ce_id in ((opened(), "e-1"), (evidence(), "e-2"), (closed(), "e-3")):
        stage.send_with(raw, ce(raw, ce_id=ce_id))
    assert len(stage.admitted) == 1 and "digest" in stage.table["c-1"]
    late = evidence(party="seller", item="s1")
    stage.send_with(late, ce(late, ce_id="e-2"))  # reused after admission: the id, not case_closed, is the fault
    assert stage.reasons == ["ce_id_reused"]


def test_a_whole_case_resent_under_its_id_is_ignored_and_changed_under_it_is_refused(tmp_path):
    stage = CloudStage(tmp_path)
    raw = whole(case_data("c-1"))
    stage.send_with(raw, ce(raw, ce_id="e-1"))
    restamped = whole(case_data("c-1"), sent_at="2026-11-27T10:05:00Z")  # a retry may restamp sent_at
    stage.send_with(restamped, ce(restamped, ce_id="e-1"))
    assert len(stage.admitted) == 1 and not stage.letters
    changed = whole(case_data("c-1", buyer="It was torn, and stained too."))
    stage.send_with(changed, ce(changed, ce_id="e-1"))
    assert stage.reasons == ["ce_id_reused"]  # rather than case_already_submitted: the id says more


def test_a_case_keeps_the_newest_ids_within_the_cap(tmp_path):
    stage = CloudStage(tmp_path)
    stage.send_with(opened(), ce(opened(), ce_id="first"))
    raw = evidence()
    for n in range(MAX_CLOUDEVENT_IDS):  # a producer that gives every retry an id of its own
        stage.send_with(raw, ce(raw, ce_id=f"retry-{n}"))
    kept = list(stage.table["c-1"]["cloudevents"])
    assert len(kept) == MAX_CLOUDEVENT_IDS and kept[-1] == f"//shop.example/disputes retry-{MAX_CLOUDEVENT_IDS - 1}"
    assert "//shop.example/disputes first" not in kept  # the oldest went first
    assert not stage.letters


def test_received_reads_header_pairs_as_aiokafka_gives_them():
    raw = closed()
    pairs = list(ce(raw, ce_id="e-9").items())
    event = intake.parse_event(raw)
    seen = cloudevents.received(pairs, event)
    assert seen is not None and (seen.id, seen.type) == ("e-9", "com.cyberjurors.evidence_closed.v1")
