"""The juror qualification gate from the command line and on a real worker: `cyberjurors jury
qualify` prints the table, and a worker seats its jury from the cache
(tests/unit/jury/test_qualify.py has the gate itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cyberjurors.config import Settings
from cyberjurors.jury.qualify import (
    CACHE_FILE,
)
from cyberjurors.schemas import (
    Verdict,
)
from cyberjurors.tooling.clients import produce, read_events

from ..conftest import EXAMPLES, ROOT, calls, read_topic, worker_process
from ..unit.jury.test_qualify import base as base
from ..unit.jury.test_qualify import settings_for


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith(("CYBERJURORS_", "ANTHROPIC", "OPENAI"))}
    return subprocess.run(
        [sys.executable, "-m", "cyberjurors", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=base | {"CYBERJURORS_LLM_BACKEND": "offline", "COLUMNS": "200"} | env,
    )


@pytest.mark.integration
async def test_jury_qualify_prints_the_table_and_a_worker_seats_its_jury_from_the_cache(
    base: Path, tmp_path: Path, settings: Settings
):
    settings = settings_for(base, tmp_path).model_copy(
        update={
            k: getattr(settings, k)
            for k in (
                "kafka_bootstrap_servers",
                "app_id",
                "topic_prefix",
                "partitions",
                "datadir",
                "llm_call_log",
                "session_timeout_s",
                "heartbeat_interval_s",
                "commit_interval_s",
                "probe_port",
            )
        }
    )
    settings = settings.model_copy(update={"precedent_backend": "embedded", "media_root": EXAMPLES, "jurors": 17})
    run = cli("jury", "qualify", CYBERJURORS_PRECEDENT_DIR=str(settings.precedent_dir))
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert "offline stand-in" in out and "juror qualification (offline stand-in, mode replace)" in out
    for header in ("persona", "accuracy", "seller share", "bias", "verdict", "serves"):
        assert header in out
    rows = {line.split("│")[2].strip(): line for line in out.splitlines() if line.count("│") > 8}
    assert "replaced by" in rows["Arjun"] and "fails" in rows["Arjun"]
    assert "qualified" in rows["Mei"] and rows["Mei"].rstrip("│ ").endswith("yes")
    assert (settings.precedent_dir / CACHE_FILE).exists()

    files = [EXAMPLES / "cases" / "clot-002-jacket-signed-delivery.json"]
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, read_events(files))
        [(_, value)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=240)
    verdict = Verdict.model_validate_json(value)
    composition = verdict.jury
    assert composition is not None and composition.status == "qualified"
    replaced = {s.replaced.persona: s.persona for s in composition.seats if s.replaced}
    assert replaced["Arjun"] in rows["Arjun"]  # the seat went to the reserve the table named
    assert all(s.vote is not None for s in composition.seats)
    logged = calls(settings.llm_call_log)  # type: ignore[arg-type]
    assert logged and not [c for c in logged if c["role"] == "qualify"]  # every score came from the cache
    # the jurors' memories follow the seated personas (the matcher was rebuilt for the reserves)
    assert json.loads(verdict.model_dump_json())["precedent_coverage"] in ("high", "low")
