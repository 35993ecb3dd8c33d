"""`cyberjurors worker`, `broker`, `topics` and `demo`: running the pipeline."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from ..llm import local_server

if TYPE_CHECKING:
    from ..config import Settings


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
    from ..kafka.producers import IdempotenceRefused
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
    from ..tooling.broker import BrokerError, start_broker

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
    from ..kafka.cluster import ensure_topics

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
    local_model: Annotated[
        bool,
        typer.Option(
            "--local-model",
            help="judge on SmolLM2-135M under llama-cpp-python's server, started here (`make llm-server` "
            "builds it): real model calls, no key, on a small court; plumbing, not judgement",
        ),
    ] = False,
    server_python: Annotated[
        Path, typer.Option(help="--local-model: the Python of the server's venv")
    ] = local_server.DEFAULT_PYTHON,
    settings: SettingsOption = None,
) -> None:
    """Embedded broker + one worker + the sample cases; prints each verdict as it arrives.

    Exit status: 0 when every case has a verdict, 1 otherwise; 130 / 143 on SIGINT / SIGTERM."""
    from ..tooling.demo import run_demo

    config = demo_places(load_settings(settings))
    if bootstrap is None:
        embedded_broker_ready()
    with contextlib.ExitStack() as running:
        if local_model:
            config = on_local_model(config, server_python, running)
        embedder_ready(config)
        with stopped_by_signals():
            code = run_demo(paths, config, console, timeout, bootstrap)
    raise typer.Exit(code)


# the court the local model sits as (a setting given in the environment or the settings file wins):
# 3 jurors, 1 round, stage II off, no round summary, one call at a time (the server answers one by
# one), short answers; about 4 calls a case (docs/benchmarks.md has the time per case)
LOCAL_COURT: dict[str, object] = {
    "jurors": 3,
    "rounds": 1,
    "max_select_steps": 0,
    "llm_concurrency": 1,
    "llm_timeout_s": 600,
}
LOCAL_SWITCHES: dict[str, object] = {"round_summary": False}  # pipeline_overrides
LOCAL_CALLS: dict[str, object] = {"max_output_tokens": 512}  # llm_roles' default entry


def local_court(config: Settings, base_url: str, model: str) -> Settings:
    """``config`` pointed at the local server, on the small court unless a setting says otherwise."""
    from ..config import RoleCall

    given = config.model_fields_set
    court = {k: v for k, v in LOCAL_COURT.items() if k not in given}
    switches = {k: v for k, v in LOCAL_SWITCHES.items() if getattr(config.pipeline_overrides, k) is None}
    default = config.llm_roles.get("default") or RoleCall()
    calls = {k: v for k, v in LOCAL_CALLS.items() if getattr(default, k) is None}
    return config.model_copy(
        update={
            **court,
            "pipeline_overrides": config.pipeline_overrides.model_copy(update=switches),
            "llm_roles": {**config.llm_roles, "default": default.model_copy(update=calls)},
            "llm_backend": "openai",
            "openai_base_url": base_url,
            "openai_api_key": "local",
            "model": model,
        }
    )


def demo_places(config: Settings) -> Settings:
    """The demo's media, Faust data and precedent base under the checkout, unless set in the environment."""
    places = {
        "media_root": ("CYBERJURORS_MEDIA_ROOT", Path("examples")),
        "datadir": ("CYBERJURORS_DATADIR", Path("data/demo/faust")),
        "precedent_dir": ("CYBERJURORS_PRECEDENT_DIR", Path("data/demo/precedents")),
    }
    return config.model_copy(update={k: p.resolve() for k, (env, p) in places.items() if env not in os.environ})


def on_local_model(config: Settings, python: Path, running: contextlib.ExitStack) -> Settings:
    """The local model server started (and stopped when ``running`` closes), and ``config`` on it."""
    log = Path("data/demo/local-model-server.log").resolve()
    try:
        server = running.enter_context(local_server.local_server(python, log=log))
    except local_server.LocalServerError as err:
        console.print(f"[red]no local model server:[/] {escape(err.detail)}", soft_wrap=True)
        raise typer.Exit(2) from err
    console.print(
        f"[bold]{server.model.name}[/] on llama-cpp-python's server at {server.base_url} (log: {log}): real "
        "model calls on this machine, no key. [bold yellow]A 135M model cannot judge: what it decides below "
        "is plumbing, not judgement.[/]",
        soft_wrap=True,
    )
    return local_court(config, server.base_url, server.model.name)
