"""``migrate``: the previous embedded store (format 1: ``manifest.json``, JSON lines and numpy
files, ``legacy.py``) copied into the SQLite store (``embedded.py``), vectors included: nothing is
embedded again, so the new store holds exactly the old one's documents and vectors, under the old
one's embedding model.

Idempotent: a document already in the target with the same JSON and the same vector is left
alone, so a re-run (or a run after an interrupted one) writes only what is missing or differs.
When the target has no database yet, it is built in a temporary folder inside the target and moved
into place once complete, so an interrupted first migration leaves no half-filled store for a
worker to open. The previous files are left where they are; delete them once the new store serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .embedded import DB_FILE, LEGACY_MANIFEST, EmbeddedIndex
from .legacy import LegacyIndex
from .models import Document, PrecedentError

BATCH = 2000  # documents per transaction

Progress = Callable[[int, int], None]
"""progress(documents done, documents in the source)."""


@dataclass
class MigrationReport:
    source: Path
    target: Path
    embedding_model: str
    dims: int
    documents: int = 0
    written: int = 0
    unchanged: int = 0
    created: bool = False
    """the target database was made by this run (else documents were added to an existing one)"""
    elapsed_s: float = 0.0


class _StoredVectors:
    """The embedder a migration opens both stores with: the old store's model name and dims, and
    no model, since the vectors are copied."""

    def __init__(self, name: str, dims: int):
        self.name, self.dims = name, dims

    def encode(self, texts: list[str]) -> np.ndarray:
        raise PrecedentError("bulk_failed", "a migration copies the stored vectors; it embeds nothing")


def legacy_model(folder: Path) -> tuple[str, int]:
    """The embedding model and dims a previous-format store at ``folder`` was built with."""
    path = Path(folder) / LEGACY_MANIFEST
    if not path.is_file():
        raise PrecedentError(
            "index_missing",
            f"no previous-format precedent index at {folder}: no {LEGACY_MANIFEST} there"
            + (f" (it already holds {DB_FILE}, the current format)" if (Path(folder) / DB_FILE).exists() else ""),
        )
    try:
        manifest = json.loads(path.read_bytes())
        return str(manifest["embedding_model"]), int(manifest["dims"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise PrecedentError("corrupt", f"{path} is not a readable manifest ({err!r})") from err


async def migrate(source: Path, target: Path | None = None, progress: Progress | None = None) -> MigrationReport:
    """Copy the previous-format store at ``source`` into the SQLite store at ``target`` (default:
    the same folder, beside the old files)."""
    started = time.perf_counter()
    source, target = Path(source), Path(target or source)
    model, dims = legacy_model(source)
    stored = _StoredVectors(model, dims)
    report = MigrationReport(source, target, model, dims)
    old = await LegacyIndex.open(source, stored, create=False)
    try:
        report.documents = len(old)
        if (target / DB_FILE).exists():
            new = await EmbeddedIndex.open(target, stored, create=False, beside_legacy=True)
            try:
                await _copy(old, new, report, progress)
            finally:
                await new.close()
        else:
            target.mkdir(parents=True, exist_ok=True)
            scratch = Path(tempfile.mkdtemp(prefix=".migrating-", dir=target))
            try:
                new = await EmbeddedIndex.open(scratch, stored, create=True)
                try:
                    await _copy(old, new, report, progress)
                finally:
                    await new.close()  # the last connection closed: SQLite folds the log into the file
                for leftover in (f"{DB_FILE}-wal", f"{DB_FILE}-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        (scratch / leftover).unlink()
                os.replace(scratch / DB_FILE, target / DB_FILE)
                report.created = True
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    finally:
        await old.close()
    report.elapsed_s = time.perf_counter() - started
    return report


async def _copy(old: LegacyIndex, new: EmbeddedIndex, report: MigrationReport, progress: Progress | None) -> None:
    done = 0
    batch: list[tuple[Document, np.ndarray]] = []

    async def flush() -> None:
        nonlocal done
        present = new.stored([d.id for d, _ in batch])
        changed = [
            (doc, vector)
            for doc, vector in batch
            if present.get(doc.id) != (doc.model_dump_json(), np.asarray(vector, dtype="<f4").tobytes())
        ]
        if changed:
            await asyncio.to_thread(new.write, changed)
        report.written += len(changed)
        report.unchanged += len(batch) - len(changed)
        done += len(batch)
        batch.clear()
        if progress:
            progress(done, report.documents)

    for doc, vector in old.documents():
        batch.append((doc, vector))
        if len(batch) >= BATCH:
            await flush()
    if batch:
        await flush()
    if progress:
        progress(done, report.documents)
