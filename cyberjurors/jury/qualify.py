"""The qualification gate: before a persona serves, it decides K mock cases, as a platform's human
jurors pass mock cases before they sit (issue 15).

* **Mock cases** are labelled cases of the precedent base's H (the ones a build indexed, as its
  state file records them; cases learned from outcomes are left out: they are the ones our jury
  already got right). K of them, half won by each side, so a persona that always votes for one side
  scores 50% whatever it does; per side the clearest first (largest real margin, ties by a hash of
  the id), taken in turn across categories. The same base always gives the same set, and its digest
  keys the cache.
* **One mock ballot** is one juror call in isolation, through the same LLM port, role ``qualify``:
  the juror's system prompt (with the verdict rules when on), the mock case's stored summary as the
  case record, the persona; no focus, clues, graph, peers or memory. Never the outcome.
* **Standing**: ``fails_accuracy`` below ``qualification_gate.min_accuracy``; ``fails_bias`` when its
  seller-vote share differs from the mock cases' labelled seller share by more than
  ``qualification_gate.max_bias``; ``fails_both``; else ``qualified``.
* **What a failure does** (``qualification``): ``report`` changes nothing; ``replace`` gives the seat
  to the first reserve of the personas file (in file order, each once) that qualifies on that seat's
  model, and keeps the failing persona when none does (noted); ``reweight`` keeps every persona but
  counts a failing one's ballot with a weight below 1 in the verdict's majority (``weight``).
* **Cache**: each persona's counts, keyed by the persona, the backend and model, the mock set's
  digest and the juror prompt's, in ``qualification.json`` beside the precedent base, so a
  restart (or ``cyberjurors jury qualify`` run before deploying) does not pay for it again.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from pathlib import Path

from ..config import Settings
from ..errors import CyberJurorsError
from ..llm.port import LLM, gather_all, stage_request
from ..precedents.build import built_case_ids, case_digest
from ..precedents.index import PrecedentIndex
from ..precedents.models import PrecedentCase
from ..schemas import BallotDraft, JurorScore, JuryComposition, JuryRound, JurySeat, Party, Standing
from ..schemas.personas import Persona, reserves
from . import prompts
from .answers import ask
from .model_inputs import QualifyTask
from .rounds import Jury

CACHE_FILE = "qualification.json"
CACHE_FORMAT = 1
CACHE_ENTRIES = 2000  # persona x model x mock set: a few hundred in practice; the oldest go first
MAX_CANDIDATES = 5000  # labelled cases read to draw from (by a hash of their ids): H may hold many more
BIAS_SLACK = 1e-9  # a share exactly at the bound is within it


class QualificationError(CyberJurorsError):
    """The gate cannot run: no precedent base, or too few labelled cases of a side."""

    kind = "qualification"


# --- the mock cases ------------------------------------------------------------------------------


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def labelled_cases(settings: Settings, index: PrecedentIndex) -> list[PrecedentCase]:
    """The cases a build indexed into H (``build-state.json``), at most MAX_CANDIDATES of them."""
    ids = built_case_ids(settings)
    if not ids:
        raise QualificationError(
            f"no labelled cases in the precedent base at {settings.precedent_dir}: build it "
            "first (cyberjurors precedents build CASES)"
        )
    chosen = sorted(ids, key=_hash)[:MAX_CANDIDATES]
    return [d.case for d in await index.get([f"case:{i}" for i in chosen]) if d.case is not None]


def _clearest_in_turn(cases: list[PrecedentCase]) -> list[PrecedentCase]:
    """One side's cases, the clearest first within each category, the categories taken in turn."""
    by_category: dict[str, list[PrecedentCase]] = {}
    for case in sorted(cases, key=lambda c: (-abs(c.votes.seller - c.votes.buyer), _hash(c.case_id))):
        by_category.setdefault(case.category, []).append(case)
    turns = zip_longest(*(by_category[c] for c in sorted(by_category)))
    return [case for turn in turns for case in turn if case is not None]


def draw_mock_cases(labelled: Sequence[PrecedentCase], k: int) -> list[PrecedentCase]:
    """K mock cases, k // 2 won by the buyer and the rest by the seller; deterministic."""
    wanted: dict[Party, int] = {"buyer": k // 2, "seller": k - k // 2}
    drawn: list[PrecedentCase] = []
    for side, n in wanted.items():
        pool = _clearest_in_turn([c for c in labelled if c.winner == side])
        if len(pool) < n:
            raise QualificationError(
                f"the precedent base has {len(pool)} labelled cases the {side} won; "
                f"{k} mock cases need {n} of each side (lower qualification_gate.cases or add cases)"
            )
        drawn += pool[:n]
    return sorted(drawn, key=lambda c: c.case_id)


def mock_digest(cases: Sequence[PrecedentCase]) -> str:
    return _hash(json.dumps([[c.case_id, case_digest(c)] for c in cases]))


# --- one persona ---------------------------------------------------------------------------------


def mock_case_block(case: PrecedentCase) -> str:
    """The mock case as a juror reads it: its stored record (order, dispute, each party's statements)."""
    return (
        f"Mock case {case.case_id} (category {case.category}): a dispute from this platform's history, "
        f"known only by its record:\n{prompts.record(case.summary, of='mock case')}"
    )


def juror_system(settings: Settings) -> str:
    return prompts.with_rules(prompts.JUROR_SYSTEM, prompts.rules_for(settings))


async def mock_ballot(persona: Persona, seat: int, case: PrecedentCase, llm: LLM, settings: Settings) -> Party:
    request = stage_request(
        "qualify",
        settings,
        juror=seat,
        system=juror_system(settings),
        shared=[mock_case_block(case)],
        # the persona is not an ``own`` part here: each (mock case, persona) pair is asked once, so only the
        # mock case, read by every persona, is worth caching
        prompt=[prompts.juror_own(persona.card(), [], precedents=False), prompts.juror_round(1, [], None)],
        task=QualifyTask(case.case_id, case.category, case.summary, seat, persona),
        case_id=f"qualify:{case.case_id}",
    )
    return (await ask(llm, request, BallotDraft)).output.vote


@dataclass(frozen=True)
class Counts:
    buyer_cases: int
    seller_cases: int
    buyer_correct: int
    seller_correct: int


async def decide_mock_cases(
    persona: Persona, seat: int, mock: Sequence[PrecedentCase], llm: LLM, settings: Settings
) -> Counts:
    votes = await gather_all(*(mock_ballot(persona, seat, case, llm, settings) for case in mock))
    right = {
        side: sum(v == c.winner for v, c in zip(votes, mock, strict=True) if c.winner == side)
        for side in ("buyer", "seller")
    }
    return Counts(
        sum(c.winner == "buyer" for c in mock), sum(c.winner == "seller" for c in mock), right["buyer"], right["seller"]
    )


def scored(persona: str, model: str, n: Counts, settings: Settings) -> JurorScore:
    cases = n.buyer_cases + n.seller_cases
    seller_votes = n.seller_correct + n.buyer_cases - n.buyer_correct
    accuracy = (n.buyer_correct + n.seller_correct) / cases
    seller_share, labelled = seller_votes / cases, n.seller_cases / cases
    bias = seller_share - labelled
    accurate = accuracy >= settings.qualification_gate.min_accuracy
    balanced = abs(bias) <= settings.qualification_gate.max_bias + BIAS_SLACK
    standing: Standing = (
        "qualified"
        if accurate and balanced
        else "fails_bias"
        if accurate
        else "fails_accuracy"
        if balanced
        else "fails_both"
    )
    return JurorScore(
        persona=persona,
        model=model,
        buyer_cases=n.buyer_cases,
        seller_cases=n.seller_cases,
        buyer_correct=n.buyer_correct,
        seller_correct=n.seller_correct,
        accuracy=round(accuracy, 4),
        seller_share=round(seller_share, 4),
        labelled_seller_share=round(labelled, 4),
        bias=round(bias, 4),
        standing=standing,
    )


def weight(score: JurorScore, settings: Settings) -> float:
    """What a failing persona's ballot counts under ``reweight`` (a qualified one's counts 1).

    Its competence p is its worse side's recall on the mock cases, Laplace-smoothed (a persona that
    always votes seller has p near 0 on the buyer's cases); the weight is p's log-odds over the
    threshold's, clamped to [0, 1]: the weighted majority rule that is optimal for independent jurors
    of known competence (Nitzan and Paroush, 1982), scaled so that a persona at the threshold counts as
    one vote and one at chance or worse counts nothing."""
    if score.qualified:
        return 1.0
    p = min((score.buyer_correct + 1) / (score.buyer_cases + 2), (score.seller_correct + 1) / (score.seller_cases + 2))
    t = min(settings.qualification_gate.min_accuracy, 0.99)
    if t <= 0.5:
        return 1.0 if p > 0.5 else 0.0
    return round(min(1.0, max(0.0, math.log(p / (1 - p)) / math.log(t / (1 - t)))), 4)


# --- the cache -----------------------------------------------------------------------------------


class ScoreCache:
    """Persona scores in ``qualification.json`` beside the precedent base. Read once; ``save`` merges
    with what another worker may have written meanwhile and replaces the file atomically (a race
    costs a persona's mock cases again, never a torn file)."""

    def __init__(self, path: Path):
        self.path = path
        self.entries = self._read()
        self.new: dict[str, dict] = {}

    def _read(self) -> dict[str, dict]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        ok = isinstance(data, dict) and data.get("format") == CACHE_FORMAT and isinstance(data.get("scores"), dict)
        return dict(data["scores"]) if ok else {}

    def get(self, key: str) -> Counts | None:
        entry = self.entries.get(key)
        try:
            return Counts(**{f: int(entry[f]) for f in Counts.__dataclass_fields__}) if entry else None
        except (KeyError, TypeError, ValueError):
            return None

    def put(self, key: str, persona: str, model: str, counts: Counts) -> None:
        entry = {**counts.__dict__, "persona": persona, "model": model, "at": time.time()}
        self.entries[key] = self.new[key] = entry

    def save(self) -> None:
        if not self.new:
            return
        merged = {**self._read(), **self.new}
        kept = dict(sorted(merged.items(), key=lambda kv: kv[1].get("at", 0))[-CACHE_ENTRIES:])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"format": CACHE_FORMAT, "scores": kept}, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)
        self.new.clear()


# --- seating the jury ----------------------------------------------------------------------------


@dataclass
class Qualifier:
    """Scores personas on one mock set, each (persona, model) once, through the cache."""

    settings: Settings
    llm: LLM
    mock: list[PrecedentCase]
    cache: ScoreCache
    calls_saved: int = 0
    tried: list[JurorScore] = field(default_factory=list)

    def key(self, persona: Persona, model: str) -> str:
        # what the ballot was asked with: the system prompt and the prompt's fixed text (a persona left blank)
        asked = (
            juror_system(self.settings) + prompts.juror_own("", [], precedents=False) + prompts.juror_round(1, [], None)
        )
        return _hash(
            json.dumps(
                [CACHE_FORMAT, persona.model_dump(), self.llm.backend, model, mock_digest(self.mock), _hash(asked)]
            )
        )

    async def score(self, persona: Persona, seat: int) -> JurorScore:
        model = self.settings.model_for("juror", seat)
        key = self.key(persona, model)
        counts = self.cache.get(key)
        if counts is None:
            counts = await decide_mock_cases(persona, seat, self.mock, self.llm, self.settings)
            self.cache.put(key, persona.name, model, counts)
        else:
            self.calls_saved += len(self.mock)
        result = scored(persona.name, model, counts, self.settings)
        self.tried.append(result)
        return result


async def seat_jury(jury: Jury, candidates: Sequence[Persona], qualifier: Qualifier) -> Jury:
    """The jury with every persona scored and, as ``qualification`` says, failing ones replaced by
    qualified reserves (``candidates``, in order, each seated once) or re-weighted."""
    settings = qualifier.settings
    try:
        scores = await gather_all(*(qualifier.score(p, k) for k, p in enumerate(jury.personas)))
        personas, seats = list(jury.personas), []
        spare = [c for c in candidates if c.name not in {p.name for p in personas}]
        for k, score in enumerate(scores):
            seat = JurySeat(
                seat=k,
                persona=score.persona,
                model=score.model,
                score=score,
                weight=weight(score, settings) if settings.qualification == "reweight" else 1.0,
            )
            if not score.qualified and settings.qualification == "replace":
                personas[k], seat = await _replacement(k, seat, spare, personas[k], qualifier)
            seats.append(seat)
    finally:
        qualifier.cache.save()  # what was scored stays scored, even if a later call failed
    failing = [s for s in seats if s.score and not s.score.qualified]
    composition = JuryComposition(
        qualification=settings.qualification,
        status="qualified",
        mock_cases=[c.case_id for c in qualifier.mock],
        min_accuracy=settings.qualification_gate.min_accuracy,
        max_bias=settings.qualification_gate.max_bias,
        seats=seats,
        note=f"{len(failing)} of {len(seats)} serving personas failed qualification" if failing else None,
    )
    return replace(jury, personas=personas, composition=composition)


async def _replacement(
    k: int, seat: JurySeat, spare: list[Persona], failed: Persona, qualifier: Qualifier
) -> tuple[Persona, JurySeat]:
    """The first spare persona that qualifies on seat k's model takes it (and leaves ``spare``);
    when none does, the failing persona keeps the seat."""
    while spare:
        candidate = spare.pop(0)
        score = await qualifier.score(candidate, k)
        if score.qualified:
            return candidate, seat.model_copy(
                update={"persona": candidate.name, "score": score, "replaced": seat.score}
            )
    return failed, seat


def unvetted(jury: Jury, settings: Settings, reason: str) -> Jury:
    """The gate is on but could not run: the jury serves as configured, and says why on every verdict."""
    assert jury.composition is not None
    composition = jury.composition.model_copy(
        update={
            "qualification": settings.qualification,
            "status": "not_run",
            "note": f"qualification could not run: {reason}",
        }
    )
    return replace(jury, composition=composition)


async def qualified_jury(
    settings: Settings, llm: LLM, index: PrecedentIndex, jury: Jury | None = None
) -> tuple[Jury, Qualifier]:
    """The configured jury seated by the gate, and the qualifier (its scores, the calls the cache saved).
    Raises QualificationError when the precedent base cannot supply the mock cases, LLMError when a
    mock ballot fails after the retries."""
    jury = jury or Jury.from_settings(settings)
    mock = draw_mock_cases(await labelled_cases(settings, index), settings.qualification_gate.cases)
    qualifier = Qualifier(settings, llm, mock, ScoreCache(Path(settings.precedent_dir) / CACHE_FILE))
    seated = await seat_jury(jury, reserves(len(jury), settings.personas_file), qualifier)
    return seated, qualifier


# --- at the verdict ------------------------------------------------------------------------------


def with_votes(composition: JuryComposition, final: JuryRound) -> tuple[JuryComposition, Party | None]:
    """The composition with each seat's final-round vote, and, when some seat's weight is not 1, the
    weighted majority (seller iff the seller's weight exceeds the buyer's, as the paper's count;
    None when the weights add up to nothing, and the head count decides)."""
    votes = {b.juror: b.vote for b in final.ballots}
    seats = [s.model_copy(update={"vote": votes.get(s.seat)}) for s in composition.seats]
    if all(s.weight == 1.0 for s in seats):
        return composition.model_copy(update={"seats": seats}), None
    tally = {side: round(sum(s.weight for s in seats if s.vote == side), 4) for side in ("buyer", "seller")}
    winner: Party | None = None
    if tally["buyer"] + tally["seller"] > 0:
        winner = "seller" if tally["seller"] > tally["buyer"] else "buyer"
    return composition.model_copy(update={"seats": seats, "weighted": tally}), winner
