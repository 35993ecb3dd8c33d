"""The structured input of each model call.

Prompts are rendered from these; the offline and scripted backends read them directly, so agent
logic can be tested without parsing prompt text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..evidence.media import Frame
from ..schemas import (
    AppealBrief,
    Argument,
    Ballot,
    CaseMetadata,
    Clue,
    DisputeCase,
    EvidenceItem,
    Focus,
    LetterStatement,
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
class VerdictBasis:
    """What the verdict's justification may rest on and what the majority said: the fields the
    verifier's, the summariser's revision's and a JURIS drafter's inputs begin with."""

    case: DisputeCase
    focus: Focus | None
    clues: list[Clue] | None
    """O_II; None: stage II did not run, the parties' evidence items are the sources."""
    guidelines: list[PrecedentRef]
    """the guidelines the majority cited"""
    winner: Party
    votes: Votes
    majority: list[Ballot]


@dataclass(frozen=True)
class VerifyTask(VerdictBasis):
    """The verifier's input: the justification (draft ``turn``) and what it may rest on."""

    justification: str
    turn: int
    feedback: list[str]
    """the feedback of earlier turns, oldest first"""


@dataclass(frozen=True)
class ReviseTask(VerdictBasis):
    """The summariser revising the justification after a Reject, with all the feedback so far."""

    justification: str
    feedback: list[str]
    untraceable: list[str]
    """the claims the last Reject named"""


@dataclass(frozen=True)
class DraftTask(VerdictBasis):
    """JURIS: one drafter proposing candidate sentences for the verdict's justification."""

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


@dataclass(frozen=True)
class LetterFacts:
    """What code knows about a verdict for one party's letter: the decision, the remedy, what comes next."""

    party: Party
    winner: Party
    votes: Votes
    remedy: str
    """the buyer's requested remedy (party-authored), granted when the buyer won"""
    appeal_until: datetime | None
    """instance 1 with appeals on: the losing party may appeal until then"""
    final: bool
    under_review: bool
    """the verdict was escalated: a human panel reviews it before it stands"""
    confidential: int = 0
    """the other party's private items the letter may say exist (letter_private_evidence = mention)"""

    @property
    def won(self) -> bool:
        return self.party == self.winner

    @property
    def granted(self) -> bool:
        return self.winner == "buyer"


@dataclass(frozen=True)
class LetterSource:
    """One of the verdict's clues a letter may describe: the clue, and the evidence item it was found in
    as the party submitted it (None when the case no longer holds it)."""

    clue: Clue
    item: EvidenceItem | None
    submitted_at: datetime | None
    cited: bool
    """the majority cited it (else the justification only names it)"""


@dataclass(frozen=True)
class LetterTask:
    """A letter to one party: only what it may say. The other party's private evidence is not in it
    unless the policy discloses it, so neither a prompt nor the stand-in can repeat it."""

    case_id: str
    metadata: CaseMetadata
    facts: LetterFacts
    locale: str
    sources: list[LetterSource]
    guidelines: list[PrecedentRef]
    """the guidelines the majority cited whose text the record holds"""
    cited_guidelines: list[str]
    """every guideline id@version the verdict cites"""
    submitted: dict[str, int]
    """party -> evidence items the letter may count (the other party's withheld ones left out)"""


@dataclass(frozen=True)
class LetterVerifyTask:
    """The verifier's input on a letter: its statements and the sources the letter was given."""

    letter: LetterTask
    statements: list[LetterStatement]
