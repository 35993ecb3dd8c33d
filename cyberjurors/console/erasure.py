"""A case erased from the console's store (`cyberjurors erase`), keeping a record, without personal
data, that it was decided and by whom.

Deleted: the case's verdicts, escalations, records (its evidence, clue chain and ballots), dead
letters (and their replay notes) and reported outcomes. Kept, with the case taken out: each human
decision on its escalations (the winner, the votes, who decided, in which role, when, whether it
was published), its case and escalation named by the erasure's reference and its rationale (free
text that may quote the parties) blanked; the audit entries, their target and detail rewritten
where they name the case or its escalations and verdicts, and marked unpublished, so the console
(or ``publish_audit``) sends the rewritten entries to disputes.audit under the same ids, where
compaction replaces the old ones. Other cases' records that show the case as a retrieved precedent
keep the reference, with its summary blanked.

The store remembers the erasure (``erased``: an HMAC of each id under a salt of its own, the
erasure's reference, when), so the feed does not file the case's records again from topics that
still hold them (their retention), and rewrites audit entries naming it as they are read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from ..config import Settings
from ..erasure.journal import Step
from ..erasure.run import UNREACHABLE, Run
from ..evidence.media_store import stored_refs
from ..evidence.scrub import json_forms, purge_sqlite, replace_ids
from ..kafka.cluster import AUDIT
from ..state.erasure import blank_precedent
from ..tooling.clients import Outgoing, produce, records
from .audit import Audit
from .store import Store

# what holds a case's rows (table -> the column naming the case); letters are found by their key
BY_CASE = {
    "verdicts": "case_id",
    "escalations": "case_id",
    "records": "case_id",
    "outcomes": "case_id",
    "party_letters": "case_id",
}


@dataclass
class ConsoleErased:
    rows: int = 0  # verdicts, escalations, records, dead letters, replay notes, outcomes, party letters deleted
    decisions: int = 0  # human decisions kept with the case taken out
    audit: int = 0  # audit entries rewritten
    cited: int = 0  # other cases' records whose retrieved precedent was the case
    refs: set[str] = field(default_factory=set)  # media store objects the deleted rows named
    notes: list[str] = field(default_factory=list)


@dataclass
class Found:
    refs: set[str]
    ids: list[str]


def collect(store: Store, case_id: str) -> Found:
    """What the case's rows name, read before they are deleted: media objects, verdict and escalation ids."""
    with store.transaction() as db:
        return Found(_refs(db, case_id), _ids(db, case_id))


def erase_case(store: Store, case_id: str, ref: str, ids: list[str]) -> ConsoleErased:
    """Everything in one transaction, then the bytes out of the file (``purge_sqlite``). ``ids``: the
    case's verdict and escalation ids (``collect``, kept in the journal: a resume after the rows are
    gone still knows them)."""
    done = ConsoleErased()
    erased_as = f"erased:{ref}"
    with store.transaction() as db:
        ids = sorted(set(ids) | set(_ids(db, case_id)))
        done.refs = _refs(db, case_id)
        done.rows = _delete_rows(db, case_id)
        done.decisions = db.execute(
            "UPDATE decisions SET case_id = ?, escalation_id = ?, event_id = ? || ':' || seq, rationale = NULL "
            "WHERE case_id = ?",
            (erased_as, erased_as, erased_as, case_id),
        ).rowcount
        done.audit = _scrub_audit(db, [case_id, *ids], erased_as)
        done.cited = _scrub_citations(db, case_id, erased_as)
        for name in [case_id, *ids]:
            db.execute(
                "INSERT OR REPLACE INTO erased VALUES (?, ?, ?, ?)",
                (store.deny_key(db, name), ref, time.time(), json.dumps({"rows": done.rows})),
            )
    with store._lock:
        done.notes = purge_sqlite(store._db, store.path, json_forms(case_id, *ids))
    return done


def _ids(db: sqlite3.Connection, case_id: str) -> list[str]:
    """The case's verdict and escalation ids (audit entries and decisions name these)."""
    found = [r[0] for r in db.execute("SELECT verdict_id FROM verdicts WHERE case_id = ?", (case_id,))]
    found += [r[0] for r in db.execute("SELECT escalation_id FROM escalations WHERE case_id = ?", (case_id,))]
    found += [
        r[0] for r in db.execute("SELECT DISTINCT escalation_id FROM decisions WHERE case_id = ?", (case_id,)) if r[0]
    ]
    return sorted(set(found))


def _letters(db: sqlite3.Connection, case_id: str) -> list[str]:
    return [r[0] for r in db.execute("SELECT id FROM letters WHERE json_extract(body, '$.key') = ?", (case_id,))]


def _refs(db: sqlite3.Connection, case_id: str) -> set[str]:
    """The media store objects the case's rows name (records, escalations, letters' originals)."""
    refs: set[str] = set()
    for table, column in BY_CASE.items():
        for (body,) in db.execute(f"SELECT body FROM {table} WHERE {column} = ?", (case_id,)):  # names are ours
            refs |= stored_refs(json.loads(body))
    for (body,) in db.execute("SELECT body FROM letters WHERE json_extract(body, '$.key') = ?", (case_id,)):
        refs |= stored_refs(json.loads(body))
    return refs


def _delete_rows(db: sqlite3.Connection, case_id: str) -> int:
    letters = _letters(db, case_id)
    deleted = sum(
        db.execute(f"DELETE FROM {table} WHERE {column} = ?", (case_id,)).rowcount  # names are ours
        for table, column in BY_CASE.items()
    )
    for letter in letters:
        deleted += db.execute("DELETE FROM letters WHERE id = ?", (letter,)).rowcount
        deleted += db.execute("DELETE FROM replayed WHERE id = ?", (letter,)).rowcount
    notes = db.execute("SELECT id, note FROM replayed WHERE instr(note, ?) > 0", (case_id,)).fetchall()
    for letter_id, note in notes:  # a replay note names its case ("case"): one whose letter is gone
        if _json(note).get("case") == case_id:
            deleted += db.execute("DELETE FROM replayed WHERE id = ?", (letter_id,)).rowcount
    return deleted


def _scrub_audit(db: sqlite3.Connection, names: list[str], erased_as: str) -> int:
    found = " OR ".join("instr(target, ?) > 0 OR instr(detail, ?) > 0" for _ in names)
    rows = db.execute(
        f"SELECT id, target, detail FROM audit WHERE {found}", [n for n in names for _ in "td"]
    ).fetchall()
    changed = 0
    for row in rows:
        target, detail = without(row["target"] or "", names, erased_as), without(row["detail"] or "", names, erased_as)
        if (target, detail) != (row["target"] or "", row["detail"] or ""):
            db.execute(
                "UPDATE audit SET target = ?, detail = ?, published = 0 WHERE id = ?", (target, detail, row["id"])
            )
            changed += 1
    return changed


def without(text: str, names: list[str], erased_as: str) -> str:
    """``text`` with each of ``names`` (a case id, its verdict and escalation ids) replaced where it
    stands as a whole id, sentence punctuation around it or not ("decided c-1.", "c-1:"); erasing c-1
    leaves c-10 alone (``scrub.token_pattern``)."""
    return replace_ids(text, names, erased_as)


def _scrub_citations(db: sqlite3.Connection, case_id: str, erased_as: str) -> int:
    """Other cases' records whose retrieved precedents show the case's summary (an escalation's
    record is kept in ``records`` too)."""
    changed = 0
    rows = db.execute("SELECT rowid AS k, body FROM records WHERE instr(body, ?) > 0", (case_id,)).fetchall()
    for row in rows:
        body = json.loads(row["body"])
        if blank_precedent(body, case_id, erased_as):
            db.execute("UPDATE records SET body = ? WHERE rowid = ?", (json.dumps(body), row["k"]))
            changed += 1
    return changed


def _json(value: Any) -> dict[str, Any]:
    try:
        found = json.loads(value)
    except (TypeError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


async def publish_audit(settings: Settings, store: Store) -> int:
    """Send the rewritten audit entries to disputes.audit (what a running console's audit does on its
    own): the number sent."""
    audit, sent = Audit(settings, store), 0
    while flushed := await audit.flush():
        sent += flushed
    return sent


class ConsoleStep:
    name = "console"

    async def erase(self, run: Run) -> Step:
        """``erase``'s console step: the store (when there is one), then the audit topic."""
        s, erased, notes = run.settings, 0, []
        if s.console_db.is_file():
            store = Store(s.console_db)
            try:
                found = await asyncio.to_thread(collect, store, run.case_id)
                run.entry.refs |= found.refs
                run.entry.ids |= set(found.ids)
                run.keep()  # before the rows that name them go
                done = await asyncio.to_thread(erase_case, store, run.case_id, run.entry.ref, sorted(run.entry.ids))
                erased += done.rows + done.decisions + done.audit + done.cited
                notes += done.notes
                with contextlib.suppress(*UNREACHABLE):  # else the topic pass below says so
                    await publish_audit(s, store)
            finally:
                store.close()
        try:
            erased += await scrub_audit_topic(s, [run.case_id, *sorted(run.entry.ids)], run.erased_as)
        except UNREACHABLE as err:
            notes.append(f"disputes.audit not rewritten: the broker could not be reached ({type(err).__name__})")
        return Step("left" if notes else "done", erased, "; ".join(notes))


async def scrub_audit_topic(settings: Settings, names: list[str], erased_as: str) -> int:
    """The entries on disputes.audit that name the case, sent again under their ids with it taken
    out (compaction keeps only the newer): for a console whose store is gone, which rebuilds its
    audit log from the topic."""
    latest: dict[bytes, bytes | None] = {}
    async for record in records(settings, AUDIT, follow=False, idle_timeout_s=1.0):
        latest[record.key or b""] = record.value
    rewritten = []
    for key, value in latest.items():
        entry = _json(value)
        if not entry:
            continue
        scrubbed = entry | {f: without(str(entry.get(f, "")), names, erased_as) for f in ("target", "detail")}
        if scrubbed != entry:
            rewritten.append(Outgoing(key.decode(), json.dumps(scrubbed).encode(), "erase", route=AUDIT))
    if rewritten:
        await produce(settings, rewritten)
    return len(rewritten)
