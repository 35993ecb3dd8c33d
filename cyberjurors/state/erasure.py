"""What a worker erases from its tables when a case is erased (`cyberjurors erase`), and whether the
case is still in the pipeline.

Called by the erasure agent (``streams/erasure.py``) inside the erasure request's event, which is
keyed by the case id and so sits on the case's partition: every delete is Faust's own, its
tombstone on the changelog partition the entry was written on, and the worker's store (memory or
RocksDB) drops the entry at once. A worker that was down handles the request when it is back,
after it has recovered its tables from their changelogs.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ..evidence.media_store import stored_refs
from . import expiry
from .intake import IntakeTable
from .results import StageResults


@dataclass
class TablesErased:
    keys: int = 0  # table entries deleted
    refs: set[str] = field(default_factory=set)  # media store objects the deleted entries named
    confirmed: int = 0  # re-distil lists the case was taken out of


def standing(results: StageResults, intake: IntakeTable, case_id: str) -> str | None:
    """Where a case still in the pipeline stands (for the refusal's message), or None when it is
    not: never seen here, decided, or left as a dead letter."""
    entry = intake.entry(case_id)
    if "draft" in entry:
        return "being assembled from incremental events (its evidence is not closed)"
    if "held" in entry:
        return "events held for it, the case not yet opened"
    if results.stored(case_id, "appeal") is not None and results.stored(case_id, "appeal/verdict") is None:
        return "an appeal accepted and not yet decided (or dead-lettered: replay it, or erase with --force)"
    if entry.get("dead_letter") or results.stored(case_id, "verdict") is not None:
        return None
    if results.stored(case_id, "intake") is None:
        return None
    stages = [key.split("/", 1)[1] for key in results.keys(case_id)]
    rounds = [stage for stage in stages if stage.startswith("round-")]  # in order (StageResults.rounds)
    last = rounds[-1] if rounds else next((s for s in ("clues", "focus") if s in stages), "intake")
    return f"admitted, its last stage stored: {last}"


def refs_of(value: Any) -> set[str]:
    """The media references in a stored entry (JSON bytes, or a JSON-like value); none in anything else."""
    if isinstance(value, (bytes, str)):
        try:
            value = json.loads(value)
        except ValueError:
            return set()
    return stored_refs(value)


def erase_case(
    results: StageResults,
    intake: IntakeTable,
    confirmed: MutableMapping[str, Any] | None,
    case_id: str,
    partition: int | None,
) -> TablesErased:
    """Delete every entry of the case: its stage results (verdict, escalation, appeal steps, the
    expiry marker), its stage-times stamp, its intake entry (digest, draft or held events), and the
    case from the re-distil list of its category on this partition. Inside the event: ordinary
    deletes, so each tombstone goes where Faust wrote the entry."""
    done = TablesErased()
    for key in results.keys(case_id):
        done.refs |= refs_of(results.table.get(key))
        done.keys += expiry.forget(results.table, key, None)
    done.keys += expiry.forget(results.times, case_id, None)
    entry = intake.entry(case_id)
    if entry:
        done.refs |= refs_of(entry)
        del intake.table[case_id]
        done.keys += 1
    if confirmed is not None and partition is not None:
        for key in [k for k in list(confirmed.keys()) if k.endswith(f"/{partition}")]:
            cases = confirmed.get(key) or []
            if case_id in cases:
                confirmed[key] = [c for c in cases if c != case_id]
                done.confirmed += 1
    return done
