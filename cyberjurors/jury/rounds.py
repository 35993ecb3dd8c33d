"""JCV: N heterogeneous jurors deliberate for up to T rounds on a directed social graph.

In round t juror k sees the case file (O_I, O_II), its persona P_k, its memory M_k, the
justifications of the jurors it follows from round t-1 (R_k,t) and the summary S_t of round
t-1, and runs stages III-IV. Deliberation stops early once the majority share reaches delta;
the verdict (``verdict.py``) is the final round's majority.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config import Settings
from ..llm.port import LLM, Part, gather_all, stage_request
from ..schemas import (
    Abstention,
    Ballot,
    BallotDraft,
    CaseFile,
    Clue,
    Focus,
    JuryComposition,
    JuryRound,
    JurySeat,
    PrecedentRef,
    RoundSummary,
    RoundSummaryDraft,
    Usage,
    Votes,
)
from ..schemas.personas import Persona, load_personas
from . import prompts
from .answers import NoAnswer, ask_or_none
from .budget import round_stop
from .clues import attached_media, find_clues
from .court import run_court
from .focus import extract_focus
from .graph import SocialGraph, complete, small_world
from .model_inputs import JurorTask, SummaryTask
from .stakes import sitting

CLUE_LABEL = re.compile(r"\[([bs][1-9][0-9]*)\]")


def clue_labels(text: str) -> list[str]:
    """The clue ids a text names in brackets ("[b1]", "[s2]"), in order, once each."""
    return list(dict.fromkeys(CLUE_LABEL.findall(text)))


@dataclass(frozen=True)
class Jury:
    personas: list[Persona]
    graph: SocialGraph
    composition: JuryComposition | None = None
    """who sits where, on which model, qualified or not (``qualify.py``); the case file records it at round 1"""

    @classmethod
    def from_settings(cls, settings: Settings, size: int | None = None) -> Jury:
        """The configured jury of ``jurors``, or of ``size`` (the appeal's panel: the first-instance
        personas and the file's reserves after them), unvetted."""
        n = size or settings.jurors
        personas = load_personas(n, settings.personas_file, settings.graph.seed)
        seats = [JurySeat(seat=k, persona=p.name, model=settings.model_for("juror", k)) for k, p in enumerate(personas)]
        return cls(
            personas=personas,
            graph=complete(n)
            if settings.social_graph == "complete"
            else small_world(n, settings.graph.out_degree, settings.graph.rewire_p, settings.graph.seed),
            composition=JuryComposition(qualification="off", status="unvetted", seats=seats),
        )

    def __len__(self) -> int:
        return len(self.personas)

    def voices(self, ballots: list[Ballot]) -> list[tuple[str, str, str]]:
        """Ballots as another juror or the summariser reads them: who, which side, why."""
        return [(self.personas[b.juror].name, b.vote, b.justification) for b in ballots]


def memory_for(juror: int, case_file: CaseFile) -> list[PrecedentRef]:
    """M_k: the top-K guidelines of the case's pool by match with this juror's persona
    (chosen at retrieval time, see precedents/retrieval.py)."""
    return case_file.precedents.memory_of(juror) if case_file.precedents else []


def juror_system(settings: Settings) -> str:
    return prompts.with_rules(prompts.JUROR_SYSTEM, prompts.rules_for(settings))


def juror_shared(
    case_file: CaseFile, focus: Focus | None, clues: list[Clue] | None, media: list[Part]
) -> list[Part | str]:
    """What every call of a juror begins with, its ballots and its JURIS sentence votes alike, so
    that the provider's cache serves them all: the case (and the appeal it judges), then its media."""
    precedents = case_file.precedents.cases if case_file.precedents else []
    return [prompts.case_prefix(case_file.case, focus, clues, precedents, case_file.appeal), *media]


async def run_round(case_file: CaseFile, jury: Jury, llm: LLM, settings: Settings) -> tuple[JuryRound, Usage]:
    if settings.deliberation == "court":
        return await run_court(case_file, llm, settings)
    round_no = len(case_file.rounds) + 1
    previous = case_file.rounds[-1] if case_file.rounds else None
    media = await attached_media(case_file, settings)
    ballot = lambda juror: _ballot(juror, round_no, previous, case_file, media, jury, llm, settings)  # noqa: E731
    # A provider's prompt cache is readable only once the first call that writes it has answered:
    # 17 simultaneous first-round calls would each pay to write the same case prefix.
    first = [await ballot(0)] if round_no == 1 and settings.warm_cache_first and len(jury) > 1 else []
    results = first + await gather_all(*(ballot(j) for j in range(len(first), len(jury))))
    ballots = [b for b, _ in results if isinstance(b, Ballot)]
    abstentions = [b for b, _ in results if isinstance(b, Abstention)]
    usage = sum((u for _, u in results), Usage())
    problems: list[str] = []
    if settings.round_summary and len(ballots) > 1:
        summary, summary_usage, problems = await _summarize(
            case_file, round_no, ballots, abstentions, jury, llm, settings
        )
    else:
        summary, summary_usage = tally(round_no, ballots, len(abstentions)), Usage()
    return JuryRound(
        round=round_no, ballots=ballots, summary=summary, abstentions=abstentions, problems=problems
    ), usage + summary_usage


def case_stages(case_file: CaseFile) -> tuple[Focus | None, list[Clue] | None]:
    """O_I and O_II as the jurors see them; clues None means stage II was off (media attached)."""
    return case_file.focus, case_file.clues.all() if case_file.clues is not None else None


async def own_stages(
    case_file: CaseFile, llm: LLM, settings: Settings
) -> tuple[Focus | None, list[Clue] | None, Usage]:
    """The naive configuration (``per_juror_stages``): a juror that shares nothing re-runs stages I-II."""
    focus, usage = await extract_focus(case_file.case, llm, settings) if settings.focus_stage else (None, Usage())
    if focus is None or not settings.clues_stage:
        return focus, None, usage
    chain, clue_usage, _ = await find_clues(case_file.case, focus, llm, settings)
    return focus, chain.all(), usage + clue_usage


async def _ballot(
    juror: int,
    round_no: int,
    previous: JuryRound | None,
    case_file: CaseFile,
    media: list[Part],
    jury: Jury,
    llm: LLM,
    settings: Settings,
) -> tuple[Ballot | Abstention, Usage]:
    """Juror ``juror``'s ballot for the round, or its abstention when its answer failed twice."""
    if settings.per_juror_stages:
        focus, clues, usage = await own_stages(case_file, llm, settings)
    else:
        (focus, clues), usage = case_stages(case_file), Usage()
    persona = jury.personas[juror]
    memory = memory_for(juror, case_file)
    # a neighbour that abstained last round has nothing to be read
    said = {b.juror: b for b in previous.ballots} if previous else {}
    neighbours = [said[j] for j in jury.graph.neighbours(juror) if j in said]
    summary = previous.summary if previous and settings.round_summary else None
    request = stage_request(
        "juror",
        settings,
        juror=juror,
        system=juror_system(settings),
        shared=juror_shared(case_file, focus, clues, media),
        # the persona and memory are the same in every round: a part of their own, cached across rounds
        own=[prompts.juror_own(persona.card(), memory, precedents=settings.precedent_backend != "none")],
        prompt=[prompts.juror_round(round_no, jury.voices(neighbours), summary.summary if summary else None)],
        task=JurorTask(
            case_file.case, focus, clues, juror, persona, memory, round_no, neighbours, summary, case_file.appeal
        ),
        case_id=case_file.case_id,
    )
    result = await ask_or_none(llm, request, BallotDraft)
    usage += result.usage
    if isinstance(result, NoAnswer):
        kind = "truncated" if result.kind == "truncated" else "invalid_output"
        return Abstention(juror=juror, round=round_no, model=request.model, kind=kind, detail=result.detail), usage
    draft = result.output
    # a juror can only rely on guidelines it was given; anything else it names is dropped
    known = {g.id: g.ref for g in memory}
    cited = [known[g.split("@")[0]] for g in draft.cited_guidelines if g.split("@")[0] in known]
    # what a juror relied on is what it listed and what its justification names, among the clues that exist
    clue_ids = {c.id for c in clues or []}
    relied = [c for c in dict.fromkeys([*draft.cited_clues, *clue_labels(draft.justification)]) if c in clue_ids]
    ballot = Ballot(
        **draft.model_dump(exclude={"cited_guidelines", "cited_clues"}),
        cited_clues=relied,
        cited_guidelines=list(dict.fromkeys(cited)),
        juror=juror,
        round=round_no,
        model=result.model,
    )
    return ballot, usage


def tally(round_no: int, ballots: list[Ballot], abstained: int = 0) -> RoundSummary:
    """A round without F_sum (one juror, summaries off, or a summary that failed): the count, and
    the majority's first reasons."""
    votes = Votes.of(ballots, abstained)
    lead = next((b for b in ballots if b.vote == votes.winner), None)
    side = lambda party: [b.justification for b in ballots if b.vote == party][:3]  # noqa: E731
    count = f"{votes.buyer} for the buyer, {votes.seller} for the seller" + (
        f", {abstained} abstained" if abstained else ""
    )
    if lead is None:
        text = f"No juror gave a valid ballot in round {round_no} ({abstained} abstained)."
    elif len(ballots) == 1 and not abstained:
        text = lead.justification
    else:
        text = f"{count}. {lead.justification}"
    return RoundSummary(
        summary=text,
        buyer_arguments=side("buyer"),
        seller_arguments=side("seller"),
        round=round_no,
        votes=votes,
    )


async def _summarize(
    case_file: CaseFile,
    round_no: int,
    ballots: list[Ballot],
    abstentions: list[Abstention],
    jury: Jury,
    llm: LLM,
    settings: Settings,
) -> tuple[RoundSummary, Usage, list[str]]:
    """F_sum over the round's valid ballots; a summary whose answer failed twice gives way to the
    tally, with a note (the round's votes are the ballots' either way)."""
    request = stage_request(
        "summary",
        settings,
        system=prompts.SUMMARY_SYSTEM,
        shared=[prompts.metadata_block(case_file.case, placeholders_note=False)],
        prompt=[prompts.summary_prompt(round_no, jury.voices(ballots))],
        task=SummaryTask(case_file.case, round_no, ballots),
        case_id=case_file.case_id,
    )
    result = await ask_or_none(llm, request, RoundSummaryDraft)
    if isinstance(result, NoAnswer):
        note = f"round {round_no}'s summary is the tally of its ballots: the summary {result.said()}"
        return tally(round_no, ballots, len(abstentions)), result.usage, [note]
    votes = Votes.of(ballots, len(abstentions))
    return RoundSummary(**result.output.model_dump(), round=round_no, votes=votes), result.usage, []


def majority_share(votes: Votes) -> float:
    """The larger side's share of the seats (an abstention agrees with no one)."""
    return max(votes.buyer, votes.seller) / max(votes.seats, 1)


def short_of_quorum(last: JuryRound, settings: Settings) -> int | None:
    """The quorum a round of ``last``'s seats needed, when it had fewer valid ballots; else None."""
    seats = len(last.ballots) + len(last.abstentions)
    need = min(settings.ballot_quorum or seats // 2 + 1, seats)
    return need if len(last.ballots) < need else None


def deliberation_over(case_file: CaseFile, settings: Settings) -> bool:
    """Whether the jury is done on its own: T rounds held, or the majority share reached delta."""
    if not case_file.rounds:
        return False
    if settings.deliberation == "court":  # the judge rules once
        return True
    if short_of_quorum(case_file.rounds[-1], settings) is not None:  # escalated: people decide, not more rounds
        return True
    early = settings.early_stop > 0 and majority_share(case_file.rounds[-1].votes) >= settings.early_stop
    return len(case_file.rounds) >= settings.rounds or early


def is_settled(case_file: CaseFile, settings: Settings) -> bool:
    """Done on its own, or stopped by the per-case budget after at least one round (never mid-round);
    by the rounds of the case's court (``stakes.py``), whoever asks."""
    settings = sitting(settings, case_file)
    return deliberation_over(case_file, settings) or round_stop(case_file, settings) is not None
