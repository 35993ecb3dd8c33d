"""Producing cases and reading verdicts: what a platform's side of the topics looks like."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import inspect
import json
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from ..config import Settings
from ..errors import FINAL_LLM_KINDS, FINAL_PRECEDENT_KINDS, CyberJurorsError, for_people
from ..evidence.intake import checked_json
from ..evidence.media_store import StoreError, digest_of
from ..evidence.records import RecordSeal, Unreadable, is_sealed, marker, record_seal, unreadable
from ..evidence.sealing import SealedStore
from ..evidence.stores import open_store
from ..kafka import producers
from ..kafka.cluster import REPLAYED, client_options
from ..kafka.producers import producer_for
from ..observability import metrics, tracing
from ..schemas import AppealFiled, CaseSubmitted, DeadLetter, DisputeCase, OutcomeReported, Verdict, dispute_event, now
from ..streams import cloudevents


@dataclass(frozen=True)
class Outgoing:
    case_id: str
    value: bytes
    source: str
    topic: str | None = None
    """Full topic name, when not the one ``produce`` was asked for (a dead letter's replay)."""
    route: str | None = None
    """A pipeline topic by its unprefixed name, when not the one ``produce`` was asked for (an outcome)."""


class InputError(CyberJurorsError, ValueError):
    kind = "bad_input"


def case_event(case: DisputeCase, source: str) -> Outgoing:
    """A whole case as the ``CaseSubmitted`` event a platform sends, with an event id derived from its
    content (``case:<id>:<digest>``), so the same case sent twice is the same event."""
    event = CaseSubmitted(case=case, event_id=f"case:{case.case_id}:{case.digest()[:16]}")
    return Outgoing(case.case_id, event.model_dump_json().encode(), source)


def read_events(paths: Iterable[Path]) -> list[Outgoing]:
    """Cases and events from files: a ``.json`` case or event, or ``.jsonl`` events; folders are walked."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".json", ".jsonl"))
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(f"{path}: no such file or folder")
    out = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8-sig")  # a byte-order mark some editors write is not content
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"{file}: cannot be read as UTF-8 text ({for_people(err)})") from err
        lines = text.splitlines() if file.suffix == ".jsonl" else [text]
        for n, line in enumerate(lines, 1):
            if line.strip():
                out.append(_event(line, f"{file}:{n}" if file.suffix == ".jsonl" else str(file)))
    return out


def _event(text: str, source: str) -> Outgoing:
    """A case, an event for disputes.events, an outcome (``"type": "outcome"``), which goes to
    disputes.outcomes, or an appeal (``"type": "appeal"``), to disputes.appeals; checked as a worker
    would check it, duplicate keys included."""
    try:
        raw = json.loads(checked_json(text.encode()))
        if isinstance(raw, dict) and "type" not in raw:
            return case_event(DisputeCase.model_validate(raw), source)
        if isinstance(raw, dict) and raw.get("type") == "outcome":
            outcome = OutcomeReported.model_validate_json(text)  # as the worker parses it: votes strictly
            return Outgoing(outcome.case_id, text.strip().encode(), source, route="disputes.outcomes")
        if isinstance(raw, dict) and raw.get("type") == "appeal":
            appeal = AppealFiled.model_validate_json(text)
            return Outgoing(appeal.case_id, text.strip().encode(), source, route="disputes.appeals")
        parsed = dispute_event.validate_python(raw)
    except ValueError as err:  # json and pydantic errors alike, and intake.Rejected
        raise InputError(f"{source}: {for_people(err)}") from err
    except RecursionError as err:
        raise InputError(f"{source}: JSON nested too deeply to read") from err
    return Outgoing(parsed.case_id, text.strip().encode(), source)


def oversize(events: Iterable[Outgoing], settings: Settings) -> list[str]:
    """What a worker would dead-letter as event_too_large: refused before anything is sent."""
    return [
        f"{e.source}: {len(e.value)} bytes, over max_event_bytes={settings.intake_limits.max_event_bytes} (send large "
        "media by path or URL)"
        for e in events
        if len(e.value) + len(e.case_id.encode()) > settings.intake_limits.max_event_bytes
    ]


async def started_producer(settings: Settings) -> AIOKafkaProducer:
    """A started producer, idempotent wherever kafka_idempotence and the broker allow (kafka/producers.py)."""
    producer = producer_for(settings, await producers.idempotent(settings))
    await producer.start()
    return producer


def message_headers(
    settings: Settings, topic: str, key: bytes, value: bytes, span: tracing.Span | None = None
) -> list[tuple[str, bytes]]:
    """What a message to ``topic`` (its full name) carries: the trace context (of ``span``, else the
    current one), the content type and, to a public topic, the CloudEvents headers."""
    headers = tracing.headers(tracing.in_span(span) if span is not None else None)
    return list((headers | cloudevents.attributes(settings, topic, key, value)).items())


async def produce(
    settings: Settings, events: list[Outgoing], topic: str = "disputes.events", seal: bool = False
) -> None:
    """Send the events in order, each with the standard headers; a case's events (an incremental
    case's opening, rounds and close) under one span, so its trace starts here. ``seal``: each value
    sealed under its case's key first, as the workers seal theirs (``payload_encryption``)."""
    async with producing(settings, topic, seal) as send:
        await send(events)


@contextlib.asynccontextmanager
async def producing(
    settings: Settings, topic: str = "disputes.events", seal: bool = False
) -> AsyncIterator[Callable[[list[Outgoing]], Awaitable[None]]]:
    """``produce`` on one producer for as long as the block lasts: events sent over time (a paced
    benchmark) without a connection per send."""
    sealing = reader_seal(settings) if seal else None
    if seal and sealing is None:
        raise InputError("--seal needs payload_encryption (and media_encryption, case_key_secret)")
    producer = await started_producer(settings)
    spans: dict[str, tracing.Span] = {}

    async def send(events: list[Outgoing]) -> None:
        for event in events:
            target = event.topic or settings.topic(event.route or topic)
            if event.case_id not in spans:
                spans[event.case_id] = tracing.start_producing(event.case_id, target, "produce")
            key = event.case_id.encode()
            headers = message_headers(settings, target, key, event.value, spans[event.case_id])
            value = event.value
            if sealing is not None:
                value = await sealing.seal(event.case_id, value)
                headers = [*headers, *sealing.headers(value)]
            await producer.send_and_wait(target, value, key=key, headers=headers)

    try:
        yield send
    finally:
        for span in spans.values():
            span.end()
        await producer.stop()


@dataclass(frozen=True)
class Placed:
    """A dead letter and where it sits in disputes.dlq: ``id`` (topic/partition/offset) names it
    from any machine, which is what the replay record is keyed by."""

    letter: DeadLetter
    topic: str
    partition: int
    offset: int
    headers: tuple[tuple[str, bytes], ...] = ()
    """The letter's Kafka headers: its traceparent is the trace of the case that failed."""

    @property
    def id(self) -> str:
        return f"{self.topic}/{self.partition}/{self.offset}"


async def placed_letters(settings: Settings, left_out: Counter[str] | None = None) -> list[Placed]:
    """The letters in disputes.dlq, opened. A sealed letter nothing opens (its case erased, its key
    unknown, the record tampered) is left out, and counted by that reason in ``left_out``: there is
    nothing in it to replay, and an erased case's letter is meant to be gone."""
    placed = []
    async for r in records(settings, "disputes.dlq", follow=False):
        why = unreadable(r.value)
        if why is None:
            placed.append(
                Placed(DeadLetter.model_validate_json(r.value), r.topic, r.partition, r.offset, tuple(r.headers or ()))
            )
        elif left_out is not None:
            left_out[why] += 1
    return placed


def replayable(letter: DeadLetter) -> bool:
    """Whether a dead letter can succeed when sent again: decided by the handler that wrote it
    (streams/dead_letters.py) and carried on the letter."""
    if letter.replayable is not None:
        return letter.replayable
    # a letter written by an older version, without the flag: today's rule for its reason
    reason = letter.reason
    if reason.startswith("llm_"):
        return reason.removeprefix("llm_") not in FINAL_LLM_KINDS
    if reason.startswith("precedents_"):
        return reason.removeprefix("precedents_") not in FINAL_LLM_KINDS | FINAL_PRECEDENT_KINDS
    return reason in ("stage_failed", "intake_failed", "ingest_failed", "state_expired") or (
        metrics.stage_label(letter.stage) == "outcome" and reason == "unknown_case"
    )


@dataclass(frozen=True)
class LetterFilter:
    """Which letters ``dlq`` lists and replays: failed within [since, until), a reason, a stage
    ("rounds" takes every round-N, and a letter of an earlier release is found by today's name), a case."""

    since: datetime | None = None
    until: datetime | None = None
    reason: str | None = None
    stage: str | None = None
    case: str | None = None

    def __call__(self, letter: DeadLetter) -> bool:
        return (
            (self.since is None or letter.failed_at >= self.since)
            and (self.until is None or letter.failed_at < self.until)
            and self.reason in (None, letter.reason)
            and self.case in (None, letter.key)
            and self.stage in (None, letter.stage, metrics.stage_label(letter.stage))
        )


async def replayed(settings: Settings) -> dict[str, bytes]:
    """The replay record: letter id -> what was noted when it was replayed (the last write wins)."""
    return {key: value async for key, value in follow(settings, REPLAYED, follow=False, idle_timeout_s=1.0)}


def original_digest(letter: DeadLetter) -> str:
    """What names the letter's original, without reading the media store: its media store reference
    when it was stored there (the same original of the same case is the same object, so a letter
    written when a replay of it failed again names the same), else the sha256 of its inline bytes."""
    return letter.original_ref or digest_of(base64.b64decode(letter.original_base64))


def replayed_originals(done: dict[str, bytes]) -> set[tuple[str, str]]:
    """(topic, original sha256) of every original a replay sent: a letter with one of these was
    written after its original had been replayed (it failed again), unless the notes predate the
    field (then nothing is known and nothing is held back)."""
    out = set()
    for value in done.values():
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            note = json.loads(value)
            if note.get("original") and note.get("topic"):
                out.add((note["topic"], note["original"]))
    return out


def replay_state(placed: Placed, done: dict[str, bytes], originals: set[tuple[str, str]], final: bool = False) -> str:
    """How ``dlq`` shows a letter: replayed (this letter was sent), final (never sent, unless with
    ``final``), failed_again (a letter written when a replay of the same original failed again; sent
    only with ``--again``), replayable. With ``final``, a final letter is taken as a replayable one."""
    if placed.id in done:  # a final letter too, once sent with --final
        return "replayed"
    if not (final or replayable(placed.letter)):
        return "final"
    if (placed.letter.topic, original_digest(placed.letter)) in originals:
        return "failed_again"
    return "replayable"


async def original(settings: Settings, letter: DeadLetter) -> bytes:
    """The letter's original bytes: carried, or read from the media store."""
    if letter.original_ref is None:
        return base64.b64decode(letter.original_base64)
    return await open_store(settings).get(
        letter.original_ref, max(settings.intake_limits.max_event_bytes, letter.original_bytes or 0)
    )


@dataclass
class Replay:
    sent: list[Placed]
    already: list[Placed]
    failed: list[tuple[Placed, str]]
    failed_again: list[Placed] = field(default_factory=list)
    """Letters held back: their original was replayed before and failed again (``again`` sends them)."""
    final: list[Placed] = field(default_factory=list)
    """Final letters not sent: the same input would fail the same way (``final`` sends them)."""


async def replay(
    settings: Settings,
    letters: list[Placed],
    again: bool = False,
    final: bool = False,
    by: str | None = None,
    why: str | None = None,
) -> Replay:
    """Send each replayable letter's original back to the topic it came from, with its key, once:
    each one sent is recorded in disputes.dlq-replayed (compacted, keyed by the letter's id, noting
    the original's sha256) right after, and letters found there are left alone. A replay that fails
    again writes a new letter with the same original: it is held back (``failed_again``), since
    sending it again from a timer would loop, unless ``again`` (after fixing the cause). A crash
    between the send and its record sends one again; the stages are idempotent and consumers
    dedupe verdicts on verdict_id.

    A final letter is final under the settings and code that wrote it (a model's answer cut off by
    its max_tokens, a case over a limit): ``final`` sends those too, on the same terms, once the
    operator has changed what made them fail. Its original goes back where it was read, as a
    replayable one's does: a stage's letter to that stage's input, so intake, which ignores a case
    submitted again unchanged, is not in the way; an intake letter's case was never admitted.

    ``by`` (who replayed: a console person, or ``cli:<login>``) and ``why`` (an operator's reason)
    go into the note on disputes.dlq-replayed."""
    done = await replayed(settings)
    originals = replayed_originals(done)
    result = Replay([], [], [])
    seal = reader_seal(settings)
    producer = await started_producer(settings)
    try:
        for placed in letters:
            state = replay_state(placed, done, originals, final)
            if state == "replayed":
                result.already.append(placed)
                continue
            if state == "final":
                result.final.append(placed)
                continue
            if state == "failed_again" and not again:
                result.failed_again.append(placed)
                continue
            letter = placed.letter
            try:
                value = await original(settings, letter)
            except StoreError as err:
                result.failed.append((placed, err.detail))
                continue
            # in the failed case's trace (the letter's headers carry it): what the stages do with it joins it
            span = tracing.start_producing(
                letter.key or "", letter.topic, "replay", parent=tracing.context_of(placed.headers)
            )
            try:
                key = (letter.key or "").encode()
                headers = message_headers(settings, letter.topic, key, value, span)
                if seal is not None:  # resent sealed, as the stage sent it (an event too: the worker opens it)
                    value = await seal.seal(letter.key or "", value)
                    headers = [*headers, *seal.headers(value)]
                await producer.send_and_wait(letter.topic, value, key=key, headers=headers)
            finally:
                span.end()
            digest = original_digest(letter)  # what the letter it fails again with will name too
            note = {
                "replayed_at": now().isoformat(),
                "case": letter.key,
                "reason": letter.reason,
                "stage": letter.stage,
                "topic": letter.topic,
                "original": digest,
            } | {k: v for k, v in (("by", by), ("why", why)) if v}
            await producer.send_and_wait(
                settings.topic(REPLAYED),
                json.dumps(note).encode(),
                key=placed.id.encode(),
                headers=list(tracing.headers().items()),
            )
            originals.add((letter.topic, digest))  # a second letter with the same original in this run waits too
            result.sent.append(placed)
    finally:
        await producer.stop()
    return result


def _all_partitions(consumer: AIOKafkaConsumer, settings: Settings, names: Iterable[str]) -> list[TopicPartition]:
    """Every partition of the named topics (the configured count for a topic the metadata does not know yet)."""
    out = []
    for name in names:
        known = consumer.partitions_for_topic(name) or set(range(settings.partitions))
        out += [TopicPartition(name, p) for p in sorted(known)]
    return out


def _reader(settings: Settings, from_beginning: bool) -> AIOKafkaConsumer:
    """A consumer outside any group: it reads whole topics and commits nothing."""
    return AIOKafkaConsumer(
        **client_options(settings),
        group_id=None,
        enable_auto_commit=False,
        fetch_max_wait_ms=settings.kafka_fetch_max_wait_ms,
        auto_offset_reset="earliest" if from_beginning else "latest",
    )


async def _position(consumer: AIOKafkaConsumer, partitions: list[TopicPartition], from_beginning: bool) -> None:
    consumer.assign(partitions)
    if from_beginning:
        await consumer.seek_to_beginning(*partitions)
    else:
        await consumer.seek_to_end(*partitions)


async def follow(
    settings: Settings,
    topic: str = "disputes.verdicts",
    from_beginning: bool = True,
    follow: bool = True,
    idle_timeout_s: float = 2.0,
) -> AsyncIterator[tuple[str, bytes]]:
    """Yield (key, value) from a topic without joining a consumer group.

    With ``follow=False`` it stops once it has caught up with the end of the topic.
    """
    async for record in records(settings, topic, from_beginning, follow, idle_timeout_s):
        yield (record.key or b"").decode(errors="replace"), record.value


def reader_seal(settings: Settings) -> RecordSeal | None:
    """What opens the records a reader reads, with ``payload_encryption``: the case keys."""
    if not settings.payload_encryption:
        return None
    store = open_store(settings)
    return record_seal(settings, store.keys if isinstance(store, SealedStore) else None)


async def records(
    settings: Settings,
    topic: str,
    from_beginning: bool = True,
    follow: bool = True,
    idle_timeout_s: float = 2.0,
    raw: bool = False,
) -> AsyncIterator[ConsumerRecord]:
    """``follow``, yielding the consumer's records (topic, partition, offset, key, value). With
    ``payload_encryption`` each value is opened (unless ``raw``); one nothing opens is a ``marker``
    saying why (records.unreadable reads it)."""
    seal = None if raw else reader_seal(settings)
    consumer = _reader(settings, from_beginning)
    try:
        await consumer.start()  # inside: a broker that cannot be reached leaves no consumer unclosed
        partitions = _all_partitions(consumer, settings, [settings.topic(topic)])
        await _position(consumer, partitions, from_beginning)
        ends = None if follow else await _ends(consumer, partitions)
        while True:
            if ends is not None and all([await consumer.position(tp) >= end for tp, end in ends.items()]):
                return  # caught up with the ends it found at the start: no idle wait for a command to end
            batch = await consumer.getmany(timeout_ms=int(idle_timeout_s * 1000))
            for found in batch.values():
                for record in found:
                    yield record if seal is None or not is_sealed(record.value) else await opened_record(seal, record)
            if not batch and not follow:
                return
    finally:
        await consumer.stop()


async def _ends(consumer: AIOKafkaConsumer, partitions: list[TopicPartition]) -> dict[TopicPartition, int] | None:
    """Each partition's end offset now, or None when the broker does not know the topic yet (then
    the reader ends on its first empty fetch, as it would on any idle topic)."""
    if any(consumer.partitions_for_topic(tp.topic) is None for tp in partitions):
        return None
    try:
        return await asyncio.wait_for(consumer.end_offsets(partitions), timeout=10)
    except (KafkaError, TimeoutError):
        return None


async def opened_record(seal: RecordSeal | None, record: ConsumerRecord) -> ConsumerRecord:
    """The record with its value opened (``payload_encryption``); a ``marker`` when nothing opens it."""
    if seal is None or not is_sealed(record.value):
        return record
    key = record.key.decode(errors="replace") if record.key is not None else None
    try:
        value = await seal.open(key, record.value, f"{record.topic} record")
    except Unreadable as err:
        value = marker(err)
    return dataclasses.replace(record, value=value)


@dataclass(frozen=True)
class Outcome:
    """How a case ended, as read back: its verdict or its dead letter."""

    case_id: str
    verdict: Verdict | None
    dead_letter: DeadLetter | None
    partition: int
    at: float
    """``time.perf_counter()`` when it was read."""


Hook = Callable[..., "Awaitable[None] | None"]


async def _call(hook: Hook | None, *args: object) -> None:
    result = hook(*args) if hook is not None else None
    if inspect.isawaitable(result):
        await result


class Outcomes:
    """Waits for the verdicts or dead letters of chosen cases on ``disputes.verdicts`` and
    ``disputes.dlq`` (one consumer, no group). The first outcome of a case counts; later ones for
    the same case (a replayed verdict, a verdict after a dead letter) are counted in ``repeats``.

    ``async with Outcomes(settings) as outcomes:`` positions the consumer before anything is sent,
    so with ``from_beginning=False`` nothing produced after entering can be missed."""

    TOPICS = ("disputes.verdicts", "disputes.dlq")

    def __init__(self, settings: Settings, from_beginning: bool = True, poll_s: float = 0.2):
        self.settings, self.from_beginning, self.poll_s = settings, from_beginning, poll_s
        self.repeats = 0
        self._consumer = _reader(settings, from_beginning)
        self._dlq = settings.topic("disputes.dlq")
        self._seal = reader_seal(settings)

    async def __aenter__(self) -> Outcomes:
        try:
            await self._consumer.start()
            partitions = _all_partitions(self._consumer, self.settings, [self.settings.topic(t) for t in self.TOPICS])
            await _position(self._consumer, partitions, self.from_beginning)
            for tp in partitions:  # resolved now, not at the first fetch
                await self._consumer.position(tp)
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    async def _stop(self) -> None:
        with contextlib.suppress(Exception, asyncio.TimeoutError):
            await asyncio.wait_for(self._consumer.stop(), 5)  # never hang the clean-up

    async def wait(
        self,
        case_ids: Collection[str],
        timeout_s: float | None = None,
        idle_timeout_s: float | None = None,
        on_outcome: Hook | None = None,
        on_poll: Hook | None = None,
    ) -> dict[str, Outcome]:
        """Until every case in ``case_ids`` has an outcome, ``timeout_s`` has passed since the call or
        ``idle_timeout_s`` since the last new outcome; returns those that arrived (what a missing one
        means is the caller's to say). ``on_outcome(outcome)`` runs for each new outcome, ``on_poll()``
        after every poll (say, to check that the workers are alive); either may be a coroutine
        function, and an exception from either ends the wait."""
        wanted = set(case_ids)
        got: dict[str, Outcome] = {}
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        last = time.monotonic()
        while len(got) < len(wanted):
            now = time.monotonic()
            if (deadline is not None and now > deadline) or (
                idle_timeout_s is not None and now - last > idle_timeout_s
            ):
                break
            for outcome in await self._poll(wanted):
                if outcome.case_id in got:
                    self.repeats += 1
                    continue
                got[outcome.case_id] = outcome
                last = time.monotonic()
                await _call(on_outcome, outcome)
            await _call(on_poll)
        return got

    async def _poll(self, wanted: set[str]) -> list[Outcome]:
        batch = await self._consumer.getmany(timeout_ms=int(self.poll_s * 1000))
        at = time.perf_counter()
        out = []
        for tp, records in batch.items():
            for record in records:
                key = (record.key or b"").decode(errors="replace")
                if key not in wanted:
                    continue  # another run's case on a reused topic
                if self._seal is not None and is_sealed(record.value):
                    record = await opened_record(self._seal, record)
                    if unreadable(record.value) is not None:  # its case erased: no outcome to read
                        continue
                if tp.topic == self._dlq:
                    out.append(Outcome(key, None, DeadLetter.model_validate_json(record.value), tp.partition, at))
                else:
                    out.append(Outcome(key, Verdict.model_validate_json(record.value), None, tp.partition, at))
        return out


async def await_outcomes(settings: Settings, case_ids: Collection[str], **wait: Any) -> dict[str, Outcome]:
    """``Outcomes.wait`` for cases already sent (read from the beginning of the topics)."""
    async with Outcomes(settings) as outcomes:
        return await outcomes.wait(case_ids, **wait)
