"""The embedded precedent index at 1k, 10k and 100k documents: build throughput, search latency,
memory and disk.

Documents are synthetic precedents (``tests/precedent_data.py``: cases and guidelines mixed, ~1 in
10 a guideline). Vectors come from the real embedding model for the first ``--real`` documents;
larger sizes reuse those vectors with a little noise (renormalised), which costs the index the
same as real ones but avoids hours of CPU embedding. Search latency is measured on the case part
(hybrid, k=10) over ``--queries`` new-dispute texts, without and with a category filter; the query
embedding is timed separately (the index caches recent query vectors, so the timed searches are
retrieval only), and the end-to-end figure adds the two per query.

Run: .venv/bin/python bench/precedent_search.py [--sizes 1000,10000,100000] [--queries 200] [--real 10000]
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import sys
import tempfile
from pathlib import Path

import bm25s
import typer

from harness import clocked, make_console, pct_ms, peak_rss_mb, table, timed
from precedent_corpus import Precomputed, embed_documents

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cyberjurors.precedents.embedded import STEMMER_NAME, EmbeddedIndex
from cyberjurors.precedents.embeddings import load_embedder
from cyberjurors.precedents.models import Document
from tests import precedent_data

console = make_console(200)


def rss_mb() -> float:
    return peak_rss_mb("self", "VmRSS")


def disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) / 2**20


async def timed_searches(
    index: EmbeddedIndex, queries: list[tuple[str, str]], filtered: bool, mode: str = "hybrid"
) -> list[float]:
    took = []
    for text, category in queries:
        seconds, hits = await timed(
            index.search(text, kind="case", category=category if filtered else None, k=10, mode=mode)
        )  # type: ignore[arg-type]
        took.append(seconds)
        assert hits or mode == "bm25"
    return took


async def measure(
    size: int,
    docs: list[Document],
    embedder: Precomputed,
    queries: list[tuple[str, str]],
    embed_s: list[float],
    work: Path,
) -> dict[str, float]:
    folder = work / f"idx-{size}"
    gc.collect()
    rss_before = rss_mb()
    index = await EmbeddedIndex.open(folder, embedder)

    upsert_s, report = await timed(index.upsert(docs))
    assert not report.failed, list(report.failed.items())[:3]
    bm25_build_s, _ = await timed(index.search("warm up the bm25 part", kind="case", k=10))
    for text, _ in queries:  # fill the query-vector cache, so the timed searches are retrieval only
        await asyncio.to_thread(index.query_vector, " ".join(text.split()))
    await timed_searches(index, queries[:20], filtered=False)

    out = {
        "size": size,
        "cases": await index.count("case"),
        "guidelines": sum(d.kind == "guideline" for d in docs),
        "upsert_s": upsert_s,
        "bm25_build_s": bm25_build_s,
        "index_rate": size / (upsert_s + bm25_build_s),
    }
    plain = await timed_searches(index, queries, filtered=False)
    filtered = await timed_searches(index, queries, filtered=True)
    bm25_only = await timed_searches(index, queries, filtered=True, mode="bm25")
    vector_only = await timed_searches(index, queries, filtered=True, mode="vector")
    e2e = [a + b for a, b in zip(embed_s, filtered, strict=False)]
    out.update(
        p50=pct_ms(plain, 50),
        p95=pct_ms(plain, 95),
        fp50=pct_ms(filtered, 50),
        fp95=pct_ms(filtered, 95),
        bm25_p95=pct_ms(bm25_only, 95),
        vector_p95=pct_ms(vector_only, 95),
        e2e_p50=pct_ms(e2e, 50),
        e2e_p95=pct_ms(e2e, 95),
    )

    # one confirmed outcome arriving: a single upsert (rewrites the case files), then the next
    # search rebuilds the case part's BM25
    extra = (
        docs[0].model_copy(update={"id": "case:bench-extra"})
        if docs[0].kind == "case"
        else next(d for d in docs if d.kind == "case").model_copy(update={"id": "case:bench-extra"})
    )
    out["single_upsert_s"], _ = await timed(index.upsert([extra]))
    out["rebuild_search_s"], _ = await timed(index.search(queries[0][0], kind="case", k=10))

    out["rss_mb"] = rss_mb()
    out["index_mb"] = out["rss_mb"] - rss_before
    out["disk_mb"] = disk_mb(folder)
    await index.close()
    del index
    gc.collect()

    out["open_s"], reopened = await timed(EmbeddedIndex.open(folder, embedder, create=False))
    await reopened.close()
    shutil.rmtree(folder)
    return out


def main(
    sizes: str = typer.Option("1000,10000,100000", help="index sizes, comma-separated"),
    queries: int = typer.Option(200, help="search queries per measurement"),
    real: int = typer.Option(
        10_000, help="documents embedded by the real model; larger sizes reuse these vectors with noise"
    ),
) -> None:
    wanted = sorted(int(s) for s in sizes.split(","))
    load_s, model = clocked(load_embedder)
    console.print(
        f"model {model.name}: {model.dims} dims, loaded in {load_s:.1f} s; {os.cpu_count()} CPUs; "
        f"bm25s {bm25s.__version__}, stemmer: {STEMMER_NAME or 'none (PyStemmer not installed)'}"
    )
    took, docs = clocked(precedent_data.documents, wanted[-1])
    console.print(f"generated {wanted[-1]} synthetic documents in {took:.1f} s")
    vectors, embed_rates = embed_documents(model, docs, wanted, real, console)
    qs = precedent_data.queries(queries)
    embed_s = [clocked(model.encode, [" ".join(text.split())])[0] for text, _ in qs]
    console.print(
        f"query embedding (real model, 1 text): p50 {pct_ms(embed_s, 50):.1f} ms, p95 {pct_ms(embed_s, 95):.1f} ms"
    )
    embedder = Precomputed(model, vectors)
    work = Path(tempfile.mkdtemp(prefix="cj-precedents-"))
    results = []
    try:
        for size in wanted:
            console.print(f"measuring {size} documents ...")
            results.append(asyncio.run(measure(size, docs[:size], embedder, qs, embed_s, work)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_tables(results, embed_rates, queries)


def print_tables(results: list[dict[str, float]], embed_rates: dict[int, float], queries: int) -> None:
    build = table(
        "embedded index: build, write and open (2 parts: cases, guidelines)",
        (
            "docs",
            "cases / guidelines",
            "embed docs/s",
            "index docs/s",
            "upsert s",
            "BM25 build s",
            "1-doc upsert s",
            "next search s",
            "open s",
            "RSS MB (index)",
            "disk MB",
        ),
    )
    for r in results:
        rate = embed_rates.get(int(r["size"]))
        build.add_row(
            f"{int(r['size']):,}",
            f"{int(r['cases']):,} / {int(r['guidelines']):,}",
            f"{rate:.0f}" if rate else "n/a (reused)",
            f"{r['index_rate']:,.0f}",
            f"{r['upsert_s']:.2f}",
            f"{r['bm25_build_s']:.2f}",
            f"{r['single_upsert_s']:.3f}",
            f"{r['rebuild_search_s']:.3f}",
            f"{r['open_s']:.2f}",
            f"{r['rss_mb']:.0f} ({r['index_mb']:+.0f})",
            f"{r['disk_mb']:.1f}",
        )
    console.print(build)
    search = table(
        f"case search, k=10, {queries} queries: latency ms (retrieval only unless marked)",
        (
            "docs",
            "hybrid p50",
            "hybrid p95",
            "+category p50",
            "+category p95",
            "bm25 p95",
            "vector p95",
            "with query embedding p50",
            "with query embedding p95",
        ),
    )
    for r in results:
        search.add_row(
            f"{int(r['size']):,}",
            *(f"{r[c]:.1f}" for c in ("p50", "p95", "fp50", "fp95", "bm25_p95", "vector_p95", "e2e_p50", "e2e_p95")),
        )
    console.print(search)
    console.print(
        "index docs/s = documents / (upsert + first BM25 build), vectors given; 1-doc upsert = one "
        "more case (rewrites the case files); next search = the search after it, which rebuilds the "
        "case part's BM25; open = reopen from disk (checksums, tokenising, BM25). RSS is the whole "
        "process (model and the generated documents included); in brackets the growth while "
        "building that index. 'with query embedding' adds the model's time for the query (category "
        "filter on)."
    )


if __name__ == "__main__":
    typer.run(main)
