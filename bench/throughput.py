"""Throughput with 1, 2 and 4 partitions / workers on the embedded broker.

For each k: fresh topics (prefix) with k partitions, a fresh consumer group (app id), k worker
processes in that group. The offline backend (a labelled stand-in, not model judgement) answers
every model call after a simulated provider latency L, and each worker caps its calls in flight
(``llm_concurrency``, a provider rate limit per worker) and the cases each stage agent works on
(``stage_concurrency``), so the work is latency-bound like a real provider's and more workers
should add capacity. Before anything is measured, the admin API must show the group Stable with
all k workers as members (the same members twice, 1 s apart), and each worker must have judged
the warm-up case of each partition it holds (one per partition), the partitions disjoint and
covering the topic; the rebalance is timed separately, not measured as throughput. Which worker
holds which partition comes from the admin API's member assignments when the broker reports them
(Tansu 0.6 does not: then from which worker judged each warm-up case, by its model-call log).

Then M cases (copies of examples/cases with unique ids, chosen so the default murmur2 partitioner
spreads them evenly over the k partitions, and the same in every run, so every k judges the same
work) are produced at once, and the run is measured from the first produce to the last verdict:
cases/min, and p50/p95 of the verdicts' own latency (intake to decision, so it includes the time a
case waited behind the others). Each k runs ``--repeat`` times, the ks interleaved (1,2,4,1,2,4,...)
so that machine noise hits all of them alike; the table shows medians, and speed-ups are medians of
per-repetition ratios against k=1. A second table shows, per run, which partitions each worker
held and how many verdicts and model calls each produced, to show the load really was spread; a
run is marked rebalanced when the group, sampled every second, left Stable or changed members.

The machine is shared and noisy: the figures are reported, never asserted. Ctrl-C (or SIGTERM)
stops the workers, then the broker. Worker, model-call and broker logs stay in a temp folder.

Run: .venv/bin/python bench/throughput.py [--quick] [--cases 48] [--repeat 3] [--latency 0.5]
     [--llm-concurrency 8] [--stage-concurrency 2] [--ks 1,2,4] [--timeout 900]
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.schemas import DisputeCase
from harness import (
    EXAMPLES,
    BenchError,
    GroupWatch,
    Workers,
    balanced_copies,
    broker,
    cpu_seconds,
    interrupt_on_sigterm,
    make_console,
    partition_of,
    peak_rss_mb,
    run_cases,
    settled_group,
)
from throughput_report import RunResult, print_settings, report

console = make_console(220)


def assignment(
    settings: Settings, workers: Workers, members: dict[str, set[int] | None], warm: list[DisputeCase]
) -> dict[int, set[int]]:
    """Worker -> disputes.events partitions: as the admin API reports them, else as the warm-up showed."""
    k, ids = settings.partitions, {c.case_id for c in warm}
    held = {i: members[f"{settings.app_id}-w{i}"] for i in range(k)}
    judged = {i: {partition_of(e["case_id"], k) for e in workers.calls(i, ids)} for i in range(k)}
    held = {i: p if p is not None else judged[i] for i, p in held.items()}
    if sorted(x for p in held.values() for x in p) != list(range(k)) or any(not judged[i] for i in judged):
        raise BenchError(f"k={k}: partitions held {held}, warm-up cases judged per worker {judged}")
    return held


def one_run(
    base: Settings,
    work: Path,
    k: int,
    rep: int,
    cases: list[DisputeCase],
    warm: list[DisputeCase],
    timeout_s: float,
    progress: Progress,
    task: TaskID,
    broker_pid: int,
) -> RunResult:
    run = f"k{k}-r{rep}-{uuid.uuid4().hex[:6]}"
    settings = base.model_copy(
        update={"partitions": k, "app_id": f"tp-{run}", "topic_prefix": f"tp-{run}.", "datadir": work / run / "faust"}
    )
    asyncio.run(ensure_topics(settings))
    say = lambda text: progress.update(task, description=f"k={k} rep {rep + 1}: {text}")  # noqa: E731
    say(f"starting {k} worker(s)")
    progress.update(task, completed=0, total=len(cases))
    t0 = time.perf_counter()
    with Workers(settings, k, work / run) as workers:
        say("waiting for the group to settle")
        group = asyncio.run(settled_group(settings, workers, timeout_s=120))
        ready_s = time.perf_counter() - t0
        say("warm-up, one case per partition")
        watch = GroupWatch(settings, workers, group)
        warm_burst = asyncio.run(run_cases(settings, warm[:k], timeout_s, on_poll=watch))
        if watch.disturbed:
            raise BenchError(f"k={k}: the group rebalanced during warm-up")
        held = assignment(settings, workers, group.members, warm[:k])
        say(f"{len(cases)} cases in flight")
        cpu_before = [cpu_seconds(pid) for pid in [*workers.pids, broker_pid]]
        burst = asyncio.run(
            run_cases(
                settings, cases, timeout_s, on_poll=watch, on_verdict=lambda n: progress.update(task, completed=n)
            )
        )
        cpu = [cpu_seconds(pid) - b for pid, b in zip([*workers.pids, broker_pid], cpu_before, strict=False)]
        rss = [peak_rss_mb(pid) for pid in workers.pids]
        say("stopping workers")
    calls = [workers.calls(i, set(burst.outcomes)) for i in range(k)]
    return RunResult.of(
        settings, rep, burst, held, calls, cpu, rss, ready_s, warm_burst.last - warm_burst.started, watch.disturbed
    )


def main(
    quick: Annotated[bool, typer.Option(help="ks 1,2; M = 16; one repetition (under about 2 minutes)")] = False,
    ks: Annotated[str, typer.Option(help="partition/worker counts, comma-separated")] = "1,2,4",
    cases: Annotated[int, typer.Option("--cases", "-m", help="M, cases per measured run")] = 48,
    repeat: Annotated[int, typer.Option(help="repetitions of every k, interleaved")] = 3,
    latency: Annotated[float, typer.Option(help="simulated seconds per model call (offline backend)")] = 0.5,
    llm_concurrency: Annotated[int, typer.Option(help="model calls in flight per worker (a provider rate limit)")] = 8,
    stage_concurrency: Annotated[int, typer.Option(help="cases each stage agent works on at once, per worker")] = 2,
    timeout: Annotated[float, typer.Option(help="seconds a run's verdicts may take before the bench gives up")] = 900,
) -> None:
    k_list, cases, repeat = options(quick, ks, cases, repeat)
    work = Path(tempfile.mkdtemp(prefix="cj-throughput-"))
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
        datadir=work / "faust",
        precedent_dir=work / "precedents",
    )
    measured, warm = balanced_copies(cases, k_list, "tp"), balanced_copies(max(k_list), k_list, "warm")
    print_settings(console, settings, k_list, cases, repeat, timeout)
    console.print(f"work folder (broker, worker and model-call logs): {work}")
    results: list[RunResult] = []
    began = time.perf_counter()
    try:
        with (
            broker(work) as (bootstrap, broker_pid),
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
            ) as progress,
        ):
            settings = settings.model_copy(update={"kafka_bootstrap_servers": bootstrap})
            overall, current = progress.add_task("runs", total=len(k_list) * repeat), progress.add_task("", total=cases)
            for rep in range(repeat):
                for k in k_list:
                    results.append(
                        one_run(settings, work, k, rep, measured, warm, timeout, progress, current, broker_pid)
                    )
                    progress.console.print(results[-1].line())
                    progress.advance(overall)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: workers stopped[/]")
        if results:
            report(console, results, k_list, settings, cases)
        raise typer.Exit(130) from None
    except BenchError as err:
        console.print(f"[red]bench failed:[/] {err}\nlogs in {work}")
        raise typer.Exit(1) from None
    report(console, results, k_list, settings, cases)
    console.print(
        f"total {time.perf_counter() - began:.0f} s; load average now "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; logs in {work}"
    )


def options(quick: bool, ks: str, cases: int, repeat: int) -> tuple[list[int], int, int]:
    if quick:
        ks, cases, repeat = "1,2", 16, 1
    try:
        k_list = [int(x) for x in ks.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter("--ks takes comma-separated integers, e.g. 1,2,4") from None
    if not k_list or min(k_list) < 1 or repeat < 1:
        raise typer.BadParameter("--ks needs positive integers and --repeat at least 1")
    if cases < 2 * max(k_list):
        raise typer.BadParameter("--cases must be at least twice the largest k (p50/p95 need a few per partition)")
    interrupt_on_sigterm()  # a kill also goes through the clean-up
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "KAFKA_BOOTSTRAP_SERVERS"):
        os.environ.pop(var, None)  # the stand-in and the embedded broker, whatever the environment holds
    return k_list, cases, repeat


if __name__ == "__main__":
    typer.run(main)
