"""``migrate``: the previous embedded store (format 1: ``manifest.json``, JSON lines and numpy
files) copied into the SQLite store (``embedded.py``), vectors included: nothing is embedded again,
so the new store holds exactly the old one's documents and vectors, under the old one's embedding
model. The old files are only read here (``LegacyStore``), checked as the old code checked them.

Idempotent: a document already in the target with the same JSON and the same vector is left
alone, so a re-run (or a run after an interrupted one) writes only what is missing or differs.
When the target has no database yet, it is built in a temporary folder inside the target and moved
into place once complete, so an interrupted first migration leaves no half-filled store for a
worker to open. The previous files are left where they are; delete them once the new store serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from .embedded import DB_FILE, LEGACY_MANIFEST, EmbeddedIndex
from .models import KINDS, Document, PrecedentError

BATCH = 2000  # documents per transaction
LEGACY_FORMAT = 1

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


def _corrupt(path: Path | str, problem: str) -> PrecedentError:
    return PrecedentError(
        "corrupt",
        f"precedent index file {path}: {problem}. Restore the folder from a backup, "
        "or rebuild the precedents (cyberjurors precedents build) instead of migrating them",
    )


class LegacyStore:
    """The previous store's files, read: the manifest (format, model, per kind a count and, per
    file, its name, size and sha256), then each kind's ``.jsonl`` (a Document a line) and ``.npy``
    ((rows, dims) float32, row order). Every size, checksum and row count is checked on opening."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        path = self.folder / LEGACY_MANIFEST
        if not path.is_file():
            has_db = (self.folder / DB_FILE).exists()
            raise PrecedentError(
                "index_missing",
                f"no previous-format precedent index at {folder}: no {LEGACY_MANIFEST} there"
                + (f" (it already holds {DB_FILE}, the current format)" if has_db else ""),
            )
        try:
            manifest = json.loads(path.read_bytes())
            if manifest["format"] != LEGACY_FORMAT:
                raise ValueError(f"format {manifest['format']!r} is not {LEGACY_FORMAT}")
            self.model, self.dims = str(manifest["embedding_model"]), int(manifest["dims"])
            parts = {kind: manifest["parts"][kind] for kind in KINDS}
            counts = {kind: int(part["count"]) for kind, part in parts.items()}
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
            raise _corrupt(path, f"not a readable manifest: not valid JSON or a field missing ({err!r})") from err
        self.parts: list[tuple[Path, list[bytes], np.ndarray]] = []
        for kind, part in parts.items():
            doc_path, text = self._checked(part["documents"])
            vec_path, data = self._checked(part["vectors"])
            lines = text.splitlines()
            if len(lines) != counts[kind]:
                raise _corrupt(doc_path, f"{len(lines)} documents but the manifest says {counts[kind]}")
            try:
                vectors = np.load(io.BytesIO(data), allow_pickle=False)
            except (ValueError, TypeError, EOFError, OSError) as err:
                raise _corrupt(vec_path, f"not a readable .npy array ({err})") from err
            if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[1] != self.dims:
                raise _corrupt(vec_path, f"expected float32 (rows, {self.dims}), found {vectors.dtype} {vectors.shape}")
            if len(vectors) != len(lines):
                raise _corrupt(vec_path, f"{len(vectors)} vector rows but {doc_path.name} has {len(lines)} documents")
            self.parts.append((doc_path, lines, vectors))

    def _checked(self, entry: dict[str, Any]) -> tuple[Path, bytes]:
        name = str(entry["file"])
        if Path(name).name != name:
            raise _corrupt(self.folder / LEGACY_MANIFEST, f"file name {name!r} is not a plain name")
        path = self.folder / name
        try:
            data = path.read_bytes()
        except OSError as err:
            raise _corrupt(path, f"missing or unreadable ({err})") from err
        if len(data) != entry.get("bytes"):
            raise _corrupt(
                path, f"{len(data)} bytes but the manifest says {entry.get('bytes')} (truncated or overwritten)"
            )
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise _corrupt(path, "sha256 checksum does not match the manifest")
        return path, data

    def __len__(self) -> int:
        return sum(len(lines) for _, lines, _ in self.parts)

    def documents(self) -> Iterator[tuple[Document, np.ndarray]]:
        for path, lines, vectors in self.parts:
            for number, (line, vector) in enumerate(zip(lines, vectors, strict=True), 1):
                try:
                    yield Document.model_validate_json(line), vector
                except ValidationError as err:
                    raise _corrupt(path, f"line {number} is not a stored document ({err.errors()[0]['msg']})") from err


class _StoredVectors:
    """The embedder a migration opens both stores with: the old store's model name and dims, and
    no model, since the vectors are copied."""

    def __init__(self, name: str, dims: int):
        self.name, self.dims = name, dims

    def encode(self, texts: list[str]) -> np.ndarray:
        raise PrecedentError("bulk_failed", "a migration copies the stored vectors; it embeds nothing")


async def migrate(source: Path, target: Path | None = None, progress: Progress | None = None) -> MigrationReport:
    """Copy the previous-format store at ``source`` into the SQLite store at ``target`` (default:
    the same folder, beside the old files)."""
    started = time.perf_counter()
    source, target = Path(source), Path(target or source)
    old = await asyncio.to_thread(LegacyStore, source)
    stored = _StoredVectors(old.model, old.dims)
    report = MigrationReport(source, target, old.model, old.dims, documents=len(old))
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
    report.elapsed_s = time.perf_counter() - started
    return report


async def _copy(old: LegacyStore, new: EmbeddedIndex, report: MigrationReport, progress: Progress | None) -> None:
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
