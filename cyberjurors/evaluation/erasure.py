"""A case erased from evaluation output folders (`cyberjurors erase --evaluation OUT`), on request:
an evaluation runs on datasets, mostly not on production cases, so only the folders named are read.

In ``OUT``: every JSON-lines file (``results/*.jsonl``, ``eval --batch``'s stored batches and answers)
loses the lines that name the case or its party-swap twin; every other file that names them (a
``report*.json`` / ``report*.md``, derived from the results) is deleted, and the step says which, to
be written again with the next run. An ``eval --batch`` answer is filed under a digest of its
request, not under the case: one that quotes the case without naming it is not found here, and only
deleting ``OUT/batches/`` (a cache: the next run pays for its answers again) removes them all.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..erasure.journal import Step
from ..erasure.run import Run, call_log_forms
from ..evidence.scrub import drop_lines, token_pattern
from .swap import SWAP_SUFFIX, is_swapped, original_id

TEXT_FILES = (".json", ".md", ".html", ".csv", ".txt")


def names_of(case_id: str) -> re.Pattern[bytes]:
    """The case id and its swapped twin's, and the forms a call log names them by (``qualify:c-1``),
    as whole ids (``scrub.token_pattern``: erasing c-1 leaves c-10 alone)."""
    base = original_id(case_id) if is_swapped(case_id) else case_id
    forms = call_log_forms(base) | {base + SWAP_SUFFIX}
    return re.compile(token_pattern(*forms).pattern.encode())


def erase_from(out: Path, case_id: str) -> tuple[int, list[str]]:
    """(lines dropped, files deleted) under ``out``."""
    named = names_of(case_id)
    dropped, deleted = 0, []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        if path.suffix == ".jsonl":
            dropped += drop_lines(path, lambda line: named.search(line) is not None)
        elif path.suffix in TEXT_FILES and path.name != "run.json" and named.search(path.read_bytes()):
            path.unlink()
            deleted.append(str(path.relative_to(out)))
    return dropped, deleted


class EvaluationStep:
    name = "evaluation"

    async def erase(self, run: Run) -> Step:
        if not run.evaluation:
            return Step("skipped", note="not asked for (--evaluation OUT)")
        erased, notes = 0, []
        for out in run.evaluation:
            if not out.is_dir():
                notes.append(f"{out}: not a folder")
                continue
            dropped, deleted = erase_from(out, run.case_id)
            erased += dropped + len(deleted)
            if deleted:
                notes.append(f"{out}: deleted {', '.join(deleted)} (written again by the next run)")
        return Step("done", erased, "; ".join(notes))
