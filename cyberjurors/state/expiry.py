"""Table entries that expire: find the entries whose stored timestamp is past a cutoff, and delete
them from a Faust table outside a stream event (a timer's sweep), tombstone included.

Faust deletes a table key through the event being processed: the tombstone goes to the changelog
partition of that event. A sweep runs in a timer, with no event, so each entry keeps the partition
it was written on (``stamp``) and the sweep sends the tombstone there itself. Only partitions this
worker holds as active are swept: a standby copy, or a partition moved away, is another worker's.

Used by ``results.StageResults`` (a case's stored stage results, ``state_retention_s`` after its
last one) and open to any table whose values carry ``{"at": unix seconds, "partition": n}``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping, MutableMapping
from typing import Any

import faust
from aiokafka.partitioner import murmur2

log = logging.getLogger("cyberjurors.streams")

Clock = Callable[[], float]


def stamp(at: float, partition: int | None, **extra: Any) -> dict[str, Any]:
    """The value an expiring entry stores: when it was last touched, and its changelog partition."""
    return {"at": at, "partition": partition, **extra}


def current_partition() -> int | None:
    """The partition of the event being processed, or None outside a stream (a test's dict table)."""
    event = faust.current_event()
    return None if event is None else event.message.partition


def due(
    table: Mapping[str, Any], cutoff: float, partitions: Collection[int] | None = None, most: int | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The entries stamped before ``cutoff`` (on ``partitions``, when given), at most ``most``.
    A value without a stamp is never due: it was not written to expire."""
    found = 0
    for key, value in list(table.items()):  # a copy: the caller deletes while it walks
        if most is not None and found >= most:
            return
        if not isinstance(value, Mapping) or not isinstance(value.get("at"), (int, float)):
            continue
        if value["at"] >= cutoff:
            continue
        if partitions is not None and value.get("partition") not in partitions:
            continue
        found += 1
        yield key, dict(value)


def forget(table: MutableMapping[str, Any], key: str, partition: int | None) -> bool:
    """Delete ``key``; False if it was not there. Inside a stream event, or for a plain mapping,
    an ordinary delete; outside one, from the table's store plus a tombstone on ``partition``."""
    if key not in table:
        return False
    if partition is None or faust.current_event() is not None or not hasattr(table, "send_changelog"):
        del table[key]
        return True
    table.data.pop(key, None)  # type: ignore[attr-defined]  # a Faust table's store: it has send_changelog
    table.send_changelog(partition, key, None, value_serializer="raw")
    return True


def put(table: MutableMapping[str, Any], key: str, value: Any, partition: int | None) -> None:
    """Set ``key`` like ``forget`` deletes it: outside a stream event, in the store plus a changelog
    record on ``partition``."""
    if partition is None or faust.current_event() is not None or not hasattr(table, "send_changelog"):
        table[key] = value
        return
    store_put(table.data, key, value, partition)  # type: ignore[attr-defined]  # as in forget
    table.send_changelog(partition, key, value)


def store_put(store: Any, key: str, value: Any, partition: int) -> None:
    """Write into a table's store outside a stream event. Faust's RocksDB store keeps one database
    per partition and takes the partition from the current event (``_set`` asserts there is one):
    without an event the write goes to ``partition``'s database here. Other stores take it as is. A
    sealed table's store (state/sealed.py) seals the value first."""
    if (sealed_value := getattr(store, "sealed_value", None)) is not None:
        value = sealed_value(key, value)
    if not hasattr(store, "_db_for_partition"):
        store[key] = value
        return
    raw = store._encode_key(key)
    store._key_index[raw] = partition  # where Faust's reads look first
    store._db_for_partition(partition).put(raw, store._encode_value(value))


def key_partition(key: str, partitions: int) -> int:
    """The partition the default partitioner (Java's murmur2, as aiokafka's and Faust's) gives a key."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def active_partitions(app: faust.App, topic: str) -> set[int]:
    """The partitions of ``topic`` this worker holds as active (not standby)."""
    return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}


def every(app: faust.App, interval_s: float, sweep: Callable[[], Awaitable[int]], name: str) -> None:
    """Run ``sweep`` every ``interval_s`` in a Faust timer; a failing sweep is logged, the worker goes on."""

    async def run() -> None:
        started = time.perf_counter()
        try:
            removed = await sweep()
        except Exception:  # an expiry that fails is retried next interval; judging goes on
            log.exception("%s sweep failed", name)
            return
        if removed:
            log.info("%s: %d expired in %.3fs", name, removed, time.perf_counter() - started)

    run.__name__ = run.__qualname__ = f"expire_{name.replace('-', '_')}"
    app.timer(interval_s, name=f"expire-{name}")(run)
