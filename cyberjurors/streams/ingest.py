"""disputes.events -> disputes.ready: admit whole cases, fold incremental events into a draft
until the evidence closes, and refuse what cannot be judged (``intake.Rejected``).

The ``intake`` table holds, per case_id, ``{"draft": Draft json}`` while incremental events
arrive and ``{"digest": ...}`` once the case has gone to the jury. The digest, computed here
once, travels on the CaseFile (verdict ids and the passive-evidence cache read it).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import MutableMapping
from typing import Any

from .. import intake, metrics
from ..config import Settings
from ..media_store import open_store
from ..schemas import CaseFile, CaseSubmitted, DisputeCase, now
from ..schemas.events import DisputeEvent
from .dead_letters import DeadLetters, OutputTooLarge, Sender, bug
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
        self.store = open_store(settings)
        self.admitting: dict[str, str] = {}  # case_id -> digest while its hand-off is under way

    async def __call__(self, event: Any) -> None:
        try:
            self.check_size(event)
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
        before = self.state.get(event.case_id)
        draft = self.fold(event)
        if draft is not None and draft.closed:
            try:
                await self.admit(draft.to_case(), draft.notes, partition)
            except BaseException:
                # the close did not go through: the draft is left as it was, so the producer's retry
                # or the dead letter's replay closes it again rather than meeting a closed draft
                if before is not None:
                    self.state[event.case_id] = before
                raise

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

    def check_size(self, event: Any) -> None:
        """Before anything is parsed or recorded: an event over max_event_bytes is refused whole (its
        dead letter keeps it, in the media store when too large to carry)."""
        size = len(event.value or b"") + len(event.message.key or b"")
        if size > self.settings.max_event_bytes:
            raise intake.Rejected("event_too_large", f"{size} bytes, limit max_event_bytes="
                                  f"{self.settings.max_event_bytes}; send large media by path or URL")

    async def admit(self, case: DisputeCase, notes: list[str], partition: int) -> None:
        digest = case.digest()
        state = self.state.get(case.case_id) or {}
        if digest in (state.get("digest"), self.admitting.get(case.case_id)):
            log.info("case %s submitted again unchanged; ignored", case.case_id)
            return
        if state.get("digest") or case.case_id in self.admitting:
            raise intake.Rejected("case_already_submitted", f"case {case.case_id} was already submitted "
                                  "with different content; use a new case_id")
        problems = [*notes, *intake.admit(case, self.settings)]
        self.admitting[case.case_id] = digest  # the other ingest actors may meet the same case meanwhile
        try:
            value = await self.case_file(case, problems, digest)
            await self.hand_on(case.case_id, value, partition)
        finally:
            self.admitting.pop(case.case_id, None)
        # recorded only once the case is on its way: after a failed hand-off a resubmission (or the
        # dead letter's replay) is admitted, not ignored as already submitted
        self.state[case.case_id] = {"digest": digest}

    async def case_file(self, case: DisputeCase, problems: list[str], digest: str) -> bytes:
        """The case file's JSON with inline media moved to the media store, within max_case_bytes: the
        rest of max_event_bytes is room for what the stages add, so no later hand-off outgrows it."""
        case_file = CaseFile(case=await self.claim_check(case), received_at=now(), problems=problems,
                             backend=self.backend, digest=digest)
        value = case_file.model_dump_json().encode()
        if len(value) > self.settings.max_case_bytes:
            raise intake.Rejected("case_too_large", f"the case file is {len(value)} bytes with its media in the "
                                  f"media store, limit max_case_bytes={self.settings.max_case_bytes}")
        return value

    async def claim_check(self, case: DisputeCase) -> DisputeCase:
        """Inline media (data_base64) put in the media store and referenced by its sha256 (``stored``);
        a ``stored`` reference from outside must name an object the store holds."""
        data = case.model_dump(mode="json", exclude_none=True)
        moved = False
        for round_ in data["rounds"]:
            for item in round_["items"]:
                media = item.get("media") or {}
                if "data_base64" in media:
                    media["stored"] = await self.store.put(base64.b64decode(media.pop("data_base64")))
                    moved = True
                elif "stored" in media and not await self.store.has(media["stored"]):
                    raise intake.Rejected("invalid_case", f"evidence {item['id']}: media stored as "
                                          f"{media['stored'][:12]}… is not in the media store")
        return DisputeCase.model_validate(data) if moved else case

    async def hand_on(self, case_id: str, value: bytes, partition: int) -> None:
        self.in_flight.add(case_id, partition)  # before the hand-off, which yields to the other stages
        try:
            await self.results.hand_on(case_id, "ready", value, self.ready)
        except BaseException as err:
            self.in_flight.discard(case_id)
            if isinstance(err, OutputTooLarge):  # refused by a broker whose limit is below max_event_bytes
                raise intake.Rejected("case_too_large", err.detail) from err
            raise
