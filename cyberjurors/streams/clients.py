"""Producing cases and reading verdicts: what a platform's side of the topics looks like."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from ..config import Settings
from ..errors import CyberJurorsError
from ..schemas import CaseSubmitted, DeadLetter, DisputeCase, dispute_event
from .kafka import client_options


@dataclass(frozen=True)
class Outgoing:
    case_id: str
    value: bytes
    source: str
    topic: str | None = None
    """Full topic name, when not the one ``produce`` was asked for (a dead letter's replay)."""


class InputError(CyberJurorsError, ValueError):
    kind = "bad_input"


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
        lines = file.read_text().splitlines() if file.suffix == ".jsonl" else [file.read_text()]
        for n, line in enumerate(lines, 1):
            if line.strip():
                out.append(_event(line, f"{file}:{n}" if file.suffix == ".jsonl" else str(file)))
    return out


def _event(text: str, source: str) -> Outgoing:
    try:
        raw = json.loads(text)
        if isinstance(raw, dict) and "type" not in raw:
            case = DisputeCase.model_validate(raw)
            event = CaseSubmitted(case=case, event_id=f"case:{case.case_id}:{case.digest()[:16]}")
            return Outgoing(case.case_id, event.model_dump_json().encode(), source)
        parsed = dispute_event.validate_python(raw)
    except ValueError as err:  # json and pydantic errors alike
        raise InputError(f"{source}: {err}") from err
    return Outgoing(parsed.case_id, text.strip().encode(), source)


async def produce(settings: Settings, events: list[Outgoing], topic: str = "disputes.events") -> None:
    # The embedded broker has no idempotent producer; acks=all still waits for the write.
    producer = AIOKafkaProducer(**client_options(settings), acks="all", enable_idempotence=False)
    await producer.start()
    try:
        for event in events:
            await producer.send_and_wait(event.topic or settings.topic(topic), event.value,
                                         key=event.case_id.encode())
    finally:
        await producer.stop()


async def dead_letters(settings: Settings) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(value) async for _, value in follow(settings, "disputes.dlq", follow=False)]


def replayable(letter: DeadLetter) -> bool:
    """Whether a dead letter can succeed when sent again: decided by the handler that wrote it
    (streams/dead_letters.py) and carried on the letter."""
    if letter.replayable is not None:
        return letter.replayable
    # a letter written by an older version, without the flag: the rule that version applied
    return (letter.reason.startswith(("llm_", "precedents_")) or letter.reason in ("stage_failed", "ingest_failed")
            or (letter.stage == "outcomes" and letter.reason == "unknown_case"))


async def replay(settings: Settings, letters: list[DeadLetter]) -> None:
    """Send each dead letter's original bytes back to the topic it came from, with its key."""
    await produce(settings, [Outgoing(letter.key or "", base64.b64decode(letter.original_base64), "dlq",
                                      topic=letter.topic) for letter in letters])


async def follow(settings: Settings, topic: str = "disputes.verdicts", from_beginning: bool = True,
                 follow: bool = True, idle_timeout_s: float = 2.0) -> AsyncIterator[tuple[str, bytes]]:
    """Yield (key, value) from a topic without joining a consumer group.

    With ``follow=False`` it stops once it has caught up with the end of the topic.
    """
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, enable_auto_commit=False,
                                fetch_max_wait_ms=settings.kafka_fetch_max_wait_ms,
                                auto_offset_reset="earliest" if from_beginning else "latest")
    await consumer.start()
    try:
        name = settings.topic(topic)
        partitions = [TopicPartition(name, p) for p in (consumer.partitions_for_topic(name) or set())]
        if not partitions:
            partitions = [TopicPartition(name, p) for p in range(settings.partitions)]
        consumer.assign(partitions)
        if from_beginning:
            await consumer.seek_to_beginning(*partitions)
        else:
            await consumer.seek_to_end(*partitions)
        while True:
            batch = await consumer.getmany(timeout_ms=int(idle_timeout_s * 1000))
            for records in batch.values():
                for record in records:
                    yield (record.key or b"").decode(errors="replace"), record.value
            if not batch and not follow:
                return
    finally:
        await consumer.stop()
