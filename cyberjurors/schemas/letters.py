"""Letters to the parties: after each verdict (and an appeal's), one letter per party, in plain
language and in that party's language, on ``disputes.letters``.

``LetterDraft`` is what a model is asked to return: statements, each in one section of the letter
and citing the sources it rests on. ``PartyLetter`` is the record the letters stage sends: the
statements that passed the check, the text the party reads, and what was removed or withheld, and
why, for the platform.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, get_args

from pydantic import Field

from .bounds import Line, Passage, Ref, first
from .case import SCHEMA_VERSION, Party, Record
from .reasoning import Usage

LetterSection = Literal["decision", "evidence", "other_side", "next_steps"]
LETTER_SECTIONS: tuple[LetterSection, ...] = get_args(LetterSection)
# the sources a statement may cite besides the verdict's clue ids and guideline ids
VERDICT_SOURCE = "verdict"
"""what was decided: the winner, the votes, the remedy"""
RECOURSE_SOURCE = "recourse"
"""what the party can do next: appeal until a date, a human panel's review, or final"""
ORDER_SOURCE = "order"
"""the order record: product, amount, dates, the requested remedy, who submitted how much"""
CONFIDENTIAL_SOURCE = "confidential"
"""that the other party submitted evidence in confidence (letter_private_evidence = mention)"""
FIXED_SOURCES = (VERDICT_SOURCE, RECOURSE_SOURCE, ORDER_SOURCE, CONFIDENTIAL_SOURCE)


class LetterStatement(Record):
    """One statement of a letter: plain language for the party, with what it rests on."""

    section: LetterSection = Field(
        description="decision: what was decided and the remedy; evidence: the evidence that decided it; "
        "other_side: what the other party showed; next_steps: what the party can do now"
    )
    text: Passage = Field(description="one or two plain sentences in the letter's language, without ids or brackets")
    cites: Annotated[list[Ref], first(8), Field(max_length=8)] = Field(
        default_factory=list,
        description="the ids it rests on: clue ids (b1, s2), guideline ids, or verdict, recourse, order, confidential",
    )


class LetterDraft(Record):
    """A letter as the model writes it."""

    subject: Line = Field(description="a short subject line in the letter's language")
    statements: Annotated[list[LetterStatement], first(16), Field(max_length=16)] = Field(
        description="the letter, statement by statement, in reading order"
    )


class RemovedStatement(Record):
    text: str
    cites: list[str] = Field(default_factory=list)
    reason: Literal["uncited", "dangling", "withheld", "untraceable"] = Field(
        description="uncited: it cites nothing; dangling: it cites an id that is no source of this letter; "
        "withheld: it cites evidence the other party submitted in confidence; untraceable: the verifier "
        "found a claim in it that its sources do not support"
    )


class LetterCheck(Record):
    """How the letter's claims were checked, and what the check took out."""

    status: Literal["passed", "corrected"] = Field(
        description="passed: every statement traced; corrected: statements were removed (listed)"
    )
    checked_by: Literal["ids", "verifier"] = Field(
        description="ids: every cited id must be a source of the letter (the verifier off); verifier: that, "
        "then the verifier's reading of each claim against its sources"
    )
    removed: list[RemovedStatement] = Field(default_factory=list)
    added: list[LetterSection] = Field(
        default_factory=list,
        description="sections the check left empty, written from the fixed template so the letter still says "
        "what was decided and what comes next",
    )


class PartyLetter(Record):
    """On ``disputes.letters``, keyed by case id: one party's letter about one verdict. A redelivered
    verdict re-sends the same letter (same ``letter_id``, same bytes)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["letter"] = "letter"
    letter_id: str = Field(description="derived from the verdict id and the party: the same verdict, the same id")
    case_id: str
    verdict_id: str
    instance: Literal[1, 2]
    party: Party
    locale: str = Field(description="the language the letter is written in (a language subtag: en, de, ...)")
    locale_source: Literal["party", "case", "detected", "default"] = Field(
        description="where the language came from: the party's locale field, the case's, detected from the "
        "party's messages, or the platform's default (letter_default_locale)"
    )
    requested_locale: str | None = Field(
        None, description="the locale given or detected when the letter could not be written in it"
    )
    outcome: Literal["won", "lost"] = Field(description="the verdict for this party")
    remedy: str = Field(description="the remedy as decided: the buyer's requested remedy, granted or refused")
    appeal_until: datetime | None = Field(
        None, description="instance 1: the losing party may appeal until then (appeal_window_s after the verdict)"
    )
    final: bool = Field(description="no appeal is open: the second instance, or appeals off")
    under_review: bool = Field(
        False, description="the verdict was escalated: a human panel reviews it before it stands"
    )
    subject: str
    body: str = Field(description="the letter as the party reads it: the statements, section by section, in plain text")
    statements: list[LetterStatement] = Field(description="the statements of the body with what each rests on")
    check: LetterCheck
    withheld_evidence: list[str] = Field(
        default_factory=list,
        description="the other party's private evidence ids this letter does not disclose (letter_private_evidence)",
    )
    notes: list[str] = Field(
        default_factory=list, description="for the platform: a language fallback, a party with no messages, ..."
    )
    backend: str
    model: str
    tokens: Usage
    written_at: datetime


class DraftedLetter(Record):
    """Internal (``stage-results``, not a public event): a letter as the model wrote it and what the call
    cost, stored before it is checked, so a redelivered verdict repeats no finished call."""

    draft: LetterDraft
    usage: Usage
    model: str
    backend: str
