"""disputes.events -> disputes.intake: admit whole cases, fold incremental events into a draft
until the evidence closes, and refuse what cannot be judged (``intake.Rejected``).

The ``intake`` table holds, per case_id, ``{"draft": Draft json}`` while incremental events
arrive and ``{"digest": ...}`` once the case has gone to the jury. The digest, computed here
once, travels on the CaseFile (verdict ids and the passive-evidence cache read it).

Evidence (or its close) for a case not yet opened is held, original bytes and all, as
``{"held": [...]}`` under the case_id, and folded in with a note when ``case_opened`` arrives; held
draft and admitted entries carry ``expiry.stamp``'s ``at`` and ``partition``, so a timer
(``schedule_expiry``) dead-letters what waited too long (``case_never_opened``, ``draft_expired``)
and forgets it, and forgets an admitted case after ``state_retention_s`` with its other state.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Collection, MutableMapping
from dataclasses import dataclass
from typing import Any

import faust

from ..config import Settings
from ..evidence import intake
from ..evidence.media_store import MediaStore, StoreError
from ..evidence.stores import open_store
from ..observability import metrics, tracing
from ..schemas import CaseFile, CaseOpened, CaseSubmitted, DisputeCase, EvidenceClosed, EvidenceSubmitted, now
from ..schemas.events import DisputeEvent
from ..state import expiry
from ..state.intake import IntakeTable
from ..state.results import StageResults
from . import cloudevents
from .dead_letters import DeadLetters, OutputTooLarge, Sender, bug, hand_on

log = logging.getLogger("cyberjurors.streams")


class Intake:
    def __init__(
        self,
        settings: Settings,
        backend: str,
        state: MutableMapping[str, Any],
        results: StageResults,
        sent_to: Sender,
        dead_letters: DeadLetters,
        in_flight: metrics.CasesInFlight,
        clock: expiry.Clock = time.time,
    ):
        self.settings = settings
        self.backend = backend
        self.table = IntakeTable(state)
        self.results = results
        self.sent_to = sent_to
        self.dead_letters = dead_letters
        self.in_flight = in_flight
        self.store = open_store(settings, clock)
        self.admitting: dict[str, str] = {}  # case_id -> digest while its hand-off is under way
        self.clock = clock
        self.held_total: int | None = None  # events held on this worker; counted from the table when None

    async def __call__(self, event: Any) -> None:
        with tracing.consuming(event, "intake"):
            await self.handle(event)

    async def handle(self, event: Any) -> None:
        try:
            self.check_size(event)
            headers = getattr(event, "headers", None)
            cloudevents.refuse_structured(headers)
            parsed = intake.parse_event(event.value)
            tracing.name_case(parsed.case_id)
            if problem := key_problem(event.message.key, parsed.case_id):
                raise intake.Rejected("key_mismatch", problem)
            seen = cloudevents.received(headers, parsed)  # None: no ce_ headers, taken as before
            if seen is not None:
                self.check_reuse(parsed.case_id, seen)
            await self.take(parsed, event.message.partition, event.message)
            if seen is not None:
                self.table.note_cloudevent(parsed.case_id, seen.key, seen.digest, event.message.partition)
        except intake.Rejected as err:  # rejected input: it would be rejected again
            await self.dead_letters.write(event, "intake", err.reason, err.detail, replayable=err.replayable)
        except Exception as err:  # a bug must cost one event (kept in the DLQ to replay once fixed), not the worker
            log.exception("intake failed on offset %s", event.message.offset)
            await self.dead_letters.write(event, "intake", "intake_failed", bug(err), replayable=True)

    def check_reuse(self, case_id: str, seen: cloudevents.Received) -> None:
        """A CloudEvents id names one event: the same id again with the same content is a redelivery
        (taken, and ignored or folded as a repeat is), with other content a producer's bug, refused
        rather than let one of the two pass for the other downstream."""
        before = self.table.cloudevent(case_id, seen.key)
        if before is not None and before != seen.digest:
            raise intake.Rejected(
                "ce_id_reused",
                f"ce_id {seen.id[:120]!r} from ce_source {seen.source[:120]!r} was already taken for another "
                f"event of case {case_id}; a CloudEvent's id is unique within its source",
            )

    async def take(self, event: DisputeEvent, partition: int, message: Any) -> None:
        if isinstance(event, CaseSubmitted):
            state = self.table.entry(event.case_id)
            if (open_draft := self.table.draft(event.case_id)) is not None:  # admitted, it would replace its evidence
                raise intake.Rejected(
                    "case_already_open",
                    f"case {event.case_id} is open for incremental events "
                    f"({len(open_draft.rounds)} rounds so far): close it with evidence_closed, or "
                    "send the whole case under a new case_id",
                )
            await self.admit(event.case, [], partition)
            if "held" in state:
                await self.refuse_held(event.case_id, state["held"])
            return
        before = self.table.entry(event.case_id)
        draft = await self.fold(event, partition, message)
        if draft is not None and draft.closed:
            try:
                await self.admit(draft.to_case(), draft.notes, partition)
            except BaseException:
                # the close did not go through: the draft is left as it was, so the producer's retry
                # or the dead letter's replay closes it again rather than meeting a closed draft
                if before:
                    self.table.restore(event.case_id, before)
                raise

    async def fold(
        self, event: CaseOpened | EvidenceSubmitted | EvidenceClosed, partition: int, message: Any
    ) -> intake.Draft | None:
        """Apply an incremental event to its case's draft in the table; None for a repeat (noted on the
        draft), for evidence held until its case opens, and for a repeated close of a judged case."""
        state = self.table.entry(event.case_id)
        if state.get("digest"):
            if isinstance(event, EvidenceClosed):  # the producer's retry: the case already went on closed
                log.info("case %s: evidence_closed repeated after the case went to the jury; ignored", event.case_id)
                return None
            raise intake.Rejected("case_closed", f"case {event.case_id} has already gone to the jury")
        if "draft" not in state and not isinstance(event, CaseOpened):
            await self.hold(event, state, partition, message)
            return None
        draft = self.table.draft(event.case_id)
        try:
            draft = intake.fold(draft, event, self.settings)
        except intake.Duplicate as dup:
            log.info("case %s: %s", event.case_id, dup)
            if draft is not None:
                draft.notes.append(f"duplicate event ignored: {dup}")
                self.keep(draft, partition)
            return None
        if "held" in state:
            draft = await self.release(draft, state["held"])
        self.keep(draft, partition)
        return draft

    def keep(self, draft: intake.Draft, partition: int) -> None:
        self.table.keep_draft(draft, self.clock(), partition)

    async def hold(self, event: DisputeEvent, state: dict, partition: int, message: Any) -> None:
        """Keep an event for a case not yet opened, within the caps; past them, a replayable dead letter."""
        held = list(state.get("held", []))
        total = self.count_held()
        if len(held) >= self.settings.early_evidence.per_case or total >= self.settings.early_evidence.total:
            limit = (
                (
                    f"{len(held)} held for this case, limit early_evidence.per_case="
                    f"{self.settings.early_evidence.per_case}"
                )
                if len(held) >= self.settings.early_evidence.per_case
                else f"{total} held on this worker, limit early_evidence.total={self.settings.early_evidence.total}"
            )
            await self.dead_letters.write(
                Original.of(message).event(),
                "intake",
                "early_evidence_overflow",
                f"{event.type} for case {event.case_id}, which is not open yet: {limit}; "
                "replay it once the case is open",
                replayable=True,
            )
            return
        at = state.get("at", self.clock())  # the first held event's time: none waits beyond early_evidence.wait_s
        held.append({"message": Original.of(message).as_json(), "type": event.type, "received_at": self.clock()})
        self.table.hold(event.case_id, held, at, partition)
        self.held_total = total + 1
        log.info("case %s: %s held until the case opens", event.case_id, event.type)

    async def release(self, draft: intake.Draft, held: list[dict]) -> intake.Draft:
        """Fold the events held for a case that just opened, in arrival order; one that cannot apply
        is dead-lettered by itself with its original bytes, as it would have been on arrival."""
        for entry in held:
            original = Original.from_json(entry["message"])
            try:
                event = intake.parse_event(original.value)
                # a held event is an incremental one: a CaseSubmitted is never held
                draft = intake.fold(draft, event, self.settings)  # type: ignore[arg-type]
                waited = max(0.0, self.clock() - entry["received_at"])
                draft.notes.append(
                    f"{event.type} (event {event.event_id or original.offset}) arrived before the "
                    f"case was opened; it was held {waited:.0f} s and folded in"
                )
            except intake.Duplicate as dup:
                draft.notes.append(f"duplicate event ignored: {dup}")
            except intake.Rejected as err:
                await self.dead_letters.write(
                    original.event(), "intake", err.reason, err.detail, replayable=err.replayable
                )
        self.held_total = None if self.held_total is None else max(0, self.held_total - len(held))
        return draft

    async def refuse_held(self, case_id: str, held: list[dict]) -> None:
        """Events held for a case that then came whole: the whole case is what was judged, so each
        is dead-lettered (final) with its original bytes rather than forgotten."""
        for entry in held:
            await self.dead_letters.write(
                Original.from_json(entry["message"]).event(),
                "intake",
                "case_closed",
                f"{entry['type']} for case {case_id} came before the case was opened, and the "
                "case was then submitted whole: judged without it",
                replayable=False,
            )
        self.held_total = None

    def count_held(self) -> int:
        if self.held_total is None:
            self.held_total = self.table.held_count()
        return self.held_total

    async def expire(self, partitions: Collection[int] | None = None) -> int:
        """Dead-letter and forget held events past early_evidence.wait_s and drafts past
        intake_draft_ttl_s, and forget admitted cases past state_retention_s (on ``partitions``, when
        given). Returns the number of held or draft cases expired."""
        now_s = self.clock()
        cases = 0
        for case_id, entry in self.table.due(now_s - self.settings.early_evidence.wait_s, partitions):
            if "held" in entry:
                for held in entry["held"]:
                    await self.dead_letters.write(
                        Original.from_json(held["message"]).event(),
                        "intake",
                        "case_never_opened",
                        f"{held['type']} for case {case_id}: the case was not opened within "
                        f"early_evidence.wait_s={self.settings.early_evidence.wait_s:g}",
                        replayable=True,
                    )
                cases += self.forget(case_id, entry)
        for case_id, entry in self.table.due(now_s - self.settings.intake_draft_ttl_s, partitions):
            if "draft" in entry:
                draft = intake.Draft.model_validate(entry["draft"])
                await self.dead_letters.write(
                    Original.of_draft(draft, self.settings, entry.get("partition")),
                    "intake",
                    "draft_expired",
                    expired_detail(draft, self.settings),
                    replayable=False,
                )  # the same events would be left open again
                cases += self.forget(case_id, entry)
        for case_id, entry in self.table.due(now_s - self.settings.state_retention_s, partitions):
            if "digest" in entry:  # an admitted case: nothing to tell anyone, its verdict is long out
                self.forget(case_id, entry)
        self.held_total = None  # recounted from the table on the next hold
        return cases

    def forget(self, case_id: str, entry: dict) -> int:
        return int(self.table.forget(case_id, entry))  # the letters are out

    def check_size(self, event: Any) -> None:
        """Before anything is parsed or recorded: an event over max_event_bytes is refused whole (its
        dead letter keeps it, in the media store when too large to carry)."""
        size = len(event.value or b"") + len(event.message.key or b"")
        if size > self.settings.intake_limits.max_event_bytes:
            raise intake.Rejected(
                "event_too_large",
                f"{size} bytes, limit max_event_bytes={self.settings.intake_limits.max_event_bytes}; send large media by path or URL",
            )

    async def admit(self, case: DisputeCase, notes: list[str], partition: int) -> None:
        digest = case.digest()
        state = self.table.entry(case.case_id)
        if digest in (state.get("digest"), self.admitting.get(case.case_id)):
            self.ignore_unchanged(case.case_id, state)
            return
        if state.get("digest") or case.case_id in self.admitting:
            raise intake.Rejected(
                "case_already_submitted",
                f"case {case.case_id} was already submitted with different content; use a new case_id",
            )
        problems = [*notes, *intake.admit(case, self.settings)]
        self.admitting[case.case_id] = digest  # the other intake actors may meet the same case meanwhile
        try:
            value = await self.case_file(case, problems, digest)
            await self.hand_on(case.case_id, value, partition)
        finally:
            self.admitting.pop(case.case_id, None)
        # recorded only once the case is on its way: after a failed hand-off a resubmission (or the
        # dead letter's replay) is admitted, not ignored as already submitted
        # stamped, so the record expires with the case's other state (state_retention_s, held for the
        # appeal window like its verdict: a resubmission meanwhile is the same case, not a new one)
        hold = max(0.0, self.settings.appeal_window_s - self.settings.state_retention_s)
        self.table.admitted(case.case_id, digest, self.clock() + hold, partition)

    def ignore_unchanged(self, case_id: str, state: dict) -> None:
        """A case submitted again unchanged is ignored (a producer's retry must not judge it twice).
        One that left the jury as a dead letter would then vanish: said at WARNING, with the way
        to have it judged again, which is the letter's replay."""
        letter = state.get("dead_letter")
        if letter is None or self.results.stored(case_id, "verdict") is not None:  # decided after a replay
            log.info("case %s submitted again unchanged; ignored", case_id)
            return
        final = "" if letter.get("replayable") else " --final"
        after = "" if letter.get("replayable") else ", once what made it fail has changed"
        log.warning(
            "case %s submitted again unchanged; ignored: it was already dead-lettered at %s (%s), and "
            "submitting it again does not judge it again; `cyberjurors dlq --replay%s --case %s` does%s",
            case_id,
            letter.get("stage"),
            letter.get("reason"),
            final,
            case_id,
            after,
        )

    async def case_file(self, case: DisputeCase, problems: list[str], digest: str) -> bytes:
        """The case file's JSON with inline media moved to the media store, within max_case_bytes: the
        rest of max_event_bytes is room for what the stages add, so no later hand-off outgrows it."""
        case_file = CaseFile(
            case=await self.claim_check(case), received_at=now(), problems=problems, backend=self.backend, digest=digest
        )
        value = case_file.model_dump_json().encode()
        if len(value) > self.settings.intake_limits.max_case_bytes:
            raise intake.Rejected(
                "case_too_large",
                f"the case file is {len(value)} bytes with its media in the "
                f"media store, limit max_case_bytes={self.settings.intake_limits.max_case_bytes}",
            )
        return value

    async def claim_check(self, case: DisputeCase) -> DisputeCase:
        """Inline media (data_base64) put in the media store as the case's own object and referenced
        by its sha256 (``stored``); a ``stored`` reference from outside must name an object the store
        holds, which becomes the case's own (``adopt``)."""
        data = case.model_dump(mode="json", exclude_none=True)
        items = [item for round_ in data["rounds"] for item in round_["items"]]
        moved = await claim_check(self.store, items, case.case_id, self.settings.intake_limits.max_media_bytes)
        return DisputeCase.model_validate(data) if moved else case

    async def hand_on(self, case_id: str, value: bytes, partition: int) -> None:
        self.in_flight.add(case_id, partition)  # before the hand-off, which yields to the other stages
        try:
            await hand_on(self.results, case_id, "intake", value, self.sent_to)
        except BaseException as err:
            self.in_flight.discard(case_id)
            if isinstance(err, OutputTooLarge):  # refused by a broker whose limit is below max_event_bytes
                raise intake.Rejected("case_too_large", err.detail) from err
            raise


async def claim_check(store: MediaStore, items: list[dict], case_id: str, limit: int) -> bool:
    """Evidence items (as JSON) with inline media moved to the store as the case's own objects and
    named by their sha256 (``stored``), in place; a ``stored`` reference must name an object the store
    holds, and is replaced by the case's own copy of it (``adopt``: the same reference, kept another
    media retention, when it is the case's already), so no other case's erasure can take it away.
    Whether anything changed. ``limit``: the most bytes a copied object may have."""
    moved = False
    for item in items:
        media = item.get("media") or {}
        if "data_base64" in media:
            media["stored"] = await store.put(base64.b64decode(media.pop("data_base64")), case_id)
            moved = True
        elif "stored" in media:
            try:
                own = await store.adopt(media["stored"], case_id, limit)
            except StoreError as err:
                if err.kind == "unavailable":  # the store, not the case: retried like any put
                    raise
                raise intake.Rejected("invalid_case", f"evidence {item['id']}: {err.detail}") from err
            if own is None:
                raise intake.Rejected(
                    "invalid_case",
                    f"evidence {item['id']}: media stored as {media['stored'][:12]}… is not in the media store",
                )
            moved = moved or own != media["stored"]
            media["stored"] = own
    return moved


def key_problem(key: bytes | str | None, case_id: str) -> str | None:
    """Why a message's Kafka key will not do, or None. The key decides the partition, and every
    table keeps a case's state on its case id's partition (intake folding, stored stage results,
    outcomes): a case's events under other keys would be read by other workers, so an event held
    for a case already open elsewhere, or a case admitted twice, could follow."""
    if key is None:
        return f"the message has no Kafka key: key each event by its case_id ({case_id})"
    shown = key.decode(errors="replace") if isinstance(key, bytes) else key
    if key != (case_id.encode() if isinstance(key, bytes) else case_id):
        return (
            f'the Kafka key "{shown[:80]}" is not the case_id "{case_id}": keys decide partitions, and all '
            "of a case's events must be on its case_id's partition; send it again keyed by its case_id"
        )
    return None


def expired_detail(draft: intake.Draft, settings: Settings) -> str:
    rounds = ", ".join(f"{r.party} round {r.round}" for r in draft.rounds) or "no evidence"
    ids = ", ".join(draft.event_ids) or "none given"
    return (
        f"case {draft.case_id}: evidence was never closed within "
        f"intake_draft_ttl_s={settings.intake_draft_ttl_s:g}; received case_opened and {rounds} "
        f"(event ids: {ids}); the letter holds them as an intake draft, "
        "which can be sent again as a whole case"
    )


@dataclass(frozen=True)
class Original:
    """What a dead letter needs of a message (``DeadLetters.write`` reads ``event.message``), kept
    in the table for a held event and rebuilt for the letter when the wait is over."""

    key: str | None
    value: bytes
    topic: str
    partition: int | None
    offset: int | None

    @classmethod
    def of(cls, message: Any) -> Original:
        key = message.key.decode(errors="replace") if isinstance(message.key, bytes) else message.key
        return cls(key, message.value or b"", message.topic, message.partition, message.offset)

    @classmethod
    def of_draft(cls, draft: intake.Draft, settings: Settings, partition: int | None) -> Letter:
        value = draft.model_dump_json().encode()
        return Letter(cls(draft.case_id, value, settings.topic("disputes.events"), partition, None))

    @classmethod
    def from_json(cls, data: dict) -> Original:
        return cls(**{**data, "value": base64.b64decode(data["value"])})

    def as_json(self) -> dict:
        return {
            "key": self.key,
            "value": base64.b64encode(self.value).decode(),
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
        }

    def event(self) -> Letter:
        return Letter(self)


@dataclass(frozen=True)
class Letter:
    message: Original


def schedule_expiry(app: faust.App, intake: Intake) -> None:
    """The intake sweep, in a timer every state_sweep_interval_s, over the partitions this worker holds."""
    events = intake.settings.topic("disputes.events")
    expiry.every(
        app,
        intake.settings.state_sweep_interval_s,
        name="intake",
        sweep=lambda: intake.expire(expiry.active_partitions(app, events)),
    )
