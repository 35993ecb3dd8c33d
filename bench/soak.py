"""Soak: N cases through one worker on the embedded broker (offline backend, no simulated latency,
no precedent base), in batches. After each batch the worker is left idle (longer than an expiry
sweep) and its resident memory (VmRSS) and table entries (``cyberjurors_table_entries``, scraped
from its metrics endpoint) are sampled. The worker is restarted after ``--restart-after`` cases and
at the end, and the time from start to Faust's "Worker ready" (table recovery done) is measured.

Figures: idle RSS per batch; the slope of idle RSS per 1,000 cases after the warm-up (the samples
after the first restart, fitted by least squares); table entries at the end against what the
retention allows (cases in flight + cases decided within ``state_retention_s``, then their
``expired`` markers for one more); at each restart, the time to ready, the part of it spent reading
the changelogs and how many records they held, and the RSS at ready.
Targets (issue 11): slope <= 1 MB per 1,000 cases, entries bounded, recovery independent of history.
Figures, never assertions.

With ``--tracemalloc N`` the worker traces allocations (N frames each; slower, and its RSS is then
not the figure) and the report lists the lines whose allocations grew after the warm-up.

Run: .venv/bin/python bench/soak.py [--quick] [--cases 5000] [--every 250] [--restart-after 1000]
     [--retention 120] [--store memory|rocksdb] [--rate 150] [--tracemalloc 12]
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.tooling.worker_process import WorkerProcess
from harness import (
    broker,
    changelog_records,
    copies,
    free_port,
    heap_growth,
    interrupt_on_sigterm,
    machine,
    make_console,
    peak_rss_mb,
    ready_worker,
    recovery_read_s,
    rocksdb_keys,
    run_cases,
    scrape_entries,
    slope_per_1000,
    still_alive,
    table,
    take_snapshot,
)

console = make_console()
TABLES = ("stage-results", "stage-times", "intake", "confirmed-outcomes")


@dataclass
class Sample:
    cases: int
    rss_mb: float
    entries: dict[str, float]
    seconds: float


@dataclass
class Restart:
    cases: int
    ready_s: float  # from start to "Worker ready"
    read_s: float  # of which reading the changelogs
    records: int  # in the changelogs then
    rss_mb: float  # at ready


@dataclass
class Soak:
    samples: list[Sample] = field(default_factory=list)
    restarts: list[Restart] = field(default_factory=list)
    restart_at: int | None = None
    snapshots: list[tuple[int, Path]] = field(default_factory=list)  # (cases so far, tracemalloc snapshot)


def start_worker(settings: Settings, log: Path, frames: int) -> tuple[WorkerProcess, float]:
    # a RocksDB worker on the embedded broker sends one record per batch by itself (streams/worker.py)
    return ready_worker(settings, log, {"PYTHONTRACEMALLOC": str(frames)} if frames else {})


async def idle_sample(settings: Settings, worker: WorkerProcess, done: int, idle_s: float, began: float) -> Sample:
    await asyncio.sleep(idle_s)  # longer than an expiry sweep: the gauges are fresh, the worker idle
    entries = await asyncio.to_thread(scrape_entries, settings.metrics_port)
    return Sample(done, peak_rss_mb(worker.process.pid, "VmRSS"), entries, time.perf_counter() - began)  # type: ignore[union-attr]


async def soak(
    settings: Settings,
    folder: Path,
    cases: int,
    every: int,
    restart_after: int,
    idle_s: float,
    frames: int,
    rate: float | None,
) -> Soak:
    await ensure_topics(settings)
    result = Soak()
    worker, ready_s = await asyncio.to_thread(start_worker, settings, folder / "worker-0.log", frames)
    console.print(f"worker ready in {ready_s:.1f}s")
    began, done, life = time.perf_counter(), 0, 0
    try:
        for batch in range(0, cases, every):
            await run_cases(
                settings,
                copies(min(every, cases - batch), f"soak{batch}"),
                from_beginning=False,
                on_poll=functools.partial(still_alive, worker),
                rate=rate,
            )
            done += min(every, cases - batch)
            sample = await idle_sample(settings, worker, done, idle_s, began)
            result.samples.append(sample)
            console.print(
                f"{done:>6} cases  idle RSS {sample.rss_mb:7.1f} MB  entries {sample.entries}  {sample.seconds:7.0f}s"
            )
            if frames:  # after the RSS sample: a snapshot costs memory of its own
                result.snapshots.append(
                    (done, await asyncio.to_thread(take_snapshot, worker, settings.datadir / "tracemalloc"))
                )
            if done in (restart_after, cases):
                await asyncio.to_thread(worker.stop)
                life, records = life + 1, await changelog_records(settings, TABLES)
                log = folder / f"worker-{life}.log"
                worker, ready_s = await asyncio.to_thread(start_worker, settings, log, frames)
                result.restarts.append(
                    Restart(done, ready_s, recovery_read_s(log), records, peak_rss_mb(worker.process.pid, "VmRSS"))
                )  # type: ignore[union-attr]
                result.restart_at = result.restart_at or done
                console.print(f"restarted after {done} cases: {result.restarts[-1]}")
    finally:
        await asyncio.to_thread(worker.stop)
    return result


def slope_mb_per_1000(samples: list[Sample]) -> float:
    return slope_per_1000([(s.cases, s.rss_mb) for s in samples])


def report(settings: Settings, result: Soak, cases: int) -> None:
    out = table(
        "Idle worker after each batch",
        ["cases", "idle RSS MB", "stage-results", "stage-times", "intake", "in flight", "elapsed s"],
    )
    for s in result.samples:
        e = s.entries
        out.add_row(
            str(s.cases),
            f"{s.rss_mb:.1f}",
            *(f"{e.get(k, float('nan')):.0f}" for k in ("stage-results", "stage-times", "intake", "in flight")),
            f"{s.seconds:.0f}",
        )
    console.print(out)
    warm = [s for s in result.samples if result.restart_at is not None and s.cases > result.restart_at]
    last = result.samples[-1]
    rate = cases / last.seconds if last.seconds else float("nan")
    console.print(
        f"slope after warm-up ({len(warm)} samples past {result.restart_at} cases): "
        f"{slope_mb_per_1000(warm):.2f} MB per 1,000 cases (all samples: "
        f"{slope_mb_per_1000(result.samples):.2f}; the last half, {result.samples[len(result.samples) // 2].cases}"
        f" cases on: {slope_mb_per_1000(result.samples[len(result.samples) // 2 :]):.2f})"
    )
    # ready and verdict, clues while an appeal may come (appeal_window_s > 0), and an escalated
    # verdict's escalation (the stand-in's juries often split narrowly)
    kept = (
        "3-4 (ready, verdict, clues, escalation)"
        if settings.appeal_window_s > 0
        else "2-3 (ready, verdict, escalation)"
    )
    console.print(
        f"entries at the end: {last.entries}; at {rate:.1f} cases/s a retention of "
        f"{settings.state_retention_s:.0f}s allows ~{rate * settings.state_retention_s:.0f} decided cases "
        f"({kept} keys each in stage-results, then 1 marker for another retention; 1 in stage-times "
        f"over both, 1 in intake) plus those in flight"
    )
    for r in result.restarts:
        console.print(
            f"restart-to-ready after {r.cases} cases: {r.ready_s:.1f}s ({r.read_s:.1f}s reading "
            f"{r.records} changelog records); RSS at ready {r.rss_mb:.1f} MB"
        )
    batches = [b.seconds - a.seconds for a, b in itertools.pairwise(result.samples)]
    console.print(
        f"store {settings.table_store}; {machine()}; median batch (with its idle wait) "
        f"{statistics.median(batches) if batches else float('nan'):.0f}s"
    )
    snaps = [(done, path) for done, path in result.snapshots if done > (result.restart_at or 0)]
    if len(snaps) >= 2:  # one worker's life, from its first idle snapshot to its last
        console.print(*heap_growth(snaps))


def main(
    quick: Annotated[bool, typer.Option(help="300 cases, a sample every 50, a restart after 100")] = False,
    cases: Annotated[int, typer.Option(help="cases in all")] = 5000,
    every: Annotated[int, typer.Option(help="cases per batch (an idle sample after each)")] = 250,
    restart_after: Annotated[int, typer.Option(help="restart the worker after this many cases")] = 1000,
    retention: Annotated[
        float,
        typer.Option(
            help="state_retention_s: a batch must finish well within it (a stage input queued longer is dead-lettered)"
        ),
    ] = 120.0,
    sweep: Annotated[float, typer.Option(help="state_sweep_interval_s")] = 2.0,
    idle: Annotated[float, typer.Option(help="idle seconds before each sample")] = 5.0,
    store: Annotated[str, typer.Option(help="table_store: memory or rocksdb")] = "memory",
    partitions: Annotated[int, typer.Option()] = 4,
    rate: Annotated[
        float,
        typer.Option(
            help="cases produced per minute, evenly within each batch "
            "(0: each batch at once); a steady rate keeps what the "
            "retention holds steady, whatever the machine's load"
        ),
    ] = 0.0,
    tracemalloc: Annotated[
        int,
        typer.Option(
            help="frames a tracemalloc trace keeps (0: off); the report then lists what grew after the warm-up, by line"
        ),
    ] = 0,
) -> None:
    if quick:
        cases, every, restart_after = 300, 50, 100
    interrupt_on_sigterm()
    run = uuid.uuid4().hex[:8]
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp, broker(Path(tmp)) as (bootstrap, _):
        settings = Settings(
            kafka_bootstrap_servers=bootstrap,
            app_id=f"soak-{run}",
            topic_prefix=f"soak{run}.",
            partitions=partitions,
            datadir=Path(tmp) / "faust",
            llm_backend="offline",
            offline_latency_s=0.0,
            precedent_backend="none",
            metrics_port=free_port(),
            probe_port=0,
            retention={"state_s": retention},
            state_sweep_interval_s=sweep,
            table_store=store,  # type: ignore[arg-type]
            appeal_window_s=retention,
        )  # decided cases are held max(retention, appeal window)
        console.print(
            f"soak: {cases} cases{f' at {rate:g}/min' if rate else ''}, a sample every {every}, "
            f"restart after {restart_after}; "
            f"retention {retention}s, sweep {sweep}s, store {store}, {partitions} partitions"
        )
        result = asyncio.run(soak(settings, Path(tmp), cases, every, restart_after, idle, tracemalloc, rate or None))
        if store == "rocksdb":  # no entry gauges there: the keys on disk once the last worker stopped
            console.print(f"keys on disk at the end: {rocksdb_keys(settings.datadir, TABLES)}")
        report(settings, result, cases)


if __name__ == "__main__":
    typer.run(main)
