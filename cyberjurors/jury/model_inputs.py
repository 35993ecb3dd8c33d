"""The structured input of each model call.

Prompts are rendered from these; the offline and scripted backends read them directly, so agent
logic can be tested without parsing prompt text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..media import Frame
from ..personas import Persona
from ..schemas import AppealBrief, Argument, Ballot, Clue, DisputeCase, EvidenceItem, Focus, Party, PrecedentRef, RoundSummary


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
