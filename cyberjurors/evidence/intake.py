"""Admission of dispute events: parse, check limits and media references, fold incremental events.

Everything here either returns something the jury can work on or raises ``Rejected`` with a
short machine-readable reason (one of ``errors.REJECTIONS``); the intake handler
(``streams/intake.py``) turns a rejection into a dead letter that is never replayed.
"""

from __future__ import annotations

import codecs
import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import EvidenceSettings
from ..errors import CyberJurorsError, Reason, validation_summary
from ..schemas import (
    CaseMetadata,
    CaseOpened,
    CaseSubmitted,
    DisputeCase,
    EvidenceClosed,
    EvidenceRound,
    EvidenceSubmitted,
    GroundTruthVotes,
    dispute_event,
)
from ..schemas.events import DisputeEvent
from .media import MediaRejected, check_reference
from .safety import jury_addressed


class Rejected(CyberJurorsError, ValueError):
    """Input refused at intake; ``reason`` (the kind) is one of ``errors.REJECTIONS``. Never
    replayable: the same input would be refused again."""

    replayable = False

    def __init__(self, reason: str, detail: str):
        super().__init__(detail, kind=Reason(reason), message=f"{reason}: {detail}")

    @property
    def reason(self) -> Reason:
        return Reason(self.kind)


class Duplicate(CyberJurorsError):
    """An event already applied: dropped, and noted on the case."""

    kind = "duplicate"


# pydantic error types that have a reason of their own (schemas/case.py raises the custom ones)
_TYPE_REASONS = {
    "timezone_aware": "naive_timestamp",
    "delivered_before_ordered": "delivered_before_ordered",
    "unknown_currency": "unknown_currency",
}
_AMOUNT_BOUNDS = ("greater_than_equal", "less_than_equal", "finite_number")


def _reason(err: ValidationError) -> str:
    for e in err.errors():
        loc = [str(x) for x in e["loc"]]
        if e["type"] == "json_invalid":
            return "invalid_json"
        if e["type"] in _TYPE_REASONS:
            return _TYPE_REASONS[e["type"]]
        if loc and loc[-1] == "currency" and e["type"] != "missing":  # "eur", "EURO": not a code at all
            return "unknown_currency"
        if loc and loc[-1] == "order_amount" and e["type"] in _AMOUNT_BOUNDS:
            return "amount_out_of_range"
        if e["type"] in ("union_tag_invalid", "union_tag_not_found", "model_attributes_type"):
            return "unknown_event_type"
        if e["type"] == "missing" and loc and loc[-1] == "case_id":
            return "missing_case_id"
        if loc and loc[-1] == "schema_version":
            return "unsupported_schema_version"
        if "ground_truth" in loc:
            return "invalid_votes"
    return "invalid_event"


def parse_event(raw: bytes) -> DisputeEvent:
    raw = checked_json(raw)
    try:
        return dispute_event.validate_json(raw)
    except ValidationError as err:
        raise Rejected(_reason(err), _summary(err)) from err


# the events' tags, which pydantic puts first in an error's path ("case.case.metadata" otherwise)
_TAGS = frozenset(
    m.model_fields["type"].default for m in (CaseSubmitted, CaseOpened, EvidenceSubmitted, EvidenceClosed)
)
_FOREIGN_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)  # UTF-32 LE first: it begins with UTF-16 LE's


def _summary(err: ValidationError) -> str:
    return validation_summary(err, tags=_TAGS)


class _DuplicateKey(CyberJurorsError):
    """Raised out of json's object_pairs_hook, to stop at the first key seen twice."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen.add(key)
    # the values are not wanted: only the check


def checked_json(raw: bytes | None) -> bytes:
    """The JSON bytes an event or outcome is read from: a UTF-8 byte-order mark some editors write
    is taken off (``cyberjurors produce`` reads files the same way); a UTF-16 or UTF-32 one is
    refused in words, and so is an object with the same key twice (JSON readers differ on which one
    counts, so the platform and the jury could read different cases), and a record with no value at
    all (a Kafka tombstone: our input topics are not compacted, so it deletes nothing and says
    nothing). Anything else wrong is left to the schema's own parse, which says what."""
    if raw is None:
        raise Rejected("invalid_json", "the message has no value (a Kafka tombstone): send the event as JSON")
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8) :]
    for bom, name in _FOREIGN_BOMS:
        if raw.startswith(bom):
            raise Rejected("invalid_json", f"the message starts with a {name} byte-order mark: events are UTF-8 JSON")
    try:
        json.loads(raw, object_pairs_hook=_unique_keys)
    except _DuplicateKey as dup:
        raise Rejected(
            "duplicate_json_key",
            f'the key "{dup.key[:60]}" appears twice in one JSON object; readers differ on which one counts',
        ) from None
    except (ValueError, RecursionError):
        pass  # not JSON, or nested too deeply: the schema's parse says so in its words
    return raw


def check_size(rounds: list[EvidenceRound], settings: EvidenceSettings) -> None:
    """Rounds per party, items and the case's text together within their settings (what a jury reads grows with each)."""
    for party in ("buyer", "seller"):
        count = sum(r.party == party for r in rounds)
        if count > settings.intake_limits.max_rounds_per_party:
            raise Rejected(
                "too_many_rounds", f"{count} {party} rounds, limit {settings.intake_limits.max_rounds_per_party}"
            )
    items = sum(len(r.items) for r in rounds)
    if items > settings.intake_limits.max_case_items:
        raise Rejected("too_many_items", f"{items} evidence items, limit {settings.intake_limits.max_case_items}")
    chars = sum(len(i.text or "") for r in rounds for i in r.items)
    if chars > settings.intake_limits.max_case_text_chars:
        raise Rejected(
            "case_text_too_long",
            f"{chars} characters of evidence text, limit {settings.intake_limits.max_case_text_chars}",
        )


def admit(case: DisputeCase, settings: EvidenceSettings) -> list[str]:
    """Check configured limits and media references; return problems worth noting on the verdict."""
    check_size(case.rounds, settings)
    items = case.items()
    media = [i for i in items if i.media is not None]
    if len(media) > settings.intake_limits.max_media_items:
        raise Rejected("too_many_media", f"{len(media)} media items, limit {settings.intake_limits.max_media_items}")
    for round_ in case.rounds:
        for item in round_.items:
            if item.text and len(item.text) > settings.intake_limits.max_text_chars:
                raise Rejected(
                    "text_too_long",
                    f"evidence {item.id}: {len(item.text)} characters, limit {settings.intake_limits.max_text_chars}",
                )
            if item.media is not None:
                try:
                    check_reference(item.kind, item.media, settings)
                except MediaRejected as err:
                    raise Rejected(err.reason, f"evidence {item.id}: {err.detail}") from err
    return jury_addressed(case)


class Draft(BaseModel):
    """A case being assembled from incremental events, kept in the intake table."""

    model_config = ConfigDict(extra="forbid")

    case_id: str
    metadata: CaseMetadata
    ground_truth: GroundTruthVotes | None = None
    rounds: list[EvidenceRound] = Field(default_factory=list)
    event_ids: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    closed: bool = False

    def to_case(self) -> DisputeCase:
        rounds = sorted(self.rounds, key=lambda r: (r.round, r.party != "buyer"))
        try:
            return DisputeCase(
                case_id=self.case_id, metadata=self.metadata, rounds=rounds, ground_truth=self.ground_truth
            )
        except ValidationError as err:
            raise Rejected("invalid_case", _summary(err)) from err


def fold(
    draft: Draft | None,
    event: CaseOpened | EvidenceSubmitted | EvidenceClosed,
    settings: EvidenceSettings | None = None,
) -> Draft:
    """Apply one incremental event. Raises Duplicate for a repeat, Rejected for one that cannot apply.
    With ``settings``, a round that would take the draft past the case caps is refused on arrival,
    so a draft never outgrows what admission would take."""
    if draft is not None and event.event_id and event.event_id in draft.event_ids:
        raise Duplicate(f"event {event.event_id} already applied")
    if isinstance(event, CaseOpened):
        if draft is not None:
            raise Rejected("case_already_open", f"case {event.case_id} was opened before")
        draft = Draft(case_id=event.case_id, metadata=event.metadata, ground_truth=event.ground_truth)
    elif draft is None:
        raise Rejected("unknown_case", f"{event.type} for case {event.case_id}, which was never opened")
    elif draft.closed:
        if isinstance(event, EvidenceClosed):
            raise Duplicate(f"case {event.case_id} already closed")
        raise Rejected("case_closed", f"evidence for case {event.case_id} after its evidence was closed")
    elif isinstance(event, EvidenceSubmitted):
        draft = _add_round(draft, event.evidence, settings)
    else:
        if not draft.rounds:
            raise Rejected("no_evidence", f"case {event.case_id} closed without any evidence")
        draft = draft.model_copy(update={"closed": True})
    if event.event_id:
        draft = draft.model_copy(update={"event_ids": [*draft.event_ids, event.event_id]})
    return draft


def _add_round(draft: Draft, new: EvidenceRound, settings: EvidenceSettings | None) -> Draft:
    same = next((r for r in draft.rounds if (r.party, r.round) == (new.party, new.round)), None)
    if same is not None and same.items == new.items:  # a resend, perhaps restamped
        raise Duplicate(f"the same {new.party} round {new.round} was submitted twice")
    if same is not None:
        # the first version stands: a resend under at-least-once delivery cannot say which is newer
        raise Rejected(
            "round_changed",
            f"{new.party} round {new.round} of case {draft.case_id} was already "
            "submitted with other items; the first version stands",
        )
    clash = {i.id for r in draft.rounds for i in r.items} & {i.id for i in new.items}
    if clash:
        raise Rejected("duplicate_evidence_id", f"evidence ids {sorted(clash)} already used in case {draft.case_id}")
    if settings is not None:
        check_size([*draft.rounds, new], settings)
    return draft.model_copy(update={"rounds": [*draft.rounds, new]})


__all__ = ["CaseSubmitted", "Draft", "Duplicate", "Rejected", "admit", "check_size", "fold", "parse_event"]
