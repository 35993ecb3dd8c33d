"""``intake``: what intake keeps per case between events, behind one small interface.

A case's entry is one of three, each stamped to expire (``expiry.stamp``):

- ``held``: events for a case not yet opened, kept until it opens (``early_evidence.wait_s``);
- ``draft``: an incremental case being assembled, until its evidence is closed (``intake_draft_ttl_s``);
- ``digest``: the admitted case's digest, so a producer's retry is told from a new case (with
  ``dead_letter`` noted when the case then left the pipeline as one), until ``state_retention_s``.

Any of them may carry ``cloudevents``: the CloudEvents ids (``<ce_source> <ce_id>``) of the case's
events intake took, each with its content digest, so an id reused for other content is refused
(streams/cloudevents.py); kept through the entry's changes and forgotten with it.

The table is a Faust table in a worker (memory or RocksDB, ``tables.table``) or a plain dict in a
test; either way only this class reads or writes its values.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, MutableMapping
from typing import Any

from ..evidence.intake import Draft
from . import expiry

CLOUDEVENTS = "cloudevents"
# the ids kept per case: a case has a few dozen events; a producer that gives every retry a new id
# must not grow the entry without end, and the oldest ids go first
MAX_CLOUDEVENT_IDS = 64


class IntakeTable:
    def __init__(self, table: MutableMapping[str, Any]):
        self.table = table

    def entry(self, case_id: str) -> dict[str, Any]:
        """The case's entry as stored ({} when there is none): compare it with ``unchanged``."""
        return dict(self.table.get(case_id) or {})

    def draft(self, case_id: str) -> Draft | None:
        found = self.table.get(case_id) or {}
        return Draft.model_validate(found["draft"]) if "draft" in found else None

    def keep_draft(self, draft: Draft, at: float, partition: int | None) -> None:
        # stamped with the last event's time: a draft expires intake_draft_ttl_s after it stops changing
        self.table[draft.case_id] = expiry.stamp(
            at, partition, draft=draft.model_dump(mode="json"), **self._kept(draft.case_id)
        )

    def hold(self, case_id: str, held: list[dict[str, Any]], first_at: float, partition: int | None) -> None:
        """Events held for a case not yet opened, stamped with the first one's time."""
        self.table[case_id] = expiry.stamp(first_at, partition, held=held, **self._kept(case_id))

    def admitted(self, case_id: str, digest: str, until: float, partition: int | None) -> None:
        self.table[case_id] = expiry.stamp(until, partition, digest=digest, **self._kept(case_id))

    def _kept(self, case_id: str) -> dict[str, Any]:
        """What an entry keeps whatever becomes of the case: the CloudEvents ids it took."""
        found = self.table.get(case_id) or {}
        return {CLOUDEVENTS: found[CLOUDEVENTS]} if CLOUDEVENTS in found else {}

    def cloudevent(self, case_id: str, key: str) -> str | None:
        """The content digest of the case's event taken under this CloudEvents id, or None."""
        found = self.table.get(case_id) or {}
        return (found.get(CLOUDEVENTS) or {}).get(key)

    def note_cloudevent(self, case_id: str, key: str, digest: str, partition: int | None) -> None:
        """An event intake took under this CloudEvents id; nothing when intake keeps nothing for the
        case (no entry: there would be nothing to expire it with)."""
        entry = self.table.get(case_id)
        if not isinstance(entry, dict) or "at" not in entry:
            return
        ids = {k: v for k, v in (entry.get(CLOUDEVENTS) or {}).items() if k != key}
        ids[key] = digest  # last, as the newest
        kept = dict(list(ids.items())[-MAX_CLOUDEVENT_IDS:])
        expiry.put(self.table, case_id, {**entry, CLOUDEVENTS: kept}, partition)

    def restore(self, case_id: str, entry: dict[str, Any]) -> None:
        """Put back an entry read before a change that did not go through."""
        self.table[case_id] = entry

    def note_dead_letter(self, case_id: str, noted: dict[str, Any], partition: int | None) -> None:
        """An admitted case that left the pipeline as a dead letter: intake says so on a resubmission."""
        entry = self.table.get(case_id)
        if isinstance(entry, dict) and entry.get("digest"):  # a case intake no longer keeps: nothing to note
            expiry.put(self.table, case_id, {**entry, "dead_letter": noted}, partition)

    def held_count(self) -> int:
        """Events held on this worker across its unopened cases."""
        return sum(len(v["held"]) for v in list(self.table.values()) if isinstance(v, dict) and "held" in v)

    def due(self, cutoff: float, partitions: Collection[int] | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        return expiry.due(self.table, cutoff, partitions)

    def forget(self, case_id: str, entry: dict[str, Any]) -> bool:
        """Delete the case's entry unless an event changed it since ``entry`` was read (then a later
        sweep sees it again, and a letter may be written twice, never lost)."""
        if self.table.get(case_id) != entry:
            return False
        return expiry.forget(self.table, case_id, entry.get("partition"))
