"""Seating the worker's jury at start: with ``qualification`` on, every persona decides its mock
cases (``jury/qualify.py``) before the worker judges a case with it.

Started with the app, beside the opening of the precedent base (which it waits for: the mock cases
come from there). Until it is done, the stages that need the jury wait (``StageWork.seated``) and the
probes say the worker is still starting. A gate that cannot run (no precedent base, too few labelled
cases, a mock ballot that fails after the retries) leaves the jury as configured, and every verdict
says so (``jury.status: not_run`` with the reason): the worker keeps serving. Restart it to try again.
"""

from __future__ import annotations

import logging
from typing import Any

from mode import Service
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from ..config import Settings
from ..errors import CyberJurorsError, for_people
from ..jury import qualify
from ..llm.port import LLM
from ..observability import metrics
from ..precedents.base import PrecedentBase
from ..precedents.index import PrecedentIndex
from .probes import PRECEDENT_RETRY_WAIT, _transient
from .stage_hop import StageWork

log = logging.getLogger("cyberjurors.qualify")
OPEN_ATTEMPTS = 5


class Seating(Service):
    def __init__(self, settings: Settings, llm: LLM, work: StageWork, precedents: PrecedentBase, **kwargs: Any):
        super().__init__(**kwargs)
        self.settings, self.llm, self.work, self.precedents = settings, llm, work, precedents

    @property
    def done(self) -> bool:
        return self.work.seated.is_set()

    async def _open_base(self) -> PrecedentIndex:
        """The index, as the probes' opening finds it; a passing failure (a search cluster not up yet) is
        tried again a few times (about 30 s) before the gate gives up and the jury serves unvetted."""
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_transient),
            wait=PRECEDENT_RETRY_WAIT,
            stop=stop_after_attempt(OPEN_ATTEMPTS),
            reraise=True,
        ):
            with attempt:
                index, _ = await self.precedents.open()
        return index

    @Service.task
    async def _seat(self) -> None:
        if self.settings.qualification == "off":
            return
        jury = self.work.jury
        try:
            if not self.precedents.enabled:
                raise qualify.QualificationError("no precedent base (precedent_backend = none) to draw mock cases from")
            index = await self._open_base()
            jury, qualifier = await qualify.qualified_jury(self.settings, self.llm, index, jury)
            note = jury.composition.note if jury.composition else None
            log.info(
                "jury seated: %s; %d mock ballots read from the cache",
                note or "every serving persona qualified",
                qualifier.calls_saved,
            )
        except CyberJurorsError as err:  # LLMError, PrecedentError, QualificationError
            log.error("qualification could not run (%s): the jury serves unvetted", for_people(err))
            jury = qualify.unvetted(jury, self.settings, for_people(err))
        except Exception as err:  # a bug must not stop the worker: it judges with the configured jury
            log.exception("qualification failed")
            jury = qualify.unvetted(jury, self.settings, f"{type(err).__name__} (see the worker's log)")
        try:
            await self.precedents.seat(jury.personas)  # the jurors' memories follow a replaced persona
        finally:  # cases wait for this: set it whatever happened
            self.work.jury = jury
            metrics.record_jury(jury.composition)
            self.work.seated.set()
