"""The AgentsCourt-style reference baseline: two advocates debate, then one judge rules.

Not the CyberJurors method; it is here so the evaluation can put the paper's courtroom
comparison beside the jury on the same cases. The buyer's advocate opens each turn and the
seller's answers it; after ``court_rounds`` turns each, the judge reads the case and the debate
and gives one ballot. The result is one ``JuryRound`` with the judge's ballot (a 1:0 "vote
split", which the metrics treat as no split) and the debate kept in its summary's arguments.
"""

from __future__ import annotations

from ..config import Settings
from ..llm.port import LLM, Part, TextPart, stage_request
from ..schemas import (
    Argument,
    ArgumentDraft,
    Ballot,
    BallotDraft,
    CaseFile,
    Clue,
    Focus,
    JuryRound,
    Party,
    RoundSummary,
    Usage,
    Votes,
)
from . import prompts
from .answers import ask
from .clues import attached_media
from .model_inputs import AdvocateTask, JudgeTask


async def run_court(case_file: CaseFile, llm: LLM, settings: Settings) -> tuple[JuryRound, Usage]:
    focus = case_file.focus
    clues = case_file.clues.all() if case_file.clues is not None and settings.clues_stage else None
    media = await attached_media(case_file, settings)
    rules = prompts.rules_for(settings)
    prefix = prompts.case_prefix(case_file.case, focus, clues, [], case_file.appeal)
    shared = [TextPart(prefix, prefix.spans), *media]
    debate: list[Argument] = []
    usage = Usage()
    for turn in range(1, settings.court_rounds + 1):
        for party in ("buyer", "seller"):
            argument, spent = await _argue(case_file, focus, clues, party, turn, debate, shared, rules, llm, settings)
            debate.append(argument)
            usage += spent
    request = stage_request(
        "judge",
        settings,
        system=prompts.with_rules(prompts.JUDGE_SYSTEM, rules),
        shared=shared,
        prompt=[prompts.judge_prompt(debate)],
        task=JudgeTask(case_file.case, focus, clues, list(debate)),
        case_id=case_file.case_id,
    )
    result = await ask(llm, request, BallotDraft)
    draft = result.output
    ballot = Ballot(
        **draft.model_dump(exclude={"cited_guidelines"}), cited_guidelines=[], juror=0, round=1, model=result.model
    )
    votes = Votes.of([ballot])
    summary = RoundSummary(
        summary=ballot.justification,
        round=1,
        votes=votes,
        buyer_arguments=[a.statement for a in debate if a.party == "buyer"],
        seller_arguments=[a.statement for a in debate if a.party == "seller"],
    )
    return JuryRound(round=1, ballots=[ballot], summary=summary), usage + result.usage


async def _argue(
    case_file: CaseFile,
    focus: Focus | None,
    clues: list[Clue] | None,
    party: Party,
    turn: int,
    debate: list[Argument],
    shared: list[Part],
    rules: str | None,
    llm: LLM,
    settings: Settings,
) -> tuple[Argument, Usage]:
    request = stage_request(
        "advocate",
        settings,
        system=prompts.with_rules(prompts.advocate_system(party), rules),
        shared=shared,
        prompt=[prompts.advocate_prompt(party, turn, debate)],
        task=AdvocateTask(case_file.case, focus, clues, party, turn, list(debate)),
        case_id=case_file.case_id,
    )
    result = await ask(llm, request, ArgumentDraft)
    known = {i.id for i in case_file.case.items()}
    cited = [e for e in result.output.cited_evidence if e in known]  # an advocate cannot cite what is not there
    return Argument(statement=result.output.statement, cited_evidence=cited, party=party, turn=turn), result.usage
