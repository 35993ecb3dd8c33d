"""What a case page shows, assembled from the store.

Where each part comes from:

* the verdict (``disputes.verdicts``): winner, votes, margin, rounds, escalation, the justification
  and the clues it cites, the precedents cited and seen (``id@version``), notes, total tokens,
  latency, cost;
* the record, the case file with the evidence by reference, focus O_I, clue chain O_II,
  precedents, every round's ballots and summary, usage by stage: for an escalated verdict from its
  escalation (``disputes.escalations``), otherwise from the last case file the console read on
  ``disputes.rounds`` (the case after its final round). Which one is named on the page. An appeal's
  second instance runs inside one handler, not over topic hops: its ballots are shown only when
  its verdict was escalated. A verdict whose record the console never read (older than the topics'
  retention when the console started) shows what the verdict alone carries;
* the verdict step's own tokens (verifier, JURIS) are the verdict's total less the stages' usage;
* the letters the parties were sent about the verdict (``disputes.letters``), with what their check
  removed and what they withheld.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config import Settings
from ..jury.rounds import Jury
from ..schemas import (
    Ballot,
    CaseFile,
    Escalation,
    EvidenceRound,
    JuryRound,
    Party,
    PartyLetter,
    PrecedentRef,
    Usage,
    Verdict,
)
from .evidence import FrameCache, Strip, strip
from .plots import switches
from .store import Decision, Store

PARTY_ORDER = {"buyer": 0, "seller": 1}


@dataclass(frozen=True)
class BallotRow:
    ballot: Ballot
    persona: str
    switched_from: str | None


@dataclass(frozen=True)
class RoundView:
    round: JuryRound
    rows: list[BallotRow]
    switched: int


@dataclass
class InstanceView:
    verdict: Verdict
    record: CaseFile | None = None
    source: str | None = None
    escalation: Escalation | None = None
    decisions: list[Decision] = field(default_factory=list)
    timeline: list[tuple[int, list[EvidenceRound]]] = field(default_factory=list)
    strips: dict[str, Strip] = field(default_factory=dict)
    rounds: list[RoundView] = field(default_factory=list)
    usage: list[tuple[str, Usage]] = field(default_factory=list)
    cited: list[tuple[str, PrecedentRef | None]] = field(default_factory=list)
    party_letters: list[PartyLetter] = field(default_factory=list)

    @property
    def instance(self) -> int:
        return self.verdict.instance

    @property
    def cited_clue_ids(self) -> set[str]:
        return {c.id for c in self.verdict.cited_clues}


def timeline(record: CaseFile) -> list[tuple[int, list[EvidenceRound]]]:
    """The evidence by round number, the buyer's round before the seller's."""
    rounds: dict[int, list[EvidenceRound]] = {}
    for r in record.case.rounds:
        rounds.setdefault(r.round, []).append(r)
    return [(n, sorted(rs, key=lambda r: PARTY_ORDER[r.party])) for n, rs in sorted(rounds.items())]


def jury_size(record: CaseFile) -> int:
    return max([len(r.ballots) for r in record.rounds] + [r.summary.votes.seats for r in record.rounds] + [1])


def juror_names(record: CaseFile, settings: Settings) -> list[str]:
    """Who sat on each seat: the jury the case file recorded at round 1 (with the qualification gate,
    a reserve in a failing persona's seat), else the configured personas."""
    if record.jury is not None:
        return [s.persona for s in record.jury.seats]
    return [p.name for p in Jury.from_settings(settings, jury_size(record)).personas]


def round_views(record: CaseFile, settings: Settings) -> list[RoundView]:
    names = juror_names(record, settings)
    out: list[RoundView] = []
    before: dict[int, Party] = {}  # each juror's vote in the round before
    for r, moved in zip(record.rounds, switches(record.rounds), strict=True):
        rows = [
            BallotRow(
                b,
                names[b.juror] if b.juror < len(names) else f"juror {b.juror}",
                before.get(b.juror) if b.juror in moved else None,
            )
            for b in sorted(r.ballots, key=lambda b: b.juror)
        ]
        out.append(RoundView(r, rows, len(moved)))
        before = {b.juror: b.vote for b in r.ballots} or before
    return out


def usage_by_stage(record: CaseFile | None, verdict: Verdict) -> list[tuple[str, Usage]]:
    rows = [(stage, used) for stage, used in (record.usage.items() if record else ())]
    rest = verdict.tokens - sum((u for _, u in rows), Usage())
    if record is not None and rest != Usage():
        rows.append(("verdict", rest))
    return [*rows, ("total", verdict.tokens)]


def cited_precedents(verdict: Verdict, record: CaseFile | None) -> list[tuple[str, PrecedentRef | None]]:
    known = {g.ref: g for g in (record.precedents.guidelines if record and record.precedents else [])}
    return [(ref, known.get(ref)) for ref in verdict.cited_precedents]


async def instance_view(store: Store, settings: Settings, frames: FrameCache, verdict: Verdict) -> InstanceView:
    view = InstanceView(verdict)
    found = store.record(verdict.case_id, verdict.instance)
    view.escalation = next(
        (e for e in store.escalations_of(verdict.case_id) if e.verdict_id == verdict.verdict_id), None
    )
    if view.escalation is not None:
        view.decisions = store.decisions(view.escalation.escalation_id)
    view.usage = usage_by_stage(found[0] if found else None, verdict)
    view.party_letters = [x for x in store.party_letters_of(verdict.case_id) if x.verdict_id == verdict.verdict_id]
    if found is None:
        view.cited = cited_precedents(verdict, None)
        return view
    view.record, view.source = found
    view.timeline = timeline(view.record)
    view.rounds = round_views(view.record, settings)
    view.cited = cited_precedents(verdict, view.record)
    for item in view.record.case.items():
        if item.kind == "video" and item.media is not None:
            view.strips[item.id] = await strip(frames, view.record, verdict.instance, item, verdict, settings)
    return view
