"""Stage-synchronous waves: know when every case of a run is waiting on the model.

``cyberjurors eval --batch`` judges many cases side by side in one process, through the same stage
functions as the stream (``jury.stages``). Their model calls are not sent one by one: a *wave*
gathers every call the cases make until none of them can go further without an answer, and then
the whole wave is answered at once (one Message Batch, or the offline stand-in in process). The
focus calls of all cases so make one wave, the buyers' first select steps the next (``warm_cache_first``),
then the select and perceive steps, ..., round 1's warm-up jurors, the other jurors, the round
summaries, and so on: stage by stage, because every case waits for its answer before its next call.

To tell when nothing can go further, a run counts its *flows*: each case is one (``Waves.gather``), a ``gather_all``
(``llm/port.py``) turns one into several (the two parties' chains, the jurors of a round) and back into
one when they are done, and a flow stops counting while it waits in ``Waves.wait``. When the count
reaches zero with calls waiting, the wave is due. The stage functions wait only on the model, on
their own children and on work that finishes by itself (decoding media, retrieval in a thread);
a flow that waited on another flow (an event, a queue) would keep the count above zero for ever,
so nothing in ``jury/`` does.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..errors import CyberJurorsError

P = TypeVar("P")
R = TypeVar("R")

_RUN: contextvars.ContextVar[Waves | None] = contextvars.ContextVar("cyberjurors_waves", default=None)


class WavesError(CyberJurorsError, RuntimeError):
    kind = "waves"


@dataclass(eq=False)
class Call(Generic[P]):
    """One call waiting in a wave: what it asks and where its answer goes."""

    payload: P
    future: asyncio.Future[Any]
    resumed: bool = False
    """counted back in: answered, or given up by its own flow"""


@dataclass(eq=False)
class Waves(Generic[P]):
    """The flow count of one run and its waves. ``answer`` gets each wave's payloads and returns, in
    the same order, each one's answer or the exception its call raises."""

    answer: Callable[[list[P]], Awaitable[Sequence[Any]]]
    active: int = 0
    waiting: list[Call[P]] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    """the calls of each wave answered so far, in order"""
    _task: asyncio.Task[None] | None = None

    async def gather(self, *calls: Coroutine[Any, Any, R]) -> list[R]:
        """Run each call as a flow of this run (one per case), like ``gather_all``: if one fails, the
        rest are cancelled and that error is raised. All are counted before any starts, so the first
        to wait cannot start a wave the others have not joined yet; each leaves the count when its
        task is done (a done-callback: it runs even for a task cancelled before it started)."""
        context = contextvars.copy_context()
        context.run(_RUN.set, self)
        self.active += len(calls)
        tasks: list[asyncio.Task[R]] = []
        try:
            async with asyncio.TaskGroup() as group:
                for call in calls:
                    task = group.create_task(call, context=context.copy())
                    task.add_done_callback(lambda _: self._leave())
                    tasks.append(task)
        except BaseExceptionGroup as errors:
            raise errors.exceptions[0] from None
        return [t.result() for t in tasks]

    async def wait(self, payload: P) -> Any:
        """Join the current wave; returns (or raises) what the wave's answer says."""
        if _RUN.get() is not self:
            raise WavesError("a call outside a flow of this run cannot join its waves")
        call: Call[P] = Call(payload, asyncio.get_running_loop().create_future())
        self.waiting.append(call)
        self._leave()
        try:
            return await call.future
        except asyncio.CancelledError:
            # its flow is being torn down (a sibling failed): it counts again until it has unwound
            if not call.resumed:
                call.resumed = True
                if call in self.waiting:
                    self.waiting.remove(call)
                self.active += 1
            raise

    def resolve(self, call: Call[P], value: Any) -> None:
        self._resume(call, lambda f: f.set_result(value))

    def fail(self, call: Call[P], error: BaseException) -> None:
        self._resume(call, lambda f: f.set_exception(error))

    def _resume(self, call: Call[P], settle: Callable[[asyncio.Future[Any]], None]) -> None:
        if call.resumed or call.future.done():
            return
        call.resumed = True
        self.active += 1  # now, before its flow runs again: no wave may start in between
        settle(call.future)

    def fork(self, tasks: Sequence[asyncio.Task[Any]]) -> None:
        """``gather_all``'s children as flows of their own: the parent's count passes to them while
        they run, and back to the parent from the last one to end. Counted by done-callbacks, which
        run even for a child cancelled before it started."""
        if not tasks:
            return
        left = [len(tasks)]
        self.active += len(tasks) - 1

        def ended(_: asyncio.Task[Any]) -> None:
            left[0] -= 1
            if left[0]:
                self._leave()

        for task in tasks:
            task.add_done_callback(ended)

    def _leave(self) -> None:
        self.active -= 1
        self._next()

    def _next(self) -> None:
        """Start the next wave when every flow waits (and no wave is being answered)."""
        if self.active == 0 and self.waiting and self._task is None:
            calls, self.waiting = self.waiting, []
            # a clean context: what the answer does (an SDK call, the offline stand-in) is no flow
            self._task = asyncio.get_running_loop().create_task(self._run(calls), context=contextvars.Context())

    async def _run(self, calls: list[Call[P]]) -> None:
        calls = [c for c in calls if not c.resumed]  # given up by their flows before the wave began
        if not calls:
            self._task = None
            return
        try:
            outcomes = await self.answer([c.payload for c in calls])
            for call, outcome in zip(calls, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    self.fail(call, outcome)
                else:
                    self.resolve(call, outcome)
        except BaseException as err:  # the wave as a whole failed: every call left hears why
            for call in calls:
                self.fail(call, err)
            if not isinstance(err, Exception):
                raise
        finally:
            self.sizes.append(len(calls))
            self._task = None
            for call in calls:
                self.fail(call, WavesError("the wave ended without an answer for this call"))
            self._next()  # flows answered early may all be waiting again by now


def current() -> Waves[Any] | None:
    """The run whose flow the caller is part of, if any."""
    return _RUN.get()
