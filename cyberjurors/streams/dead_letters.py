"""Dead letters: a message a handler cannot use goes to ``disputes.dlq`` with its original bytes,
a reason from the closed set ``errors.Reason``, and whether resending it may succeed.

Replayability is decided here, by the handler that writes the letter (``replayable=``), since
it knows why the message failed: rejected input would fail the same way (not replayable); a
model call, the precedent base or a bug may succeed later (replayable). ``cyberjurors dlq
--replay`` only reads the flag.

A letter always fits within ``max_event_bytes``: an original too large to carry as base64 is put
in the media store and the letter names it (``original_ref``). Every send a handler makes goes
through ``send_bounded``, so an output over the limit, or one the broker refuses as too large,
is an ``OutputTooLarge`` the handler dead-letters, never a crash of the worker; it also puts on
the headers every message carries (``tracing.headers``: trace context, content type, schema
version).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import MutableMapping
from datetime import UTC, datetime
from typing import Any, Protocol

from aiokafka.errors import MessageSizeTooLargeError

from ..errors import OutputTooLarge, Reason, for_people, plain
from ..evidence.media_store import MediaStore, StoreError
from ..evidence.records import Sealed
from ..observability import metrics, tracing
from ..schemas import DeadLetter, now
from ..state.intake import IntakeTable
from ..state.results import StageResults

log = logging.getLogger("cyberjurors.streams")

MAX_KEY_CHARS = 1024  # a case id is at most 128; a longer key is not one, and is cut on the letter
DEFAULT_MAX_BYTES = 1_000_000


class Sender(Protocol):
    """What a handler sends to: a Faust topic, or a list-backed fake in tests."""

    async def send(self, *, key: bytes, value: bytes, headers: tracing.Headers | None = None) -> Any: ...


async def send_bounded(out: Sender, key: bytes, value: bytes, max_bytes: int | None) -> None:
    """``out.send`` for a message within ``max_bytes``; OutputTooLarge instead of sending one over it,
    or when the producer or the broker refuses it as too large (a broker limit below ours)."""
    if max_bytes is not None and len(key) + len(value) > max_bytes:
        raise OutputTooLarge(f"{len(key) + len(value)} bytes, limit max_event_bytes={max_bytes}")
    try:
        await out.send(key=key, value=value, headers=tracing.headers())
    except MessageSizeTooLargeError as err:
        raise OutputTooLarge(
            f"{len(value)} bytes refused as too large by the producer or the broker "
            f"({for_people(err)}); is the broker's max.message.bytes below max_event_bytes?"
        ) from err


def letter_for(message: Any, stage: str, reason: str, detail: str, replayable: bool) -> DeadLetter:
    """The letter for one Faust message (``key``, ``value``, ``topic``, ``partition``, ``offset``),
    carrying the original as base64."""
    key = message.key.decode(errors="replace") if isinstance(message.key, bytes) else message.key
    value = message.value or b""
    return DeadLetter(
        reason=reason,
        detail=plain(detail),
        stage=stage,
        topic=message.topic,
        partition=message.partition,
        offset=message.offset,
        key=key[:MAX_KEY_CHARS] if key else key,
        replayable=replayable,
        original_base64=base64.b64encode(value).decode(),
        original_bytes=len(value),
        failed_at=now(),
    )


def bug(err: BaseException) -> str:
    """The detail for an exception nothing expected: its type and what it says."""
    return f"{type(err).__name__}: {for_people(err)}"


class DeadLetters:
    """``intake``, when given, is the intake table: a case that leaves the jury as a dead letter is
    noted on its admitted entry, so intake can say so when the same case is submitted again (it
    ignores it: only a replay of the letter judges it again)."""

    def __init__(
        self,
        topic: Sender,
        in_flight: metrics.CasesInFlight,
        store: MediaStore | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        intake: MutableMapping[str, Any] | None = None,
    ):
        self.topic = topic
        self.in_flight = in_flight
        self.store = store
        self.max_bytes = max_bytes
        self.intake = None if intake is None else IntakeTable(intake)

    async def write(
        self, event: Any, stage: str, reason: str, detail: str, *, replayable: bool, clear: bool = False
    ) -> None:
        """``clear``: a letter about a sealed record nothing opens (its case erased, say), sent as it
        is: it carries no readable party text, and sealing it would make the erased case a new key."""
        with tracing.dead_letter(stage, reason, replayable):  # the letter's headers carry the case's trace
            await self._write(event, stage, reason, detail, replayable, clear)

    async def _write(self, event: Any, stage: str, reason: str, detail: str, replayable: bool, clear: bool) -> None:
        out = self.topic.out if clear and isinstance(self.topic, Sealed) else self.topic
        message = event.message
        if reason not in Reason.__members__:  # the table test keeps this from happening; never lose the letter
            log.error("dead-letter reason %r is not in errors.Reason", reason)
        letter = letter_for(message, stage, reason, detail, replayable)
        log.warning(
            "dead letter from %s: %s (%s) key=%s offset=%s", stage, reason, detail[:300], letter.key, message.offset
        )
        key = (letter.key or "").encode()
        value = letter.model_dump_json().encode()
        try:
            if len(key) + len(value) > self.max_bytes:
                raise OutputTooLarge("the original is too large to carry")
            await send_bounded(out, key, value, self.max_bytes)
        except OutputTooLarge:  # the original goes to the media store, the letter names it
            await self._send_by_reference(letter, message.value or b"", key, out, clear)
        metrics.record_dead_letter(stage, reason)
        if stage not in ("intake", "outcome") and letter.key:  # a case that left the pipeline
            self.in_flight.discard(letter.key)
            self._note_on_intake(letter, message.partition)

    def _note_on_intake(self, letter: DeadLetter, partition: int | None) -> None:
        if self.intake is None or not letter.key or letter.stage in ("appeal", "letters"):  # these cases have verdicts
            return
        noted = {"stage": letter.stage, "reason": letter.reason, "replayable": letter.replayable}
        self.intake.note_dead_letter(letter.key, noted, partition)

    async def _send_by_reference(
        self, letter: DeadLetter, original: bytes, key: bytes, out: Sender, clear: bool
    ) -> None:
        try:
            if self.store is None:
                raise StoreError("no media store configured", kind="unavailable")
            # the case's own object (sealed under its key with media_encryption: erasing the case shreds it
            # too); a letter with no key has no case to seal under, and an encrypting store refuses it
            ref = await self.store.put(original, None if clear else letter.key or None)
            letter = letter.model_copy(update={"original_base64": "", "original_ref": ref})
        except StoreError as err:  # the letter still goes out; the original stays only in its source topic
            log.error(
                "dead letter for %s offset %s: its original (%d bytes) could not be stored: %s",
                letter.topic,
                letter.offset,
                len(original),
                err.detail,
            )
            letter = letter.model_copy(
                update={
                    "original_base64": "",
                    "detail": plain(
                        f"{letter.detail}; the original ({len(original)} bytes) is "
                        f"too large to carry and could not be stored: {err.detail}"
                    ),
                }
            )
        try:
            await send_bounded(out, key, letter.model_dump_json().encode(), self.max_bytes)
        except OutputTooLarge as err:  # cannot happen below a sane broker limit; say so rather than crash
            log.error(
                "dead letter for %s/%s offset %s could not be sent: %s (original_ref %s)",
                letter.topic,
                letter.partition,
                letter.offset,
                err.detail,
                letter.original_ref,
            )


def shown_time(at: datetime) -> str:
    """A time for a letter's detail: in UTC, or as it was given when UTC cannot hold it
    (0001-01-01T00:00+01:00 is in year 0 there)."""
    try:
        return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    except OverflowError:
        return at.isoformat(timespec="minutes")


async def hand_on(
    results: StageResults, case_id: str, stage: str, value: bytes, out: Sender, hold_s: float = 0.0
) -> None:
    """Store first, then send: a replay after a crash in between re-sends what was stored. With
    ``hold_s``, the case's keys expire that much later than the retention after this."""
    results.put(case_id, stage, value, hold_s)
    await send_bounded(out, case_id.encode(), value, results.max_bytes)
