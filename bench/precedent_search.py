"""The embedded precedent store (SQLite, ``precedents/embedded.py``) at 1k, 10k and 100k documents,
in one run: build, search latency, what a single upsert costs before the next search, memory, disk,
and (``--sustain``) an outcome stream absorbed while searching. (The runs dated in
docs/benchmarks.md set it beside the previous file store, removed since; ``--stores`` takes more
than one store again when a backend is added.)

Documents are synthetic precedents (``tests/precedent_data.py``: cases and guidelines mixed, ~1 in
10 a guideline). Vectors come from the real embedding model for the first ``--real`` documents;
larger sizes reuse those vectors with a little noise (renormalised), which costs the index the
same as real ones but avoids hours of CPU embedding. Search latency is measured on the case part
(hybrid, k=10) over ``--queries`` new-dispute texts, without and with a category filter; the query
embedding is timed separately (the stores cache recent query vectors, so the timed searches are
retrieval only), and the end-to-end figure adds the two per query. The stores are measured one
after the other at each size (interleaved by size), so machine noise hits both alike.

* single upsert + next search: one more case upserted, then a case search, ``--trials`` times
  medians and p95.
* memory: a fresh process opens the store (``precedent_memory.py``) and runs 50 searches; its RSS
  growth from before the open (the model already loaded) to after the searches.
* overlap@10 (with two stores): per query, how many of the first store's top-10 the second also returns
  (hybrid, bm25 and vector, with the category filter), as median and minimum.
* sustained learning (largest size only): one process (one event loop, as a worker) absorbs
  outcomes at ``--rates`` per second for ``--sustain`` seconds while it keeps searching: each
  outcome is what ``precedents/learning.py`` writes, a new case upserted, then the two guidelines
  it cited read and upserted at their next version; meanwhile it retrieves precedents for
  ``--search-rates`` cases a second (a case search, then a guideline search, category filter; 10 is
  several times what one of eight workers meets at a million cases a day; 0 = back to back).
  Rate 0 = as fast as it goes. Reported: outcomes/s absorbed, search p50/p95 meanwhile.

Run: .venv/bin/python bench/precedent_search.py [--sizes 1000,10000,100000] [--queries 200]
     [--real 10000] [--trials 30] [--sustain 20] [--rates 50,100,0] [--search-rates 10,0]
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import tantivy
import typer
import usearch

from harness import clocked, make_console, pct_ms, table, timed
from precedent_corpus import Precomputed, embed_documents

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.embeddings import load_embedder
from cyberjurors.precedents.models import Document
from tests import precedent_data

console = make_console(220)
STORES: dict[str, Any] = {"sqlite": EmbeddedIndex}  # the previous store was removed with issue 41
HERE = Path(__file__).resolve().parent


def disk_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


async def timed_searches(
    index: Any, queries: list[tuple[str, str]], filtered: bool, mode: str = "hybrid", k: int = 10
) -> tuple[list[float], list[list[str]]]:
    took, found = [], []
    for text, category in queries:
        seconds, hits = await timed(
            index.search(text, kind="case", category=category if filtered else None, k=k, mode=mode)
        )
        took.append(seconds)
        found.append([h.id for h in hits])
        assert hits or mode == "bm25"
    return took, found


def extra_case(docs: list[Document], i: int) -> Document:
    """A new case (same text as an existing one, so its vector is at hand)."""
    cases = [d for d in docs[:200] if d.kind == "case"]
    return cases[i % len(cases)].model_copy(update={"id": f"case:bench-extra-{i}"})


async def measure(
    name: str, size: int, docs: list[Document], embedder: Precomputed, queries: list[tuple[str, str]], options: dict
) -> dict[str, Any]:
    store = STORES[name]
    folder = options["work"] / f"{name}-{size}"
    index = await store.open(folder, embedder)
    upsert_s, report = await timed(index.upsert(docs))
    assert not report.failed, list(report.failed.items())[:3]
    first_search_s, _ = await timed(index.search("warm up the bm25 part", kind="case", k=10))
    for text, _ in queries:  # fill the query-vector cache, so the timed searches are retrieval only
        await asyncio.to_thread(index.query_vector, " ".join(text.split()))
    await timed_searches(index, queries[:20], filtered=False)

    out: dict[str, Any] = {
        "store": name,
        "size": size,
        "cases": await index.count("case"),
        "upsert_s": upsert_s,
        "first_search_s": first_search_s,
        "index_rate": size / (upsert_s + first_search_s),
    }
    plain, _ = await timed_searches(index, queries, filtered=False)
    filtered, top_hybrid = await timed_searches(index, queries, filtered=True)
    bm25_only, top_bm25 = await timed_searches(index, queries, filtered=True, mode="bm25")
    vector_only, top_vector = await timed_searches(index, queries, filtered=True, mode="vector")
    e2e = [a + b for a, b in zip(options["embed_s"], filtered, strict=False)]
    out.update(
        p50=pct_ms(plain, 50),
        p95=pct_ms(plain, 95),
        fp50=pct_ms(filtered, 50),
        fp95=pct_ms(filtered, 95),
        bm25_p95=pct_ms(bm25_only, 95),
        vector_p95=pct_ms(vector_only, 95),
        e2e_p50=pct_ms(e2e, 50),
        e2e_p95=pct_ms(e2e, 95),
        top={"hybrid": top_hybrid, "bm25": top_bm25, "vector": top_vector},
    )

    # one confirmed outcome arriving: a single upsert, then the next search
    trials = options["trials"]
    upserts, nexts = [], []
    for i in range(trials):
        up, _ = await timed(index.upsert([extra_case(docs, i)]))
        nxt, _ = await timed(index.search(queries[i % len(queries)][0], kind="case", k=10))
        upserts.append(up)
        nexts.append(nxt)
    out.update(
        single_upsert_ms=pct_ms(upserts, 50),
        next_search_ms=pct_ms(nexts, 50),
        upsert_and_search_p50=pct_ms([a + b for a, b in zip(upserts, nexts, strict=True)], 50),
        upsert_and_search_p95=pct_ms([a + b for a, b in zip(upserts, nexts, strict=True)], 95),
        trials=trials,
    )
    if options["sustain"] and size == options["largest"]:
        rates = options["rates"] if name == "sqlite" else [0.0]
        out["sustained"] = [
            await sustained(index, docs, queries, rate, pace, options["sustain"])
            for pace in options["search_rates"]
            for rate in rates
        ]
    await index.close()
    del index
    gc.collect()
    out["disk_mb"] = disk_mb(folder)
    out.update(open_memory(name, folder))
    shutil.rmtree(folder)
    return out


def open_memory(name: str, folder: Path) -> dict[str, float]:
    """Open the store in a fresh process and run searches there: the RSS it grows by, the open time."""
    done = subprocess.run(
        [sys.executable, str(HERE / "precedent_memory.py"), name, str(folder)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"precedent_memory.py {name} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


async def sustained(
    index: Any, docs: list[Document], queries: list[tuple[str, str]], rate: float, pace: float, seconds: float
) -> dict[str, float]:
    """Outcomes at ``rate`` a second (0: unpaced) while the same process retrieves precedents for
    ``pace`` cases a second (0: back to back), each a case search and a guideline search."""
    guidelines = [d for d in docs if d.kind == "guideline" and d.guideline is not None and d.guideline.active]
    stop = time.perf_counter() + seconds
    done = 0
    searches: list[float] = []
    started = time.perf_counter()

    async def outcomes() -> None:
        nonlocal done
        i = 0
        while time.perf_counter() < stop:
            if rate:
                due = started + i / rate
                if due > time.perf_counter():
                    await asyncio.sleep(due - time.perf_counter())
            case = extra_case(docs, 10_000 + i)
            await index.upsert([case.model_copy(update={"id": f"case:outcome-{rate}-{pace}-{i}"})])
            cited = [guidelines[(2 * i) % len(guidelines)].id, guidelines[(2 * i + 1) % len(guidelines)].id]
            changed = []
            for doc in await index.get(cited):
                g = doc.guideline
                assert g is not None
                changed.append(
                    Document.of_guideline(
                        g.model_copy(update={"version": g.version + 1, "confidence": min(1.0, g.confidence + 0.01)})
                    )
                )
            await index.upsert(changed)
            done += 1
            i += 1

    async def searching() -> None:
        j = 0
        while time.perf_counter() < stop:
            if pace:
                due = started + j / pace
                if due > time.perf_counter():
                    await asyncio.sleep(due - time.perf_counter())
            text, category = queries[j % len(queries)]
            took, _ = await timed(index.search(text, kind="case", category=category, k=5))
            took2, _ = await timed(index.search(text, kind="guideline", category=category, k=12))
            searches.extend((took, took2))
            j += 1

    await asyncio.gather(outcomes(), searching())
    elapsed = time.perf_counter() - started
    return {
        "rate": rate,
        "pace": pace,
        "absorbed": done / elapsed,
        "outcomes": done,
        "seconds": elapsed,
        "searches": len(searches),
        "search_p50": pct_ms(searches, 50) if searches else float("nan"),
        "search_p95": pct_ms(searches, 95) if searches else float("nan"),
    }


def overlap(old: list[list[str]], new: list[list[str]], k: int = 10) -> list[float]:
    return [len(set(a[:k]) & set(b[:k])) / max(1, min(k, len(a))) for a, b in zip(old, new, strict=True)]


def main(
    sizes: str = typer.Option("1000,10000,100000", help="index sizes, comma-separated"),
    queries: int = typer.Option(200, help="search queries per measurement"),
    real: int = typer.Option(
        10_000, help="documents embedded by the real model; larger sizes reuse these vectors with noise"
    ),
    trials: int = typer.Option(30, help="single upserts (each followed by a search) on the SQLite store"),
    sustain: float = typer.Option(20.0, help="seconds of each sustained-learning run at the largest size; 0: none"),
    rates: str = typer.Option("50,100,0", help="outcomes a second for the sustained runs (0: unpaced)"),
    search_rates: str = typer.Option(
        "10,0", help="cases a second retrieved for meanwhile (a case search + a guideline search each; 0: back to back)"
    ),
    stores: str = typer.Option("sqlite", help="which stores, comma-separated"),
) -> None:
    wanted = sorted(int(s) for s in sizes.split(","))
    names = [s for s in stores.split(",") if s]
    load_s, model = clocked(load_embedder)
    console.print(
        f"model {model.name}: {model.dims} dims, loaded in {load_s:.1f} s; {os.cpu_count()} CPUs; load "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; tantivy {tantivy.__version__}, usearch "
        f"{usearch.__version__}"
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
    options = {
        "work": work,
        "embed_s": embed_s,
        "trials": trials,
        "sustain": sustain,
        "rates": [float(r) for r in rates.split(",") if r],
        "search_rates": [float(r) for r in search_rates.split(",") if r],
        "largest": wanted[-1],
    }
    results: list[dict[str, Any]] = []
    try:
        for size in wanted:
            for name in names:
                console.print(f"measuring the {name} store at {size} documents ...")
                results.append(asyncio.run(measure(name, size, docs[:size], embedder, qs, options)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print_tables(results, embed_rates, queries)


def print_tables(results: list[dict[str, Any]], embed_rates: dict[int, float], queries: int) -> None:
    build = table(
        "build, write, open, memory and disk (2 parts: cases, guidelines)",
        (
            "store",
            "docs",
            "embed docs/s",
            "index docs/s",
            "upsert s",
            "first search s",
            "1-doc upsert ms",
            "next search ms",
            "upsert + search p50 ms",
            "p95 ms",
            "open s",
            "RSS MB after open",
            "disk MB",
        ),
        left=("store",),
    )
    for r in results:
        rate = embed_rates.get(int(r["size"]))
        build.add_row(
            r["store"],
            f"{int(r['size']):,}",
            f"{rate:.0f}" if rate else "n/a (reused)",
            f"{r['index_rate']:,.0f}",
            f"{r['upsert_s']:.2f}",
            f"{r['first_search_s']:.2f}",
            f"{r['single_upsert_ms']:.1f}",
            f"{r['next_search_ms']:.1f}",
            f"{r['upsert_and_search_p50']:.1f}",
            f"{r['upsert_and_search_p95']:.1f} (n={r['trials']})",
            f"{r['open_s']:.2f}",
            f"+{r['rss_growth_mb']:.0f}",
            f"{r['disk_mb']:.1f}",
        )
    console.print(build)
    search = table(
        f"case search, k=10, {queries} queries: latency ms (retrieval only unless marked)",
        (
            "store",
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
        left=("store",),
    )
    for r in results:
        search.add_row(
            r["store"],
            f"{int(r['size']):,}",
            *(f"{r[c]:.1f}" for c in ("p50", "p95", "fp50", "fp95", "bm25_p95", "vector_p95", "e2e_p50", "e2e_p95")),
        )
    console.print(search)
    by = {(r["store"], r["size"]): r for r in results}
    names = list(dict.fromkeys(r["store"] for r in results))
    agree = table(
        f"overlap@10 of the second store's top-10 with the first's ({', '.join(names)}), per query (category filter on)",
        ("docs", "hybrid median", "hybrid min", "bm25 median", "bm25 min", "vector median", "vector min"),
    )
    for size in sorted({r["size"] for r in results}):
        if len(names) == 2 and all((n, size) in by for n in names):
            cells = []
            for mode in ("hybrid", "bm25", "vector"):
                o = overlap(by[(names[0], size)]["top"][mode], by[(names[1], size)]["top"][mode])
                cells += [f"{np.median(o):.2f}", f"{min(o):.2f}"]
            agree.add_row(f"{size:,}", *cells)
    console.print(agree)
    sustained = [(r["store"], r["size"], s) for r in results for s in r.get("sustained", [])]
    if sustained:
        learn = table(
            "sustained learning: one process absorbing outcomes (1 case + 2 guideline versions each) while searching",
            (
                "store",
                "docs",
                "cases searched /s",
                "outcomes asked /s",
                "absorbed /s",
                "outcomes",
                "searches",
                "search p50 ms",
                "search p95 ms",
            ),
            left=("store",),
        )
        for store, size, s in sustained:
            learn.add_row(
                store,
                f"{size:,}",
                f"{s['pace']:.0f}" if s["pace"] else "back to back",
                f"{s['rate']:.0f}" if s["rate"] else "unpaced",
                f"{s['absorbed']:.1f}",
                str(s["outcomes"]),
                str(s["searches"]),
                f"{s['search_p50']:.1f}",
                f"{s['search_p95']:.1f}",
            )
        console.print(learn)
    console.print(
        "index docs/s = documents / (upsert + first search), vectors given; 1-doc upsert = one more case, "
        "next search = the case search after it (medians); upsert + search = their sum per trial. "
        "Open and RSS: a fresh process with the model loaded opens the store and runs 50 searches; RSS "
        "after open = its growth from before the open. 'with query embedding' adds the model's time for "
        "the query (category filter on)."
    )


if __name__ == "__main__":
    typer.run(main)
