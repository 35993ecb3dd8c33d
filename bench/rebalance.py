"""Rebalance under load: 2 -> 3 -> 2 workers while cases flow, on the embedded broker.

Two workers (one consumer group, ``--partitions`` partitions) judge cases produced at a steady
``--rate`` (copies of examples/cases, ids spread evenly over the partitions; offline backend with
a simulated per-call latency, per-worker caps as in bench/throughput.py, precedents off). When a
third of the cases is out, a third worker starts (scale up); at two thirds it gets SIGTERM (scale
down). Every second the bench samples the group's consumer lag on the pipeline's topics (end
offset minus committed offset, through the admin API, as a lag exporter would).

Reported: cases lost (no verdict and no dead letter by the deadline: must be 0); dead letters;
duplicate verdicts (at-least-once delivery re-sends a stored verdict after a rebalance) and whether
each duplicate carries its case's verdict_id; per change, the time until the group is Stable with
the new members, the peak lag and the time until the lag is back within its range before the
change (at most the p90 of the 30 s before it); per phase, cases/min and verdict latency.
Figures, never assertions. Logs stay in a temp folder.

Run: .venv/bin/python bench/rebalance.py [--cases 300] [--rate 45] [--latency 0.3] [--partitions 6]
"""

from __future__ import annotations

import asyncio
import itertools
import os
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.schemas import DisputeCase, Verdict
from cyberjurors.streams.app import PIPELINE
from cyberjurors.tooling.clients import Outcome, Outcomes, records
from harness import (
    EXAMPLES,
    BenchError,
    LagProbe,
    Workers,
    balanced_copies,
    broker,
    interrupt_on_sigterm,
    machine,
    make_console,
    paced,
    run_cases,
    settled_group,
    table,
)

console = make_console(180)


@dataclass
class Change:
    name: str
    at: float
    settled: float = float("nan")
    exit_code: int | None = None


@dataclass
class Run:
    running: set[int] = field(default_factory=lambda: {0, 1})
    produced: dict[str, float] = field(default_factory=dict)
    judged: dict[str, float] = field(default_factory=dict)
    letters: dict[str, str] = field(default_factory=dict)
    lag: list[tuple[float, int]] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)

    def arrived(self, outcome: Outcome) -> None:
        if outcome.dead_letter is not None:
            self.letters[outcome.case_id] = f"{outcome.dead_letter.stage}/{outcome.dead_letter.reason}"
        else:
            self.judged[outcome.case_id] = outcome.at


async def change(settings: Settings, workers: Workers, run: Run, name: str, up: bool) -> None:
    """Start worker 2 or SIGTERM it; then wait until the group is Stable with the workers left."""
    step = Change(name, time.perf_counter())
    run.changes.append(step)
    if up:
        workers.processes[2].start()
        run.running.add(2)
    else:
        run.running.discard(2)
        step.exit_code = await asyncio.to_thread(workers.processes[2].stop)
    await settled_group(settings, workers, 180, members=set(run.running))
    step.settled = time.perf_counter()


async def sample_lag(probe: LagProbe, run: Run) -> None:
    while True:
        run.lag.append((time.perf_counter(), await probe.lag()))
        await asyncio.sleep(1.0)


async def scenario(
    settings: Settings, workers: Workers, cases: list[DisputeCase], rate: float, timeout_s: float
) -> tuple[Run, dict[str, list[str]]]:
    for i in (0, 1):
        workers.processes[i].start()
    await settled_group(settings, workers, 180, members={0, 1})
    warm = balanced_copies(settings.partitions, [settings.partitions], f"warm{uuid.uuid4().hex[:4]}")
    await run_cases(settings, warm, timeout_s, on_poll=lambda: workers.check({0, 1}))  # both are judging
    run, steps = Run(), []
    async with LagProbe(settings, PIPELINE) as probe, Outcomes(settings, from_beginning=False) as outcomes:
        sampler = asyncio.create_task(sample_lag(probe, run))
        waiting = asyncio.create_task(
            outcomes.wait(
                [c.case_id for c in cases],
                timeout_s=timeout_s,
                on_outcome=run.arrived,
                on_poll=lambda: workers.check(run.running),
            )
        )
        changes = {cases[len(cases) // 3].case_id: "2 -> 3", cases[2 * len(cases) // 3].case_id: "3 -> 2"}
        async for case in paced(settings, cases, rate):
            run.produced[case.case_id] = time.perf_counter()
            if change_name := changes.get(case.case_id):  # once a third (two thirds) of the cases is out
                steps.append(asyncio.create_task(change(settings, workers, run, change_name, up=not steps)))
        await asyncio.gather(waiting, *steps)
        await asyncio.sleep(5)  # a duplicate sent just after the last verdict
        sampler.cancel()
    verdict_ids: dict[str, list[str]] = defaultdict(list)
    async for record in records(settings, "disputes.verdicts", follow=False):
        verdict_ids[record.key.decode()].append(Verdict.model_validate_json(record.value).verdict_id)
    return run, verdict_ids


def drain(run: Run, step: Change) -> tuple[int, float, float]:
    """(peak lag, seconds until the lag is back within its pre-change range, that range's p90)."""
    before = [lag for t, lag in run.lag if step.at - 30 <= t < step.at] or [0]
    ceiling = statistics.quantiles(before, n=10)[-1] if len(before) > 1 else before[0]
    after = [(t, lag) for t, lag in run.lag if t >= step.at]
    back = next((t for t, lag in after if t >= step.settled and lag <= ceiling), float("nan"))
    return max((lag for t, lag in after if t <= back), default=0), back - step.at, ceiling


def report(run: Run, verdict_ids: dict[str, list[str]], cases: list[DisputeCase]) -> None:
    ids = [c.case_id for c in cases]
    lost = [c for c in ids if c not in run.judged and c not in run.letters]
    repeated = {c: v for c, v in verdict_ids.items() if c in run.produced and len(v) > 1}
    console.print(
        f"cases {len(ids)}: judged {len(run.judged)}, dead-lettered {len(run.letters)} "
        f"{sorted(set(run.letters.values()))}, [bold]lost {len(lost)}[/] {lost[:5]}"
    )
    same_id = all(len(set(v)) == 1 for v in repeated.values())
    console.print(
        f"duplicate verdicts: {sum(len(v) - 1 for v in repeated.values())} extra, on {len(repeated)} "
        f"cases; every duplicate with its case's verdict_id: {same_id}"
    )
    changes = table(
        "changes",
        [
            "change",
            "group Stable after s",
            "worker exit",
            "peak lag",
            "lag back within pre-change range (≤ p90) after s",
        ],
        left=("change",),
    )
    for step in run.changes:
        peak, back, ceiling = drain(run, step)
        exit_code = "-" if step.exit_code is None else str(step.exit_code)
        changes.add_row(
            step.name, f"{step.settled - step.at:.1f}", exit_code, str(peak), f"{back:.1f} (≤ {ceiling:.0f})"
        )
    console.print(changes)
    bounds = [min(run.produced.values()), *(s.at for s in run.changes), max(run.judged.values(), default=0)]
    phases = table("phases", ["phase", "workers", "s", "verdicts", "cases/min", "latency p50 / p95 s"], left=("phase",))
    for n, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        done = [t for t in run.judged.values() if lo <= t < hi or (n == 2 and t == hi)]
        waits = sorted(run.judged[c] - t for c, t in run.produced.items() if lo <= t < hi and c in run.judged)
        q = statistics.quantiles(waits, n=20) if len(waits) > 1 else [float("nan")] * 19
        phases.add_row(
            f"{n + 1}",
            ["2", "3", "2"][n],
            f"{hi - lo:.0f}",
            str(len(done)),
            f"{len(done) / (hi - lo) * 60:.1f}",
            f"{statistics.median(waits):.1f} / {q[18]:.1f}",
        )
    console.print(phases)


def main(
    cases: Annotated[int, typer.Option(help="cases produced in all")] = 300,
    rate: Annotated[float, typer.Option(help="cases produced per minute")] = 45,
    latency: Annotated[float, typer.Option(help="simulated seconds per model call (offline backend)")] = 0.3,
    partitions: Annotated[int, typer.Option(help="partitions per topic (6 split evenly over 2 or 3)")] = 6,
    llm_concurrency: Annotated[int, typer.Option(help="model calls in flight per worker")] = 8,
    stage_concurrency: Annotated[int, typer.Option(help="cases each stage agent works on at once")] = 2,
    timeout: Annotated[float, typer.Option(help="seconds the verdicts may take after the first produce")] = 1800,
) -> None:
    interrupt_on_sigterm()
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "KAFKA_BOOTSTRAP_SERVERS"):
        os.environ.pop(var, None)
    work, run_id = Path(tempfile.mkdtemp(prefix="cj-rebalance-")), uuid.uuid4().hex[:6]
    settings = Settings(
        llm_backend="offline",
        offline_latency_s=latency,
        llm_concurrency=llm_concurrency,
        stage_concurrency=stage_concurrency,
        precedent_backend="none",
        metrics_port=0,
        probe_port=0,
        media_root=EXAMPLES,
        kafka_profile="local",
        partitions=partitions,
        app_id=f"rb-{run_id}",
        topic_prefix=f"rb-{run_id}.",
        datadir=work / "faust",
        precedent_dir=work / "precedents",
    )
    chosen = balanced_copies(cases, [partitions], "rb")
    console.print(
        f"{machine()}; {cases} cases at {rate}/min, L = {latency}s, {partitions} partitions, "
        f"llm_concurrency {llm_concurrency}, stage_concurrency {stage_concurrency}; logs in {work}"
    )
    try:
        with broker(work) as (bootstrap, _):
            settings = settings.model_copy(update={"kafka_bootstrap_servers": bootstrap})
            asyncio.run(ensure_topics(settings))
            workers = Workers(settings, 3, work)  # not entered: the scenario starts each one itself
            try:
                run, verdict_ids = asyncio.run(scenario(settings, workers, chosen, rate, timeout))
            finally:
                workers.__exit__()
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: workers stopped[/]")
        raise typer.Exit(130) from None
    except BenchError as err:
        console.print(f"[red]bench failed:[/] {err}\nlogs in {work}")
        raise typer.Exit(1) from None
    report(run, verdict_ids, chosen)


if __name__ == "__main__":
    typer.run(main)
