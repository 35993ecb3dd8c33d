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
    """A table of the worker's app, partitioned as the topics are, its entries None until set."""
    return app.Table(name, default=None, partitions=settings.partitions, options=rocksdb_options(settings), **options)


def rocksdb_options(settings: Settings) -> dict[str, int] | None:
    """Faust's RocksDB options for one table partition's database, within ``rocksdb_partition_mb``.
    Faust's defaults (64 MB memtables, three of them, and a 2 GB block cache, per database: one per
    table and partition) let a worker's memory grow by hundreds of MB before a memtable is flushed."""
    if settings.table_store != "rocksdb":
        return None
    half = settings.rocksdb_partition_mb * 2**20 // 2
    return {"write_buffer_size": half // 2, "max_write_buffer_number": 2, "block_cache_size": half}
