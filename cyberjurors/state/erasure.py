"""What a worker erases from its tables when a case is erased (`cyberjurors erase`), and whether the
case is still in the pipeline; and, in other cases' stored results, the erased case's summary where
they retrieved it as a precedent (``erase_citations``).

Called by the erasure agent (``streams/erasure.py``) inside the erasure request's event, which is
keyed by the case id and so sits on the case's partition: every delete is Faust's own, its
tombstone on the changelog partition the entry was written on, and the worker's store (memory or
RocksDB) drops the entry at once. A worker that was down handles the request when it is back,
after it has recovered its tables from their changelogs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping, Sequence
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


ERASED_TEXT = "[erased]"  # what a retrieved precedent that was an erased case shows in place of its summary


CONSISTENCY_LISTS = ("compared", "disagreeing")  # PrecedentConsistency's lists of precedents' case ids


def blank_precedent(node: Any, case_id: str, erased_as: str) -> bool:
    """Blank, in place, every retrieved precedent (``PrecedentRef``) that is the case: its id becomes
    ``erased_as``, its summary ``ERASED_TEXT``; and name it ``erased_as`` where a verdict's precedent
    consistency lists it. Whether there was any."""
    found = False
    if isinstance(node, dict):
        if node.get("kind") == "case" and node.get("id") == case_id and "text" in node:
            node.update(id=erased_as, text=ERASED_TEXT)
            found = True
        for name in CONSISTENCY_LISTS:
            listed = node.get(name)
            if isinstance(listed, list) and case_id in listed:
                node[name] = [erased_as if c == case_id else c for c in listed]
                found = True
        for value in node.values():
            found = blank_precedent(value, case_id, erased_as) or found
    elif isinstance(node, list):
        for value in node:
            found = blank_precedent(value, case_id, erased_as) or found
    return found


@dataclass
class CitationsErased:
    entries: int = 0  # other cases' stored results rewritten without the case's summary
    cases: set[str] = field(default_factory=set)  # the cases those were
    in_flight: set[str] = field(default_factory=set)  # of them, still in the pipeline: may store it again


def on_partition(results: StageResults, partition: int | None) -> list[str]:
    """The stage-results keys of the cases whose last result was stored on ``partition`` (every key
    when None: a table outside a stream, in tests)."""
    keys = list(results.table.keys())
    if partition is None:
        return keys
    owners: dict[str, bool] = {}
    for key in keys:
        owner = key.split("/", 1)[0]
        if owner not in owners:
            stamp = results.times.get(owner)
            owners[owner] = isinstance(stamp, Mapping) and stamp.get("partition") == partition
    return [key for key in keys if owners[key.split("/", 1)[0]]]


def erase_citations(
    results: StageResults, intake: IntakeTable, keys: Sequence[str], case_id: str, erased_as: str
) -> CitationsErased:
    """Among ``keys`` (``on_partition``'s, a chunk at a time), every stored result of another case
    that shows ``case_id`` as a retrieved precedent, rewritten with its summary blanked
    (``blank_precedent``). Inside the erasure event of the entries' partition, so each write goes to
    the changelog partition the entry was written on. Written in place, not with ``put``: the rewrite
    does not restart the case's retention."""
    needle = json.dumps(case_id).encode()  # as JSON writes the id: never a part of "c-10"
    done = CitationsErased()
    for key in keys:
        owner = key.split("/", 1)[0]
        value = results.table.get(key) if owner != case_id else None
        raw = value.encode() if isinstance(value, str) else value
        if not isinstance(raw, bytes) or needle not in raw:
            continue
        try:
            body = json.loads(raw)
        except ValueError:
            continue
        if blank_precedent(body, case_id, erased_as):
            results.table[key] = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            done.entries += 1
            done.cases.add(owner)
            if standing(results, intake, owner) is not None:
                done.in_flight.add(owner)
    return done
