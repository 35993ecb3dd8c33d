"""The structured input of each model call.

Prompts are rendered from these; the offline and scripted backends read them directly, so agent
logic can be tested without parsing prompt text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..evidence.media import Frame
from ..schemas import (
    AppealBrief,
    Argument,
    Ballot,
    Clue,
    DisputeCase,
    EvidenceItem,
    Focus,
    Party,
    PrecedentRef,
    RoundSummary,
    Votes,
)
from ..schemas.personas import Persona


@dataclass(frozen=True)
class FocusTask:
    case: DisputeCase


@dataclass(frozen=True)
class SelectTask:
    case: DisputeCase
    focus: Focus
    party: Party
    candidates: list[EvidenceItem]
    chain: list[Clue]


@dataclass(frozen=True)
class PerceiveTask:
    case: DisputeCase
    focus: Focus
    party: Party
    item: EvidenceItem
    chain: list[Clue]
    frames: list[Frame] = field(default_factory=list)


@dataclass(frozen=True)
class JurorTask:
    case: DisputeCase
    focus: Focus | None
    clues: list[Clue] | None
    """None: stage II did not run, the juror saw every item at once."""
    juror: int
    persona: Persona
    memory: list[PrecedentRef]
    round: int
    neighbours: list[Ballot]
    summary: RoundSummary | None
    appeal: AppealBrief | None = None
    """the second instance: the appeal it judges"""


@dataclass(frozen=True)
class QualifyTask:
    """A persona deciding one mock case alone (the qualification gate): a labelled case of the
    precedent base, as its stored summary; never its outcome."""

    case_id: str
    category: str
    summary: str
    juror: int
    persona: Persona


@dataclass(frozen=True)
class SummaryTask:
    case: DisputeCase
    round: int
    ballots: list[Ballot]


@dataclass(frozen=True)
class AdvocateTask:
    case: DisputeCase
    focus: Focus | None
    clues: list[Clue] | None
    party: Party
    turn: int
    debate: list[Argument]


@dataclass(frozen=True)
class JudgeTask:
    case: DisputeCase
    focus: Focus | None
    clues: list[Clue] | None
    debate: list[Argument]


@dataclass(frozen=True)
class VerifyTask:
    """The verifier's input: the justification (draft ``turn``) and what it may rest on."""

    case: DisputeCase
    focus: Focus | None
    clues: list[Clue] | None
    """O_II; None: stage II did not run, the parties' evidence items are the sources."""
    guidelines: list[PrecedentRef]
    """the guidelines the majority cited"""
    winner: Party
    votes: Votes
    majority: list[Ballot]
    justification: str
    turn: int
    feedback: list[str]
    """the feedback of earlier turns, oldest first"""


@dataclass(frozen=True)
class ReviseTask:
    """The summariser revising the justification after a Reject, with all the feedback so far."""

    case: DisputeCase
    focus: Focus | None
    clues: list[Clue] | None
    guidelines: list[PrecedentRef]
    winner: Party
    votes: Votes
    majority: list[Ballot]
    justification: str
    feedback: list[str]
    untraceable: list[str]
    """the claims the last Reject named"""


@dataclass(frozen=True)
class DraftTask:
    """JURIS: one drafter proposing candidate sentences for the verdict's justification."""

    case: DisputeCase
    focus: Focus | None
    clues: list[Clue] | None
    guidelines: list[PrecedentRef]
    winner: Party
    votes: Votes
    majority: list[Ballot]
    drafter: int
    max_sentences: int


@dataclass(frozen=True)
class SentenceVoteTask:
    """JURIS: one juror voting on the candidate sentences (id -> sentence)."""

    case: DisputeCase
    focus: Focus | None
    clues: list[Clue] | None
    juror: int
    persona: Persona
    winner: Party
    votes: Votes
    candidates: dict[str, str]


@dataclass(frozen=True)
class EditTask:
    """JURIS: the editor consolidating the sentences the jurors accepted (id -> sentence)."""

    case: DisputeCase
    winner: Party
    votes: Votes
    selected: dict[str, str]
