"""Kafka connection settings shared by the Faust app, the admin step and the CLI's clients."""

from __future__ import annotations

import contextlib
import ssl
from typing import Any

import faust
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from ..config import KafkaSettings, Settings
from ..state.tables import compacted, ms

# the embedded broker (tooling/broker.py) starts with a cluster id that begins with this (a fresh suffix each start):
# how a worker knows it is on it (streams/worker.py: one record per changelog batch with RocksDB)
EMBEDDED_CLUSTER = "cyberjurors-embedded-"


TOPICS = (
    "disputes.events",
    "disputes.intake",
    "disputes.focus",
    "disputes.clues",
    "disputes.rounds",
    "disputes.verdicts",
    "disputes.outcomes",
    "disputes.dlq",
    "disputes.dlq-replayed",
    "disputes.escalations",
    "disputes.appeals",
    "disputes.audit",
    "disputes.letters",
    "disputes.erasures",
)
# which dead letters `dlq --replay` has sent back, keyed by the letter's topic/partition/offset:
# compacted, since only the last record per letter matters
REPLAYED = "disputes.dlq-replayed"
# who did what in the console (decisions, overrides, replays, sign-ins): kept whatever becomes of the
# console's own database; each entry is keyed by its own id, so compaction drops none
AUDIT = "disputes.audit"
# `cyberjurors erase` asking the worker that holds a case's partition to erase its tables, and the
# answer (streams/erasure.py): keyed by the case id, compacted, tombstoned once answered
ERASURES = "disputes.erasures"


def topic_configs(settings: Settings, name: str) -> dict[str, str]:
    """Configs a topic is created with (``name`` without the prefix). disputes.dlq keeps its letters
    ``dlq_retention_s``, which the media store's retention is tied to: a letter's stored original
    outlives the letter (config.Settings.media_retention). The compacted ones replace or delete
    within ``compaction_lag_s`` (``tables.compacted``); the others keep what they carry
    ``topic_retention_s`` (unset: the broker's default)."""
    if name == REPLAYED:
        if settings.replayed_retention_s is None:
            return compacted(settings)
        return compacted(settings) | {
            "cleanup.policy": "compact,delete",
            "retention.ms": ms(settings.replayed_retention_s),
        }
    if name == AUDIT:
        if settings.audit_topic_retention_s is None:
            return compacted(settings)
        return {"retention.ms": ms(settings.audit_topic_retention_s)}
    if name == ERASURES:
        return compacted(settings)
    if name == "disputes.dlq":
        return {"retention.ms": ms(settings.dlq_retention_s)}
    return {} if settings.topic_retention_s is None else {"retention.ms": ms(settings.topic_retention_s)}


def ssl_context(settings: KafkaSettings) -> ssl.SSLContext | None:
    if settings.kafka_auth.security_protocol not in ("SSL", "SASL_SSL"):
        return None
    context = ssl.create_default_context(cafile=settings.kafka_auth.ssl_cafile)
    if settings.kafka_auth.ssl_certfile:
        context.load_cert_chain(settings.kafka_auth.ssl_certfile, settings.kafka_auth.ssl_keyfile)
    return context


def client_options(settings: KafkaSettings) -> dict[str, Any]:
    """Keyword arguments for aiokafka producers, consumers and admin clients."""
    options: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        "security_protocol": settings.kafka_auth.security_protocol,
        "ssl_context": ssl_context(settings),
    }
    if settings.kafka_auth.security_protocol.startswith("SASL"):
        options |= {
            "sasl_mechanism": settings.kafka_auth.sasl_mechanism,
            "sasl_plain_username": settings.kafka_auth.sasl_username,
            "sasl_plain_password": settings.kafka_auth.sasl_password,
        }
    return options


def faust_credentials(settings: Settings) -> faust.types.auth.CredentialsT | None:
    context = ssl_context(settings)
    if settings.kafka_auth.security_protocol.startswith("SASL"):
        return faust.SASLCredentials(
            username=settings.kafka_auth.sasl_username,
            password=settings.kafka_auth.sasl_password,
            mechanism=settings.kafka_auth.sasl_mechanism,
            ssl_context=context,
        )
    return faust.SSLCredentials(context) if context else None


def faust_broker_url(settings: Settings) -> list[str]:
    return [f"kafka://{host.strip()}" for host in settings.kafka_bootstrap_servers.split(",") if host.strip()]


async def ensure_topics(settings: Settings) -> list[str]:
    """Create every topic with the configured partition count; existing topics are left alone.

    Done before any worker starts: the embedded broker would auto-create a missing topic with
    its own default partition count, and Faust tables refuse mismatched partitions.
    """
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        wanted = [settings.topic(name) for name in TOPICS]
        missing = [t for t in wanted if t not in existing]
        if missing:
            with contextlib.suppress(TopicAlreadyExistsError):  # another worker won the race
                await admin.create_topics(
                    [
                        NewTopic(
                            t,
                            settings.partitions,
                            settings.replication_factor,
                            topic_configs=topic_configs(settings, t.removeprefix(settings.topic_prefix)),
                        )
                        for t in missing
                    ]
                )
        return missing
    finally:
        await admin.close()
