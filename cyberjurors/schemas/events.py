"""Events platforms produce to ``disputes.events``: a whole case, or a case built up incrementally."""

from __future__ import annotations

import unicodedata
from typing import Annotated, Literal

from pydantic import AfterValidator, AwareDatetime, Field, TypeAdapter, model_validator

from .case import (
    JURY_SIZE,
    SCHEMA_VERSION,
    CaseId,
    CaseMetadata,
    DisputeCase,
    EvidenceItem,
    EvidenceRound,
    GroundTruthVotes,
    Party,
    Strict,
    Votes,
)


def _no_hidden_characters(text: str) -> str:
    # an event id goes into log lines and the verdict's notes: a line break, an ESC or a right-to-left
    # override in it would forge or hide what a reader sees there
    hidden = sorted({f"U+{ord(c):04X}" for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")})
    if hidden:
        raise ValueError(f"control or format characters ({', '.join(hidden[:5])}) are not allowed in an id")
    return text


EventId = Annotated[str, Field(max_length=128), AfterValidator(_no_hidden_characters)]


class EventBase(Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: EventId | None = Field(
        None, description="producer's id, without control or format characters; repeats are ignored"
    )
    sent_at: AwareDatetime | None = None


class CaseSubmitted(EventBase):
    """The whole case in one event."""

    type: Literal["case"] = "case"
    case: DisputeCase

    @property
    def case_id(self) -> str:
        return self.case.case_id


class CaseOpened(EventBase):
    type: Literal["case_opened"] = "case_opened"
    case_id: CaseId
    metadata: CaseMetadata
    ground_truth: GroundTruthVotes | None = None


class EvidenceSubmitted(EventBase):
    type: Literal["evidence_submitted"] = "evidence_submitted"
    case_id: CaseId
    evidence: EvidenceRound


class EvidenceClosed(EventBase):
    """No more evidence: the case goes to the jury."""

    type: Literal["evidence_closed"] = "evidence_closed"
    case_id: CaseId


class DecidedBy(Strict):
    """The person whose human-panel decision an outcome carries, as the console proved them."""

    reviewer: EventId = Field(min_length=1, description="who decided: a console user, an SSO name, or `service`")
    role: Literal["reviewer", "supervisor"] = Field(description="the role they decided in")
    override_of: EventId | None = Field(None, description="the event_id of the decision this one overrides")


class OutcomeReported(EventBase):
    """On ``disputes.outcomes``: how a case was finally decided (the platform's real jury, or the
    human panel an escalated case went to). It feeds verdict drift and the precedent base."""

    type: Literal["outcome"] = "outcome"
    case_id: CaseId
    votes: Votes = Field(
        description=f"the deciding jury's votes: {JURY_SIZE} in all, except from a human panel "
        "(source human_panel), whose size is its own"
    )
    decided_at: AwareDatetime | None = None
    source: Literal["platform_jury", "human_panel"] | None = Field(
        None, description="who decided: the platform's jury, or the human panel an escalation went to"
    )
    escalation_id: str | None = Field(None, max_length=64, description="the escalation a human panel answers")
    decided_by: DecidedBy | None = Field(None, description="a human panel's decision: who made it")
    signature: str | None = Field(
        None,
        max_length=128,
        description="a human panel's decision: `hmac-sha256:<key id>:<hex>` over the rest of the "
        "event, by the console's outcome_signing_key; workers refuse a human_panel outcome without a valid one",
    )

    @model_validator(mode="after")
    def _jury_size(self) -> OutcomeReported:
        if self.source != "human_panel" and self.votes.total != JURY_SIZE:
            raise ValueError(
                f"votes: the platform's jury has {JURY_SIZE} votes, got {self.votes.total} (a human "
                "panel of another size says source: human_panel)"
            )
        if self.votes.total < 1:
            raise ValueError("votes: a human panel's votes must count at least one vote")
        return self


MAX_GROUNDS_CHARS = 20_000


class AppealFiled(EventBase):
    """On ``disputes.appeals``: the losing party appeals the first-instance verdict ``verdict_id``
    within ``appeal_window_s`` of it, with grounds and optionally new evidence (checked like any
    evidence). At most one appeal per case; the second instance's verdict is final."""

    type: Literal["appeal"] = "appeal"
    case_id: CaseId
    appellant: Party
    verdict_id: str = Field(min_length=1, max_length=64, description="the first-instance verdict appealed")
    grounds: str = Field(min_length=1, max_length=MAX_GROUNDS_CHARS, description="the statement of grounds")
    evidence: list[EvidenceItem] = Field(
        default_factory=list,
        description="new evidence, ids new to the case; it joins the case as a round of the appellant's",
    )
    filed_at: AwareDatetime = Field(description="when the party filed it: the window is counted to this")


DisputeEvent = Annotated[CaseSubmitted | CaseOpened | EvidenceSubmitted | EvidenceClosed, Field(discriminator="type")]
dispute_event = TypeAdapter(DisputeEvent)
