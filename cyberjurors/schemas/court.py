"""Which court sat on a case (the court policy's tier, ``jury/stakes.py``) and how its verdict compares
with the nearest decided precedents (``jury/consistency.py``): records the case file and the verdict
carry, optional so that verdicts written before them still parse."""

from __future__ import annotations

from decimal import Decimal
from typing import Literal, get_args

from pydantic import Field

from .case import Record

ConsistencyOutcome = Literal["consistent", "inconsistent", "no_precedent"]
CONSISTENCY_OUTCOMES: tuple[ConsistencyOutcome, ...] = get_args(ConsistencyOutcome)


class Court(Record):
    """The court that sat: the tier of ``court_policy`` the case's order amount and category fell in,
    with what it set (the settings' values where it set nothing)."""

    name: str = Field(
        description="the tier's name; 'default' when no court_policy is configured (the jury as the settings "
        "say: the paper's 17 jurors unless changed); 'appeal' for a second instance"
    )
    jurors: int = Field(description="N: the jurors it seated")
    rounds: int = Field(description="T: the rounds it may deliberate")
    model: str | None = Field(
        None,
        description="the model the tier put every call on; None = the models as configured (the verdict's "
        "models say which answered)",
    )
    verifier: bool = Field(description="whether its verdict's justification is verified")
    order_amount: Decimal | None = Field(
        None, description="the order amount in base_currency the tier was chosen by; None when no rate converted it"
    )
    base_currency: str = Field(description="the currency of the tiers' thresholds (court_base_currency)")
    note: str | None = Field(
        None, description="how the court was chosen when the rule was not the plain one (a currency without a rate)"
    )


class PrecedentConsistency(Record):
    """The verdict against its nearest decided precedents: the retrieved historical cases of the same
    category whose similarity to the case reaches ``consistency_min_similarity``."""

    outcome: ConsistencyOutcome = Field(
        description="consistent: most of them went the verdict's way (or split evenly); inconsistent: most went "
        "the other way; no_precedent: fewer than consistency_min_precedents were near enough"
    )
    compared: list[str] = Field(default_factory=list, description="the precedents' case ids, nearest first")
    disagreeing: list[str] = Field(default_factory=list, description="of them, those decided for the other party")
    min_similarity: float = Field(description="the similarity a precedent had to reach (consistency_min_similarity)")
