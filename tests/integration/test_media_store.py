"""The media store with a running app on the embedded broker: disputes.dlq created with the letters'
retention, and the worker sweeping expired media on its timer (tests/unit/evidence/test_media_store.py
has the store itself)."""

from __future__ import annotations

import asyncio
import time

import pytest

from cyberjurors.config import RetentionOverrides
from cyberjurors.evidence.media_store import DAY_S, day_of
from cyberjurors.evidence.stores import open_store

from ..unit.evidence.test_media_store import OTHER, PHOTO, Clock


@pytest.mark.integration
async def test_disputes_dlq_is_created_with_the_letters_retention(settings):
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    from cyberjurors.kafka.cluster import client_options, ensure_topics

    settings = settings.model_copy(update={"retention": RetentionOverrides(dlq_s=2.5 * DAY_S)})
    await ensure_topics(settings)
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        topics = [settings.topic("disputes.dlq"), settings.topic("disputes.events")]
        described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
    finally:
        await admin.close()
    retention = {
        name: {e[0]: e[1] for e in entries}.get("retention.ms")
        for response in described
        for *_, name, entries in response.resources
    }
    assert retention[settings.topic("disputes.dlq")] == str(int(2.5 * DAY_S * 1000))
    assert retention[settings.topic("disputes.events")] != retention[settings.topic("disputes.dlq")]


@pytest.mark.integration
async def test_the_worker_sweeps_expired_media_on_its_timer(settings, tmp_path):
    from cyberjurors.kafka.cluster import ensure_topics
    from cyberjurors.streams.app import create_app

    from ..conftest import running_app
    from ..schema_model import SchemaModel

    settings = settings.model_copy(update={"media_store": str(tmp_path / "media"), "media_sweep_interval_s": 0.2})
    clock = Clock(time.time())
    store = open_store(settings, clock)
    old, old_day = await store.put(PHOTO), tmp_path / "media" / day_of(clock.now)
    await ensure_topics(settings)
    app = create_app(settings, llm=SchemaModel(), clock=clock)
    async with running_app(app):
        clock.now += settings.media_retention + DAY_S
        fresh = await store.put(OTHER)
        assert not await store.has(old)  # expired, though still on disk
        for _ in range(300):
            if not old_day.exists():
                break
            await asyncio.sleep(0.1)
        assert not old_day.exists(), "the worker did not sweep the expired day"
        assert await store.get(fresh, 100) == OTHER
