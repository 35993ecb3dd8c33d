"""A worker started with tracemalloc tracing (PYTHONTRACEMALLOC) writes a snapshot of its heap on
SIGUSR2, numbered per process: what bench/soak.py --tracemalloc diffs to find what grows per case."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import tracemalloc
from pathlib import Path

import pytest

from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.streams.worker import dump_snapshot
from cyberjurors.tooling.worker_process import WorkerProcess

pytestmark = pytest.mark.integration


def test_snapshots_are_numbered_per_process_and_load(tmp_path: Path):
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        first, second = dump_snapshot(tmp_path / "snaps"), dump_snapshot(tmp_path / "snaps")
    finally:
        if started:
            tracemalloc.stop()
    assert (first.name, second.name) == (f"{os.getpid()}-000.snap", f"{os.getpid()}-001.snap")
    assert not list((tmp_path / "snaps").glob("*.partial"))
    assert tracemalloc.Snapshot.load(str(second)).traces


def snapshots(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.snap")) if folder.exists() else []


async def test_a_tracing_worker_writes_a_snapshot_on_sigusr2_and_keeps_serving(settings, tmp_path: Path):
    await ensure_topics(settings)
    folder = settings.datadir / "tracemalloc"
    worker = WorkerProcess(settings, tmp_path / "worker.log", env={"PYTHONTRACEMALLOC": "1"}).start()
    try:
        assert await asyncio.to_thread(worker.wait_for, "Worker ready", timeout_s=240), worker.log_path.read_text()[
            -3000:
        ]
        for taken in (1, 2):
            os.kill(worker.process.pid, signal.SIGUSR2)  # type: ignore[union-attr]
            deadline = time.monotonic() + 120
            while len(snapshots(folder)) < taken and time.monotonic() < deadline and worker.alive():
                await asyncio.sleep(0.2)
            assert len(snapshots(folder)) == taken, worker.log_path.read_text()[-3000:]
        assert worker.alive()
        files = {
            stat.traceback[0].filename
            for stat in tracemalloc.Snapshot.load(str(snapshots(folder)[-1])).statistics("filename")
        }
        assert any(name.endswith(os.path.join("cyberjurors", "streams", "app.py")) for name in files)
    finally:
        await asyncio.to_thread(worker.stop)
