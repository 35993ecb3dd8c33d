"""The idempotent producer, wherever the broker grants it (``kafka_idempotence``).

An idempotent producer numbers its batches under a producer id the broker hands out
(InitProducerId), so a retry after a lost acknowledgement is not written twice. Apache Kafka grants
one to every client by default since 3.0; the embedded broker (Tansu) answers InitProducerId with
an error, and a broker without the API does not list it in its ApiVersions.

``auto`` (the default) asks the broker once per process and bootstrap: granted, every producer
of the process is idempotent; refused, they produce as before (``acks=all``, no producer id), and
one warning says why. ``on`` requires it: a refusal is an ``IdempotenceRefused`` and the producer
does not start. ``off`` never asks. The answer is kept for the process, so a worker's producers,
a CLI's and a console's ask once and warn once.

Both producers follow it: the clients' (``tooling/clients.py``) and Faust's. faust-streaming's
aiokafka producer turns idempotence on only inside its transactions (``processing_guarantee =
exactly_once``) and has no setting for it otherwise, so ``use_idempotence`` gives the app a
producer that asks, as the clients do, before it starts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import faust
from aiokafka import AIOKafkaProducer, errors
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.transaction import InitProducerIdRequest
from faust.transport.drivers import aiokafka as driver

from ..config import KafkaSettings, Settings
from ..errors import CyberJurorsError
from .cluster import client_options

log = logging.getLogger("cyberjurors.streams")

# room in a message for the record's own framing (headers, lengths, timestamps, the key's length):
# the producers allow max_event_bytes plus this, so a value checked against max_event_bytes is sent
RECORD_OVERHEAD = 16_384

# bootstrap servers -> whether the broker granted a producer id, for this process
_granted: dict[str, bool] = {}


class IdempotenceRefused(CyberJurorsError, RuntimeError):
    kind = "idempotence_refused"


def refusal_of(error_code: int) -> str | None:
    """Why an InitProducerId answer refuses idempotence, or None when it grants it. A retriable
    error (the coordinator still loading, say) is a broker that grants ids, only not yet: the
    producer waits for its id as it always does."""
    error = errors.for_code(error_code)
    if error is errors.NoError or error.retriable:
        return None
    return f"the broker answered InitProducerId with {error.__name__}"


async def refusal(settings: KafkaSettings) -> str | None:
    """Ask one broker for a producer id, as an idempotent producer's start does: None when granted,
    else why not. A broker that cannot be reached raises as a producer's start would."""
    client = AIOKafkaClient(**client_options(settings))
    await client.bootstrap()
    try:
        request = InitProducerIdRequest(None, 60_000)  # no transactional id: an idempotent producer's request
        try:
            response = await client.send(client.get_random_node(), request)
        except (errors.IncompatibleBrokerVersion, NotImplementedError):
            return "the broker does not list InitProducerId in its ApiVersions"
        return refusal_of(response.error_code)
    finally:
        await client.close()


async def idempotent(settings: KafkaSettings) -> bool:
    """Whether this process's producers are idempotent, by ``kafka_idempotence``; the first refusal
    of a bootstrap under ``auto`` is the one warning."""
    if settings.kafka_idempotence == "off":
        return False
    servers = settings.kafka_bootstrap_servers
    if servers in _granted:
        granted = _granted[servers]
    else:
        why = await refusal(settings)
        granted = why is None
        first = servers not in _granted  # no await since the check above but the probe's: the one to warn
        _granted[servers] = granted
        if not granted and first and settings.kafka_idempotence == "auto":
            log.warning(
                "%s: producing without idempotence (acks=all), as the embedded broker needs; a retry after a "
                "lost acknowledgement may write a message twice, which the stages and verdict consumers "
                "dedupe. Set kafka_idempotence=off to say so, or =on to require it",
                why,
            )
    if not granted and settings.kafka_idempotence == "on":
        raise IdempotenceRefused(
            f"kafka_idempotence=on, but the broker at {servers} refuses an idempotent producer; set it to "
            "auto to fall back, or off"
        )
    return granted


def on_embedded(settings: KafkaSettings) -> dict[str, Any]:
    """The settings update for a command that starts the embedded broker itself (demo, eval, the
    console's --embedded): it knows idempotence is refused there, so ``auto`` is ``off`` and nothing
    warns; ``on`` stays, and fails as asked."""
    return {"kafka_idempotence": "off"} if settings.kafka_idempotence == "auto" else {}


class Producer(driver.Producer):
    """Faust's producer, idempotent when ``idempotent`` says so (decided as it starts)."""

    idempotent = False

    async def on_start(self) -> None:
        self.idempotent = await idempotent(self.app.cyberjurors_settings)  # type: ignore[attr-defined]
        await super().on_start()

    def _settings_extra(self) -> Mapping[str, Any]:
        extra = super()._settings_extra()
        if self.idempotent and not extra:  # inside a transaction Faust asks for it itself
            return {"acks": "all", "enable_idempotence": True}
        return extra


def use_idempotence(app: faust.App) -> None:
    """The app's producer asks for idempotence (after ``use_fetch_wait``, which installs the transport)."""
    app.transport.Producer = Producer  # type: ignore[misc]  # the transport's class attribute, for this app only


def producer_for(settings: Settings, idempotent: bool = False) -> AIOKafkaProducer:
    """acks=all either way: without idempotence (a broker that refuses it) the write is still waited for."""
    return AIOKafkaProducer(
        **client_options(settings),
        acks="all",
        enable_idempotence=idempotent,
        max_request_size=settings.intake_limits.max_event_bytes + RECORD_OVERHEAD,
    )
