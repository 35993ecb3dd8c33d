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
    AppealFiled,
    CaseOpened,
    CaseSubmitted,
    DisputeEvent,
    EvidenceClosed,
    EvidenceSubmitted,
    OutcomeReported,
    dispute_event,
)
from .reasoning import (
    ESCALATION_REASONS,
    AppealBrief,
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
    Escalation,
    EscalationReason,
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

# after .reasoning, which it builds on
from .jury import STANDINGS, JuryComposition, JurorScore, JurySeat, QualificationMode, Standing  # noqa: E402

__all__ = [name for name in dir() if not name.startswith("_")]
