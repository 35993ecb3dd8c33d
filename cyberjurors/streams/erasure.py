"""The workers' part of an erasure (`cyberjurors erase`): a case's table state, erased by the worker
that holds it.

A live worker's tables are its own: its memory (or RocksDB files) keeps a table's entries whatever
another process writes to the changelog, and only the worker reads the changelog back (at a start
or a rebalance). So ``erase`` asks: it sends an ``EraseRequest`` to ``disputes.erasures`` (compacted),
keyed by the case id, so it lands on the case's partition (the default partitioner, as every topic
here, state/expiry.py). The ``erasure`` agent of the worker holding that partition deletes the
case's entries through Faust (each tombstone on the changelog partition the entry was written on),
deletes the media store objects those entries named, compacts its RocksDB databases so the bytes
leave the disk, and answers on the same topic and key (``EraseAnswer``), which ``erase`` reads back.
A worker that is down handles the request when it comes back, after recovering its tables; ``erase``
records that no answer came, and ``erase --resume`` asks again. Once answered, ``erase`` writes a
tombstone under the case id, so compaction drops the request and the answer.

A case still in the pipeline is not erased unless the request says ``force``: the answer says where
it stands (``state/erasure.py``). Nothing here logs the case id: log lines name the erasure's
reference, which ``erase`` computes and sends along.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Collection, MutableMapping, Sequence
from typing import Annotated, Any, Literal, Protocol

from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from ..config import Settings
from ..errors import StoreError
from ..evidence.media_store import MediaStore
from ..kafka.cluster import ERASURES, client_options
from ..kafka.producers import producer_for
from ..observability import metrics, tracing
from ..state import tables
from ..state.erasure import erase_case, erase_citations, on_partition, standing
from ..state.intake import IntakeTable
from ..state.results import StageResults
from .dead_letters import send_bounded

log = logging.getLogger("cyberjurors.streams")


class EraseRequest(BaseModel):
    type: Literal["erase"] = "erase"
    request: str  # a fresh id per ask: the answer names it
    ref: str  # the erasure's reference (never the case id): what the worker's log lines name
    force: bool = False  # erase a case still in the pipeline too


class CitedRequest(BaseModel):
    """Sent to every partition of disputes.erasures (keyed by the case id, its partition chosen): the
    worker holding that partition blanks the case's summary in the stored results of the cases there
    that retrieved it as a precedent. A type of its own: a worker of an earlier release, which knows
    only ``erase``, passes it over instead of erasing on the wrong partition."""

    type: Literal["cited"] = "cited"
    request: str
    ref: str


class EraseAnswer(BaseModel):
    type: Literal["answer"] = "answer"
    request: str
    status: Literal["erased", "nothing", "in_flight"]  # in_flight: not erased, the request did not force it
    standing: str | None = None  # where the case stood in the pipeline, if it had not left it
    keys: int = 0  # table entries deleted
    media: int = 0  # media store copies deleted
    media_failed: int = 0  # objects the store could not delete (`erase` deletes them again)
    refs: list[str] = []  # the objects the entries named (sha256s: no personal data), for `erase` to check
    purged: bool = False  # RocksDB databases compacted (False with the memory store: nothing on disk)
    partition: int | None = None  # a CitedRequest's answer: the partition it was asked on
    cited: int = 0  # other cases' stored results rewritten without the case's summary
    cited_in_flight: int = 0  # of those cases, the ones still in the pipeline (they may store it again)


class Answering(Protocol):
    """Where the erasure agent answers: disputes.erasures (a Faust topic), on a partition it chooses."""

    async def send(
        self, *, key: bytes, value: bytes, headers: tracing.Headers | None = None, partition: int | None = None
    ) -> Any: ...


ASKED: TypeAdapter[EraseRequest | CitedRequest] = TypeAdapter(
    Annotated[EraseRequest | CitedRequest, Field(discriminator="type")]
)
CITED_CHUNK = 500  # stored results looked at between two turns of the event loop


class Erasures:
    """The ``erasure`` agent's handler: one request at a time, on the case's partition."""

    def __init__(
        self,
        results: StageResults,
        intake: MutableMapping[str, Any],
        confirmed: MutableMapping[str, Any],
        store: MediaStore,
        in_flight: metrics.CasesInFlight,
        out: Answering,
        on_disk: Sequence[Any] = (),
    ):
        self.results, self.intake, self.confirmed = results, IntakeTable(intake), confirmed
        self.store, self.in_flight, self.out = store, in_flight, out
        self.on_disk = list(on_disk)  # the Faust tables whose RocksDB databases are compacted after

    async def __call__(self, event: Any) -> None:
        message = event.message
        key = message.key if isinstance(message.key, bytes) else str(message.key or "").encode()
        try:
            request = ASKED.validate_json(message.value or b"")
        except ValidationError:  # an answer (ours), a tombstone, or something else: nothing to do
            return
        if isinstance(request, CitedRequest):  # answered on the partition it was asked on
            answer = await self.cited(key.decode(errors="replace"), request, message.partition)
            value = answer.model_dump_json().encode()
            await self.out.send(key=key, value=value, headers=tracing.headers(), partition=message.partition)
            return
        answer = await self.erase(key.decode(errors="replace"), request, message.partition)
        await send_bounded(self.out, key, answer.model_dump_json().encode(), None)

    async def cited(self, case_id: str, request: CitedRequest, partition: int) -> EraseAnswer:
        """The case's summary out of the stored results of the cases on ``partition`` that retrieved
        it as a precedent, a chunk of keys at a time (the worker serves between chunks)."""
        keys = on_partition(self.results, partition)
        answer = EraseAnswer(request=request.request, status="nothing", partition=partition)
        in_flight: set[str] = set()
        for start in range(0, len(keys), CITED_CHUNK):
            done = erase_citations(
                self.results, self.intake, keys[start : start + CITED_CHUNK], case_id, f"erased:{request.ref}"
            )
            answer.cited += done.entries
            in_flight |= done.in_flight
            await asyncio.sleep(0)
        answer.cited_in_flight = len(in_flight)
        if answer.cited:
            answer.status = "erased"
            answer.purged = any([tables.purge(table, partition) for table in self.on_disk])
        log.info(
            "erasure %s: its summary blanked in %d stored results on partition %d (%d of their cases in flight)",
            request.ref,
            answer.cited,
            partition,
            answer.cited_in_flight,
        )
        return answer

    async def erase(self, case_id: str, request: EraseRequest, partition: int) -> EraseAnswer:
        where = standing(self.results, self.intake, case_id)
        if where is not None and not request.force:
            log.info("erasure %s: refused, the case is still in the pipeline (%s)", request.ref, where)
            return EraseAnswer(request=request.request, status="in_flight", standing=where)
        done = erase_case(self.results, self.intake, self.confirmed, case_id, partition)
        self.in_flight.discard(case_id)
        status = "erased" if done.keys else "nothing"
        answer = EraseAnswer(request=request.request, status=status, standing=where, keys=done.keys)
        for ref in sorted(done.refs):
            try:
                answer.media += await self.store.erase(ref)
            except StoreError as err:  # `erase` deletes what it is told of again, and records what is left
                log.warning("erasure %s: a media object was not deleted: %s", request.ref, err.kind)
                answer.media_failed += 1
        answer.refs = sorted(done.refs)
        # after the deletes: the RocksDB files still hold the deleted values until compacted
        answer.purged = any([tables.purge(table, partition) for table in self.on_disk])
        log.info(
            "erasure %s: %d table entries and %d media copies deleted%s",
            request.ref,
            done.keys,
            answer.media,
            " (the case was still in the pipeline: forced)" if where else "",
        )
        return answer


async def ask(settings: Settings, case_id: str, ref: str, force: bool, wait_s: float) -> tuple[str, EraseAnswer | None]:
    """Send the request and wait up to ``wait_s`` for the answer of the worker holding the case's
    partition: (the request id, the answer or None)."""
    request = EraseRequest(request=uuid.uuid4().hex, ref=ref, force=force)
    producer = producer_for(settings)
    await producer.start()
    try:
        sent = await producer.send_and_wait(
            settings.topic(ERASURES), request.model_dump_json().encode(), key=case_id.encode()
        )
    finally:
        await producer.stop()
    where = TopicPartition(sent.topic, sent.partition)
    return request.request, await answer_to(settings, where, sent.offset, request.request, wait_s)


async def answer_to(
    settings: Settings, where: TopicPartition, offset: int, request: str, wait_s: float
) -> EraseAnswer | None:
    """The answer to ``request`` on its partition, read from ``offset`` on for up to ``wait_s``."""
    return (await answers_to(settings, {where: offset}, request, wait_s)).get(where.partition)


async def answers_to(
    settings: Settings, sent: dict[TopicPartition, int], request: str, wait_s: float
) -> dict[int, EraseAnswer]:
    """partition -> the answer to ``request`` there, each partition read from its offset on, until
    every one has answered or ``wait_s`` has passed."""
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, enable_auto_commit=False)
    await consumer.start()
    found: dict[int, EraseAnswer] = {}
    try:
        consumer.assign(list(sent))
        for where, offset in sent.items():
            consumer.seek(where, offset)
        deadline = time.monotonic() + wait_s
        while len(found) < len(sent) and (left := deadline - time.monotonic()) > 0:
            batch = await consumer.getmany(timeout_ms=int(min(left, 1.0) * 1000))
            for where, got in batch.items():
                for record in got:
                    with contextlib.suppress(ValidationError):
                        answer = EraseAnswer.model_validate_json(record.value or b"")
                        if answer.request == request:
                            found[where.partition] = answer
        return found
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(consumer.stop(), 5)


async def ask_cited(
    settings: Settings, case_id: str, ref: str, wait_s: float
) -> tuple[set[int], dict[int, EraseAnswer]]:
    """A ``CitedRequest`` on every partition of disputes.erasures, and up to ``wait_s`` for each
    partition's worker to answer: (the partitions asked, partition -> answer)."""
    request = CitedRequest(request=uuid.uuid4().hex, ref=ref)
    topic = settings.topic(ERASURES)
    producer = producer_for(settings)
    await producer.start()
    try:
        partitions = sorted(await producer.partitions_for(topic))
        sent = {}
        for p in partitions:
            done = await producer.send_and_wait(
                topic, request.model_dump_json().encode(), key=case_id.encode(), partition=p
            )
            sent[TopicPartition(done.topic, done.partition)] = done.offset
    finally:
        await producer.stop()
    return set(partitions), await answers_to(settings, sent, request.request, wait_s)


async def forget_request(settings: Settings, case_id: str, partitions: Collection[int] = ()) -> None:
    """The tombstone that lets compaction drop the case's requests and answers (and so its id) from
    ``disputes.erasures``: on the case's partition, and on each of ``partitions`` (a ``CitedRequest``
    went to every one)."""
    producer = producer_for(settings)
    await producer.start()
    try:
        await producer.send_and_wait(settings.topic(ERASURES), None, key=case_id.encode())
        for p in partitions:
            await producer.send_and_wait(settings.topic(ERASURES), None, key=case_id.encode(), partition=p)
    finally:
        await producer.stop()


def answer_line(answer: EraseAnswer) -> str:
    """An answer as the journal and the report say it."""
    return json.dumps(answer.model_dump(exclude={"refs"}))
