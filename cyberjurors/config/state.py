"""The state section: what workers keep between messages, for how long, and where."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .fields import ConfigModel, nested


class EarlyEvidence(ConfigModel):
    """Evidence that arrives before its case's ``case_opened``, held in the intake table (the setting ``early_evidence``)."""

    wait_s: float = Field(
        300.0,
        gt=0,
        description="evidence (or evidence_closed) for a case not yet opened is held this long after "
        "the case's first such event, then dead-lettered (case_never_opened, replayable); "
        "checked every state_sweep_interval_s",
    )
    per_case: int = Field(
        21,
        ge=1,
        description="events held per unopened case; more are dead-lettered (early_evidence_overflow, replayable)",
    )
    total: int = Field(10_000, ge=1, description="events held per worker across unopened cases")


class ErasureSettings(ConfigModel):
    """What `cyberjurors erase` keeps and how long it waits for a worker (the setting ``erasure``,
    erasure/run.py)."""

    dir: Path = Field(
        Path("data/erasures"),
        description="its journal (what is left of each erasure, the case id kept only until it completes), "
        "its log (no personal data) and the secret salt of the references both use",
    )
    wait_s: float = Field(
        30.0,
        gt=0,
        description="how long it waits for the worker holding a case's partition to erase its "
        "tables; no answer by then (a worker down) is recorded and finished by `erase --resume`",
    )


class StateSettings(BaseModel):
    """What ``state/`` and intake's held events need: retention, sweeps, the table store."""

    state_sweep_interval_s: float = Field(60.0, gt=0, description="how often a worker deletes expired state")
    table_store: Literal["memory", "rocksdb"] = Field(
        "memory",
        description="memory = tables rebuilt from their changelogs at start (the embedded default); "
        "rocksdb = on local disk under datadir (production), recovery reads only what is new",
    )
    rocksdb_partition_mb: int = Field(
        16,
        ge=2,
        description="rocksdb: memory one table partition's database may hold, half in its write "
        "buffers (two memtables), half in its block cache; a worker holds up to this x 4 "
        "tables x its partitions (Faust's defaults: 192 MB of memtables and a 2 GB cache each)",
    )
    early_evidence: EarlyEvidence = nested(
        EarlyEvidence,
        'evidence held for a case not yet opened, any of these by itself (early_evidence={"wait_s": '
        "600}, CYBERJURORS_EARLY_EVIDENCE__WAIT_S)",
    )
    erasure: ErasureSettings = nested(
        ErasureSettings,
        '`cyberjurors erase`\'s own, either by itself (erasure={"wait_s": 60}, CYBERJURORS_ERASURE__DIR)',
    )
