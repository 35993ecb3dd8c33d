"""`cyberjurors erase --case ID`: a case's data erased from every store the service owns.

One run takes the stores in turn, each a step recorded in the journal (``journal.py``) as
it ends, so a run that stops halfway (killed, a store down) leaves a record of what is left:

1. ``tables``: the workers' tables, erased by the worker that holds the case's partition
   (``streams/erasure.py``); a case still in the pipeline stops the run here, unless forced;
2. ``citations``: in every partition's tables, the stored results of other cases that retrieved the
   case as a precedent, its summary blanked (``streams/erasure.py``, ``CitedRequest``);
3. ``keys``: the case's media key destroyed (crypto-shredding, ``evidence/sealing.py``);
4. ``dead letters``: the media store originals of the case's letters found (the letters stay in
   disputes.dlq, which is not compacted, until its retention), their replay notes on
   disputes.dlq-replayed replaced by an erased mark, so they are never replayed;
5. ``console``: the console's store and the audit topic (``console/erasure.py``, given by the CLI);
6. ``precedents``: the precedent base (``precedents/erasure.py``);
7. ``call log``: the lines of ``llm_call_log`` about the case;
8. ``evaluation``: evaluation output folders, when asked (``evaluation/erasure.py``, given by the CLI);
9. ``media``: every media store object a step found (stored case files, records, letters);
10. ``topics``: what no erasure reaches, said: the non-compacted topics, until their retention.

Every step is idempotent: a second erase finds nothing left, and ``erase --resume`` runs every step
of an unfinished erasure again.

A case still in the pipeline (admitted and not yet decided, being assembled, an appeal under way)
is refused: nothing is erased, and the run says where it stands; erase it once it has left the
pipeline, or now with ``force``. A forced run erases what is stored now, but the stages still to run
may store the case again: its erasure stays open until a later run (``--resume``) finds it out of
the pipeline with nothing left.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast, runtime_checkable

from aiokafka.errors import KafkaError

from ..config import Settings
from ..errors import CyberJurorsError, StoreError, for_people
from ..evidence.media_store import dated_store, stored_refs
from ..evidence.records import is_sealed, key_id_of
from ..evidence.scrub import drop_lines
from ..evidence.sealing import KeyRing
from ..evidence.stores import open_store
from ..kafka.cluster import REPLAYED, TOPICS, ensure_topics
from ..kafka.producers import producer_for
from ..precedents.models import PrecedentError
from ..streams.erasure import ask, ask_cited, forget_request
from ..tooling.clients import placed_letters, records, replayed
from .journal import Entry, Journal, Result, Step


class Refused(CyberJurorsError):
    """The case is still in the pipeline and the run was not forced: ``detail`` says where it stands."""

    kind = "in_flight"


@dataclass
class Run:
    """What each step is given: the settings, the case, and its journal entry (to add what it finds)."""

    settings: Settings
    case_id: str
    entry: Entry
    journal: Journal
    wait_s: float
    evaluation: list[Path] = field(default_factory=list)

    def keep(self) -> None:
        """Save what a step found (media objects, ids) before it deletes what named them: a run
        killed in between leaves them in the journal for the resume."""
        self.journal.save(self.entry)

    @property
    def erased_as(self) -> str:
        """What a store that keeps a record in the case's place names it by."""
        return f"erased:{self.entry.ref}"


@runtime_checkable
class ErasureStep(Protocol):
    """One store's part of an erasure: the contract every step keeps, here and in the rooms above
    (the console's, the evaluation outputs').

    ``name`` is what the journal, the log and the report call the step (``"precedents"``), one of
    ``STEPS``; a journal keeps it, so it is never renamed. ``erase`` erases what the store holds of
    ``run.case_id`` and reports it as a ``Step``: ``done`` with the number of things erased (maybe
    0), ``left`` with a note saying what is left (a resume runs the step again), ``skipped`` when
    the store is not configured, or ``kept`` for what no erasure reaches, and until when. A step is
    idempotent: run again, it finds nothing left. What it finds that a later step deletes (media
    objects in ``run.entry.refs``, ids in ``run.entry.ids``) it saves with ``run.keep()`` before
    deleting what named it. A store it cannot reach is a ``left`` step, never an exception: the one
    exception a step raises is ``Refused`` (the case still in the pipeline), which stops the run."""

    @property
    def name(self) -> str: ...

    def erase(self, run: Run) -> Awaitable[Step]: ...


@dataclass
class Report:
    ref: str
    result: Result
    steps: dict[str, Step]
    standing: str | None = None  # where the case stood in the pipeline (refused, or forced)
    erased_before: float | None = None  # when an earlier run completed this erasure


UNREACHABLE = (KafkaError, OSError, TimeoutError)


class TablesStep:
    name = "tables"

    async def erase(self, run: Run) -> Step:
        """Ask the worker holding the case's partition; a case in the pipeline stops the run unless forced."""
        s = run.settings
        try:
            await ensure_topics(s)  # a deployment older than disputes.erasures gets it
            _, answer = await ask(s, run.case_id, run.entry.ref, run.entry.force, run.wait_s)
        except UNREACHABLE as err:
            return Step("left", note=f"the broker could not be reached ({for_people(err)[:120]}): resume asks again")
        if answer is None:
            return Step(
                "left",
                note=f"no worker answered within {run.wait_s:.0f}s (down, or the case's partition not yet "
                "assigned): the request waits on disputes.erasures, and resume asks again",
            )
        run.entry.refs |= set(answer.refs)
        await forget_request(s, run.case_id)  # answered: the request and its answer, keyed by the case id, go
        if answer.status == "in_flight":
            raise Refused(answer.standing or "in the pipeline")
        run.entry.standing = answer.standing
        note = f"RocksDB compacted; {answer.media} media copies deleted by the worker" if answer.purged else ""
        if answer.standing:
            note = (
                f"forced while {answer.standing}: the stages still to run may store the case again, so this "
                "erasure stays open; resume once the case has left the pipeline"
            )
        return Step("done", answer.keys, note)


class CitationsStep:
    name = "citations"

    async def erase(self, run: Run) -> Step:
        """Every partition's worker blanks the case's summary in the stored results of the cases that
        retrieved it as a precedent; a citing case still in the pipeline keeps the erasure open (its
        later stages carry the summary from their input, and may store it again)."""
        s = run.settings
        try:
            partitions, answers = await ask_cited(s, run.case_id, run.entry.ref, run.wait_s)
        except UNREACHABLE as err:
            return Step("left", note=f"the broker could not be reached ({for_people(err)[:120]}): resume asks again")
        cited = sum(a.cited for a in answers.values())
        missing = sorted(partitions - set(answers))
        if missing:
            return Step(
                "left",
                cited,
                f"no worker answered for partition(s) {', '.join(map(str, missing))} within {run.wait_s:.0f}s: "
                "the requests wait on disputes.erasures, and resume asks again",
            )
        await forget_request(s, run.case_id, partitions)  # every partition had a request under the case id
        in_flight = sum(a.cited_in_flight for a in answers.values())
        if in_flight:
            return Step(
                "left",
                cited,
                f"{in_flight} case(s) that retrieved it as a precedent are still in the pipeline and may store its "
                "summary again: resume once they are decided",
            )
        return Step("done", cited, f"its summary blanked in {cited} stored result(s) of other cases" if cited else "")


class KeysStep:
    name = "keys"

    async def erase(self, run: Run) -> Step:
        """Crypto-shredding: the case's media key destroyed, so every copy of its sealed media is unreadable."""
        s = run.settings
        if not s.case_key_secret:
            return Step("skipped", note="media_encryption is off (no case_key_secret)")
        ring = KeyRing(dated_store(s.case_key_store, s.media_retention), s.case_key_secret)
        return await _in_store("the key store", lambda: ring.destroy(run.case_id))


async def _in_store(store: str, erase: Callable[[], Awaitable[int]]) -> Step:
    """A step done in a store: done with the copies ``erase`` deleted, or left with what the store said."""
    try:
        return Step("done", await erase())
    except StoreError as err:
        return Step("left", note=f"{store}: {err.detail}")


class DlqStep:
    name = "dead letters"

    async def erase(self, run: Run) -> Step:
        """The originals of the case's letters, for the media step; their replay notes marked erased."""
        s = run.settings
        try:
            letters = [p for p in await placed_letters(s) if p.letter.key == run.case_id]
            notes = await replayed(s)
        except UNREACHABLE as err:
            return Step("left", note=f"disputes.dlq could not be read ({for_people(err)[:120]})")
        for placed in letters:
            run.entry.refs |= stored_refs(placed.letter.model_dump())
            run.entry.refs |= stored_refs(_json(base64.b64decode(placed.letter.original_base64)))
        ours = {p.id for p in letters} | {k for k, v in notes.items() if _json(v).get("case") == run.case_id}
        marked = await _mark_replayed(s, sorted(ours), run.entry.ref, notes)
        kept = f"{len(letters)} letter(s) stay in disputes.dlq until its retention ({s.dlq_retention_s:,.0f} s)"
        return Step("done" if not letters else "kept", marked, kept if letters else "")


async def _mark_replayed(settings: Settings, ids: Sequence[str], ref: str, notes: dict[str, bytes]) -> int:
    """A letter of an erased case is never replayed: its note says erased (no case id), in place of
    what it said; a letter already marked is left alone."""
    mark = json.dumps({"erased": ref}).encode()
    todo = [i for i in ids if notes.get(i) != mark]
    if not todo:
        return 0
    producer = producer_for(settings)
    await producer.start()
    try:
        for letter_id in todo:
            await producer.send_and_wait(settings.topic(REPLAYED), mark, key=letter_id.encode())
    finally:
        await producer.stop()
    return len(todo)


class PrecedentsStep:
    name = "precedents"

    async def erase(self, run: Run) -> Step:
        s = run.settings
        if s.precedent_backend == "none":
            return Step("skipped", note="precedent_backend is none")
        from ..precedents.base import opened_base
        from ..precedents.erasure import ErasableIndex, erase_case

        try:
            async with opened_base(s, create=False) as (index, _):  # both stores are erasable
                done = await erase_case(cast(ErasableIndex, index), run.case_id, run.erased_as)
        except PrecedentError as err:
            if err.kind == "index_missing":
                return Step("skipped", note="no precedent base")
            return Step("left", note=f"the precedent base ({err.kind}): {for_people(err)[:160]}")
        note = f"{done.cases} case, {done.guidelines} guideline(s) without it in their provenance"
        return Step("left" if done.notes else "done", done.cases + done.guidelines, "; ".join([note, *done.notes]))


# How the LLM call log (llm/port.py, ``case_id`` of each line) names a case besides its id: a
# qualification ballot on it as a mock case (jury/qualify.py), and its party-swapped twin in an
# evaluation (evaluation/swap.py's SWAP_SUFFIX). tests/unit/erasure/test_erasure_ids.py writes each
# through its real writer and checks this list against it.
CALL_LOG_PREFIXES = ("", "qualify:")
CALL_LOG_SUFFIXES = ("", ":swap")


def call_log_forms(case_id: str) -> set[str]:
    """Every ``case_id`` a line of the call log about the case carries."""
    return {f"{p}{case_id}{s}" for p in CALL_LOG_PREFIXES for s in CALL_LOG_SUFFIXES}


class CallLogStep:
    name = "call log"

    async def erase(self, run: Run) -> Step:
        path = run.settings.llm_call_log
        if path is None or not Path(path).is_file():
            return Step("skipped", note="no llm_call_log")
        forms = call_log_forms(run.case_id)
        return Step("done", drop_lines(Path(path), lambda line: _json(line).get("case_id") in forms))


class MediaStep:
    name = "media"

    async def erase(self, run: Run) -> Step:
        """Every copy of every object the other steps found (the workers' answer, records, letters)."""
        if not run.entry.refs:
            return Step("done")

        async def erase() -> int:
            store = open_store(run.settings)
            return sum([await store.erase(ref) for ref in sorted(run.entry.refs)])

        return await _in_store("the media store", erase)


class TopicsStep:
    name = "topics"

    async def erase(self, run: Run) -> Step:
        s = run.settings
        kept = [t for t in TOPICS if t not in ("disputes.dlq-replayed", "disputes.audit", "disputes.erasures")]
        until = f"{s.topic_retention_s:,.0f} s" if s.topic_retention_s else "the broker's retention.ms (Kafka: 7 days)"
        note = f"{len(kept)} topics that are not compacted keep the case's records until {until}"
        if not s.payload_encryption:
            return Step("kept", note=note)
        shredded = await sealed_records(s, run.case_id, kept)  # read whole: an operator's command, once
        said = ", ".join(f"{t} {n}" for t, n in shredded.items() if n) or "none"
        return Step("kept", sum(shredded.values()), f"{note}; sealed, unreadable since the key went: {said}")


async def sealed_records(settings: Settings, case_id: str, topics: Iterable[str]) -> dict[str, int]:
    """topic -> the case's sealed records on it (its key, sealed under its key id): what destroying
    the key made unreadable there."""
    ring = KeyRing(dated_store(settings.case_key_store, settings.media_retention), settings.case_key_secret or "")
    key_id, key = ring.key_id(case_id), case_id.encode()
    counts: dict[str, int] = {}
    for topic in topics:
        counts[topic] = 0
        async for record in records(settings, topic, follow=False, idle_timeout_s=1.0, raw=True):
            if record.key == key and is_sealed(record.value) and key_id_of(record.value) == key_id:
                counts[topic] += 1
    return counts


def _json(value: bytes | str | None) -> dict:
    try:
        found = json.loads(value or b"")
    except (ValueError, UnicodeDecodeError):
        return {}
    return found if isinstance(found, dict) else {}


STEPS: dict[str, ErasureStep | None] = {  # in turn; None: given by the caller (a room above this one), or skipped
    "tables": TablesStep(),
    "citations": CitationsStep(),
    "keys": KeysStep(),
    "dead letters": DlqStep(),
    "console": None,
    "precedents": PrecedentsStep(),
    "call log": CallLogStep(),
    "evaluation": None,
    "media": MediaStep(),
    "topics": TopicsStep(),
}


def _steps(given: Iterable[ErasureStep]) -> dict[str, ErasureStep | None]:
    """``STEPS`` with the caller's steps in their places (a given step replaces one of its name)."""
    by_name = {step.name: step for step in given}
    unknown = sorted(set(by_name) - set(STEPS))
    if unknown:
        raise ValueError(f"no erasure step is called {', '.join(unknown)} (the steps: {', '.join(STEPS)})")
    return {name: by_name.get(name, step) for name, step in STEPS.items()}


async def erase(
    settings: Settings,
    journal: Journal,
    case_id: str,
    force: bool = False,
    wait_s: float | None = None,
    given: Iterable[ErasureStep] = (),
    evaluation: Sequence[Path] = (),
) -> Report:
    """One run over every store for ``case_id``; each step's result is in the journal as it ends."""
    steps = _steps(given)
    entry, before = journal.begin(case_id, force, [str(p) for p in evaluation])
    run = Run(settings, case_id, entry, journal, wait_s or settings.erasure.wait_s, [Path(p) for p in entry.evaluation])
    for name, step in steps.items():
        if step is None:
            entry.steps[name] = Step("skipped", note="not asked for" if name == "evaluation" else "not available")
            journal.save(entry)
            continue
        try:
            entry.steps[name] = await step.erase(run)
        except Refused as refused:
            journal.refused(entry, before)
            return Report(entry.ref, "refused", entry.steps, refused.detail)
        journal.save(entry)
    result: Result = "incomplete" if entry.left else "erased" if _erased(entry) else "nothing"
    journal.finish(entry, result)
    closed = before.closed_at if before is not None else None
    return Report(entry.ref, result, entry.steps, entry.standing, closed)


def _erased(entry: Entry) -> bool:
    return any(s.erased for s in entry.steps.values())


async def resume_all(
    settings: Settings, journal: Journal, given: Iterable[ErasureStep] = (), wait_s: float | None = None
) -> list[tuple[str, Report]]:
    """Every erasure with something left, run again (with the force it was started with): (case id,
    report) for each."""
    reports, given = [], tuple(given)
    for entry in journal.open_entries():
        assert entry.case_id is not None  # open_entries returns only those holding it
        reports.append((entry.case_id, await erase(settings, journal, entry.case_id, entry.force, wait_s, given)))
    return reports
