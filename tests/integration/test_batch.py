"""``cyberjurors eval`` through a real worker, then ``eval --batch`` into the same OUT: the batch
report puts the streaming run's measured cost beside its own (tests/unit/evaluation/test_batch.py
has the waves and the batch store)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from rich.console import Console

from cyberjurors.config import Settings
from cyberjurors.evaluation.ladder import ABLATIONS
from cyberjurors.evaluation.runner import run_eval
from cyberjurors.evaluation.runs import Options

from ..messages_server import MessageBatches, ScriptedServer, StrictModel, serving
from ..unit.evaluation.test_batch import dataset as dataset

pytestmark = pytest.mark.usefixtures("no_provider_env")


@pytest.mark.integration
async def test_the_report_puts_a_streaming_run_of_the_same_configuration_beside_the_batch_run(
    dataset, settings: Settings, broker: str, tmp_path: Path
) -> None:
    """``eval`` through the topology (a real worker calling the server's /v1/messages), then ``eval
    --batch`` into the same OUT: the batch report carries the streaming run's measured cost."""
    options = Options(out=tmp_path / "out", party_swap=False, concurrency=4, timeout_s=120)
    with serving(ScriptedServer(respond=StrictModel(), batches=MessageBatches())) as url:
        base = settings.model_copy(
            update={
                "llm_backend": "anthropic",
                "anthropic_api_key": "sk-ant-test",
                "anthropic_base_url": url,
                "llm_max_retries": 0,
                "llm_batch": {"poll_s": 0.01},
            }
        )
        (streamed,) = await asyncio.to_thread(
            run_eval, dataset, [ABLATIONS["iv-cot"]], base, options, Console(quiet=True), broker
        )
        (batched,) = await asyncio.to_thread(
            run_eval,
            dataset,
            [ABLATIONS["iv-cot"]],
            base,
            Options(out=options.out, party_swap=False, batch=True),
            Console(quiet=True),
        )
    assert streamed.mode == "stream" and streamed.summary.verdicts == len(dataset.cases)
    lines = (options.out / "results" / "iv-cot.jsonl").read_text().splitlines()
    costs = [json.loads(line)["verdict"]["tokens"]["cost_usd"] for line in lines]
    assert batched.batch is not None and batched.batch.streaming_verdicts == len(dataset.cases) == len(costs)
    assert batched.batch.streaming_cost_per_case_usd == pytest.approx(sum(costs) / len(costs))
    assert streamed.summary.cost_per_case_usd == pytest.approx(batched.batch.streaming_cost_per_case_usd)
    assert 0 < batched.summary.cost_per_case_usd < streamed.summary.cost_per_case_usd
