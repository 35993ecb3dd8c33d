"""The courts section: a court policy that sizes the court to the stakes (``jury/stakes.py``).

A policy is a list of tiers, each a court for a band of order amounts (in ``court_base_currency``)
and, optionally, some categories: for example small claims (5 jurors, one round, a smaller model),
standard (the paper's 17 jurors), high value (17 plus the verifier). Every category's amounts from 0
up must be covered by exactly one tier, so a case always finds its court: tiers that overlap or
leave amounts uncovered are refused when the settings load, naming the gap or the overlap. No
policy (the default) is one tier, the jury the other settings describe: the paper's court.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints, model_validator

from ..schemas.case import CATEGORIES, MAX_ORDER_AMOUNT, Category, CurrencyCode
from .fields import ConfigModel

# the names the service gives the courts it seats without a tier: no policy, and the second instance
RESERVED_COURTS = ("default", "appeal")
UNBOUNDED = Decimal("Infinity")

CourtName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,39}$")]
Amount = Annotated[Decimal, Field(ge=0, le=MAX_ORDER_AMOUNT, allow_inf_nan=False)]
Rate = Annotated[Decimal, Field(gt=0, allow_inf_nan=False)]


class CourtTier(ConfigModel):
    """One court of the policy and the cases it sits on. A field left unset keeps the setting of the
    same name (``jurors``, ``rounds``, ``verifier``; ``model`` for every role)."""

    name: CourtName = Field(description="what the verdict calls the court, e.g. small-claims")
    min_amount: Amount = Field(Decimal(0), description="the lowest order amount it sits on, in court_base_currency")
    max_amount: Amount | None = Field(
        None, description="the amount it sits below (exclusive), in court_base_currency; unset = no upper bound"
    )
    categories: list[Category] = Field(default_factory=list, description="the categories it sits on; [] = every one")
    jurors: int | None = Field(None, ge=1, description="N; unset = jurors")
    rounds: int | None = Field(None, ge=1, description="T; unset = rounds")
    model: str | None = Field(
        None,
        description="the model of every call on its cases (stages I-II, jurors, summaries, verifier), in place "
        "of model, model_<role> and juror_models; unset = as configured",
    )
    verifier: bool | None = Field(None, description="verify its verdicts' justifications; unset = verifier")

    @model_validator(mode="after")
    def _band(self) -> CourtTier:
        if self.max_amount is not None and self.max_amount <= self.min_amount:
            raise ValueError(
                f"court {self.name!r}: max_amount {self.max_amount} must be above min_amount {self.min_amount}"
            )
        if self.name in RESERVED_COURTS:
            raise ValueError(f"court {self.name!r}: the service names a court {self.name!r} itself; choose another")
        return self

    @property
    def top(self) -> Decimal:
        return UNBOUNDED if self.max_amount is None else self.max_amount

    def sits_on(self, category: str) -> bool:
        return not self.categories or category in self.categories


def _span(low: Decimal, high: Decimal, currency: str) -> str:
    """``from 50 USD to 60 USD``, or ``from 1000 USD up`` for a span without an upper bound."""
    start = f"from {low.normalize():f} {currency}"
    return f"{start} up" if high == UNBOUNDED else f"{start} to {high.normalize():f} {currency}"


def _category_problems(tiers: list[CourtTier], category: str, currency: str) -> list[str]:
    """What is wrong with one category's tiers, lowest amount first: where no tier sits, where two do."""
    serving = sorted((t for t in tiers if t.sits_on(category)), key=lambda t: (t.min_amount, t.top))
    if not serving:
        return ["no tier sits on any amount"]
    problems = []
    reach, reacher = Decimal(0), None  # covered so far: [0, reach), by the tier that reaches furthest
    for tier in serving:
        if tier.min_amount > reach:
            after = f" (between {reacher.name!r} and {tier.name!r})" if reacher else f" (below {tier.name!r})"
            problems.append(f"amounts {_span(reach, tier.min_amount, currency)} are uncovered{after}")
        elif tier.min_amount < reach and reacher is not None:
            overlap = _span(tier.min_amount, min(reach, tier.top), currency)
            problems.append(f"tiers {reacher.name!r} and {tier.name!r} overlap {overlap}")
        if tier.top > reach:
            reach, reacher = tier.top, tier
    if reach != UNBOUNDED and reacher is not None:
        problems.append(f"amounts {_span(reach, UNBOUNDED, currency)} are uncovered (above {reacher.name!r})")
    return problems


def coverage_problems(tiers: list[CourtTier], currency: str) -> list[str]:
    """Every gap and overlap of the policy, each once with the categories it concerns."""
    where: dict[str, list[str]] = defaultdict(list)
    for category in CATEGORIES:
        for problem in _category_problems(tiers, category, currency):
            where[problem].append(category)
    return [
        f"{problem} for {'every category' if len(cats) == len(CATEGORIES) else ', '.join(cats)}"
        for problem, cats in where.items()
    ]


class CourtSettings(BaseModel):
    """The court policy: which court (jury size, rounds, model, verifier) sits on a case, by its order
    amount and category; the currency of the thresholds and the rates that convert to it."""

    court_policy: list[CourtTier] = Field(
        default_factory=list,
        description="the courts, each for a band of order amounts (min_amount inclusive, max_amount "
        "exclusive, in court_base_currency) and optionally some categories; every category's amounts "
        "from 0 up covered exactly once (refused at start otherwise); [] = one court, the jury the "
        "other settings describe (docs/concepts/courts.md)",
    )
    court_base_currency: CurrencyCode = Field("USD", description="the currency of the tiers' amounts")
    court_rates: dict[CurrencyCode, Rate] = Field(
        default_factory=dict,
        description="units of court_base_currency one unit of each currency is worth (EUR = 1.08 with a USD "
        "base); a case in a currency without a rate sits before the highest tier of its category, "
        "and its verdict says so",
    )

    @model_validator(mode="after")
    def _policy(self) -> CourtSettings:
        names = [t.name for t in self.court_policy]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"court_policy names {', '.join(map(repr, twice))} more than once")
        base = self.court_rates.get(self.court_base_currency)
        if base is not None and base != 1:
            raise ValueError(
                f"court_rates gives the base currency {self.court_base_currency} a rate of {base}: it is 1 by definition"
            )
        if self.court_policy and (problems := coverage_problems(self.court_policy, self.court_base_currency)):
            raise ValueError("court_policy: " + "; ".join(problems))
        return self
