"""Who sat on the jury: each seat's persona and model, its qualification on mock cases when the
qualification gate is on (``jury/qualify.py``), the personas it replaced, and its ballot's weight."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field

from .case import Party, Record

QualificationMode = Literal["off", "report", "replace", "reweight"]
Standing = Literal["qualified", "fails_accuracy", "fails_bias", "fails_both"]
STANDINGS: tuple[Standing, ...] = get_args(Standing)


class JurorScore(Record):
    """A persona's qualification on one model: K mock cases, each decided by one ballot alone."""

    persona: str
    model: str
    buyer_cases: int = Field(description="mock cases the real jury gave the buyer")
    seller_cases: int = Field(description="mock cases the real jury gave the seller")
    buyer_correct: int = Field(description="of the buyer's mock cases, those the persona gave the buyer")
    seller_correct: int = Field(description="of the seller's mock cases, those the persona gave the seller")
    accuracy: float = Field(description="share of mock cases decided as the real jury did")
    seller_share: float = Field(description="share of the persona's mock-case votes for the seller")
    labelled_seller_share: float = Field(description="share of the mock cases the real jury gave the seller")
    bias: float = Field(description="seller_share - labelled_seller_share: above 0 leans to the seller")
    standing: Standing

    @property
    def qualified(self) -> bool:
        return self.standing == "qualified"


class JurySeat(Record):
    seat: int = Field(description="the juror's index: its place on the social graph and its model seat")
    persona: str
    model: str = Field(description="the seat's model (juror_models, round robin)")
    score: JurorScore | None = Field(None, description="the serving persona's qualification; absent when off")
    replaced: JurorScore | None = Field(
        None,
        description="the persona first called to this seat, which failed "
        "qualification and was replaced (its score says why)",
    )
    weight: float = Field(1.0, description="what the seat's ballot counts in the verdict's majority (reweight)")
    vote: Party | None = Field(None, description="on a verdict: the seat's final-round ballot")


class JuryComposition(Record):
    """The jury that deliberated: set on the case file at round 1, on the verdict with each seat's vote."""

    qualification: QualificationMode
    status: Literal["unvetted", "qualified", "not_run"] = Field(
        description="unvetted: qualification off; qualified: every persona was scored (some may have failed: see "
        "the seats); not_run: the gate is on but could not run (note says why), the jury is unvetted"
    )
    note: str | None = None
    mock_cases: list[str] = Field(
        default_factory=list, description="ids of the precedent base's labelled cases each persona decided"
    )
    min_accuracy: float | None = None
    max_bias: float | None = None
    seats: list[JurySeat]
    weighted: dict[Party, float] | None = Field(
        None, description="on a verdict decided by weighted ballots (reweight): the weighted tally that decided it"
    )
