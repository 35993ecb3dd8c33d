"""What each stage sent on, per case: the table a restarted or rebalanced worker replays from
instead of calling a model again, expired ``state_retention_s`` after a case's last stage."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Collection, Mapping, MutableMapping
from typing import Any, ClassVar

from ..errors import OutputTooLarge
from . import expiry


class StageResults:
    """``stage-results``: "case_id/stage" -> the JSON bytes that stage sent on (a CaseFile, or the
    Verdict). The Faust table is declared with ``value_type=bytes`` so it stores, and its changelog
    carries, the very bytes the topic got; an older version's changelog held the same JSON as a
    json-serialised dict, which reads back as JSON bytes too.

    What is kept, and for how long: a case in flight keeps every stage's output (a redelivered
    input re-sends it instead of calling the model again). Its verdict deletes the intermediate
    ones (focus, clues, round-N): ``intake`` and ``verdict`` stay, for outcome learning and to
    re-send the verdict to a redelivered input, and ``outcome`` marks that the case's reported
    outcome was counted (``mark_outcome``); every key of the case is deleted
    ``retention_s`` after its last stage result (``times``: case_id -> ``expiry.stamp``), by
    ``expire``, which a timer calls. A decided case leaves a marker (``case_id/expired``, a few
    dozen bytes) for one more ``retention_s``, so an outcome that comes after its verdict expired
    is told from one that came before its verdict.

    Appeals (``keep_for_appeal``): a decided case also keeps ``clues`` (its focus, clue chain and
    precedents: the original record a second instance re-examines), and its verdict may be stored
    with a hold (``hand_on(hold_s=...)``) so the case outlives the appeal window when that is longer
    than the retention. An appeal's keys live under ``case_id/appeal`` (the accepted appeal's case
    file), ``appeal/clues``, ``appeal/round-N``, ``appeal/verdict`` and ``appeal/escalation``;
    ``escalation`` holds a first-instance verdict's escalation. They expire with the case.

    Letters (``streams/letters.py``): ``letters/<party>`` holds the letter sent to a party about the
    first-instance verdict, ``appeal/letters/<party>`` about the second; ``.../draft`` the model's
    draft until its letter is stored; ``letters/placeholders`` (``appeal/letters/placeholders``) what
    each placeholder the letters' model read stands for, per party (sealed under the case's key when
    ``media_encryption`` is on), from which each letter is sent with its addressee's own values. They
    are stored with the verdict's hold, and expire and are erased with the case.

    Outcomes of an escalated case (streams/outcome.py): ``outcome/held`` keeps an outcome that is not
    the human panel's while it waits for the panel's decision (its case's ``times`` entry carries
    ``held``, when it came, so the sweep that releases it reads no other key, and the case is not
    expired before it is released); ``outcome/settled`` lists the decisions finished without standing:
    overridden, or superseded by the panel's, so a redelivered one is left alone."""

    EXPIRED = "expired"
    HELD = "outcome/held"
    SETTLED = "outcome/settled"
    # a key an earlier release stored under another stage name (docs/renamed.md): read, and expired
    RENAMED: ClassVar[dict[str, str]] = {"intake": "ready"}
    LASTING = (
        "intake",
        "ready",
        "focus",
        "clues",
        "verdict",
        "escalation",
        "appeal",
        "appeal/clues",
        "appeal/verdict",
        "appeal/escalation",
        # the letters stage: each party's letter, and its draft until the letter is stored; the
        # placeholder map its letters give the parties' own words back from
        *(
            f"{instance}letters/{party}{draft}"
            for instance in ("", "appeal/")
            for party in ("buyer", "seller")
            for draft in ("", "/draft")
        ),
        *(f"{instance}letters/placeholders" for instance in ("", "appeal/")),
        "outcome",
        HELD,
        SETTLED,
        EXPIRED,
    )

    def __init__(
        self,
        table: MutableMapping[str, Any],
        times: MutableMapping[str, Any] | None = None,
        retention_s: float = 7 * 86400,
        clock: expiry.Clock = time.time,
        max_bytes: int | None = None,
        keep_for_appeal: bool = False,
        max_rounds: int = 1,
    ):
        self.table = table
        self.times: MutableMapping[str, Any] = {} if times is None else times
        self.retention_s = retention_s
        self.clock = clock
        self.max_bytes = max_bytes  # max_event_bytes: an output over it is refused before it is stored
        self.keep_for_appeal = keep_for_appeal
        self.max_rounds = max_rounds  # T: the rounds a case can have

    def stored(self, case_id: str, stage: str) -> bytes | None:
        found = self.table.get(f"{case_id}/{stage}")
        if found is None and stage in self.RENAMED:
            return self.table.get(f"{case_id}/{self.RENAMED[stage]}")
        return found

    def put(self, case_id: str, stage: str, value: bytes, hold_s: float = 0.0) -> None:
        """Store a result without sending it (a step of work done inside one handler, or what is
        sent after something else)."""
        if self.max_bytes is not None and len(case_id) + len(value) > self.max_bytes:  # before the table's changelog
            raise OutputTooLarge(f"{stage}: {len(value)} bytes, limit max_event_bytes={self.max_bytes}")
        self.table[f"{case_id}/{stage}"] = value
        # the stamp is when the case's retention starts counting: later by hold_s
        held = (self.times.get(case_id) or {}).get("held")  # an outcome waiting is still waiting
        extra = {} if held is None else {"held": held}
        self.times[case_id] = expiry.stamp(self.clock() + hold_s, expiry.current_partition(), **extra)

    def rounds(self, case_id: str, prefix: str = "") -> list[str]:
        """The stored round keys of a case (``prefix`` "appeal/" for the second instance's). Every round
        up to T (``max_rounds``) is probed: a recovery that skipped part of a verdict's batch of
        tombstones (the embedded broker, see ``adopt``) can leave round-2 without round-1, and a key
        no probe finds would never expire. Past T (a case judged when T was higher) rounds are
        stored in order, so probing stops at the first missing one."""
        found = []
        for n in itertools.count(1):
            key = f"{case_id}/{prefix}round-{n}"
            if key in self.table:
                found.append(key)
            elif n > self.max_rounds:
                return found
        return found

    def mark_outcome(self, case_id: str, outcome: bytes, partition: int | None = None) -> bool:
        """Record that the case's reported outcome was counted; False when one was already (a
        redelivered outcome, after a restart or a rebalance too: the mark is in the table's
        changelog). Called from the outcomes agent, whose event has the case's partition, or from
        the sweep releasing a held outcome, which names it."""
        key = f"{case_id}/outcome"
        if key in self.table:
            return False
        expiry.put(self.table, key, outcome, partition)
        return True

    def replace_outcome(self, case_id: str, outcome: bytes, partition: int | None = None) -> None:
        """A supervisor's override stands now in place of the counted outcome (which stays counted)."""
        expiry.put(self.table, f"{case_id}/outcome", outcome, partition)

    def hold_outcome(self, case_id: str, record: bytes, partition: int | None) -> None:
        """Keep an outcome that must wait (``HELD``), and note on the case's stamp when it came. The
        stamp's time is not moved: the retention still counts from the case's last stage result."""
        if self.max_bytes is not None and len(case_id) + len(record) > self.max_bytes:
            raise OutputTooLarge(f"a held outcome: {len(record)} bytes, limit max_event_bytes={self.max_bytes}")
        expiry.put(self.table, f"{case_id}/{self.HELD}", record, partition)
        entry = dict(self.times.get(case_id) or expiry.stamp(self.clock(), partition))
        expiry.put(self.times, case_id, entry | {"held": self.clock()}, partition)

    def unhold_outcome(self, case_id: str, partition: int | None) -> None:
        """The held outcome is released: counted, or a dead letter."""
        expiry.forget(self.table, f"{case_id}/{self.HELD}", partition)
        entry = self.times.get(case_id)
        if entry is not None and "held" in entry:
            expiry.put(self.times, case_id, {k: v for k, v in dict(entry).items() if k != "held"}, partition)

    def held_due(self, cutoff: float, partitions: Collection[int] | None = None) -> list[tuple[str, int | None]]:
        """The cases (and their partitions) whose held outcome came before ``cutoff``: one pass over
        ``times``, as ``expire`` makes."""
        return [
            (case_id, entry.get("partition"))
            for case_id, entry in list(self.times.items())
            if isinstance(entry, Mapping)
            and isinstance(entry.get("held"), (int, float))
            and entry["held"] < cutoff
            and (partitions is None or entry.get("partition") in partitions)
        ]

    def keys(self, case_id: str) -> list[str]:
        """Every key the case has in the table."""
        found = [f"{case_id}/{stage}" for stage in self.LASTING]
        return [key for key in found if key in self.table] + self.rounds(case_id) + self.rounds(case_id, "appeal/")

    def finish(self, case_id: str) -> int:
        """The first-instance verdict is stored: delete its intermediate results (tombstones in the
        changelog, on the event's partition): focus, the rounds, and the clues unless an appeal may
        need them. Returns how many were deleted."""
        stages = ["focus"] + ([] if self.keep_for_appeal else ["clues"])
        done = [f"{case_id}/{stage}" for stage in stages] + self.rounds(case_id)
        return sum(expiry.forget(self.table, key, None) for key in done)

    def finish_appeal(self, case_id: str) -> int:
        """The second-instance verdict is stored: delete its intermediate results and the first
        instance's clues, kept for it."""
        done = [f"{case_id}/clues", f"{case_id}/appeal/clues", *self.rounds(case_id, "appeal/")]
        return sum(expiry.forget(self.table, key, None) for key in done)

    def older_than_retention(self, at: float | None) -> bool:
        """Whether something stamped ``at`` (unix seconds) is past the retention: its case's state
        may have expired."""
        return at is not None and at < self.clock() - self.retention_s

    def adopt(self, partitions: int, active: Collection[int] | None = None) -> int:
        """Stamp now every case that has stage results but no ``times`` entry, so its keys expire
        too. A times write or a tombstone lost in a crash would leave them for good, and so does the
        embedded broker: recovery stops at the high watermark Tansu 0.6 reports from a batch's first
        offset, skipping the rest of a verdict's batch of tombstones. Reads every key: run after
        recovery, not every sweep. A case's partition is its key's: every topic is keyed by case id."""
        cases = {key.split("/", 1)[0] for key in list(self.table.keys())} - set(self.times.keys())
        adopted = 0
        for case_id in cases:
            partition = expiry.key_partition(case_id, partitions)
            if active is None or partition in active:
                expiry.put(self.times, case_id, expiry.stamp(self.clock(), partition), partition)
                adopted += 1
        return adopted

    async def expire(self, partitions: Collection[int] | None = None) -> int:
        """Delete every key of the cases whose last stage result is older than the retention (on
        ``partitions``, when given: the ones this worker holds). Returns the number of cases."""
        cases = 0
        for case_id, entry in expiry.due(self.times, self.clock() - self.retention_s, partitions):
            if entry.get("held") is not None:  # an outcome waits for its release (held_due) first
                continue
            partition = entry.get("partition")
            decided = f"{case_id}/verdict" in self.table
            for key in self.keys(case_id):
                expiry.forget(self.table, key, partition)
            if decided:  # the marker, stamped to go one retention later (then nothing is left)
                marker = json.dumps({"last_stage_at": entry["at"], "expired_at": self.clock()}).encode()
                expiry.put(self.table, f"{case_id}/{self.EXPIRED}", marker, partition)
                expiry.put(self.times, case_id, expiry.stamp(self.clock(), partition), partition)
            else:
                expiry.forget(self.times, case_id, partition)
            cases += 1
            if cases % 500 == 0:
                await asyncio.sleep(0)  # a long sweep lets the stream agents run
        return cases
