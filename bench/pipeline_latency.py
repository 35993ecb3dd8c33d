"""Latency, throughput, memory and start time of the streaming pipeline, for each embedding
runtime side by side in one run: numpy (the default, no torch) and sentence-transformers (torch,
the default before it), when the torch extra is installed.

The offline backend with a simulated per-call latency L stands in for a provider, so the
figures measure what the pipeline adds (Kafka hops, Faust scheduling, serialisation, the
precedent base):

* single case: end-to-end latency (produce -> verdict received) against the critical path,
  L x every sequential model call (``critical_calls``);
* sustained: cases/minute for a burst of cases against the bound the LLM concurrency cap
  sets, C / (calls per case x L);
* the worker's peak RSS, and its start-to-ready time (process start to /readyz answering 200:
  partitions assigned and the precedent base open).

The worker retrieves precedents from an embedded base built from examples/precedents, beside
select-perceive, as it does in production.

Run: .venv/bin/python bench/pipeline_latency.py [--latency 0.5] [--cases 24] [--repeat 3]
"""

from __future__ import annotations

import asyncio
import importlib.util
import statistics
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

import typer
from rich.table import Table

from cyberjurors.config import Settings
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.precedents.base import opened_base
from cyberjurors.precedents.build import build_precedents
from cyberjurors.schemas import DisputeCase
from cyberjurors.tooling.broker import embedded_broker
from cyberjurors.tooling.worker_process import WorkerProcess
from harness import EXAMPLES, Burst, copies, free_port, make_console, peak_rss_mb
from harness import call_log as read_call_log
from harness import run_cases as run_burst

console = make_console()


def run_cases(settings: Settings, cases: list[DisputeCase]) -> Burst:
    """Produce the cases at once; each case's produce->verdict time is ``took(case_id)``."""
    return asyncio.run(run_burst(settings, cases, timeout_s=900, from_beginning=False))


def call_log(path: Path) -> dict[str, list[dict]]:
    by_case: dict[str, list[dict]] = defaultdict(list)
    for entry in read_call_log(path):
        by_case[entry["case_id"]].append(entry)
    return by_case


def critical_calls(entries: list[dict], warm_cache_first: bool, concurrency: int) -> int:
    """Every sequential model call on the case's critical path: focus; stage II, where with
    ``warm_cache_first`` the buyer's first selection runs alone before the seller's chain starts;
    and per round the ballots, in waves of at most ``concurrency`` side by side (round 1's first
    ballot alone when it warms the cache), then the round summary."""
    roles = Counter(e["role"] for e in entries)
    chain = Counter(e.get("party") for e in entries if e["role"] in ("select", "perceive"))
    warm_clues = 1 if warm_cache_first and chain["buyer"] and chain["seller"] else 0
    stage_two = max(chain["buyer"], chain["seller"] + warm_clues)
    rounds, ballots = [], 0
    for entry in sorted(entries, key=lambda e: e["at"]):
        if entry["role"] == "juror":
            ballots += 1
        elif entry["role"] == "summary":
            rounds.append(ballots)
            ballots = 0
    deliberation = 0
    for number, count in enumerate(rounds, 1):
        first = 1 if number == 1 and warm_cache_first and count > 1 else 0
        deliberation += first + -(-(count - first) // concurrency) + 1
    others = sum(n for role, n in roles.items() if role not in ("focus", "select", "perceive", "juror", "summary"))
    return roles["focus"] + stage_two + deliberation + others


def old_critical_calls(entries: list[dict], warm_cache_first: bool) -> int:
    """The bound the benchmark used before: no warm-up selection, no concurrency waves."""
    roles = Counter(e["role"] for e in entries)
    per_party = Counter(e.get("party") for e in entries if e["role"] in ("select", "perceive"))
    warmup = 1 if warm_cache_first and roles["summary"] else 0
    return roles["focus"] + max(per_party.values(), default=0) + 2 * roles["summary"] + warmup


async def seed_precedents(settings: Settings) -> None:
    async with opened_base(settings) as (index, embedder):
        report = await build_precedents([EXAMPLES / "precedents"], settings, OfflineLLM(), index, embedder)
    console.print(f"precedent base: {report.cases_indexed} cases, {report.guidelines_created} guidelines")


def ready_after(worker: WorkerProcess, port: int, started: float) -> float:
    """Seconds from the worker's start until /readyz answers 200."""
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1):
                return time.monotonic() - started
        except OSError:
            if not worker.alive():
                raise RuntimeError("the worker exited before it was ready") from None
            time.sleep(0.05)


def measure(runtime: str, latency: float, cases: int, repeat: int, concurrency: int) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix=f"cj-bench-{runtime}-"))
    probe_port = free_port()
    settings = Settings(
        llm_backend="offline",
        offline_latency_s=latency,
        llm_concurrency=concurrency,
        media_root=EXAMPLES,
        datadir=work / "faust",
        llm_call_log=work / "calls.jsonl",
        app_id=f"bench-{runtime}",
        partitions=4,
        stage_concurrency=16,
        kafka_timeouts={"commit_interval_s": 1.0},
        precedent_dir=work / "precedents",
        embedding={"runtime": runtime},
        probe_port=probe_port,
        metrics_port=0,
    )
    asyncio.run(seed_precedents(settings))  # retrieval runs beside select-perceive, as in production
    with embedded_broker(log=work / "broker.log") as bootstrap:
        settings = settings.model_copy(update={"kafka_bootstrap_servers": bootstrap})
        asyncio.run(ensure_topics(settings))
        started = time.monotonic()
        worker = WorkerProcess(settings, work / "worker.log").start()
        try:
            ready_s = ready_after(worker, probe_port, started)
            run_cases(settings, copies(1, "warmup"))
            singles = []
            for r in range(repeat):
                for case in copies(3, f"single{r}"):
                    took = run_cases(settings, [case]).took(case.case_id)
                    entries = call_log(settings.llm_call_log)[case.case_id]
                    singles.append(
                        (
                            took,
                            critical_calls(entries, settings.warm_cache_first, concurrency) * latency,
                            old_critical_calls(entries, settings.warm_cache_first) * latency,
                        )
                    )
            burst = copies(cases, "burst")
            measured = run_cases(settings, burst)
            wall = measured.last - measured.started
            log = call_log(settings.llm_call_log)
            total_calls = sum(len(log[c.case_id]) for c in burst)
            peak_rss = peak_rss_mb(worker.process.pid)  # type: ignore[union-attr]
        finally:
            worker.stop()
    ratios = [took / bound for took, bound, _ in singles]
    bound = concurrency / (total_calls / cases * latency) * 60
    return {
        "latency": statistics.median(t for t, _, _ in singles),
        "bound": statistics.median(b for _, b, _ in singles),
        "ratio": statistics.median(ratios),
        "ratio_max": max(ratios),
        "n": len(ratios),
        "old_ratio": statistics.median(took / old for took, _, old in singles),
        "wall": wall,
        "calls": total_calls / cases,
        "throughput": cases / wall * 60,
        "cap": bound,
        "rss": peak_rss,
        "ready": ready_s,
    }


def main(latency: float = 0.5, cases: int = 24, repeat: int = 3, concurrency: int = 16) -> None:
    runtimes = ["numpy"] + (["sentence-transformers"] if importlib.util.find_spec("sentence_transformers") else [])
    results = {runtime: measure(runtime, latency, cases, repeat, concurrency) for runtime in runtimes}
    table = Table(
        title=f"pipeline vs bounds (offline backend, L = {latency}s, C = {concurrency}), by embedding runtime"
    )
    table.add_column("measure")
    for runtime in runtimes:
        table.add_column(runtime, justify="right")
    rows = [
        ("single case latency, median (s)", "{latency:.2f}"),
        ("critical-path bound, median (s)", "{bound:.2f}"),
        ("latency / bound, median (n={n})", "{ratio:.3f}x"),
        ("latency / bound, max", "{ratio_max:.3f}x"),
        ("latency / the earlier bound, median", "{old_ratio:.3f}x"),
        (f"burst of {cases} cases: wall (s)", "{wall:.1f}"),
        ("calls per case, mean", "{calls:.1f}"),
        ("throughput (cases/min)", "{throughput:.1f}"),
        ("concurrency bound (cases/min)", "{cap:.1f}"),
        ("worker peak RSS (MB)", "{rss:.0f}"),
        ("worker start to ready (s)", "{ready:.1f}"),
    ]
    for label, cell in rows:
        table.add_row(label.format(**results["numpy"]), *(cell.format(**results[r]) for r in runtimes))
    table.add_row("throughput / bound", *(f"{results[r]['throughput'] / results[r]['cap']:.1%}" for r in runtimes))
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
