"""Evaluation datasets: ``DisputeCase`` records that carry the 17 real jurors' votes.

A dataset is a ``.jsonl`` file (one case a line) or a directory of ``.json`` case files and
``.jsonl`` files, walked recursively in sorted order. Evidence paths are relative to the media
root: the directory, or the ``.jsonl`` file's folder (or the ``media_root`` that ``split.json``
next to it records, so a split written elsewhere still finds the photos). Every problem is
collected and reported at once, because a dataset is usually fixed in one sitting, not one
line per run.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from ..errors import CyberJurorsError
from ..schemas import DisputeCase, Votes

MAX_PROBLEMS = 20
SPLITS = ("train", "val", "test")
SPLIT_MANIFEST = "split.json"
SYNTH_MANIFEST = "manifest.json"  # written by `cyberjurors synth` beside its cases.jsonl
Band = Literal["hard", "medium", "easy"]
BANDS: tuple[Band, ...] = ("hard", "medium", "easy")


class DatasetError(CyberJurorsError, ValueError):
    """All the problems found in a dataset, each as ``file:line: reason``."""

    kind = "bad_dataset"

    def __init__(self, problems: Sequence[str], total: int | None = None):
        self.problems = list(problems)
        total = len(self.problems) if total is None else total
        more = f"\n  ... and {total - len(self.problems)} more" if total > len(self.problems) else ""
        super().__init__(f"{total} problem(s) in the dataset:\n  " + "\n  ".join(self.problems) + more)


class Problems:
    """Collects problems up to ``MAX_PROBLEMS`` and keeps counting after that."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.total = 0

    def add(self, where: str, reason: str) -> None:
        self.total += 1
        if len(self.shown) < MAX_PROBLEMS:
            self.shown.append(f"{where}: {reason}")

    def raise_if_any(self) -> None:
        if self.total:
            raise DatasetError(self.shown, self.total)


def describe(error: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'case'}: {e['msg']}" for e in error.errors())


@dataclass(frozen=True)
class Dataset:
    cases: list[DisputeCase]
    media_root: Path
    source: Path
    sha256: str


def digest(cases: Iterable[DisputeCase]) -> str:
    """Independent of order and file layout: the same cases give the same digest."""
    return hashlib.sha256("\n".join(sorted(c.digest() for c in cases)).encode()).hexdigest()


def _records(path: Path, shown: str, problems: Problems) -> Iterator[tuple[str, object]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                yield f"{shown}:{n}", json.loads(line)
            except json.JSONDecodeError as e:
                problems.add(f"{shown}:{n}", f"invalid JSON ({e.msg}, column {e.colno})")
    else:
        try:
            yield shown, json.loads(text)
        except json.JSONDecodeError as e:
            problems.add(f"{shown}:{e.lineno}", f"invalid JSON ({e.msg}, column {e.colno})")


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(
        p
        for p in path.rglob("*")
        if p.is_file() and p.suffix in (".json", ".jsonl") and p.name not in (SPLIT_MANIFEST, SYNTH_MANIFEST)
    )


def _media_root(path: Path) -> Path:
    if path.is_dir():
        return path
    manifest = path.parent / SPLIT_MANIFEST
    if manifest.is_file():
        try:
            recorded = json.loads(manifest.read_text(encoding="utf-8")).get("media_root")
        except (json.JSONDecodeError, AttributeError):
            recorded = None
        if isinstance(recorded, str):
            return (path.parent / recorded).resolve()
    return path.parent


def load_dataset(path: str | Path) -> Dataset:
    path = Path(path)
    if not path.exists():
        raise DatasetError([f"{path}: no such file or directory"])
    problems = Problems()
    seen: dict[str, tuple[str, str]] = {}  # case_id -> (where, digest)
    cases: list[DisputeCase] = []
    for file in _files(path):
        shown = str(file.relative_to(path)) if path.is_dir() else str(file)
        for where, record in _records(file, shown, problems):
            try:
                case = DisputeCase.model_validate(record)
            except ValidationError as e:
                problems.add(where, f"not a valid case: {describe(e)}")
                continue
            if case.ground_truth is None:
                problems.add(where, f"case {case.case_id!r} has no ground_truth (the 17 real votes)")
                continue
            first = seen.get(case.case_id)
            if first is None:
                seen[case.case_id] = (where, case.digest())
                cases.append(case)
            elif first[1] != case.digest():
                problems.add(where, f"case id {case.case_id!r} already used with different content at {first[0]}")
    if not cases and not problems.total:
        problems.add(str(path), "empty dataset: no cases found")
    problems.raise_if_any()
    return Dataset(cases=cases, media_root=_media_root(path), source=path, sha256=digest(cases))


# --- difficulty ----------------------------------------------------------------------------


def difficulty(votes: Votes) -> int:
    """The real jury's vote margin: 1 (9:8, split down the middle) to 17 (unanimous)."""
    return abs(votes.seller - votes.buyer)


def difficulty_band(votes: Votes) -> Band:
    """hard: margin <= 5 (9:8, 10:7, 11:6); medium: 7..11 (12:5..14:3); easy: 13..17 (15:2..17:0)."""
    margin = difficulty(votes)
    return "hard" if margin <= 5 else "medium" if margin <= 11 else "easy"


def stratum(case: DisputeCase) -> str:
    if case.ground_truth is None:
        raise ValueError(f"case {case.case_id!r} has no ground_truth, so no difficulty band")
    return f"{case.metadata.category}/{difficulty_band(case.ground_truth)}"


# --- split ---------------------------------------------------------------------------------


def allocate(n: int, ratios: Sequence[int]) -> list[int]:
    """Largest remainder: floors of the exact quotas, then one more to the largest fractions
    (ties to the earlier split), so the counts sum to n and stay as close to the ratios as
    integers allow."""
    total = sum(ratios)
    counts = [n * r // total for r in ratios]
    by_remainder = sorted(range(len(ratios)), key=lambda i: (-(n * ratios[i] % total), i))
    for i in by_remainder[: n - sum(counts)]:
        counts[i] += 1
    return counts


def stratified_split(
    cases: Sequence[DisputeCase], ratios: Sequence[int] = (3, 1, 2), seed: int = 0
) -> dict[str, list[DisputeCase]]:
    """Split per category x difficulty band, so each split sees the same mix of easy and hard
    cases in each category. Depends only on the set of cases and the seed, not on their order."""
    if len(ratios) != len(SPLITS) or any(r < 0 for r in ratios) or sum(ratios) <= 0:
        raise ValueError(f"ratios must be {len(SPLITS)} non-negative integers, not all zero: {ratios!r}")
    ids = Counter(c.case_id for c in cases)
    if dupes := sorted(i for i, k in ids.items() if k > 1):
        raise ValueError(f"case ids appear more than once: {dupes[:5]}")
    strata: dict[str, list[DisputeCase]] = defaultdict(list)
    for case in cases:
        strata[stratum(case)].append(case)
    out: dict[str, list[DisputeCase]] = {s: [] for s in SPLITS}
    for name, members in sorted(strata.items()):
        members = sorted(members, key=lambda c: c.case_id)
        random.Random(f"{seed}:{name}").shuffle(members)
        start = 0
        for split, count in zip(SPLITS, allocate(len(members), ratios), strict=True):
            out[split].extend(members[start : start + count])
            start += count
    return {s: sorted(out[s], key=lambda c: c.case_id) for s in SPLITS}


def split_counts(split: dict[str, list[DisputeCase]]) -> dict[str, dict[str, int]]:
    return {s: dict(sorted(Counter(stratum(c) for c in cases).items())) for s, cases in split.items()}


def write_jsonl(cases: Iterable[DisputeCase], path: str | Path) -> int:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [c.model_dump_json(exclude_none=True) for c in cases]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def write_split(dataset: Dataset, out_dir: str | Path, ratios: Sequence[int] = (3, 1, 2), seed: int = 0) -> dict:
    """Writes train/val/test.jsonl and split.json; returns what split.json holds."""
    out_dir = Path(out_dir)
    split = stratified_split(dataset.cases, ratios, seed)
    for name, cases in split.items():
        write_jsonl(cases, out_dir / f"{name}.jsonl")
    manifest = {
        "source": str(dataset.source),
        "source_sha256": dataset.sha256,
        "seed": seed,
        "ratios": dict(zip(SPLITS, ratios, strict=True)),
        "media_root": os.path.relpath(dataset.media_root.resolve(), out_dir.resolve()),
        "cases": {s: len(c) for s, c in split.items()},
        "sha256": {s: digest(c) for s, c in split.items()},
        "strata": split_counts(split),
    }
    (out_dir / SPLIT_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest
