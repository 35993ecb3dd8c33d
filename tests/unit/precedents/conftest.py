"""The precedent room's shared fixture: the real embedding model, loaded once per module."""

from __future__ import annotations

import pytest

from cyberjurors.precedents.embeddings import load_embedder


@pytest.fixture(scope="module")
def embedder():
    return load_embedder()
