"""``cyberjurors eval --batch``: a configuration's cases judged side by side in one process, in
stage-synchronous waves (``waves.py``), their model calls answered through Anthropic's Message
Batches API at the batch price (``llm/backends/batch.py``), or, with the offline stand-in, in process.

The same stage functions as the stream (``jury.stages.judge_file``: focus, clues, the rounds, the
verdict), the same admission checks as intake (``intake.admit``) and the same precedent retrieval;
what differs is the transport: no Kafka and no worker, and a model call returns when its wave has
been answered. So the focus calls of every case go out as one batch, then each select and perceive
step, round 1's warm-up jurors, the other jurors, the summaries, ... Cases are taken
``llm_batch.max_cases`` at a time (memory), each set through all its waves.

Resumable twice over: verdicts are recorded as the streaming eval records them (under the key
``<rung>.batch``), so a rerun judges only the cases without one; and the batches live under
``OUT/batches/<rung>/`` (ids submitted, every entry's result), so the rerun of a case that was cut
short takes the answers already paid for and collects the batches already submitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, TaskID

from ..assembly import backend_for
from ..config import Settings, split_model
from ..evidence import intake
from ..jury.rounds import Jury
from ..jury.stages import NoPrecedents, Retriever, judge_file
from ..llm.backends.anthropic import AnthropicLLM
from ..llm.backends.batch import BatchStop, BatchStore, InProcess, MessageBatches, Pending, WaveLLM, WaveStats
from ..llm.backends.routed import routed
from ..llm.port import LLM, GuardedLLM, LLMError
from ..llm.prices import PriceTable
from ..llm.waves import Waves
from ..observability import logs
from ..observability.progress import bar as progress_bar
from ..precedents.base import PrecedentBase
from ..schemas import CaseFile, DisputeCase, Verdict, now
from .dataset import Dataset
from .ladder import Ablation
from .report import BatchRun, EvalReport
from .runs import EvalError, Options, RunState, case_results, fingerprint, media_root, run_report
from .swap import swap_parties, twin_id

log = logging.getLogger(__name__)
RecordFn = Callable[[str, "Verdict | None", "str | None"], None]
"""RunState.record, bound to a configuration: a case's verdict or failure, as it comes"""
UNCAPPED = 1_000_000  # a wave's calls all wait at once: a concurrency cap would hold them back for ever


def batch_key(ablation: Ablation) -> str:
    return f"{ablation.key}.batch"


def batch_settings(base: Settings, ablation: Ablation, dataset: Dataset) -> Settings:
    # a batch can take hours and the next wave's calls come after it: the case prefix is cached for an
    # hour unless prompt_cache_ttl was set (the API's own advice for batches with shared context)
    ttl = base.prompt_cache_ttl if "prompt_cache_ttl" in base.model_fields_set else "1h"
    return ablation.settings(base).model_copy(
        update={"prompt_cache_ttl": ttl, "media_root": media_root(base, dataset), "metrics_port": 0}
    )


def refusal(settings: Settings) -> str | None:
    """Why these settings cannot run in batch mode, or None."""
    named = settings.providers_named() - {settings.backend}
    if settings.backend == "openai" or named:
        return (
            "--batch runs on the anthropic backend (Message Batches API) or offline (waves in process); "
            f"these settings call {', '.join(sorted(named | {settings.backend}))}"
        )
    return None


def executor_for(settings: Settings, folder: Path, progress: Progress | None) -> InProcess | MessageBatches:
    if settings.backend == "anthropic":
        return MessageBatches(
            AnthropicLLM.from_settings(settings),
            BatchStore(folder),
            settings.llm_batch.poll_s,
            settings.llm_batch.max_attempts,
            progress,
            settings.llm_batch.max_wait_s,
            settings.llm_batch.retry_s,
        )
    return InProcess(backend_for("offline", settings))


def wave_llm(settings: Settings, waves: Waves[Pending], executor: InProcess | MessageBatches) -> GuardedLLM:
    """The port the stages call: every call joins a wave; provider prefixes in model names are taken
    off as ``routed`` does; priced at the batch share when the answers come from Message Batches."""
    inner: LLM = WaveLLM(waves, executor.backend, getattr(executor, "model_label", None))
    if settings.providers_named():
        inner = routed(settings, lambda provider: WaveLLM(waves, executor.backend))
    return GuardedLLM(
        inner, UNCAPPED, None, settings.llm_call_log, PriceTable.for_settings(settings), batch=executor.discounted
    )


@dataclass
class Judged:
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    stats: WaveStats = field(default_factory=WaveStats)
    waves: int = 0


async def judge_case(
    case: DisputeCase, llm: LLM, settings: Settings, jury: Jury, precedents: Retriever
) -> tuple[Verdict | None, str | None]:
    """One case (a flow of the run: ``Waves.gather``): its verdict, or why there is none as a dead
    letter would say it (``stage:reason``). A stop of the whole run (``BatchStop``) is raised."""
    stage = ["intake"]
    try:
        problems = intake.admit(case, settings)
        case_file = CaseFile(case=case, received_at=now(), problems=problems, backend=llm.backend)
        return await judge_file(
            case_file, llm, settings, jury, precedents, at=lambda name: stage.__setitem__(0, name)
        ), None
    except intake.Rejected as err:
        return None, f"intake:{err.reason}"
    except LLMError as err:
        return None, f"{stage[0]}:llm_{err.kind}"
    except BatchStop:
        raise
    except Exception:  # a bug costs the case, as stage_failed does on the stream, not the run
        log.exception("case %s failed in stage %s", case.case_id, stage[0])
        return None, f"{stage[0]}:stage_failed"


@contextlib.asynccontextmanager
async def opened_precedents(settings: Settings, jury: Jury) -> AsyncIterator[Retriever]:
    if settings.precedent_backend == "none":
        yield NoPrecedents()
        return
    base = PrecedentBase(settings, jury.personas)
    await base.open()  # once, before the flows: a flow must wait on nothing but the model and its own work
    try:
        yield base
    finally:
        await base.close()


async def judge_in_waves(
    settings: Settings,
    cases: list[DisputeCase],
    executor: InProcess | MessageBatches,
    record: RecordFn,
    progress: Progress,
    task: TaskID,
) -> Judged:
    """Every case through the stages in waves, ``llm_batch.max_cases`` at a time; each verdict or failure
    recorded as it comes."""
    judged = Judged()
    jury = Jury.from_settings(settings)
    try:
        async with opened_precedents(settings, jury) as precedents:
            for start in range(0, len(cases), settings.llm_batch.max_cases):
                waves: Waves[Pending] = Waves(executor.answer)
                llm = wave_llm(settings, waves, executor)

                async def one(case: DisputeCase, llm: GuardedLLM) -> None:
                    verdict, failure = await judge_case(case, llm, settings, jury, precedents)
                    record(case.case_id, verdict, failure)
                    if verdict is not None:
                        judged.verdicts[case.case_id] = verdict
                    else:
                        judged.failures[case.case_id] = failure or "unknown"
                    progress.advance(task)

                await waves.gather(*(one(case, llm) for case in cases[start : start + settings.llm_batch.max_cases]))
                judged.waves += len(waves.sizes)
    finally:
        close = getattr(getattr(executor, "llm", None), "aclose", None)
        if close is not None:
            await close()
    judged.stats = executor.stats
    return judged


def standard_cost(settings: Settings, verdicts: list[Verdict]) -> float | None:
    """The same tokens at standard (streaming) prices: the batch cost over the batch share, when the
    models used share one (every model of the dated table does: 0.5)."""
    prices = PriceTable(settings.llm_prices)
    shares = {p.batch for m in settings.model_specs() if (p := prices.price(split_model(m)[1])) is not None}
    if len(shares) != 1 or not verdicts:
        return None
    return sum(v.tokens.cost_usd for v in verdicts) / len(verdicts) / shares.pop()


def streaming_cost(
    run: RunState, ablation: Ablation, settings: Settings, case_ids: set[str]
) -> tuple[float | None, int]:
    """USD per case of a streaming run of the same configuration (same judged settings) in the same
    OUT, over the same cases: a measured comparison, when one was made."""
    if run.state["configurations"].get(ablation.key) != fingerprint(settings):
        return None, 0
    verdicts = [v for i, v in run.decided(ablation.key).items() if i in case_ids]
    return (sum(v.tokens.cost_usd for v in verdicts) / len(verdicts) if verdicts else None), len(verdicts)


def evaluate_batch(
    dataset: Dataset, ablation: Ablation, base: Settings, run: RunState, options: Options, console: Console
) -> EvalReport:
    settings = batch_settings(base, ablation, dataset)
    if why := refusal(settings):
        raise EvalError(why)
    key = batch_key(ablation)
    run.claim(key, settings)
    cases = {c.case_id: c for c in dataset.cases}
    if options.party_swap:
        cases |= {twin_id(c.case_id): swap_parties(c) for c in dataset.cases}
    verdicts = run.decided(key)
    pending = [c.model_copy(update={"ground_truth": None}) for i, c in cases.items() if i not in verdicts]
    started, clock = datetime.now(UTC), time.monotonic()
    answered = "message-batches" if settings.backend == "anthropic" else "in-process"
    console.print(
        f"[bold]{ablation.name}[/] (batch, {answered}): {ablation.description}; {len(cases) - len(pending)} "
        f"of {len(cases)} cases already decided, {len(pending)} to judge (backend {settings.backend})"
    )
    judged = Judged()
    if pending:
        with progress_bar(console) as progress:
            task = progress.add_task(f"{ablation.key} verdicts", total=len(pending))
            record: RecordFn = lambda case_id, verdict, failure: run.record(key, case_id, verdict, failure)  # noqa: E731
            # outside a terminal the progress display shows nothing: each batch's counts are logged instead
            shown = (
                logs.shown(settings, "cyberjurors.llm.backends.batch")
                if not console.is_terminal
                else contextlib.nullcontext()
            )
            try:
                with shown:
                    executor = executor_for(
                        settings, options.out / "batches" / ablation.key, progress if console.is_terminal else None
                    )
                    judged = asyncio.run(judge_in_waves(settings, pending, executor, record, progress, task))
            except BatchStop as err:
                raise EvalError(str(err)) from err
        verdicts = run.decided(key)
    results = case_results(dataset, verdicts, judged.failures, options.party_swap)
    mine = [verdicts[c.case_id] for c in dataset.cases if c.case_id in verdicts]
    stream_cost, stream_n = streaming_cost(run, ablation, settings, {c.case_id for c in dataset.cases})
    return run_report(
        f"{ablation.name} (batch)",
        ablation.description,
        dataset,
        settings,
        results,
        verdicts,
        started,
        clock,
        options,
        batch_prices=answered == "message-batches",
        mode="batch",
        batch=BatchRun(
            executor=answered,
            waves=judged.waves,
            **vars(judged.stats),
            cost_per_case_standard_usd=standard_cost(settings, mine),
            streaming_cost_per_case_usd=stream_cost,
            streaming_verdicts=stream_n,
        ),
    )
