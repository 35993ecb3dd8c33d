"""One pipeline stage between two topics, and the table of what each stage sent on.

A hop parses the incoming case file once, runs the stage, stores the output's JSON in
``stage-results`` and sends the same bytes on. A worker that dies and replays its input finds
the stored output and re-sends it instead of calling the model again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from ..config import Settings
from ..errors import for_people
from ..jury import stages
from ..jury.rounds import Jury
from ..llm.port import LLM, LLMError
from ..observability import metrics, tracing
from ..precedents.base import PrecedentBase
from ..schemas import CaseFile, Verdict
from ..state.results import StageResults
from .dead_letters import DeadLetters, OutputTooLarge, Sender, bug, hand_on

log = logging.getLogger("cyberjurors.streams")

Work = Callable[[CaseFile], Awaitable[CaseFile]]


class StageHop:
    """``resend_verdict(case_id)`` re-sends a decided case's stored verdict (False if it has none):
    a redelivered input of a decided case, whose intermediate results are gone, ends there."""

    def __init__(
        self,
        results: StageResults,
        dead_letters: DeadLetters,
        in_flight: metrics.CasesInFlight,
        resend_verdict: Callable[[str], Awaitable[bool]] | None = None,
    ):
        self.results = results
        self.dead_letters = dead_letters
        self.in_flight = in_flight
        self.resend_verdict = resend_verdict

    async def __call__(self, event: Any, stage: str, out: Sender, work: Work) -> None:
        """Parse, then run: what the focus and clues agents do with each event, in the stage's span."""
        with tracing.consuming(event, stage):
            case_file = await self.parse(event, stage)
            if case_file is not None:
                tracing.name_case(case_file.case_id)
                await self.run(event, case_file, stage, out, work)

    async def parse(self, event: Any, stage: str) -> CaseFile | None:
        """The event's case file, or None once it is dead-lettered (not replayable: the same
        bytes would fail to parse again)."""
        try:
            return CaseFile.model_validate_json(event.value)
        except ValidationError as err:
            await self.dead_letters.write(event, stage, "invalid_case_file", for_people(err), replayable=False)
            return None

    async def run(self, event: Any, case_file: CaseFile, stage: str, out: Sender, work: Work) -> None:
        """Run ``stage`` on an already parsed case file; its latency is measured only when it really works."""
        self.in_flight.add(case_file.case_id, event.message.partition)  # again after a restart's replay
        if self.resend_verdict is not None and await self.resend_verdict(case_file.case_id):
            return  # decided: its verdict, not a stage output kept for an appeal, goes out again
        stored = self.results.stored(case_file.case_id, stage)
        if stored is not None:
            log.info("case %s: %s already done, re-sending its output", case_file.case_id, stage)
            tracing.mark(replayed=True)  # under the redelivered input's span: the case's trace
            await out.send(key=case_file.case_id.encode(), value=stored, headers=tracing.headers())
            return
        if not await self.fresh(event, case_file.case_id, stage):
            return
        started = time.perf_counter()
        try:
            result = await work(case_file)
        except LLMError as err:  # failed after the backend's retries: may work when replayed
            await self.dead_letters.write(event, stage, f"llm_{err.kind}", for_people(err), replayable=err.replayable)
            return
        except Exception as err:  # a bug or an unexpected failure must not stop the worker
            log.exception("case %s: %s failed", case_file.case_id, stage)
            await self.dead_letters.write(event, stage, "stage_failed", bug(err), replayable=True)
            return
        metrics.STAGE_LATENCY.labels(metrics.stage_label(stage)).observe(time.perf_counter() - started)
        try:
            await hand_on(self.results, result.case_id, stage, result.model_dump_json().encode(), out)
        except OutputTooLarge as err:  # the same case would grow the same way
            await self.dead_letters.write(event, stage, "output_too_large", err.detail, replayable=False)

    async def fresh(self, event: Any, case_id: str, stage: str) -> bool:
        """Whether the stage should run (its case is not decided: ``run`` re-sent the verdict then):
        not when the input is older than the state retention, so its case's state may have expired:
        a re-read of old history must not re-run the jury unnoticed. That one is dead-lettered as
        replayable: a replay is sent anew and runs."""
        sent_at = getattr(event.message, "timestamp", None)
        if sent_at is not None and self.results.older_than_retention(sent_at):
            age_h = (self.results.clock() - sent_at) / 3600
            await self.dead_letters.write(
                event,
                stage,
                "state_expired",
                f"this input was sent {age_h:.1f} h ago, more than state_retention_s "
                f"({self.results.retention_s:.0f} s), and nothing is stored for case {case_id} any more; replay "
                "the letter to judge the case again",
                replayable=True,
            )
            return False
        return True


class StageWork:
    """The work of each hop (``cyberjurors.jury.stages``), bound to this worker's model, jury and
    precedent base. With the qualification gate on, the stages that need the jury (the clues stage
    draws each juror's memory) wait until ``streams.seating`` has seated it."""

    def __init__(self, settings: Settings, llm: LLM, jury: Jury, precedents: PrecedentBase):
        self.settings, self.llm, self.jury, self.precedents = settings, llm, jury, precedents
        self.seated = asyncio.Event()
        if settings.qualification == "off":
            self.seated.set()

    async def focus(self, case_file: CaseFile) -> CaseFile:
        return await stages.focus_stage(case_file, self.llm, self.settings)

    async def clues(self, case_file: CaseFile) -> CaseFile:
        await self.seated.wait()
        return await stages.clues_stage(case_file, self.llm, self.settings, self.precedents)

    async def round(self, case_file: CaseFile) -> CaseFile:
        await self.seated.wait()
        return await stages.round_stage(case_file, self.jury, self.llm, self.settings)

    async def verdict(self, case_file: CaseFile) -> Verdict:
        await self.seated.wait()
        return await stages.verdict_stage(case_file, self.llm, self.settings, self.jury)
