"""Scaling: the cost of a verdict as the jury grows (N = 5, 9, 17, 33) and deliberates longer
(T = 1, 3, 5), with early stopping on and off, measured side by side in one run.

Each configuration judges the same example cases through the stage functions the Faust workers
run (``jury.stages.judge``), in one process, on the offline backend with a simulated per-call
latency L (a labelled stand-in: its votes are lexical, its token counts estimates, its latency
a parameter). All cases of a configuration run at once under one LLM concurrency cap, as they
would in a worker; wall time is for the whole batch, latency per case.

Run: .venv/bin/python bench/scaling.py [--latency 0.2] [--cases 6] [--concurrency 64]
"""

from __future__ import annotations

import asyncio
import statistics
import time

import typer
from rich.table import Table

from cyberjurors.config import Settings
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.stages import judge
from cyberjurors.llm.port import GuardedLLM
from cyberjurors.schemas import DisputeCase, Usage
from harness import EXAMPLES, example_cases, make_console

console = make_console(160)
JURORS = (5, 9, 17, 33)
ROUNDS = (1, 3, 5)


async def run(cases: list[DisputeCase], settings: Settings, latency: float, concurrency: int) -> dict[str, float]:
    llm = GuardedLLM(OfflineLLM(latency_s=latency), concurrency=concurrency)
    started = time.perf_counter()

    async def timed(case: DisputeCase) -> tuple[float, object]:
        t0 = time.perf_counter()
        verdict = await judge(case, llm, settings)
        return time.perf_counter() - t0, verdict

    results = await asyncio.gather(*(timed(c) for c in cases))
    wall = time.perf_counter() - started
    verdicts = [v for _, v in results]
    total = sum((v.tokens for v in verdicts), Usage())
    n = len(verdicts)
    return {
        "calls": total.calls / n,
        "tokens": total.total_tokens / n,
        "rounds": statistics.mean(v.rounds_used for v in verdicts),
        "latency": statistics.median(t for t, _ in results),
        "wall": wall,
    }


def main(
    latency: float = typer.Option(0.2, help="simulated seconds per LLM call"),
    cases: int = typer.Option(6, help="example cases per configuration"),
    concurrency: int = typer.Option(64, help="LLM calls in flight (the worker's llm_concurrency)"),
) -> None:
    chosen = example_cases(cases)
    console.print(
        f"{len(chosen)} example cases per configuration, L = {latency}s per call, {concurrency} calls in "
        "flight; offline backend (a labelled stand-in); precedents off"
    )
    table = Table(title="Cost per case by jury size N and rounds T: early stop on (delta 0.8) | off")
    for column in (
        "N",
        "T",
        "calls",
        "calls (off)",
        "tokens",
        "tokens (off)",
        "rounds used",
        "latency s",
        "latency s (off)",
        "saved by early stop",
    ):
        table.add_column(column, justify="right")
    # no per-case budget: large N x T is what is measured, not what the default would stop
    base = Settings(
        llm_backend="offline", precedent_backend="none", media_root=EXAMPLES, metrics_port=0, case_token_budget=0
    )
    rows = {}
    for n in JURORS:
        for t in ROUNDS:
            on = asyncio.run(run(chosen, base.model_copy(update={"jurors": n, "rounds": t}), latency, concurrency))
            off = asyncio.run(
                run(
                    chosen,
                    base.model_copy(update={"jurors": n, "rounds": t, "early_stop": 0}),
                    latency,
                    concurrency,
                )
            )
            rows[n, t] = on
            table.add_row(
                str(n),
                str(t),
                f"{on['calls']:.1f}",
                f"{off['calls']:.1f}",
                f"{on['tokens']:,.0f}",
                f"{off['tokens']:,.0f}",
                f"{on['rounds']:.2f}",
                f"{on['latency']:.2f}",
                f"{off['latency']:.2f}",
                f"{1 - on['tokens'] / off['tokens']:.0%} tokens",
            )
    console.print(table)
    ref = rows[17, 3]
    console.print(
        "relative to the paper's N = 17, T = 3 (early stop on): "
        + ", ".join(f"N={n} T={t}: {rows[n, t]['tokens'] / ref['tokens']:.2f}x tokens" for n, t in rows if t == 3)
    )


if __name__ == "__main__":
    typer.run(main)
