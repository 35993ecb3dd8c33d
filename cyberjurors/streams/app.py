"""The Faust app: its topics, four tables and one short agent per stage of the jury pipeline,
plus the ``erasure`` agent that erases a case's tables when `cyberjurors erase` asks.

    disputes.events -> intake -> disputes.intake -> focus -> disputes.focus -> clues
    -> disputes.clues -> rounds (round 1) -> disputes.rounds -> rounds (round t+1 ... or the
    verdict) -> disputes.verdicts (and, for a doubtful verdict, disputes.escalations);
    disputes.appeals -> appeal (the second instance) -> disputes.verdicts;
    disputes.verdicts -> letters (one per party) -> disputes.letters;
    disputes.outcomes -> outcome;  anything unusable -> disputes.dlq

Each stage has one name: its agent, its module (here and in the reasoning layers), and the
``stage`` label of its metrics, spans and dead letters (docs/glossary.md).

Every message is keyed by case_id, so a case stays on one partition. Each agent hands its
events to a handler that takes its dependencies explicitly and can be tested alone: ``intake``
(Intake), ``stage_hop`` (focus, clues and the rounds, with stored-result replay), ``verdict``,
``appeal``, ``letters``, ``outcome`` and ``dead_letters``. The reasoning lives in ``cyberjurors.jury``, not here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import faust
from faust.types import TableT

from ..assembly import build_llm
from ..config import Settings
from ..errors import for_people
from ..evidence.media_store import MediaStore
from ..evidence.records import RecordSeal, Sealed, Unreadable, record_seal
from ..evidence.sealing import SealedStore
from ..evidence.stores import open_store
from ..jury.rounds import Jury, is_settled
from ..kafka.cluster import faust_broker_url, faust_credentials
from ..kafka.producers import RECORD_OVERHEAD, use_idempotence
from ..kafka.transport import handled, use_fetch_wait
from ..llm.port import LLM, LLMError
from ..observability import metrics, tracing
from ..precedents.base import PrecedentBase
from ..precedents.erasure import ErasableIndex, expire_cases
from ..state import expiry, tables
from ..state.results import StageResults
from ..state.sealed import SealedValues
from .appeal import Appeals
from .cloudevents import Publisher
from .dead_letters import DeadLetters, OutputTooLarge, Sender, bug
from .erasure import Erasures
from .intake import Intake, schedule_expiry
from .letters import PartyLetters
from .outcome import Outcomes
from .probes import Health
from .seating import Seating
from .stage_hop import StageHop, StageWork
from .verdict import Verdicts

log = logging.getLogger("cyberjurors.streams")

PIPELINE = ("disputes.events", "disputes.intake", "disputes.focus", "disputes.clues", "disputes.rounds")
# every topic the worker's consumer group reads (the agents' sources): what its lag and readiness are about
CONSUMED = (*PIPELINE, "disputes.outcomes", "disputes.appeals", "disputes.verdicts", "disputes.erasures")


def faust_app(settings: Settings) -> faust.App:
    app = faust.App(
        settings.app_id,
        broker=faust_broker_url(settings),
        broker_credentials=faust_credentials(settings),
        store=tables.store_url(settings),
        datadir=str(settings.datadir),
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_allow_declare=True,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.heartbeat_interval_s,
        broker_commit_interval=settings.commit_interval_s,
        processing_guarantee=settings.processing_guarantee,
        # every message we send is checked against max_event_bytes; the producer allows that plus framing
        producer_max_request_size=settings.intake_limits.max_event_bytes + RECORD_OVERHEAD,
        consumer_auto_offset_reset="earliest",
        # The check stops a worker whose table state is ahead of a changelog's end offset: stale
        # RocksDB files beside a truncated topic. The memory store has no files, a broker that lost
        # our topics is caught by the worker's broker watch (streams/worker.py, exit 75), and the
        # embedded broker (Tansu 0.6) reports an end offset from its last batch's first offset, so a
        # standby replica that read a verdict's batch of tombstones is "ahead" and the next rebalance
        # stopped its worker (tests/integration/test_rebalance.py).
        recovery_consistency_check=settings.table_store != "memory",
        web_enabled=settings.web_port is not None,
        web_port=settings.web_port or 6066,
        autodiscover=False,
    )
    use_fetch_wait(app, settings.kafka_fetch_max_wait_ms)  # before any topic or agent is declared
    use_idempotence(app)  # the producer Faust starts asks for idempotence as kafka_idempotence says
    app.cyberjurors_settings = settings  # type: ignore[attr-defined]  # for the Worker (worker.py)
    return app


def create_app(
    settings: Settings, llm: LLM | None = None, precedents: PrecedentBase | None = None, clock: expiry.Clock = time.time
) -> faust.App:
    """``clock`` (unix seconds) decides when stored state expires; a test moves it instead of waiting."""
    llm = llm or build_llm(settings)
    jury = Jury.from_settings(settings)
    precedents = precedents or PrecedentBase(settings, jury.personas)
    app = faust_app(settings)

    def topic(name: str) -> faust.TopicT:
        # keys stay bytes: a producer's key that is not UTF-8 must reach a handler (and a dead letter),
        # not fail Faust's decoding before it
        return app.topic(
            settings.topic(name),
            key_type=bytes,
            value_serializer="raw",
            key_serializer="raw",
            partitions=settings.partitions,
        )

    in_flight = metrics.CasesInFlight()
    metrics.set_seller_share_reference(settings.drift_reference_seller_share)
    store = open_store(settings, clock)
    keys = store.keys if isinstance(store, SealedStore) else None  # media_encryption: the case keys
    seal = record_seal(settings, keys)  # payload_encryption: every record sealed under its case's key

    def sender(name: str) -> Sender:
        return sealed(topic(name), seal)

    def public(name: str) -> Sender:
        """A public topic: what is sent there carries the CloudEvents headers (streams/cloudevents.py)."""
        return sealed(Publisher(topic(name), settings, settings.topic(name)), seal)

    def table(name: str, **options: Any) -> TableT:
        return tables.table(app, settings, name, **options)

    drafts = table("intake")
    dead_letters = DeadLetters(public("disputes.dlq"), in_flight, store, settings.intake_limits.max_event_bytes, drafts)
    # the JSON bytes each stage sent on; "stage-times": when each case's last one was stored, to expire them
    stage_results = table("stage-results", value_type=bytes)
    results = StageResults(
        stage_results if seal is None else SealedValues(stage_results, seal),
        table("stage-times"),
        settings.state_retention_s,
        clock,
        max_bytes=settings.intake_limits.max_event_bytes,
        keep_for_appeal=settings.appeal_window_s > 0,
        max_rounds=settings.most_rounds,  # the court policy's fullest court may hold more rounds than `rounds`
    )
    intake = Intake(settings, llm.backend, drafts, results, sender("disputes.intake"), dead_letters, in_flight)
    work = StageWork(settings, llm, jury, precedents)
    verdicts = Verdicts(
        settings,
        results,
        public("disputes.verdicts"),
        in_flight,
        work.verdict,
        escalations=public("disputes.escalations"),
        dead_letters=dead_letters,
    )
    hop = StageHop(results, dead_letters, in_flight, verdicts.resend)
    confirmed = table("confirmed-outcomes")
    outcomes = Outcomes(settings, llm, precedents, results, confirmed, dead_letters)
    appeals = Appeals(settings, llm, precedents, results, verdicts, dead_letters, store)
    party_letters = PartyLetters(settings, llm, results, public("disputes.letters"), dead_letters, keys)
    on_disk = [drafts, stage_results, results.times, confirmed]
    erasures = Erasures(results, drafts, confirmed, store, in_flight, topic("disputes.erasures"), on_disk)

    handlers = Handlers(intake, hop, work, verdicts, outcomes, dead_letters, appeals, party_letters, erasures, seal)
    stream_agents(app, settings, topic, handlers)
    seating = Seating(settings, llm, work, precedents)  # the qualification gate, when on
    app.add_dependency(seating)
    housekeeping(app, settings, in_flight, precedents, seating)
    schedule_expiry(app, intake)  # held early evidence and abandoned drafts
    expire_state(app, settings, results)
    release_held_outcomes(app, settings, outcomes)
    expire_media(app, settings, store)
    expire_precedents(app, settings, precedents)
    return app


@dataclass
class Handlers:
    intake: Intake
    hop: StageHop
    work: StageWork
    verdicts: Verdicts
    outcomes: Outcomes
    dead_letters: DeadLetters
    appeals: Appeals | None = None
    party_letters: PartyLetters | None = None
    erasures: Erasures | None = None
    seal: RecordSeal | None = None  # payload_encryption: each event opened before its handler


def sealed(out: Sender, seal: RecordSeal | None) -> Sender:
    return out if seal is None else Sealed(out, seal)


def stream_agents(app: faust.App, settings: Settings, topic: Callable[[str], faust.TopicT], h: Handlers) -> None:
    """One short agent per stage: each hands its events to a handler."""
    concurrency = settings.stage_concurrency
    focused, clues, rounds = topic("disputes.focus"), topic("disputes.clues"), topic("disputes.rounds")
    to_focused, to_clues, to_rounds = (sealed(t, h.seal) for t in (focused, clues, rounds))
    round_inputs = app.topic(
        settings.topic("disputes.clues"),
        settings.topic("disputes.rounds"),
        value_serializer="raw",
        key_serializer="raw",
    )

    @app.agent(topic("disputes.events"), name="intake", concurrency=concurrency)
    async def intake_agent(stream: faust.StreamT) -> None:
        await each(stream, h.intake, h, "intake")

    @app.agent(topic("disputes.intake"), name="focus", concurrency=concurrency)
    async def focus_agent(stream: faust.StreamT) -> None:
        await each(stream, lambda event: h.hop(event, "focus", to_focused, h.work.focus), h, "focus")

    @app.agent(focused, name="clues", concurrency=concurrency)
    async def clues_agent(stream: faust.StreamT) -> None:
        await each(stream, lambda event: h.hop(event, "clues", to_clues, h.work.clues), h, "clues")

    @app.agent(round_inputs, name="rounds", concurrency=concurrency)
    async def rounds_agent(stream: faust.StreamT) -> None:
        await each(stream, lambda event: next_round(h, settings, event, to_rounds), h, "rounds")

    @app.agent(topic("disputes.outcomes"), name="outcome", concurrency=1)  # guideline versions must not race
    async def outcome_agent(stream: faust.StreamT) -> None:
        await each(stream, h.outcomes, h, "outcome")

    @app.agent(topic("disputes.appeals"), name="appeal", concurrency=concurrency)  # a case's appeals in turn
    async def appeal_agent(stream: faust.StreamT) -> None:
        await each(stream, h.appeals, h, "appeal")  # type: ignore[arg-type]  # always set by create_app

    # declared with letters off too (its handler then only commits): the topics a worker reads stay one set
    @app.agent(topic("disputes.verdicts"), name="letters", concurrency=concurrency)
    async def letters_agent(stream: faust.StreamT) -> None:
        await each(stream, h.party_letters, h, "letters")  # type: ignore[arg-type]  # always set by create_app

    @app.agent(topic("disputes.erasures"), name="erasure", concurrency=1)  # `cyberjurors erase`, in turn
    async def erasure_agent(stream: faust.StreamT) -> None:
        await each(stream, h.erasures)  # type: ignore[arg-type]  # always set by create_app


async def each(
    stream: faust.StreamT,
    handler: Callable[[faust.EventT], Awaitable[None]],
    h: Handlers | None = None,
    stage: str = "",
) -> None:
    """Hand every event to ``handler``; once it returns, the event's offset may be committed
    (kafka/transport.py: an offset Faust acked that no handler finished is never committed). With
    ``payload_encryption`` the event is opened first (``opened``)."""
    async for event in stream.events():
        if h is None or h.seal is None or await opened(event, h.seal, h.dead_letters, stage):
            await handler(event)
        handled(event)


async def opened(event: Any, seal: RecordSeal, dead_letters: DeadLetters, stage: str) -> bool:
    """Put the record's opened value on the event, for its handler; False when it cannot be opened:
    a dead letter says why (``case_erased``: the record is dropped on purpose, not replayable), or,
    for a key service that cannot be reached, the error stops the agent before anything is written
    in the clear (the offset is not committed: the record is read again after a restart)."""
    message = event.message
    key = message.key.decode(errors="replace") if isinstance(message.key, bytes) else None
    try:
        value = await seal.open(key, message.value or b"", f"{message.topic} record")
    except Unreadable as err:
        log.warning("%s[%s]@%s: %s", message.topic, message.partition, message.offset, err.detail)
        metrics.SEALED_UNREADABLE.labels(message.topic, err.kind).inc()
        await dead_letters.write(event, stage, err.kind, err.detail, replayable=False, clear=True)
        return False
    message.value = value
    event.value = value
    return True


async def next_round(h: Handlers, settings: Settings, event: Any, rounds: Sender) -> None:
    """Round after round until the jury is settled, then the verdict; the case file is parsed once.
    Its span is "round-N" or "verdict", named once the case file says which."""
    with tracing.consuming(event, "rounds"):
        case_file = await h.hop.parse(event, "rounds")
        if case_file is None:
            return
        tracing.name_case(case_file.case_id)
        if is_settled(case_file, settings):
            tracing.name_stage("verdict")
            try:
                await h.verdicts.publish(case_file, event)
            except OutputTooLarge as err:  # the same case would decide the same way
                await h.dead_letters.write(event, "verdict", "output_too_large", err.detail, replayable=False)
            except LLMError as err:  # the verifier or JURIS failed after the retries: replay resumes here
                await h.dead_letters.write(
                    event, "verdict", f"llm_{err.kind}", for_people(err), replayable=err.replayable
                )
            except Exception as err:  # a bug must not stop the worker
                log.exception("case %s: verdict failed", case_file.case_id)
                await h.dead_letters.write(event, "verdict", "stage_failed", bug(err), replayable=True)
        else:
            stage = f"round-{len(case_file.rounds) + 1}"
            tracing.name_stage(stage)
            await h.hop.run(event, case_file, stage, rounds, h.work.round)


def expire_state(app: faust.App, settings: Settings, results: StageResults) -> None:
    """Every state_sweep_interval_s: delete the expired cases' stage results on this worker's
    partitions, then count each table's keys (in memory only, where a count is free)."""

    unadopted = [True]  # after each rebalance's recovery: stamp the cases that lost their stage-times entry

    @app.on_partitions_assigned.connect  # type: ignore[arg-type]  # see forget_moved_cases
    async def adopt_after_recovery(sender: faust.App, assigned: set, **kwargs: object) -> None:
        unadopted[0] = True

    async def sweep() -> int:
        active = expiry.active_partitions(app, settings.topic("disputes.events"))
        # app.tables is a TableManager, whose recovery TableManagerT does not declare
        if (
            unadopted[0]
            and app.tables.recovery.completed.is_set()  # type: ignore[attr-defined]
            and not (app.rebalancing or app.in_recovery)
        ):
            unadopted[0] = False
            if adopted := results.adopt(settings.partitions, active):
                log.info("stage-results: %d cases without a stage-times entry stamped to expire", adopted)
        removed = await results.expire(active)
        if settings.table_store == "memory":
            for name, table in app.tables.items():
                metrics.TABLE_ENTRIES.labels(name).set(len(table.data))
        return removed

    expiry.every(app, settings.state_sweep_interval_s, sweep, name="stage-results")


def release_held_outcomes(app: faust.App, settings: Settings, outcomes: Outcomes) -> None:
    """Every state_sweep_interval_s: count the outcomes held for a human panel's decision longer than
    escalation_outcome_wait_s, on this worker's partitions of disputes.outcomes. Not while tables
    recover: a held mark read before its outcome is recovered would be taken for one already gone."""
    topic = settings.topic("disputes.outcomes")

    async def sweep() -> int:
        recovered = app.tables.recovery.completed.is_set()  # type: ignore[attr-defined]  # as in expire_state
        if not recovered or app.rebalancing or app.in_recovery:
            return 0
        return await outcomes.release_due(expiry.active_partitions(app, topic))

    expiry.every(app, settings.state_sweep_interval_s, sweep, name="held-outcomes")


def expire_media(app: faust.App, settings: Settings, store: MediaStore) -> None:
    """Every media_sweep_interval_s, the worker holding partition 0 of disputes.events deletes the media
    store's expired objects: one sweeper per group rather than every worker listing the shared store.
    Two at once (a rebalance, another group, `cyberjurors media sweep`) are safe, only wasteful: the
    store's sweep never deletes an object put or referenced since it expired (media_store.py)."""
    events = settings.topic("disputes.events")

    async def sweep() -> int:
        if 0 not in expiry.active_partitions(app, events):
            return 0
        return (await store.sweep()).deleted

    expiry.every(app, settings.media_sweep_interval_s, sweep, name="media")


def expire_precedents(app: faust.App, settings: Settings, precedents: PrecedentBase) -> None:
    """With precedent_case_retention_s: every media_sweep_interval_s, the worker holding partition 0 of
    disputes.events takes the historical cases decided longer ago out of the precedent base (and out
    of the guidelines' provenance), as media_sweep does the media store: one sweeper per group."""
    retention, events = settings.precedent_case_retention_s, settings.topic("disputes.events")
    if retention is None or not precedents.enabled:
        return

    async def sweep() -> int:
        if 0 not in expiry.active_partitions(app, events):
            return 0
        index, _ = await precedents.open()
        return (await expire_cases(cast(ErasableIndex, index), retention)).cases

    expiry.every(app, settings.media_sweep_interval_s, sweep, name="precedents")


def housekeeping(
    app: faust.App,
    settings: Settings,
    in_flight: metrics.CasesInFlight,
    precedents: PrecedentBase,
    seating: Seating | None = None,
) -> None:
    """Forget the cases of partitions moved away; open the precedent base as the app starts (not on
    the first case, and not after joining the group: the model loads while the worker waits for its
    partitions), and keep what the probes report (``app.cyberjurors_health``)."""
    pipeline = {settings.topic(name) for name in PIPELINE}

    # mode types a receiver as (sender, *args, signal=..., **kwargs): none taking an argument by name fits
    @app.on_partitions_assigned.connect  # type: ignore[arg-type]
    async def forget_moved_cases(sender: faust.App, assigned: set, **kwargs: object) -> None:
        # the full new assignment: cases on partitions now owned by another worker are theirs to count
        in_flight.keep_partitions({tp.partition for tp in assigned if tp.topic in pipeline})

    health = Health(app, precedents, [settings.topic(name) for name in CONSUMED], seating=seating)
    app.add_dependency(health)  # started with the app, before the consumer joins its group
    app.cyberjurors_health = health  # type: ignore[attr-defined]  # for the probe server (worker.py)
