"""The precedent room's shared fixtures: the real embedding model, loaded once per module, and
once per session remembering its vectors by text (the store contract's, store_contract.py)."""

from __future__ import annotations

import pytest

from cyberjurors.precedents.embeddings import load_embedder

from .store_contract import MODEL, CachingEmbedder


@pytest.fixture(scope="module")
def embedder():
    return load_embedder()


@pytest.fixture(scope="session")
def shared_embedder() -> CachingEmbedder:
    return CachingEmbedder(load_embedder(MODEL))
