"""The letters stage: after a verdict (and after an appeal's), one letter per party, in plain language
and in that party's language (``locales.py``): what was decided and the remedy, the evidence that
decided it, what the other side showed, and what the party can do next.

A model writes each letter through the LLM port (role ``letter``) as statements, each citing the
sources it rests on: the verdict's clues, the guidelines its majority cited, and four fixed sources
code states itself (``verdict``, ``recourse``, ``order``, ``confidential``). Before a letter is
sent, every statement is checked as the justification is: an automatic check always (a statement
that cites nothing, cites an id that is no source of this letter, or cites evidence the other party
submitted in confidence is removed), then, when the verifier is on, the verifier reads each claim
against its sources and what it rejects is removed too; nothing is revised, so no unchecked text is
added after the check. A letter the check leaves without its decision or its next steps gets them
back from the fixed sentences (``letter_text.py``), which state only what code knows.

What the other party submitted privately (``EvidenceItem.private``) reaches the letter's model only as
``letter_private_evidence`` allows: withheld, it is not in the task at all (neither a prompt nor the
offline stand-in can repeat it); mentioned, only its count is.

The offline stand-in writes a template letter from the same fixed sentences, labelled as such.

A letter is written, checked and returned with the placeholders the model read; the letters stage
sends each party's with that party's own values back (``own_words.py``, ``streams/letters.py``).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from ..config import JurySettings, LLMSettings, Settings
from ..llm.port import LLM, stage_request
from ..schemas import (
    LETTER_SECTIONS,
    PARTIES,
    CaseFile,
    Clue,
    DisputeCase,
    LetterCheck,
    LetterDraft,
    LetterSection,
    LetterStatement,
    Party,
    PartyLetter,
    RemovedStatement,
    Usage,
    Verdict,
    VerificationDraft,
    now,
)
from ..schemas.letters import CONFIDENTIAL_SOURCE, FIXED_SOURCES, RECOURSE_SOURCE, VERDICT_SOURCE, DraftedLetter
from . import prompts
from .answers import ask
from .letter_text import OTHER, TEMPLATE_LOCALES, language_name, lower_first, phrases, shown_date
from .locales import LetterLocale, letter_locale
from .model_inputs import LetterFacts, LetterSource, LetterTask, LetterVerifyTask
from .stages import seen
from .verify import remove_claims

LETTER_NAMESPACE = uuid.UUID("0d7c1f43-5a52-4b7e-8f0e-3c1b6e2a9d40")
BRACKETED = re.compile(r"\s*\[([A-Za-z0-9._:@-]+)\]")
ID_SHAPE = re.compile(r"^(?:[bs]\d+(?:-\d+)*|g-[\w.:@-]+)$")
QUOTE_CHARS = 160
"""how much of a party's own words a template letter quotes for one item"""
SOURCES_SHOWN = 3
"""items a template letter describes per section: the few that decided, not the whole file"""


def letter_id(verdict_id: str, party: Party) -> str:
    """The same verdict always gives each party the same letter id, so a platform dedupes re-sends."""
    return str(uuid.uuid5(LETTER_NAMESPACE, f"{verdict_id}:{party}"))


def letter_facts(verdict: Verdict, party: Party, case: DisputeCase, settings: JurySettings) -> LetterFacts:
    """The decision, the remedy and what comes next, from the verdict and the appeal window."""
    window = settings.appeal_window_s if verdict.instance == 1 else 0
    return LetterFacts(
        party=party,
        winner=verdict.winner,
        votes=verdict.votes,
        remedy=case.metadata.requested_remedy,
        appeal_until=verdict.decided_at + timedelta(seconds=window) if window > 0 else None,
        final=window <= 0,
        under_review=verdict.escalated,
    )


def _verdict_clues(verdict: Verdict) -> list[tuple[Clue, bool]]:
    """The verdict's clues, each once: the cited ones (most cited first), then the ones only named."""
    seen: dict[str, tuple[Clue, bool]] = {}
    for clue, cited in [*((c, True) for c in verdict.cited_clues), *((c, False) for c in verdict.mentioned_clues)]:
        seen.setdefault(clue.id, (clue, cited))
    return list(seen.values())


def _submitted_at(case: DisputeCase, evidence_id: str) -> datetime | None:
    return next((r.submitted_at for r in case.rounds if any(i.id == evidence_id for i in r.items)), None)


def letter_task(
    case_file: CaseFile, verdict: Verdict, party: Party, locale: str, settings: Settings
) -> tuple[LetterTask, list[str], set[str]]:
    """The task of ``party``'s letter; the ids of the other party's private evidence it does not
    disclose; and the ids of the verdict's clues found in that evidence."""
    case, policy, other = case_file.case, settings.letter_private_evidence, OTHER[party]
    private = {i.id for i in case.items(other) if i.private} if policy != "disclose" else set()
    sources: list[LetterSource] = []
    withheld: set[str] = set()
    for clue, by_majority in _verdict_clues(verdict):
        if clue.evidence_id in private:
            withheld.add(clue.id)
            continue
        try:
            item = case.item(clue.evidence_id)
        except KeyError:  # a clue of evidence the record no longer holds: described by the clue alone
            item = None
        sources.append(LetterSource(clue, item, _submitted_at(case, clue.evidence_id), by_majority))
    facts = letter_facts(verdict, party, case, settings)
    if policy == "mention" and private:
        facts = replace(facts, confidential=len(private))
    cited = set(verdict.cited_precedents)
    pool = case_file.precedents.guidelines if case_file.precedents else []
    task = LetterTask(
        case_id=verdict.case_id,
        metadata=case.metadata,
        facts=facts,
        locale=locale,
        sources=sources,
        guidelines=[g for g in pool if g.ref in cited or g.id in cited],
        cited_guidelines=list(verdict.cited_precedents),
        submitted={p: len([i for i in case.items(p) if i.id not in private]) for p in ("buyer", "seller")},
    )
    return task, sorted(private), withheld


async def draft_letter(task: LetterTask, llm: LLM, settings: LLMSettings) -> DraftedLetter:
    """The model's letter (one ``letter`` call): what the check then reads."""
    request = stage_request(
        "letter",
        settings,
        system=prompts.LETTER_SYSTEM,
        shared=[prompts.letter_sources(task)],
        prompt=[prompts.letter_prompt(task, language_name(task.locale))],
        task=task,
        case_id=task.case_id,
    )
    result = await ask(llm, request, LetterDraft)
    return DraftedLetter(draft=result.output, usage=result.usage, model=result.model, backend=llm.backend)


def allowed_sources(task: LetterTask) -> set[str]:
    """Every id a statement of this letter may cite: a clue by its id or its evidence item's."""
    fixed = {s for s in FIXED_SOURCES if s != CONFIDENTIAL_SOURCE or task.facts.confidential}
    guidelines = {g for ref in task.cited_guidelines for g in (ref, ref.split("@")[0])}
    return fixed | {i for s in task.sources for i in (s.clue.id, s.clue.evidence_id)} | guidelines


def _bracketed_ids(text: str, allowed: set[str]) -> list[str]:
    """The ids a statement writes in its text in brackets: a source of the letter, or what has the
    shape of one (a clue or evidence id, a guideline id), so a dangling one is caught, not shown."""
    return [i for i in BRACKETED.findall(text) if i in allowed or ID_SHAPE.match(i)]


def check_ids(
    statements: list[LetterStatement], task: LetterTask, withheld: set[str]
) -> tuple[list[LetterStatement], list[RemovedStatement]]:
    """The automatic check: every statement cites at least one source, and only sources of this letter.
    Ids written into a statement's text in brackets count as cited, and are taken out of the text.
    ``withheld`` holds the ids of what the letter may not disclose: the other party's private items
    and the clues found in them."""
    allowed = allowed_sources(task)
    kept: list[LetterStatement] = []
    removed: list[RemovedStatement] = []
    for statement in statements:
        written = _bracketed_ids(statement.text, allowed)
        cites = list(dict.fromkeys([*statement.cites, *written]))
        text = " ".join(re.sub(r"\s*\[(" + "|".join(map(re.escape, written)) + r")\]", "", statement.text).split())
        text = text if written else " ".join(statement.text.split())
        reason = (
            "uncited"
            if not cites
            else "withheld"
            if any(c in withheld for c in cites)
            else "dangling"
            if any(c not in allowed for c in cites)
            else None
        )
        if reason is not None or not text:
            removed.append(RemovedStatement(text=text or statement.text, cites=cites, reason=reason or "uncited"))
        else:
            kept.append(LetterStatement(section=statement.section, text=text, cites=cites))
    return kept, removed


async def verify_statements(
    task: LetterTask, statements: list[LetterStatement], llm: LLM, settings: LLMSettings
) -> tuple[list[LetterStatement], list[RemovedStatement], Usage]:
    """The verifier's reading of the statements the automatic check kept (one ``verify`` call): the
    statements holding a claim it names are removed, by string matching as for the justification."""
    if not statements:
        return statements, [], Usage()
    verify_task = LetterVerifyTask(task, statements)
    request = stage_request(
        "verify",
        settings,
        system=prompts.LETTER_VERIFY_SYSTEM,
        shared=[prompts.letter_sources(task)],
        prompt=[prompts.letter_verify_prompt(verify_task)],
        task=verify_task,
        case_id=task.case_id,
    )
    result = await ask(llm, request, VerificationDraft)
    if result.output.decision == "pass":
        return statements, [], result.usage
    claims = result.output.untraceable_claims
    kept, removed = [], []
    for statement in statements:
        if claims and remove_claims(statement.text, claims)[1]:
            removed.append(RemovedStatement(text=statement.text, cites=statement.cites, reason="untraceable"))
        else:
            kept.append(statement)
    return kept, removed, result.usage


def _item_phrase(source: LetterSource, party: Party, locale: str) -> str:
    """An item as the party knows it: "Your photo (22/09/2026)", "The seller's message"."""
    said = phrases(locale)
    kind = source.item.kind if source.item is not None else source.clue.evidence_kind
    name = said["own"] if source.clue.party == party else said["theirs"][source.clue.party]
    when = shown_date(source.submitted_at, locale)
    return f"{name.get(kind, name['text'])}{f' ({when})' if when else ''}"


def _quoted(source: LetterSource) -> str:
    words = " ".join((source.item.text if source.item is not None and source.item.text else "").split())
    return f": “{words[:QUOTE_CHARS]}{'…' if len(words) > QUOTE_CHARS else ''}”" if words else ""


def fixed_statements(task: LetterTask, section: LetterSection) -> list[LetterStatement]:
    """The fixed sentences of one section, in the letter's language (English without a template)."""
    said, facts, locale = phrases(task.locale), task.facts, task.locale
    other = OTHER[facts.party]
    if section == "decision":
        votes = said["votes"].format(
            n=getattr(facts.votes, facts.winner), total=facts.votes.seats, winner=said["winner"][facts.winner]
        )
        remedy = said["granted" if facts.granted else "refused"].format(remedy=" ".join(facts.remedy.split()))
        return [
            LetterStatement(
                section=section, text=f"{said['won' if facts.won else 'lost']} {votes}", cites=[VERDICT_SOURCE]
            ),
            LetterStatement(section=section, text=remedy, cites=[VERDICT_SOURCE]),
        ]
    if section == "evidence":
        cited = [s for s in task.sources if s.cited][:SOURCES_SHOWN]
        if not cited:
            return [LetterStatement(section=section, text=said["evidence_none"], cites=[VERDICT_SOURCE])]
        return [
            LetterStatement(
                section=section, text=f"{_item_phrase(s, facts.party, locale)}{_quoted(s)}", cites=[s.clue.id]
            )
            for s in cited
        ]
    if section == "other_side":
        theirs = [s for s in task.sources if s.clue.party == other][:SOURCES_SHOWN]
        shown = (
            [
                LetterStatement(
                    section=section,
                    text=said["showed"][other].format(
                        items=", ".join(lower_first(_item_phrase(s, facts.party, locale)) for s in theirs)
                    ),
                    cites=[s.clue.id for s in theirs],
                )
            ]
            if theirs
            else [LetterStatement(section=section, text=said["other_none"][other], cites=[VERDICT_SOURCE])]
        )
        if facts.confidential:
            text = said["confidential"][other].format(n=facts.confidential)
            shown.append(LetterStatement(section=section, text=text, cites=[CONFIDENTIAL_SOURCE]))
        return shown
    return _next_steps(task)


def _next_steps(task: LetterTask) -> list[LetterStatement]:
    said, facts = phrases(task.locale), task.facts
    steps = []
    if facts.under_review:
        steps.append(LetterStatement(section="next_steps", text=said["review"], cites=[RECOURSE_SOURCE]))
    if facts.appeal_until is not None:
        deadline = shown_date(facts.appeal_until, task.locale, deadline=True)
        text = (
            said["appeal_other"][OTHER[facts.party]].format(deadline=deadline)
            if facts.won
            else said["appeal_you"].format(deadline=deadline)
        )
        steps.append(LetterStatement(section="next_steps", text=text, cites=[RECOURSE_SOURCE]))
    else:
        steps.append(LetterStatement(section="next_steps", text=said["final"], cites=[RECOURSE_SOURCE]))
    return steps


def template_draft(task: LetterTask, label: str) -> LetterDraft:
    """The offline stand-in's letter: the fixed sentences of every section, ``label`` on the subject and
    on the first statement, so no reader takes it for a model's writing."""
    statements = [s for section in LETTER_SECTIONS for s in fixed_statements(task, section)]
    statements[0] = statements[0].model_copy(update={"text": f"{label} {statements[0].text}"})
    subject = phrases(task.locale)["subject"].format(product=" ".join(task.metadata.product.split())[:120])
    return LetterDraft(subject=f"{label} {subject}", statements=statements)


def completed(statements: list[LetterStatement], task: LetterTask) -> tuple[list[LetterStatement], list[LetterSection]]:
    """The statements in section order, with the fixed sentences for a decision or next steps the
    check left empty (every letter says what was decided and what comes next)."""
    added: list[LetterSection] = [
        section for section in ("decision", "next_steps") if not any(s.section == section for s in statements)
    ]
    pool = [*statements, *(s for section in added for s in fixed_statements(task, section))]
    return [s for section in LETTER_SECTIONS for s in pool if s.section == section], added


def body(statements: list[LetterStatement]) -> str:
    """The letter as the party reads it: a paragraph per section, in section order; the evidence one
    item a line."""
    paragraphs = [
        ("\n" if section == "evidence" else " ").join(s.text for s in statements if s.section == section)
        for section in LETTER_SECTIONS
    ]
    return "\n\n".join(p for p in paragraphs if p)


@dataclass(frozen=True)
class Prepared:
    """One party's letter before the model writes it: the task, its language, and what it withholds."""

    task: LetterTask
    locale: LetterLocale
    withheld_evidence: list[str]
    withheld_clues: set[str]
    notes: list[str]


def prepare(case_file: CaseFile, verdict: Verdict, party: Party, settings: Settings) -> Prepared:
    """The letter's language, what it may say, and notes for the platform; no model call."""
    case = case_file.case
    language = letter_locale(case, party, settings)
    # the model reads the case as the jury did, minimised (the language is detected from the text as written)
    task, withheld_evidence, withheld_clues = letter_task(
        seen(case_file, settings), verdict, party, language.locale, settings
    )
    notes = list(language.notes)
    if not case.items(party) and not any("sent no messages" in n for n in notes):
        notes.append(f"the {party} sent no messages or evidence in this case")
    if withheld_clues:
        notes.append(
            f"{len(withheld_clues)} clue(s) of the verdict rest on evidence the {OTHER[party]} submitted in "
            f"confidence; this letter does not describe it (letter_private_evidence="
            f"{settings.letter_private_evidence})"
        )
    return Prepared(task, language, withheld_evidence, withheld_clues, notes)


async def finish_letter(
    prepared: Prepared,
    drafted: DraftedLetter,
    verdict: Verdict,
    llm: LLM,
    settings: Settings,
    written_at: datetime | None = None,
) -> PartyLetter:
    """Check the drafted letter (the ids always, the verifier when on: a ``verify`` call), complete a
    decision or next steps the check left empty, and make the record sent to the party."""
    task = prepared.task
    withheld = prepared.withheld_clues | set(prepared.withheld_evidence)
    kept, removed = check_ids(drafted.draft.statements, task, withheld)
    usage, checked_by = drafted.usage, "ids"
    if settings.verifies:
        kept, untraceable, spent = await verify_statements(task, kept, llm, settings)
        removed, usage, checked_by = [*removed, *untraceable], usage + spent, "verifier"
    statements, added = completed(kept, task)
    notes = list(prepared.notes)
    if added and task.locale not in TEMPLATE_LOCALES:
        notes.append(f"the {', '.join(added)} written from the English template: there is none in {task.locale}")
    facts = task.facts
    subject = " ".join(BRACKETED.sub("", drafted.draft.subject).split()) or phrases(task.locale)["subject"].format(
        product=task.metadata.product[:120]
    )
    return PartyLetter(
        letter_id=letter_id(verdict.verdict_id, facts.party),
        case_id=verdict.case_id,
        verdict_id=verdict.verdict_id,
        instance=verdict.instance,
        party=facts.party,
        locale=task.locale,
        locale_source=prepared.locale.source,
        requested_locale=prepared.locale.requested,
        outcome="won" if facts.won else "lost",
        remedy=" ".join(facts.remedy.split()),
        appeal_until=facts.appeal_until,
        final=facts.final,
        under_review=facts.under_review,
        subject=subject,
        body=body(statements),
        statements=statements,
        check=LetterCheck(
            status="corrected" if removed else "passed", checked_by=checked_by, removed=removed, added=added
        ),
        withheld_evidence=prepared.withheld_evidence,
        notes=notes,
        backend=drafted.backend,
        model=drafted.model,
        tokens=usage,
        written_at=written_at or now(),
    )


async def write_letter(
    case_file: CaseFile, verdict: Verdict, party: Party, llm: LLM, settings: Settings
) -> PartyLetter:
    """One party's letter in this process, no Kafka (the tests, the benchmarks); the worker runs the
    same steps with each stored (``streams/letters.py``)."""
    prepared = prepare(case_file, verdict, party, settings)
    drafted = await draft_letter(prepared.task, llm, settings)
    return await finish_letter(prepared, drafted, verdict, llm, settings)


async def write_letters(case_file: CaseFile, verdict: Verdict, llm: LLM, settings: Settings) -> list[PartyLetter]:
    """Both parties' letters, the buyer's first."""
    return [await write_letter(case_file, verdict, party, llm, settings) for party in PARTIES]
