"""One topic hop on the embedded broker, by consumer long-poll setting (``kafka_fetch_max_wait_ms``).

Tansu holds an empty fetch for the whole wait instead of answering when data arrives, so the
time from a produce to the consumer seeing it grows with the wait; a case crosses six or more
hops. Side by side in one run, medians over --samples sends at irregular intervals.

Run: .venv/bin/python bench/broker_hop.py [--samples 20]
"""

from __future__ import annotations

import asyncio
import statistics
import time

import typer
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from rich.console import Console
from rich.table import Table

from cyberjurors.tooling.broker import embedded_broker

WAITS_MS = (1500, 500, 100, 50, 20)


async def hop_latencies(bootstrap: str, wait_ms: int, samples: int) -> list[float]:
    topic = f"hop-{wait_ms}"
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all")
    await producer.start()
    await producer.send_and_wait(topic, b"create")
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=None, fetch_max_wait_ms=wait_ms, auto_offset_reset="latest"
    )
    await consumer.start()
    await asyncio.sleep(1.0)
    took = []
    try:
        for i in range(samples):
            started = time.perf_counter()
            await producer.send_and_wait(topic, b"x")
            await consumer.getone()
            took.append(time.perf_counter() - started)
            await asyncio.sleep(0.05 + (i * 37 % 11) / 50)  # land at different points of the poll cycle
    finally:
        await consumer.stop()
        await producer.stop()
    return took


def main(samples: int = 20) -> None:
    table = Table(title="produce -> consume on the embedded broker")
    for column in ("fetch_max_wait_ms", "median hop (ms)", "p95 hop (ms)", "vs 50 ms setting"):
        table.add_column(column, justify="right")
    with embedded_broker() as bootstrap:
        results = {w: asyncio.run(hop_latencies(bootstrap, w, samples)) for w in WAITS_MS}
    base = statistics.median(results[50])
    for wait, took in results.items():
        p95 = statistics.quantiles(took, n=20)[-1]
        table.add_row(
            str(wait),
            f"{statistics.median(took) * 1000:.0f}",
            f"{p95 * 1000:.0f}",
            f"{statistics.median(took) / base:.1f}x",
        )
    Console().print(table)


if __name__ == "__main__":
    typer.run(main)
