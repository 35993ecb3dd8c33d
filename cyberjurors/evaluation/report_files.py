"""Where reports are kept: ``report.json`` (the reports, exact settings included) and
``report.md`` beside it, never overwriting an earlier run's (``write``); ``load`` reads them back."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from .report import EvalReport, to_markdown

REPORT_FILE = re.compile(r"report(?:-([1-9][0-9]*))?\.(?:json|md)")


def write(reports: Sequence[EvalReport], out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``report.json`` and ``report.md`` without ever overwriting one: the first run in a folder
    writes ``report.*``, each later one ``report-N.*`` with N one more than the highest there
    (``report.*`` counting as 1), so the newest run has the highest number."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    numbers = [int(m.group(1) or 1) for p in out_dir.iterdir() if (m := REPORT_FILE.fullmatch(p.name))]
    n = max(numbers, default=0) + 1
    while True:
        stem = "report" if n == 1 else f"report-{n}"
        json_path, md_path = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
        try:  # exclusive creation: a run writing into the same folder at the same moment takes the next number
            with json_path.open("x", encoding="utf-8") as out:
                out.write(json.dumps([r.model_dump(mode="json") for r in reports], indent=2) + "\n")
        except FileExistsError:
            n += 1
            continue
        with md_path.open("x", encoding="utf-8") as out:
            out.write(to_markdown(reports))
        return json_path, md_path


def load(path: str | Path) -> list[EvalReport]:
    return [EvalReport.model_validate(r) for r in json.loads(Path(path).read_text(encoding="utf-8"))]
