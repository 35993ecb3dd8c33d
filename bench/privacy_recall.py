"""Masking recall and false positives (issue 39): the Faker corpus of tests/privacy_corpus.py, larger.

Per locale, the share of each kind's probes masked as one placeholder of their kind (recall), the
share of each decoy kind's sentences masked at all (false positives), and the median time to mask
one probe, all probes of a row being the items of one case, masked once (no cached result).

Run: .venv/bin/python bench/privacy_recall.py [--probes 400] [--seed 0]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the corpus lives with the tests

from harness import machine, make_console, med, table
from tests import privacy_corpus as corpus

console = make_console(180)


def main(
    probes: int = typer.Option(400, help="values per kind and decoys per kind, per locale"), seed: int = 0
) -> None:
    console.print(f"{machine()}; {probes} probes per cell, seed {seed}")
    out = table(
        "recall per kind (floor 99%), false positives per decoy kind (ceiling 1%), median ms per probe",
        ["locale", *corpus.KINDS, *(f"{d} fp" for d in corpus.DECOYS), "ms"],
        left=("locale",),
    )
    for locale in corpus.LOCALES:
        cells, took = [], []
        for kind in corpus.KINDS:
            row = corpus.probes(locale, kind, probes, seed)
            started = time.perf_counter()
            missed = corpus.recall(locale, row)
            took.append((time.perf_counter() - started) / len(row))
            cells.append(f"{1 - len(missed) / len(row):.1%}")
        for kind in corpus.DECOYS:
            row = corpus.decoys(locale, kind, probes, seed)
            cells.append(f"{len(corpus.false_positives(locale, row)) / len(row):.1%}")
        out.add_row(locale, *cells, f"{med(took) * 1000:.1f}")
    console.print(out)


if __name__ == "__main__":
    typer.run(main)
