"""The observability section: the metrics endpoint, the probes, consumer lag, drift, traces, logs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator


class ObservabilitySettings(BaseModel):
    """What ``observability/`` and the worker's endpoints need."""

    metrics_port: int = Field(
        9464,
        ge=0,
        le=65535,
        description="each worker serves Prometheus metrics on http://host:port/metrics; 0 (or None) = off",
    )
    metrics_host: str = Field(
        "127.0.0.1",
        description="address the metrics endpoint listens on: this machine only unless set "
        "(0.0.0.0 in a pod or container, where Prometheus scrapes it from outside)",
    )
    probe_port: int = Field(
        9465,
        ge=0,
        le=65535,
        description="each worker answers /livez, /readyz and /startupz on http://host:port, "
        "from its event loop; 0 (or None) = off",
    )
    probe_host: str = Field(
        "127.0.0.1",
        description="address the probe endpoints listen on: this machine only unless set "
        "(0.0.0.0 in a pod, where the kubelet calls them)",
    )
    lag_interval_s: float = Field(
        15.0,
        ge=0,
        description="how often a worker reads its consumer group's lag from the broker "
        "(cyberjurors_consumer_lag_records, with the metrics endpoint); 0 = never",
    )
    drift_reference_seller_share: float = Field(
        0.626,
        ge=0,
        le=1,
        description="the seller-win share verdicts are expected to show (the paper's data: "
        "62.6%); exported as cyberjurors_seller_win_share_reference_ratio for the "
        "recording rules: set it alike on every worker",
    )
    otlp_endpoint: str | None = Field(
        None,
        description="base URL of an OTLP/HTTP receiver (an OpenTelemetry collector, e.g. "
        "http://otel-collector:4318): spans go to <url>/v1/traces. Unset = tracing off (a no-op "
        "tracer; trace context a message arrives with is still passed on)",
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        description="json = one JSON object per line (time, level, logger, message, and case_id, stage, "
        "trace_id, span_id where known), Faust's and the Kafka client's lines included",
    )
    log_redact_pii: bool = Field(False, description="replace e-mail addresses and phone numbers in log messages")

    @field_validator("metrics_port", "probe_port", mode="before")
    @classmethod
    def _port_off(cls, port: object) -> object:
        # stored as 0, not None: a child worker gets settings as env vars, where None would be left
        # out and the default port come back
        return 0 if port is None or port == "" else port
