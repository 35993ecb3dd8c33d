"""The Faust app: topics, two tables, and one agent per stage of the jury pipeline.

    disputes.events -> ingest -> disputes.ready -> focus -> disputes.focus -> perception
    -> disputes.clues -> jury (round 1) -> disputes.rounds -> jury (round t+1 ... or verdict)
    -> disputes.verdicts;  anything unusable -> disputes.dlq

Every message is keyed by case_id, so a case stays on one partition. Each agent decodes, calls
one stage from ``cyberjurors.agents``, and encodes; the reasoning lives there, not here.
A stage's output is stored in ``stage_results`` before it is sent on, so a worker that dies and
replays its input re-sends the stored output instead of calling the model again.

Metrics (``cyberjurors.metrics``): stage latency is measured where a stage really works, not on
a replay's re-send; verdict metrics and the seller-share window count a verdict only when it
is first decided (a replay re-sends the stored verdict uncounted); outcomes are compared with
our verdict whether or not the precedent base is on.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone

import faust
from pydantic import ValidationError

from .. import intake, metrics
from ..backends import build_llm
from ..config import Settings
from ..errors import for_people, plain
from ..jury import stages
from ..jury.rounds import Jury, is_settled
from ..jury.verdict import decide
from ..llm import LLM, LLMError
from ..precedents import learning
from ..precedents.models import PrecedentError
from ..precedents.precedent_base import PrecedentBase
from ..schemas import CaseFile, CaseSubmitted, DeadLetter, DisputeCase, OutcomeReported, Verdict
from .kafka import faust_broker_url, faust_credentials
from .transport import use_fetch_wait

log = logging.getLogger("cyberjurors.streams")


def now() -> datetime:
    return datetime.now(timezone.utc)


def create_app(settings: Settings, llm: LLM | None = None, precedents: PrecedentBase | None = None) -> faust.App:
    llm = llm or build_llm(settings)
    jury = Jury.from_settings(settings)
    precedents = precedents or PrecedentBase(settings, jury.personas)
    app = faust.App(
        settings.app_id,
        broker=faust_broker_url(settings),
        broker_credentials=faust_credentials(settings),
        store="memory://",
        datadir=str(settings.datadir),
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_allow_declare=True,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.heartbeat_interval_s,
        broker_commit_interval=settings.commit_interval_s,
        processing_guarantee=settings.processing_guarantee,
        consumer_auto_offset_reset="earliest",
        web_enabled=settings.web_port is not None,
        web_port=settings.web_port or 6066,
        autodiscover=False,
    )
    use_fetch_wait(app, settings.kafka_fetch_max_wait_ms)

    def topic(name: str) -> faust.TopicT:
        return app.topic(settings.topic(name), key_type=str, value_serializer="raw", key_serializer="raw",
                         partitions=settings.partitions)

    events, ready, focused, clues, rounds, verdicts, outcomes, dlq = (
        topic(n) for n in ("disputes.events", "disputes.ready", "disputes.focus", "disputes.clues",
                           "disputes.rounds", "disputes.verdicts", "disputes.outcomes", "disputes.dlq")
    )
    deliberations = app.topic(settings.topic("disputes.clues"), settings.topic("disputes.rounds"),
                              value_serializer="raw", key_serializer="raw")
    pipeline_topics = {settings.topic(n) for n in ("disputes.events", "disputes.ready", "disputes.focus",
                                                   "disputes.clues", "disputes.rounds")}
    in_flight = metrics.CasesInFlight()
    drift = metrics.Drift(settings.drift_window, settings.drift_reference_seller_share)

    @app.on_partitions_assigned.connect
    async def forget_moved_cases(sender: faust.App, assigned: set, **kwargs: object) -> None:
        # the full new assignment: cases on partitions now owned by another worker are theirs to count
        in_flight.keep_partitions({tp.partition for tp in assigned if tp.topic in pipeline_topics})

    # case_id -> {"draft": Draft json} while incremental events arrive, {"digest": ...} once submitted
    intake_state = app.Table("intake", default=None, partitions=settings.partitions)
    # "case_id/stage" -> the CaseFile (or Verdict) json that stage produced
    stage_results = app.Table("stage-results", default=None, partitions=settings.partitions)
    # "category/partition" -> case ids confirmed since that category was last re-distilled here
    confirmed = app.Table("confirmed-outcomes", default=None, partitions=settings.partitions)

    async def dead_letter(event: faust.EventT, stage: str, reason: str, detail: str) -> None:
        message = event.message
        key = message.key.decode(errors="replace") if isinstance(message.key, bytes) else message.key
        letter = DeadLetter(reason=reason, detail=plain(detail), stage=stage, topic=message.topic,
                            partition=message.partition, offset=message.offset, key=key,
                            original_base64=base64.b64encode(message.value or b"").decode(), failed_at=now())
        log.warning("dead letter from %s: %s (%s) key=%s offset=%s", stage, reason, detail[:300], key, message.offset)
        await dlq.send(key=(key or "").encode(), value=letter.model_dump_json().encode())
        metrics.record_dead_letter(stage, reason)
        if stage not in ("ingest", "outcomes") and key:  # a case that left the pipeline
            in_flight.discard(key)

    async def hand_on(case_file: CaseFile, stage: str, out: faust.TopicT) -> None:
        stage_results[f"{case_file.case_id}/{stage}"] = case_file.model_dump(mode="json")
        await out.send(key=case_file.case_id.encode(), value=case_file.model_dump_json().encode())

    # --- ingest ----------------------------------------------------------------------------

    async def admit(case: DisputeCase, notes: list[str], partition: int) -> None:
        digest = case.digest()
        state = intake_state.get(case.case_id) or {}
        if state.get("digest") == digest:
            log.info("case %s submitted again unchanged; ignored", case.case_id)
            return
        if state.get("digest"):
            raise intake.Rejected("case_already_submitted", f"case {case.case_id} was already submitted "
                                  "with different content; use a new case_id")
        problems = [*notes, *intake.admit(case, settings)]
        intake_state[case.case_id] = {"digest": digest}
        case_file = CaseFile(case=case, received_at=now(), problems=problems, backend=llm.backend)
        in_flight.add(case.case_id, partition)  # before the hand-off, which yields to the other stages
        try:
            await hand_on(case_file, "ready", ready)
        except BaseException:
            in_flight.discard(case.case_id)
            raise

    @app.agent(events, concurrency=settings.stage_concurrency)
    async def ingest(stream: faust.StreamT) -> None:
        async for event in stream.events():
            try:
                parsed = intake.parse_event(event.value)
                if isinstance(parsed, CaseSubmitted):
                    await admit(parsed.case, [], event.message.partition)
                    continue
                state = intake_state.get(parsed.case_id) or {}
                if state.get("digest"):
                    raise intake.Rejected("case_closed", f"case {parsed.case_id} has already gone to the jury")
                draft = intake.Draft.model_validate(state["draft"]) if "draft" in state else None
                try:
                    draft = intake.fold(draft, parsed)
                except intake.Duplicate as dup:
                    log.info("case %s: %s", parsed.case_id, dup)
                    if draft is not None:
                        draft.notes.append(f"duplicate event ignored: {dup}")
                        intake_state[parsed.case_id] = {"draft": draft.model_dump(mode="json")}
                    continue
                intake_state[parsed.case_id] = {"draft": draft.model_dump(mode="json")}
                if draft.closed:
                    await admit(draft.to_case(), draft.notes, event.message.partition)
            except intake.Rejected as err:
                await dead_letter(event, "ingest", err.reason, err.detail)
            except Exception as err:  # a bug must cost one event (kept in the DLQ), not the worker
                log.exception("ingest failed on offset %s", event.message.offset)
                await dead_letter(event, "ingest", "ingest_failed", f"{type(err).__name__}: {for_people(err)}")

    # --- stages I and II ------------------------------------------------------------------

    async def run_stage(event: faust.EventT, stage: str, out: faust.TopicT,
                        work: Callable[[CaseFile], Awaitable[CaseFile]]) -> None:
        try:
            case_file = CaseFile.model_validate_json(event.value)
        except ValidationError as err:
            await dead_letter(event, stage, "invalid_case_file", for_people(err))
            return
        in_flight.add(case_file.case_id, event.message.partition)  # again after a restart's replay
        stored = stage_results.get(f"{case_file.case_id}/{stage}")
        if stored is not None:
            log.info("case %s: %s already done, re-sending its output", case_file.case_id, stage)
            await out.send(key=case_file.case_id.encode(), value=CaseFile.model_validate(stored).model_dump_json().encode())
            return
        started = time.perf_counter()
        try:
            result = await work(case_file)
        except LLMError as err:
            await dead_letter(event, stage, f"llm_{err.kind}", for_people(err))
            return
        except Exception as err:  # a bug or an unexpected failure must not stop the worker
            log.exception("case %s: %s failed", case_file.case_id, stage)
            await dead_letter(event, stage, "stage_failed", f"{type(err).__name__}: {for_people(err)}")
            return
        metrics.STAGE_LATENCY.labels(metrics.stage_label(stage)).observe(time.perf_counter() - started)
        await hand_on(result, stage, out)

    async def stage_focus(case_file: CaseFile) -> CaseFile:
        return await stages.focus_stage(case_file, llm, settings)

    async def stage_clues(case_file: CaseFile) -> CaseFile:
        return await stages.clues_stage(case_file, llm, settings, precedents)

    @app.task
    async def open_precedent_base() -> None:
        # load the embedding model now rather than on the first case
        if precedents.enabled:
            try:
                await precedents.open()
                log.info("precedent base open")
            except Exception:  # retrieval reports it per case; the worker still judges without
                log.exception("the precedent base could not be opened")

    @app.agent(ready, concurrency=settings.stage_concurrency)
    async def focus(stream: faust.StreamT) -> None:
        async for event in stream.events():
            await run_stage(event, "focus", focused, stage_focus)

    @app.agent(focused, concurrency=settings.stage_concurrency)
    async def perception(stream: faust.StreamT) -> None:
        async for event in stream.events():
            await run_stage(event, "clues", clues, stage_clues)

    # --- stages III and IV, round by round, then the verdict -----------------------------

    async def next_round(case_file: CaseFile) -> CaseFile:
        return await stages.round_stage(case_file, jury, llm, settings)

    async def publish_verdict(event: faust.EventT) -> None:
        case_file = CaseFile.model_validate_json(event.value)
        key = f"{case_file.case_id}/verdict"
        verdict = stage_results.get(key)
        first = verdict is None  # else a replay: re-sent, not counted again
        started = time.perf_counter()
        if first:
            verdict = decide(case_file, settings, now()).model_dump(mode="json")
            stage_results[key] = verdict
        decided = Verdict.model_validate(verdict)
        await verdicts.send(key=case_file.case_id.encode(), value=decided.model_dump_json().encode())
        in_flight.discard(case_file.case_id)
        if first:
            metrics.STAGE_LATENCY.labels("verdict").observe(time.perf_counter() - started)
            metrics.record_verdict(decided.category, decided.winner, decided.margin, decided.rounds_used,
                                   decided.early_stopped, decided.latency_s)
            drift.verdict(decided.case_id, decided.winner)
        log.info("case %s: verdict %s, votes %s", case_file.case_id, decided.winner, decided.votes)

    @app.agent(deliberations, concurrency=settings.stage_concurrency)
    async def deliberate(stream: faust.StreamT) -> None:
        async for event in stream.events():
            try:
                case_file = CaseFile.model_validate_json(event.value)
            except ValidationError as err:
                await dead_letter(event, "jury", "invalid_case_file", for_people(err))
                continue
            if is_settled(case_file, settings):
                await publish_verdict(event)
            else:
                await run_stage(event, f"round-{len(case_file.rounds) + 1}", rounds, next_round)

    # --- confirmed outcomes feed the precedent base -----------------------------------------

    @app.agent(outcomes, concurrency=1)  # one at a time: guideline versions must not race
    async def learn_from_outcomes(stream: faust.StreamT) -> None:
        async for event in stream.events():
            try:
                outcome = OutcomeReported.model_validate_json(event.value)
            except ValidationError as err:
                await dead_letter(event, "outcomes", "invalid_outcome", for_people(err))
                continue
            verdict = stage_results.get(f"{outcome.case_id}/verdict")
            case_file = stage_results.get(f"{outcome.case_id}/ready")
            if verdict is None or case_file is None:
                await dead_letter(event, "outcomes", "unknown_case", f"no verdict for case {outcome.case_id} here")
                continue
            ours = Verdict.model_validate(verdict).votes
            drift.outcome(outcome.case_id, outcome.votes.buyer, outcome.votes.seller, ours.buyer, ours.seller)
            if not precedents.enabled:
                continue
            try:
                index, matcher = await precedents.open()
                decided = Verdict.model_validate(verdict)
                report = await learning.learn(outcome, decided, CaseFile.model_validate(case_file), index, settings)
                log.info("case %s: outcome %s our verdict; added %s, raised %s, lowered %s, retired %s",
                         outcome.case_id, "agrees with" if report.agreed else "differs from", report.case_added,
                         report.raised, report.lowered, report.retired)
                if report.case_added:
                    key = f"{decided.category}/{event.message.partition}"
                    pending = sorted({*(confirmed.get(key) or []), report.case_added})
                    if len(pending) >= settings.redistil_after:
                        done = await learning.redistil(decided.category, pending, index, matcher.embedder, llm,
                                                       settings)
                        log.info("re-distilled %s from %d confirmed cases: %d new guidelines, %d merged",
                                 decided.category, len(pending), done.guidelines_created, done.guidelines_merged)
                        pending = []
                    confirmed[key] = pending
            except (PrecedentError, LLMError) as err:
                await dead_letter(event, "outcomes", f"precedents_{err.kind}", for_people(err))
            except Exception as err:  # a bug must cost one event (kept in the DLQ), not the worker
                log.exception("outcome for case %s failed", outcome.case_id)
                await dead_letter(event, "outcomes", "stage_failed", f"{type(err).__name__}: {for_people(err)}")

    app.cyberjurors_settings = settings  # type: ignore[attr-defined]
    return app
