"""The worker's probes, for Kubernetes and docker compose: liveness, readiness and startup.

Served by aiohttp on the worker's own event loop, on ``probe_port``, apart from ``/metrics``:
prometheus-client answers /metrics from a daemon thread, on any path, even while the event loop is
stuck, so a scrape says nothing about whether the worker works. Faust's consumer runs in a thread
of its own too and keeps heartbeating, so a worker whose loop is stuck keeps its partitions: only
a probe answered by the loop notices.

* ``/livez``: 200 whenever the event loop runs the handler. A blocked loop cannot answer, and the
  probe's timeout fails it.
* ``/startupz``: 200 once the start is done: the loop serves, and the precedent base (the embedding
  model and the index) has been opened or has failed to open once (the worker then judges without
  precedents, notes it on every verdict, keeps trying, and is not ready), and, with the qualification
  gate on, the jury is seated (``streams/seating.py``). 503 while it loads.
* ``/readyz``: 200 while the worker takes its share of the work: its consumer group has assigned it
  partitions (an empty share counts: more workers than partitions is not a fault), no rebalance or
  table recovery is under way, the precedent base is open (when configured), the key service answers
  (with ``media_encryption``: ``KeyWrap.check()`` every ``KEY_CHECK_INTERVAL_S``, in a thread, each
  call bounded by ``key_service.timeout_s``), and it is not stopping. 503 with the reasons otherwise.
  A worker that cannot reach its key service seals and opens nothing (the agent that needs a key
  stops, never writes in the clear); readiness says why.

Every answer is JSON: ``{"status": ..., "reasons": [...], ...}``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import faust
from aiohttp import web
from mode import Service
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

from ..precedents.base import PrecedentBase
from ..precedents.models import PrecedentError

if TYPE_CHECKING:
    from ..evidence.key_service import KeyWrap

log = logging.getLogger("cyberjurors.probes")

# a precedent base that fails to open for a passing reason (an index still being built, a search
# cluster not up yet) is tried again, less and less often
PRECEDENT_RETRY_WAIT = wait_exponential(multiplier=2, min=2, max=300)
# how often readiness asks the key service (a KMS DescribeKey per worker each time: cheap, and a
# lost service shows within a probe period or two)
KEY_CHECK_INTERVAL_S = 15.0


def _transient(err: BaseException) -> bool:
    return isinstance(err, PrecedentError) and err.replayable


class Health(Service):
    """What the probes report, from Faust's own state and signals, and the opening of the
    precedent base: started with the app (before it joins its group), so the model loads while the
    worker waits for its partitions."""

    def __init__(
        self,
        app: faust.App,
        precedents: PrecedentBase,
        topics: Collection[str],
        seating: Any = None,
        key_service: KeyWrap | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.app = app
        self.precedents = precedents
        self.seating = seating  # streams.seating.Seating: the qualification gate, when on
        self.key_service = key_service  # with media_encryption: checked before the worker is ready
        self.key_service_error: str | None = None
        self.key_service_checked = False
        self.key_check_interval_s = KEY_CHECK_INTERVAL_S
        self.topics = frozenset(topics)  # the topics the worker consumes, for the assignment it reports
        self.assignment: frozenset[faust.types.TP] | None = None
        self.precedent_error: str | None = None
        self.precedents_tried = not precedents.enabled
        # mode types a receiver as (sender, *args, signal=..., **kwargs): none taking an argument by name fits
        app.on_partitions_assigned.connect(self._assigned)  # type: ignore[arg-type]

    async def _assigned(self, sender: faust.App, assigned: set, **kwargs: object) -> None:
        self.assignment = frozenset(assigned)  # the whole new assignment, every rebalance

    @Service.task
    async def _open_precedents(self) -> None:
        if not self.precedents.enabled:
            return
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(_transient),
                wait=PRECEDENT_RETRY_WAIT,
                before_sleep=self._open_failed,
                reraise=True,
            ):
                with attempt:
                    await self.precedents.open()
            self.precedent_error = None
            log.info("precedent base open")
        except Exception as err:  # retrieval reports it per case; the worker still judges without
            self.precedent_error = str(err) or type(err).__name__
            log.exception("the precedent base could not be opened")
        finally:
            self.precedents_tried = True

    def _open_failed(self, state: RetryCallState) -> None:
        err = state.outcome.exception() if state.outcome else None
        if not self.precedents_tried:  # the first failure ends the start; the worker judges without meanwhile
            log.error("the precedent base could not be opened (%s); trying again", err)
        self.precedent_error = str(err)
        self.precedents_tried = True

    @Service.task
    async def _watch_key_service(self) -> None:
        while not self.should_stop:
            if self.key_service is not None:
                await self.check_key_service()
            await self.sleep(self.key_check_interval_s)

    async def check_key_service(self) -> None:
        """Ask the key service once (in a thread: a KMS call blocks), and keep what it answered."""
        if self.key_service is None:
            return
        try:
            await asyncio.to_thread(self.key_service.check)
        except Exception as err:  # StoreError unavailable, or anything else the check met: not ready either way
            error = str(err) or type(err).__name__
            if error != self.key_service_error:
                log.error("the key service cannot be reached: %s", error)
            self.key_service_error = error
        else:
            if self.key_service_error is not None:
                log.info("the key service answers again")
            self.key_service_error = None
        self.key_service_checked = True

    def not_started(self) -> list[str]:
        """Why the start is not done yet (empty: done). Not ``started``: mode's Service has that, a bool."""
        reasons = [] if self.precedents_tried else ["loading the precedent base (embedding model and index)"]
        return reasons + self._unseated()

    def _unseated(self) -> list[str]:
        done = self.seating is None or self.seating.done
        return [] if done else ["seating the jury: its personas are deciding their mock cases (qualification)"]

    def not_ready(self) -> list[str]:
        """Why the worker is not ready (empty: ready)."""
        app, reasons = self.app, []
        if app.should_stop or self.should_stop:
            reasons.append("stopping")
        if self.assignment is None:
            reasons.append("waiting for the consumer group to assign partitions")
        elif app.rebalancing:
            reasons.append("rebalancing: the consumer group is moving partitions between workers")
        # app.tables is a TableManager, whose recovery TableManagerT does not declare
        if self.assignment is not None and (
            app.in_recovery or not app.tables.recovery.completed.is_set()  # type: ignore[attr-defined]
        ):
            reasons.append("recovering tables from their changelogs")
        if self.precedents.enabled and not self.precedents.is_open:
            reasons.append(f"precedent base not open: {self.precedent_error or 'loading'}")
        if self.key_service is not None and not self.key_service_checked:
            reasons.append("checking the key service")
        elif self.key_service_error is not None:
            reasons.append(f"key service unreachable: {self.key_service_error}")
        return reasons + self._unseated()

    def assigned(self) -> dict[str, list[int]]:
        """The partitions of the consumed topics this worker holds (changelogs left out)."""
        out: dict[str, list[int]] = {}
        for tp in sorted(self.assignment or ()):
            if tp.topic in self.topics:
                out.setdefault(tp.topic, []).append(tp.partition)
        return out


class ProbeServer(Service):
    """``/livez``, ``/readyz`` and ``/startupz`` on ``host:port``, on the worker's event loop. A port
    that cannot be bound is logged, not fatal (as for the metrics endpoint): the worker still judges,
    and a supervisor probing it sees it never become ready."""

    def __init__(self, health: Health, host: str, port: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.health = health
        self.host, self.port = host, port
        self._runner: web.AppRunner | None = None

    def routes(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/livez", self.livez)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/startupz", self.startupz)
        return app

    async def livez(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(self, request: web.Request) -> web.Response:
        reasons = self.health.not_ready()
        body = {"status": "not ready" if reasons else "ok", "reasons": reasons, "assigned": self.health.assigned()}
        return web.json_response(body, status=503 if reasons else 200)

    async def startupz(self, request: web.Request) -> web.Response:
        reasons = self.health.not_started()
        return web.json_response(
            {"status": "starting" if reasons else "ok", "reasons": reasons}, status=503 if reasons else 200
        )

    async def on_start(self) -> None:
        runner = web.AppRunner(self.routes(), access_log=None)  # a probe every few seconds is no news
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except OSError as err:
            log.error("probes not started on %s:%s: %s", self.host, self.port, err)
            await runner.cleanup()
            return
        self._runner = runner
        log.info("probes on http://%s:%s (/livez, /readyz, /startupz)", self.host, self.port)

    async def on_stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
