"""Consumer lag (kafka/lag.py): published as cyberjurors_consumer_lag_records. Read from the broker, and a
stuck stage's lag in a worker's metrics: tests/integration/test_lag.py."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from cyberjurors.config import Settings
from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.kafka.lag import ConsumerLag, LagGauge, lag_of
from cyberjurors.tooling.broker import free_port


def test_lag_counts_from_the_commit_or_from_the_log_start() -> None:
    assert lag_of(end=10, committed=4, start=0) == 6
    assert lag_of(end=10, committed=None, start=3) == 7  # nothing committed: from where the worker starts
    assert lag_of(end=10, committed=-1, start=3) == 7  # OffsetFetch's "no offset"
    assert lag_of(end=10, committed=10, start=0) == 0
    assert lag_of(end=9, committed=10, start=0) == 0  # an end reported below the commit (Tansu) is not negative


def test_the_gauge_shows_the_last_read_and_drops_partitions_no_longer_read() -> None:
    registry = CollectorRegistry()
    gauge = LagGauge("g", Gauge("lag", "lag", ["group", "topic", "partition"], registry=registry))

    def shown() -> dict[tuple[str, str], float]:
        return {
            (s.labels["topic"], s.labels["partition"]): s.value
            for family in registry.collect()
            for s in family.samples
            if s.labels["group"] == "g"
        }

    gauge.publish({("t", 0): 5, ("t", 1): 0, ("u", 0): 2})
    assert shown() == {("t", "0"): 5, ("t", "1"): 0, ("u", "0"): 2}
    gauge.publish({("t", 0): 3, ("t", 1): 1})
    assert shown() == {("t", "0"): 3, ("t", "1"): 1}
    gauge.clear()
    assert shown() == {}


async def test_a_failed_read_removes_the_series_and_the_next_read_brings_them_back(settings: Settings) -> None:
    nowhere = settings.model_copy(update={"kafka_bootstrap_servers": f"127.0.0.1:{free_port()}", "lag_interval_s": 1})
    registry = CollectorRegistry()
    service = ConsumerLag(nowhere, "g", ["t"])
    service.gauge = LagGauge("g", Gauge("lag", "lag", ["group", "topic", "partition"], registry=registry))
    service.gauge.publish({("t", 0): 7})
    await service.update()  # the broker does not answer: no exception, and no stale 7 left behind
    assert registry.get_sample_value("lag", {"group": "g", "topic": "t", "partition": "0"}) is None
    service.reader.settings = settings  # the broker is back
    await ensure_topics(settings)
    service.reader.topics = (settings.topic("disputes.events"),)
    await service.update()
    assert (
        registry.get_sample_value("lag", {"group": "g", "topic": settings.topic("disputes.events"), "partition": "1"})
        == 0
    )
    await service.reader.close()
