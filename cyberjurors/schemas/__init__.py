"""Event and domain models (pydantic v2). Everything crossing Kafka is one of these."""

from .case import (
    CATEGORIES,
    JURY_SIZE,
    SCHEMA_VERSION,
    CaseMetadata,
    Category,
    DisputeCase,
    EvidenceItem,
    EvidenceRound,
    GroundTruthVotes,
    MediaRef,
    Party,
    Votes,
    now,
)
from .events import (
    CaseOpened,
    CaseSubmitted,
    DisputeEvent,
    EvidenceClosed,
    EvidenceSubmitted,
    OutcomeReported,
    dispute_event,
)
from .reasoning import (
    Argument,
    ArgumentDraft,
    Ballot,
    BallotDraft,
    BudgetStop,
    CandidateSentences,
    CaseFile,
    Clue,
    ClueChain,
    DeadLetter,
    Focus,
    JuryRound,
    JustificationDraft,
    Perception,
    PrecedentRef,
    Precedents,
    RoundSummary,
    RoundSummaryDraft,
    Selection,
    SentenceVotes,
    Usage,
    Verdict,
    Verification,
    VerificationDraft,
)

__all__ = [name for name in dir() if not name.startswith("_")]
