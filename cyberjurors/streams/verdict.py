"""The verdict: decided once from the last round, stored, and sent to disputes.verdicts; an
escalated one's escalation to disputes.escalations.

Verdict metrics (the drift counters among them) count a verdict only when it is first decided;
a replay re-sends the stored bytes uncounted. The same goes for a second instance's verdict (an
appeal's), stored under ``case_id/appeal/verdict``, which counts as an appeal verdict (reversed or
upheld), not in ``cyberjurors_verdicts_total``: the seller-win share is the first instance's.
Deciding may call models (the verifier, JURIS: ``jury.stages.verdict_stage``); those calls happen
before the verdict is stored, so a redelivered input re-sends the stored verdict and repeats none
of them.

An escalation is stored before its verdict and holds it: a worker that dies between the two takes
the verdict from the stored escalation when the input comes again, so the verdict and its
escalation are always the pair first decided (same ids, same bytes), and a redelivered input of a
decided case re-sends both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..config import Settings
from ..jury.escalation import escalation_event
from ..jury.verdict import decide
from ..observability import metrics, tracing
from ..schemas import CaseFile, Escalation, Verdict, now
from ..state.results import StageResults
from .dead_letters import DeadLetters, OutputTooLarge, Sender, hand_on, send_bounded

log = logging.getLogger("cyberjurors.streams")


Decide = Callable[[CaseFile], Awaitable[Verdict]]


def stages(instance: int) -> tuple[str, str]:
    """The stage-results keys of an instance's verdict and escalation."""
    return ("verdict", "escalation") if instance == 1 else ("appeal/verdict", "appeal/escalation")


@dataclass(eq=False)
class Verdicts:
    """``work`` decides a settled case's verdict (the worker's ``StageWork.verdict``, with its
    model and jury); without it the verdict is the final round's, decided without a model call."""

    settings: Settings
    results: StageResults
    out: Sender
    in_flight: metrics.CasesInFlight
    work: Decide | None = None
    escalations: Sender | None = None
    dead_letters: DeadLetters | None = None

    async def resend(self, case_id: str, instance: int = 1) -> bool:
        """Re-send the case's stored verdict (and escalation), uncounted; False when it has none
        (not decided, or expired)."""
        verdict_stage, escalation_stage = stages(instance)
        stored = self.results.stored(case_id, verdict_stage)
        if stored is None:
            return False
        tracing.mark(replayed=True)
        await self.out.send(key=case_id.encode(), value=stored, headers=tracing.headers())
        escalation = self.results.stored(case_id, escalation_stage)
        if escalation is not None and self.escalations is not None:
            await self.escalations.send(key=case_id.encode(), value=escalation, headers=tracing.headers())
        self.finish(case_id, instance)  # left over if a worker died between storing the verdict and this
        decided = Verdict.model_validate_json(stored)
        tracing.mark(verdict_id=decided.verdict_id, winner=decided.winner)
        log.info("case %s: verdict %s, votes %s (re-sent)", case_id, decided.winner, decided.votes)
        return True

    def finish(self, case_id: str, instance: int) -> None:
        if instance == 1:
            self.results.finish(case_id)
            self.in_flight.discard(case_id)
        else:
            self.results.finish_appeal(case_id)

    async def publish(self, case_file: CaseFile, event: Any = None, work: Decide | None = None) -> Verdict:
        """Decide, store and send the verdict (and its escalation), then delete the case's intermediate
        stage results. ``event`` is the input, for a dead letter if the escalation cannot be sent;
        ``work`` decides in place of ``self.work`` (an appeal's, with its panel)."""
        case_id = case_file.case_id
        instance = 2 if case_file.appeal is not None else 1
        verdict_stage, escalation_stage = stages(instance)
        if await self.resend(case_id, instance):  # a replay: re-sent, not counted again
            stored = self.results.stored(case_id, verdict_stage)  # resend() found it: not None
            return Verdict.model_validate_json(stored)  # type: ignore[arg-type]
        started = time.perf_counter()
        decided, escalation = await self.decide(case_file, escalation_stage, event, work or self.work)
        tracing.mark(verdict_id=decided.verdict_id, winner=decided.winner)
        # a first-instance verdict may be appealed: its case is kept for the appeal window at least
        hold = max(0.0, self.settings.appeal_window_s - self.settings.state_retention_s) if instance == 1 else 0.0
        await hand_on(self.results, case_id, verdict_stage, decided.model_dump_json().encode(), self.out, hold_s=hold)
        if escalation is not None and self.escalations is not None:
            await send_bounded(
                self.escalations, case_id.encode(), escalation, self.settings.intake_limits.max_event_bytes
            )
        self.finish(case_id, instance)  # after the verdict is stored: a crash in between re-sends it
        metrics.STAGE_LATENCY.labels("verdict").observe(time.perf_counter() - started)
        self.count(decided, case_file)
        log.info(
            "case %s: verdict %s (instance %d), votes %s%s%s",
            case_id,
            decided.winner,
            instance,
            decided.votes,
            " (per-case budget reached)" if decided.budget_reached else "",
            f", escalated: {', '.join(decided.escalation_reasons)}" if decided.escalated else "",
        )
        return decided

    async def decide(
        self, case_file: CaseFile, escalation_stage: str, event: Any, work: Decide | None
    ) -> tuple[Verdict, bytes | None]:
        """The verdict and its escalation's bytes (stored before the verdict); an escalation stored
        by a worker that died before storing its verdict gives the verdict back (and repeats no call)."""
        case_id = case_file.case_id
        stored = self.results.stored(case_id, escalation_stage)
        if stored is not None:
            return Escalation.model_validate_json(stored).verdict, stored
        decided = await work(case_file) if work else decide(case_file, self.settings, now())
        if not decided.escalated:
            return decided, None
        for trim in (False, True):  # whole, else with the earlier rounds' ballots left out
            value = escalation_event(case_file, decided, self.settings, decided.decided_at, trim).model_dump_json()
            try:
                self.results.put(case_id, escalation_stage, value.encode())
                return decided, value.encode()
            except OutputTooLarge as err:
                detail = err.detail
        if self.dead_letters is not None and event is not None:  # the verdict still goes out, marked escalated
            await self.dead_letters.write(
                event,
                "escalation",
                "output_too_large",
                f"the escalation of verdict "
                f"{decided.verdict_id} does not fit even without the earlier rounds' ballots: "
                f"{detail}",
                replayable=False,
            )
        return decided, None

    def count(self, decided: Verdict, case_file: CaseFile) -> None:
        metrics.record_escalation(decided.escalation_reasons, decided.instance)
        metrics.record_budget_stops(decided.budget_stops)
        metrics.record_verification(decided.verification)
        if case_file.appeal is not None:
            reversed_ = decided.winner != case_file.appeal.first_instance.winner
            metrics.APPEAL_VERDICTS.labels("reversed" if reversed_ else "upheld").inc()
            return
        metrics.record_consistency(decided.precedent_consistency)
        metrics.record_verdict(
            decided.category,
            decided.winner,
            decided.margin,
            decided.rounds_used,
            decided.early_stopped,
            decided.latency_s,
        )
        metrics.record_ballots(decided.votes_by_model, decided.winner)
