"""What the outcomes agent keeps for an escalated case beside its counted outcome (streams/outcome.py):
the outcome held for the human panel's decision, as it came (its bytes and where it came from, so
its dead letter or its counting later is the one a handler would have made of it), and the
decisions that finished without standing (overridden, or superseded by the panel's), so a
redelivered one is left alone however long the chain of overrides behind it."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ..schemas import OutcomeReported
from ..state import expiry
from ..state.results import StageResults

# settled decisions remembered per case: each is one signed override or one superseded outcome, so a
# case rarely has more than a few; past this the oldest is forgotten (its redelivery would be a dead letter)
MAX_SETTLED = 32
# what the record adds to the outcome's bytes; an outcome too large to keep beside it with base64's
# third is kept in its canonical form (every field bounded by the schema: well under this)
RECORD_OVERHEAD = 512


@dataclass(frozen=True)
class Held:
    """An outcome waiting for the human panel's decision: ``at`` (unix seconds) it came, and the
    message it came in."""

    at: float
    topic: str
    partition: int | None
    offset: int | None
    value: bytes
    reformatted: bool = False  # the outcome's canonical JSON kept, its original too large to keep whole

    @classmethod
    def of(cls, event: Any, outcome: OutcomeReported, at: float, max_bytes: int | None) -> Held:
        message = event.message
        value = message.value or b""
        fits = max_bytes is None or len(value) * 4 // 3 + RECORD_OVERHEAD <= max_bytes
        if not fits:
            value = outcome.model_dump_json(exclude_none=True).encode()
        return cls(at, message.topic, message.partition, message.offset, value, reformatted=not fits)

    def encode(self) -> bytes:
        record = {
            "at": self.at,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "value_base64": base64.b64encode(self.value).decode(),
            "reformatted": self.reformatted,
        }
        return json.dumps(record, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Held:
        record = json.loads(raw)
        return cls(
            record["at"],
            record["topic"],
            record["partition"],
            record["offset"],
            base64.b64decode(record["value_base64"]),
            record.get("reformatted", False),
        )

    def event(self, case_id: str) -> SimpleNamespace:
        """The message it came in, as a handler gets it: what a dead letter of it keeps."""
        message = SimpleNamespace(
            key=case_id.encode(), value=self.value, topic=self.topic, partition=self.partition, offset=self.offset
        )
        return SimpleNamespace(message=message, value=self.value, headers=None)


def entry(outcome: OutcomeReported, decision: dict[str, Any]) -> dict[str, Any]:
    return {"event_id": outcome.event_id, "decision": decision}


def settled(results: StageResults, case_id: str) -> list[dict[str, Any]]:
    raw = results.stored(case_id, StageResults.SETTLED)
    return json.loads(raw) if raw else []


def settle(results: StageResults, case_id: str, finished: dict[str, Any], partition: int | None) -> None:
    """Remember a decision finished without standing (``entry``), the newest MAX_SETTLED of them."""
    known = [e for e in settled(results, case_id) if e != finished] + [finished]
    expiry.put(results.table, f"{case_id}/{StageResults.SETTLED}", json.dumps(known[-MAX_SETTLED:]).encode(), partition)
