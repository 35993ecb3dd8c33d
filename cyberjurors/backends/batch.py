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
  expired, are sent again in a next batch of the same wave, in at most ``batch_max_attempts``
  batches each; then the call fails as the streaming call would (``llm_<kind>``; an entry that
  expired every time as ``timeout``). A canceled batch stops the run: someone canceled it, and the
  next run sends its unanswered entries again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anthropic
from anthropic.types import Message
from anthropic.types.messages import MessageBatch, MessageBatchIndividualResponse
from pydantic import BaseModel
from rich.progress import Progress, TaskID
from tenacity import AsyncRetrying, retry_if_result, wait_fixed

from ..errors import FINAL_LLM_KINDS, CyberJurorsError
from ..llm import LLM, LLMError, LLMRequest, LLMResult, T
from ..waves import Waves
from .anthropic import AnthropicLLM, read_message

# the API's limits on one batch (https://platform.claude.com/docs/en/build-with-claude/batch-processing),
# the size with room for the envelope
MAX_BATCH_REQUESTS = 100_000
MAX_BATCH_BYTES = 200 * 1024 * 1024
# what an errored entry's error type means, as a streaming call's failure kind
ERROR_KINDS = {"invalid_request_error": "bad_request", "not_found_error": "bad_request",
               "request_too_large": "bad_request", "authentication_error": "auth", "permission_error": "auth",
               "billing_error": "auth", "rate_limit_error": "rate_limited", "overloaded_error": "overloaded",
               "api_error": "server_error", "timeout_error": "timeout", "gateway_timeout_error": "timeout"}
NOT_RETRIED = FINAL_LLM_KINDS | {"auth"}


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
        return await self.waves.wait(Pending(request, output_type))  # type: ignore[no-any-return]


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
        return await asyncio.gather(*(self.inner.generate(c.request, c.output_type) for c in calls),
                                    return_exceptions=True)


def custom_id(body: dict[str, Any]) -> str:
    """The entry's id: a digest of the request body (the API takes [a-zA-Z0-9_-]{1,64})."""
    return "r" + hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:48]


class BatchStore:
    """One configuration's batches under OUT: ``batches.jsonl`` (each batch submitted, with the
    custom_ids it carries; a line when its results were read) and ``results.jsonl`` (each entry's
    result: the message, or the error, expiry or cancel). Append-only; a torn last line (a run killed
    while writing) is skipped. Messages stay on disk: an index of offsets is kept in memory."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.batches_path, self.results_path = folder / "batches.jsonl", folder / "results.jsonl"
        self.submitted: dict[str, list[str]] = {}
        self.collected: set[str] = set()
        self._messages: dict[str, int] = {}
        self.final: dict[str, tuple[str, str]] = {}
        """custom_id -> (error type, message) of an error the same request meets again"""
        for record, _ in self._read(self.batches_path):
            if record.get("collected"):
                self.collected.add(record["batch_id"])
            else:
                self.submitted[record["batch_id"]] = record["custom_ids"]
        for record, offset in self._read(self.results_path):
            self._index(record, offset)

    @staticmethod
    def _read(path: Path) -> Iterator[tuple[dict[str, Any], int]]:
        if not path.exists():
            return
        with path.open("rb") as lines:
            offset = 0
            for line in lines:
                try:
                    yield json.loads(line), offset
                except ValueError:
                    pass  # a line cut short by a kill
                offset += len(line)

    def _index(self, record: dict[str, Any], offset: int) -> None:
        if record["type"] == "succeeded":
            self._messages[record["custom_id"]] = offset
        elif record["type"] == "errored" and batch_kind(record["error_type"]) in NOT_RETRIED:
            self.final[record["custom_id"]] = (record["error_type"], record["error"])

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
            return json.loads(results.readline())["message"]  # type: ignore[no-any-return]

    def submit(self, batch_id: str, ids: list[str]) -> None:
        self._append(self.batches_path, [{"batch_id": batch_id, "custom_ids": ids}])
        self.submitted[batch_id] = ids

    def results(self, batch_id: str, records: list[dict[str, Any]]) -> None:
        """An ended batch's results, then the mark that they were read."""
        offset = self._append(self.results_path, records)
        for record in records:
            self._index(record, offset)
            offset += len(json.dumps(record).encode()) + 1
        self._append(self.batches_path, [{"batch_id": batch_id, "collected": True}])
        self.collected.add(batch_id)

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

    def __init__(self, llm: AnthropicLLM, store: BatchStore, poll_s: float = 30.0, max_attempts: int = 3,
                 progress: Progress | None = None):
        self.llm, self.store, self.poll_s, self.max_attempts = llm, store, poll_s, max_attempts
        self.client: anthropic.AsyncAnthropic = llm.client
        self.progress = progress
        self.stats = WaveStats()
        self._tasks: dict[str, TaskID] = {}

    async def answer(self, calls: list[Pending]) -> Sequence[Any]:
        bodies = [self.llm.params(c.request, c.output_type) for c in calls]
        ids = [custom_id(b) for b in bodies]
        entries = {i: Sent(b, len(json.dumps(b))) for i, b in zip(ids, bodies)}  # one entry per distinct request
        outcomes = await self.settle(entries)
        return [self.read(outcomes[i], c, b["max_tokens"]) for i, c, b in zip(ids, calls, bodies)]

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
            await self.collect(batch_id)
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
                return LLMError("timeout", f"anthropic batch: the request expired in {len(entry.failures)} "
                                           "batches (not processed within 24 hours)")
            return LLMError(batch_kind(last["error_type"]), f"anthropic batch: errored in {len(entry.failures)} "
                                                            f"batches, last {last['error']}")
        return None

    async def send(self, ids: list[str], entries: dict[str, Sent]) -> None:
        """New batches for ``ids``; each errored (worth retrying) or expired result counts as a try."""
        submitted = [await self.submit(chunk, entries) for chunk in chunks(ids, entries)]
        for records in await asyncio.gather(*(self.collect(b) for b in submitted)):
            for record in records:
                if record["type"] == "expired" or (record["type"] == "errored"
                                                   and batch_kind(record["error_type"]) not in NOT_RETRIED):
                    entries[record["custom_id"]].failures.append(record)

    async def submit(self, ids: list[str], entries: dict[str, Sent]) -> str:
        try:
            batch = await self.client.messages.batches.create(
                requests=[{"custom_id": i, "params": entries[i].body} for i in ids])  # type: ignore[misc]
        except anthropic.APIError as err:
            raise BatchStop(f"anthropic: creating a message batch of {len(ids)} requests failed: {err}") from err
        self.store.submit(batch.id, ids)
        self.stats.batches += 1
        self.stats.requests += len(ids)
        return batch.id

    async def collect(self, batch_id: str) -> list[dict[str, Any]]:
        """Wait for a batch to end, then store its results; a canceled batch stops the run."""
        batch = await AsyncRetrying(retry=retry_if_result(lambda b: b.processing_status != "ended"),
                                    wait=wait_fixed(self.poll_s), reraise=True)(self.status, batch_id)
        try:
            records = [result_record(entry, batch_id)
                       async for entry in await self.client.messages.batches.results(batch_id)]
        except anthropic.APIError as err:
            raise BatchStop(f"anthropic: reading the results of message batch {batch_id} failed: {err}") from err
        self.store.results(batch_id, records)
        if batch.request_counts.canceled:
            raise BatchStop(f"message batch {batch_id} was canceled ({batch.request_counts.canceled} requests not "
                            "answered); what it answered is kept, and the same command sends the rest again")
        return records

    async def status(self, batch_id: str) -> MessageBatch:
        try:
            batch = await self.client.messages.batches.retrieve(batch_id)
        except anthropic.APIError as err:
            raise BatchStop(f"anthropic: checking message batch {batch_id} failed: {err}") from err
        self.show(batch)
        return batch

    def show(self, batch: MessageBatch) -> None:
        if self.progress is None:
            return
        counts = batch.request_counts
        total = counts.processing + counts.succeeded + counts.errored + counts.expired + counts.canceled
        if batch.id not in self._tasks:
            self._tasks[batch.id] = self.progress.add_task(f"batch {batch.id}", total=total)
        self.progress.update(self._tasks[batch.id], completed=total - counts.processing,
                             description=f"batch {batch.id} {batch.processing_status}: {counts.succeeded} "
                                         f"succeeded, {counts.errored} errored, {counts.expired} expired")


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
