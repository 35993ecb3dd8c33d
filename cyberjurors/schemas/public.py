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


def json_schemas() -> dict[str, dict[str, Any]]:
    """Each public event's JSON Schema, by name."""
    return {name: TypeAdapter(model).json_schema() for name, (model, _) in PUBLIC.items()}
