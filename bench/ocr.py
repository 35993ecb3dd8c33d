"""Text in images (issue 39 item 4): what ``privacy.ocr`` costs per image, and what it leaves readable.

Generated delivery labels (tests/ocr_labels.py: a Faker name, street address and phone, an order
number) in four locales, each loaded as the model would receive it (``max_image_side``) and read by
``evidence/ocr.py`` with nothing cached: the median wall seconds and Tesseract CPU seconds per image,
and, reading what the model would receive with Tesseract again, how many labels still show a value
(a name's or a street's word, a phone's last seven digits) and how many lost their order number.

Run: .venv/bin/python bench/ocr.py [--labels 8]
"""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import time
from pathlib import Path

import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the labels live with the tests

from cyberjurors.config import Settings
from cyberjurors.evidence import ocr
from cyberjurors.evidence.media import _image_part as image_part
from cyberjurors.evidence.media import decoding
from cyberjurors.evidence.privacy import minimise
from harness import machine, make_console, med, table
from tests import factories
from tests.ocr_labels import LOCALES, label
from tests.unit.evidence.test_ocr import leaks

console = make_console(140)


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


async def _run(labels: int, s: Settings) -> None:
    out = table(
        f"privacy.ocr per image ({labels} labels a locale, {s.max_image_side} px side)",
        ["locale", "median s", "median tesseract CPU s", "labels with a value readable", "order lost"],
        left=("locale",),
    )
    view = minimise(factories.case(buyer="The parcel never came."), s).case
    for locale in LOCALES:
        took, cpu, leaked, lost = [], [], 0, 0
        for seed in range(labels):
            shown = label(locale, seed)
            part = image_part(shown.png, "image/png", s, "evidence b2 (buyer, image)", None)
            started, before = time.perf_counter(), _children_cpu()
            read = await decoding(s, ocr.redact, part, view, s)  # not read_image: nothing cached
            took.append(time.perf_counter() - started)
            cpu.append(_children_cpu() - before)
            again = subprocess.run(["tesseract", "-", "-", "-l", "eng"], input=read.image.data, capture_output=True)
            text = again.stdout.decode()
            leaked += bool(leaks(text, shown))
            lost += shown.order not in text
        out.add_row(locale, f"{med(took):.3f}", f"{med(cpu):.3f}", f"{leaked}/{labels}", f"{lost}/{labels}")
    console.print(out)


def main(labels: int = typer.Option(8, help="labels per locale")) -> None:
    if ocr.unavailable():
        raise SystemExit(ocr.unavailable())
    console.print(machine())
    asyncio.run(_run(labels, factories.settings(privacy={"ocr": True})))


if __name__ == "__main__":
    typer.run(main)
