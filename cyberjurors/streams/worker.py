"""Running a Faust worker for the jury pipeline, with two bounds a supervisor can rely on.

- SIGTERM or SIGINT starts Faust's clean stop (leave the group, commit offsets, flush the
  producer). Against a dead broker that stop retries without end, so a timer thread that does not
  need the event loop ends the process with ``EXIT_STOP_DEADLINE`` after ``stop_deadline_s``.
- A watch reads the broker's metadata every ``broker_check_interval_s``. A broker that answers as
  another cluster, or without one of the worker's topics, or with a topic's partition count
  changed, or with a partition ending below an offset it had, has lost what the worker's position,
  group and tables rest on (the embedded broker restarted: it is in-memory); a broker unreachable for ``broker_loss_exit_s`` may never come back.
  Either way the worker exits with ``EXIT_BROKER_LOST`` for its supervisor to start a fresh one.
  It exits without a clean stop: that would commit offsets and flush table writes into a broker
  that no longer holds the worker's history (and hang if it is unreachable). Nothing is lost by
  it: each stage stores its output before sending it on and offsets are committed after, so a
  durable broker replays the input and the stored output is re-sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from mode import Service

from ..config import Settings
from ..evidence.key_service import key_wrap
from ..kafka import producers
from ..kafka.cluster import EMBEDDED_CLUSTER, TOPICS, client_options, ensure_topics
from ..kafka.lag import ConsumerLag
from ..observability import logs, metrics, tracing
from .app import CONSUMED, create_app
from .probes import ProbeServer

log = logging.getLogger("cyberjurors.worker")

EXIT_BROKER_LOST = 75  # EX_TEMPFAIL (sysexits.h): a temporary failure, start me again
EXIT_STOP_DEADLINE = 124  # as timeout(1): the stop did not finish in time
EXIT_CONFIG = 78  # EX_CONFIG (sysexits.h): the settings ask for what the broker refuses (kafka_idempotence=on)


def hard_exit(code: int, message: str) -> None:
    """Log, flush, and end the process now: no clean-up that could wait on the broker."""
    log.critical(message)
    for handler in logging.getLogger().handlers + log.handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@dataclass(frozen=True)
class BrokerView:
    """What the watch compares: the cluster's id, the partition count of each of our topics and
    each of their partitions' end offset."""

    cluster_id: str | None
    partitions: dict[str, int]
    ends: dict[TopicPartition, int] = field(default_factory=dict)


async def broker_view(settings: Settings, timeout_s: float) -> BrokerView:
    """One metadata and end-offset read with fresh clients (they cannot carry a stale connection
    over a broker restart); raises if the broker does not answer within ``timeout_s``."""
    request_ms = max(1000, int(timeout_s * 1000))
    admin = AIOKafkaAdminClient(**client_options(settings), request_timeout_ms=request_ms)
    reader = AIOKafkaConsumer(
        **client_options(settings), group_id=None, enable_auto_commit=False, request_timeout_ms=request_ms
    )

    async def read() -> BrokerView:
        await admin.start()
        cluster = await admin.describe_cluster()
        ours = {settings.topic(name) for name in TOPICS}
        # all topics, not ours by name: a metadata request naming a topic makes the embedded broker
        # create it, and a topic that is gone must read as gone
        partitions = {
            t["topic"]: len(t["partitions"])
            for t in await admin.describe_topics()
            if t["topic"] in ours and not t["error_code"]
        }
        await reader.start()  # end offsets of the topics that exist only: asking for one names it
        ends = await reader.end_offsets([TopicPartition(t, p) for t, n in sorted(partitions.items()) for p in range(n)])
        return BrokerView(cluster.get("cluster_id"), partitions, ends)

    try:
        return await asyncio.wait_for(read(), timeout_s)
    finally:
        for client in (reader.stop, admin.close):
            with contextlib.suppress(Exception):  # closing a client of a dead broker may fail; nothing to keep
                await asyncio.wait_for(client(), timeout_s)


def lost_state(seen: BrokerView, baseline: BrokerView) -> str | None:
    """Why the broker no longer holds what the worker started on, or None."""
    if baseline.cluster_id and seen.cluster_id != baseline.cluster_id:
        return (
            f"the broker answers as cluster {seen.cluster_id!r}, not {baseline.cluster_id!r}: "
            "a different or restarted broker, without this worker's offsets, group and changelogs"
        )
    for topic, count in sorted(baseline.partitions.items()):
        now = seen.partitions.get(topic)
        if now is None:
            return f"topic {topic} is gone from the broker"
        if now != count:
            return f"topic {topic} has {now} partitions, not {count}: it was created again"
    return None


def went_back(ends: dict[TopicPartition, int], seen: dict[TopicPartition, int]) -> str | None:
    """Why the broker lost its log, or None: a partition now ends below an offset seen there before.
    An end offset never decreases on a broker that keeps its log, so this tells a restart of one
    whose cluster id is fixed (Tansu run by hand keeps its default id), whose topics were created
    again with the same partition counts before the watch saw them gone."""
    for tp, end in sorted(ends.items()):
        before = seen.get(tp)
        if before is not None and end < before:
            return (
                f"partition {tp.topic}/{tp.partition} ends at offset {end}, below the {before} it had: the "
                "broker lost its log (restarted without its data?), and this worker's offsets and tables with it"
            )
    return None


@dataclass
class BrokerWatch:
    """Reads the broker's metadata every ``broker_check_interval_s`` and ends the worker with
    ``EXIT_BROKER_LOST`` when the broker lost its state or stayed unreachable too long. ``ends``:
    the highest end offset seen on each partition so far."""

    settings: Settings
    baseline: BrokerView
    clock: Callable[[], float] = time.monotonic
    unreachable_since: float | None = field(default=None, init=False)
    ends: dict[TopicPartition, int] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.ends = dict(self.baseline.ends)

    async def check(self) -> str | None:
        """One read: the reason to exit, or None."""
        timeout_s = max(1.0, self.settings.broker_check_interval_s)
        try:
            seen = await broker_view(self.settings, timeout_s)
        except Exception as err:  # any failure to read the metadata counts as not reaching it
            now = self.clock()
            self.unreachable_since = self.unreachable_since if self.unreachable_since is not None else now
            waited = now - self.unreachable_since
            if waited >= self.settings.broker_loss_exit_s:
                return (
                    f"the broker at {self.settings.kafka_bootstrap_servers} has not answered for "
                    f"{waited:.0f}s (broker_loss_exit_s={self.settings.broker_loss_exit_s:g}): {err!r}"
                )
            return None
        self.unreachable_since = None
        reason = lost_state(seen, self.baseline) or went_back(seen.ends, self.ends)
        self.ends |= {tp: max(end, self.ends.get(tp, end)) for tp, end in seen.ends.items()}
        return reason

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.broker_check_interval_s)
            reason = await self.check()
            if reason:
                hard_exit(
                    EXIT_BROKER_LOST,
                    f"broker lost: {reason}; exiting with status {EXIT_BROKER_LOST} "
                    "for the supervisor to start a fresh worker",
                )


def dump_snapshot(folder: Path) -> Path:
    """tracemalloc's snapshot of this process as ``folder/<pid>-<n>.snap`` (n counts up), written
    under a temporary name first so a reader never sees half a file."""
    folder.mkdir(parents=True, exist_ok=True)
    taken = len(list(folder.glob(f"{os.getpid()}-*.snap")))
    path = folder / f"{os.getpid()}-{taken:03d}.snap"
    partial = path.with_suffix(".partial")
    tracemalloc.take_snapshot().dump(str(partial))
    partial.rename(path)
    return path


class Worker(faust.Worker):
    """Faust's worker, whose stop on SIGTERM or SIGINT is bounded by ``stop_deadline_s``. When
    tracemalloc traces (PYTHONTRACEMALLOC=<frames> in its environment), SIGUSR2 writes a snapshot
    under ``snapshots`` (bench/soak.py --tracemalloc diffs them) instead of mode's debugger, which
    a worker without a terminal cannot use."""

    def __init__(
        self,
        app: faust.App,
        *services: Service,
        stop_deadline_s: float,
        snapshots: Path | None = None,
        **options: Any,  # faust.Worker's own options, passed on
    ) -> None:
        super().__init__(app, *services, **options)
        self.stop_deadline_s = stop_deadline_s
        self.snapshots = snapshots
        self._deadline: threading.Timer | None = None

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        # Faust has just replaced the root logger's handlers with its own: give them our format and filters
        settings: Settings = self.app.cyberjurors_settings  # type: ignore[attr-defined]  # set by faust_app()
        if settings.log_format == "json":
            self.spinner = None  # its terminal escapes are not JSON, even where no terminal is
        super().on_setup_root_logger(logger, level)
        logs.adopt(logger, settings)

    def _on_sigusr2(self) -> None:
        if self.snapshots is None or not tracemalloc.is_tracing():
            super()._on_sigusr2()
            return
        log.info("tracemalloc snapshot written to %s", dump_snapshot(self.snapshots))

    def _schedule_shutdown(self, sig: signal.Signals) -> None:
        if self._deadline is None:
            message = (
                f"not stopped {self.stop_deadline_s:g}s after {sig.name} (stop_deadline_s): "
                f"exiting with status {EXIT_STOP_DEADLINE}"
            )
            # a thread, not the event loop: the loop may be what is stuck
            self._deadline = threading.Timer(self.stop_deadline_s, hard_exit, (EXIT_STOP_DEADLINE, message))
            self._deadline.daemon = True
            self._deadline.start()
        super()._schedule_shutdown(sig)


async def prepare(settings: Settings) -> tuple[list[str], BrokerView]:
    """The topics created, and the broker as the worker starts on it (what the watch compares to).
    Whether the producers may be idempotent is asked here too, before Faust starts its producer
    (which takes the answer kept for the process): under kafka_idempotence=on a refusal stops the
    worker now, as an ``IdempotenceRefused``, not as a crash of a service Faust has started."""
    created = await ensure_topics(settings)
    await producers.idempotent(settings)
    return created, await broker_view(settings, timeout_s=30)


def run_worker(settings: Settings, loglevel: str = "info") -> None:
    created, baseline = asyncio.run(prepare(settings))
    asyncio.set_event_loop(asyncio.new_event_loop())  # asyncio.run closed its loop; Faust needs one
    settings.datadir.mkdir(parents=True, exist_ok=True)
    app = create_app(settings)
    one_record_batches(app, settings, baseline.cluster_id)
    if created:
        log.info("created topics: %s", ", ".join(created))
    for text in settings.deprecations:  # said once more where an operator reads, the warning aside
        log.warning(text)
    watch = BrokerWatch(settings, baseline)

    @app.task
    async def watch_broker() -> None:
        await watch.run()

    if settings.metrics_port:
        # one endpoint for both: our metrics and Faust's sensor share the default registry
        metrics.instrument_faust(app)
        metrics.serve(settings.metrics_port, settings.metrics_host)
    provider = tracing.setup(settings, "cyberjurors-worker")
    try:
        Worker(
            app,
            *worker_services(app, settings),
            loglevel=loglevel,
            quiet=True,
            stop_deadline_s=settings.stop_deadline_s,
            snapshots=settings.datadir / "tracemalloc",
        ).execute_from_commandline()
    finally:
        tracing.shutdown(provider)  # what is still batched goes out


def one_record_batches(app: faust.App, settings: Settings, cluster_id: str | None) -> bool:
    """A RocksDB worker on the embedded broker sends each record in a batch of its own. Tansu 0.6
    reports a partition's high watermark from the last batch's first offset, so after a batch of
    several changelog records (a verdict's tombstones) Faust's RocksDB recovery, at a restart or the
    next rebalance, finds its persisted offset past the high watermark and stops the worker
    (ConsistencyError). With one record a batch the two agree. Apache Kafka (or a Tansu started by
    hand under another cluster id: set PRODUCER_MAX_BATCH_SIZE=1 there) needs nothing. Before the
    app's producer exists: it reads the size when it is made."""
    embedded = (cluster_id or "").startswith(EMBEDDED_CLUSTER)
    if settings.table_store != "rocksdb" or not embedded or "PRODUCER_MAX_BATCH_SIZE" in os.environ:
        return False
    app.conf.producer_max_batch_size = 1  # bytes: any record overflows it, so each is its own batch
    log.info(
        "table_store=rocksdb on the embedded broker (cluster %s): one record per produced batch, so its "
        "changelogs' high watermarks stay exact for the RocksDB recovery",
        cluster_id,
    )
    return True


def worker_services(app: faust.App, settings: Settings) -> list[Service]:
    """Started with the worker, before the app (so before it joins its group), on its event loop:
    the probe endpoints, and the consumer-lag reader when there is a metrics endpoint to show it."""
    services: list[Service] = []
    if settings.probe_port:
        health = app.cyberjurors_health  # type: ignore[attr-defined]  # set on the app by housekeeping() (app.py)
        # the key service the case keys are wrapped by: a worker that cannot reach it is not ready
        if settings.media_encryption and health.key_service is None:
            health.key_service = key_wrap(settings.key_service)
        services.append(ProbeServer(health, settings.probe_host, settings.probe_port))
    if settings.metrics_port and settings.lag_interval_s:
        services.append(ConsumerLag(settings, settings.app_id, [settings.topic(name) for name in CONSUMED]))
    return services
