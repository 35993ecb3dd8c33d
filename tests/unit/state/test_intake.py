"""state/intake.py: the intake table's entries (held events, drafts, admitted digests), read and
written only through IntakeTable."""

from __future__ import annotations

from cyberjurors.evidence.intake import Draft
from cyberjurors.schemas import CaseMetadata
from cyberjurors.state.intake import IntakeTable

METADATA = CaseMetadata.model_validate(
    {
        "category": "clothing",
        "product": "Linen shirt",
        "order_amount": "30.00",
        "currency": "USD",
        "dispute_reason": "Torn seam",
        "requested_remedy": "Refund",
        "ordered_at": "2026-09-18T08:12:00Z",
    }
)


def test_a_draft_is_kept_stamped_with_its_last_event_and_read_back_whole():
    table = IntakeTable({})
    draft = Draft(case_id="c-1", metadata=METADATA, notes=["n"])
    table.keep_draft(draft, at=100.0, partition=2)
    assert table.draft("c-1") == draft and table.draft("c-2") is None
    assert {k: table.entry("c-1")[k] for k in ("at", "partition")} == {"at": 100.0, "partition": 2}


def test_held_events_are_counted_across_cases_and_only_held_ones():
    table = IntakeTable({})
    table.hold("c-1", [{"type": "evidence_submitted"}] * 2, first_at=5.0, partition=0)
    table.hold("c-2", [{"type": "evidence_closed"}], first_at=6.0, partition=1)
    table.admitted("c-3", "d" * 64, until=7.0, partition=1)
    assert table.held_count() == 3


def test_due_honours_the_cutoff_and_the_partitions():
    table = IntakeTable({})
    table.hold("old", [{}], first_at=1.0, partition=0)
    table.hold("moved", [{}], first_at=1.0, partition=3)
    table.hold("new", [{}], first_at=50.0, partition=0)
    assert [case for case, _ in table.due(10.0, partitions={0})] == ["old"]
    assert sorted(case for case, _ in table.due(10.0)) == ["moved", "old"]


def test_an_entry_changed_since_it_was_read_is_not_forgotten():
    table = IntakeTable({})
    table.hold("c-1", [{"n": 1}], first_at=1.0, partition=0)
    seen = table.entry("c-1")
    table.hold("c-1", [{"n": 1}, {"n": 2}], first_at=1.0, partition=0)  # an event came meanwhile
    assert table.forget("c-1", seen) is False and table.held_count() == 2
    assert table.forget("c-1", table.entry("c-1")) is True and table.entry("c-1") == {}


def test_a_dead_letter_is_noted_only_on_an_admitted_case_and_a_restore_puts_back_what_was_read():
    table = IntakeTable({})
    table.admitted("c-1", "d" * 64, until=9.0, partition=0)
    table.keep_draft(Draft(case_id="c-2", metadata=METADATA), at=1.0, partition=0)
    noted = {"stage": "focus", "reason": "llm_timeout", "replayable": True}
    table.note_dead_letter("c-1", noted, partition=0)
    table.note_dead_letter("c-2", noted, partition=0)
    table.note_dead_letter("c-3", noted, partition=0)
    assert table.entry("c-1")["dead_letter"] == noted
    assert "dead_letter" not in table.entry("c-2") and table.entry("c-3") == {}
    before = table.entry("c-2")
    table.hold("c-2", [{}], first_at=2.0, partition=0)
    table.restore("c-2", before)
    assert table.entry("c-2") == before
