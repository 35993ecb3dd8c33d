"""Building the precedent base B = <H, N> from labelled historical cases.

``build_precedents`` reads decided cases (``DisputeCase`` JSON with ``ground_truth``: a ``.json``
file per case, ``.jsonl`` with one case per line, or folders of them), indexes each as a
historical case in H, distils guidelines N per category with the configured LLM, folds
near-duplicates together and upserts the guidelines.

Resumable and idempotent. ``build-state.json`` in ``settings.precedent_dir`` records, for the index
it belongs to, each indexed case's digest and each distilled chunk's digest (category, distil
backend and model, and the chunk's cases) with the guideline ids it produced. Chunks are distilled,
merged and upserted one at a time, in a fixed order, and the state is saved after each, so:

* a re-run skips the cases already indexed and the chunks already distilled, and writes nothing;
* an interrupted build (a failed LLM call, a kill) resumes at the first unfinished chunk and ends
  with the same guidelines as a build that was never interrupted;
* a chunk whose guidelines are no longer in the index (the index was wiped) is done again.

Near-duplicates are looked for among the guidelines already in the index: for each new rule the
``vector`` search of the same category and kind (the protocol's only way to find rules by meaning,
so it also finds rules that came from outcome learning), plus ``get`` by id for an identical rule
(which also finds a retired one; a retired rule that is distilled again stays retired). Existing
guidelines keep their id and wording and get a new version when a merge adds support or confidence.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from pydantic import ValidationError

from ..config import Settings
from ..errors import CyberJurorsError
from ..evidence.privacy import minimise
from ..llm.port import LLM, LLMError
from ..schemas import Category, DisputeCase, Usage
from .distill import CHUNK_SIZE, MERGE_THRESHOLD, ChunkResult, chunks, distil_chunk, plan_merge, summarize_case
from .embeddings import Embedder
from .index import PrecedentIndex
from .models import CATEGORIES, Document, Guideline, PrecedentCase, PrecedentError, UpsertReport

STATE_FILE = "build-state.json"
STATE_FORMAT = 1
INDEX_BATCH = 64  # cases per upsert
LOOKAHEAD = 4  # distil calls started ahead of the chunk being merged
NEIGHBOURS = 5  # existing guidelines compared with each new rule

Progress = Callable[[str, int, int], None]
"""progress(stage, done, total) with stage "cases" (indexed into H) or "chunks" (distilled into N)."""


class BuildInputError(CyberJurorsError, ValueError):
    """The paths given cannot be read at all (no such file); nothing was built."""

    kind = "build_input"


class BuildFailed(CyberJurorsError, RuntimeError):
    """The build stopped part-way (e.g. a distil call failed); ``report`` says what was done, and
    a re-run resumes from there."""

    kind = "build_failed"

    def __init__(self, message: str, report: BuildReport):
        super().__init__(message)
        self.report = report


@dataclass
class BuildReport:
    files: int = 0
    cases_read: int = 0
    cases_indexed: int = 0
    cases_unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    """(source, reason) for each file, line or case left out."""
    categories: dict[str, int] = field(default_factory=dict)
    """category -> labelled cases in it."""
    chunks_total: int = 0
    chunks_distilled: int = 0
    chunks_skipped: int = 0
    """already distilled by an earlier run (same cases, same backend and model)."""
    guidelines_created: int = 0
    guidelines_merged: int = 0
    """new rules folded into an existing or another new guideline (which got a new version)."""
    guidelines_unchanged: int = 0
    """new rules identical to a guideline already there, adding nothing."""
    guideline_ids: list[str] = field(default_factory=list)
    """every guideline these cases' chunks produced or were merged into (this run and earlier runs)."""
    notes: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    """document id -> reason, from the index."""
    usage: Usage = field(default_factory=Usage)
    elapsed_s: float = 0.0


# --- reading labelled cases --------------------------------------------------------------------


def read_cases(paths: Iterable[Path]) -> tuple[list[tuple[str, DisputeCase]], list[tuple[str, str]], int]:
    """(source, case) for every readable case, (source, reason) for everything left out, and the
    number of files read. Folders are walked for ``.json`` and ``.jsonl``; a path that does not
    exist raises ``BuildInputError``. Invalid JSON, non-case objects and cases without ground truth
    are skipped with a reason, as is a second case with an id already seen (unless identical)."""
    files: list[Path] = []
    for path in paths:
        path = Path(path)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
        elif path.is_file():
            files.append(path)
        else:
            raise BuildInputError(f"{path}: no such file or folder")
    cases: list[tuple[str, DisputeCase]] = []
    skipped: list[tuple[str, str]] = []
    first: dict[str, tuple[str, str]] = {}  # case id -> (source, digest)
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            skipped.append((str(file), f"unreadable: {err}"))
            continue
        if file.suffix == ".jsonl":
            entries = [(f"{file}:{n}", line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        else:
            entries = [(str(file), text)]
        for source, raw in entries:
            try:
                data = json.loads(raw)
                if not isinstance(data, dict) or "type" in data:
                    raise ValueError("not a DisputeCase object (events are not accepted here: give whole cases)")
                case = DisputeCase.model_validate(data)
            except ValidationError as err:
                skipped.append((source, f"invalid case: {_first_error(err)}"))
                continue
            except ValueError as err:  # json errors too
                skipped.append((source, f"invalid: {err}"))
                continue
            if case.ground_truth is None:
                skipped.append((source, f"{case.case_id}: no ground truth (the 17 jury votes), so not a precedent"))
                continue
            digest = case.digest()
            if case.case_id in first:
                where, seen = first[case.case_id]
                if seen != digest:
                    skipped.append((source, f"{case.case_id}: case id already read from {where} with other content"))
                continue
            first[case.case_id] = (source, digest)
            cases.append((source, case))
    return cases, skipped, len(files)


def _first_error(err: ValidationError) -> str:
    e = err.errors()[0]
    where = ".".join(str(p) for p in e["loc"]) or "case"
    more = f" (+{err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{where}: {e['msg']}{more}"


# --- build state ---------------------------------------------------------------------------------


def index_identity(settings: Settings, index: PrecedentIndex) -> str:
    """What the state file belongs to: another index (or embedding model) starts a fresh state."""
    if settings.precedent_backend == "elasticsearch":
        where = f"elasticsearch {settings.elasticsearch.url} {settings.elasticsearch.index_prefix}"
    else:
        where = f"embedded {Path(settings.precedent_dir).resolve()}"
    return f"{where} model={index.embedding_model}"


def _read_state(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def built_case_ids(settings: Settings) -> set[str] | None:
    """The ids of the cases a build has indexed into the base at ``precedent_dir`` (as its state
    file records them, whichever index it belongs to); None when no build has run there."""
    path = Path(settings.precedent_dir) / STATE_FILE
    return set(_read_state(path).get("cases", {})) if path.exists() else None


class BuildState:
    def __init__(self, path: Path, identity: str):
        self.path = path
        self.identity = identity
        self.cases: dict[str, str] = {}  # case id -> digest of the indexed PrecedentCase
        self.chunks: dict[str, dict] = {}  # chunk digest -> {category, cases, guidelines, at}
        if path.exists():
            data = _read_state(path)
            if data.get("format") == STATE_FORMAT and data.get("index") == identity:
                self.cases = dict(data.get("cases", {}))
                self.chunks = dict(data.get("chunks", {}))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        data = {"format": STATE_FORMAT, "index": self.identity, "cases": self.cases, "chunks": self.chunks}
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


def case_digest(case: PrecedentCase) -> str:
    return hashlib.sha256(case.model_dump_json().encode()).hexdigest()


def chunk_digest(category: str, cases: Sequence[PrecedentCase], backend: str, model: str) -> str:
    key = json.dumps([category, backend, model, [[c.case_id, case_digest(c)] for c in cases]])
    return hashlib.sha256(key.encode()).hexdigest()


# --- the build -------------------------------------------------------------------------------------


async def build_precedents(
    paths: Sequence[Path],
    settings: Settings,
    llm: LLM,
    index: PrecedentIndex,
    embedder: Embedder,
    progress: Progress | None = None,
    merge_threshold: float = MERGE_THRESHOLD,
) -> BuildReport:
    """Index the labelled cases as H and distil N per category; see the module docstring.
    Raises ``BuildInputError`` for a missing path and ``BuildFailed`` (with the partial report)
    when a distil call or an index write fails; a re-run then resumes."""
    started = time.perf_counter()
    report = BuildReport()
    tick = progress or (lambda stage, done, total: None)
    read, report.skipped, report.files = read_cases(paths)
    report.cases_read = len(read)
    # masked as the jury's cases are: their summaries reach the distilling model and every later jury
    precedents = [summarize_case(minimise(case, settings).case) for _, case in read]
    state = BuildState(Path(settings.precedent_dir) / STATE_FILE, index_identity(settings, index))
    try:
        await _index_cases(precedents, index, state, report, tick)
        await _distil_all(precedents, settings, llm, index, embedder, state, report, tick, merge_threshold)
    except BuildFailed as err:
        report.elapsed_s = time.perf_counter() - started
        err.report = report
        raise
    report.elapsed_s = time.perf_counter() - started
    return report


async def _index_cases(
    precedents: list[PrecedentCase], index: PrecedentIndex, state: BuildState, report: BuildReport, tick: Progress
) -> None:
    digests = {c.case_id: case_digest(c) for c in precedents}
    present = {d.id for d in await index.get([c.doc_id for c in precedents])} if precedents else set()
    todo = [c for c in precedents if not (state.cases.get(c.case_id) == digests[c.case_id] and c.doc_id in present)]
    report.cases_unchanged = len(precedents) - len(todo)
    total = len(precedents)
    tick("cases", report.cases_unchanged, total)
    for start in range(0, len(todo), INDEX_BATCH):
        batch = todo[start : start + INDEX_BATCH]
        result = await _upsert(index, [Document.of_case(c) for c in batch], report)
        done = set(result.indexed)
        for c in batch:
            if c.doc_id in done:
                state.cases[c.case_id] = digests[c.case_id]
        report.cases_indexed += len(done)
        state.save()
        tick("cases", report.cases_unchanged + start + len(batch), total)


async def _upsert(index: PrecedentIndex, documents: list[Document], report: BuildReport) -> UpsertReport:
    try:
        result = await index.upsert(documents)
    except PrecedentError as err:
        raise BuildFailed(f"writing to the precedent index failed ({err.kind}): {err}", report) from err
    report.failed.update(result.failed)
    return result


async def _distil_all(
    precedents: list[PrecedentCase],
    settings: Settings,
    llm: LLM,
    index: PrecedentIndex,
    embedder: Embedder,
    state: BuildState,
    report: BuildReport,
    tick: Progress,
    threshold: float,
) -> None:
    backend, model = getattr(llm, "backend", "?"), settings.model_for("distil")
    remembering = _Remembering(embedder)
    by_category = {c: [p for p in precedents if p.category == c] for c in CATEGORIES}
    report.categories = {c: len(cs) for c, cs in by_category.items() if cs}
    plan: list[tuple[Category, str, list[PrecedentCase]]] = []  # (category, digest, chunk), in build order
    for category, cases in by_category.items():
        for chunk in chunks(cases, CHUNK_SIZE):
            plan.append((category, chunk_digest(category, chunk, backend, model), chunk))
    report.chunks_total = len(plan)

    # a chunk is done when the state says so and its guidelines are still in the index
    recorded = sorted({g for _, d, _ in plan if d in state.chunks for g in state.chunks[d]["guidelines"]})
    present = (
        {d.id.removeprefix("guideline:") for d in await index.get([f"guideline:{g}" for g in recorded])}
        if recorded
        else set()
    )
    pending = []
    for category, digest, chunk in plan:
        done = state.chunks.get(digest)
        if done is not None and all(g in present for g in done["guidelines"]):
            report.chunks_skipped += 1
        else:
            pending.append((category, digest, chunk))
    tick("chunks", report.chunks_skipped, report.chunks_total)

    def start(item: tuple[str, str, list[PrecedentCase]]) -> asyncio.Task[ChunkResult]:
        category, digest, chunk = item
        return asyncio.ensure_future(
            distil_chunk(category, chunk, llm, settings, case_id=f"distil:{category}:{digest[:12]}")
        )

    tasks = [start(item) for item in pending[:LOOKAHEAD]]
    try:
        for n, (category, digest, chunk) in enumerate(pending):
            if n + LOOKAHEAD < len(pending):
                tasks.append(start(pending[n + LOOKAHEAD]))
            try:
                result = await tasks[n]
            except LLMError as err:
                raise BuildFailed(
                    f"distilling {category} cases {chunk[0].case_id}..{chunk[-1].case_id} failed "
                    f"({err.kind}): {err}. {report.chunks_distilled} chunks of this run are saved; "
                    "run the build again to resume",
                    report,
                ) from err
            report.usage = report.usage + result.usage.model_copy(update={"calls": max(1, result.usage.calls)})
            report.notes += result.notes
            ids = await merge_and_store(category, result.guidelines, index, remembering, threshold, report)
            state.chunks[digest] = {
                "category": category,
                "cases": [c.case_id for c in chunk],
                "guidelines": ids,
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            state.save()
            report.chunks_distilled += 1
            tick("chunks", report.chunks_skipped + report.chunks_distilled, report.chunks_total)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    report.guideline_ids = sorted({g for _, d, _ in plan for g in state.chunks[d]["guidelines"]})


class _Remembering:
    """The embedder, remembering each rule's vector for the rest of the build (a rule is compared
    again with every later chunk's rules of its category)."""

    def __init__(self, embedder: Embedder):
        self.inner, self.name, self.dims = embedder, embedder.name, embedder.dims
        self.seen: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self.seen))
        if new:
            self.seen.update(zip(new, self.inner.encode(new), strict=True))
        return np.stack([self.seen[t] for t in texts]) if texts else np.zeros((0, self.dims), np.float32)


async def merge_and_store(
    category: str,
    fresh: list[Guideline],
    index: PrecedentIndex,
    embedder: Embedder,
    threshold: float,
    report: BuildReport,
) -> list[str]:
    """Fold one chunk's guidelines into the index's; returns the ids the chunk's rules ended up as."""
    if not fresh:
        return []
    existing: dict[str, Guideline] = {}
    for doc in await index.get([g.doc_id for g in fresh]):  # the same rule, even if retired
        if doc.guideline is not None:
            existing[doc.guideline.id] = doc.guideline
    for g in fresh:
        for hit in await index.search(g.rule, kind="guideline", category=category, k=NEIGHBOURS, mode="vector"):
            other = hit.document.guideline
            if other is not None and other.category == category:
                existing.setdefault(other.id, other)
    merge = await asyncio.to_thread(
        plan_merge, fresh, embedder, threshold, existing=sorted(existing.values(), key=lambda g: g.id)
    )
    fresh_ids = {g.id for g in fresh}
    for g in fresh:
        into = merge.absorbed.get(g.id)
        if into is None:
            report.guidelines_created += 1
        elif into in merge.changed:
            report.guidelines_merged += 1
        else:
            report.guidelines_unchanged += 1
    write = [g for g in merge.guidelines if g.id in merge.changed or (g.id in fresh_ids and g.id not in existing)]
    if write:
        result = await _upsert(index, [Document.of_guideline(g) for g in write], report)
        if result.failed:
            raise BuildFailed(
                f"the index refused {len(result.failed)} guidelines: "
                + "; ".join(f"{k}: {v}" for k, v in list(result.failed.items())[:3]),
                report,
            )
    return sorted({merge.absorbed.get(g.id, g.id) for g in fresh})
