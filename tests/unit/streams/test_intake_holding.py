"""Intake keeps everything: evidence that comes before its case_opened is held and folded in, or
dead-lettered with its original bytes when the case never opens; abandoned drafts expire; repeats
are ignored; a changed round is refused. The real intake handler (streams/intake.py) with a dict
for its table, lists for its topics and a clock the test moves.
"""

from __future__ import annotations

import asyncio
import base64
import json
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, Gauge

from cyberjurors.config import Settings
from cyberjurors.evidence import intake
from cyberjurors.observability import metrics
from cyberjurors.schemas import CaseFile, DeadLetter
from cyberjurors.state.results import StageResults
from cyberjurors.streams import intake as handler
from cyberjurors.streams.dead_letters import DeadLetters

from ...factories import METADATA


def opened(case_id: str = "c-1", event_id: str = "open") -> bytes:
    return json.dumps({"type": "case_opened", "case_id": case_id, "metadata": METADATA, "event_id": event_id}).encode()


def evidence(
    case_id: str = "c-1",
    party: str = "buyer",
    round_: int = 1,
    item: str = "b1",
    text: str = "Torn.",
    event_id: str | None = None,
    **extra,
) -> bytes:
    return json.dumps(
        {
            "type": "evidence_submitted",
            "case_id": case_id,
            "event_id": event_id or f"{party}-{round_}",
            "evidence": {
                "party": party,
                "round": round_,
                "items": [{"id": item, "kind": "text", "text": text}],
                **extra,
            },
        }
    ).encode()


def closed(case_id: str = "c-1", event_id: str = "close") -> bytes:
    return json.dumps({"type": "evidence_closed", "case_id": case_id, "event_id": event_id}).encode()


class Topic:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    async def send(self, *, key: bytes, value: bytes, headers: dict | None = None) -> None:
        self.sent.append(value)


def case_key(raw: bytes) -> bytes:
    event = json.loads(raw)
    return (event.get("case_id") or event["case"]["case_id"]).encode()


class Stage:
    def __init__(self, tmp_path, **settings):
        self.settings = Settings(
            llm_backend="offline",
            media_root=tmp_path,
            media_store=str(tmp_path / "store"),
            early_evidence={"wait_s": 300, **settings.pop("early_evidence", {})},
            retention={"intake_draft_s": 3600, **settings.pop("retention", {})},
            **settings,
        )
        self.table: dict[str, dict] = {}
        self.ready, self.dlq = Topic(), Topic()
        self.now = 1_000_000.0
        in_flight = metrics.CasesInFlight(Gauge("test_in_flight", "", registry=CollectorRegistry()))
        self.handler = handler.Intake(
            self.settings,
            "offline",
            self.table,
            StageResults({}),
            self.ready,
            DeadLetters(self.dlq, in_flight),
            in_flight,
            clock=lambda: self.now,
        )
        self.offset = 0

    def send(self, *raws: bytes, partition: int = 1, key: bytes | None = None) -> None:
        """Each event keyed by its case_id, as a platform's producer keys it, unless ``key`` is given."""
        for raw in raws:
            self.offset += 1
            message = SimpleNamespace(
                key=key or case_key(raw), value=raw, topic="disputes.events", partition=partition, offset=self.offset
            )
            asyncio.run(self.handler(SimpleNamespace(value=raw, message=message)))

    def expire(self, after_s: float) -> int:
        self.now += after_s
        return asyncio.run(self.handler.expire())

    @property
    def letters(self) -> list[DeadLetter]:
        return [DeadLetter.model_validate_json(v) for v in self.dlq.sent]

    @property
    def admitted(self) -> list[CaseFile]:
        return [CaseFile.model_validate_json(v) for v in self.ready.sent]


# --- evidence before its case ---------------------------------------------------------------


def test_evidence_before_its_case_is_held_and_folded_in_with_a_note(tmp_path):
    stage = Stage(tmp_path)
    early = evidence(party="seller", item="s1")
    stage.send(early, evidence(), closed())
    assert not stage.letters and not stage.admitted
    assert [h["type"] for h in stage.table["c-1"]["held"]] == [
        "evidence_submitted",
        "evidence_submitted",
        "evidence_closed",
    ]
    stage.now += 42
    stage.send(opened())
    (case_file,) = stage.admitted  # the held close closed it
    assert [(r.party, r.round) for r in case_file.case.rounds] == [("buyer", 1), ("seller", 1)]
    notes = [p for p in case_file.problems if "arrived before the case was opened" in p]
    assert len(notes) == 3 and all("held 42 s" in p for p in notes)
    assert not stage.letters
    assert "held" not in stage.table["c-1"]


def test_held_evidence_of_a_case_that_never_opens_is_dead_lettered_with_its_bytes_and_replayable(tmp_path):
    stage = Stage(tmp_path)
    raws = [evidence(), evidence(party="seller", item="s1")]
    stage.send(raws[0])
    stage.now += 200
    stage.send(raws[1])
    assert stage.expire(99) == 0  # 299 s after the first: still waiting
    assert len(stage.table["c-1"]["held"]) == 2 and not stage.letters
    assert stage.expire(2) == 1  # the wait runs from the first held event
    letters = stage.letters
    assert [d.reason for d in letters] == ["case_never_opened"] * 2
    assert [base64.b64decode(d.original_base64) for d in letters] == raws
    assert all(
        d.replayable and d.stage == "intake" and d.topic == "disputes.events" and d.partition == 1 for d in letters
    )
    assert [d.offset for d in letters] == [1, 2]
    assert "c-1" not in stage.table
    stage.send(opened(), *[base64.b64decode(d.original_base64) for d in letters], closed())  # the replay
    (case_file,) = stage.admitted
    assert len(case_file.case.rounds) == 2


def test_held_events_are_bounded_per_case_and_per_worker(tmp_path):
    stage = Stage(tmp_path, early_evidence={"per_case": 2, "total": 3})
    stage.send(evidence(round_=1, item="b1"), evidence(round_=2, item="b2"), evidence(round_=3, item="b3"))
    (over,) = stage.letters
    assert (over.reason, over.replayable) == ("early_evidence_overflow", True)
    assert "early_evidence.per_case=2" in over.detail
    assert base64.b64decode(over.original_base64) == evidence(round_=3, item="b3")
    stage.send(evidence("c-2"), evidence("c-3"))
    assert [d.reason for d in stage.letters] == ["early_evidence_overflow"] * 2
    assert "early_evidence.total=3" in stage.letters[-1].detail and stage.letters[-1].key == "c-3"
    assert sorted(stage.table) == ["c-1", "c-2"]


def test_a_held_event_that_cannot_apply_is_dead_lettered_alone_when_the_case_opens(tmp_path):
    stage = Stage(tmp_path)
    clash = evidence(round_=2, item="b1", event_id="again")  # the evidence id b1 a second time
    stage.send(evidence(), clash, opened(), closed())
    (letter,) = stage.letters
    assert (letter.reason, letter.replayable) == ("duplicate_evidence_id", False)
    assert base64.b64decode(letter.original_base64) == clash
    (case_file,) = stage.admitted
    assert [i.id for i in case_file.case.items()] == ["b1"]


# --- repeats and changed rounds -------------------------------------------------------------


def test_a_repeated_evidence_closed_is_ignored_after_the_case_went_to_the_jury(tmp_path):
    stage = Stage(tmp_path)
    stage.send(opened(), evidence(), closed(), closed(event_id="close-again"))
    assert len(stage.admitted) == 1 and not stage.letters
    stage.send(evidence(round_=2, item="b2"))  # new evidence after the close is still refused
    assert [d.reason for d in stage.letters] == ["case_closed"]


def test_a_whole_case_for_a_case_open_for_incremental_events_is_refused_and_the_draft_goes_on(tmp_path):
    """Admitted, the whole case replaced the draft: its rounds were never judged and no letter said
    so (a new user's try). The draft is what was opened first; the whole case comes back as a
    letter with its bytes, and closing the draft judges the draft's evidence."""
    stage = Stage(tmp_path)
    whole = case_event()
    stage.send(opened(), evidence(item="d1", text="Only in the draft."), whole)
    (letter,) = stage.letters
    assert (letter.reason, letter.replayable) == ("case_already_open", False)
    assert "1 rounds so far" in letter.detail
    assert base64.b64decode(letter.original_base64) == whole
    assert not stage.admitted
    stage.send(closed())
    (case_file,) = stage.admitted
    assert [(i.id, i.text) for i in case_file.case.items()] == [("d1", "Only in the draft.")]


def test_events_held_for_a_case_that_then_comes_whole_are_dead_lettered_not_forgotten(tmp_path):
    stage = Stage(tmp_path)
    early = [evidence(party="seller", item="s1"), closed()]
    stage.send(*early, case_event())
    (case_file,) = stage.admitted
    assert [i.id for i in case_file.case.items()] == ["b1"]
    letters = stage.letters
    assert [(d.reason, d.replayable) for d in letters] == [("case_closed", False)] * 2
    assert [base64.b64decode(d.original_base64) for d in letters] == early
    assert "submitted whole" in letters[0].detail
    assert "held" not in stage.table["c-1"]


def test_a_round_resent_with_other_items_is_refused_and_the_first_version_stands(tmp_path):
    stage = Stage(tmp_path)
    changed = evidence(item="b9", text="Something else entirely.", event_id="buyer-1-v2")
    stage.send(opened(), evidence(), changed, closed())
    (letter,) = stage.letters
    assert (letter.reason, letter.replayable) == ("round_changed", False)
    assert base64.b64decode(letter.original_base64) == changed
    (case_file,) = stage.admitted
    assert [(i.id, i.text) for i in case_file.case.items()] == [("b1", "Torn.")]


def test_the_same_round_resent_with_a_new_stamp_is_a_duplicate_noted_on_the_case(tmp_path):
    stage = Stage(tmp_path)
    stage.send(opened(), evidence(), evidence(event_id="buyer-1-retry", submitted_at="2026-09-02T10:00:00Z"), closed())
    assert not stage.letters
    (case_file,) = stage.admitted
    assert any("duplicate event ignored" in p and "buyer round 1" in p for p in case_file.problems)


@pytest.mark.parametrize(
    "event_id",
    [
        "x\n[2026-11-26 18:45:00,000] [11516] [WARNING] dead letter from intake: FORGED",
        "b1\x1b[2J",
        "b1\u202e1-reyub",
        "b1\u200b",
        "b1\x00",
        "b1\u2028",
    ],
)
def test_an_event_id_with_control_or_format_characters_is_refused_and_never_noted(tmp_path, event_id):
    """An event id goes into log lines and, when repeated, into the public verdict's notes: a line
    break there forged a log line and a verdict problem; the event is refused like a bad case_id."""
    stage = Stage(tmp_path)
    forged = evidence(event_id=event_id)
    stage.send(opened(), forged, forged, evidence(party="seller", item="s1"), closed())
    assert [(d.reason, d.replayable, d.key) for d in stage.letters] == [("invalid_event", False, "c-1")] * 2
    assert all(base64.b64decode(d.original_base64) == forged and "event_id" in d.detail for d in stage.letters)
    (case_file,) = stage.admitted
    assert [i.id for i in case_file.case.items()] == ["s1"] and not case_file.problems


# --- abandoned drafts -----------------------------------------------------------------------


def test_an_abandoned_draft_expires_into_a_letter_listing_what_was_received(tmp_path):
    stage = Stage(tmp_path)
    stage.send(opened(), evidence())
    stage.now += 3000
    stage.send(evidence(party="seller", item="s1"))  # activity: the draft's time starts again
    assert stage.expire(3599) == 0 and "draft" in stage.table["c-1"]
    assert stage.expire(2) == 1
    (letter,) = stage.letters
    assert (letter.reason, letter.replayable, letter.key, letter.partition) == ("draft_expired", False, "c-1", 1)
    assert "buyer round 1, seller round 1" in letter.detail and "open, buyer-1, seller-1" in letter.detail
    kept = intake.Draft.model_validate_json(base64.b64decode(letter.original_base64))
    assert [(r.party, r.round) for r in kept.rounds] == [("buyer", 1), ("seller", 1)]
    assert "c-1" not in stage.table
    stage.send(closed())  # a close after the expiry finds no case: held, not admitted
    assert not stage.admitted and "held" in stage.table["c-1"]


def test_an_admitted_case_is_remembered_for_the_retention_then_forgotten_without_a_letter(tmp_path):
    stage = Stage(tmp_path, retention={"state_s": 86_400}, appeal_window_s=0)
    stage.send(case_event())
    assert stage.expire(86_000) == 0  # inside the retention: kept, past the draft and held-evidence waits
    assert "digest" in stage.table["c-1"] and not stage.letters
    stage.send(case_event())  # the same case again inside the retention: ignored
    assert len(stage.admitted) == 1 and not stage.letters
    stage.expire(1_000)  # past the retention: the record goes with the case's other state, quietly
    assert "c-1" not in stage.table and not stage.letters


def test_with_an_appeal_window_longer_than_the_retention_the_record_is_held_as_long_as_the_verdict(tmp_path):
    stage = Stage(tmp_path, retention={"state_s": 86_400}, appeal_window_s=3 * 86_400)
    stage.send(case_event())
    stage.expire(3 * 86_400 - 100)  # past the retention, inside the window: the case may still be appealed
    stage.send(case_event())
    assert "digest" in stage.table["c-1"] and len(stage.admitted) == 1 and not stage.letters
    stage.expire(200)  # the window closed: forgotten with the case's other state
    assert "c-1" not in stage.table


# --- validation -----------------------------------------------------------------------------


def case_event(**metadata) -> bytes:
    return json.dumps(
        {
            "type": "case",
            "case": {
                "case_id": "c-1",
                "metadata": {**METADATA, **metadata},
                "rounds": [{"party": "buyer", "round": 1, "items": [{"id": "b1", "kind": "text", "text": "Torn."}]}],
            },
        }
    ).encode()


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        ({"ordered_at": "2026-09-01T10:00:00"}, "naive_timestamp"),
        ({"delivered_at": "2026-09-05"}, "naive_timestamp"),
        ({"delivered_at": "2026-08-31T10:00:00Z"}, "delivered_before_ordered"),
        ({"delivered_at": "2026-09-01T11:00:00+02:00"}, "delivered_before_ordered"),  # 09:00 UTC, before 10:00
        ({"order_amount": 1e308}, "amount_out_of_range"),
        ({"order_amount": "1000000000000.01"}, "amount_out_of_range"),
        ({"order_amount": "NaN"}, "amount_out_of_range"),
        ({"order_amount": "Infinity"}, "amount_out_of_range"),
        ({"order_amount": "-0.01"}, "amount_out_of_range"),
        ({"currency": "XYZ"}, "unknown_currency"),
        ({"currency": "XTS"}, "unknown_currency"),  # ISO's testing code: never what an order is paid in
        ({"currency": "eur"}, "unknown_currency"),
    ],
)
def test_case_facts_out_of_bounds_are_refused_with_their_reason(metadata, reason):
    with pytest.raises(intake.Rejected) as err:
        intake.parse_event(case_event(**metadata))
    assert err.value.reason == reason and err.value.replayable is False


@pytest.mark.parametrize(
    "metadata",
    [
        {"delivered_at": "2026-09-01T10:00:00Z"},  # delivered the moment it was ordered (digital goods)
        {"delivered_at": "2026-09-01T12:30:00+02:00"},
        {"order_amount": "0"},
        {"order_amount": "1000000000000"},
        {"currency": "JPY"},
        {"currency": "KWD"},
    ],
)
def test_case_facts_at_the_bounds_are_admitted(metadata):
    assert intake.parse_event(case_event(**metadata)).case_id == "c-1"


def test_votes_are_parsed_strictly():
    from cyberjurors.schemas import OutcomeReported

    good = {"type": "outcome", "case_id": "c-1", "votes": {"buyer": 12, "seller": 5}}
    assert OutcomeReported.model_validate_json(json.dumps(good)).votes.buyer == 12
    for votes in ({"buyer": "12", "seller": 5}, {"buyer": 12.0, "seller": 5}, {"buyer": True, "seller": 16}):
        with pytest.raises(ValueError):
            OutcomeReported.model_validate_json(json.dumps({**good, "votes": votes}))
    with pytest.raises(intake.Rejected) as err:
        intake.parse_event(
            json.dumps(
                {
                    "type": "case_opened",
                    "case_id": "c-1",
                    "metadata": METADATA,
                    "ground_truth": {"buyer": "12", "seller": 5},
                }
            ).encode()
        )
    assert err.value.reason == "invalid_votes"


def test_a_naive_sent_at_or_submitted_at_is_refused():
    for raw in (
        evidence(submitted_at="2026-09-02T10:00:00"),
        json.dumps({"type": "evidence_closed", "case_id": "c-1", "sent_at": "2026-09-02T10:00:00"}).encode(),
    ):
        with pytest.raises(intake.Rejected) as err:
            intake.parse_event(raw)
        assert err.value.reason == "naive_timestamp"


def test_rounds_per_party_and_case_text_are_capped_as_a_draft_grows(tmp_path):
    stage = Stage(tmp_path, intake_limits={"max_rounds_per_party": 2, "max_case_text_chars": 30})
    stage.send(opened(), evidence(round_=1, item="b1"), evidence(round_=2, item="b2"), evidence(round_=3, item="b3"))
    assert [d.reason for d in stage.letters] == ["too_many_rounds"]
    stage.send(evidence(party="seller", item="s1", text="x" * 21))  # 5 + 5 + 21 > 30
    assert [d.reason for d in stage.letters] == ["too_many_rounds", "case_text_too_long"]
    stage.send(evidence(party="seller", item="s1", text="x" * 20), closed())  # exactly 30
    (case_file,) = stage.admitted
    assert len(case_file.case.rounds) == 3


def test_a_whole_case_over_the_caps_is_refused(tmp_path):
    settings = Settings(
        llm_backend="offline", media_root=tmp_path, intake_limits={"max_rounds_per_party": 1, "max_case_text_chars": 10}
    )
    two = json.loads(case_event())
    two["case"]["rounds"].append({"party": "buyer", "round": 2, "items": [{"id": "b2", "kind": "text", "text": "x"}]})
    with pytest.raises(intake.Rejected) as err:
        intake.admit(intake.parse_event(json.dumps(two).encode()).case, settings)
    assert err.value.reason == "too_many_rounds"
    long = json.loads(case_event())
    long["case"]["rounds"][0]["items"][0]["text"] = "x" * 11
    with pytest.raises(intake.Rejected) as err:
        intake.admit(intake.parse_event(json.dumps(long).encode()).case, settings)
    assert err.value.reason == "case_text_too_long"


# --- what a platform's producer may get wrong, in words ------------------------------------------


def test_an_event_keyed_other_than_by_its_case_id_is_refused_with_the_reason(tmp_path):
    """Keys decide partitions and each table keeps a case on its case_id's partition: a case's event
    under another key would be folded by another worker. Refused, final, with the key and the id."""
    stage = Stage(tmp_path)
    stage.send(opened(), key=b"c-2")
    stage.send(opened(), key=b"\xff\xfe")
    stage.send(opened(), key=None)  # the harness's own key: the case_id, admitted as the control
    assert [(d.reason, d.replayable) for d in stage.letters] == [("key_mismatch", False)] * 2
    assert 'the Kafka key "c-2" is not the case_id "c-1"' in stage.letters[0].detail
    assert stage.letters[1].key == "\ufffd\ufffd" and list(stage.table) == ["c-1"]


def test_a_utf8_byte_order_mark_is_read_past_and_other_ones_are_named():
    assert intake.parse_event(b"\xef\xbb\xbf" + closed()).case_id == "c-1"  # as cyberjurors produce reads files
    for raw, name in ((closed().decode().encode("utf-16"), "UTF-16"), (closed().decode().encode("utf-32"), "UTF-32")):
        with pytest.raises(intake.Rejected) as err:
            intake.parse_event(raw)
        assert err.value.reason == "invalid_json" and f"starts with a {name} byte-order mark" in err.value.detail


def test_a_key_twice_in_one_object_is_refused_at_any_depth():
    for raw in (
        b'{"type": "evidence_closed", "case_id": "c-1", "case_id": "c-2"}',
        opened().replace(b'"category"', b'"currency": "USD", "category"'),
    ):
        with pytest.raises(intake.Rejected) as err:
            intake.parse_event(raw)
        assert err.value.reason == "duplicate_json_key" and "appears twice" in err.value.detail
    assert intake.parse_event(opened()).case_id == "c-1"  # the control


def test_field_paths_name_the_field_once():
    raw = json.dumps(
        {"type": "case", "case": {"case_id": "c-1", "metadata": {"category": "clothing"}, "rounds": []}}
    ).encode()
    with pytest.raises(intake.Rejected) as err:
        intake.parse_event(raw)
    assert "case.metadata.currency: Field required" in err.value.detail and "case.case" not in err.value.detail
    assert err.value.reason == "invalid_event"  # a missing currency is no unknown currency
