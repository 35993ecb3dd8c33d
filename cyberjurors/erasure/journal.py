"""`cyberjurors erase`'s own record, in ``erasure.dir``: the journal of what each erasure has done and
what is left, the erasure log, and the salt of the references both use.

The reference. An erasure is named by ``ref``: the HMAC-SHA256 of the case id under a salt made at
the first erasure (``salt``, 32 random bytes, readable by its owner only), its first 32 hex digits.
A case id can be personal data (a platform may build it from an order number or a customer's);
the reference lets whoever holds the salt check a given case id against the log ("was case X
erased, and when?") and no one else recover it. Losing the salt loses that link, nothing else.

The journal (``journal.sqlite3``). One row per erasure: the reference, each store's step (done,
left with what is left, skipped, or kept: what an erasure cannot reach), the media objects to
delete, the case's verdict and escalation ids, and the case id itself, kept only while something
is left, so that ``erase --resume`` can finish it; when an erasure completes, the case id and the
ids are deleted (``secure_delete``, the write-ahead log truncated), and the row keeps only the
reference, the steps and the times. An erasure killed halfway has its row, with the case id, and
every step it had not finished not marked done: ``--resume`` runs every step again (each is
idempotent).

The log (``erasures.jsonl``). One JSON line per run: when, the reference, the result (erased,
nothing, refused, incomplete), each step's state and count, whether it was forced. No case id, no
party text: it can be kept for good and shown to an auditor or a data-protection authority.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..evidence.scrub import purge_sqlite

State = Literal["done", "left", "skipped", "kept"]
Result = Literal["erased", "nothing", "refused", "incomplete"]
SCHEMA = """
CREATE TABLE IF NOT EXISTS erasures (
  ref TEXT PRIMARY KEY, case_id TEXT, force INTEGER NOT NULL, standing TEXT, opened_at REAL NOT NULL,
  closed_at REAL, runs INTEGER NOT NULL, steps TEXT NOT NULL, refs TEXT NOT NULL, ids TEXT NOT NULL,
  evaluation TEXT NOT NULL);
"""


@dataclass
class Step:
    """One store's part of a run: ``done`` (``erased`` things erased, maybe 0), ``left`` (``note``
    says what is left; a resume tries again), ``skipped`` (the store is not configured) or ``kept``
    (what an erasure cannot reach, and until when)."""

    state: State
    erased: int = 0
    note: str = ""


@dataclass
class Entry:
    ref: str
    case_id: str | None
    force: bool = False
    standing: str | None = None  # where the case stood in the pipeline when a forced run erased it
    opened_at: float = field(default_factory=time.time)
    closed_at: float | None = None
    runs: int = 0
    steps: dict[str, Step] = field(default_factory=dict)
    refs: set[str] = field(default_factory=set)  # media store objects to delete (sha256s)
    ids: set[str] = field(default_factory=set)  # the case's verdict and escalation ids
    evaluation: list[str] = field(default_factory=list)  # evaluation output folders asked for (a resume too)

    @property
    def left(self) -> bool:
        return self.standing is not None or any(s.state == "left" for s in self.steps.values())


class Journal:
    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "journal.sqlite3"
        self.log_path = folder / "erasures.jsonl"
        self._salt = self._read_salt()
        self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA secure_delete=ON")  # a case id cleared at the close leaves no bytes
        self._db.executescript(SCHEMA)

    def _read_salt(self) -> bytes:
        path = self.folder / "salt"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # two first erasures: one salt
        except FileExistsError:
            return path.read_bytes()
        with os.fdopen(fd, "wb") as out:
            out.write(os.urandom(32))
        return path.read_bytes()

    def close(self) -> None:
        self._db.close()

    def ref(self, case_id: str) -> str:
        return hmac.new(self._salt, case_id.encode(), hashlib.sha256).hexdigest()[:32]

    def begin(self, case_id: str, force: bool, evaluation: list[str] | None = None) -> tuple[Entry, Entry | None]:
        """The case's entry for a new run, holding the case id until the erasure completes; and the
        entry as an earlier run left it (closed: a second erase; open: a run to finish), if any."""
        ref = self.ref(case_id)
        before = self.entry(ref)
        entry = self.entry(ref) or Entry(ref, case_id)
        entry.case_id, entry.force, entry.closed_at, entry.standing = case_id, force, None, None
        entry.runs += 1
        entry.steps = {}
        entry.evaluation = sorted(set(entry.evaluation) | set(evaluation or []))
        self.save(entry)
        return entry, before

    def entry(self, ref: str) -> Entry | None:
        row = self._db.execute("SELECT * FROM erasures WHERE ref = ?", (ref,)).fetchone()
        return None if row is None else _entry(row)

    def open_entries(self) -> list[Entry]:
        """Erasures with something left (a case id held): what ``--resume`` finishes."""
        rows = self._db.execute("SELECT * FROM erasures WHERE case_id IS NOT NULL ORDER BY opened_at").fetchall()
        return [_entry(r) for r in rows]

    def save(self, entry: Entry) -> None:
        steps = json.dumps({name: vars(step) for name, step in entry.steps.items()})
        self._db.execute(
            "INSERT OR REPLACE INTO erasures VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                entry.ref,
                entry.case_id,
                int(entry.force),
                entry.standing,
                entry.opened_at,
                entry.closed_at,
                entry.runs,
                steps,
                json.dumps(sorted(entry.refs)),
                json.dumps(sorted(entry.ids)),
                json.dumps(entry.evaluation),
            ),
        )

    def finish(self, entry: Entry, result: Result) -> list[str]:
        """Log the run; a completed erasure forgets the case id and its ids (the bytes out of the
        file too). What could not be purged, as notes."""
        self.log(entry, result)
        if result == "incomplete" or entry.case_id is None:
            self.save(entry)
            return []
        entry.case_id, entry.ids, entry.closed_at = None, set(), time.time()
        self.save(entry)
        return purge_sqlite(self._db, self.path, [])  # secure_delete was on from the first row: no search

    def refused(self, entry: Entry, before: Entry | None) -> None:
        """A refused run erased nothing: the log says so, and the journal is as the run found it (no
        row, or the earlier run's)."""
        self.log(entry, "refused")
        if before is None:
            self._db.execute("DELETE FROM erasures WHERE ref = ?", (entry.ref,))
        else:
            self.save(before)
        purge_sqlite(self._db, self.path, [])

    def log(self, entry: Entry, result: Result) -> None:
        line = {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "ref": entry.ref,
            "result": result,
            "run": entry.runs,
            "forced": entry.force,
            "steps": {name: {"state": s.state, "erased": s.erased} for name, s in entry.steps.items()},
        }
        with self.log_path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def _entry(row: tuple) -> Entry:
    ref, case_id, force, standing, opened_at, closed_at, runs, steps, refs, ids, evaluation = row
    return Entry(
        ref=ref,
        case_id=case_id,
        force=bool(force),
        standing=standing,
        opened_at=opened_at,
        closed_at=closed_at,
        runs=runs,
        steps={name: Step(**s) for name, s in json.loads(steps).items()},
        refs=set(json.loads(refs)),
        ids=set(json.loads(ids)),
        evaluation=json.loads(evaluation),
    )
