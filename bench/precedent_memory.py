"""bench/precedent_search.py's memory probe: in a fresh process, load the embedding model, then
open a precedent store and run 50 searches; print (as JSON) the open time and the resident memory
grown from before the open to after the searches, the model's own memory excluded.

Run: .venv/bin/python bench/precedent_memory.py sqlite FOLDER
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.embeddings import load_embedder
from harness import peak_rss_mb
from tests import precedent_data


async def probe(store: str, folder: Path) -> dict[str, float]:
    model = load_embedder()
    queries = precedent_data.queries(50, seed=5)
    for text, _ in queries:  # the model's working memory for a query, before the baseline
        model.encode([text])
    gc.collect()
    before = peak_rss_mb("self", "VmRSS")
    started = time.perf_counter()
    index = await {"sqlite": EmbeddedIndex}[store].open(folder, model, create=False)
    open_s = time.perf_counter() - started
    for text, category in queries:
        await index.search(text, kind="case", category=category, k=10)
        await index.search(text, kind="guideline", category=category, k=12)
    gc.collect()
    return {"open_s": open_s, "rss_growth_mb": peak_rss_mb("self", "VmRSS") - before}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(probe(sys.argv[1], Path(sys.argv[2])))))
