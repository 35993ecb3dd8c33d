"""`cyberjurors eval`: a labelled dataset through the real pipeline, scored against the real votes.

For each configuration (the settings as given, or rungs of the ablation ladder) the driver starts
a Faust worker with that configuration on its own topics, produces the cases with their ground
truth removed (at most ``concurrency`` in flight), reads the verdicts and dead letters back from
the topics, and scores them. With the party-swap test each case's swapped twin goes through too.

Reports are never overwritten (``report_files.write``), and the command exits 1 when more cases than it
tolerates have no verdict (``cli.eval_cmd``); every failed case is named in the report.

With ``--batch`` (``batch.py``) the cases are judged in this process instead, in waves answered
through the Message Batches API; the results and reports take the same form.

Resumable: every verdict is appended to ``OUT/results/<configuration>.jsonl`` as it arrives, and a
run's topics and consumer group are named after a run id kept in ``OUT/run.json``. A second run with
the same dataset and configuration sends only the cases that have no verdict yet (dead letters and
timeouts are tried again); a changed configuration is refused rather than mixed into old results.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress

from ..config import Settings
from ..kafka.cluster import ensure_topics
from ..kafka.producers import on_embedded
from ..observability.progress import bar as progress_bar
from ..schemas import DisputeCase
from ..tooling.broker import embedded_broker
from ..tooling.clients import Outcome, Outcomes, Outgoing, case_event, produce
from ..tooling.worker_process import WorkerProcess
from .dataset import Dataset
from .ladder import Ablation
from .report import EvalReport
from .runs import EvalError, Options, RunState, case_results, media_root, run_report
from .swap import swap_parties, twin_id


def missing_media(dataset: Dataset, root: Path) -> list[tuple[str, str]]:
    """(case id, first path) for every case with a local media path that is not a file under ``root``.
    Paths outside the root are left to intake, which refuses them with a reason of their own."""
    base = root.resolve()
    missing = []
    for case in dataset.cases:
        for item in case.items():
            path = item.media.path if item.media is not None else None
            if path is None:
                continue
            try:
                full = (base / path).resolve()
            except (OSError, ValueError, RuntimeError):
                continue
            if full.is_relative_to(base) and not full.is_file():
                missing.append((case.case_id, path))
                break
    return missing


def media_warning(dataset: Dataset, root: Path) -> str | None:
    """Said once before judging: such cases are still judged (a missing file is noted on the verdict
    as it would be in production), but a whole dataset judged blind is rarely what was meant."""
    missing = missing_media(dataset, root)
    if not missing:
        return None
    return (
        f"{len(missing)} of {len(dataset.cases)} cases refer to media not found under {root}, e.g. "
        f"{missing[0][1]}: they are judged without it; set --media-root"
    )


def unusable_out(out: Path) -> str | None:
    """Why ``out`` cannot hold a run (created and write-probed here, before anything is judged), or None."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        for sub in ("results", "logs", "batches", "faust", "precedents"):
            if (out / sub).exists() and not (out / sub).is_dir():
                return f"--out {out}: {out / sub} is not a folder"
        if (out / "run.json").exists() and not (out / "run.json").is_file():
            return f"--out {out}: {out / 'run.json'} is not a file"
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as err:
        return f"--out {out} cannot be used: {err.strerror or err}"
    return None


def submission(case: DisputeCase) -> Outgoing:
    """The case as a platform would send it: the real votes stay with the evaluator."""
    return case_event(case.model_copy(update={"ground_truth": None}), "eval")


def worker_settings(
    base: Settings, ablation: Ablation, dataset: Dataset, run: RunState, bootstrap: str, options: Options
) -> Settings:
    # a case's rounds come back through Kafka and the ladder's cases queue behind each other: calls
    # of one case may be further apart than 5 minutes, so the case prefix is cached for an hour
    # unless prompt_cache_ttl was set
    ttl = base.prompt_cache_ttl if "prompt_cache_ttl" in base.model_fields_set else "1h"
    return ablation.settings(base).model_copy(
        update={
            "prompt_cache_ttl": ttl,
            "kafka_bootstrap_servers": bootstrap,
            "app_id": f"{base.app_id}-eval-{run.run_id}-{ablation.key}",
            "topic_prefix": f"{base.topic_prefix}eval-{run.run_id}-{ablation.key}.",
            "datadir": options.out / "faust" / ablation.key,
            "media_root": media_root(base, dataset),
            "stage_concurrency": options.concurrency,
            "llm_concurrency": max(base.llm_concurrency, options.concurrency),
            "metrics_port": 0,
            "probe_port": 0,
            "letters": False,  # eval measures the jury: letters to parties who do not exist would be spent for nothing
        }
    )


async def _collect(
    settings: Settings,
    pending: dict[str, DisputeCase],
    run: RunState,
    key: str,
    options: Options,
    worker: WorkerProcess,
    progress: Progress,
) -> dict[str, str]:
    """Produce the pending cases with at most ``concurrency`` in flight and record every verdict and
    dead letter for them; returns the failures (case id -> reason), timeouts included."""
    failures: dict[str, str] = {}
    queue = list(pending.values())
    task = progress.add_task(key, total=len(pending))

    async def send(room: int) -> None:
        nonlocal queue
        if room > 0 and queue:
            batch, queue = queue[:room], queue[room:]
            await produce(settings, [submission(c) for c in batch])

    async def arrived(outcome: Outcome) -> None:
        letter = outcome.dead_letter
        failure = f"{letter.stage}:{letter.reason}" if letter else None
        run.record(key, outcome.case_id, outcome.verdict, failure)
        if failure:
            failures[outcome.case_id] = failure
        progress.advance(task)
        await send(1)  # its place in flight is free

    def worker_alive() -> None:
        if not worker.alive():
            raise EvalError(f"the {key} worker exited; see {worker.log_path}")

    async with Outcomes(settings) as outcomes:
        await send(options.concurrency)
        done = await outcomes.wait(pending, idle_timeout_s=options.timeout_s, on_outcome=arrived, on_poll=worker_alive)
    for case_id in pending.keys() - done.keys():
        failures[case_id] = "timeout"
        run.record(key, case_id, failure="timeout")
    return failures


def evaluate_one(
    dataset: Dataset,
    ablation: Ablation,
    base: Settings,
    run: RunState,
    bootstrap: str,
    options: Options,
    console: Console,
) -> EvalReport:
    settings = worker_settings(base, ablation, dataset, run, bootstrap, options)
    run.claim(ablation.key, settings)
    cases = {c.case_id: c for c in dataset.cases}
    if options.party_swap:
        cases |= {twin_id(c.case_id): swap_parties(c) for c in dataset.cases}
    verdicts = run.decided(ablation.key)
    pending = {i: c for i, c in cases.items() if i not in verdicts}
    started = datetime.now(UTC)
    clock = time.monotonic()
    failures: dict[str, str] = {}
    console.print(
        f"[bold]{ablation.name}[/]: {ablation.description}; {len(cases) - len(pending)} of {len(cases)} "
        f"cases already decided, {len(pending)} to send (backend {settings.backend})"
    )
    if pending:
        asyncio.run(ensure_topics(settings))
        log = options.out / "logs" / f"{ablation.key}.log"
        with contextlib.ExitStack() as stack:  # the worker stops on the way out, however it is left
            worker = WorkerProcess(settings, log)
            stack.push(worker)
            worker.start()
            # cases sent before the worker (and its embedding model) is up would count its start-up
            # as their latency
            ready = ["[^Worker]: Ready"]
            if settings.precedent_backend != "none":
                ready.append("precedent base open|precedent base could not be opened")
            if not worker.wait_for(*ready, timeout_s=180):
                raise EvalError(f"the {ablation.key} worker did not become ready; see {log}")
            with progress_bar(console) as progress:
                failures = asyncio.run(_collect(settings, pending, run, ablation.key, options, worker, progress))
        verdicts = run.decided(ablation.key)
    results = case_results(dataset, verdicts, failures, options.party_swap)
    return run_report(
        ablation.name, ablation.description, dataset, settings, results, verdicts, started, clock, options
    )


def run_eval(
    dataset: Dataset,
    ablations: list[Ablation],
    base: Settings,
    options: Options,
    console: Console,
    bootstrap: str | None = None,
) -> list[EvalReport]:
    run = RunState(options.out, dataset, options.fresh)
    (options.out / "logs").mkdir(exist_ok=True)
    if warning := media_warning(dataset, media_root(base, dataset)):
        console.print(f"[yellow]{escape(warning)}[/]")
    if options.batch:  # no broker, no worker: the stages run in this process
        from .batch import evaluate_batch

        return [evaluate_batch(dataset, ablation, base, run, options, console) for ablation in ablations]
    reports = []
    with contextlib.ExitStack() as stack:
        if bootstrap is None:
            bootstrap = stack.enter_context(embedded_broker(log=options.out / "logs" / "broker.log"))
            console.print(f"embedded broker (Tansu) on {bootstrap}")
            base = base.model_copy(update=on_embedded(base))  # no idempotence there: set, not probed
        for ablation in ablations:
            reports.append(evaluate_one(dataset, ablation, base, run, bootstrap, options, console))
    return reports
