"""`cyberjurors demo` and `cyberjurors eval` get their verdicts with the ecosystem names
(KAFKA_BOOTSTRAP_SERVERS, ANTHROPIC_*, ...) exported to something dead: the settings a command hands
its broker and worker are its own (tests/unit/project/test_settings_precedence.py has the order)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import EXAMPLES
from ..unit.project.test_settings_precedence import DEAD
from .test_eval import sample_dataset

# --- the real commands, with every ecosystem name pointing at a dead port ----------------------


def cyberjurors(*args: str, cwd: Path, timeout_s: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI with DEAD exported, as docs/operations/kafka.md does with a real bootstrap."""
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("CYBERJURORS_")}
    full = (
        base
        | DEAD
        | {
            "CYBERJURORS_LLM_BACKEND": "offline",  # ANTHROPIC_API_KEY is set: auto would pick anthropic
            "CYBERJURORS_PRECEDENT_BACKEND": "none",
            "CYBERJURORS_METRICS_PORT": "0",
            "CYBERJURORS_KAFKA_PROFILE": "local",
            "COLUMNS": "200",
        }
        | env
    )
    try:
        return subprocess.run(
            [sys.executable, "-m", "cyberjurors", *args],
            env=full,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as err:  # run() killed the command; say what it printed
        raise AssertionError(f"cyberjurors {' '.join(args)} ran over {timeout_s}s:\n{err.stdout}") from err


@pytest.mark.integration
def test_demo_gets_verdicts_with_ecosystem_names_exported(tmp_path: Path) -> None:
    cases = [
        EXAMPLES / "cases" / "appl-001-kettle-crack.json",
        EXAMPLES / "cases" / "food-001-granola-past-best-before.json",
    ]
    result = cyberjurors(
        "demo",
        *map(str, cases),
        "--timeout",
        "120",
        cwd=tmp_path,
        CYBERJURORS_DATADIR=str(tmp_path / "demo" / "faust"),
        CYBERJURORS_MEDIA_ROOT=str(EXAMPLES),
    )
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-4000:]
    assert "2 verdicts, 0 dead letters, 0 missing" in said, said[-4000:]


@pytest.mark.integration
def test_eval_gets_verdicts_with_ecosystem_names_exported(tmp_path: Path) -> None:
    data = sample_dataset(tmp_path / "data", ["appl-001-kettle-crack", "food-001-granola-past-best-before"])
    out = tmp_path / "eval"
    result = cyberjurors(
        "eval", str(data), "--ablation", "baseline", "--out", str(out), "--timeout", "120", cwd=tmp_path
    )
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-4000:]
    (report,) = json.loads((out / "report.json").read_text())
    assert report["summary"]["verdicts"] == 2 and report["failed_cases"] == {}
    assert report["settings"]["kafka_bootstrap_servers"] != DEAD["KAFKA_BOOTSTRAP_SERVERS"]
