"""`cyberjurors produce`, `verdicts`, `letters` and `dlq`: what goes onto the topics and what comes off them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..config import Settings

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ..tooling.clients import Placed


from .base import SettingsOption, _when, app, console, load_settings, shown, traced


@app.command("produce")
def produce_cmd(
    paths: Annotated[list[Path], typer.Argument(help="case/event .json, events .jsonl, or folders")],
    settings: SettingsOption = None,
    seal: Annotated[
        bool, typer.Option("--seal", help="seal each value under its case's key first (payload_encryption)")
    ] = False,
) -> None:
    """Validate and send cases or events to disputes.events, outcomes ({"type": "outcome", ...}) to
    disputes.outcomes, appeals ({"type": "appeal", ...}) to disputes.appeals (key = case_id)."""
    from rich.markup import escape

    from ..kafka.producers import IdempotenceRefused
    from ..tooling.clients import InputError, oversize, produce, read_events

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
        try:
            asyncio.run(produce(config, events, seal=seal))
        except InputError as err:  # --seal without payload_encryption
            console.print(f"[red]not sent:[/] {escape(str(err))}")
            raise typer.Exit(2) from err
        except IdempotenceRefused as err:  # kafka_idempotence=on against a broker that refuses it
            console.print(f"[red]not sent:[/] {escape(err.detail)}")
            raise typer.Exit(2) from err
    outcomes = [e for e in events if e.route == "disputes.outcomes"]
    appeals = [e for e in events if e.route == "disputes.appeals"]
    cases = [e for e in events if e.route is None]
    said = [f"{len(cases)} events for {len({e.case_id for e in cases})} cases to {config.topic('disputes.events')}"]
    if outcomes:
        said.append(f"{len(outcomes)} outcomes to {config.topic('disputes.outcomes')}")
    if appeals:
        said.append(f"{len(appeals)} appeals to {config.topic('disputes.appeals')}")
    console.print("sent " + " and ".join(said))


FollowOption = Annotated[bool, typer.Option("--follow/--no-follow", help="keep waiting for new ones")]
RawOption = Annotated[bool, typer.Option(help="print JSON lines")]


def print_topic(
    config: Settings, topic: str, shown: Callable[[bytes], RenderableType], follow: bool, raw: bool
) -> None:
    """Print a topic from the beginning: each record as ``shown`` renders it, with its trace id (when
    traced), or with ``raw`` as the JSON line it is; with ``follow``, until interrupted."""
    from ..observability.tracing import trace_id_of
    from ..tooling.clients import records

    async def run() -> None:
        async for record in records(config, topic, follow=follow):
            if raw:
                print(record.value.decode())
            else:
                console.print(shown(record.value))
                if trace_id := trace_id_of(record.headers):
                    console.print(f"trace {trace_id}")

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())


@app.command()
def verdicts(follow: FollowOption = False, raw: RawOption = False, settings: SettingsOption = None) -> None:
    """Print the verdict topic from the beginning, each verdict with its trace id (when traced)."""
    from ..schemas import Verdict
    from ..tooling.demo import verdict_table

    def shown(value: bytes) -> RenderableType:
        return verdict_table(Verdict.model_validate_json(value))

    print_topic(load_settings(settings), "disputes.verdicts", shown, follow, raw)


@app.command()
def letters(follow: FollowOption = False, raw: RawOption = False, settings: SettingsOption = None) -> None:
    """Print the letters topic from the beginning, each party's letter about a verdict as the party
    reads it (their own words in place of their placeholders), with its trace id (when traced)."""
    from ..schemas import PartyLetter
    from ..tooling.demo import letter_table

    def shown(value: bytes) -> RenderableType:
        return letter_table(PartyLetter.model_validate_json(value))

    print_topic(load_settings(settings), "disputes.letters", shown, follow, raw)


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
    stage: Annotated[str | None, typer.Option(help="only letters from this stage (rounds = every round-N)")] = None,
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
    from collections import Counter

    from rich.markup import escape

    from ..observability.metrics import RENAMED_STAGES
    from ..tooling.clients import LetterFilter, placed_letters, replay_state, replayable, replayed, replayed_originals

    for flag, given in (("--again", again), ("--final", final)):
        if given and not replay:
            console.print(f"[red]{flag} goes with --replay[/]")
            raise typer.Exit(2)
    if stage in RENAMED_STAGES:
        console.print(f"[red]stage {stage!r} is now {RENAMED_STAGES[stage]!r} (docs/renamed.md)[/]")
        raise typer.Exit(2)
    config = load_settings(settings)
    chosen = LetterFilter(since=_when(since), until=_when(until), reason=reason, stage=stage, case=case)
    left_out: Counter[str] = Counter()
    letters = [x for x in asyncio.run(placed_letters(config, left_out)) if chosen(x.letter)]
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
    if left_out:  # payload_encryption: sealed letters nothing opens hold nothing to list or replay
        why = ", ".join(f"{n} {reason}" for reason, n in sorted(left_out.items()))
        console.print(f"{left_out.total()} sealed letters left out, unreadable ({why})")
    if replay:
        _replay_letters(config, letters, again, final)


def _replay_letters(config: Settings, letters: list[Placed], again: bool, final: bool) -> None:
    import getpass

    from rich.markup import escape

    from ..tooling.clients import replay as resend

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
