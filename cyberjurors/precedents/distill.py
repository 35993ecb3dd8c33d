"""Distilling verdict guidelines N from historical cases H.

A historical case enters H as a ``PrecedentCase`` (``summarize_case``): product, dispute, both
parties' statements and media captions as one text, and the real jury's 17 votes. Guidelines are
distilled per category by the configured LLM (role ``distil``), at most ``CHUNK_SIZE`` cases per
call; each draft must cite the cases it rests on, and cited ids outside the chunk are dropped.

A guideline's id is derived from (category, dispute type, normalised rule text), so distilling the
same cases again names the same rules the same way. ``merge_near_duplicates`` folds rules of one
category that say the same thing in other words (cosine of real sentence embeddings) into one.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .. import schemas
from ..config import Settings
from ..evidence.safety import DATA_RULE, without_instructions
from ..llm.port import LLM, stage_request
from ..schemas import DisputeCase, Party, Usage, Votes
from .embeddings import Embedder
from .models import Guideline, GuidelineChange, PrecedentCase, PrecedentError

log = logging.getLogger("cyberjurors.precedents")

CHUNK_SIZE = 8
MERGE_THRESHOLD = 0.9

# --- H: historical cases ----------------------------------------------------------------------

# Lexical dispute types, first match wins (the order matters: "never arrived ... broken" is about
# delivery). Used for tags on H and by the offline stand-in; a model writes its own dispute_type.
DISPUTE_TYPES: dict[str, tuple[str, ...]] = {
    "not_received": (
        "never arrived",
        "not received",
        "never received",
        "didn't arrive",
        "did not arrive",
        "not delivered",
        "never delivered",
        "never turned up",
        "never got",
        "not arrived",
        "has not arrived",
        "hasn't arrived",
        "lost in transit",
        "in transit",
        "parcel lost",
        "missing parcel",
        "no parcel",
        "stolen",
        "not found",
        "marked delivered",
        "left at the door",
        "left at the front door",
        "not at the door",
        "locker",
    ),
    "return_window": (
        "return window",
        "return period",
        "returns period",
        "return policy",
        "return requested",
        "wants to return",
        "to return",
        "returned",
        "after the deadline",
        "too late",
        "late return",
        "window closed",
        "return deadline",
        "outside the window",
        "past the return",
    ),
    "damaged": (
        "damaged",
        "damage",
        "broken",
        "cracked",
        "crack",
        "dented",
        "dent",
        "shattered",
        "smashed",
        "crushed",
        "torn",
        "ripped",
        "split open",
        "leaking",
        "scratched",
        "bent",
        "snapped",
        "thawed",
        "melted",
    ),
    "not_as_described": (
        "not as described",
        "different from the listing",
        "does not match",
        "doesn't match",
        "wrong item",
        "wrong size",
        "wrong colour",
        "wrong color",
        "wrong model",
        "counterfeit",
        "fake",
        "not genuine",
        "listing",
        "as listed",
        "advertised",
        "description",
        "missing",
        "incomplete",
        "without",
        "smaller",
        "labelled",
        "labeled",
        "expected",
        "colour",
        "color",
    ),
    "quality": (
        "stopped working",
        "stopped charging",
        "faulty",
        "fault",
        "defect",
        "defective",
        "stale",
        "expired",
        "best before",
        "best-before",
        "use by",
        "quality",
        "poor",
        "pilling",
        "faded",
        "shrank",
        "battery",
        "mould",
        "mold",
        "rancid",
        "taste",
        "smell",
        "noisy",
        "overheat",
        "doesn't work",
        "does not work",
        "not working",
        "error",
        "invalid",
        "already used",
        "redeemed",
        "zero balance",
        "revoked",
        "banned",
        "rusted",
        "rust",
        "leaks",
        "sinks",
        "separated",
        "came apart",
    ),
}
OTHER = "other"
_TYPE_PATTERNS = {
    t: re.compile("|".join(rf"(?<!\w){re.escape(k)}(?!\w)" for k in keys)) for t, keys in DISPUTE_TYPES.items()
}


def dispute_types_of(text: str) -> list[str]:
    """Every lexical dispute type the text mentions, in ``DISPUTE_TYPES`` order; ['other'] if none."""
    low = text.lower()
    return [t for t, pattern in _TYPE_PATTERNS.items() if pattern.search(low)] or [OTHER]


def dispute_type_of(text: str) -> str:
    return dispute_types_of(text)[0]


ITEM_CHARS = 220  # one statement or caption in a summary
PARTY_CHARS = 700  # one party's statements in a summary
_PARTY_LINE = {"buyer": "Buyer says: ", "seller": "Seller says: "}
_SEP = " | "


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def _statements(case: DisputeCase, party: Party) -> list[str]:
    out: list[str] = []
    used = 0
    for item in case.items(party):
        body = without_instructions(item.text or "").replace("|", "/")
        if item.kind != "text":
            body = f"[{'photo' if item.kind == 'image' else 'video'}: {body or 'no caption'}]"
        body = _clip(body, ITEM_CHARS)
        if not body:
            continue
        if used + len(body) > PARTY_CHARS:
            if not out:
                out.append(_clip(body, PARTY_CHARS))
            break
        out.append(body)
        used += len(body) + len(_SEP)
    return out


def summarize_case(case: DisputeCase) -> PrecedentCase:
    """One H entry: the order, the dispute and each party's statements as text, and the real votes.

    Statements are whitespace-normalised, each cut at ``ITEM_CHARS`` and each party at
    ``PARTY_CHARS`` (earlier rounds first: they state the claims); sentences that address the jury
    instead of the dispute are left out. A case without ground-truth votes is no precedent."""
    if case.ground_truth is None:
        raise PrecedentError(
            "bad_case",
            f"case {case.case_id} has no ground truth (the 17 jury votes): only decided cases can be precedents",
        )
    d = case.metadata
    delivered = f"delivered {d.delivered_at.date().isoformat()}" if d.delivered_at else "delivery not recorded"
    lines = [
        f"{_clip(d.product, 200)} ({d.category}; {d.order_amount} {d.currency}; ordered "
        f"{d.ordered_at.date().isoformat()}, {delivered}).",
        f"Dispute: {_sentence(_clip(d.dispute_reason, 400))} Requested: {_sentence(_clip(d.requested_remedy, 160))}",
    ]
    for party in ("buyer", "seller"):
        said = _statements(case, party)
        lines.append(_PARTY_LINE[party] + (_SEP.join(said) if said else "(nothing submitted)"))
    kinds = {i.kind for i in case.items()}
    tags = dispute_types_of(f"{d.dispute_reason} {d.requested_remedy}")
    tags += [f"{k}_evidence" for k in ("image", "video") if k in kinds]
    votes = case.ground_truth
    return PrecedentCase(
        case_id=case.case_id,
        category=d.category,
        summary="\n".join(lines),
        winner=votes.winner,
        votes=Votes(buyer=votes.buyer, seller=votes.seller),
        tags=tags,
    )


def party_statements(summary: str, party: Party) -> list[str]:
    """The statements ``summarize_case`` wrote for a party (empty for other summaries)."""
    prefix = _PARTY_LINE[party]
    for line in summary.splitlines():
        if line.startswith(prefix):
            rest = line[len(prefix) :]
            return [] if rest == "(nothing submitted)" else rest.split(_SEP)
    return []


def case_dispute_type(case: PrecedentCase) -> str:
    known = [t for t in case.tags if t in DISPUTE_TYPES or t == OTHER]
    return known[0] if known else dispute_type_of(case.summary.split("\n")[1] if "\n" in case.summary else case.summary)


# --- N: what the model is asked for ---------------------------------------------------------


@dataclass(frozen=True)
class DistillTask:
    """Structured input of one distil call: up to ``CHUNK_SIZE`` decided cases of one category."""

    category: str
    cases: list[PrecedentCase]


class GuidelineDraft(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rule: str = Field(
        description=(
            "One short, testable rule a juror can apply to a new case: a concrete condition and the outcome it "
            "leads to, in one sentence, e.g. \"when the seller's own video shows the defect before shipping, the "
            'buyer wins regardless of the return window". Name the evidence that decides, not the parties of a '
            "particular case; no case ids in the rule."
        )
    )
    dispute_type: str = Field(
        description=(
            "short snake_case tag for the kind of dispute, e.g. not_received, damaged, not_as_described, "
            "return_window, quality, used_or_worn, wrong_item"
        )
    )
    favours: Party | None = Field(description="the side the rule decides for; null if it decides for neither")
    supporting_cases: list[str] = Field(
        description=("ids of the cases above that the rule rests on (copied exactly from the case list; at least one)")
    )
    confidence: float = Field(
        description=(
            "0 to 1: how consistently the cited juries decided this way and how many cases support it; "
            "a rule from one case or from split votes stays below 0.6"
        )
    )

    @field_validator("confidence")
    @classmethod
    def _clamp(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("confidence must be a number between 0 and 1")
        return min(1.0, max(0.0, value))


class GuidelineDrafts(BaseModel):
    model_config = ConfigDict(extra="forbid")

    guidelines: list[GuidelineDraft] = Field(
        description=(
            "the verdict guidelines these cases support, most general and best supported first; one rule per "
            "distinct convention, no two rules saying the same thing; an empty list if the cases share none"
        )
    )


DISTIL_SYSTEM = (
    "You distil verdict guidelines for an e-commerce platform's dispute jury. You are given past "
    "disputes of one product category, each with how its jury of 17 people voted. Write the conventions "
    "these juries follow as short, testable rules: a concrete condition about the evidence or the order "
    "(signed proof of delivery, a defect visible in the arrival photo, a return asked for after the "
    "window closed, an item used or worn, food past its date, ...) and the side it decides for. Rest "
    "every rule on the cases given and cite their ids exactly; do not invent cases or facts. Prefer "
    "rules that several cases share; a lopsided vote (e.g. 15 to 2) is stronger support than a split "
    "one (9 to 8); a case decided the other way lowers the rule's confidence. " + DATA_RULE
)


def render_case(case: PrecedentCase) -> str:
    tags = escape(" ".join(case.tags))
    return (
        f'<case id="{escape(case.case_id)}" winner="{case.winner}" '
        f'votes="buyer {case.votes.buyer} : seller {case.votes.seller}" tags="{tags}">\n'
        f'<evidence case="{escape(case.case_id)}">{escape(case.summary, quote=False)}</evidence>\n</case>'
    )


def distil_prompt(category: str, cases: Sequence[PrecedentCase]) -> str:
    listing = "\n".join(render_case(c) for c in cases)
    return (
        f"Category: {category}\n\n{len(cases)} decided cases (each summary quotes the parties):\n{listing}\n\n"
        "Write the verdict guidelines these cases support. supporting_cases must be ids from this list."
    )


# --- distillation ----------------------------------------------------------------------------


def chunks(cases: Iterable[PrecedentCase], size: int = CHUNK_SIZE) -> list[list[PrecedentCase]]:
    """Cases in case-id order, cut into chunks of ``size``: the same cases always give the same chunks."""
    ordered = sorted(cases, key=lambda c: c.case_id)
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def normalise_rule(rule: str) -> str:
    return " ".join(re.sub(r"[^\w%]+", " ", rule.lower()).split())


def guideline_id(category: str, dispute_type: str, rule: str) -> str:
    key = f"{category}\n{dispute_type}\n{normalise_rule(rule)}"
    return "g-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def _tag(value: str) -> str:
    return "_".join(re.sub(r"[^a-z0-9]+", " ", value.lower()).split())[:40] or OTHER


@dataclass
class ChunkResult:
    guidelines: list[Guideline]
    usage: Usage
    notes: list[str] = field(default_factory=list)


async def distil_chunk(
    category: str,
    cases: Sequence[PrecedentCase],
    llm: LLM,
    settings: Settings,
    now: datetime | None = None,
    case_id: str = "",
) -> ChunkResult:
    """One call: guidelines from at most ``CHUNK_SIZE`` cases, checked against those cases."""
    if len(cases) > CHUNK_SIZE:
        raise ValueError(f"a distil call takes at most {CHUNK_SIZE} cases, got {len(cases)}")
    now = now or schemas.now()
    request = stage_request(
        "distil",
        settings,
        system=DISTIL_SYSTEM,
        prompt=[distil_prompt(category, cases)],
        task=DistillTask(category, list(cases)),
        case_id=case_id or f"distil:{category}",
    )
    result = await llm.generate(request, GuidelineDrafts)
    known = {c.case_id for c in cases}
    notes: list[str] = []
    out: dict[str, Guideline] = {}
    for draft in result.output.guidelines:
        rule = _clip(draft.rule, 600)
        cited = [c.removeprefix("case:").strip() for c in draft.supporting_cases]
        unknown = sorted({c for c in cited if c not in known})
        if unknown:
            notes.append(
                f"{category}: dropped supporting case ids not in the chunk: {', '.join(unknown)} (rule: {rule[:80]!r})"
            )
        supporting = sorted({c for c in cited if c in known})
        if not rule or not supporting:
            notes.append(f"{category}: dropped a rule with no supporting case from the chunk: {rule[:80]!r}")
            continue
        dtype = _tag(draft.dispute_type)
        gid = guideline_id(category, dtype, rule)
        confidence = round(min(1.0, max(0.0, draft.confidence)), 4)
        if gid in out:  # the same rule twice in one answer: one guideline
            seen = out[gid]
            out[gid] = seen.model_copy(
                update={
                    "supporting_cases": sorted({*seen.supporting_cases, *supporting}),
                    "confidence": max(seen.confidence, confidence),
                }
            )
            continue
        out[gid] = Guideline(
            id=gid,
            rule=rule,
            category=category,
            dispute_type=dtype,
            tags=[dtype],
            favours=draft.favours,
            supporting_cases=supporting,
            confidence=confidence,
            updated_at=now,
            history=[GuidelineChange(version=1, reason="created", confidence=confidence, at=now)],
        )
    for note in notes:
        log.info("distil: %s", note)
    return ChunkResult(list(out.values()), result.usage, notes)


async def distil(category: str, cases: Sequence[PrecedentCase], llm: LLM, settings: Settings) -> list[Guideline]:
    """Guidelines for one category, one LLM call per ``CHUNK_SIZE`` cases (in case-id order).
    The same rule from two chunks becomes one guideline (union of support, highest confidence)."""
    out: dict[str, Guideline] = {}
    for chunk in chunks(c for c in cases if c.category == category or category == "all"):
        for g in (await distil_chunk(category, chunk, llm, settings)).guidelines:
            seen = out.get(g.id)
            out[g.id] = (
                g
                if seen is None
                else seen.model_copy(
                    update={
                        "supporting_cases": sorted({*seen.supporting_cases, *g.supporting_cases}),
                        "confidence": max(seen.confidence, g.confidence),
                    }
                )
            )
    return list(out.values())


# --- near-duplicate merging ------------------------------------------------------------------


@dataclass
class MergePlan:
    guidelines: list[Guideline]
    """Every guideline that survives: the existing ones (changed or not) and the new representatives."""
    absorbed: dict[str, str] = field(default_factory=dict)
    """id of a fresh guideline folded into another -> the id it was folded into (its own id when the
    same rule was already there)."""
    changed: set[str] = field(default_factory=set)
    """ids whose content changed by a merge (and so got a new version)."""


def plan_merge(
    fresh: Sequence[Guideline],
    embedder: Embedder,
    threshold: float = MERGE_THRESHOLD,
    existing: Sequence[Guideline] = (),
    now: datetime | None = None,
) -> MergePlan:
    """Fold each fresh guideline into the most similar kept one of the same category that favours the
    same side, if their rules' cosine is at least ``threshold`` (or they share an id).

    Kept guidelines are the ``existing`` ones (already published: they are never folded into anything)
    and, in order of confidence then support, the fresh ones that matched nothing. A merge takes the
    union of supporting cases and tags and the higher confidence; a kept guideline that changed gets
    one new version (history reason ``merged``), however many rules it absorbed. Rules favouring
    opposite sides are never merged, however alike their words ("the buyer won" / "the seller won")."""
    now = now or schemas.now()
    existing = list(existing)
    order = sorted(fresh, key=lambda g: (-g.confidence, -len(g.supporting_cases), g.id))
    everything = existing + order
    vectors = embedder.encode([g.rule for g in everything]) if everything else None
    kept: list[int] = list(range(len(existing)))
    merged: dict[int, Guideline] = {i: g for i, g in enumerate(existing)}
    absorbed: dict[str, str] = {}
    for i in range(len(existing), len(everything)):
        g = everything[i]
        best, best_score = None, -1.0
        for j in kept:
            other = everything[j]
            same = other.id == g.id
            if not same and (other.category != g.category or other.favours != g.favours):
                continue
            score = 1.0 if same else float(vectors[i] @ vectors[j])  # type: ignore[index]  # None only with no loop
            if score >= threshold and score > best_score:
                best, best_score = j, score
        if best is None:
            kept.append(i)
            merged[i] = g
            continue
        into = merged[best]
        absorbed[g.id] = into.id
        merged[best] = into.model_copy(
            update={
                "supporting_cases": sorted({*into.supporting_cases, *g.supporting_cases}),
                "tags": sorted({*into.tags, *g.tags}, key=lambda t: (t != into.dispute_type, t)),
                "confidence": max(into.confidence, g.confidence),
            }
        )
    out: list[Guideline] = []
    changed: set[str] = set()
    for j in kept:
        before, after = everything[j], merged[j]
        if (after.supporting_cases, after.tags, after.confidence) != (
            before.supporting_cases,
            before.tags,
            before.confidence,
        ):
            version = before.version + 1
            after = after.model_copy(
                update={
                    "version": version,
                    "updated_at": now,
                    "history": [
                        *after.history,
                        GuidelineChange(version=version, reason="merged", confidence=after.confidence, at=now),
                    ],
                }
            )
            changed.add(after.id)
        out.append(after)
    return MergePlan(out, absorbed, changed)


def merge_near_duplicates(
    guidelines: Sequence[Guideline], embedder: Embedder, threshold: float = MERGE_THRESHOLD
) -> list[Guideline]:
    """Within each category, rules whose embeddings have cosine >= ``threshold`` (and that favour the
    same side) become one: union of supporting cases, the highest confidence, the version bumped if
    anything changed. The strongest rule (confidence, then support) keeps its id and wording."""
    return plan_merge(guidelines, embedder, threshold).guidelines
