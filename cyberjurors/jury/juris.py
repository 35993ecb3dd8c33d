"""The jury-voted justification (JURIS, ``justification = juris``).

Two drafters (role ``draft``; ``juris_drafter_models`` seats them on different models) propose
candidate sentences for the verdict's justification from the majority's justifications; the first
``juris.voters`` jurors (the paper's K = 5) each accept or leave out every sentence in one
structured call, sent with their own system prompt and case prefix so it reads the prefix their
ballots cached; a sentence that more than half of them accept is selected; the editor (role
``summary``) consolidates the selected sentences without adding facts. The verifier then checks
the result like any justification (``verify.py``).

One pass instead of the paper's sentence-by-sentence loop (drafters and jury per sentence): each
extra sentence would cost two drafts and K votes more, and the verifier that follows checks what
a sentence loop would have guarded. Calls per case: 2 drafts + K votes + 1 edit.
"""

from __future__ import annotations

from collections import Counter
from itertools import zip_longest

from ..config import Settings
from ..llm.port import LLM, gather_all, stage_request
from ..schemas import CandidateSentences, JustificationDraft, SentenceVotes, Usage
from . import prompts
from .answers import NoAnswer, output_or_none
from .clues import attached_media
from .model_inputs import DraftTask, EditTask, SentenceVoteTask
from .rounds import Jury, juror_shared, juror_system
from .verify import Grounds

DRAFTERS = ("A", "B")


async def juris(grounds: Grounds, jury: Jury, llm: LLM, settings: Settings) -> tuple[str | None, Usage, list[str]]:
    """The consolidated justification (None, with a note, when no sentence was proposed or
    selected: the round summary stands), the usage, and notes for the verdict."""
    drafts = await gather_all(*(draft(n, grounds, llm, settings) for n in range(len(DRAFTERS))))
    usage = sum((u for _, u in drafts), Usage())
    # a drafter whose answer failed twice proposes nothing; a voter, abstains from the sentence vote
    notes = [
        f"JURIS: drafter {DRAFTERS[n]} proposed nothing: {d.said()}"
        for n, (d, _) in enumerate(drafts)
        if isinstance(d, NoAnswer)
    ]
    proposed = [d if isinstance(d, CandidateSentences) else CandidateSentences(sentences=[]) for d, _ in drafts]
    candidates = interleaved(proposed, settings.juris.max_sentences)
    if not candidates:
        return None, usage, [*notes, "JURIS: the drafters proposed no sentence; the justification is the round summary"]
    seats = range(min(settings.juris.voters, len(jury)))
    answers = await gather_all(*(vote(k, candidates, grounds, jury, llm, settings) for k in seats))
    usage += sum((u for _, u in answers), Usage())
    votes = [v for v, _ in answers if isinstance(v, SentenceVotes)]
    notes += [
        f"JURIS: juror {k} abstained from the sentence vote: {v.said()}"
        for k, (v, _) in zip(seats, answers, strict=True)
        if isinstance(v, NoAnswer)
    ]
    accepted = Counter(sid for ballot in votes for sid in set(ballot.accepted) if sid in candidates)
    selected = {sid: text for sid, text in candidates.items() if 2 * accepted[sid] > len(votes)}
    if not selected:
        return (
            None,
            usage,
            [
                *notes,
                f"JURIS: no candidate sentence was accepted by a majority of the {len(votes)} voting "
                "jurors; the justification is the round summary",
            ],
        )
    edited, edit_usage = await edit(selected, grounds, llm, settings)
    if isinstance(edited, NoAnswer):
        notes.append(f"JURIS: the accepted sentences stand unedited: the editor {edited.said()}")
        return " ".join(selected.values()), usage + edit_usage, notes
    return edited, usage + edit_usage, notes


def interleaved(drafts: list[CandidateSentences], limit: int) -> dict[str, str]:
    """id -> sentence, A1, B1, A2, B2, ...: each drafter's first (strongest) sentences first."""
    own = [
        [(f"{DRAFTERS[n]}{i}", s.strip()) for i, s in enumerate(d.sentences[:limit], 1) if s.strip()]
        for n, d in enumerate(drafts)
    ]
    merged: dict[str, str] = {}
    for pair in zip_longest(*own):
        merged |= dict(entry for entry in pair if entry is not None)
    return merged


async def draft(
    drafter: int, grounds: Grounds, llm: LLM, settings: Settings
) -> tuple[CandidateSentences | NoAnswer, Usage]:
    prompt = prompts.draft_prompt(grounds.verdict_line(), grounds.voices, settings.juris.max_sentences)
    task = DraftTask(*grounds.told(), drafter, settings.juris.max_sentences)
    return await grounds.ask(
        llm, "draft", settings, prompts.DRAFT_SYSTEM, prompt, task, CandidateSentences, juror=drafter
    )


async def vote(
    juror: int, candidates: dict[str, str], grounds: Grounds, jury: Jury, llm: LLM, settings: Settings
) -> tuple[SentenceVotes | NoAnswer, Usage]:
    """One juror's accepted sentences. Same system prompt, case prefix and model as its ballots."""
    case_file = grounds.case_file
    media = await attached_media(case_file, settings)
    persona = jury.personas[juror]
    request = stage_request(
        "juror",
        settings,
        juror=juror,
        system=juror_system(settings),
        shared=juror_shared(case_file, grounds.focus, grounds.clues, media),
        prompt=[prompts.vote_prompt(persona.card(), grounds.verdict_line(), candidates)],
        task=SentenceVoteTask(
            grounds.case, grounds.focus, grounds.clues, juror, persona, grounds.winner, grounds.votes, candidates
        ),
        case_id=grounds.case.case_id,
    )
    return await output_or_none(llm, request, SentenceVotes)


async def edit(
    selected: dict[str, str], grounds: Grounds, llm: LLM, settings: Settings
) -> tuple[str | NoAnswer, Usage]:
    request = stage_request(
        "summary",
        settings,
        system=prompts.EDIT_SYSTEM,
        shared=[prompts.metadata_block(grounds.case, placeholders_note=False)],
        prompt=[prompts.edit_prompt(grounds.verdict_line(), selected)],
        task=EditTask(grounds.case, grounds.winner, grounds.votes, selected),
        case_id=grounds.case.case_id,
    )
    answer, usage = await output_or_none(llm, request, JustificationDraft)
    if isinstance(answer, NoAnswer):
        return answer, usage
    return answer.justification.strip() or " ".join(selected.values()), usage
