"""The precedent base in the running pipeline: a real worker retrieves from an embedded index
built from examples/precedents, jurors get persona-specific memories and cite guideline
versions, and confirmed outcomes on disputes.outcomes change the base."""

from __future__ import annotations

import asyncio

import pytest

from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.precedents.build import build_precedents
from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.embeddings import load_embedder
from cyberjurors.schemas import CaseFile, DeadLetter, OutcomeReported, Verdict
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, read_topic, worker_process

pytestmark = pytest.mark.integration


async def test_worker_retrieves_precedents_and_learns_from_outcomes(settings, tmp_path):
    settings = settings.model_copy(update={"precedent_backend": "embedded", "jurors": 9})
    embedder = load_embedder(settings.embedding.model)
    index = await EmbeddedIndex.open(settings.precedent_dir, embedder)
    report = await build_precedents([EXAMPLES / "precedents"], settings, OfflineLLM(), index, embedder)
    assert report.cases_indexed >= 40 and report.guidelines_created > 0
    await index.close()

    files = [
        EXAMPLES / "cases" / f"{name}.json"
        for name in ("clot-002-jacket-signed-delivery", "food-001-granola-past-best-before")
    ]
    events = read_events(files)
    ids = {e.case_id for e in events}
    async with worker_process(settings, tmp_path / "worker.log") as worker:
        await produce(settings, events)
        found = await read_topic(settings, "disputes.verdicts", until=2, timeout_s=180)
        clue_files = await read_topic(settings, "disputes.clues", until=2, timeout_s=5)
        verdicts = {k: Verdict.model_validate_json(v) for k, v in found}
        assert set(verdicts) == ids

        # the real jury agreed with us on one case; an outcome for a case we never saw is a dead letter
        agreed = verdicts[events[0].case_id]
        real = {"buyer": 3, "seller": 14} if agreed.winner == "seller" else {"buyer": 14, "seller": 3}
        outcomes = [
            OutcomeReported(case_id=agreed.case_id, votes=real),
            OutcomeReported(case_id="never-seen", votes={"buyer": 9, "seller": 8}),
        ]
        await produce(
            settings,
            [Outgoing(o.case_id, o.model_dump_json().encode(), "outcome") for o in outcomes],
            topic="disputes.outcomes",
        )
        letters = await read_topic(settings, "disputes.dlq", until=1, timeout_s=60)
        await asyncio.sleep(3)  # the agreeing outcome is applied beside the dead letter
        assert worker.alive()

    for verdict in verdicts.values():
        assert verdict.precedent_coverage in ("high", "low")
        assert verdict.precedents_seen and all("@" in ref for ref in verdict.precedents_seen)
        assert set(verdict.cited_precedents) <= set(verdict.precedents_seen)
    for _, value in clue_files:
        precedents = CaseFile.model_validate_json(value).precedents
        assert precedents is not None and precedents.cases and precedents.guidelines
        pool = {g.id for g in precedents.guidelines}
        memories = [tuple(precedents.memory[j]) for j in range(settings.jurors)]
        assert all(len(m) == settings.memory_k and set(m) <= pool for m in memories)
        assert len(set(memories)) >= 2, "every juror got the same guidelines"

    [letter] = [DeadLetter.model_validate_json(v) for k, v in letters]
    assert (letter.reason, letter.stage, letter.key) == ("unknown_case", "outcome", "never-seen")

    index = await EmbeddedIndex.open(settings.precedent_dir, embedder)
    [added] = await index.get([f"case:{agreed.case_id}"])
    assert added.case.winner == agreed.winner and added.case.votes.model_dump() == real
    assert agreed.cited_precedents, "the majority cited no guideline: nothing to learn from"
    for ref in agreed.cited_precedents:
        gid, version = ref.split("@")
        [doc] = await index.get([f"guideline:{gid}"])
        assert doc.guideline.version == int(version) + 1
        assert doc.guideline.history[-1].case_id == agreed.case_id
    await index.close()
