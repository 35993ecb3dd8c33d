"""What the benchmarks share, so each one reads as its measurement (in the spirit of
faust-streaming's tests/bench/base.py): sample cases, the embedded broker, workers in child
processes, producing cases and awaiting their verdicts (``tooling.clients.Outcomes``), the
workers' consumer group as the Kafka admin API describes it, process figures and small
reporting helpers. Figures, never assertions: a bench fails only when it cannot measure."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import platform
import re
import signal
import socket
import statistics
import sys
import time
import tracemalloc
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
from aiokafka.partitioner import murmur2
from rich.console import Console
from rich.table import Table

from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import client_options
from cyberjurors.schemas import DisputeCase
from cyberjurors.tooling.broker import start_broker, stop_process
from cyberjurors.tooling.clients import Outcome, Outcomes, Outgoing, case_event, produce, producing
from cyberjurors.tooling.worker_process import WorkerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
T = TypeVar("T")


class BenchError(RuntimeError):
    """The bench could not measure (a worker died, a case was dead-lettered, verdicts missing)."""


def make_console(width: int = 160) -> Console:
    """Wide enough for the tables when the output goes to a file or a pipe."""
    return Console(width=None if sys.stdout.isatty() else width)


# --- cases --------------------------------------------------------------------------------------


def example_cases(count: int | None = None) -> list[DisputeCase]:
    return [DisputeCase.model_validate_json(p.read_text()) for p in sorted((EXAMPLES / "cases").glob("*.json"))][:count]


def copies(count: int, tag: str) -> list[DisputeCase]:
    """``count`` copies of the example cases with unique ids ``<tag>-<i>-<example id>``."""
    base = example_cases()
    return [
        base[i % len(base)].model_copy(update={"case_id": f"{tag}-{i}-{base[i % len(base)].case_id}"})
        for i in range(count)
    ]


def partition_of(key: str, partitions: int) -> int:
    """The partition aiokafka's (and Faust's) default partitioner picks for a key: Java's murmur2."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def balanced_copies(count: int, ks: list[int], tag: str) -> list[DisputeCase]:
    """Copies whose case i hashes to partition i mod k for every k in ``ks`` at once: every partition
    gets as many cases, and the same ids (so, on the deterministic stand-in, the same work) in every
    run. Plain numbered ids would leave the spread to the hash (``natural_spread``)."""
    base, out = example_cases(), []
    for i in range(count):
        sample, n = base[i % len(base)], 0
        while not all(partition_of(f"{tag}-{i:03d}-{n}-{sample.case_id}", k) == i % k for k in ks):
            n += 1
        out.append(sample.model_copy(update={"case_id": f"{tag}-{i:03d}-{n}-{sample.case_id}"}))
    return out


def natural_spread(count: int, partitions: int) -> list[int]:
    """Cases per partition had the ids simply been numbered (what ``balanced_copies`` avoids)."""
    base = example_cases()
    spread = Counter(partition_of(f"tp-{i:03d}-{base[i % len(base)].case_id}", partitions) for i in range(count))
    return [spread[p] for p in range(partitions)]


# --- broker, workers and their group -------------------------------------------------------------


@contextlib.contextmanager
def broker(work: Path) -> Iterator[tuple[str, int]]:
    """The embedded broker for the block: (bootstrap, pid)."""
    process, bootstrap = start_broker(log=work / "broker.log")
    try:
        yield bootstrap, process.pid
    finally:
        stop_process(process)


class Workers:
    """``cyberjurors worker`` children in one consumer group, worker i with its own datadir and
    model-call log under ``folder/w<i>`` and the client id ``<app id>-w<i>`` (Faust reads
    BROKER_CLIENT_ID), so the group's member ids name their worker."""

    def __init__(self, settings: Settings, count: int, folder: Path):
        self.settings, self.folder = settings, folder
        self.processes = [
            WorkerProcess(
                settings.model_copy(
                    update={"datadir": folder / f"w{i}" / "faust", "llm_call_log": folder / f"w{i}" / "calls.jsonl"}
                ),
                folder / f"w{i}" / "worker.log",
                env={"BROKER_CLIENT_ID": f"{settings.app_id}-w{i}"},
            )
            for i in range(count)
        ]

    def __enter__(self) -> Workers:
        for process in self.processes:
            process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        """SIGTERM all at once (each is SIGKILLed after 20 s if it has not exited)."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(self.processes)) as pool:
            list(pool.map(lambda w: w.stop(), self.processes))

    @property
    def pids(self) -> list[int]:
        return [w.process.pid for w in self.processes]  # type: ignore[union-attr]

    def check(self, only: Collection[int] | None = None) -> None:
        """Every worker (or those in ``only``, the ones meant to be running) is alive."""
        for i, w in enumerate(self.processes):
            if (only is None or i in only) and not w.alive():
                tail = w.log_path.read_text(errors="replace")[-3000:] if w.log_path.exists() else "(no log)"
                raise BenchError(
                    f"worker {i} exited (code {w.process.returncode}); "  # type: ignore[union-attr]
                    f"end of {w.log_path}:\n{tail}"
                )

    def calls(self, i: int, wanted: set[str]) -> list[dict]:
        """Worker i's model-call log entries for the given cases."""
        return call_log(self.folder / f"w{i}" / "calls.jsonl", wanted)


@dataclass(frozen=True)
class Group:
    state: str
    members: dict[str, set[int] | None]
    """client id -> partitions of the topic asked about; None when the broker does not report
    member assignments (Tansu 0.6 describes members with empty assignments)."""
    member_ids: frozenset[str]
    """A member that left and joined again comes back under a new id."""


async def describe_group(settings: Settings, topic: str) -> Group:
    """The consumer group ``settings.app_id`` as the admin API's DescribeGroups reports it."""
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        _, _, state, _, _, members, *_ = (await admin.describe_consumer_groups([settings.app_id]))[0].groups[0]
    finally:
        await admin.close()
    out: dict[str, set[int] | None] = {}
    for member_id, client_id, _, _, assignment, *_ in members:
        held = None
        if assignment:
            decoded = ConsumerProtocolMemberAssignment.decode(assignment).assignment
            held = {p for name, parts in decoded if name == topic for p in parts}
        out[client_id or member_id.rsplit("-", 5)[0]] = held  # a member id is "<client id>-<uuid>"
    return Group(state, out, frozenset(m[0] for m in members))


class GroupWatch:
    """Samples the group through the admin API (at most once a second) while cases run, and the
    workers on every poll; ``disturbed`` once the group left Stable or its members changed."""

    def __init__(self, settings: Settings, workers: Workers, settled: Group):
        self.settings, self.workers, self.settled = settings, workers, settled
        self.disturbed, self._next = False, 0.0

    async def __call__(self) -> None:
        self.workers.check()
        if time.monotonic() >= self._next:
            self._next = time.monotonic() + 1.0
            group = await describe_group(self.settings, self.settings.topic("disputes.events"))
            self.disturbed |= group.state != "Stable" or group.member_ids != self.settled.member_ids


async def settled_group(
    settings: Settings, workers: Workers, timeout_s: float, members: Collection[int] | None = None
) -> Group:
    """Until the group is Stable with every worker (or those in ``members``) a member and no other,
    the same members twice 1 s apart."""
    members = range(len(workers.processes)) if members is None else members
    wanted = {f"{settings.app_id}-w{i}" for i in members}
    deadline, previous, last = time.monotonic() + timeout_s, None, ""
    while time.monotonic() < deadline:
        workers.check(members)
        group = await describe_group(settings, settings.topic("disputes.events"))
        last = f"group {group.state}, members {sorted(group.members)}"
        if group.state == "Stable" and set(group.members) == wanted:
            if previous == group:
                return group
            previous = group
            await asyncio.sleep(1.0)
        else:
            previous = None
            await asyncio.sleep(0.3)
    raise BenchError(f"workers not in a settled group within {timeout_s:.0f}s: {last}")


class LagProbe:
    """The group's consumer lag on the given topics, as a lag exporter computes it: end offset minus
    the group's committed offset (0 where it committed nothing yet), summed over their partitions."""

    def __init__(self, settings: Settings, topics: Collection[str]):
        self.settings, self.topics = settings, [settings.topic(t) for t in topics]
        self.admin = AIOKafkaAdminClient(**client_options(settings))
        self.consumer = AIOKafkaConsumer(**client_options(settings), enable_auto_commit=False)

    async def __aenter__(self) -> LagProbe:
        await self.admin.start()
        await self.consumer.start()
        self.partitions = [TopicPartition(t, p) for t in self.topics for p in range(self.settings.partitions)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.consumer.stop()
        await self.admin.close()

    async def lag(self) -> int:
        ends = await self.consumer.end_offsets(self.partitions)
        committed = await self.admin.list_consumer_group_offsets(self.settings.app_id, partitions=self.partitions)
        done = {tp: max(meta.offset, 0) for tp, meta in committed.items()}
        return sum(max(end - done.get(tp, 0), 0) for tp, end in ends.items())


# --- produce and await -----------------------------------------------------------------------------


@dataclass
class Burst:
    outcomes: dict[str, Outcome]
    started: float
    """``time.perf_counter()`` just before the first produce."""
    repeats: int

    @property
    def last(self) -> float:
        return max(o.at for o in self.outcomes.values())

    def took(self, case_id: str) -> float:
        return self.outcomes[case_id].at - self.started


async def paced(settings: Settings, cases: list[DisputeCase], rate: float) -> AsyncIterator[DisputeCase]:
    """Each case produced at its slot, evenly at ``rate`` cases a minute, on one producer; yielded
    once sent."""
    async with producing(settings) as send:
        started = time.perf_counter()
        for i, case in enumerate(cases):
            await asyncio.sleep(max(0.0, started + i * 60 / rate - time.perf_counter()))
            await send([case_event(case, "bench")])
            yield case


async def run_cases(
    settings: Settings,
    cases: list[DisputeCase] | list[Outgoing],
    timeout_s: float = 900,
    from_beginning: bool = True,
    on_verdict: Callable[[int], None] = lambda n: None,
    on_poll: Callable[[], object] | None = None,
    rate: float | None = None,
) -> Burst:
    """Produce the cases (at once, or evenly at ``rate`` cases a minute) and wait for all their
    verdicts; a dead letter, or verdicts still missing after ``timeout_s``, is a BenchError.
    ``cases`` may be events already (an incremental case's opening, rounds and close, from
    ``tooling.clients.read_events``), sent at once. ``on_poll`` may check the workers."""
    arrived: list[Outcome] = []

    def verdict(outcome: Outcome) -> None:
        letter = outcome.dead_letter
        if letter is not None:
            raise BenchError(
                f"case {outcome.case_id} dead-lettered: {letter.reason} at {letter.stage}: {letter.detail}"
            )
        arrived.append(outcome)
        on_verdict(len(arrived))

    async with Outcomes(settings, from_beginning=from_beginning) as outcomes:
        started = time.perf_counter()
        ids = list(dict.fromkeys(c.case_id for c in cases))
        if rate is None:
            await produce(settings, [c if isinstance(c, Outgoing) else case_event(c, "bench") for c in cases])
        else:
            async for _ in paced(settings, [c for c in cases if isinstance(c, DisputeCase)], rate):
                pass
        got = await outcomes.wait(ids, timeout_s=timeout_s, on_outcome=verdict, on_poll=on_poll)
    if len(got) < len(ids):
        raise BenchError(f"{len(ids) - len(got)} of {len(ids)} verdicts missing after {timeout_s:.0f}s")
    return Burst(got, started, outcomes.repeats)


# --- figures ---------------------------------------------------------------------------------------


def call_log(path: Path, wanted: set[str] | None = None) -> list[dict]:
    """A model-call log's entries (for the given cases only, if any are given)."""
    if not path.exists():
        return []
    entries = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return [e for e in entries if wanted is None or e.get("case_id") in wanted]


def peak_rss_mb(pid: int | str = "self", field: str = "VmHWM") -> float:
    """A process's peak (VmHWM) or current (VmRSS) resident memory."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def clocked(fn: Callable[..., T], *args: object, **kwargs: object) -> tuple[float, T]:
    """(seconds, result) of a call."""
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return time.perf_counter() - started, result


async def timed(awaitable: Awaitable[T]) -> tuple[float, T]:
    """(seconds, result) of an awaitable."""
    started = time.perf_counter()
    result = await awaitable
    return time.perf_counter() - started, result


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def pct_ms(seconds: list[float], q: float) -> float:
    return float(np.percentile(np.array(seconds) * 1000, q))


def ratios(values: dict[tuple[int, int], float], ks: list[int]) -> dict[int, list[float]]:
    """values[(k, rep)] over values[(ks[0], rep)], per k, for every repetition that has both."""
    out: dict[int, list[float]] = {k: [] for k in ks}
    for rep in sorted({rep for _, rep in values}):
        for k in ks:
            if (ks[0], rep) in values and (k, rep) in values:
                out[k].append(values[k, rep] / values[ks[0], rep])
    return out


def machine() -> str:
    return (
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


def table(title: str, columns: list[str] | tuple[str, ...], left: tuple[str, ...] = ()) -> Table:
    out = Table(title=title)
    for name in columns:
        out.add_column(name, justify="left" if name in left else "right")
    return out


def interrupt_on_sigterm() -> None:
    """A kill goes through the same clean-up as Ctrl-C."""

    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, raise_interrupt)


# --- a worker's memory ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def take_snapshot(worker: WorkerProcess, folder: Path, timeout_s: float = 300) -> Path:
    """A tracemalloc snapshot of a worker started with PYTHONTRACEMALLOC set: SIGUSR2 asks for it
    (``streams.worker.Worker``), and it is the next ``<pid>-<n>.snap`` that appears in ``folder``."""
    pid = worker.process.pid  # type: ignore[union-attr]
    before = set(folder.glob(f"{pid}-*.snap"))
    os.kill(pid, signal.SIGUSR2)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and worker.alive():
        new = set(folder.glob(f"{pid}-*.snap")) - before
        if new:
            return new.pop()
        time.sleep(0.2)
    raise BenchError(f"no tracemalloc snapshot from worker {pid} in {folder} within {timeout_s:.0f}s")


def slope_per_1000(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of (cases, MB) points, in MB per 1,000 cases."""
    if len(points) < 2:
        return float("nan")
    return float(np.polyfit(*np.array(points, dtype=float).T, 1)[0] * 1000)


def heap_growth(snapshots: list[tuple[int, Path]]) -> tuple[str, Table]:
    """A worker's traced Python heap at each (cases so far, snapshot), its slope, and what grew from
    the first snapshot to the last."""
    heap = [(done, traced_mb(path)) for done, path in snapshots]
    return (
        f"traced Python heap: {', '.join(f'{mb:.1f}' for _, mb in heap)} MB at {snapshots[0][0]}-"
        f"{snapshots[-1][0]} cases; slope {slope_per_1000(heap):.2f} MB per 1,000 cases",
        snapshot_growth(snapshots[0][1], snapshots[-1][1]),
    )


def traced_mb(snapshot: Path) -> float:
    """The memory a tracemalloc snapshot's traces hold."""
    return sum(stat.size for stat in tracemalloc.Snapshot.load(str(snapshot)).statistics("filename")) / 2**20


def snapshot_growth(before: Path, after: Path, top: int = 12, frames: int = 8) -> Table:
    """What grew between two snapshots of one process, by allocating line (KB, allocations), each
    with the innermost ``frames`` frames of its largest growing traceback (tracemalloc's own and the
    import machinery's allocations left out)."""
    ignored = [tracemalloc.Filter(False, f) for f in (tracemalloc.__file__, "<frozen importlib._bootstrap*>")]
    old, new = (tracemalloc.Snapshot.load(str(p)).filter_traces(ignored) for p in (before, after))
    by_tb = new.compare_to(old, "traceback")
    out = table(
        f"Growth from {before.name} to {after.name}",
        ["KB", "blocks", "where (innermost last)"],
        left=("where (innermost last)",),
    )
    for stat in new.compare_to(old, "lineno")[:top]:
        site = stat.traceback[0]
        tb = max((s for s in by_tb if s.traceback[-1] == site), key=lambda s: s.size_diff, default=stat)
        where = "\n".join(f"{f.filename.split('site-packages/')[-1]}:{f.lineno}" for f in list(tb.traceback)[-frames:])
        out.add_row(f"{stat.size_diff / 1024:+.0f}", f"{stat.count_diff:+d}", where)
    return out


def still_alive(worker: WorkerProcess) -> None:
    if not worker.alive():
        raise BenchError(f"the worker exited; see {worker.log_path}")


def ready_worker(
    settings: Settings, log: Path, env: dict[str, str], timeout_s: float = 1800
) -> tuple[WorkerProcess, float]:
    """A worker started, and the seconds from its start to Faust's "Worker ready" in its log
    (tables recovered, partitions assigned). Long allowed: a memory store on a broker that does not
    compact (the embedded one) reads every changelog record ever written."""
    worker = WorkerProcess(settings, log, env=env)
    started = time.perf_counter()
    worker.start()
    while time.perf_counter() - started < timeout_s:
        if not worker.alive():
            raise BenchError(f"the worker exited; end of {log}:\n{log.read_text(errors='replace')[-3000:]}")
        if log.exists() and "Worker ready" in log.read_text(errors="replace"):
            return worker, time.perf_counter() - started
        time.sleep(0.1)
    worker.stop()
    raise BenchError(f"the worker was not ready within {timeout_s:.0f} s; see {log}")


async def changelog_records(settings: Settings, tables: tuple[str, ...]) -> int:
    """Records in the tables' changelog topics (end offsets summed): what a memory store reads back
    at a restart where the broker does not compact (the embedded one)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(**client_options(settings))
    await consumer.start()
    try:
        tps = [
            TopicPartition(f"{settings.app_id}-{t}-changelog", p) for t in tables for p in range(settings.partitions)
        ]
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()


def recovery_read_s(log: Path) -> float:
    """Seconds the worker's last start spent reading its changelogs, from Faust's log lines."""
    stamps: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        for mark in ("Restoring state from changelog topics", "Done reading from changelog topics"):
            if mark in line and line.startswith("["):
                clock = line[1:24].split(" ")[1]  # [2026-11-25 12:27:34,404]
                h, m, s = clock.replace(",", ".").split(":")
                stamps[mark] = int(h) * 3600 + int(m) * 60 + float(s)
    return (
        stamps["Done reading from changelog topics"] - stamps["Restoring state from changelog topics"]
        if len(stamps) == 2
        else float("nan")
    )


def scrape_entries(port: int) -> dict[str, float]:
    """The table-entry gauges and cases in flight from the worker's metrics endpoint."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("cyberjurors_table_entries{"):
            out[line.split('table="', 1)[1].split('"', 1)[0]] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("cyberjurors_cases_in_flight "):
            out["in flight"] = float(line.rsplit(" ", 1)[1])
    return out


def rocksdb_keys(datadir: Path, tables: tuple[str, ...]) -> dict[str, int]:
    """Keys each table holds on disk across its partitions' RocksDB databases (the worker stopped)."""
    import rocksdict

    out: dict[str, int] = {}
    for name in tables:
        for path in sorted(datadir.rglob(f"{name}-*.db")):
            db = rocksdict.Rdict(str(path), access_type=rocksdict.AccessType.read_only())
            try:
                out[name] = out.get(name, 0) + sum(1 for _ in db.keys())  # noqa: SIM118  # iter(Rdict) indexes it by 0, 1, ...
            finally:
                db.close()
    return out


# --- a sampled profile ------------------------------------------------------------------------------

FRAME = re.compile(r"^(?P<name>.*) \((?P<file>.*?)(?::\d+)?\)$")


def _frame(text: str) -> str:
    """``name (path:line)`` as py-spy writes a frame -> ``name (path from its package)``."""
    found = FRAME.match(text)
    if found is None:
        return text
    path = found["file"]
    for root in ("site-packages/", "/lib/python3.11/", "/bench/"):
        path = path.split(root)[-1]
    return f"{found['name']} ({'cyberjurors/' + path.split('/cyberjurors/')[-1] if '/cyberjurors/' in path else path})"


def sampled_top(raw: Path, top: int = 25) -> tuple[Table, Table]:
    """What a ``py-spy record --format raw`` profile's samples were in, as shares of every sample:
    the innermost functions (where the time itself goes), and the project's own functions by all
    the time spent under them (which step of the pipeline it goes to), the worker's outer loop left out."""
    own: Counter[str] = Counter()
    under: Counter[str] = Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_frame(f) for f in stack.split(";")]
        samples += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            if "(cyberjurors/" in frame and not frame.startswith(OUTER):
                under[frame] += int(count)
    share = lambda n: f"{n / max(samples, 1):.1%}"  # noqa: E731
    innermost = table(f"innermost, of {samples} samples", ["own", "function (file)"], left=("function (file)",))
    for frame, n in own.most_common(top):
        innermost.add_row(share(n), frame)
    steps = table(
        f"the project's functions, of {samples} samples", ["in all", "function (file)"], left=("function (file)",)
    )
    for frame, n in under.most_common(top):
        steps.add_row(share(n), frame)
    return innermost, steps


OUTER = ("worker (", "<module> (", "run_worker (", "each (", "handled.", "Worker.")
