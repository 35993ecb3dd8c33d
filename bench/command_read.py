"""How long one ``cyberjurors dlq`` takes on an empty dead-letter topic, this checkout beside
another (a plain checkout folder, run with this venv and ``PYTHONPATH`` at it), alternately on one
embedded broker: the command's imports, its consumer, and how it knows it has read to the end.

Run: .venv/bin/python bench/command_read.py OTHER_CHECKOUT [--reps 7]
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer

from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.kafka.producers import on_embedded
from cyberjurors.tooling.broker import start_broker, stop_process
from cyberjurors.tooling.worker_process import child_env


def main(
    other: Path,
    reps: int = typer.Option(7, help="runs of each checkout, alternately"),
) -> None:
    roots = {f"other ({other.name})": str(other.resolve()), "this": str(Path(__file__).resolve().parents[1])}
    times: dict[str, list[float]] = {name: [] for name in roots}
    work = Path(tempfile.mkdtemp())
    broker, bootstrap = start_broker(log=work / "broker.log")
    try:
        s = Settings(kafka_bootstrap_servers=bootstrap, kafka_profile="local", topic_prefix="p.", datadir=work / "f")
        s = s.model_copy(update=on_embedded(s))
        asyncio.run(ensure_topics(s))
        env = child_env(s)
        for _ in range(reps):
            for name, root in roots.items():
                t = time.monotonic()
                r = subprocess.run(
                    [sys.executable, "-m", "cyberjurors", "dlq"],
                    env=env | {"PYTHONPATH": root},
                    capture_output=True,
                    text=True,
                    cwd=root,
                )
                if r.returncode != 0:
                    raise SystemExit(f"{name}: cyberjurors dlq exited {r.returncode}: {r.stderr[-500:]}")
                times[name].append(time.monotonic() - t)
    finally:
        stop_process(broker)
    for name, v in times.items():
        print(f"{name}: median {statistics.median(v):.2f} s (min {min(v):.2f}, max {max(v):.2f}) over {len(v)}")
    b, a = (statistics.median(v) for v in times.values())
    print(f"this / other: {a / b:.2f}")


if __name__ == "__main__":
    typer.run(main)
