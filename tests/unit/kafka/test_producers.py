"""The idempotent producer (kafka/producers.py, ``kafka_idempotence``) against the session's
embedded broker, which refuses idempotence: ``auto`` falls back with one warning and still
delivers, ``on`` refuses to start, ``off`` never asks; and how an InitProducerId answer is read."""

from __future__ import annotations

import logging

import pytest
from aiokafka import errors

from cyberjurors.config import Settings
from cyberjurors.kafka import producers
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.streams.app import faust_app
from cyberjurors.tooling.clients import Outgoing, produce, records, started_producer

from ...conftest import EXAMPLES, cli

WARNING = "producing without idempotence"


@pytest.fixture(autouse=True)
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test as a process of its own: nothing asked yet."""
    monkeypatch.setattr(producers, "_granted", {})


def warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and WARNING in r.getMessage()]


async def test_auto_falls_back_on_the_embedded_broker_with_one_warning_and_still_delivers(
    settings: Settings, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
):
    caplog.set_level(logging.WARNING, "cyberjurors.streams")
    await ensure_topics(settings)
    assert await producers.idempotent(settings) is False
    [warned] = warnings(caplog)
    assert "InitProducerId with UnknownError" in warned.getMessage()

    async def asked_again(settings: Settings) -> str | None:
        raise AssertionError("the broker's answer is kept for the process")

    monkeypatch.setattr(producers, "refusal", asked_again)
    events = [Outgoing(f"c-{n}", b'{"n": %d}' % n, "test", topic=settings.topic("disputes.audit")) for n in range(3)]
    await produce(settings, events[:2])  # two producers, one after the other: no second warning
    await produce(settings, events[2:])
    assert len(warnings(caplog)) == 1
    found = [r.value async for r in records(settings, "disputes.audit", follow=False, idle_timeout_s=1)]
    assert sorted(found) == [e.value for e in events]


async def test_on_refuses_to_start_a_producer_the_broker_refuses(settings: Settings, caplog):
    settings = settings.model_copy(update={"kafka_idempotence": "on"})
    with pytest.raises(producers.IdempotenceRefused) as refused:
        await started_producer(settings)
    assert "kafka_idempotence=on" in refused.value.detail and settings.kafka_bootstrap_servers in refused.value.detail
    assert warnings(caplog) == []  # the error says it: no fallback to warn about
    with pytest.raises(producers.IdempotenceRefused):
        await produce(settings, [Outgoing("c-1", b"{}", "test")])


async def test_off_never_asks(settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog):
    async def asked(settings: Settings) -> str | None:
        raise AssertionError("off asks nothing")

    monkeypatch.setattr(producers, "refusal", asked)
    settings = settings.model_copy(update={"kafka_idempotence": "off"})
    producer = await started_producer(settings)
    try:
        assert producer._txn_manager is None  # aiokafka's: no producer id, no sequence numbers
    finally:
        await producer.stop()
    assert warnings(caplog) == []


async def test_a_granted_id_makes_every_producer_idempotent(settings: Settings, monkeypatch: pytest.MonkeyPatch):
    """A broker that grants one (Apache Kafka) is not here: the answer is stood in for."""
    asked = []

    async def granted(settings: Settings) -> str | None:
        asked.append(settings.kafka_bootstrap_servers)
        return None

    monkeypatch.setattr(producers, "refusal", granted)
    assert await producers.idempotent(settings) is True
    assert await producers.idempotent(settings.model_copy(update={"kafka_idempotence": "on"})) is True
    assert asked == [settings.kafka_bootstrap_servers]  # asked once


@pytest.mark.parametrize(
    ("error", "refused"),
    [
        (errors.NoError, False),
        (errors.CoordinatorLoadInProgressError, False),  # retriable: granted, only not yet
        (errors.CoordinatorNotAvailableError, False),
        (errors.UnknownError, True),  # the embedded broker's answer
        (errors.ClusterAuthorizationFailedError, True),  # no IdempotentWrite under an older Kafka's ACLs
        (errors.UnsupportedVersionError, True),
    ],
)
def test_how_an_init_producer_id_answer_is_read(error, refused):
    why = producers.refusal_of(error.errno)
    assert (why is not None) is refused
    if refused:
        assert error.__name__ in why


def test_fausts_producer_asks_for_idempotence_once_granted(settings: Settings):
    app = faust_app(settings)
    producer = app.producer
    assert isinstance(producer, producers.Producer)
    assert producer._settings_extra() == {}  # before its start has asked, or when refused
    producer.idempotent = True
    assert producer._settings_extra() == {"acks": "all", "enable_idempotence": True}


def test_produce_under_on_against_a_broker_that_refuses_says_so_and_sends_nothing(settings: Settings):
    done = cli(settings.model_copy(update={"kafka_idempotence": "on"}), "produce", str(EXAMPLES / "cases"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not sent:" in done.stdout and "kafka_idempotence=on" in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("given", "update"), [("auto", {"kafka_idempotence": "off"}), ("on", {}), ("off", {})])
def test_a_command_that_starts_the_embedded_broker_sets_auto_off_and_leaves_a_choice_alone(given, update):
    assert producers.on_embedded(Settings(llm_backend="offline", kafka_idempotence=given)) == update
