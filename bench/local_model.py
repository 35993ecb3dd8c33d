"""Every sample case (examples/cases) on a real model: SmolLM2-135M-Instruct under llama-cpp-python's
server (cyberjurors/llm/local_server.py, `make llm-server`), one worker on the embedded broker, the
small court `cyberjurors demo --local-model` sits (3 jurors, 1 round, stage II off), no precedent base.
One case at a time, as the server answers one request at a time.

Per case: how it ended (a verdict, or a dead letter and its reason), the model calls and tokens of
its call log, the wall time from produce to outcome. Then the share that reached a verdict, dead
letters by reason, and the cases lost (no outcome at all: must be 0). A 135M model cannot judge: the
figures are about the request path, never about the verdicts.

Run: .venv/bin/python bench/local_model.py [--cases 16] [--timeout 900]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import Counter
from pathlib import Path

import typer

from cyberjurors.cli.worker import local_court
from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.llm.local_server import local_server
from cyberjurors.tooling.clients import Outcomes, case_event, produce
from cyberjurors.tooling.worker_process import WorkerProcess
from harness import EXAMPLES, broker, call_log, example_cases, machine, make_console, med, table

console = make_console()
SERVER_PYTHON = Path(__file__).resolve().parents[1] / ".venv-llm" / "bin" / "python"


async def one_case(settings: Settings, case, timeout_s: float) -> tuple[str, float]:
    async with Outcomes(settings, from_beginning=False) as outcomes:
        started = time.perf_counter()
        await produce(settings, [case_event(case, "bench")])
        got = (await outcomes.wait([case.case_id], timeout_s=timeout_s)).get(case.case_id)
    if got is None:
        return "lost", time.perf_counter() - started
    return ("verdict" if got.dead_letter is None else f"dead letter: {got.dead_letter.reason}"), got.at - started


def main(cases: int = 16, timeout: float = 900) -> None:
    work = Path(tempfile.mkdtemp(prefix="cj-bench-local-"))
    with local_server(SERVER_PYTHON, log=work / "server.log") as server, broker(work) as (bootstrap, _):
        base = Settings(media_root=EXAMPLES, datadir=work / "faust", llm_call_log=work / "calls.jsonl", metrics_port=0)
        s = local_court(base, server.base_url, server.model.name).model_copy(
            update={
                "kafka_bootstrap_servers": bootstrap,
                "precedent_backend": "none",
                "app_id": "bench-local",
                "letters": False,
            }
        )
        asyncio.run(ensure_topics(s))
        worker = WorkerProcess(s, work / "worker.log").start()
        try:
            ended = {c.case_id: asyncio.run(one_case(s, c, timeout)) for c in example_cases(cases)}
        finally:
            worker.stop()
    log = call_log(s.llm_call_log)
    rows = table(
        f"{len(ended)} sample cases on {server.model.name} (llama-cpp-python), 3 jurors, 1 round; {machine()}",
        ["case", "outcome", "calls", "failed calls", "input tok", "output tok", "wall s"],
        left=("case", "outcome"),
    )
    for case_id, (outcome, wall) in ended.items():
        mine = [e for e in log if e["case_id"] == case_id]
        rows.add_row(
            case_id,
            outcome,
            str(len(mine)),
            str(sum(bool(e["error"]) for e in mine)),
            str(sum(e.get("input_tokens", 0) for e in mine)),
            str(sum(e.get("output_tokens", 0) for e in mine)),
            f"{wall:.0f}",
        )
    console.print(rows)
    outcomes = Counter(o for o, _ in ended.values())
    console.print(
        f"reached a verdict: {outcomes['verdict']} of {len(ended)} ({outcomes['verdict'] / len(ended):.0%}); "
        f"lost: {outcomes['lost']}; dead letters by reason: {dict(o for o in outcomes.items() if o[0].startswith('dead'))}"
    )
    console.print(
        f"median wall per case {med([w for _, w in ended.values()]):.0f} s; calls {len(log)}; "
        f"tokens {sum(e.get('input_tokens', 0) for e in log)} in / {sum(e.get('output_tokens', 0) for e in log)} out"
    )


if __name__ == "__main__":
    typer.run(main)
