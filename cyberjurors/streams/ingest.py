"""disputes.events -> disputes.ready: admit whole cases, fold incremental events into a draft
until the evidence closes, and refuse what cannot be judged (``intake.Rejected``).

The ``intake`` table holds, per case_id, ``{"draft": Draft json}`` while incremental events
arrive and ``{"digest": ...}`` once the case has gone to the jury. The digest, computed here
once, travels on the CaseFile (verdict ids and the passive-evidence cache read it).
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

from .. import intake, metrics
from ..config import Settings
from ..schemas import CaseFile, CaseSubmitted, DisputeCase, now
from ..schemas.events import DisputeEvent
from .dead_letters import DeadLetters, Sender, bug
from .stage_hop import StageResults

log = logging.getLogger("cyberjurors.streams")


class Ingest:
    def __init__(self, settings: Settings, backend: str, state: MutableMapping[str, Any], results: StageResults,
                 ready: Sender, letters: DeadLetters, in_flight: metrics.CasesInFlight):
        self.settings = settings
        self.backend = backend
        self.state = state
        self.results = results
        self.ready = ready
        self.letters = letters
        self.in_flight = in_flight

    async def __call__(self, event: Any) -> None:
        try:
            await self.take(intake.parse_event(event.value), event.message.partition)
        except intake.Rejected as err:  # rejected input: it would be rejected again
            await self.letters.write(event, "ingest", err.reason, err.detail, replayable=err.replayable)
        except Exception as err:  # a bug must cost one event (kept in the DLQ to replay once fixed), not the worker
            log.exception("ingest failed on offset %s", event.message.offset)
            await self.letters.write(event, "ingest", "ingest_failed", bug(err), replayable=True)

    async def take(self, event: DisputeEvent, partition: int) -> None:
        if isinstance(event, CaseSubmitted):
            await self.admit(event.case, [], partition)
            return
        draft = self.fold(event)
        if draft is not None and draft.closed:
            await self.admit(draft.to_case(), draft.notes, partition)

    def fold(self, event: DisputeEvent) -> intake.Draft | None:
        """Apply an incremental event to its case's draft in the table; None for a repeat (noted on the draft)."""
        state = self.state.get(event.case_id) or {}
        if state.get("digest"):
            raise intake.Rejected("case_closed", f"case {event.case_id} has already gone to the jury")
        draft = intake.Draft.model_validate(state["draft"]) if "draft" in state else None
        try:
            draft = intake.fold(draft, event)  # type: ignore[arg-type]  # not a CaseSubmitted here
        except intake.Duplicate as dup:
            log.info("case %s: %s", event.case_id, dup)
            if draft is not None:
                draft.notes.append(f"duplicate event ignored: {dup}")
                self.state[event.case_id] = {"draft": draft.model_dump(mode="json")}
            return None
        self.state[event.case_id] = {"draft": draft.model_dump(mode="json")}
        return draft

    async def admit(self, case: DisputeCase, notes: list[str], partition: int) -> None:
        digest = case.digest()
        state = self.state.get(case.case_id) or {}
        if state.get("digest") == digest:
            log.info("case %s submitted again unchanged; ignored", case.case_id)
            return
        if state.get("digest"):
            raise intake.Rejected("case_already_submitted", f"case {case.case_id} was already submitted "
                                  "with different content; use a new case_id")
        problems = [*notes, *intake.admit(case, self.settings)]
        self.state[case.case_id] = {"digest": digest}
        case_file = CaseFile(case=case, received_at=now(), problems=problems, backend=self.backend, digest=digest)
        self.in_flight.add(case.case_id, partition)  # before the hand-off, which yields to the other stages
        try:
            await self.results.hand_on(case.case_id, "ready", case_file.model_dump_json().encode(), self.ready)
        except BaseException:
            self.in_flight.discard(case.case_id)
            raise
