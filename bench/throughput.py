"""Throughput with 1, 2 and 4 partitions / workers on the embedded broker.

For each k: fresh topics (prefix) with k partitions, a fresh consumer group (app id), k worker
processes in that group. The offline backend (a labelled stand-in, not model judgement) answers
every model call after a simulated provider latency L, and each worker caps its calls in flight
(``llm_concurrency``, a provider rate limit per worker) and the cases each stage agent works on
(``stage_concurrency``), so the work is latency-bound like a real provider's and more workers
should add capacity. Before anything is measured, all k workers must have joined, been assigned
disjoint partitions that cover the topic, and judged one warm-up case on each partition; the
rebalance is timed separately, not measured as throughput.

Then M cases (copies of examples/cases with unique ids, chosen so the default murmur2 partitioner
spreads them evenly over the k partitions, and the same in every run, so every k judges the same
work) are produced at once, and the run is measured from the first produce to the last verdict:
cases/min, and p50/p95 of the verdicts' own latency (intake to decision, so it includes the time a
case waited behind the others). Each k runs ``--repeat`` times, the ks interleaved (1,2,4,1,2,4,...)
so that machine noise hits all of them alike; the table shows medians, and speed-ups are medians of
per-repetition ratios against k=1. A second table shows, per run, which partitions each worker
held and how many verdicts and model calls each produced, to show the load really was spread.

The machine is shared and noisy: the figures are reported, never asserted. Ctrl-C (or SIGTERM)
stops the workers, then the broker. Worker, model-call and broker logs stay in a temp folder.

Run: .venv/bin/python bench/throughput.py [--quick] [--cases 48] [--repeat 3] [--latency 0.5]
     [--llm-concurrency 8] [--stage-concurrency 2] [--ks 1,2,4] [--timeout 900]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import platform
import re
import signal
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.partitioner import murmur2
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from cyberjurors.config import Settings
from cyberjurors.schemas import CaseSubmitted, DeadLetter, DisputeCase, Verdict
from cyberjurors.streams.broker import start_broker, stop_process
from cyberjurors.streams.clients import Outgoing, produce
from cyberjurors.streams.kafka import client_options, ensure_topics
from cyberjurors.streams.worker_process import WorkerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# wide enough for the tables when the output goes to a file or a pipe
console = Console(width=None if sys.stdout.isatty() else 220)


# --- cases ------------------------------------------------------------------------------------


def partition_of(key: str, partitions: int) -> int:
    """The partition aiokafka's (and Faust's) default partitioner picks for a key: Java's murmur2."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def base_cases() -> list[DisputeCase]:
    return [DisputeCase.model_validate_json(p.read_text()) for p in sorted((EXAMPLES / "cases").glob("*.json"))]


def balanced_cases(count: int, ks: list[int], tag: str, base: list[DisputeCase]) -> list[DisputeCase]:
    """``count`` copies of the sample cases: case i is sample i mod len(samples), with an id that
    hashes to partition i mod k for every k in ``ks`` at once. So every partition gets the same
    number of cases, and every run (any k, any repetition) judges the very same cases: the
    offline stand-in is deterministic per case id (it decides how many rounds a jury takes), so the
    work is identical across runs. Ids repeat across runs, not within one; each run has its own
    topics and tables. Plain numbered ids would leave the spread to the hash (``natural_spread``)."""
    out = []
    for i in range(count):
        sample = base[i % len(base)]
        n = 0
        while True:
            case_id = f"{tag}-{i:03d}-{n}-{sample.case_id}"
            if all(partition_of(case_id, k) == i % k for k in ks):
                break
            n += 1
        out.append(sample.model_copy(update={"case_id": case_id}))
    return out


def natural_spread(count: int, partitions: int, base: list[DisputeCase]) -> list[int]:
    """Cases per partition had the ids simply been numbered (what balanced_cases avoids)."""
    spread = Counter(partition_of(f"tp-{i:03d}-{base[i % len(base)].case_id}", partitions) for i in range(count))
    return [spread[p] for p in range(partitions)]


def outgoing(case: DisputeCase) -> Outgoing:
    return Outgoing(case.case_id, CaseSubmitted(case=case).model_dump_json().encode(), "bench")


# --- workers and their group ------------------------------------------------------------------

ASSIGNED = "Setting newly assigned partitions"
REVOKED = "Revoking previously assigned partitions"
SYNCED = re.compile(r"Successfully synced group \S+ with generation (\d+)")


def parse_partitions(text: str) -> set[int]:
    """Faust's partition-set notation: ``{0-1}``, ``{0, 2}``, ``{0-1, 3}``."""
    out: set[int] = set()
    for part in text.strip().strip("{}").split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-")
            out |= set(range(int(lo), int(hi) + 1))
        else:
            out.add(int(part))
    return out


@dataclass
class Worker:
    index: int
    process: WorkerProcess
    started: float

    @property
    def log(self) -> Path:
        return self.process.log_path

    def state(self, events_topic: str) -> tuple[int | None, set[int] | None, bool]:
        """(latest generation, its disputes.events partitions, recovered since that assignment).

        Partitions are None while a rebalance is under way (revoked, not yet re-assigned)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        generations = SYNCED.findall(text)
        generation = int(generations[-1]) if generations else None
        at = text.rfind(ASSIGNED)
        if at < 0 or text.rfind(REVOKED) > at:
            return generation, None, False
        table = text[at:text.find("for group", at)]
        partitions: set[int] = set()
        for line in table.splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 2 and cells[0] == events_topic:
                partitions = parse_partitions(cells[1])
        recovered = "Recovery complete" in text[at:]
        return generation, partitions, recovered

    def verdicts_logged(self, wanted: set[str]) -> Counter:
        counts: Counter = Counter()
        for m in re.finditer(r"case (\S+): verdict ", self.log.read_text(errors="replace")):
            if m.group(1) in wanted:
                counts[m.group(1)] += 1
        return counts

    def peak_rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.process.process.pid}/status").read_text().splitlines():  # type: ignore[union-attr]
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"


class BenchError(RuntimeError):
    pass


def check_alive(workers: list[Worker]) -> None:
    for w in workers:
        if not w.process.alive():
            raise BenchError(f"worker {w.index} exited (code {w.process.process.returncode}); "  # type: ignore[union-attr]
                             f"end of {w.log}:\n{w.tail()}")


async def group_state(settings: Settings) -> tuple[str, int]:
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        response = await admin.describe_consumer_groups([settings.app_id])
        group = response[0].groups[0]
        return group[2], len(group[5])  # (error_code, group, state, protocol_type, protocol, members)
    finally:
        await admin.close()


async def wait_until_assigned(settings: Settings, workers: list[Worker], timeout_s: float) -> dict[int, set[int]]:
    """Until all workers are in the group (Stable, k members), share one generation, hold disjoint
    disputes.events partitions covering all k, and have recovered their tables; twice in a row, 1 s apart."""
    k = settings.partitions
    events_topic = settings.topic("disputes.events")
    deadline = time.monotonic() + timeout_s
    settled_once: tuple | None = None
    last = ""
    while time.monotonic() < deadline:
        check_alive(workers)
        states = [w.state(events_topic) for w in workers]
        state, members = await group_state(settings)
        generations = {g for g, _, _ in states}
        held = [p for _, p, _ in states]
        ok = (state == "Stable" and members == k and len(generations) == 1 and None not in generations
              and all(p for p in held) and all(r for _, _, r in states)
              and sorted(x for p in held for x in p) == list(range(k)))  # type: ignore[union-attr]
        last = f"group {state}, {members}/{k} members, generations {generations}, events partitions {held}"
        if ok:
            snapshot = tuple((g, tuple(sorted(p))) for g, p, _ in states)  # type: ignore[arg-type]
            if snapshot == settled_once:
                return {w.index: set(p) for w, (_, p, _) in zip(workers, states)}  # type: ignore[arg-type]
            settled_once = snapshot
            await asyncio.sleep(1.0)
        else:
            settled_once = None
            await asyncio.sleep(0.3)
    raise BenchError(f"workers not assigned within {timeout_s:.0f}s: {last}")


def generations(settings: Settings, workers: list[Worker]) -> list[int | None]:
    return [w.state(settings.topic("disputes.events"))[0] for w in workers]


def stop_all(workers: list[Worker]) -> None:
    """SIGTERM all workers at once (each is SIGKILLed after 20 s if it has not exited)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(workers))) as pool:
        list(pool.map(lambda w: w.process.stop(), workers))


# --- produce and collect ----------------------------------------------------------------------


@dataclass
class Received:
    at: float
    partition: int
    verdict: Verdict


async def run_cases(settings: Settings, cases: list[DisputeCase], timeout_s: float, workers: list[Worker],
                    on_verdict=lambda n: None) -> tuple[dict[str, Received], float, float]:
    """Produce the cases at once and wait for all their verdicts. Reads disputes.verdicts and
    disputes.dlq from the beginning (the topics are this run's own), so nothing can be missed.
    Returns the verdicts, the time of the first produce and of the last verdict."""
    wanted = {c.case_id for c in cases}
    received: dict[str, Received] = {}
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, enable_auto_commit=False,
                                fetch_max_wait_ms=settings.kafka_fetch_max_wait_ms, auto_offset_reset="earliest")
    await consumer.start()
    try:
        verdict_topic, dlq_topic = settings.topic("disputes.verdicts"), settings.topic("disputes.dlq")
        consumer.assign([TopicPartition(t, p) for t in (verdict_topic, dlq_topic) for p in range(settings.partitions)])
        started = time.perf_counter()
        await produce(settings, [outgoing(c) for c in cases])
        deadline = started + timeout_s
        while len(received) < len(wanted):
            if time.perf_counter() > deadline:
                raise BenchError(f"{len(wanted) - len(received)} of {len(wanted)} verdicts missing after {timeout_s:.0f}s")
            check_alive(workers)
            batch = await consumer.getmany(timeout_ms=200)
            now = time.perf_counter()
            for tp, records in batch.items():
                for record in records:
                    key = (record.key or b"").decode(errors="replace")
                    if key not in wanted:
                        continue
                    if tp.topic == dlq_topic:
                        letter = DeadLetter.model_validate_json(record.value)
                        raise BenchError(f"case {key} dead-lettered: {letter.reason} at {letter.stage}: {letter.detail}")
                    if key not in received:
                        received[key] = Received(now, tp.partition, Verdict.model_validate_json(record.value))
                        on_verdict(len(received))
        return received, started, max(r.at for r in received.values())
    finally:
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(consumer.stop(), 5)  # never hang the clean-up


# --- one run ----------------------------------------------------------------------------------


@dataclass
class RunResult:
    k: int
    rep: int
    cases: int
    wall_s: float
    per_min: float
    p50: float
    p95: float
    ready_s: float
    warmup_s: float
    rss_mb: list[float]
    verdicts_by_worker: list[int]
    calls_by_worker: list[int]
    cases_by_partition: list[int]
    assignment: dict[int, set[int]]
    calls_per_case: float
    rebalanced: bool
    duplicates: int
    slots_busy: float
    cpu_workers_s: list[float]
    cpu_broker_s: float
    last_by_partition: list[float]
    backends: set[str] = field(default_factory=set)


def read_calls(path: Path, wanted: set[str]) -> list[dict]:
    """The entries of a worker's model-call log that belong to the measured cases."""
    if not path.exists():
        return []
    entries = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return [e for e in entries if e.get("case_id") in wanted]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(base: Settings, work: Path, k: int, rep: int, cases: list[DisputeCase], warm: list[DisputeCase],
            timeout_s: float, progress: Progress, task: TaskID, broker_pid: int) -> RunResult:
    count = len(cases)
    run = f"k{k}-r{rep}-{uuid.uuid4().hex[:6]}"
    folder = work / run
    settings = base.model_copy(update={"partitions": k, "app_id": f"tp-{run}", "topic_prefix": f"tp-{run}.",
                                       "datadir": folder / "faust"})
    asyncio.run(ensure_topics(settings))
    progress.update(task, description=f"k={k} rep {rep + 1}: starting {k} worker(s)", completed=0, total=count)
    workers: list[Worker] = []
    try:
        for i in range(k):
            own = settings.model_copy(update={"datadir": folder / f"w{i}" / "faust",
                                              "llm_call_log": folder / f"w{i}" / "calls.jsonl"})
            workers.append(Worker(i, WorkerProcess(own, folder / f"w{i}" / "worker.log").start(), time.perf_counter()))
        t0 = workers[0].started
        progress.update(task, description=f"k={k} rep {rep + 1}: waiting for the group to settle")
        assignment = asyncio.run(wait_until_assigned(settings, workers, timeout_s=120))
        ready_s = time.perf_counter() - t0
        before = generations(settings, workers)

        progress.update(task, description=f"k={k} rep {rep + 1}: warm-up, one case per partition")
        warm = warm[:k]  # one per partition
        w0 = time.perf_counter()
        asyncio.run(run_cases(settings, warm, timeout_s, workers))
        warmup_s = time.perf_counter() - w0
        warm_ids = {c.case_id for c in warm}
        if k > 1 and any(sum(w.verdicts_logged(warm_ids).values()) == 0 for w in workers):
            raise BenchError(f"k={k}: a worker judged none of the warm-up cases: "
                             f"{[sum(w.verdicts_logged(warm_ids).values()) for w in workers]}")
        if generations(settings, workers) != before:
            raise BenchError(f"k={k}: the group rebalanced during warm-up ({before} -> {generations(settings, workers)})")

        wanted = {c.case_id for c in cases}
        progress.update(task, description=f"k={k} rep {rep + 1}: {count} cases in flight")
        cpu_before = [cpu_seconds(w.process.process.pid) for w in workers] + [cpu_seconds(broker_pid)]  # type: ignore[union-attr]
        received, started, last = asyncio.run(run_cases(
            settings, cases, timeout_s, workers, on_verdict=lambda n: progress.update(task, completed=n)))
        cpu_after = [cpu_seconds(w.process.process.pid) for w in workers] + [cpu_seconds(broker_pid)]  # type: ignore[union-attr]
        rebalanced = generations(settings, workers) != before
        rss = [w.peak_rss_mb() for w in workers]
        logged = [w.verdicts_logged(wanted) for w in workers]
    finally:
        progress.update(task, description=f"k={k} rep {rep + 1}: stopping workers")
        stop_all(workers)

    wall = last - started
    latencies = sorted(r.verdict.latency_s for r in received.values())
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    logs = [read_calls(folder / f"w{i}" / "calls.jsonl", wanted) for i in range(k)]
    calls = [len(entries) for entries in logs]
    busy = sum(e.get("latency_s", 0.0) for entries in logs for e in entries)
    cpu = [a - b for a, b in zip(cpu_after, cpu_before)]
    by_partition = Counter(r.partition for r in received.values())
    merged: Counter = Counter()
    for c in logged:
        merged.update(c)
    return RunResult(
        k=k, rep=rep, cases=count, wall_s=wall, per_min=count / wall * 60, p50=q[49], p95=q[94],
        ready_s=ready_s, warmup_s=warmup_s, rss_mb=rss,
        verdicts_by_worker=[sum(c.values()) for c in logged], calls_by_worker=calls,
        cases_by_partition=[by_partition[p] for p in range(k)], assignment=assignment,
        calls_per_case=sum(calls) / count, rebalanced=rebalanced,
        slots_busy=busy / (k * settings.llm_concurrency * wall), cpu_workers_s=cpu[:-1], cpu_broker_s=cpu[-1],
        last_by_partition=[max((r.at for r in received.values() if r.partition == p), default=last) - started
                           for p in range(k)],
        duplicates=sum(n - 1 for n in merged.values() if n > 1),
        backends={r.verdict.backend for r in received.values()},
    )


# --- report -----------------------------------------------------------------------------------


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def speedups(results: list[RunResult], ks: list[int]) -> dict[int, list[float]]:
    """Per repetition, each k's cases/min over the first k's in the same repetition."""
    by = {(r.k, r.rep): r for r in results}
    out: dict[int, list[float]] = {k: [] for k in ks}
    for rep in sorted({r.rep for r in results}):
        ref = by.get((ks[0], rep))
        for k in ks:
            if ref and (k, rep) in by:
                out[k].append(by[k, rep].per_min / ref.per_min)
    return out


def report(results: list[RunResult], ks: list[int], settings: Settings, count: int) -> None:
    L, C = settings.offline_latency_s, settings.llm_concurrency
    ratios = speedups(results, ks)
    reps = len({r.rep for r in results})
    table = Table(title=f"Throughput vs partitions = workers (offline stand-in, L = {L}s per call, "
                        f"llm_concurrency {C} and stage_concurrency {settings.stage_concurrency} per worker; "
                        f"M = {count} cases; medians of {reps} repetition(s))")
    for name in ("k", "cases/min", "min-max", f"speed-up vs k={ks[0]}", "ideal", "efficiency", "p50 (s)", "p95 (s)",
                 "calls/case", "cap bound", "of bound", "slots busy", "balance", "CPU (cores)", "RSS/worker (MB)",
                 "ready (s)"):
        table.add_column(name, justify="right")
    for k in ks:
        runs = [r for r in results if r.k == k]
        if not runs:
            continue
        speed, ideal = med(ratios[k]), k / ks[0]
        calls = med([r.calls_per_case for r in runs])
        bound = k * C / (calls * L) * 60 if calls and L else float("nan")
        tput = med([r.per_min for r in runs])
        balance = med([statistics.mean(r.calls_by_worker) / max(r.calls_by_worker) for r in runs])
        cores = med([(sum(r.cpu_workers_s) + r.cpu_broker_s) / r.wall_s for r in runs])
        table.add_row(
            str(k), f"{tput:.1f}", f"{min(r.per_min for r in runs):.1f}-{max(r.per_min for r in runs):.1f}",
            f"{speed:.2f}x", f"{ideal:.0f}x", f"{speed / ideal:.0%}",
            f"{med([r.p50 for r in runs]):.1f}", f"{med([r.p95 for r in runs]):.1f}", f"{calls:.1f}",
            f"{bound:.1f}", f"{tput / bound:.0%}", f"{med([r.slots_busy for r in runs]):.0%}", f"{balance:.0%}",
            f"{cores:.2f}", f"{med([max(r.rss_mb) for r in runs]):.0f}", f"{med([r.ready_s for r in runs]):.1f}",
        )
    console.print(table)
    console.print(
        "cases/min: M / (last verdict - first produce). speed-up: median over repetitions of cases/min(k) / "
        f"cases/min(k={ks[0]}) in the same repetition; efficiency = speed-up / ideal. p50/p95: the verdicts' "
        "latency_s (intake to decision, including the wait behind the other cases of the burst). cap bound: "
        f"k x llm_concurrency / (calls per case x L), in cases/min. slots busy: model-call time / (k x "
        f"llm_concurrency x wall). balance: mean / max model calls per worker (the busiest partition sets the "
        "wall). CPU: workers + broker CPU seconds / wall. RSS: peak (VmHWM) of the largest worker. ready: worker "
        "start to a settled group (all joined, partitions assigned, tables recovered), not in the measurement.",
        style="dim")

    spread = Table(title="Where the measured cases went, per run")
    for name in ("k", "rep", "cases/min", "wall (s)", "disputes.events partitions", "verdicts (worker logs)",
                 "model calls", "verdicts per partition", "last verdict per partition (s)", "CPU s (broker)",
                 "RSS MB", "warm-up (s)", "notes"):
        spread.add_column(name, justify="right" if name in ("k", "rep", "cases/min", "wall (s)", "warm-up (s)")
                          else "left")
    for r in sorted(results, key=lambda r: (r.k, r.rep)):
        notes = []
        if r.rebalanced:
            notes.append("REBALANCED during measurement")
        if r.duplicates:
            notes.append(f"{r.duplicates} cases judged twice")
        if r.backends != {"offline"}:
            notes.append(f"backends {sorted(r.backends)}")
        spread.add_row(
            str(r.k), str(r.rep + 1), f"{r.per_min:.1f}", f"{r.wall_s:.1f}",
            " ".join(f"w{i}:{sorted(p)}" for i, p in sorted(r.assignment.items())),
            " ".join(f"w{i}:{n}" for i, n in enumerate(r.verdicts_by_worker)),
            " ".join(f"w{i}:{n}" for i, n in enumerate(r.calls_by_worker)),
            " ".join(f"p{i}:{n}" for i, n in enumerate(r.cases_by_partition)),
            " ".join(f"p{i}:{t:.0f}" for i, t in enumerate(r.last_by_partition)),
            " ".join(f"{x:.0f}" for x in r.cpu_workers_s) + f" ({r.cpu_broker_s:.0f})",
            " ".join(f"{x:.0f}" for x in r.rss_mb), f"{r.warmup_s:.1f}", "; ".join(notes) or "-",
        )
    console.print(spread)


def print_settings(settings: Settings, ks: list[int], count: int, repeat: int, samples: list[DisputeCase],
                   timeout_s: float) -> None:
    keys = ("llm_backend", "offline_latency_s", "llm_concurrency", "stage_concurrency", "llm_tokens_per_minute",
            "precedent_backend", "metrics_port", "session_timeout_s", "heartbeat_interval_s", "commit_interval_s",
            "kafka_fetch_max_wait_ms", "processing_guarantee", "replication_factor", "jurors", "rounds",
            "max_select_steps", "early_stop", "warm_cache_first")
    table = Table(title="Settings used", show_header=False)
    table.add_column(style="bold")
    table.add_column(max_width=100)
    table.add_row("ks (partitions = workers)", ", ".join(map(str, ks)) + " (interleaved in every repetition)")
    table.add_row("cases per run (M)", f"{count}: copies of the {len(samples)} examples/cases, the same ids in every "
                                       "run, spread evenly over the partitions; plus k warm-up cases (one per "
                                       "partition), not measured")
    table.add_row("repetitions", str(repeat))
    for key in keys:
        table.add_row(key, str(getattr(settings, key, "n/a")))
    table.add_row("per run", "fresh topic prefix and app id (consumer group); per worker its own datadir and "
                             "model-call log; one embedded Tansu broker (in memory) for the whole bench")
    table.add_row("timeout per run (s)", f"{timeout_s:.0f}")
    table.add_row("machine", f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
                             f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at start")
    console.print(table)
    for k in ks:
        if k > 1:
            console.print(f"plain numbered ids would put {natural_spread(count, k, samples)} of the {count} cases on "
                          f"the {k} partitions; the bench's ids put {count // k}-{-(-count // k)} on each")


# --- main -------------------------------------------------------------------------------------


def _sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


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
    signal.signal(signal.SIGTERM, _sigterm)  # a kill also goes through the clean-up below
    for var in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "KAFKA_BOOTSTRAP_SERVERS"):
        os.environ.pop(var, None)  # the stand-in and the embedded broker, whatever the environment holds

    work = Path(tempfile.mkdtemp(prefix="cj-throughput-"))
    settings = Settings(llm_backend="offline", offline_latency_s=latency, llm_concurrency=llm_concurrency,
                        stage_concurrency=stage_concurrency, precedent_backend="none", metrics_port=0,
                        media_root=EXAMPLES, session_timeout_s=6, heartbeat_interval_s=0.5, commit_interval_s=0.2,
                        datadir=work / "faust", precedent_dir=work / "precedents")
    samples = base_cases()
    measured = balanced_cases(cases, k_list, "tp", samples)
    warm = balanced_cases(max(k_list), k_list, "warm", samples)
    print_settings(settings, k_list, cases, repeat, samples, timeout)
    console.print(f"work folder (broker, worker and model-call logs): {work}")

    results: list[RunResult] = []
    began = time.perf_counter()
    broker = None
    try:
        broker, bootstrap = start_broker(log=work / "broker.log")
        settings = settings.model_copy(update={"kafka_bootstrap_servers": bootstrap})
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as progress:
            overall = progress.add_task("runs", total=len(k_list) * repeat)
            current = progress.add_task("", total=cases)
            for rep in range(repeat):
                for k in k_list:
                    result = one_run(settings, work, k, rep, measured, warm, timeout, progress, current, broker.pid)
                    results.append(result)
                    progress.console.print(
                        f"k={k} rep {rep + 1}: {result.per_min:.1f} cases/min ({result.wall_s:.1f} s), "
                        f"p50 {result.p50:.1f} s, p95 {result.p95:.1f} s, verdicts per worker "
                        f"{result.verdicts_by_worker}, group ready in {result.ready_s:.1f} s"
                        + (" [red]rebalanced during measurement[/]" if result.rebalanced else ""))
                    progress.advance(overall)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: workers stopped[/]")
        if results:
            report(results, k_list, settings, cases)
        raise typer.Exit(130)
    except BenchError as err:
        console.print(f"[red]bench failed:[/] {err}\nlogs in {work}")
        raise typer.Exit(1)
    finally:
        if broker is not None:
            stop_process(broker)
    report(results, k_list, settings, cases)
    console.print(f"total {time.perf_counter() - began:.0f} s; load average now "
                  f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; logs in {work}")


if __name__ == "__main__":
    typer.run(main)
