"""Model calls answered in waves (``waves.py``): in process by another backend, or through
Anthropic's Message Batches API at its batch price.

``WaveLLM`` is the model port of a run in waves: ``generate`` joins the current wave and returns
when the wave is answered. What answers a wave:

* ``InProcess``: another backend, every call of the wave at once. With the offline stand-in this is
  how ``eval --batch`` runs without a provider: the same waves, no batch API, nothing discounted.
* ``MessageBatches``: the wave as Message Batches (split at the API's limits), polled until they
  end, results read back by ``custom_id``. The custom_id is a digest of the request body, so the same
  request gets the same id in a later run. A ``BatchStore`` folder keeps the id of every batch
  submitted and every entry's result: a run that was stopped and started again collects the batches
  it had submitted instead of paying for them twice, and takes the answers it already has. Entries
  that come back errored with a kind worth retrying (``errors.FINAL_LLM_KINDS`` are not), or
  expired, are sent again in a next batch of the same wave, in at most ``llm_batch.max_attempts``
  batches each; then the call fails as the streaming call would (``llm_<kind>``; an entry that
  expired every time as ``timeout``). A canceled batch stops the run: someone canceled it, and the
  next run sends its unanswered entries again. So does a batch that has not ended after
  ``llm_batch.max_wait_s``, and a status check or result download still failing (connection error, 5xx)
  after ``llm_batch.retry_s`` of tries: the next run collects it. A stored batch the provider does not
  know (404) is forgotten and its entries sent again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import anthropic
from anthropic.types import Message
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, model_validator
from rich.progress import Progress, TaskID
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    retry_if_result,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
    wait_fixed,
)

from ...errors import FINAL_LLM_KINDS, CyberJurorsError, StoreError, for_people
from ..port import LLM, LLMError, LLMRequest, LLMResult, T
from ..waves import Waves
from .anthropic import AnthropicLLM, read_message

# the API's limits on one batch (https://platform.claude.com/docs/en/build-with-claude/batch-processing),
# the size with room for the envelope
MAX_BATCH_REQUESTS = 100_000
MAX_BATCH_BYTES = 200 * 1024 * 1024
# what an errored entry's error type means, as a streaming call's failure kind
ERROR_KINDS = {
    "invalid_request_error": "bad_request",
    "not_found_error": "bad_request",
    "request_too_large": "bad_request",
    "authentication_error": "auth",
    "permission_error": "auth",
    "billing_error": "auth",
    "rate_limit_error": "rate_limited",
    "overloaded_error": "overloaded",
    "api_error": "server_error",
    "timeout_error": "timeout",
    "gateway_timeout_error": "timeout",
}
NOT_RETRIED = FINAL_LLM_KINDS | {"auth"}
RESUMES = "the batch ids are stored in OUT/batches: the same command resumes"
log = logging.getLogger(__name__)
R = TypeVar("R")


def batch_kind(error_type: str) -> str:
    """An errored entry's error type as the kind a streaming call's failure would have."""
    return ERROR_KINDS.get(error_type, "server_error")


class BatchStop(CyberJurorsError, RuntimeError):
    """The run cannot go on (a batch was canceled, the batch API refused or failed); what it has done
    is kept and the same command resumes."""

    kind = "batch_stopped"


@dataclass(frozen=True)
class Pending:
    """What one call of a wave asks."""

    request: LLMRequest
    output_type: type[BaseModel]


class WaveLLM:
    """The model port for a run in waves: every call joins the current wave of ``waves``."""

    def __init__(self, waves: Waves[Pending], backend: str, model_label: str | None = None):
        self.waves = waves
        self.backend = backend
        if model_label is not None:
            self.model_label = model_label

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        return await self.waves.wait(Pending(request, output_type))


@dataclass
class WaveStats:
    """What answering the waves took (for the report)."""

    batches: int = 0
    """Message Batches created by this run"""
    requests: int = 0
    """entries sent in them, retries included"""
    retried: int = 0
    """entries sent again after an errored or expired result"""
    resumed: int = 0
    """answers taken from the store: paid for by an earlier run"""
    collected: int = 0
    """batches an earlier run had submitted, collected by this one"""


class InProcess:
    """Each wave answered by another backend, all its calls at once: no batch API, no discount."""

    executor: Literal["in-process"] = "in-process"
    discounted = False

    def __init__(self, inner: LLM):
        self.inner = inner
        self.backend = inner.backend
        self.model_label = getattr(inner, "model_label", None)
        self.stats = WaveStats()

    async def answer(self, calls: list[Pending]) -> Sequence[Any]:
        return await asyncio.gather(
            *(self.inner.generate(c.request, c.output_type) for c in calls), return_exceptions=True
        )


def custom_id(body: dict[str, Any]) -> str:
    """The entry's id: a digest of the request body (the API takes [a-zA-Z0-9_-]{1,64})."""
    return "r" + hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:48]


class BatchLine(BaseModel):
    """A line of ``batches.jsonl``: what became of one batch."""

    model_config = ConfigDict(extra="forbid")
    batch_id: str


class Submitted(BatchLine):
    custom_ids: list[str]


class Collected(BatchLine):
    collected: Literal[True]


class Forgotten(BatchLine):
    """The provider does not know the batch (another workspace, or deleted after its retention):
    its entries are sent again."""

    forgotten: Literal[True]


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid")
    custom_id: str
    batch_id: str
    type: Literal["succeeded", "errored", "expired", "canceled"]
    message: dict[str, Any] | None = None
    error_type: str | None = None
    error: str | None = None

    @model_validator(mode="after")
    def _complete(self) -> Result:
        if self.type == "succeeded" and self.message is None:
            raise ValueError("a succeeded result needs its message")
        if self.type == "errored" and (self.error_type is None or self.error is None):
            raise ValueError("an errored result needs error_type and error")
        return self


BATCH_LINE: TypeAdapter[Submitted | Collected | Forgotten] = TypeAdapter(Submitted | Collected | Forgotten)
RESULT_LINE: TypeAdapter[Result] = TypeAdapter(Result)


class BatchStore:
    """One configuration's batches under OUT: ``batches.jsonl`` (each batch submitted, with the
    custom_ids it carries; a line when its results were read, or when the provider did not know it)
    and ``results.jsonl`` (each entry's result: the message, or the error, expiry or cancel).
    Append-only. A torn last line (a run killed while appending) is cut off with a warning; any
    other line that is not a valid record stops the run (``StoreError``, kind ``batch_store_damaged``): skipping it would pay
    for what it records again. Messages stay on disk: an index of offsets is kept in memory."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.batches_path, self.results_path = folder / "batches.jsonl", folder / "results.jsonl"
        self.submitted: dict[str, list[str]] = {}
        self.collected: set[str] = set()
        self._messages: dict[str, int] = {}
        self.final: dict[str, tuple[str, str]] = {}
        """custom_id -> (error type, message) of an error the same request meets again"""
        for record, _ in self._read(self.batches_path, BATCH_LINE):
            if isinstance(record, Submitted):
                self.submitted[record.batch_id] = record.custom_ids
            elif isinstance(record, Collected):
                self.collected.add(record.batch_id)
            else:
                self.submitted.pop(record.batch_id, None)
        for result, offset in self._read(self.results_path, RESULT_LINE):
            self._index(result, offset)

    @staticmethod
    def _read(path: Path, shape: TypeAdapter[Any]) -> Iterator[tuple[Any, int]]:
        if not path.exists():
            return
        size = path.stat().st_size
        with path.open("rb") as lines:
            offset, number, line = 0, 0, b""
            for number, line in enumerate(lines, 1):
                try:
                    record = shape.validate_json(line)
                except ValidationError as err:
                    if offset + len(line) == size and not line.endswith(b"\n"):
                        break
                    raise StoreError(
                        f"{path}, line {number}: not a valid record ({for_people(err, 300)}). The batch store is "
                        "damaged, and reading past the line would send and pay again for what it records: restore "
                        "the file, or delete that line (its entries are then sent again), or start over with "
                        "--fresh (discards every stored answer)",
                        kind="batch_store_damaged",
                    ) from err
                yield record, offset
                offset += len(line)
        if offset < size:
            # an append cut short by a kill: cut off, so that the next append starts a line of its own
            log.warning(
                "%s: line %d is an unfinished append (a run was stopped while writing it); it is dropped", path, number
            )
            with path.open("r+b") as out:
                out.truncate(offset)
        elif line and not line.endswith(b"\n"):  # a whole record, cut before its newline
            with path.open("ab") as out:
                out.write(b"\n")

    def _index(self, result: Result, offset: int) -> None:
        if result.type == "succeeded":
            self._messages[result.custom_id] = offset
        elif result.type == "errored" and batch_kind(result.error_type or "") in NOT_RETRIED:
            self.final[result.custom_id] = (result.error_type or "", result.error or "")

    def _append(self, path: Path, records: list[dict[str, Any]]) -> int:
        with path.open("ab") as out:
            start = out.tell()
            out.write(b"".join(json.dumps(r).encode() + b"\n" for r in records))
            out.flush()
            os.fsync(out.fileno())  # a batch id lost here is a batch paid for twice
        return start

    def message(self, custom_id: str) -> dict[str, Any] | None:
        offset = self._messages.get(custom_id)
        if offset is None:
            return None
        with self.results_path.open("rb") as results:
            results.seek(offset)
            return json.loads(results.readline())["message"]

    def submit(self, batch_id: str, ids: list[str]) -> None:
        self._append(self.batches_path, [{"batch_id": batch_id, "custom_ids": ids}])
        self.submitted[batch_id] = ids

    def results(self, batch_id: str, records: list[dict[str, Any]]) -> None:
        """An ended batch's results, then the mark that they were read."""
        offset = self._append(self.results_path, records)
        for record in records:
            self._index(Result.model_validate(record), offset)
            offset += len(json.dumps(record).encode()) + 1
        self._append(self.batches_path, [{"batch_id": batch_id, "collected": True}])
        self.collected.add(batch_id)

    def forget(self, batch_id: str) -> None:
        """A batch the provider does not know: its entries are no longer waited for."""
        self._append(self.batches_path, [{"batch_id": batch_id, "forgotten": True}])
        self.submitted.pop(batch_id, None)

    def outstanding(self, ids: set[str]) -> list[str]:
        """Batches submitted but never read that carry any of ``ids``."""
        return [b for b, carried in self.submitted.items() if b not in self.collected and ids & set(carried)]


def result_record(entry: MessageBatchIndividualResponse, batch_id: str) -> dict[str, Any]:
    result = entry.result
    record: dict[str, Any] = {"custom_id": entry.custom_id, "batch_id": batch_id, "type": result.type}
    if result.type == "succeeded":
        record["message"] = result.message.model_dump(mode="json")
    elif result.type == "errored":
        error = result.error.error
        record["error_type"] = error.type
        record["error"] = f"{error.type}: {error.message}"[:500]
    return record


@dataclass
class Sent:
    """A wave's entry: its body, and how its tries went in this run."""

    body: dict[str, Any]
    size: int
    failures: list[dict[str, Any]] = field(default_factory=list)


class MessageBatches:
    """Each wave as Message Batches through the official SDK, resumable through a ``BatchStore``."""

    executor: Literal["message-batches"] = "message-batches"
    discounted = True
    backend = "anthropic"

    def __init__(
        self,
        llm: AnthropicLLM,
        store: BatchStore,
        poll_s: float = 30.0,
        max_attempts: int = 3,
        progress: Progress | None = None,
        max_wait_s: float = 90_000.0,
        retry_s: float = 600.0,
    ):
        self.llm, self.store, self.poll_s, self.max_attempts = llm, store, poll_s, max_attempts
        self.max_wait_s, self.retry_s = max_wait_s, retry_s
        self.client: anthropic.AsyncAnthropic = llm.client
        self.progress = progress
        """a terminal's progress display; without one, each batch's counts are logged as they change"""
        self.stats = WaveStats()
        self._tasks: dict[str, TaskID] = {}
        self._counts: dict[str, tuple[str, int, int, int, int, int]] = {}

    async def answer(self, calls: list[Pending]) -> Sequence[Any]:
        bodies = [self.llm.params(c.request, c.output_type) for c in calls]
        ids = [custom_id(b) for b in bodies]
        entries = {
            i: Sent(b, len(json.dumps(b))) for i, b in zip(ids, bodies, strict=True)
        }  # one entry per distinct request
        outcomes = await self.settle(entries)
        return [self.read(outcomes[i], c, b["max_tokens"]) for i, c, b in zip(ids, calls, bodies, strict=True)]

    @staticmethod
    def read(outcome: dict[str, Any] | LLMError, call: Pending, max_tokens: int) -> LLMResult[Any] | LLMError:
        if isinstance(outcome, LLMError):
            return outcome
        try:
            return read_message(Message.model_validate(outcome), call.request, call.output_type, max_tokens)
        except LLMError as err:
            return err

    async def settle(self, entries: dict[str, Sent]) -> dict[str, dict[str, Any] | LLMError]:
        """Every entry's message, or the error it ends with: from the store, from batches an earlier
        run submitted, then from new batches, sending again what is worth it."""
        for batch_id in self.store.outstanding(set(entries)):
            try:
                await self.collect(batch_id)
            except UnknownBatch:
                # without this, every rerun would stop on it, and only --fresh (which drops every
                # answer paid for) would get past it
                log.warning(
                    "message batch %s is unknown to the provider (submitted from another workspace, or "
                    "deleted after the API's 29-day retention): forgotten, its %d entries are sent again",
                    batch_id,
                    len(self.store.submitted[batch_id]),
                )
                self.store.forget(batch_id)
                continue
            self.stats.collected += 1
        done: dict[str, dict[str, Any] | LLMError] = {}
        sent: set[str] = set()
        while todo := [i for i in entries if i not in done]:
            send = []
            for i in todo:
                outcome = self.outcome(i, entries[i])
                if outcome is None:
                    send.append(i)
                else:
                    done[i] = outcome
            if send:
                self.stats.retried += sum(bool(entries[i].failures) for i in send)
                sent.update(send)
                await self.send(send, entries)
        self.stats.resumed += len(entries.keys() - sent)
        return done

    def outcome(self, i: str, entry: Sent) -> dict[str, Any] | LLMError | None:
        """What is known of an entry: its message, a final error, or None = send it (again)."""
        message = self.store.message(i)
        if message is not None:
            return message
        if i in self.store.final:
            error_type, error = self.store.final[i]
            return LLMError(batch_kind(error_type), f"anthropic batch: {error}")
        if len(entry.failures) >= self.max_attempts:
            last = entry.failures[-1]
            if last["type"] == "expired":
                return LLMError(
                    "timeout",
                    f"anthropic batch: the request expired in {len(entry.failures)} "
                    "batches (not processed within 24 hours)",
                )
            return LLMError(
                batch_kind(last["error_type"]),
                f"anthropic batch: errored in {len(entry.failures)} batches, last {last['error']}",
            )
        return None

    async def send(self, ids: list[str], entries: dict[str, Sent]) -> None:
        """New batches for ``ids``; each errored (worth retrying) or expired result counts as a try."""
        submitted = [await self.submit(chunk, entries) for chunk in chunks(ids, entries)]
        for records in await asyncio.gather(*(self.collect(b) for b in submitted)):
            for record in records:
                if record["type"] == "expired" or (
                    record["type"] == "errored" and batch_kind(record["error_type"]) not in NOT_RETRIED
                ):
                    entries[record["custom_id"]].failures.append(record)

    async def submit(self, ids: list[str], entries: dict[str, Sent]) -> str:
        try:
            # params() builds each body as a plain dict, of the shape the SDK's TypedDict describes
            batch = await self.client.messages.batches.create(
                requests=[{"custom_id": i, "params": entries[i].body} for i in ids]  # type: ignore[typeddict-item]
            )
        except anthropic.APIError as err:
            raise BatchStop(f"anthropic: creating a message batch of {len(ids)} requests failed: {err}") from err
        self.store.submit(batch.id, ids)
        self.stats.batches += 1
        self.stats.requests += len(ids)
        log.info("message batch %s created: %d requests", batch.id, len(ids))
        return batch.id

    async def collect(self, batch_id: str) -> list[dict[str, Any]]:
        """Wait for a batch to end (at most ``max_wait_s``), then store its results; a canceled batch
        stops the run."""
        batch: MessageBatch = await AsyncRetrying(
            retry=retry_if_result(lambda b: b.processing_status != "ended"),
            wait=wait_fixed(self.poll_s),
            stop=stop_after_delay(self.max_wait_s),
            retry_error_callback=last_result,
        )(self.status, batch_id)
        if batch.processing_status != "ended":
            raise BatchStop(
                f"message batch {batch_id} has not ended after {self.max_wait_s:g} s of polling "
                f"(llm_batch.max_wait_s; status {batch.processing_status}, {batch.request_counts.processing} "
                f"requests processing); it is not canceled, and {RESUMES} and collects it"
            )
        records = await self.patiently(f"reading the results of message batch {batch_id}", self.download, batch_id)
        self.store.results(batch_id, records)
        if batch.request_counts.canceled:
            raise BatchStop(
                f"message batch {batch_id} was canceled ({batch.request_counts.canceled} requests not "
                "answered); what it answered is kept, and the same command sends the rest again"
            )
        return records

    async def download(self, batch_id: str) -> list[dict[str, Any]]:
        return [result_record(entry, batch_id) async for entry in await self.client.messages.batches.results(batch_id)]

    async def status(self, batch_id: str) -> MessageBatch:
        batch = await self.patiently(
            f"checking message batch {batch_id}", self.client.messages.batches.retrieve, batch_id
        )
        self.show(batch)
        return batch

    async def patiently(self, doing: str, call: Callable[[str], Awaitable[R]], batch_id: str) -> R:
        """An idempotent call, tried again on connection errors and 5xx for up to ``retry_s`` (and at
        least once more, however short that is): a run can last a day, and one blip should not end it."""
        try:
            return await AsyncRetrying(
                retry=retry_if_exception(transient),
                stop=stop_after_delay(self.retry_s) & stop_after_attempt(2),
                wait=wait_exponential(multiplier=min(self.poll_s, 1.0), max=60),
                reraise=True,
            )(call, batch_id)
        except anthropic.NotFoundError as err:
            raise UnknownBatch(f"anthropic: {doing} failed: {err}; the provider does not know this batch") from err
        except anthropic.APIError as err:
            again = f"; {RESUMES}" if transient(err) else ""
            raise BatchStop(f"anthropic: {doing} failed: {err}{again}") from err

    def show(self, batch: MessageBatch) -> None:
        counts = batch.request_counts
        if self.progress is None:
            now = (
                batch.processing_status,
                counts.processing,
                counts.succeeded,
                counts.errored,
                counts.expired,
                counts.canceled,
            )
            if self._counts.get(batch.id) != now:
                self._counts[batch.id] = now
                log.info(
                    "message batch %s %s: %d processing, %d succeeded, %d errored, %d expired, %d canceled",
                    batch.id,
                    *now,
                )
            return
        total = counts.processing + counts.succeeded + counts.errored + counts.expired + counts.canceled
        if batch.id not in self._tasks:
            self._tasks[batch.id] = self.progress.add_task(f"batch {batch.id}", total=total)
        self.progress.update(
            self._tasks[batch.id],
            completed=total - counts.processing,
            description=f"batch {batch.id} {batch.processing_status}: {counts.succeeded} "
            f"succeeded, {counts.errored} errored, {counts.expired} expired",
        )


class UnknownBatch(BatchStop):
    """The provider answered 404 for a batch id."""


def transient(err: BaseException) -> bool:
    return isinstance(err, anthropic.APIConnectionError) or (
        isinstance(err, anthropic.APIStatusError) and err.status_code >= 500
    )


def last_result(state: RetryCallState) -> Any:
    return state.outcome.result() if state.outcome is not None else None


def chunks(ids: list[str], entries: dict[str, Sent]) -> Iterator[list[str]]:
    """The ids in batches within the API's count and size limits."""
    chunk: list[str] = []
    size = 0
    for i in ids:
        if chunk and (len(chunk) >= MAX_BATCH_REQUESTS or size + entries[i].size > MAX_BATCH_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(i)
        size += entries[i].size
    if chunk:
        yield chunk
