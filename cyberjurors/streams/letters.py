"""disputes.verdicts -> letters -> disputes.letters: after every verdict (and an appeal's), one letter
per party (``jury/letters.py``), keyed by case id.

The stage reads the verdict it writes about from the topic every verdict goes to, and the case it
was decided on from ``stage-results`` (the verdict's partition is the case's): the record kept for
appeals (``clues``) or the admitted case (``intake``), and for an appeal's verdict the appeal's case
file (``appeal``). Each party's letter is two steps, each stored before the next: the model's draft
(``letters/<party>/draft``), then the checked letter (``letters/<party>``, sent). A verdict delivered
again (a redelivery, a re-sent verdict, a replayed dead letter) re-sends the stored letters and
repeats no finished model call; a draft stored before a crash is checked, not written again.

Each party's own words back (issue 39): the models read the case minimised, so a letter is written,
checked and stored with placeholders. Before a verdict's first letter is drafted, the case's
placeholder map (what each placeholder stands for, per party who wrote it: ``jury/own_words.py``)
is stored under ``letters/placeholders`` (``appeal/letters/placeholders``), sealed under the case's
key when ``media_encryption`` is on; every letter, a re-sent one too, is sent with its addressee's
own values in place of their placeholders, the other party's left masked. The map lives and is
erased with the case's other stage results; a map whose case key was destroyed (an erased case's,
or one swept before the map's hold ended) leaves the letters masked, and says so in their notes.

Failures are dead letters at stage ``letters`` with the verdict as their original: a model call that
failed (``llm_<kind>``, replayable as the kind says; replaying sends the verdict to disputes.verdicts
again, where platforms dedupe it by ``verdict_id``), a message there that is no verdict
(``invalid_verdict``), a case whose record has expired (``case_expired``), a letter over
``max_event_bytes`` (``output_too_large``), a case key store that failed as the map was sealed or
opened (``case_key_unavailable``, replayable) and a bug (``stage_failed``).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from ..config import Settings
from ..errors import StoreError, for_people
from ..evidence.sealing import KeyRing
from ..jury.letters import draft_letter, finish_letter, prepare
from ..jury.own_words import PlaceholderMap, restored
from ..jury.stages import minimised
from ..llm.port import LLM, LLMError
from ..observability import metrics, tracing
from ..schemas import PARTIES, CaseFile, Party, PartyLetter, Verdict
from ..schemas.letters import DraftedLetter
from ..state import expiry
from ..state.results import StageResults
from .dead_letters import DeadLetters, OutputTooLarge, Sender, bug, send_bounded
from .turns import CaseTurns

log = logging.getLogger("cyberjurors.streams")

STAGE = "letters"


def keys(instance: int, party: Party) -> tuple[str, str]:
    """The stage-results keys of a party's letter about an instance's verdict, and of its draft."""
    letter = f"{'' if instance == 1 else 'appeal/'}letters/{party}"
    return letter, f"{letter}/draft"


def map_key(instance: int) -> str:
    """The stage-results key of the placeholder map an instance's letters were written under."""
    return f"{'' if instance == 1 else 'appeal/'}letters/placeholders"


SHREDDED_NOTE = (
    "the case key this letter's placeholders were sealed under is gone: the party's own words are shown as placeholders"
)


@dataclass(eq=False)
class PartyLetters:
    """The letters stage's handler. As in every handler, ``self.dead_letters`` writes dead letters; the
    letters to the parties are what it sends to ``out``."""

    settings: Settings
    llm: LLM
    results: StageResults
    out: Sender
    dead_letters: DeadLetters
    sealing: KeyRing | None = None  # media_encryption: the case keys the placeholder map is sealed under
    turns: CaseTurns = field(default_factory=CaseTurns, init=False)

    async def __call__(self, event: Any) -> None:
        with tracing.consuming(event, STAGE):
            if self.settings.letters:
                await self.handle(event)

    async def handle(self, event: Any) -> None:
        try:
            verdict = Verdict.model_validate_json(event.value or b"")
        except ValidationError as err:
            await self.dead_letters.write(event, "letters", "invalid_verdict", for_people(err), replayable=False)
            return
        tracing.name_case(verdict.case_id)
        started = time.perf_counter()
        try:
            record = self.record(verdict)
            if record is None:
                await self.dead_letters.write(
                    event,
                    "letters",
                    "case_expired",
                    f"no record of case {verdict.case_id} is kept any more (state_retention_s="
                    f"{self.settings.state_retention_s:g}): no letters for verdict {verdict.verdict_id}",
                    replayable=False,
                )
                return
            async with self.one_at_a_time(verdict.case_id):
                placeholders = await self.placeholders(verdict, record)
                written = [await self.letter(verdict, record, party, placeholders) for party in PARTIES]
        except StoreError as err:  # the case key store: nothing was sent, a replay starts again
            await self.dead_letters.write(event, "letters", "case_key_unavailable", for_people(err), replayable=True)
        except LLMError as err:  # a replay resumes: stored drafts and letters are not written again
            await self.dead_letters.write(
                event, "letters", f"llm_{err.kind}", for_people(err), replayable=err.replayable
            )
        except OutputTooLarge as err:  # the same verdict would give the same letter
            await self.dead_letters.write(event, "letters", "output_too_large", err.detail, replayable=False)
        except Exception as err:  # a bug must cost one verdict's letters (kept in the DLQ), not the worker
            log.exception("case %s: letters failed", verdict.case_id)
            await self.dead_letters.write(event, "letters", "stage_failed", bug(err), replayable=True)
        else:
            if any(written):
                metrics.STAGE_LATENCY.labels(STAGE).observe(time.perf_counter() - started)

    def one_at_a_time(self, case_id: str) -> contextlib.AbstractAsyncContextManager[None]:
        """A case's verdicts in turn on this worker (with stage_concurrency > 1 a re-sent verdict may come
        while the first is still being written to): the second finds the first's letters stored."""
        return self.turns.one_at_a_time(case_id)

    def record(self, verdict: Verdict) -> CaseFile | None:
        """The case the verdict was decided on: for an appeal's, the appeal's case file; else the record
        kept for appeals, or the admitted case."""
        stages = ("appeal",) if verdict.instance == 2 else ("clues", "intake")
        stored = next((s for s in (self.results.stored(verdict.case_id, st) for st in stages) if s is not None), None)
        return CaseFile.model_validate_json(stored) if stored is not None else None

    def hold(self, verdict: Verdict) -> float:
        """How much longer than the retention a letter is kept: as long as its verdict (a first
        instance's is kept for the appeal window), so storing a letter never shortens the case's hold."""
        if verdict.instance != 1:
            return 0.0
        return max(0.0, self.settings.appeal_window_s - self.settings.state_retention_s)

    async def placeholders(self, verdict: Verdict, record: CaseFile) -> PlaceholderMap | None:
        """The placeholder map the instance's letters are written under: the stored one, or the one the
        record masks to now, stored (sealed when a key ring is given) before any draft is written from
        it. None when it cannot be opened any more (its case key was destroyed)."""
        case_id, key = verdict.case_id, map_key(verdict.instance)
        stored = self.results.stored(case_id, key)
        if stored is not None:
            if self.sealing is None:
                return PlaceholderMap.model_validate_json(stored)
            try:
                return PlaceholderMap.model_validate_json(await self.sealing.open(stored, "a placeholder map"))
            except StoreError as err:
                if err.kind != "shredded":
                    raise
                log.warning("case %s: its placeholder map's case key is gone; letters stay masked", case_id)
                return None
        found = PlaceholderMap.of(minimised(record, self.settings).values)
        value = found.model_dump_json().encode()
        if found.values and self.sealing is not None:
            value = await self.sealing.seal(case_id, value)
        self.results.put(case_id, key, value, self.hold(verdict))
        return found

    async def send(self, case_id: str, masked: bytes, placeholders: PlaceholderMap | None) -> None:
        """Send a stored letter with its addressee's own words back (as stored: nothing of theirs masked)."""
        letter = PartyLetter.model_validate_json(masked)
        if placeholders is None:
            shown = letter.model_copy(update={"notes": [*letter.notes, SHREDDED_NOTE]})
        else:
            shown = restored(letter, placeholders)
        value = masked if shown is letter else shown.model_dump_json().encode()
        await send_bounded(self.out, case_id.encode(), value, self.results.max_bytes)

    async def letter(
        self, verdict: Verdict, record: CaseFile, party: Party, placeholders: PlaceholderMap | None
    ) -> bool:
        """Send ``party``'s letter: the stored one, or a new one (True), its draft stored first."""
        case_id = verdict.case_id
        letter_key, draft_key = keys(verdict.instance, party)
        stored = self.results.stored(case_id, letter_key)
        if stored is not None:
            tracing.mark(replayed=True)
            await self.send(case_id, stored, placeholders)
            return False
        prepared = prepare(record, verdict, party, self.settings)
        drafted_bytes = self.results.stored(case_id, draft_key)
        if drafted_bytes is not None:
            drafted = DraftedLetter.model_validate_json(drafted_bytes)
        else:
            drafted = await draft_letter(prepared.task, self.llm, self.settings)
            self.results.put(case_id, draft_key, drafted.model_dump_json().encode(), self.hold(verdict))
        letter = await finish_letter(prepared, drafted, verdict, self.llm, self.settings)
        value = letter.model_dump_json().encode()
        # stored masked, as the models wrote and the check read it; sent with the party's own words
        self.results.put(case_id, letter_key, value, self.hold(verdict))
        await self.send(case_id, value, placeholders)
        expiry.forget(self.results.table, f"{case_id}/{draft_key}", None)  # the letter stands for it now
        metrics.record_letter(letter.check.status, letter.locale_source)
        log.info(
            "case %s: letter to the %s (instance %d) in %s, check %s",
            case_id,
            party,
            verdict.instance,
            letter.locale,
            letter.check.status,
        )
        return True
