"""`cyberjurors jury qualify`: the juror qualification gate."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Annotated

import typer

from ..config import Settings
from ..errors import for_people

if TYPE_CHECKING:
    pass


from .base import SettingsOption, _precedent_failure, _precedents_enabled, app, console, load_settings

jury_app = typer.Typer(no_args_is_help=True, help="The jury's personas: qualify them on mock cases.")
app.add_typer(jury_app, name="jury")
STANDING_TEXT = {
    "qualified": "qualified",
    "fails_accuracy": "fails accuracy",
    "fails_bias": "fails bias",
    "fails_both": "fails accuracy and bias",
}


@jury_app.command("qualify")
def jury_qualify(
    mode: Annotated[
        str | None,
        typer.Option(help="report, replace or reweight; default: the qualification setting, or replace when it is off"),
    ] = None,
    settings: SettingsOption = None,
) -> None:
    """Each persona decides K mock cases from the precedent base, alone; prints who qualifies and who
    would serve. The scores are cached beside the precedent base, where workers read them at start."""
    from rich.markup import escape

    from ..assembly import build_llm
    from ..jury.qualify import QualificationError
    from ..llm.port import LLMError
    from ..precedents.models import PrecedentError

    config = load_settings(settings)
    _precedents_enabled(config)
    mode = mode or (config.qualification if config.qualification != "off" else "replace")
    if mode not in ("report", "replace", "reweight"):
        console.print(f"[red]--mode {escape(mode)}:[/] expected report, replace or reweight")
        raise typer.Exit(2)
    config = config.model_copy(update={"qualification": mode})
    llm = build_llm(config)
    try:
        jury, qualifier = asyncio.run(_qualify(config, llm))
    except PrecedentError as err:
        raise _precedent_failure(err) from err
    except QualificationError as err:
        console.print(f"[red]cannot qualify:[/] {escape(str(err))}")
        raise typer.Exit(2) from err
    except LLMError as err:
        console.print(
            f"[red]a mock ballot failed ({err.kind}):[/] {escape(for_people(err))}; the scores so far "
            "are cached, run it again"
        )
        raise typer.Exit(1) from err
    _print_qualification(config, llm.backend, jury, qualifier)


async def _qualify(config: Settings, llm):
    from ..jury.qualify import qualified_jury
    from ..precedents.base import opened_base

    async with opened_base(config, create=False) as (index, _), contextlib.aclosing(llm):
        return await qualified_jury(config, llm, index)


def _score_cells(score) -> list[str]:
    cases = score.buyer_cases + score.seller_cases
    return [
        f"{score.buyer_correct + score.seller_correct}/{cases} ({100 * score.accuracy:.0f}%)",
        f"{100 * score.seller_share:.0f}%",
        f"{score.bias:+.2f}",
        STANDING_TEXT[score.standing],
    ]


def _print_qualification(config: Settings, backend: str, jury, qualifier) -> None:
    from rich.table import Table

    from ..evaluation.report import STAND_IN_BACKENDS

    stand_in = backend in STAND_IN_BACKENDS
    if stand_in:
        console.print(f"[bold yellow]⚠ {backend} stand-in: these scores measure the plumbing, not model judgement[/]")
    composition, mode = jury.composition, config.qualification
    table = Table(
        title=f"juror qualification ({backend}{' stand-in' if stand_in else ''}, mode {mode})",
        title_justify="left",
        caption=f"{len(qualifier.mock)} mock cases ({composition.mock_cases[0]} …), "
        f"{sum(c.winner == 'seller' for c in qualifier.mock)} won by the seller; qualified: accuracy ≥ "
        f"{config.qualification_gate.min_accuracy:g} and |seller share − labelled share| ≤ "
        f"{config.qualification_gate.max_bias:g}; {qualifier.calls_saved} mock ballots read from the cache",
        caption_justify="left",
    )
    for header in ("seat", "persona", "model", "accuracy", "seller share", "bias", "verdict", "serves"):
        table.add_column(header, justify="right" if header in ("seat", "accuracy", "seller share", "bias") else "left")
    seated = set()
    for seat in composition.seats:
        first = seat.replaced or seat.score
        serves = (
            "yes"
            if first.qualified or mode == "report"
            else f"weight {seat.weight:.2f}"
            if mode == "reweight"
            else f"replaced by {seat.persona}"
            if seat.replaced
            else "yes: no qualified reserve left"
        )
        table.add_row(str(seat.seat), first.persona, first.model, *_score_cells(first), serves)
        seated |= {seat.persona, first.persona}
    for score in qualifier.tried:  # the reserves scored for a seat, in the order they were tried
        if score.persona not in seated or any(s.replaced and s.persona == score.persona for s in composition.seats):
            took = next((s.seat for s in composition.seats if s.replaced and s.persona == score.persona), None)
            table.add_row(
                "reserve",
                score.persona,
                score.model,
                *_score_cells(score),
                f"seat {took}" if took is not None else "no",
            )
    console.print(table)
