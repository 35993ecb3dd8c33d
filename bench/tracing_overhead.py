"""What tracing costs per case: the example cases judged in one process (``jury.stages.judge``,
offline backend at zero latency, so the stand-in's own work is all there is to compare against:
a worst case for the ratio) with tracing off (the API's no-op tracer, the default), and on (the
SDK with a batching processor, spans handed to an exporter that drops them: the cost up to the
network). Each case runs inside a stage span, as in a worker; every model call makes its span.
Configurations interleaved per repetition; medians of the per-case times.

Run: .venv/bin/python bench/tracing_overhead.py [--repeat 5] [--cases 13]
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence
from types import SimpleNamespace

import typer
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from rich.table import Table

from cyberjurors.config import Settings
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.stages import judge
from cyberjurors.llm.port import GuardedLLM
from cyberjurors.observability import tracing
from cyberjurors.schemas import DisputeCase
from harness import example_cases, make_console

console = make_console(120)


class Dropped(SpanExporter):
    """Counts what reaches the exporter and sends it nowhere."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


async def judge_all(cases: list[DisputeCase], settings: Settings) -> list[float]:
    """Seconds per case, each judged inside a stage span (a no-op one when tracing is off)."""
    llm, seconds = GuardedLLM(OfflineLLM()), []
    for case in cases:
        event = SimpleNamespace(headers={}, message=SimpleNamespace(topic="disputes.intake", partition=0, offset=0))
        started = time.perf_counter()
        with tracing.consuming(event, "focus", case.case_id):
            await judge(case, llm, settings)
        seconds.append(time.perf_counter() - started)
    return seconds


def main(
    repeat: int = typer.Option(5, help="repetitions, configurations interleaved"),
    cases: int = typer.Option(13, help="example cases per repetition"),
) -> None:
    chosen = example_cases(cases)
    settings = Settings(llm_backend="offline", precedent_backend="none")
    exporter = Dropped()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    times: dict[str, list[float]] = {"off": [], "on": []}
    asyncio.run(judge_all(chosen[:2], settings))  # warm-up: imports, caches
    for _ in range(repeat):
        for name in times:
            tracing.install(provider if name == "on" else None)
            times[name] += asyncio.run(judge_all(chosen, settings))
    tracing.install(None)
    provider.shutdown()
    table = Table(title=f"tracing overhead: {len(chosen)} cases x {repeat}, offline backend at zero latency")
    for column in ("tracing", "median ms / case", "p90 ms / case", "vs off"):
        table.add_column(column, justify="right")
    off = statistics.median(times["off"])
    for name, values in times.items():
        median = statistics.median(values)
        table.add_row(
            name, f"{median * 1000:.1f}", f"{statistics.quantiles(values, n=10)[-1] * 1000:.1f}", f"{median / off:.3f}x"
        )
    console.print(table)
    console.print(f"spans exported (dropped) with tracing on: {exporter.spans / (repeat * len(chosen)):.1f} per case")


if __name__ == "__main__":
    typer.run(main)
