"""The verdict: decided once from the last round, stored, and sent to disputes.verdicts.

Verdict metrics and the seller-share drift window count a verdict only when it is first
decided; a replay re-sends the stored bytes uncounted. Deciding may call models (the verifier,
JURIS: ``jury.stages.verdict_stage``); those calls happen before the verdict is stored, so a
redelivered input re-sends the stored verdict and repeats none of them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from .. import metrics, tracing
from ..config import Settings
from ..jury.verdict import decide
from ..schemas import CaseFile, Verdict, now
from .dead_letters import Sender
from .stage_hop import StageResults

log = logging.getLogger("cyberjurors.streams")


Decide = Callable[[CaseFile], Awaitable[Verdict]]


class Verdicts:
    """``work`` decides a settled case's verdict (the worker's ``StageWork.verdict``, with its
    model and jury); without it the verdict is the final round's, decided without a model call."""

    def __init__(self, settings: Settings, results: StageResults, out: Sender, in_flight: metrics.CasesInFlight,
                 drift: metrics.Drift, work: Decide | None = None):
        self.settings = settings
        self.work = work
        self.results = results
        self.out = out
        self.in_flight = in_flight
        self.drift = drift

    async def resend(self, case_id: str) -> bool:
        """Re-send the case's stored verdict, uncounted; False when it has none (not decided, or expired)."""
        stored = self.results.stored(case_id, "verdict")
        if stored is None:
            return False
        tracing.mark(replayed=True)
        await self.out.send(key=case_id.encode(), value=stored, headers=tracing.headers())
        self.results.finish(case_id)  # left over if a worker died between storing the verdict and this
        self.in_flight.discard(case_id)
        decided = Verdict.model_validate_json(stored)
        tracing.mark(verdict_id=decided.verdict_id, winner=decided.winner)
        log.info("case %s: verdict %s, votes %s (re-sent)", case_id, decided.winner, decided.votes)
        return True

    async def publish(self, case_file: CaseFile) -> None:
        """Decide, store and send the verdict, then delete the case's intermediate stage results."""
        case_id = case_file.case_id
        if await self.resend(case_id):  # a replay: re-sent, not counted again
            return
        started = time.perf_counter()
        decided = await self.work(case_file) if self.work else decide(case_file, self.settings, now())
        tracing.mark(verdict_id=decided.verdict_id, winner=decided.winner)
        await self.results.hand_on(case_id, "verdict", decided.model_dump_json().encode(), self.out)
        self.results.finish(case_id)  # after the verdict is stored: a crash in between re-sends it
        self.in_flight.discard(case_id)
        metrics.STAGE_LATENCY.labels("verdict").observe(time.perf_counter() - started)
        metrics.record_verdict(decided.category, decided.winner, decided.margin, decided.rounds_used,
                               decided.early_stopped, decided.latency_s)
        metrics.record_budget_stops(decided.budget_stops)
        metrics.record_ballots(decided.votes_by_model, decided.winner)
        metrics.record_verification(decided.verification)
        self.drift.verdict(decided.case_id, decided.winner)
        log.info("case %s: verdict %s, votes %s%s", case_id, decided.winner, decided.votes,
                 " (per-case budget reached)" if decided.budget_reached else "")
