"""JCV: N heterogeneous jurors deliberate for up to T rounds on a directed social graph.

In round t juror k sees the case file (O_I, O_II), its persona P_k, its memory M_k, the
justifications of the jurors it follows from round t-1 (R_k,t) and the summary S_t of round
t-1, and runs stages III-IV. Deliberation stops early once the majority share reaches delta;
the verdict is the final round's majority (seller iff seller votes > buyer votes, as in the paper).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from ..config import Settings
from ..schemas import (
    Ballot,
    BallotDraft,
    CaseFile,
    JuryRound,
    PrecedentRef,
    RoundSummary,
    RoundSummaryDraft,
    Usage,
    Verdict,
    Votes,
)
from . import prompts
from .graph import SocialGraph, small_world
from .llm import LLM, LLMRequest, TextPart, gather_all
from .personas import Persona, load_personas
from .tasks import JurorTask, SummaryTask

VERDICT_NAMESPACE = uuid.UUID("5b0c6c1e-3f0e-4d8a-9a57-2f1c0c7e9d11")


@dataclass(frozen=True)
class Jury:
    personas: list[Persona]
    graph: SocialGraph

    @classmethod
    def from_settings(cls, settings: Settings) -> "Jury":
        return cls(
            personas=load_personas(settings.jurors, settings.personas_file, settings.graph_seed),
            graph=small_world(settings.jurors, settings.graph_out_degree, settings.graph_rewire_p, settings.graph_seed),
        )

    def __len__(self) -> int:
        return len(self.personas)


def memory_for(juror: int, case_file: CaseFile) -> list[PrecedentRef]:
    """M_k: the top-K guidelines of the case's pool by match with this juror's persona
    (chosen at retrieval time, see agents/precedents/retrieval.py)."""
    return case_file.precedents.memory_of(juror) if case_file.precedents else []


async def run_round(case_file: CaseFile, jury: Jury, llm: LLM, settings: Settings) -> tuple[JuryRound, Usage]:
    round_no = len(case_file.rounds) + 1
    previous = case_file.rounds[-1] if case_file.rounds else None
    ballot = lambda juror: _ballot(juror, round_no, previous, case_file, jury, llm, settings)  # noqa: E731
    # A provider's prompt cache is readable only once the first call that writes it has answered:
    # 17 simultaneous first-round calls would each pay to write the same case prefix.
    first = [await ballot(0)] if round_no == 1 and settings.warm_cache_first and len(jury) > 1 else []
    results = first + await gather_all(*(ballot(j) for j in range(len(first), len(jury))))
    ballots = [b for b, _ in results]
    usage = sum((u for _, u in results), Usage())
    summary, summary_usage = await _summarize(case_file, round_no, ballots, jury, llm, settings)
    return JuryRound(round=round_no, ballots=ballots, summary=summary), usage + summary_usage


async def _ballot(
    juror: int, round_no: int, previous: JuryRound | None, case_file: CaseFile, jury: Jury, llm: LLM, settings: Settings
) -> tuple[Ballot, Usage]:
    assert case_file.focus is not None and case_file.clues is not None
    persona = jury.personas[juror]
    memory = memory_for(juror, case_file)
    neighbours = [previous.ballots[j] for j in jury.graph.neighbours(juror)] if previous else []
    summary = previous.summary if previous else None
    model = settings.model_for("juror", juror)
    request = LLMRequest(
        role="juror",
        model=model,
        system=prompts.JUROR_SYSTEM,
        shared=[TextPart(prompts.case_prefix(case_file.case, case_file.focus, case_file.clues.all(),
                                             case_file.precedents.cases if case_file.precedents else []))],
        prompt=[TextPart(prompts.juror_prompt(
            persona.card(), memory, round_no,
            [(jury.personas[b.juror].name, b.vote, b.justification) for b in neighbours],
            summary.summary if summary else None,
        ))],
        task=JurorTask(case_file.case, case_file.focus, case_file.clues.all(), juror, persona, memory, round_no,
                       neighbours, summary),
        case_id=case_file.case_id,
        max_output_tokens=settings.max_output_tokens,
    )
    result = await llm.generate(request, BallotDraft)
    draft = result.output
    # a juror can only rely on guidelines it was given; anything else it names is dropped
    known = {g.id: g.ref for g in memory}
    cited = [known[g.split("@")[0]] for g in draft.cited_guidelines if g.split("@")[0] in known]
    ballot = Ballot(**draft.model_dump(exclude={"cited_guidelines"}), cited_guidelines=list(dict.fromkeys(cited)),
                    juror=juror, round=round_no, model=result.model)
    return ballot, result.usage


async def _summarize(
    case_file: CaseFile, round_no: int, ballots: list[Ballot], jury: Jury, llm: LLM, settings: Settings
) -> tuple[RoundSummary, Usage]:
    request = LLMRequest(
        role="summary",
        model=settings.model_for("summary"),
        system=prompts.SUMMARY_SYSTEM,
        shared=[TextPart(prompts.metadata_block(case_file.case))],
        prompt=[TextPart(prompts.summary_prompt(
            round_no, [(jury.personas[b.juror].name, b.vote, b.justification) for b in ballots]))],
        task=SummaryTask(case_file.case, round_no, ballots),
        case_id=case_file.case_id,
        max_output_tokens=settings.max_output_tokens,
    )
    result = await llm.generate(request, RoundSummaryDraft)
    votes = Votes(buyer=sum(b.vote == "buyer" for b in ballots), seller=sum(b.vote == "seller" for b in ballots))
    return RoundSummary(**result.output.model_dump(), round=round_no, votes=votes), result.usage


def majority_share(votes: Votes) -> float:
    return max(votes.buyer, votes.seller) / max(votes.total, 1)


def is_settled(case_file: CaseFile, settings: Settings) -> bool:
    if not case_file.rounds:
        return False
    return len(case_file.rounds) >= settings.rounds or majority_share(case_file.rounds[-1].votes) >= settings.early_stop


def verdict_id(case_file: CaseFile) -> str:
    """The same case content always gets the same id, so consumers can dedupe replays."""
    return str(uuid.uuid5(VERDICT_NAMESPACE, f"{case_file.case_id}:{case_file.case.digest()}"))


def decide(case_file: CaseFile, settings: Settings, decided_at: datetime) -> Verdict:
    final = case_file.rounds[-1]
    votes = final.votes
    winner = votes.winner
    clues = {c.id: c for c in (case_file.clues.all() if case_file.clues else [])}
    cited = Counter(c for b in final.ballots if b.vote == winner for c in b.cited_clues if c in clues)
    cited_clues = [clues[c] for c, _ in cited.most_common()] or list(clues.values())
    guidelines = Counter(g for b in final.ballots if b.vote == winner for g in b.cited_guidelines)
    precedents = case_file.precedents
    seen = sorted({ref for juror in range(len(final.ballots)) for ref in
                   (g.ref for g in memory_for(juror, case_file))})
    models = ["offline"] if case_file.backend == "offline" else sorted(
        {settings.model_for(r) for r in ("focus", "select", "perceive", "summary")} | {b.model for b in final.ballots}
    )
    return Verdict(
        verdict_id=verdict_id(case_file),
        case_id=case_file.case_id,
        category=case_file.case.metadata.category,
        winner=winner,
        votes=votes,
        margin=abs(votes.seller - votes.buyer),
        rounds_used=len(case_file.rounds),
        early_stopped=len(case_file.rounds) < settings.rounds,
        justification=final.summary.summary,
        cited_clues=cited_clues,
        cited_precedents=[g for g, _ in guidelines.most_common()],
        precedents_seen=seen,
        precedent_coverage=precedents.coverage if precedents else "none",
        focus=case_file.focus.focus if case_file.focus else "",
        problems=case_file.problems,
        tokens=sum(case_file.usage.values(), Usage()),
        latency_s=round((decided_at - case_file.received_at).total_seconds(), 3),
        backend=case_file.backend,
        models=models,
        decided_at=decided_at,
    )
