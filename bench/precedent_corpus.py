"""bench/precedent_search.py's corpus: vectors for the synthetic precedents, from the real model up
to a point and reused with noise beyond it, handed to the index as if the model had made them."""

from __future__ import annotations

import time

import numpy as np
from rich.console import Console

from cyberjurors.precedents.models import Document


class Precomputed:
    """Hands the index vectors computed beforehand, under the real model's name; anything else
    (queries) goes to the model."""

    def __init__(self, model, vectors: dict[str, np.ndarray]):
        self.model, self.name, self.dims, self.vectors = model, model.name, model.dims, vectors

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), np.float32)
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            self.vectors.update(zip(missing, self.model.encode(missing), strict=True))
        return np.stack([self.vectors[t] for t in texts])


def embed_documents(
    model,
    docs: list[Document],
    wanted: list[int],
    real: int,  # type: ignore[no-untyped-def]
    console: Console,
) -> tuple[dict[str, np.ndarray], dict[int, float]]:
    """Vectors for every document text: the real model's for the first ``real`` documents (with the
    embedding rate at each size up to there), those reused with noise beyond."""
    n_real = min(real, wanted[-1])
    texts = list(dict.fromkeys(d.text for d in docs[:n_real]))
    vectors: dict[str, np.ndarray] = {}
    embed_rates: dict[int, float] = {}
    spent, done = 0.0, 0
    for size in sorted({s for s in wanted if s <= n_real} | {n_real}):
        batch = [t for t in dict.fromkeys(d.text for d in docs[:size]) if t not in vectors]
        started = time.perf_counter()
        for i in range(0, len(batch), 512):
            vectors.update(zip(batch[i : i + 512], model.encode(batch[i : i + 512]), strict=True))
        spent += time.perf_counter() - started
        done += len(batch)
        embed_rates[size] = done / spent
        console.print(f"embedded {done} texts with the real model: {done / spent:.0f} texts/s")
    real_vectors = np.stack([vectors[t] for t in texts])
    rng = np.random.default_rng(0)
    synthetic = 0
    for i, doc in enumerate(docs[n_real:]):
        if doc.text not in vectors:
            v = real_vectors[i % len(real_vectors)] + rng.normal(0, 0.3 / np.sqrt(model.dims), model.dims)
            vectors[doc.text] = (v / np.linalg.norm(v)).astype(np.float32)
            synthetic += 1
    if synthetic:
        console.print(
            f"[yellow]{synthetic} documents beyond the first {n_real} reuse real vectors plus noise "
            "(not embedded by the model)[/yellow]"
        )
    return vectors, embed_rates
