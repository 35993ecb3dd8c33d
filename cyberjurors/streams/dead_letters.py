"""Dead letters: a message a handler cannot use goes to ``disputes.dlq`` with its original bytes,
a reason from the closed set ``errors.Reason``, and whether resending it may succeed.

Replayability is decided here, by the handler that writes the letter (``replayable=``), since
it knows why the message failed: rejected input would fail the same way (not replayable); a
model call, the precedent base or a bug may succeed later (replayable). ``cyberjurors dlq
--replay`` only reads the flag.
"""

from __future__ import annotations

import base64
import logging
from typing import Any, Protocol

from .. import metrics
from ..errors import Reason, for_people, plain
from ..schemas import DeadLetter, now

log = logging.getLogger("cyberjurors.streams")


class Sender(Protocol):
    """What a handler sends to: a Faust topic, or a list-backed fake in tests."""

    async def send(self, *, key: bytes, value: bytes) -> Any: ...


def letter_for(message: Any, stage: str, reason: str, detail: str, replayable: bool) -> DeadLetter:
    """The letter for one Faust message (``key``, ``value``, ``topic``, ``partition``, ``offset``)."""
    key = message.key.decode(errors="replace") if isinstance(message.key, bytes) else message.key
    return DeadLetter(reason=reason, detail=plain(detail), stage=stage, topic=message.topic,
                      partition=message.partition, offset=message.offset, key=key, replayable=replayable,
                      original_base64=base64.b64encode(message.value or b"").decode(), failed_at=now())


def bug(err: BaseException) -> str:
    """The detail for an exception nothing expected: its type and what it says."""
    return f"{type(err).__name__}: {for_people(err)}"


class DeadLetters:
    def __init__(self, topic: Sender, in_flight: metrics.CasesInFlight):
        self.topic = topic
        self.in_flight = in_flight

    async def write(self, event: Any, stage: str, reason: str, detail: str, *, replayable: bool) -> None:
        message = event.message
        if reason not in Reason.__members__:  # the table test keeps this from happening; never lose the letter
            log.error("dead-letter reason %r is not in errors.Reason", reason)
        letter = letter_for(message, stage, reason, detail, replayable)
        log.warning("dead letter from %s: %s (%s) key=%s offset=%s", stage, reason, detail[:300], letter.key,
                    message.offset)
        await self.topic.send(key=(letter.key or "").encode(), value=letter.model_dump_json().encode())
        metrics.record_dead_letter(stage, reason)
        if stage not in ("ingest", "outcomes") and letter.key:  # a case that left the pipeline
            self.in_flight.discard(letter.key)
