"""Sealed records (issue 42 item 5): what ``payload_encryption`` costs per record and per case.

Each sample case's case file (its JSON as intake sends it on, the largest record a case writes) is
sealed and opened under its case's key, with the key held (``key_service.cache_s`` > 0, a worker's
usual state) and read from the local key store every time (``cache_s = 0``); the medians of
``--repeat`` runs, in microseconds. A case writes each stage's record twice, to its topic and to the
``stage-results`` table (about ``--records`` in all, with two rounds and two letters): the per-case
figure is that count times the median seal, plus as many opens (each record is read once).

Run: .venv/bin/python bench/sealing.py [--repeat 200] [--records 16]
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import typer

from cyberjurors.evidence.media_store import LocalMediaStore
from cyberjurors.evidence.records import RecordSeal
from cyberjurors.evidence.sealing import KeyRing
from cyberjurors.schemas import CaseFile, now
from harness import example_cases, machine, make_console, med, table

console = make_console(120)


async def _per_record(seal: RecordSeal, case_id: str, value: bytes, repeat: int) -> tuple[float, float]:
    sealed, opened = [], []
    for _ in range(repeat):
        started = time.perf_counter()
        box = await seal.seal(case_id, value)
        sealed.append(time.perf_counter() - started)
        started = time.perf_counter()
        await seal.open(case_id, box)
        opened.append(time.perf_counter() - started)
    return med(sealed) * 1e6, med(opened) * 1e6


async def _run(repeat: int, records: int) -> None:
    cases = example_cases()
    out = table(
        f"seal / open per record, median of {repeat} (µs); per case: {records} records sealed and opened (ms)",
        ["key", "record bytes (median)", "seal µs", "open µs", "per case ms"],
        left=("key",),
    )
    values = [(c.case_id, CaseFile(case=c, received_at=now()).model_dump_json().encode()) for c in cases]
    for cache_s, name in ((30.0, "held (cache_s 30)"), (0.0, "read each time (cache_s 0)")):
        with tempfile.TemporaryDirectory() as folder:
            ring = KeyRing(LocalMediaStore(Path(folder), 86400 * 30), "s" * 32, cache_s=cache_s)
            timed = [await _per_record(RecordSeal(ring), case_id, value, repeat) for case_id, value in values]
        seal_us, open_us = med([s for s, _ in timed]), med([o for _, o in timed])
        size = med([float(len(v)) for _, v in values])
        out.add_row(
            name, f"{size:.0f}", f"{seal_us:.1f}", f"{open_us:.1f}", f"{records * (seal_us + open_us) / 1000:.2f}"
        )
    console.print(out)


def main(repeat: int = typer.Option(200), records: int = typer.Option(16)) -> None:
    console.print(machine())
    asyncio.run(_run(repeat, records))


if __name__ == "__main__":
    typer.run(main)
