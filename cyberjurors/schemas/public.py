"""The public events: what platforms produce and read, each with the JSON Schema producers in any
language validate against (``cyberjurors schemas export``, and the documentation's reference)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from .case import DisputeCase
from .events import AppealFiled, DisputeEvent, OutcomeReported
from .letters import PartyLetter
from .reasoning import DeadLetter, Escalation, Verdict

# name -> (the model, its topic)
PUBLIC: dict[str, tuple[Any, str]] = {
    "dispute-event": (DisputeEvent, "disputes.events"),
    "dispute-case": (DisputeCase, "disputes.events"),
    "verdict": (Verdict, "disputes.verdicts"),
    "escalation": (Escalation, "disputes.escalations"),
    "appeal": (AppealFiled, "disputes.appeals"),
    "outcome": (OutcomeReported, "disputes.outcomes"),
    "letter": (PartyLetter, "disputes.letters"),
    "dead-letter": (DeadLetter, "disputes.dlq"),
}


# With ``payload_encryption`` a record's whole value is sealed, not some of its fields: which of these
# records are (evidence/records.py; docs/operations/data-rights.md). The record's key (the case id)
# and its headers stay in the clear, the key id in ``cj-sealed``.
SEALED_BY_SERVICE = "sealed by the service under the case's key when payload_encryption is on"
SEALED: dict[str, str] = {
    "dispute-event": "sealed only if the platform seals it at the source (`cyberjurors produce --seal`, "
    "records.seal_event); the workers read it sealed or clear",
    "dispute-case": "sealed only if the platform seals it at the source, as dispute-event",
    "verdict": SEALED_BY_SERVICE,
    "escalation": SEALED_BY_SERVICE,
    "appeal": "as the platform writes it (in the clear, unless it seals it as a dispute-event); the workers "
    "read it sealed or clear",
    "outcome": "as the platform (or the console) writes it: in the clear unless sealed as a dispute-event; "
    "the workers read it sealed or clear",
    "letter": SEALED_BY_SERVICE,
    "dead-letter": SEALED_BY_SERVICE + "; a letter about a sealed record nothing opens is sent in the clear, "
    "its original still sealed",
}
SEALED_KEYWORD = "x-cyberjurors-sealed"


def json_schemas() -> dict[str, dict[str, Any]]:
    """Each public event's JSON Schema, by name, saying (``x-cyberjurors-sealed``, an annotation
    validators ignore) whether and by whom the whole record is sealed."""
    return {
        name: TypeAdapter(model).json_schema() | {SEALED_KEYWORD: SEALED[name]} for name, (model, _) in PUBLIC.items()
    }
