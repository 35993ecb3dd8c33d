"""The workers' Faust tables, in memory or in RocksDB (``table_store``): one place says which store
and with what bounds, as quix-streams' ``state/`` keeps its memory and RocksDB stores behind one base.

Memory: the changelog topic is the state, replayed into memory at each start and rebalance.
RocksDB: files under ``datadir``, bounded per table partition by ``rocksdb_partition_mb``; a restart
reads them instead of replaying the whole changelog."""

from __future__ import annotations

from typing import Any

import faust
from faust.types import TableT

from ..config import Settings


def store_url(settings: Settings) -> str:
    return "rocksdb://" if settings.table_store == "rocksdb" else "memory://"  # rocksdb: under datadir


def table(app: faust.App, settings: Settings, name: str, **options: Any) -> TableT:
    """A table of the worker's app, partitioned as the topics are, its entries None until set. Its
    changelog is created compacted with a bounded lag, as the other compacted topics are: a value an
    expiry or an erasure deleted leaves the log within ``compaction_lag_s``."""
    lag = {k: v for k, v in compacted(settings).items() if k != "cleanup.policy"}  # Faust sets the policy
    return app.Table(
        name,
        default=None,
        partitions=settings.partitions,
        options=rocksdb_options(settings),
        extra_topic_configs=lag,
        **options,
    )


def ms(seconds: float) -> str:
    return str(int(seconds * 1000))


def compacted(settings: Settings) -> dict[str, str]:
    """A compacted topic's configs: its replaced or deleted values leave the log within
    ``compaction_lag_s`` (a segment rolls at least that often, and a dirty one is compacted by then),
    and its tombstones stay ``tombstone_retention_s`` after. What bounds how long an expired or
    erased case's values stay in a compacted topic: the table changelogs here, disputes.dlq-replayed,
    disputes.audit and disputes.erasures (kafka/cluster.py; docs/operations/data-rights.md)."""
    return {
        "cleanup.policy": "compact",
        "segment.ms": ms(settings.compaction_lag_s),
        "max.compaction.lag.ms": ms(settings.compaction_lag_s),
        "delete.retention.ms": ms(settings.tombstone_retention_s),
    }


def rocksdb_options(settings: Settings) -> dict[str, int] | None:
    """Faust's RocksDB options for one table partition's database, within ``rocksdb_partition_mb``.
    Faust's defaults (64 MB memtables, three of them, and a 2 GB block cache, per database: one per
    table and partition) let a worker's memory grow by hundreds of MB before a memtable is flushed."""
    if settings.table_store != "rocksdb":
        return None
    half = settings.rocksdb_partition_mb * 2**20 // 2
    return {"write_buffer_size": half // 2, "max_write_buffer_number": 2, "block_cache_size": half}


def purge(table: Any, partition: int) -> bool:
    """After an erasure's deletes: RocksDB keeps a deleted entry's bytes in its files (the write-ahead
    log, the sorted tables) until a compaction drops them, so flush the partition's database and
    compact all of it, for the bytes to leave the disk now. The memory store has nothing on disk:
    False, nothing to do."""
    store = getattr(table, "data", None)
    if not hasattr(store, "_db_for_partition"):
        return False
    import rocksdict  # the rocksdb extra: Faust's RocksDB store runs on it

    db = store._db_for_partition(partition)  # type: ignore[union-attr]  # Faust's RocksDB store
    db.flush()
    # the bottom level too: by default a manual compaction leaves the bottom level's files as they are,
    # with the deleted values in them
    options = rocksdict.CompactOptions()
    options.set_bottommost_level_compaction(rocksdict.BottommostLevelCompaction.force())
    db.compact_range(None, None, options)
    return True
