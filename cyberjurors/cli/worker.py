"""`cyberjurors worker`, `broker`, `topics` and `demo`: running the pipeline."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    pass


from .base import (
    SettingsOption,
    app,
    console,
    embedded_broker_ready,
    embedder_ready,
    load_settings,
    stopped_by_signals,
)


@app.command()
def worker(
    settings: SettingsOption = None,
    loglevel: Annotated[str, typer.Option(help="debug, info, warning or error")] = "info",
) -> None:
    """Run a Faust worker for the jury pipeline against KAFKA_BOOTSTRAP_SERVERS."""
    from ..observability import logs

    config = load_settings(settings)
    embedder_ready(config)
    logs.configure(config, loglevel)  # before the imports below, so their warnings are formatted too
    from ..streams.producers import IdempotenceRefused
    from ..streams.worker import EXIT_CONFIG, run_worker

    try:
        run_worker(config, loglevel)
    except IdempotenceRefused as err:
        console.print(f"[red]worker not started:[/] {err.detail}")
        raise typer.Exit(EXIT_CONFIG) from err


@app.command()
def broker(
    port: Annotated[int, typer.Option(help="port to listen on")] = 9092,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
) -> None:
    """Run the embedded Kafka-protocol broker (Tansu, in memory) in the foreground."""
    from ..streams.broker import BrokerError, start_broker

    embedded_broker_ready()
    try:
        process, bootstrap = start_broker(port, host)
    except BrokerError as err:
        from rich.markup import escape

        console.print(f"[red]no embedded broker:[/] {escape(str(err))}", soft_wrap=True)
        raise typer.Exit(2) from err
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
    from ..streams.kafka import ensure_topics

    created = asyncio.run(ensure_topics(load_settings(settings)))
    console.print(f"created: {', '.join(created)}" if created else "all topics exist")


@app.command()
def demo(
    paths: Annotated[list[Path], typer.Argument(help="case/event .json, events .jsonl, or folders")] = [  # noqa: B006
        Path("examples/cases"),
        Path("examples/incremental"),
    ],
    timeout: Annotated[float, typer.Option(help="seconds without any new verdict before giving up")] = 600,
    bootstrap: Annotated[str | None, typer.Option(help="an external Kafka; default: an embedded broker")] = None,
    settings: SettingsOption = None,
) -> None:
    """Embedded broker + one worker + the sample cases; prints each verdict as it arrives.

    Exit status: 0 when every case has a verdict, 1 otherwise; 130 / 143 on SIGINT / SIGTERM."""
    from ..streams.demo import run_demo

    config = load_settings(settings)
    if "CYBERJURORS_MEDIA_ROOT" not in os.environ:
        config = config.model_copy(update={"media_root": Path("examples").resolve()})
    if "CYBERJURORS_DATADIR" not in os.environ:
        config = config.model_copy(update={"datadir": Path("data/demo/faust").resolve()})
    if "CYBERJURORS_PRECEDENT_DIR" not in os.environ:
        config = config.model_copy(update={"precedent_dir": Path("data/demo/precedents").resolve()})
    if bootstrap is None:
        embedded_broker_ready()
    embedder_ready(config)
    with stopped_by_signals():
        code = run_demo(paths, config, console, timeout, bootstrap)
    raise typer.Exit(code)
