"""`cyberjurors demo`: the whole stack on one machine, start to finish.

Embedded broker -> topics -> one Faust worker (child process) -> sample cases produced ->
verdicts printed as they arrive, each followed by its letters to the parties (``letters`` on), each
party's own words in place of their placeholders -> everything shut down.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..config import Settings
from ..kafka.cluster import ensure_topics
from ..kafka.producers import on_embedded
from ..observability.progress import bar as progress_bar
from ..schemas import PartyLetter, Verdict
from .broker import embedded_broker
from .clients import Outcome, await_outcomes, produce, read_events, records
from .worker_process import WorkerProcess


def verdict_table(verdict: Verdict) -> Table:
    instance = f", appeal of {verdict.appeal_of}: final" if verdict.instance == 2 else ""
    table = Table(
        title=f"{verdict.case_id} ({verdict.category}{instance})", title_justify="left", show_header=False, expand=True
    )
    table.add_column(style="bold", width=14)
    table.add_column()
    v = verdict.votes
    split = f"buyer {v.buyer} : seller {v.seller} (of {v.total}" + (
        f", {v.abstained} abstained)" if v.abstained else ")"
    )
    table.add_row("winner", f"[bold]{verdict.winner}[/]  {split}")
    table.add_row("rounds", f"{verdict.rounds_used}" + (" (early stop)" if verdict.early_stopped else ""))
    table.add_row("focus", Text(verdict.focus))
    table.add_row("justification", Text(verdict.justification))
    clues = "; ".join(
        f"[{c.id}] {c.evidence_id}" + (f" frames {c.frames}" if c.frames else "") for c in verdict.cited_clues[:4]
    )
    table.add_row("clues", Text(clues or "-"))
    table.add_row(
        "precedents",
        Text(f"coverage {verdict.precedent_coverage}; cited {', '.join(verdict.cited_precedents[:3]) or 'none'}"),
    )
    t = verdict.tokens
    table.add_row(
        "cost",
        f"{t.calls} calls, {t.input_tokens:,} in / {t.output_tokens:,} out / "
        f"{t.cache_read_tokens:,} cache read / {t.cache_write_tokens:,} cache write tokens",
    )
    table.add_row("latency", f"{verdict.latency_s:.2f}s  backend={verdict.backend}")
    if verdict.escalated:
        table.add_row("escalated", Text("to a human panel: " + ", ".join(verdict.escalation_reasons)))
    if verdict.problems:
        table.add_row("noted", Text("\n".join(verdict.problems)))
    return table


def letter_table(letter: PartyLetter) -> Table:
    """A party's letter as the party reads it: what was decided for them, the subject and the body."""
    instance = ", appeal" if letter.instance == 2 else ""
    table = Table(
        title=f"letter to the {letter.party}: {letter.case_id} ({letter.locale}{instance})",
        title_justify="left",
        show_header=False,
        expand=True,
    )
    table.add_column(style="bold", width=14)
    table.add_column()
    table.add_row("outcome", f"{letter.outcome}" + (", under review" if letter.under_review else ""))
    table.add_row("subject", Text(letter.subject))
    table.add_row("letter", Text(letter.body))
    removed = f", {len(letter.check.removed)} statements removed" if letter.check.removed else ""
    table.add_row("checked", f"{letter.check.status} by {letter.check.checked_by}{removed}")
    if letter.notes:
        table.add_row("noted", Text("\n".join(letter.notes)))
    return table


class LettersAfterVerdicts:
    """Reads disputes.letters beside the verdicts: a verdict's letters are printed once it is, each
    once (a re-sent letter has the same id), whichever comes first."""

    def __init__(self, settings: Settings, console: Console):
        self.settings, self.console = settings, console
        self.shown: set[str] = set()  # the verdict ids printed
        self.waiting: dict[str, list[PartyLetter]] = {}  # verdict id -> letters read before it was
        self.printed: set[str] = set()  # letter ids

    def verdict(self, verdict: Verdict) -> None:
        self.shown.add(verdict.verdict_id)
        for letter in self.waiting.pop(verdict.verdict_id, []):
            self.letter(letter)

    def letter(self, letter: PartyLetter) -> None:
        if letter.letter_id in self.printed:
            return
        if letter.verdict_id not in self.shown:
            self.waiting.setdefault(letter.verdict_id, []).append(letter)
            return
        self.printed.add(letter.letter_id)
        self.console.print(letter_table(letter))

    def missing(self) -> int:
        """Letters not printed yet of the verdicts printed (two per verdict)."""
        return 2 * len(self.shown) - len(self.printed)

    async def read(self) -> None:
        async for record in records(self.settings, "disputes.letters", follow=True, idle_timeout_s=0.5):
            with contextlib.suppress(ValueError):  # not a letter (another release's record): not ours to print
                self.letter(PartyLetter.model_validate_json(record.value))


async def collect(
    settings: Settings, expected: set[str], console: Console, timeout_s: float, letters_wait_s: float = 60
) -> tuple[int, int]:
    """Print verdicts and dead letters for the expected cases until all are in, each verdict followed
    by its letters to the parties (waiting up to ``letters_wait_s`` for the last ones after the last
    verdict); returns (verdicts, dead)."""
    letters = LettersAfterVerdicts(settings, console)
    reading = asyncio.create_task(letters.read()) if settings.letters else None
    try:
        with progress_bar(console, "[bold]jury") as progress:
            task = progress.add_task("verdicts", total=len(expected))

            def show(outcome: Outcome) -> None:
                letter = outcome.dead_letter
                if letter is not None:
                    console.print(
                        f"[red]dead letter[/] {escape(outcome.case_id)}: {letter.reason} at {letter.stage}: "
                        f"{escape(letter.detail)}"
                    )
                else:
                    console.print(verdict_table(outcome.verdict))  # type: ignore[arg-type]  # no letter: a verdict
                    letters.verdict(outcome.verdict)  # type: ignore[arg-type]
                progress.advance(task)

            outcomes = await await_outcomes(settings, expected, timeout_s=timeout_s, on_outcome=show)
        if reading is not None:
            deadline = time.monotonic() + letters_wait_s
            while letters.missing() > 0 and time.monotonic() < deadline and not reading.done():
                await asyncio.sleep(0.2)
            if letters.missing() > 0:
                console.print(f"[yellow]{letters.missing()} letters to the parties not in after {letters_wait_s:g}s[/]")
    finally:
        if reading is not None:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reading
    dead = sum(o.dead_letter is not None for o in outcomes.values())
    return len(outcomes) - dead, dead


def precedent_samples() -> Path:
    """examples/precedents of the checkout: beside the package (an editable install), else under the
    current folder, where the demo's cases are read from too (an install into site-packages)."""
    beside = Path(__file__).resolve().parents[2] / "examples" / "precedents"
    return beside if beside.is_dir() else Path("examples", "precedents").resolve()


def seed_precedents(settings: Settings, console: Console, source: Path | None = None) -> None:
    """Build the embedded precedent base from the sample decided cases when it is missing or empty, or
    finish it when an earlier seeding from them was interrupted; otherwise reuse it. One line of output."""
    if settings.precedent_backend != "embedded":
        return
    samples_dir = source or precedent_samples()
    from ..assembly import build_llm
    from ..precedents.base import opened_base
    from ..precedents.build import BuildFailed, build_precedents, built_case_ids, read_cases
    from ..precedents.models import PrecedentError

    async def seed() -> str:
        async with opened_base(settings) as (index, embedder):
            before = await index.count("case"), await index.count("guideline")
            samples = {c.case_id for _, c in read_cases([samples_dir])[0]} if samples_dir.exists() else set()
            built = built_case_ids(settings)
            ours = built is not None and built <= samples
            if any(before) and not ours:
                return f"precedent base: reusing {settings.precedent_dir} ({before[0]} cases, {before[1]} guidelines)"
            if not samples:
                return f"precedent base at {settings.precedent_dir} is empty and {samples_dir} has no sample cases"
            llm = build_llm(settings)
            try:
                report = await build_precedents([samples_dir], settings, llm, index, embedder)
            finally:
                await llm.aclose()
            after = await index.count("case"), await index.count("guideline")
        done = "reusing" if not report.cases_indexed and not report.chunks_distilled else "built"
        return (
            f"precedent base: {done} {settings.precedent_dir} ({after[0]} cases, {after[1]} guidelines from "
            f"{samples_dir.name}; {report.chunks_distilled} distil calls on the {settings.backend} backend, "
            f"{report.elapsed_s:.1f}s)"
        )

    try:
        console.print(asyncio.run(seed()), markup=False)
    except (PrecedentError, BuildFailed, OSError, ValueError) as err:
        console.print(f"precedent base not ready, verdicts go without precedents: {err}", style="yellow", markup=False)


def run_demo(
    paths: list[Path], settings: Settings, console: Console, timeout_s: float = 600, bootstrap: str | None = None
) -> int:
    events = read_events(paths)
    expected = {e.case_id for e in events}
    workdir = Path(settings.datadir).parent
    workdir.mkdir(parents=True, exist_ok=True)
    seed_precedents(settings, console)
    with contextlib.ExitStack() as stack:
        if bootstrap is None:
            bootstrap = stack.enter_context(embedded_broker(log=workdir / "broker.log"))
            console.print(f"embedded broker (Tansu) on {bootstrap}")
            settings = settings.model_copy(update=on_embedded(settings))  # no idempotence there: set, not probed
        settings = settings.model_copy(
            update={
                "kafka_bootstrap_servers": bootstrap,
                "app_id": f"{settings.app_id}-demo-{uuid.uuid4().hex[:6]}",
            }
        )
        asyncio.run(ensure_topics(settings))
        worker = WorkerProcess(settings, workdir / "worker.log")
        stack.push(worker)  # stopped on the way out, before the broker; pushed first, so an interrupt
        worker.start()  # between starting and pushing cannot leave it running
        console.print(
            f"worker started (backend: [bold]{settings.backend}[/]"
            + (", a labelled stand-in, not model judgement" if settings.backend == "offline" else "")
            + f"; log: {worker.log_path})"
        )
        started = time.monotonic()
        asyncio.run(produce(settings, events))
        console.print(f"produced {len(events)} events for {len(expected)} cases to disputes.events")
        verdicts, dead = asyncio.run(collect(settings, expected, console, timeout_s))
        elapsed = time.monotonic() - started
        missing = len(expected) - verdicts - dead
        console.print(f"[bold]{verdicts}[/] verdicts, {dead} dead letters, {missing} missing, in {elapsed:.1f}s")
        if not worker.alive():
            console.print(f"[red]the worker exited early; see {worker.log_path}[/]")
            return 1
    return 0 if missing == 0 and dead == 0 else 1
