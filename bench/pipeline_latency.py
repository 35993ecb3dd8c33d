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
import json
import statistics
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from cyberjurors.backends.offline import OfflineLLM
from cyberjurors.config import Settings
from cyberjurors.precedents.build import build_precedents
from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.embeddings import load_embedder
from cyberjurors.schemas import CaseSubmitted, DisputeCase, Verdict
from cyberjurors.streams.broker import embedded_broker
from cyberjurors.streams.clients import Outgoing, follow, produce
from cyberjurors.streams.kafka import ensure_topics
from cyberjurors.streams.worker_process import WorkerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
console = Console()


def sample_cases(count: int, tag: str) -> list[DisputeCase]:
    base = [DisputeCase.model_validate_json(p.read_text()) for p in sorted((EXAMPLES / "cases").glob("*.json"))]
    return [base[i % len(base)].model_copy(update={"case_id": f"{tag}-{i}-{base[i % len(base)].case_id}"})
            for i in range(count)]


def outgoing(case: DisputeCase) -> Outgoing:
    return Outgoing(case.case_id, CaseSubmitted(case=case).model_dump_json().encode(), "bench")


async def run_cases(settings: Settings, cases: list[DisputeCase]) -> tuple[dict[str, float], float]:
    """Produce the cases at once; return each case's produce->verdict seconds and the total wall time."""
    wanted = {c.case_id for c in cases}
    received: dict[str, float] = {}

    async def watch() -> None:
        async for key, value in follow(settings, "disputes.verdicts", from_beginning=False, idle_timeout_s=0.2):
            if key in wanted and key not in received:
                Verdict.model_validate_json(value)
                received[key] = time.perf_counter()
                if len(received) == len(wanted):
                    return

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(1.0)  # the watcher has its partitions before the first case is sent
    started = time.perf_counter()
    await produce(settings, [outgoing(c) for c in cases])
    await asyncio.wait_for(watcher, timeout=900)
    return {k: t - started for k, t in received.items()}, max(received.values()) - started


def call_log(path: Path) -> dict[str, list[dict]]:
    by_case: dict[str, list[dict]] = defaultdict(list)
    for line in path.read_text().splitlines():
        entry = json.loads(line)
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
    embedder = load_embedder(settings.embedding_model)
    index = await EmbeddedIndex.open(settings.precedent_dir, embedder)
    report = await build_precedents([EXAMPLES / "precedents"], settings, OfflineLLM(), index, embedder)
    await index.close()
    console.print(f"precedent base: {report.cases_indexed} cases, {report.guidelines_created} guidelines")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


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
            asyncio.run(run_cases(settings, sample_cases(1, "warmup")))
            singles = []
            for r in range(repeat):
                for case in sample_cases(3, f"single{r}"):
                    took, _ = asyncio.run(run_cases(settings, [case]))
                    entries = call_log(settings.llm_call_log)[case.case_id]
                    bound = critical_calls(entries, settings.warm_cache_first) * latency
                    singles.append((took[case.case_id], bound))
            burst = sample_cases(cases, "burst")
            _, wall = asyncio.run(run_cases(settings, burst))
            log = call_log(settings.llm_call_log)
            total_calls = sum(len(log[c.case_id]) for c in burst)
            peak_rss = rss_mb(worker.process.pid)  # type: ignore[union-attr]
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
