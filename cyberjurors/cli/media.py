"""`cyberjurors media`: the content-addressed media store."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    pass


from .base import SettingsOption, app, console, load_settings

media_app = typer.Typer(no_args_is_help=True, help="The content-addressed media store (media_store).")
app.add_typer(media_app, name="media")


@media_app.command("sweep")
def media_sweep(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="count what would go, delete nothing")] = False,
    settings: SettingsOption = None,
) -> None:
    """Delete the media objects past media_retention_s (what a worker's timer does every
    media_sweep_interval_s); safe beside running workers and other sweeps."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from ..evidence.media_store import StoreError
    from ..evidence.stores import open_store

    config = load_settings(settings)
    try:
        store = open_store(config)
        with Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            TextColumn("{task.completed:,.0f}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            task = progress.add_task("would delete" if dry_run else "deleted", total=None)
            report = asyncio.run(store.sweep(dry_run=dry_run, progress=lambda n: progress.advance(task, n)))
    except StoreError as err:
        from rich.markup import escape

        console.print(f"[red]media store:[/] {escape(err.detail)}", highlight=False)
        raise typer.Exit(2 if err.kind == "unsupported" else 1) from err
    verb = "would delete" if dry_run else "deleted"
    days = (
        f" in {len(report.days)} expired day folder(s) ({report.days[0]} to {report.days[-1]})" if report.days else ""
    )
    console.print(
        f"{store.url}: {verb} {report.deleted} object(s), {report.bytes:,} bytes{days}; "
        f"objects are kept {config.media_retention:,.0f} s after their last put",
        markup=False,
        highlight=False,
    )
