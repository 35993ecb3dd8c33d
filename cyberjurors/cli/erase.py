"""`cyberjurors erase`: a case's data erased from every store the service owns (erasure/run.py;
docs/operations/data-rights.md)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from .base import SettingsOption, app, console, load_settings, shown

if TYPE_CHECKING:
    from ..config import Settings
    from ..erasure.run import ErasureStep, Report

# the schemas' CaseId: what a case id can be (events name parties only as buyer and seller, so there
# is no party id to erase by: a platform maps a person's request to the ids of their cases)
CASE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
EXIT = {"erased": 0, "nothing": 0, "refused": 3, "incomplete": 4}
STATE_STYLE = {"done": "green", "left": "red", "skipped": "dim", "kept": "yellow"}


@app.command("erase")
def erase(
    case: Annotated[
        list[str] | None, typer.Option("--case", help="a case id to erase (repeat for several)", show_default=False)
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="finish every erasure the journal holds open (left, or forced)")
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force", help="erase a case still in the pipeline too (it stays open until a resume finds it out)"
        ),
    ] = False,
    evaluation: Annotated[
        list[Path] | None,
        typer.Option(
            "--evaluation",
            help="an evaluation output folder to erase the case from as well (repeat for several)",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    wait: Annotated[
        float | None, typer.Option("--wait", help="seconds to wait for the worker's answer (erasure.wait_s)")
    ] = None,
    settings: SettingsOption = None,
) -> None:
    """Erase a case's data from every store the service owns: the workers' tables (tombstones on their
    changelogs) and its summary in other cases' stored results that retrieved it as a precedent, the
    case's media key and media objects, its dead letters' originals and replay notes,
    the console's store and audit trail (a record that a decision was made is kept, without personal
    data), the precedent base, the LLM call log and, when asked, evaluation outputs. Prints what was
    erased where and what is left; records each step in a journal (erasure.dir) and a log without
    personal data. A case still in the pipeline is refused unless --force. Exit status 0: erased (or
    nothing left); 3: refused; 4: something is left, recorded (finish it with --resume)."""
    ids = list(dict.fromkeys(case or []))
    if not ids and not resume:
        raise typer.BadParameter("name a case (--case ID), or --resume")
    bad = [i for i in ids if not CASE_ID.fullmatch(i)]
    if bad:
        raise typer.BadParameter(f"{shown(bad[0])} is not a case id (1-128 of A-Z a-z 0-9 . _ : -)")
    config = load_settings(settings)
    reports = asyncio.run(_erase(config, ids, resume, force, evaluation or [], wait))
    if resume and not reports:
        console.print("no erasure is open: nothing to resume")
    raise typer.Exit(max((EXIT[r.result] for _, r in reports), default=0))


async def _erase(
    config: Settings, ids: list[str], resume: bool, force: bool, evaluation: list[Path], wait: float | None
) -> list[tuple[str, Report]]:
    from ..erasure.journal import Journal
    from ..erasure.run import erase, resume_all

    given = given_steps()
    journal = Journal(config.erasure.dir)
    reports = []
    try:
        if resume:
            for case_id, report in await resume_all(config, journal, given, wait):
                show(case_id, report)
                reports.append((case_id, report))
        for case_id in ids:
            report = await erase(config, journal, case_id, force, wait, given, evaluation)
            show(case_id, report)
            reports.append((case_id, report))
    finally:
        journal.close()
    return reports


def given_steps() -> tuple[ErasureStep, ...]:
    """The steps of the rooms above the erasure's, which its run leaves to the command."""
    from ..console.erasure import ConsoleStep
    from ..evaluation.erasure import EvaluationStep

    return ConsoleStep(), EvaluationStep()


def show(case_id: str, report: Report) -> None:
    """The run as a table (each store: what was erased, what is left or kept), then one line saying
    how it ended."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"erase {escape(shown(case_id))} (reference {report.ref})", title_justify="left")
    for column in ("store", "state", "erased", "what is left, kept or skipped"):
        table.add_column(column, justify="right" if column == "erased" else "left", overflow="fold")
    for name, step in report.steps.items():
        style = STATE_STYLE[step.state]
        table.add_row(name, f"[{style}]{step.state}[/]", str(step.erased), escape(step.note))
    console.print(table)
    console.print(outcome(report), soft_wrap=True)


def outcome(report: Report) -> str:
    from rich.markup import escape

    before = ""
    if report.erased_before is not None:
        import time

        before = f" (erased before, on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(report.erased_before))})"
    if report.result == "refused":
        return (
            f"[red]refused:[/] the case is still in the pipeline ({escape(report.standing or '')}); nothing was "
            "erased. Erase it once its verdict is out, or now with --force"
        )
    if report.result == "incomplete":
        return (
            "[red]incomplete:[/] what is left is recorded in the journal; finish it with `cyberjurors erase --resume`"
        )
    if report.result == "nothing":
        return f"[green]nothing left:[/] no store reached holds anything of this case{before}"
    return "[green]erased[/] from every store reached; what the topics keep until their retention is listed above"
