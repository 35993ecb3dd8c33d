"""A case erased from an evaluation output folder, on request: its lines (and its party-swap twin's)
dropped from every JSON-lines file, a report that names it deleted, another case whose id only
starts the same left alone."""

from __future__ import annotations

import json

from cyberjurors.config import Settings
from cyberjurors.erasure.journal import Entry, Journal
from cyberjurors.erasure.run import Run
from cyberjurors.evaluation.erasure import EvaluationStep, erase_from


def line(case_id: str, says: str) -> str:
    return json.dumps({"case_id": case_id, "verdict": {"justification": says}, "failure": None}) + "\n"


def run_folder(tmp_path):
    out = tmp_path / "out"
    (out / "results").mkdir(parents=True)
    (out / "results" / "paper.jsonl").write_text(
        line("c-1", "Quillfeather-7731") + line("c-1:swap", "swapped") + line("c-10", "kept")
    )
    (out / "batches").mkdir()
    (out / "batches" / "results.jsonl").write_text('{"custom_id": "r1", "message": "about c-1 only"}\n')
    (out / "report.md").write_text("| c-1 | buyer |\n")
    (out / "report-2.md").write_text("| c-10 | seller |\n")
    (out / "run.json").write_text(json.dumps({"run_id": "x", "dataset_source": "cases/c-1"}))
    return out


def test_the_case_and_its_twin_leave_the_run_and_c_10_stays(tmp_path):
    out = run_folder(tmp_path)
    dropped, deleted = erase_from(out, "c-1")
    assert (dropped, deleted) == (3, ["report.md"])
    assert (out / "results" / "paper.jsonl").read_text() == line("c-10", "kept")
    assert (out / "batches" / "results.jsonl").read_text() == ""
    assert (out / "report-2.md").exists() and (out / "run.json").exists()  # run.json holds no case content
    assert erase_from(out, "c-1") == (0, [])


async def test_the_step_is_skipped_unless_asked_and_says_what_it_deleted(tmp_path):
    out = run_folder(tmp_path)
    settings, journal = Settings(llm_backend="offline"), Journal(tmp_path / "erasures")
    assert (await EvaluationStep().erase(Run(settings, "c-1", Entry("r", "c-1"), journal, 1.0))).state == "skipped"
    done = await EvaluationStep().erase(
        Run(settings, "c-1", Entry("r", "c-1"), journal, 1.0, [out, tmp_path / "missing"])
    )
    assert done.erased == 4 and "report.md" in done.note and "missing: not a folder" in done.note
