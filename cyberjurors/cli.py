"""The ``cyberjurors`` command line. Configuration comes from env vars or ``--settings FILE`` (TOML)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import Annotated, Optional

import typer
from pydantic import ValidationError
from rich.console import Console

from .config import SETTINGS_FILE_ENV, Settings

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
schemas_app = typer.Typer(no_args_is_help=True, help="JSON Schema of the public events.")
app.add_typer(schemas_app, name="schemas")
console = Console()
SettingsOption = Annotated[Optional[Path], typer.Option("--settings", help="TOML settings file", exists=True)]


def load_settings(path: Path | None, **overrides: object) -> Settings:
    if path is not None:
        os.environ[SETTINGS_FILE_ENV] = str(path)
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except (ValidationError, ValueError) as err:
        console.print(f"[red]invalid settings:[/] {err}")
        raise typer.Exit(2) from err


@app.command()
def worker(settings: SettingsOption = None, loglevel: str = "info") -> None:
    """Run a Faust worker for the jury pipeline against KAFKA_BOOTSTRAP_SERVERS."""
    from .streams.worker import run_worker

    run_worker(load_settings(settings), loglevel)


@app.command("produce")
def produce_cmd(paths: Annotated[list[Path], typer.Argument(help="case/event .json, events .jsonl, or folders")],
                settings: SettingsOption = None) -> None:
    """Validate and send cases or events to disputes.events (key = case_id)."""
    from .streams.clients import InputError, produce, read_events

    config = load_settings(settings)
    try:
        events = read_events(paths)
    except InputError as err:
        console.print(f"[red]not sent:[/] {err}")
        raise typer.Exit(2) from err
    asyncio.run(produce(config, events))
    console.print(f"sent {len(events)} events for {len({e.case_id for e in events})} cases "
                  f"to {config.topic('disputes.events')}")


@app.command()
def verdicts(follow: Annotated[bool, typer.Option("--follow/--no-follow", help="keep waiting for new ones")] = False,
             raw: Annotated[bool, typer.Option(help="print JSON lines")] = False,
             settings: SettingsOption = None) -> None:
    """Print the verdict topic from the beginning."""
    from .schemas import Verdict
    from .streams.clients import follow as read
    from .streams.demo import verdict_table

    config = load_settings(settings)

    async def run() -> None:
        async for _, value in read(config, "disputes.verdicts", follow=follow):
            if raw:
                print(value.decode())
            else:
                console.print(verdict_table(Verdict.model_validate_json(value)))

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass


@app.command()
def dlq(replay: Annotated[bool, typer.Option(help="send the selected letters back to the topics they came from")] = False,
        reason: Annotated[Optional[str], typer.Option(help="only letters with this reason")] = None,
        stage: Annotated[Optional[str], typer.Option(help="only letters from this stage")] = None,
        case: Annotated[Optional[str], typer.Option(help="only letters for this case_id")] = None,
        settings: SettingsOption = None) -> None:
    """List dead letters; with --replay, resend the replayable ones (failed model calls, stage failures).

    Stages are idempotent, so replaying a letter twice costs nothing but a re-sent output."""
    from rich.markup import escape

    from .streams.clients import dead_letters, replayable
    from .streams.clients import replay as resend

    config = load_settings(settings)
    letters = [x for x in asyncio.run(dead_letters(config))
               if reason in (None, x.reason) and stage in (None, x.stage) and case in (None, x.key)]
    for x in letters:
        mark = "[green]replayable[/]" if replayable(x) else "[dim]final[/]"
        console.print(f"{x.failed_at:%Y-%m-%d %H:%M:%S} {escape(x.key or '-')} {x.stage} {x.reason} {mark}: "
                      f"{escape(x.detail[:200])}")
    console.print(f"{len(letters)} dead letters")
    if replay:
        chosen = [x for x in letters if replayable(x)]
        asyncio.run(resend(config, chosen))
        console.print(f"replayed {len(chosen)}; left {len(letters) - len(chosen)} that would fail the same way")


@app.command()
def broker(port: int = 9092, host: str = "127.0.0.1") -> None:
    """Run the embedded Kafka-protocol broker (Tansu, in memory) in the foreground."""
    from .streams.broker import start_broker

    process, bootstrap = start_broker(port, host)
    console.print(f"embedded broker listening on {bootstrap} (in-memory; Ctrl-C stops it)")
    signal.signal(signal.SIGTERM, lambda *_: process.terminate())
    try:
        process.wait()
    except KeyboardInterrupt:
        process.terminate()
        process.wait()


@app.command()
def topics(settings: SettingsOption = None) -> None:
    """Create every pipeline topic with the configured partition count (idempotent)."""
    from .streams.kafka import ensure_topics

    created = asyncio.run(ensure_topics(load_settings(settings)))
    console.print(f"created: {', '.join(created)}" if created else "all topics exist")


@app.command()
def demo(paths: Annotated[list[Path], typer.Argument()] = [Path("examples/cases"), Path("examples/incremental")],  # noqa: B006
         timeout: float = 600, bootstrap: Optional[str] = None, settings: SettingsOption = None) -> None:
    """Embedded broker + one worker + the sample cases; prints each verdict as it arrives."""
    from .streams.demo import run_demo

    config = load_settings(settings)
    if "CYBERJURORS_MEDIA_ROOT" not in os.environ:
        config = config.model_copy(update={"media_root": Path("examples").resolve()})
    if "CYBERJURORS_DATADIR" not in os.environ:
        config = config.model_copy(update={"datadir": Path("data/demo/faust").resolve()})
    raise typer.Exit(run_demo(paths, config, console, timeout, bootstrap))


@schemas_app.command("export")
def schemas_export(out: Annotated[Path, typer.Argument(help="folder for the .schema.json files")] = Path("schemas")) -> None:
    """Write a JSON Schema for every public event, so producers in any language can validate."""
    from pydantic import TypeAdapter

    from .schemas import DeadLetter, DisputeCase, Verdict
    from .schemas.events import DisputeEvent

    out.mkdir(parents=True, exist_ok=True)
    models = {"dispute-event": TypeAdapter(DisputeEvent), "dispute-case": TypeAdapter(DisputeCase),
              "verdict": TypeAdapter(Verdict), "dead-letter": TypeAdapter(DeadLetter)}
    for name, adapter in models.items():
        path = out / f"{name}.schema.json"
        path.write_text(json.dumps(adapter.json_schema(), indent=2) + "\n")
        console.print(f"wrote {path}")
