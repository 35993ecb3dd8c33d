"""bench/throughput.py's figures: one run's result, and the tables printed after the runs."""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from cyberjurors.config import Settings
from harness import Burst, example_cases, machine, med, natural_spread, ratios, table


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

    @classmethod
    def of(
        cls,
        settings: Settings,
        rep: int,
        burst: Burst,
        held: dict[int, set[int]],
        calls: list[list[dict]],
        cpu: list[float],
        rss: list[float],
        ready_s: float,
        warmup_s: float,
        rebalanced: bool,
    ) -> RunResult:
        """The figures of a measured burst."""
        k, count = settings.partitions, len(burst.outcomes)
        wall = burst.last - burst.started
        q = statistics.quantiles(
            sorted(o.verdict.latency_s for o in burst.outcomes.values()),  # type: ignore[union-attr]
            n=100,
            method="inclusive",
        )
        by_partition = Counter(o.partition for o in burst.outcomes.values())
        return cls(
            k=k,
            rep=rep,
            cases=count,
            wall_s=wall,
            per_min=count / wall * 60,
            p50=q[49],
            p95=q[94],
            ready_s=ready_s,
            warmup_s=warmup_s,
            rss_mb=rss,
            verdicts_by_worker=[sum(by_partition[p] for p in held[i]) for i in range(k)],
            calls_by_worker=[len(c) for c in calls],
            cases_by_partition=[by_partition[p] for p in range(k)],
            assignment=held,
            calls_per_case=sum(len(c) for c in calls) / count,
            rebalanced=rebalanced,
            slots_busy=sum(e.get("latency_s", 0.0) for c in calls for e in c) / (k * settings.llm_concurrency * wall),
            cpu_workers_s=cpu[:-1],
            cpu_broker_s=cpu[-1],
            duplicates=burst.repeats,
            last_by_partition=[
                max((o.at for o in burst.outcomes.values() if o.partition == p), default=burst.last) - burst.started
                for p in range(k)
            ],
            backends={o.verdict.backend for o in burst.outcomes.values()},  # type: ignore[union-attr]
        )

    def line(self) -> str:
        return (
            f"k={self.k} rep {self.rep + 1}: {self.per_min:.1f} cases/min ({self.wall_s:.1f} s), p50 "
            f"{self.p50:.1f} s, p95 {self.p95:.1f} s, verdicts per worker {self.verdicts_by_worker}, group "
            f"ready in {self.ready_s:.1f} s" + (" [red]rebalanced during measurement[/]" if self.rebalanced else "")
        )


def report(console: Console, results: list[RunResult], ks: list[int], settings: Settings, count: int) -> None:
    console.print(summary(results, ks, settings, count))
    console.print(
        "cases/min: M / (last verdict - first produce). speed-up: median over repetitions of cases/min(k) / "
        f"cases/min(k={ks[0]}) in the same repetition; efficiency = speed-up / ideal. p50/p95: the verdicts' "
        "latency_s (intake to decision, including the wait behind the other cases of the burst). cap bound: "
        f"k x llm_concurrency / (calls per case x L), in cases/min. slots busy: model-call time / (k x "
        f"llm_concurrency x wall). balance: mean / max model calls per worker (the busiest partition sets the "
        "wall). CPU: workers + broker CPU seconds / wall. RSS: peak (VmHWM) of the largest worker. ready: worker "
        "start to a settled group (all joined, partitions assigned, tables recovered), not in the measurement.",
        style="dim",
    )
    console.print(spread(results))


def summary(results: list[RunResult], ks: list[int], settings: Settings, count: int) -> Table:
    L, C = settings.offline_latency_s, settings.llm_concurrency
    speedups = ratios({(r.k, r.rep): r.per_min for r in results}, ks)
    out = table(
        f"Throughput vs partitions = workers (offline stand-in, L = {L}s per call, llm_concurrency {C} and "
        f"stage_concurrency {settings.stage_concurrency} per worker; M = {count} cases; medians of "
        f"{len({r.rep for r in results})} repetition(s))",
        (
            "k",
            "cases/min",
            "min-max",
            f"speed-up vs k={ks[0]}",
            "ideal",
            "efficiency",
            "p50 (s)",
            "p95 (s)",
            "calls/case",
            "cap bound",
            "of bound",
            "slots busy",
            "balance",
            "CPU (cores)",
            "RSS/worker (MB)",
            "ready (s)",
        ),
    )
    for k in ks:
        runs = [r for r in results if r.k == k]
        if not runs:
            continue
        speed, ideal = med(speedups[k]), k / ks[0]
        calls = med([r.calls_per_case for r in runs])
        bound = k * C / (calls * L) * 60 if calls and L else float("nan")
        tput = med([r.per_min for r in runs])
        balance = med([statistics.mean(r.calls_by_worker) / max(r.calls_by_worker) for r in runs])
        cores = med([(sum(r.cpu_workers_s) + r.cpu_broker_s) / r.wall_s for r in runs])
        out.add_row(
            str(k),
            f"{tput:.1f}",
            f"{min(r.per_min for r in runs):.1f}-{max(r.per_min for r in runs):.1f}",
            f"{speed:.2f}x",
            f"{ideal:.0f}x",
            f"{speed / ideal:.0%}",
            f"{med([r.p50 for r in runs]):.1f}",
            f"{med([r.p95 for r in runs]):.1f}",
            f"{calls:.1f}",
            f"{bound:.1f}",
            f"{tput / bound:.0%}",
            f"{med([r.slots_busy for r in runs]):.0%}",
            f"{balance:.0%}",
            f"{cores:.2f}",
            f"{med([max(r.rss_mb) for r in runs]):.0f}",
            f"{med([r.ready_s for r in runs]):.1f}",
        )
    return out


def spread(results: list[RunResult]) -> Table:
    columns = (
        "k",
        "rep",
        "cases/min",
        "wall (s)",
        "disputes.events partitions",
        "verdicts (per worker)",
        "model calls",
        "verdicts per partition",
        "last verdict per partition (s)",
        "CPU s (broker)",
        "RSS MB",
        "warm-up (s)",
        "notes",
    )
    out = table("Where the measured cases went, per run", columns, left=columns[4:-2] + columns[-1:])
    for r in sorted(results, key=lambda r: (r.k, r.rep)):
        notes = (
            (["REBALANCED during measurement"] if r.rebalanced else [])
            + ([f"{r.duplicates} cases judged twice"] if r.duplicates else [])
            + ([f"backends {sorted(r.backends)}"] if r.backends != {"offline"} else [])
        )
        out.add_row(
            str(r.k),
            str(r.rep + 1),
            f"{r.per_min:.1f}",
            f"{r.wall_s:.1f}",
            " ".join(f"w{i}:{sorted(p)}" for i, p in sorted(r.assignment.items())),
            " ".join(f"w{i}:{n}" for i, n in enumerate(r.verdicts_by_worker)),
            " ".join(f"w{i}:{n}" for i, n in enumerate(r.calls_by_worker)),
            " ".join(f"p{i}:{n}" for i, n in enumerate(r.cases_by_partition)),
            " ".join(f"p{i}:{t:.0f}" for i, t in enumerate(r.last_by_partition)),
            " ".join(f"{x:.0f}" for x in r.cpu_workers_s) + f" ({r.cpu_broker_s:.0f})",
            " ".join(f"{x:.0f}" for x in r.rss_mb),
            f"{r.warmup_s:.1f}",
            "; ".join(notes) or "-",
        )
    return out


def print_settings(
    console: Console, settings: Settings, ks: list[int], count: int, repeat: int, timeout_s: float
) -> None:
    samples = len(example_cases())
    out = Table(title="Settings used", show_header=False)
    out.add_column(style="bold")
    out.add_column(max_width=100)
    out.add_row("ks (partitions = workers)", ", ".join(map(str, ks)) + " (interleaved in every repetition)")
    out.add_row(
        "cases per run (M)",
        f"{count}: copies of the {samples} examples/cases, the same ids in every run, "
        "spread evenly over the partitions; plus k warm-up cases (one per partition), "
        "not measured",
    )
    out.add_row("repetitions", str(repeat))
    for key in (
        "llm_backend",
        "offline_latency_s",
        "llm_concurrency",
        "stage_concurrency",
        "llm_tokens_per_minute",
        "precedent_backend",
        "metrics_port",
        "session_timeout_s",
        "heartbeat_interval_s",
        "commit_interval_s",
        "kafka_fetch_max_wait_ms",
        "processing_guarantee",
        "replication_factor",
        "jurors",
        "rounds",
        "max_select_steps",
        "early_stop",
        "warm_cache_first",
    ):
        out.add_row(key, str(getattr(settings, key, "n/a")))
    out.add_row(
        "per run",
        "fresh topic prefix and app id (consumer group); per worker its own datadir and "
        "model-call log; one embedded Tansu broker (in memory) for the whole bench",
    )
    out.add_row("timeout per run (s)", f"{timeout_s:.0f}")
    out.add_row("machine", f"{machine()} at start")
    console.print(out)
    for k in ks:
        if k > 1:
            console.print(
                f"plain numbered ids would put {natural_spread(count, k)} of the {count} cases on "
                f"the {k} partitions; the bench's ids put {count // k}-{-(-count // k)} on each"
            )
