"""``cyberjurors eval`` runs the mixed-jury rung through a real worker: the worker gets juror_models
from its parent, and every seat is counted by model in the report (tests/unit/llm/backends/
test_mixed_jury.py routes each juror's call to its provider through the real SDK clients)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from cyberjurors.config import Settings
from cyberjurors.evaluation.dataset import load_dataset
from cyberjurors.evaluation.ladder import select
from cyberjurors.evaluation.report import to_markdown
from cyberjurors.evaluation.runner import run_eval
from cyberjurors.evaluation.runs import Options
from cyberjurors.evaluation.synth import generate

pytestmark = pytest.mark.usefixtures("no_provider_env")


@pytest.mark.integration
def test_eval_runs_the_mixed_jury_rung_through_a_worker(settings: Settings, broker: str, tmp_path: Path):
    generate(tmp_path / "synth", cases=3, seed=5)
    dataset = load_dataset(tmp_path / "synth")
    base = settings.model_copy(update={"juror_models": ["model-a", "model-b"]})
    (report,) = run_eval(
        dataset,
        select("mixed-jury", base),
        base,
        Options(out=tmp_path / "eval", concurrency=3, party_swap=False, timeout_s=120),
        Console(quiet=True),
        broker,
    )
    assert report.name == "+MixedJury" and report.summary.verdicts == 3
    # the worker got juror_models from its parent: every seat is accounted for, by model
    assert {m: s.ballots for m, s in report.summary.by_model.items()} == {"model-a": 9 * 3, "model-b": 8 * 3}
    assert "Juror seats by model:" in to_markdown([report])
