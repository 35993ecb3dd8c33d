"""The ``cyberjurors`` command line. Configuration comes from env vars or ``--settings FILE`` (TOML)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from ..config import SETTINGS_FILE_ENV, Settings
from ..errors import for_people

if TYPE_CHECKING:
    pass


EXIT_BROKER_UNREACHABLE = 75  # EX_TEMPFAIL (sysexits.h), as the worker's exit when it loses its broker


def broker_unreachable(err: BaseException) -> BaseException | None:
    """The connection failure behind ``err`` (itself, its causes, an exception group's members) when
    it is that no Kafka broker could be reached; None for anything else."""
    from aiokafka.errors import KafkaConnectionError

    seen: set[int] = set()
    todo: list[BaseException | None] = [err]
    while todo:
        found = todo.pop()
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        if isinstance(found, KafkaConnectionError):
            return found
        todo += [found.__cause__, found.__context__, *getattr(found, "exceptions", ())]
    return None


class CommandLine(typer.Typer):
    """The root command. A Kafka that cannot be reached, from any command, is one line on stderr and
    exit status 75 (EX_TEMPFAIL: try again later), not the client library's traceback."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # the client library's own records go to the command's logging when it configures some (the
        # worker does); else they would print through logging's last resort beside the line below
        logging.getLogger("aiokafka").addHandler(logging.NullHandler())
        try:
            return super().__call__(*args, **kwargs)
        except Exception as err:
            cause = broker_unreachable(err)
            if cause is None:
                raise
            from rich.markup import escape

            Console(stderr=True).print(
                f"[red]Kafka unreachable:[/] {escape(for_people(cause))}. Check that the broker is up and that "
                "kafka_bootstrap_servers (KAFKA_BOOTSTRAP_SERVERS) names it",
                soft_wrap=True,
                highlight=False,
            )
            sys.exit(EXIT_BROKER_UNREACHABLE)


app = CommandLine(no_args_is_help=True, add_completion=False, help=__doc__)
console = Console()
if not console.is_terminal:  # a pipe or a log file: keep wide report tables readable
    console.width = 180
SettingsOption = Annotated[Path | None, typer.Option("--settings", "--config", help="TOML settings file", exists=True)]


@contextlib.contextmanager
def stopped_by_signals(resume_hint: str = "") -> Iterator[None]:
    """For commands that run an embedded broker and workers (demo, eval): SIGTERM does what Ctrl-C
    does, a KeyboardInterrupt in this process, inside asyncio.run after it has cancelled its task.
    The command's own clean-up then stops the worker and the broker (both are in their own sessions,
    so no terminal signal reaches them); a second signal while that waits kills them at once. Exit
    status 128 + the signal: 143 if a SIGTERM came, else 130."""
    received: list[int] = []

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        interrupt = signal.getsignal(signal.SIGINT)  # Python's default, or asyncio.run's while it runs
        if callable(interrupt):
            interrupt(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    installed = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_sigterm) if installed else None
    try:
        yield
    except KeyboardInterrupt:
        signum = signal.SIGTERM if received else signal.SIGINT
        console.print(
            f"[yellow]stopped by {signum.name}:[/] the worker and any embedded broker were shut down" + resume_hint
        )
        raise typer.Exit(128 + signum) from None
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous)


def _print_version(value: bool) -> None:
    if value:
        from .. import __version__

        print(f"cyberjurors {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Streaming e-commerce dispute verdicts by a simulated LLM jury."""


def load_settings(path: Path | None, **overrides: Any) -> Settings:
    if path is not None:
        os.environ[SETTINGS_FILE_ENV] = str(path)
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except (ValidationError, ValueError) as err:
        from rich.markup import escape

        console.print(f"[red]invalid settings:[/] {escape(for_people(err))}", soft_wrap=True)
        raise typer.Exit(2) from err


@contextlib.contextmanager
def traced(config: Settings, service: str) -> Iterator[None]:
    """Spans of the command exported when ``otlp_endpoint`` is set (sent before it returns)."""
    from ..observability.tracing import setup, shutdown

    provider = setup(config, service)
    try:
        yield
    finally:
        shutdown(provider)


def _when(text: str | None) -> datetime | None:
    """An ISO date or date-time; without a zone it is UTC."""
    if text is None:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError as err:
        raise typer.BadParameter(f"{text!r} is not an ISO date or date-time (2026-11-01, 2026-11-01T12:00Z)") from err
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def shown(text: str, limit: int = 80) -> str:
    """A producer-chosen key or detail as a terminal may print it: control characters (escape codes
    that clear or recolour the screen) written out, and at most ``limit`` characters."""
    from ..observability.logs import written_out

    safe = written_out(text)
    return safe if len(safe) <= limit else safe[: limit - 1] + "…"


PRECEDENT_HINTS = {
    "index_missing": "Build it first: cyberjurors precedents build examples/precedents (or your own decided cases).",
    "needs_migration": "Convert it once: cyberjurors precedents migrate (reads the old files, writes precedents.sqlite3 beside them).",
    "model_missing": "Run `cyberjurors embedder fetch`, or set CYBERJURORS_EMBEDDING__MODEL_DIR to the folder "
    "holding the model.",
    "unreachable": "Check ELASTICSEARCH_URL and that the cluster is up.",
}


def _precedent_failure(err: Exception) -> typer.Exit:
    """A PrecedentError as one red line plus what to do; exit code 2."""
    from rich.markup import escape

    kind = getattr(err, "kind", "error")
    console.print(f"[red]precedent base ({kind}):[/] {escape(str(err))}")
    if kind in PRECEDENT_HINTS:
        console.print(PRECEDENT_HINTS[kind])
    return typer.Exit(2)


def embedded_broker_ready() -> None:
    """The embedded broker's binary comes with the embedded extra: without it, one line."""
    from ..tooling.broker import BrokerError, tansu_binary

    try:
        tansu_binary()
    except BrokerError as err:
        from rich.markup import escape

        console.print(f"[red]no embedded broker:[/] {escape(str(err))}", soft_wrap=True)
        raise typer.Exit(2) from err


def embedder_ready(config: Settings) -> None:
    """A missing or altered embedding model refuses the start in one line (the worker would
    otherwise judge every case without precedents until someone read its readiness)."""
    if config.precedent_backend == "none" or config.embedding.runtime != "numpy":
        return
    from ..precedents.embeddings import default_model_dir, open_model
    from ..precedents.models import PrecedentError

    try:
        open_model(
            config.embedding.model_dir or default_model_dir(config.embedding.model),
            config.embedding.model,
            config.embedding.model_sha256,
        )
    except PrecedentError as err:
        from rich.markup import escape

        console.print(f"[red]embedding model ({err.kind}):[/] {escape(str(err))}", soft_wrap=True)
        raise typer.Exit(2) from err


def _precedents_enabled(config: Settings) -> None:
    if config.precedent_backend == "none":
        console.print(
            "[red]precedent_backend is 'none':[/] set CYBERJURORS_PRECEDENT_BACKEND to embedded "
            "(default) or elasticsearch"
        )
        raise typer.Exit(2)
    embedder_ready(config)
