"""The per-case budget: a ceiling in tokens (``case_token_budget``) and in estimated USD
(``case_cost_budget_usd``) on what one case may spend on model calls.

It is checked between steps, never inside one: before each select step of stage II and before
each jury round. A case may so overshoot by the step in progress (one select-perceive step per
party, or one round: N juror calls and a summary), and nothing is ever cut mid-answer. What it
stops is always said: stage II records a ``BudgetStop`` on the case file and a note; a
deliberation that stops before T rounds for it is marked on the verdict (``verdict.py``).

The spend is read from the usage the case file already carries by stage; the cost of each call
was estimated when it was made (``GuardedLLM``, from ``llm_prices``), so a mixed jury's calls are
priced at their own models' rates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..config import JurySettings
from ..schemas import BudgetStop, CaseFile, Usage

Limit = Literal["tokens", "cost"]


@dataclass
class CaseBudget:
    tokens: int
    """0 = no token ceiling"""
    cost_usd: float
    """0 = no cost ceiling"""
    spent: Usage = field(default_factory=Usage)
    stopped: BudgetStop | None = None
    """the first stop, once a step was skipped for the budget"""
    skipped: int = 0
    """steps skipped for it"""

    @classmethod
    def of(cls, case_file: CaseFile, settings: JurySettings) -> CaseBudget:
        """The case's budget with what its stages have spent so far."""
        return cls(settings.case_token_budget, settings.case_cost_budget_usd, spent_on(case_file))

    def add(self, usage: Usage) -> None:
        self.spent += usage

    def reached(self) -> Limit | None:
        if self.tokens and self.spent.total_tokens >= self.tokens:
            return "tokens"
        if self.cost_usd and self.spent.cost_usd >= self.cost_usd:
            return "cost"
        return None

    def skip(self, stage: str, steps: int) -> None:
        """Record ``steps`` steps of ``stage`` not run because the budget is reached."""
        self.stopped = self.stopped or self.stop(stage)
        self.skipped += steps

    def stop(self, stage: str) -> BudgetStop | None:
        """A record of the budget stopping ``stage``, or None while it is not reached."""
        limit = self.reached()
        if limit is None:
            return None
        return BudgetStop(
            limit=limit, stage=stage, tokens=self.spent.total_tokens, cost_usd=round(self.spent.cost_usd, 6)
        )


def spent_on(case_file: CaseFile) -> Usage:
    return sum(case_file.usage.values(), Usage())


def describe(stop: BudgetStop, settings: JurySettings) -> str:
    """How far over which ceiling, for a reader: "412,345 tokens of case_token_budget 400,000"."""
    if stop.limit == "tokens":
        return f"{stop.tokens:,} tokens of case_token_budget {settings.case_token_budget:,}"
    return f"${stop.cost_usd:.4f} of case_cost_budget_usd ${settings.case_cost_budget_usd:.4f}"


def clues_note(stop: BudgetStop, skipped: int, settings: JurySettings) -> str:
    return (
        f"per-case budget reached during stage II ({describe(stop, settings)}): up to {skipped} select-perceive "
        f"step{'s' if skipped != 1 else ''} skipped; the jury judged with the clues perceived so far"
    )


def round_stop(case_file: CaseFile, settings: JurySettings) -> BudgetStop | None:
    """The budget stop of a deliberation that has held at least one round and reached the budget."""
    if not case_file.rounds:
        return None  # a verdict needs one round: the budget never stops a case before it
    return CaseBudget.of(case_file, settings).stop(f"round-{len(case_file.rounds)}")


def round_note(stop: BudgetStop, settings: JurySettings) -> str:
    held = stop.stage.removeprefix("round-")
    return (
        f"per-case budget reached ({describe(stop, settings)}): deliberation stopped after round {held} of "
        f"{settings.rounds}, with that round's majority"
    )
