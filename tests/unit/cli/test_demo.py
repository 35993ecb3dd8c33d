"""`cyberjurors demo --local-model` (cli/worker.py) before anything starts: the small court it sits,
a setting the operator gave winning over it, and a clear refusal when the server's venv is missing.
tests/integration/test_real_model.py runs a case on the server itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cyberjurors.cli import app
from cyberjurors.cli.worker import LOCAL_CALLS, LOCAL_COURT, LOCAL_SWITCHES, local_court
from cyberjurors.config import Settings


def test_the_local_court_points_at_the_server_and_a_given_setting_wins(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CYBERJURORS_JURORS", "5")
    s = local_court(Settings(), "http://127.0.0.1:1234/v1", "SmolLM2-135M-Instruct")
    assert (s.llm_backend, s.openai_base_url, s.model) == (
        "openai",
        "http://127.0.0.1:1234/v1",
        "SmolLM2-135M-Instruct",
    )
    assert s.jurors == 5  # the operator's
    assert {k: getattr(s, k) for k in LOCAL_COURT if k != "jurors"} == {
        k: v for k, v in LOCAL_COURT.items() if k != "jurors"
    }
    assert {k: getattr(s, k) for k in LOCAL_SWITCHES} == LOCAL_SWITCHES
    assert {k: getattr(s.call_for("juror"), k) for k in LOCAL_CALLS} == LOCAL_CALLS


def test_a_switch_or_a_call_the_operator_gave_wins_over_the_local_court():
    given = Settings(pipeline_overrides={"round_summary": True}, llm_roles={"default": {"max_output_tokens": 900}})
    s = local_court(given, "http://127.0.0.1:1234/v1", "SmolLM2-135M-Instruct")
    assert s.round_summary is True and s.call_for("juror").max_output_tokens == 900


def test_without_the_servers_venv_the_demo_says_how_to_build_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["demo", "--local-model", "--server-python", str(tmp_path / "python")])
    assert result.exit_code == 2, result.output
    assert "no local model server" in result.output and "make llm-server" in result.output
