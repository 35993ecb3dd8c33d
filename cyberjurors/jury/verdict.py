"""The verdict: the final round's majority (seller iff seller votes > buyer votes, as in the paper),
with the clues and guidelines its majority cited and notes for a reader. Its justification is the
final round's summary, or what the verifier and JURIS made of it (``verify.py``, ``juris.py``)."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

from ..config import Settings
from ..config.catalog import PLUMBING_LABEL
from ..errors import plain
from ..llm.capabilities import plumbing_only
from ..schemas import Ballot, CaseFile, Clue, JuryRound, Usage, Verdict, Votes
from .budget import round_note, round_stop
from .consistency import consistency, consistency_note
from .escalation import escalate
from .qualify import with_votes
from .rounds import clue_labels, deliberation_over, memory_for, short_of_quorum
from .stakes import court_of, sitting

if TYPE_CHECKING:
    from .verify import Justified

VERDICT_NAMESPACE = uuid.UUID("5b0c6c1e-3f0e-4d8a-9a57-2f1c0c7e9d11")


def verdict_id(case_file: CaseFile) -> str:
    """The same case content always gets the same id, so consumers can dedupe replays (the
    digest is the case's, computed once at intake and carried on the case file); the second
    instance's is derived from the appeal it judges."""
    if case_file.appeal is not None:
        return str(uuid.uuid5(VERDICT_NAMESPACE, f"{case_file.case_id}:appeal:{case_file.appeal.appeal_id}"))
    return str(uuid.uuid5(VERDICT_NAMESPACE, f"{case_file.case_id}:{case_file.digest}"))


def decide(
    case_file: CaseFile, settings: Settings, decided_at: datetime, justified: Justified | None = None
) -> Verdict:
    """``justified``: the verified (or jury-voted) justification with what it cost; None = the
    final round's summary as it is."""
    settings = sitting(settings, case_file)  # the court's rounds and models, whoever calls
    court = court_of(case_file, settings)
    final = case_file.rounds[-1]
    votes = final.votes
    jury, weighted_winner = with_votes(case_file.jury, final) if case_file.jury else (None, None)
    winner = weighted_winner or votes.winner  # reweight: the weighted ballots decide (qualify.py)
    justification = justified.text if justified else final.summary.summary
    cited_clues, mentioned_clues, notes = verdict_clues(case_file, final, winner, justification)
    guidelines = Counter(g for b in final.ballots if b.vote == winner for g in b.cited_guidelines)
    precedents = case_file.precedents
    seated = [*(b.juror for b in final.ballots), *(a.juror for a in final.abstentions)]
    seen = sorted({ref for juror in seated for ref in (g.ref for g in memory_for(juror, case_file))})
    models = models_of(case_file, final, settings, justified)
    # deliberation that ended before it was over on its own ended for the budget
    stopped = None if deliberation_over(case_file, settings) else round_stop(case_file, settings)
    stops = [s for s in (case_file.budget_stop, stopped, justified and justified.stop) if s is not None]
    compared = consistency(case_file, winner, settings)
    appeal = case_file.appeal
    tokens = sum(case_file.usage.values(), justified.usage if justified else Usage())
    plumbing = sorted({m for m in models if plumbing_only(m, settings)} | set(tokens.plumbing_calls))
    if plumbing and not justification.startswith(PLUMBING_LABEL):
        justification = f"{PLUMBING_LABEL} {justification}"
    verdict = Verdict(
        verdict_id=verdict_id(case_file),
        case_id=case_file.case_id,
        instance=2 if appeal else 1,
        appeal_of=appeal.first_instance.verdict_id if appeal else None,
        category=case_file.case.metadata.category,
        winner=winner,
        votes=votes,
        margin=abs(votes.seller - votes.buyer),
        rounds_used=len(case_file.rounds),
        early_stopped=settings.deliberation == "jury"
        and len(case_file.rounds) < settings.rounds
        and not stopped
        and short_of_quorum(final, settings) is None,
        justification=justification,
        cited_clues=cited_clues,
        mentioned_clues=mentioned_clues,
        cited_precedents=[g for g, _ in guidelines.most_common()],
        precedents_seen=seen,
        precedent_coverage=precedents.coverage if precedents else "none",
        focus=case_file.focus.focus if case_file.focus else "",
        problems=[
            plain(p, 1000)
            for p in [
                *case_file.problems,
                *round_notes(case_file),
                *notes,
                *weighted_note(votes, winner),
                *([round_note(stopped, settings)] if stopped else []),
                *(justified.notes if justified else []),
                *([court.note] if court.note else []),
                *consistency_note(compared, winner),
                *reading_notes(tokens, plumbing),
            ]
        ],
        budget_reached=bool(stops),
        budget_stops=stops,
        votes_by_model=votes_by_model(final, settings),
        verification=justified.verification if justified else None,
        jury=jury,
        court=court,
        precedent_consistency=compared,
        captions_only=sorted(tokens.caption_calls),
        prompt_fitting=fitting_notes(tokens),
        stand_in=case_file.backend == "offline" or bool(plumbing),
        tokens=tokens,
        latency_s=round((decided_at - case_file.received_at).total_seconds(), 3),
        backend=case_file.backend,
        models=models,
        decided_at=decided_at,
    )
    return escalate(verdict, case_file, settings)


def models_of(case_file: CaseFile, final: JuryRound, settings: Settings, justified: Justified | None) -> list[str]:
    """Every model that had a part in the verdict: the shared stages', each seat's of the final
    round (abstaining ones too), and the justification's; the offline stand-in alone names itself."""
    if case_file.backend == "offline":
        return ["offline"]
    return sorted(
        {settings.model_for(r) for r in ("focus", "select", "perceive", "summary")}
        | {b.model for b in final.ballots}
        | {a.model for a in final.abstentions}
        | justifying_models(justified, settings)
    )


def round_notes(case_file: CaseFile) -> list[str]:
    """What went wrong in the rounds: each abstention (a juror whose answer failed twice), a summary
    that fell back to the tally, and a final round that gave no valid ballot at all."""
    notes = []
    for held in case_file.rounds:
        for a in held.abstentions:
            how = "was cut at the output limit" if a.kind == "truncated" else "did not fit the ballot's schema"
            notes.append(
                f"round {held.round}: juror {a.juror} ({a.model}) abstained: its answer {how} when asked and "
                f"when asked again; the round's votes count it as an abstention, not a vote"
            )
        notes += held.problems
    final = case_file.rounds[-1]
    if not final.ballots:
        notes.append(
            f"round {final.round} gave no valid ballot: the buyer wins by the tie rule on 0 votes to 0, and "
            "the verdict stands on nothing the jury said"
        )
    return notes


def fitting_notes(tokens: Usage) -> list[str]:
    """Each way a prompt was cut to fit a model's window, with how many calls it was cut so."""
    return [f"{how} ({n} call{'s' if n != 1 else ''})" for how, n in sorted(tokens.fitted_calls.items())]


def reading_notes(tokens: Usage, plumbing: list[str]) -> list[str]:
    """What a reader needs to know of what the models could read, and of what they are."""
    notes = []
    if tokens.caption_calls:
        roles = ", ".join(sorted(tokens.caption_calls))
        notes.append(f"{roles} read the photos and videos as their labels and captions only: the model reads no images")
    notes += [f"prompt fitted to the model's context window: {n}" for n in fitting_notes(tokens)]
    if plumbing:
        notes.append(
            f"{', '.join(plumbing)}: a tiny model that shows the plumbing works; its votes and justification "
            "are not judgement"
        )
    return notes


def weighted_note(votes: Votes, winner: str) -> list[str]:
    """Said when the weighted ballots (reweight) decided against the head count."""
    if winner == votes.winner:
        return []
    return [
        f"the {winner} wins by the jurors' qualification weights, against a head count of {votes.buyer} for "
        f"the buyer and {votes.seller} for the seller"
    ]


def justifying_models(justified: Justified | None, settings: Settings) -> set[str]:
    """The models that verified or drafted the justification, when any did."""
    if justified is None or not justified.usage.calls:
        return set()
    drafters = {settings.model_for("draft", n) for n in range(2)} if settings.justification == "juris" else set()
    return {settings.model_for("verify")} | drafters


def votes_by_model(final: JuryRound, settings: Settings) -> dict[str, Votes]:
    """The final round's votes by the model each juror seat was given (``juror_models``, round
    robin; the court's judge has the juror role's model). Keyed by the configured name, so a
    provider answering with a dated name, or a stand-in answering for every model, still groups by seat."""
    seat = (
        (lambda b: settings.model_for("juror", b.juror))
        if settings.deliberation == "jury"
        else (lambda b: settings.model_for("juror"))
    )
    by_model: dict[str, list[Ballot]] = {}
    for ballot in final.ballots:
        by_model.setdefault(seat(ballot), []).append(ballot)
    abstained = Counter(settings.model_for("juror", a.juror) for a in final.abstentions)
    return {
        model: Votes.of(by_model.get(model, []), abstained[model])
        for model in sorted(by_model.keys() | abstained.keys())
    }


def verdict_clues(
    case_file: CaseFile, final: JuryRound, winner: str, justification: str | None = None
) -> tuple[list[Clue], list[Clue], list[str]]:
    """The clues the majority cited (most cited first), the other clues the justification (the
    round summary unless given) names, e.g. the minority's as the summary reports them, and notes
    for a reader: a majority that cited nothing, a label that is no clue of this case."""
    clues = {c.id: c for c in (case_file.clues.all() if case_file.clues else [])}
    cited = Counter(c for b in final.ballots if b.vote == winner for c in b.cited_clues if c in clues)
    cited_clues = [clues[c] for c, _ in cited.most_common()]
    named = clue_labels(final.summary.summary if justification is None else justification)
    mentioned = [clues[c] for c in named if c in clues and c not in cited]
    notes = []
    if clues and not cited_clues:
        notes.append(f"the {winner}'s majority cited no clue of the clue chain")
    unknown = [c for c in named if c not in clues]
    if unknown:
        notes.append(
            "the justification names "
            + ", ".join(f"[{c}]" for c in unknown)
            + ", which "
            + ("is" if len(unknown) == 1 else "are")
            + " no clue of this case"
        )
    return cited_clues, mentioned, notes
