"""Events platforms produce to ``disputes.events``: a whole case, or a case built up incrementally."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import AwareDatetime, Field, TypeAdapter

from .case import SCHEMA_VERSION, CaseId, CaseMetadata, DisputeCase, EvidenceRound, GroundTruthVotes, Strict


class EventBase(Strict):
    schema_version: Literal[1] = SCHEMA_VERSION
    event_id: str | None = Field(None, max_length=128, description="producer's id; repeats are ignored")
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


class OutcomeReported(EventBase):
    """On ``disputes.outcomes``: how a case was finally decided (the platform's real jury or an
    appeal). It feeds verdict drift and the precedent base."""

    type: Literal["outcome"] = "outcome"
    case_id: CaseId
    votes: GroundTruthVotes
    decided_at: AwareDatetime | None = None


DisputeEvent = Annotated[
    Union[CaseSubmitted, CaseOpened, EvidenceSubmitted, EvidenceClosed], Field(discriminator="type")
]
dispute_event = TypeAdapter(DisputeEvent)
