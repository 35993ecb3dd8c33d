"""Deleted bytes out of a file: what an erasure does after deleting rows from a SQLite database (the
console's store, the embedded precedent store, the erasure journal) or lines from a JSON-lines file.

SQLite leaves a deleted row's bytes in the file's free space and in the write-ahead log until they
are overwritten: ``secure_delete`` (set on every connection of the stores that hold case data)
overwrites them with zeros as they are freed; the write-ahead log keeps the page images it was
written with until a checkpoint truncates it; free space left by deletions made before
``secure_delete`` was on goes only with a VACUUM, which is run when the file is found to still hold
a needle (the erased case id as its JSON shows it, ``json_forms``) after the rest.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

ID_PUNCTUATION = "._:-"  # what a case id may hold besides letters and digits (schemas.case.CaseId)
_ID_CHAR = rf"[A-Za-z0-9{re.escape(ID_PUNCTUATION)}]"
_PUNCTUATION = rf"[{re.escape(ID_PUNCTUATION)}]"


def residue(path: Path, needles: Sequence[str]) -> bool:
    """Whether any needle's bytes are in the file (read in chunks that overlap by a needle's length)."""
    wanted = [n.encode() for n in needles if n]
    if not wanted or not path.is_file():
        return False
    overlap = max(len(n) for n in wanted) - 1
    tail = b""
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            window = tail + chunk
            if any(n in window for n in wanted):
                return True
            tail = window[-overlap:] if overlap else b""
    return False


def json_forms(*ids: str) -> list[str]:
    """How an id shows in the JSON a store keeps: as a whole string (``"c-1"``, never inside
    ``"c-10"``), or opening an override's key (``"c-1@event``): the needles ``purge_sqlite`` looks for."""
    return [form for i in ids for form in (json.dumps(i), json.dumps(i)[:-1] + "@")]


def purge_sqlite(db: sqlite3.Connection, path: Path, needles: Sequence[str]) -> list[str]:
    """After deletes made with ``secure_delete`` on: VACUUM when the file still holds a needle, then
    truncate the write-ahead log. What could not be done, as notes (empty: done). ``db`` is in
    autocommit mode, outside a transaction."""
    if residue(path, needles):
        db.execute("VACUUM")
    notes = []
    busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
    if busy:
        notes.append(f"{path.name}-wal not truncated: another process was reading the database (resume retries)")
    elif residue(Path(f"{path}-wal"), needles):
        notes.append(f"{path.name}-wal still holds the case id")
    if residue(path, needles):
        notes.append(f"{path.name} still holds the case id after VACUUM")
    return notes


def drop_lines(path: Path, unwanted: Callable[[bytes], bool]) -> int:
    """Rewrite a lines file without the lines ``unwanted`` picks (a temporary file renamed over it:
    a reader sees the old file or the new one); the number dropped."""
    if not path.is_file():
        return 0
    kept, dropped = [], 0
    with path.open("rb") as f:
        for line in f:
            if unwanted(line):
                dropped += 1
            else:
                kept.append(line)
    if dropped:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as out:
                out.writelines(kept)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return dropped


def token_pattern(*ids: str) -> re.Pattern[str]:
    """Each of ``ids`` where it stands as a whole id in free text: the run of id characters around
    it holds nothing else but punctuation (``.``, ``:``, ``_``, ``-``). "decided c-1.", "c-1:",
    "(c-1)", "/cases/c-1/2", '"c-1"' name c-1; "c-10", "xc-1", "c-1.2", "c-1-b", "shop:c-1" do not,
    as each of those could be another case's id. Group 1 is the punctuation before the id, kept by
    ``replace_ids``; the punctuation after it is not part of the match."""
    alternatives = "|".join(re.escape(i) for i in sorted(set(ids), key=len, reverse=True) if i)
    if not alternatives:
        return re.compile(r"(?!)")  # matches nothing
    return re.compile(rf"(?<!{_ID_CHAR})({_PUNCTUATION}*)(?:{alternatives})(?={_PUNCTUATION}*(?!{_ID_CHAR}))")


def replace_ids(text: str, ids: Sequence[str], by: str) -> str:
    """``text`` with each of ``ids`` replaced by ``by`` wherever it stands as a whole id (``token_pattern``)."""
    return token_pattern(*ids).sub(lambda m: m.group(1) + by, text)
