"""Latency and throughput of the streaming pipeline against their bounds.

The offline backend with a simulated per-call latency L stands in for a provider, so the
figures measure what the pipeline adds (Kafka hops, Faust scheduling, serialisation):

* single case: end-to-end latency (produce -> verdict received) against the critical path,
  L x (1 focus call + the longer party's select/perceive calls + 2 calls per jury round);
* sustained: cases/minute for a burst of cases against the bound the LLM concurrency cap
  sets, C / (calls per case x L).

The worker retrieves precedents from an embedded base built from examples/precedents, beside
select-perceive, as it does in production.

Run: .venv/bin/python bench/pipeline_latency.py [--latency 0.5] [--cases 24] [--repeat 3]
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import typer
from harness import EXAMPLES, Burst, copies, make_console, peak_rss_mb
from harness import call_log as read_call_log
from harness import run_cases as run_burst
from rich.table import Table

from cyberjurors.backends.offline import OfflineLLM
from cyberjurors.config import Settings
from cyberjurors.precedents.build import build_precedents
from cyberjurors.precedents.precedent_base import opened_base
from cyberjurors.schemas import DisputeCase
from cyberjurors.streams.broker import embedded_broker
from cyberjurors.streams.kafka import ensure_topics
from cyberjurors.streams.worker_process import WorkerProcess

console = make_console()


def run_cases(settings: Settings, cases: list[DisputeCase]) -> Burst:
    """Produce the cases at once; each case's produce->verdict time is ``took(case_id)``."""
    return asyncio.run(run_burst(settings, cases, timeout_s=900, from_beginning=False))


def call_log(path: Path) -> dict[str, list[dict]]:
    by_case: dict[str, list[dict]] = defaultdict(list)
    for entry in read_call_log(path):
        by_case[entry["case_id"]].append(entry)
    return by_case


def critical_calls(entries: list[dict], warm_cache_first: bool) -> int:
    """Sequential model calls on the case's critical path: focus, the longer party's
    select/perceive chain, and per round the jurors (in parallel) then the summary; round 1
    adds the juror that runs first to warm the prompt cache."""
    roles = Counter(e["role"] for e in entries)
    per_party = Counter(e.get("party") for e in entries if e["role"] in ("select", "perceive"))
    warmup = 1 if warm_cache_first and roles["summary"] else 0
    return roles["focus"] + max(per_party.values(), default=0) + 2 * roles["summary"] + warmup


async def seed_precedents(settings: Settings) -> None:
    async with opened_base(settings) as (index, embedder):
        report = await build_precedents([EXAMPLES / "precedents"], settings, OfflineLLM(), index, embedder)
    console.print(f"precedent base: {report.cases_indexed} cases, {report.guidelines_created} guidelines")


def main(latency: float = 0.5, cases: int = 24, repeat: int = 3, concurrency: int = 16) -> None:
    work = Path(tempfile.mkdtemp(prefix="cj-bench-"))
    settings = Settings(llm_backend="offline", offline_latency_s=latency, llm_concurrency=concurrency,
                        media_root=EXAMPLES, datadir=work / "faust", llm_call_log=work / "calls.jsonl",
                        app_id="bench", partitions=4, stage_concurrency=16, commit_interval_s=1.0,
                        precedent_dir=work / "precedents")
    asyncio.run(seed_precedents(settings))  # retrieval runs beside select-perceive, as in production
    with embedded_broker(log=work / "broker.log") as bootstrap:
        settings = settings.model_copy(update={"kafka_bootstrap_servers": bootstrap})
        asyncio.run(ensure_topics(settings))
        worker = WorkerProcess(settings, work / "worker.log").start()
        try:
            run_cases(settings, copies(1, "warmup"))
            singles = []
            for r in range(repeat):
                for case in copies(3, f"single{r}"):
                    took = run_cases(settings, [case]).took(case.case_id)
                    entries = call_log(settings.llm_call_log)[case.case_id]
                    bound = critical_calls(entries, settings.warm_cache_first) * latency
                    singles.append((took, bound))
            burst = copies(cases, "burst")
            measured = run_cases(settings, burst)
            wall = measured.last - measured.started
            log = call_log(settings.llm_call_log)
            total_calls = sum(len(log[c.case_id]) for c in burst)
            peak_rss = peak_rss_mb(worker.process.pid)  # type: ignore[union-attr]
        finally:
            worker.stop()

    ratios = [took / bound for took, bound in singles]
    throughput = cases / wall * 60
    bound = concurrency / (total_calls / cases * latency) * 60
    table = Table(title=f"pipeline vs bounds (offline backend, L = {latency}s, C = {concurrency})")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("single case latency, median (s)", f"{statistics.median(t for t, _ in singles):.2f}")
    table.add_row("critical-path bound, median (s)", f"{statistics.median(b for _, b in singles):.2f}")
    table.add_row("latency / bound, median (n=%d)" % len(ratios), f"{statistics.median(ratios):.3f}x")
    table.add_row("latency / bound, max", f"{max(ratios):.3f}x")
    table.add_row(f"burst of {cases} cases: wall (s)", f"{wall:.1f}")
    table.add_row("calls per case, mean", f"{total_calls / cases:.1f}")
    table.add_row("throughput (cases/min)", f"{throughput:.1f}")
    table.add_row("concurrency bound (cases/min)", f"{bound:.1f}")
    table.add_row("throughput / bound", f"{throughput / bound:.1%}")
    table.add_row("worker peak RSS (MB)", f"{peak_rss:.0f}")
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
