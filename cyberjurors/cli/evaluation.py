"""`cyberjurors eval`, `synth` and `dataset`: evaluation on labelled cases."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..config import Settings

if TYPE_CHECKING:
    pass


from ..observability.progress import bar as progress_bar
from .base import SettingsOption, app, console, embedded_broker_ready, embedder_ready, load_settings, stopped_by_signals

dataset_app = typer.Typer(no_args_is_help=True, help="Labelled datasets: split them, convert VerdictBench.")
app.add_typer(dataset_app, name="dataset")


def _dataset(path: Path):
    from rich.markup import escape

    from ..evaluation.dataset import DatasetError, load_dataset

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
            "juror_models; courts = each court of court_policy on every case (with the paper's court as the "
            "reference), reported per court; default: the settings as given"
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

    from ..errors import StoreError
    from ..evaluation.ladder import select
    from ..evaluation.runner import run_eval, unusable_out
    from ..evaluation.runs import EvalError, Options

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
    except StoreError as err:
        console.print(f"[red]unusable batch store:[/] {escape(str(err))}")
        raise typer.Exit(2) from err
    if _print_reports(reports, out, max_failures):
        raise typer.Exit(1)


def _print_reports(reports: list[Any], out: Path, max_failures: int) -> bool:
    """The reports, written and shown; True when an ablation lost more cases than ``max_failures``."""
    from rich.markup import escape

    from ..evaluation import report, report_files
    from ..evaluation.swap import is_swapped

    for done in reports:
        console.print(report.render(done))
    if len(reports) > 1:
        console.print(report.render_ladder(reports))
    json_path, md_path = report_files.write(reports, out)
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
    from ..precedents.build import built_case_ids
    from ..tooling.demo import seed_precedents

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
    cases: Annotated[int, typer.Option(min=1, help="cases to make")] = 100,
    seed: Annotated[int, typer.Option(help="the same seed makes the same cases")] = 0,
    seller_share: Annotated[float, typer.Option(min=0, max=1, help="share of cases planted for the seller")] = 0.626,
    clip_frames: Annotated[
        tuple[int, int] | None,
        typer.Option(help="MIN MAX frames per clip: long clips of several shots, the clue anywhere (default: 30-45)"),
    ] = None,
    clue_frames: Annotated[tuple[int, int], typer.Option(help="MIN MAX frames the video clue lasts")] = (2, 4),
) -> None:
    """Generate a SYNTHETIC benchmark: multimodal cases with a planted decisive clue and noisy jury votes."""
    from rich.markup import escape

    from ..evaluation.synth import SynthError, generate

    with progress_bar(console, "[bold]synth") as progress:
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
    seed: Annotated[int, typer.Option(help="the same seed makes the same split")] = 0,
    ratios: Annotated[str, typer.Option(help="train:val:test")] = "3:1:2",
) -> None:
    """Stratified split by category x difficulty band (vote margin), 3:1:2 as in VerdictBench."""
    from ..evaluation.dataset import write_split

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

    from ..evaluation.dataset import DatasetError
    from ..evaluation.verdictbench import convert_verdictbench

    try:
        counts = convert_verdictbench(source, out)
    except (DatasetError, OSError) as err:
        console.print(f"[red]not converted:[/] {escape(str(err))}")
        raise typer.Exit(2) from err
    console.print(f"converted {counts} into {out}")
