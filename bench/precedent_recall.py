"""The precedents the evaluation uses, retrieved by the previous store and by the SQLite store.

The evaluation's precedent base is built from the labelled examples (``examples/precedents``, the
eval's ``--precedents-from``) with the offline stand-in distilling the guidelines. Here it is built
once into the previous store (``precedents/legacy.py``, as the code before the SQLite store did),
migrated into the SQLite store (same documents, same vectors), and then every sample case
(``examples/cases``) is retrieved from both exactly as a worker retrieves (``retrieve``: the top-5
cases of its category, the guideline pool of 12, widened when the category has too few, and each
juror's memory of 3). Reported per case: the recall of the previous store's cases, guidelines and
memories in the SQLite store's (what the previous store gave the eval that the new one also gives),
and whether the ranking is the same.

Run: .venv/bin/python bench/precedent_recall.py
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cyberjurors.assembly import build_llm
from cyberjurors.config import Settings
from cyberjurors.jury.rounds import Jury
from cyberjurors.precedents.build import build_precedents
from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.embeddings import load_embedder
from cyberjurors.precedents.legacy import LegacyIndex
from cyberjurors.precedents.migrate import migrate
from cyberjurors.precedents.retrieval import PersonaMatcher, retrieve
from harness import EXAMPLES, example_cases, make_console, table

console = make_console(200)


def recall(old: list[str], new: list[str]) -> float:
    return len(set(old) & set(new)) / len(old) if old else 1.0


async def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="cj-recall-"))
    try:
        settings = Settings(llm_backend="offline", offline_latency_s=0, precedent_dir=work / "legacy")
        embedder = load_embedder()
        legacy = await LegacyIndex.open(work / "legacy", embedder)
        llm = build_llm(settings)
        try:
            built = await build_precedents([EXAMPLES / "precedents"], settings, llm, legacy, embedder)
        finally:
            await llm.aclose()
        await legacy.close()
        moved = await migrate(work / "legacy", work / "sqlite")
        console.print(
            f"built from {EXAMPLES / 'precedents'}: {built.cases_indexed} cases, {built.guidelines_created} "
            f"guidelines created ({built.guidelines_merged} merged); migrated {moved.written} documents"
        )
        stores = {
            "legacy": await LegacyIndex.open(work / "legacy", embedder, create=False),
            "sqlite": await EmbeddedIndex.open(work / "sqlite", embedder, create=False),
        }
        matcher = PersonaMatcher(Jury.from_settings(settings).personas, embedder)
        rows = []
        for case in example_cases():
            got = {name: await retrieve(case, None, index, matcher, settings) for name, index in stores.items()}
            old, new = got["legacy"], got["sqlite"]
            memories = [recall(ids, new.memory.get(juror, [])) for juror, ids in old.memory.items()]
            rows.append(
                (
                    case.case_id,
                    case.metadata.category,
                    recall([c.id for c in old.cases], [c.id for c in new.cases]),
                    recall([g.id for g in old.guidelines], [g.id for g in new.guidelines]),
                    float(np.mean(memories)) if memories else 1.0,
                    [c.id for c in old.cases] == [c.id for c in new.cases]
                    and [g.id for g in old.guidelines] == [g.id for g in new.guidelines],
                    f"{old.coverage}/{new.coverage}",
                )
            )
        out = table(
            "recall of the previous store's retrievals in the SQLite store's, per sample case",
            (
                "case",
                "category",
                "cases (top 5)",
                "guideline pool (12)",
                "memories (per juror)",
                "same order",
                "coverage",
            ),
            left=("case", "category"),
        )
        for case_id, category, rc, rg, rm, same, coverage in rows:
            out.add_row(case_id, category, f"{rc:.2f}", f"{rg:.2f}", f"{rm:.2f}", "yes" if same else "no", coverage)
        console.print(out)
        for i, what in ((2, "cases"), (3, "guideline pool"), (4, "memories")):
            values = [r[i] for r in rows]
            console.print(f"{what}: mean recall {np.mean(values):.3f}, min {min(values):.2f}")
        console.print(f"same order, cases and pool: {sum(r[5] for r in rows)} of {len(rows)} cases")
        for index in stores.values():
            await index.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
