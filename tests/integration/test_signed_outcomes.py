"""Human-panel decisions a worker can trust (issue 25), on a real broker and a real worker: anyone may
write to disputes.outcomes, but a ``source: human_panel`` outcome moves the drift counters and
teaches the precedent base only when it carries a signature by the console's key. An unsigned one
and a forged one (signed, then its votes turned) are dead letters that change nothing; the one the
console signed is counted and learned from. The platform's own 17-vote outcome, which anyone may
send, sent first for the escalated case is held across a restart of the worker, never counted or
learned from ahead of the panel's decision, and ends as an ``outcome_superseded`` dead letter."""

from __future__ import annotations

import asyncio
import base64
from typing import NamedTuple

import pytest

from cyberjurors.config import Settings
from cyberjurors.evidence.signing import sign
from cyberjurors.jury.escalation import escalation_id
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.precedents.build import build_precedents
from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.embeddings import Embedder, load_embedder
from cyberjurors.schemas import DeadLetter, DecidedBy, OutcomeReported, Verdict, Votes
from cyberjurors.tooling.broker import free_port
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, read_topic, worker_process
from ..unit.observability.test_metrics import Samples, scrape, scrape_until, value

pytestmark = pytest.mark.integration

KEY = "the console's outcome signing key, 32+ chars"
# what counting an outcome moves: the drift counters and the human panels' agreement
DRIFT = (
    "cyberjurors_outcomes_total",
    "cyberjurors_outcome_vote_error_count",
    "cyberjurors_human_decisions_total",
)


def drift(samples: Samples) -> dict[str, float]:
    return {name: value(samples, name) for name in DRIFT}


class Holdings(NamedTuple):
    """What the precedent base holds that learning from a case's outcome could change."""

    cases: int
    guidelines: int
    this_case: list[Votes]  # the case as a precedent, with the votes it was confirmed by
    versions: dict[str, tuple[int, float]]  # guideline id -> (version, confidence)


async def holdings(settings: Settings, embedder: Embedder, case_id: str, guidelines: list[str]) -> Holdings:
    index = await EmbeddedIndex.open(settings.precedent_dir, embedder)  # beside the worker's: flock-safe
    try:
        docs = await index.get([f"guideline:{g}" for g in guidelines])
        return Holdings(
            cases=await index.count("case"),
            guidelines=await index.count("guideline"),
            this_case=[d.case.votes for d in await index.get([f"case:{case_id}"]) if d.case],
            versions={d.guideline.id: (d.guideline.version, d.guideline.confidence) for d in docs if d.guideline},
        )
    finally:
        await index.close()


async def test_a_worker_counts_and_learns_a_human_panels_decision_only_when_the_console_signed_it(settings, tmp_path):
    port = free_port()
    settings = settings.model_copy(
        update={
            "precedent_backend": "embedded",
            "jurors": 5,
            "rounds": 1,
            "escalation_margin": 18,  # every verdict is escalated
            "metrics_port": port,
            "outcome_signing_key": KEY,
        }
    )
    embedder = load_embedder(settings.embedding.model)
    index = await EmbeddedIndex.open(settings.precedent_dir, embedder)
    await build_precedents([EXAMPLES / "precedents"], settings, OfflineLLM(), index, embedder)
    await index.close()
    events = read_events([EXAMPLES / "cases" / "clot-002-jacket-signed-delivery.json"])
    log = tmp_path / "worker.log"

    async with worker_process(settings, log) as worker:
        await produce(settings, events)
        [(case_id, sent)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=180)
        decided = Verdict.model_validate_json(sent)
        assert decided.escalated and decided.cited_precedents, "nothing a panel's decision could teach"
        cited = [ref.split("@")[0] for ref in decided.cited_precedents]
        base = await holdings(settings, embedder, case_id, cited)
        counted = drift(await scrape_until(port, lambda s: "cyberjurors_outcomes_total" in {n for n, _ in s}))
        assert (
            base.this_case == []
            and set(base.versions) == set(cited)
            and counted["cyberjurors_human_decisions_total"] == 0
        )

        upheld = Votes(buyer=0, seller=3) if decided.winner == "seller" else Votes(buyer=3, seller=0)
        console = sign(  # the console's record of the panel: upheld our verdict
            OutcomeReported(
                case_id=case_id,
                votes=upheld,
                source="human_panel",
                escalation_id=escalation_id(decided),
                decided_by=DecidedBy(reviewer="ann", role="reviewer"),
            ),
            KEY,
        )
        overturned = Votes(buyer=upheld.seller, seller=upheld.buyer)
        unsigned = console.model_copy(update={"signature": None, "votes": overturned})
        forged = console.model_copy(update={"votes": overturned})  # the console's signature, the votes turned
        # what anyone who can write to the topic may send: the platform's 17-vote jury, overturning ours
        platform = OutcomeReported(
            case_id=case_id, votes=Votes(buyer=17 * overturned.buyer // 3, seller=17 * overturned.seller // 3)
        )
        pre_empting = platform.model_dump_json().encode()
        await produce(
            settings,
            [Outgoing(case_id, o.model_dump_json().encode(), "outcome") for o in (unsigned, forged)]
            + [Outgoing(case_id, pre_empting, "outcome")],
            topic="disputes.outcomes",
        )
        found = await read_topic(settings, "disputes.dlq", until=2, timeout_s=60)
        letters = [DeadLetter.model_validate_json(v) for _, v in found]
        assert [(d.stage, d.reason, d.replayable, d.key) for d in letters] == [
            ("outcome", "unsigned_outcome", False, case_id),
            ("outcome", "forged_outcome", False, case_id),
        ], log.read_text()[-3000:]
        for _ in range(150):  # the platform's outcome, after them: held, no letter
            if "is held for the human panel's decision" in log.read_text():
                break
            await asyncio.sleep(0.2)
        assert drift(scrape(port)) == counted, "a refused or held outcome moved the drift counters"
        assert await holdings(settings, embedder, case_id, cited) == base, "a refused or held outcome taught the base"

    # a restart: the held outcome is in the stage-results changelog, and the new worker finds it
    after = tmp_path / "restarted.log"
    async with worker_process(settings, after) as worker:
        await produce(
            settings,
            [Outgoing(case_id, console.model_dump_json().encode(), "outcome")],
            topic="disputes.outcomes",
        )
        moved = drift(
            await scrape_until(
                port, lambda s: value(s, "cyberjurors_outcomes_total") > counted["cyberjurors_outcomes_total"]
            )
        )
        assert moved == {name: n + 1 for name, n in counted.items()}, after.read_text()[-3000:]
        assert value(scrape(port), "cyberjurors_human_decisions_total", agreement="agree") == 1
        learned = await holdings(settings, embedder, case_id, cited)
        for _ in range(100):  # learning follows the count: the case added, then the cited guidelines
            if learned.this_case and learned.versions != base.versions:
                break
            await asyncio.sleep(0.2)
            learned = await holdings(settings, embedder, case_id, cited)
        assert worker.alive()
        found = await read_topic(settings, "disputes.dlq", until=3, timeout_s=60)
        superseded = DeadLetter.model_validate_json(found[2][1])
        assert (superseded.reason, superseded.replayable) == ("outcome_superseded", False), after.read_text()[-3000:]
        assert base64.b64decode(superseded.original_base64) == pre_empting  # kept as it was sent
        assert len(await read_topic(settings, "disputes.dlq", until=4, timeout_s=3)) == 3  # no other letter

    assert learned.this_case == [upheld] and learned.cases == base.cases + 1
    for gid, (version, confidence) in base.versions.items():  # each guideline cited was confirmed
        assert learned.versions[gid][0] == version + 1 and learned.versions[gid][1] > confidence, gid
    refused = [line for line in log.read_text().splitlines() if "a human panel's decision refused" in line]
    assert [line.split("refused, ")[-1].strip() for line in refused] == ["unsigned_outcome", "forged_outcome"]
    assert all(case_id in line for line in refused)
