"""A human decision on an escalated case: recorded in the store, then published to
disputes.outcomes as ``{"type": "outcome", "source": "human_panel", "escalation_id": ...,
"decided_by": {"reviewer": ..., "role": ...}, "signature": ...}``, signed with
``outcome_signing_key`` (evidence/signing.py), where it feeds drift and the precedent base like any
outcome. Without the key the console publishes no decision: the workers would refuse it.

Roles: a reviewer decides, and may replace their own standing decision; replacing someone else's
(or one read from the topic) takes a supervisor.

Idempotent: a decision is the winner and the votes. Submitting the one that stands again publishes
nothing (unless its publication had failed: then it is published now, once). A different decision
once one stands is refused unless the reviewer overrides it explicitly; the override is published
as a new outcome (a new ``event_id``) and the one it replaces stays in the case's history. The
rationale is kept in the console's store (the outcome event has no field for it). Decisions are
taken one at a time per console; two consoles deciding the same case at once both publish, and the
outcome later on the topic is the one that stands for both.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, TypeGuard

from ..config import Settings
from ..errors import CyberJurorsError
from ..evidence import signing
from ..schemas import DecidedBy, OutcomeReported, Party, Votes, now
from ..tooling.clients import Outgoing, produce
from .auth import Person, Refused
from .store import Decision, Store

MAX_RATIONALE_CHARS = 2000


class BadDecision(CyberJurorsError, ValueError):
    kind = "bad_decision"


@dataclass(frozen=True)
class Proposed:
    winner: Party
    buyer: int
    seller: int
    rationale: str | None


def _is_side(value: str | None) -> TypeGuard[Party]:
    return value in ("buyer", "seller")


def proposed(winner: str | None, buyer: str | None, seller: str | None, rationale: str | None) -> Proposed:
    """A decision from the form: a winner, and a panel's votes or none (a reviewer alone: 1 to 0)."""
    if not _is_side(winner):
        raise BadDecision("choose the winner: buyer or seller")
    text = (rationale or "").strip() or None
    if text is not None and len(text) > MAX_RATIONALE_CHARS:
        raise BadDecision(f"the rationale is {len(text)} characters; at most {MAX_RATIONALE_CHARS}")
    given = [(buyer or "").strip(), (seller or "").strip()]
    if not any(given):
        return Proposed(winner, int(winner == "buyer"), int(winner == "seller"), text)
    try:
        b, s = (int(v) for v in given)
    except ValueError as err:
        raise BadDecision("votes are whole numbers, buyer's and seller's both (or neither, for one reviewer)") from err
    if b < 0 or s < 0 or b + s < 1:
        raise BadDecision("votes cannot be negative, and a panel casts at least one")
    if (b > s) != (winner == "buyer") or b == s:
        raise BadDecision(f"the votes ({b} buyer, {s} seller) do not make the {winner} the winner")
    return Proposed(winner, b, s, text)


@dataclass(frozen=True)
class Submitted:
    status: Literal["published", "already", "refused"]
    decision: Decision
    message: str


class Reviews:
    def __init__(self, settings: Settings, store: Store):
        self.settings, self.store = settings, store
        self._lock = asyncio.Lock()  # one decision at a time: a double click cannot publish twice

    async def decide(
        self, escalation_id: str, case_id: str, choice: Proposed, person: Person, override: bool
    ) -> Submitted:
        if not self.settings.outcome_signing_key:
            raise Refused(
                503,
                "no outcome_signing_key is set: a decision would not be signed, and the workers would refuse it",
                audit="refused_unsigned",
            )
        async with self._lock:
            history = self.store.decisions(escalation_id)
            standing = history[-1] if history else None
            if standing is not None and standing.same_votes(choice.winner, choice.buyer, choice.seller):
                if standing.published_at is None:  # recorded, but its publication failed: once now
                    await self.publish(standing)
                    return Submitted("published", standing, "published the decision recorded before")
                return Submitted(
                    "already", standing, "this decision was already recorded and published; nothing sent again"
                )
            if standing is not None and not override:
                return Submitted(
                    "refused",
                    standing,
                    f"a different decision stands ({standing.winner}, "
                    f"{standing.buyer}:{standing.seller}); tick override to replace it",
                )
            others = standing is not None and (standing.origin != "console" or standing.reviewer != person.name)
            if others and not person.may("override"):
                by = standing.reviewer if standing and standing.reviewer else "a panel on disputes.outcomes"
                raise Refused(
                    403,
                    f"the standing decision is {by}'s: replacing another person's decision needs a supervisor",
                    audit="refused_override",
                )
            role = "reviewer" if not others and "reviewer" in person.roles else "supervisor"
            decision = self.store.add_decision(
                escalation_id,
                case_id,
                choice.winner,
                choice.buyer,
                choice.seller,
                choice.rationale,
                person.name,
                standing.seq if standing else None,
                role,
            )
            await self.publish(decision)
            return Submitted(
                "published",
                decision,
                "published to disputes.outcomes" + (" (overriding the decision before)" if standing else ""),
            )

    async def publish(self, decision: Decision) -> None:
        replaced = self.store.decision(decision.override_of) if decision.override_of else None
        outcome = OutcomeReported(
            case_id=decision.case_id,
            votes=Votes(buyer=decision.buyer, seller=decision.seller),
            decided_at=now(),
            source="human_panel",
            escalation_id=decision.escalation_id,
            event_id=decision.event_id,
            decided_by=DecidedBy(
                reviewer=decision.reviewer or "unknown",
                role="supervisor" if decision.role == "supervisor" else "reviewer",
                override_of=replaced.event_id if replaced else None,
            ),
        )
        outcome = signing.sign(outcome, self.settings.outcome_signing_key or "")
        await produce(
            self.settings,
            [
                Outgoing(
                    decision.case_id,
                    outcome.model_dump_json(exclude_none=True).encode(),
                    "console",
                    route="disputes.outcomes",
                )
            ],
        )
        self.store.published(decision.seq)
