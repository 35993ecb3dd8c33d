"""The precedents section: the precedent base's store, retrieval, learning and embeddings."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .fields import ConfigModel, nested


class EmbeddingSettings(ConfigModel):
    """The model precedents are embedded with and how it runs (the setting ``embedding``)."""

    model: str = Field(
        "all-MiniLM-L6-v2",
        description="the sentence-embedding model, recorded with "
        "the vectors (an index built with another refuses to open)",
    )
    runtime: Literal["numpy", "sentence-transformers"] = Field(
        "numpy",
        description="numpy = BERT models such as the default, no torch; sentence-transformers = any "
        "sentence-transformers model (the torch extra), from model_dir or the local "
        "Hugging Face cache",
    )
    model_dir: Path | None = Field(
        None,
        description="the folder holding the model's files (a platform "
        "mounts its vetted copy here); default: where `cyberjurors embedder "
        "fetch` puts it, inside the Python environment",
    )
    model_sha256: str | None = Field(
        None,
        pattern=r"^[0-9a-fA-F]{64}$",
        description="sha256 of "
        "model.safetensors, checked at load; pinned for all-MiniLM-L6-v2, "
        "needed for any other model on the numpy runtime",
    )
    batch_size: int = Field(
        32, ge=1, le=1024, description="texts per forward pass (also capped at 4,096 word pieces a pass)"
    )
    threads: int = Field(
        1,
        ge=1,
        le=64,
        description="threads the numpy embedder's matrix products run on (the process's BLAS threads): 1 "
        "spends the fewest CPU seconds a case; more shorten one encode on idle cores, at several times its CPU",
    )
    cache_size: int = Field(
        10_000,
        ge=0,
        description="texts (guideline rules, case summaries) whose vectors a worker keeps for the cases "
        "that retrieve them again, the least recently used dropped first: ~2.5 KB each",
    )


class ElasticsearchSettings(ConfigModel):
    """The Elasticsearch cluster of ``precedent_backend = elasticsearch`` (the setting ``elasticsearch``)."""

    url: str | None = Field(None, description="the Elasticsearch cluster (or ELASTICSEARCH_URL)")
    api_key: str | None = Field(None, description="its API key (or ELASTICSEARCH_API_KEY)")
    username: str | None = Field(None, description="basic auth user, when no API key")
    password: str | None = Field(None, description="basic auth password")
    ca_certs: Path | None = Field(None, description="the CA bundle (PEM) the cluster's certificate is checked against")
    verify_certs: bool = Field(True, description="check the cluster's TLS certificate")
    index_prefix: str = Field(
        "cyberjurors", description="put before the index names, so several deployments share a cluster"
    )
    timeout_s: float = Field(10.0, description="per request attempt")
    max_retries: int = Field(2, ge=0, description="the client's retries on 429/502/503/504/timeouts")


class PrecedentSettings(BaseModel):
    """What ``precedents/`` needs."""

    precedent_backend: Literal["embedded", "elasticsearch", "none"] = Field(
        "embedded", description="embedded (no server), elasticsearch, or none to judge without precedents"
    )
    precedent_dir: Path = Field(Path("data/precedents"), description="the embedded index's folder")
    memory_k: int = Field(3, ge=0, description="K, guidelines per juror memory (read once precedents land)")
    precedent_cases_k: int = Field(5, ge=0, description="top-H historical cases retrieved per case")
    precedent_pool_k: int = Field(12, ge=1, description="guidelines retrieved per case, the pool jurors draw from")
    precedent_min_in_category: int = Field(
        3, ge=0, description="fewer guidelines than this in the category: add cross-category ones, coverage low"
    )
    precedent_retries: int = Field(
        1, ge=0, description="retrieval retries (each with the client's own) before a case goes on without"
    )
    guideline_min_confidence: float = Field(0.2, ge=0, le=1, description="guidelines below this are retired")
    redistil_after: int = Field(20, ge=1, description="confirmed outcomes in a category before it is re-distilled")
    embedding: EmbeddingSettings = nested(
        EmbeddingSettings,
        'the embedding model, any of its settings by itself (embedding={"threads": 2}, '
        "CYBERJURORS_EMBEDDING__MODEL_DIR)",
    )
    elasticsearch: ElasticsearchSettings = nested(
        ElasticsearchSettings,
        'the Elasticsearch backend, any of its settings by itself (elasticsearch={"index_prefix": '
        '"staging"}, CYBERJURORS_ELASTICSEARCH__PASSWORD; url and api_key also as ELASTICSEARCH_URL '
        "and ELASTICSEARCH_API_KEY)",
    )
