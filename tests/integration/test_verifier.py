"""The verdict's justification verified, on a real worker (verified once, and a redelivered final
round re-sends the verdict) and in ``cyberjurors eval --ablation`` (the verifier and JURIS rungs);
tests/unit/jury/test_verifier.py has the rest."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cyberjurors.cli import app as cli
from cyberjurors.config import Settings
from cyberjurors.schemas import (
    CaseFile,
    Verdict,
    Verification,
)
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, calls, read_topic, worker_process
from ..unit.jury.test_verifier import KETTLE

# --- through a real worker ------------------------------------------------------------------------


@pytest.mark.integration
async def test_a_worker_verifies_once_and_a_redelivered_final_round_resends_the_verdict(
    settings: Settings, tmp_path: Path
):
    s = settings.model_copy(update={"pipeline": "juris"})
    events = read_events([EXAMPLES / "cases" / KETTLE])
    case_id = events[0].case_id
    async with worker_process(s, tmp_path / "worker.log"):
        await produce(s, events)
        [(_, first)] = await read_topic(s, "disputes.verdicts", until=1, timeout_s=120)
        decided = Verdict.model_validate_json(first)
        assert decided.verification == Verification(status="passed", turns=1)
        before = Counter(c["role"] for c in calls(s.llm_call_log) if c["case_id"] == case_id)
        assert before["verify"] == 1 and before["draft"] == 2

        rounds = await read_topic(s, "disputes.rounds", until=decided.rounds_used, keys={case_id}, timeout_s=30)
        settled_file = rounds[-1][1]  # the verdict step's input, delivered again
        assert len(CaseFile.model_validate_json(settled_file).rounds) == decided.rounds_used
        await produce(s, [Outgoing(case_id, settled_file, "redelivery", topic=s.topic("disputes.rounds"))])
        verdicts = await read_topic(s, "disputes.verdicts", until=2, timeout_s=120)
        assert [v for _, v in verdicts] == [first, first]  # the stored bytes, not a new decision
        after = Counter(c["role"] for c in calls(s.llm_call_log) if c["case_id"] == case_id)
        assert after == before, f"model calls repeated: {before} -> {after}"


@pytest.mark.integration
def test_eval_ablation_runs_the_verifier_and_juris_rungs(
    settings: Settings, broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    cases = [json.loads((EXAMPLES / "cases" / name).read_text()) for name in (KETTLE, "clot-001-shirt-torn-seam.json")]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    (tmp_path / "split.json").write_text(json.dumps({"media_root": str(EXAMPLES)}))
    for name, value in {
        "LLM_BACKEND": "offline",
        "PRECEDENT_BACKEND": "none",
        "METRICS_PORT": "0",
        "APP_ID": settings.app_id,
        "KAFKA_PROFILE": "local",
    }.items():
        monkeypatch.setenv(f"CYBERJURORS_{name}", value)
    out = tmp_path / "eval"
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(tmp_path / "test.jsonl"),
            "--ablation",
            "precedent,verifier,juris",
            "--out",
            str(out),
            "--bootstrap",
            broker,
            "--no-party-swap",
            "--timeout",
            "180",
        ],
    )
    assert result.exit_code == 0, result.output
    reports = {r["name"]: r["summary"] for r in json.loads((out / "report.json").read_text())}
    assert list(reports) == ["+Precedent", "+Verifier", "+JURIS"]
    assert reports["+Precedent"]["verified"] == 0 and reports["+Precedent"]["verifier_turns_mean"] is None
    for name in ("+Verifier", "+JURIS"):
        assert reports[name]["verdicts"] == reports[name]["verified"] == 2
        assert reports[name]["verification_passed"] == 1.0 and reports[name]["verifier_turns_mean"] == 1.0
    # the same verdicts: the rungs differ in the justification and what it costs
    assert reports["+Precedent"]["accuracy"] == reports["+Verifier"]["accuracy"] == reports["+JURIS"]["accuracy"]
    assert reports["+Precedent"]["calls_per_case"] + 1 == reports["+Verifier"]["calls_per_case"]
    assert reports["+Verifier"]["calls_per_case"] + 8 == reports["+JURIS"]["calls_per_case"]
    assert "| +JURIS" in (out / "report.md").read_text() and "Verified pass/turns" in (out / "report.md").read_text()
