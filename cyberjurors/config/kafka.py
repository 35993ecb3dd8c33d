"""The Kafka section: the cluster, the topics, the Faust worker's consumer and how it stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from .fields import ConfigModel, Duration, Resolved, nested, unset


class KafkaTimeouts(ConfigModel):
    """The liveness timeouts set apart from ``kafka_profile`` (the setting ``kafka_timeouts``)."""

    session_timeout_s: Duration = unset("the consumer group's session timeout")
    heartbeat_interval_s: Duration = unset("the consumer's heartbeat interval")
    commit_interval_s: Duration = unset("how often processed offsets are committed")
    fetch_max_wait_ms: int | None = Field(
        None,
        ge=1,
        description="how long an empty fetch waits at the broker; the embedded broker never answers early, "
        "so each topic hop costs up to this",
    )
    broker_loss_exit_s: Duration = unset(
        "a worker that cannot reach its broker this long exits with status 75; one whose broker "
        "lost its topics or answers as another cluster exits at once"
    )
    broker_check_interval_s: Duration = unset("how often a worker reads its broker's metadata")
    stop_deadline_s: Duration = unset("after SIGTERM or SIGINT, a worker not yet stopped exits at once with status 124")


KafkaProfile = Literal["local", "cluster"]
# Short timeouts suit the embedded broker and tests (a rebalance in seconds, a hop in 50 ms); a real
# cluster's brokers answer a fetch as soon as there is data, and a rolling restart must not look like a lost broker.
PROFILES: dict[str, KafkaTimeouts] = {
    "local": KafkaTimeouts(
        session_timeout_s=6,
        heartbeat_interval_s=0.5,
        commit_interval_s=0.2,
        fetch_max_wait_ms=50,
        broker_loss_exit_s=30,
        broker_check_interval_s=2,
        stop_deadline_s=15,
    ),
    "cluster": KafkaTimeouts(
        session_timeout_s=30,
        heartbeat_interval_s=3,
        commit_interval_s=1,
        fetch_max_wait_ms=500,
        broker_loss_exit_s=120,
        broker_check_interval_s=2,
        stop_deadline_s=20,
    ),
}


class KafkaAuth(ConfigModel):
    """How a client reaches a secured cluster (the setting ``kafka_auth``): TLS, SASL, or both."""

    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = Field(
        "PLAIN", description="with SASL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
    )
    sasl_username: str | None = Field(None, description="with SASL: the user name")
    sasl_password: str | None = Field(None, description="with SASL: the password")
    ssl_cafile: Path | None = Field(
        None, description="with SSL: the CA bundle (PEM) the brokers' certificates are checked against"
    )
    ssl_certfile: Path | None = Field(None, description="with SSL: this client's certificate (PEM), for mutual TLS")
    ssl_keyfile: Path | None = Field(None, description="with SSL: this client's private key (PEM)")


def _profile(settings: Any, name: str) -> Any:
    return getattr(PROFILES[settings.kafka_profile], name)


class KafkaSettings(BaseModel):
    """What ``streams/`` needs to reach the cluster and run the stage agents."""

    kafka_bootstrap_servers: str = Field(
        "127.0.0.1:9092", description="the Kafka cluster, host:port comma-separated (or KAFKA_BOOTSTRAP_SERVERS)"
    )
    kafka_auth: KafkaAuth = nested(
        KafkaAuth,
        'TLS and SASL, any of them by itself (kafka_auth={"security_protocol": "SASL_SSL"}, '
        "CYBERJURORS_KAFKA_AUTH__SASL_PASSWORD)",
    )
    topic_prefix: str = Field(
        "", description="put before every topic name (e.g. 'staging.'), so several deployments share a cluster"
    )
    partitions: int = Field(
        4, ge=1, description="partitions of every topic the worker creates: the most workers a stage can spread over"
    )
    replication_factor: int = Field(
        1, ge=1, description="replicas of every topic the worker creates (3 on a production cluster)"
    )
    app_id: str = Field(
        "cyberjurors", description="the Faust app's id: the consumer group and the prefix of its table changelogs"
    )
    datadir: Path = Field(
        Path("data/faust"), description="the Faust worker's data folder (RocksDB tables with table_store=rocksdb)"
    )
    # Idempotence keeps a producer's retry after a lost acknowledgement from writing a message twice;
    # the embedded broker refuses it (InitProducerId), Apache Kafka grants it (kafka/producers.py).
    kafka_profile: KafkaProfile = Field(
        "local",
        description="the liveness timeouts as a set: local = the embedded broker and tests (session 6 s, "
        "heartbeat 0.5 s, commit 0.2 s, fetch wait 50 ms, broker loss 30 s, check 2 s, stop 15 s); cluster = "
        "Apache Kafka (30 s, 3 s, 1 s, 500 ms, 120 s, 2 s, 20 s)",
    )
    kafka_timeouts: KafkaTimeouts = nested(
        KafkaTimeouts, "any of the profile's timeouts set apart (CYBERJURORS_KAFKA_TIMEOUTS__SESSION_TIMEOUT_S)"
    )
    kafka_idempotence: Literal["auto", "on", "off"] = Field(
        "auto",
        description="the idempotent producer: auto uses it wherever the broker grants a producer id and "
        "falls back with one warning where it refuses (the embedded broker); on requires it (a producer "
        "the broker refuses does not start); off never asks",
    )
    # CloudEvents binary-mode headers on every message to a public topic (streams/cloudevents.py)
    cloudevents_source: str = Field(
        "/cyberjurors",
        min_length=1,
        pattern=r"^\S+$",
        description="the base of each message's ce_source, a URI reference naming this deployment; the "
        "topic is appended (/cyberjurors/disputes.verdicts)",
    )
    schema_base_url: str = Field(
        "https://docs.cyberjurors.example/schemas",
        min_length=1,
        pattern=r"^\S+$",
        description="where the public events' JSON Schemas are published (the documentation site's "
        "schemas/ folder): each message's ce_dataschema is <this>/v<schema version>/<event>.schema.json",
    )
    # Faust's exactly-once needs Kafka transactions; the embedded broker has none.
    processing_guarantee: Literal["at_least_once", "exactly_once"] = Field(
        "at_least_once", description="exactly_once needs Kafka transactions (Apache Kafka, not the embedded broker)"
    )
    stage_concurrency: int = Field(8, ge=1, description="cases each stage agent works on at once")
    web_port: int | None = Field(None, description="Faust's web server port; off when unset")

    # What every reader uses: each timeout as resolved, under the name the setting had.
    session_timeout_s: ClassVar[Resolved[float]] = Resolved("kafka_timeouts", _profile)
    heartbeat_interval_s: ClassVar[Resolved[float]] = Resolved("kafka_timeouts", _profile)
    commit_interval_s: ClassVar[Resolved[float]] = Resolved("kafka_timeouts", _profile)
    kafka_fetch_max_wait_ms: ClassVar[Resolved[int]] = Resolved("kafka_timeouts", _profile, "fetch_max_wait_ms")
    broker_loss_exit_s: ClassVar[Resolved[float]] = Resolved("kafka_timeouts", _profile)
    broker_check_interval_s: ClassVar[Resolved[float]] = Resolved("kafka_timeouts", _profile)
    stop_deadline_s: ClassVar[Resolved[float]] = Resolved("kafka_timeouts", _profile)

    def topic(self, name: str) -> str:
        return f"{self.topic_prefix}{name}"
