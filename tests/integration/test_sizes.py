"""Size discipline end to end: the real app on the embedded broker with messages over Kafka's
default 1 MiB; oversize input ends as letters with their originals and the worker keeps serving, and
a case with inline media travels with references and gets its verdict
(tests/unit/streams/test_sizes.py drives the handlers alone)."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from cyberjurors.config import Settings
from cyberjurors.evidence.media_store import LocalMediaStore, digest_of, owned
from cyberjurors.kafka.cluster import client_options, ensure_topics
from cyberjurors.schemas import CaseFile, DeadLetter, Verdict
from cyberjurors.streams.app import create_app

from ..conftest import read_topic, running_app
from ..factories import case_data as case
from ..factories import whole
from ..unit.streams.test_sizes import noise_png, photo

# --- the real app on the embedded broker ----------------------------------------------------


async def send_raw(settings: Settings, messages: list[tuple[str, bytes]]) -> None:
    """A platform's producer whose limit is above ours (the embedded broker has none)."""
    producer = AIOKafkaProducer(**client_options(settings), max_request_size=8_000_000, enable_idempotence=False)
    await producer.start()
    try:
        for key, value in messages:
            await producer.send_and_wait(settings.topic("disputes.events"), value, key=key.encode())
    finally:
        await producer.stop()


@pytest.mark.integration
async def test_oversize_input_ends_as_letters_with_their_originals_and_the_worker_keeps_serving(settings, tmp_path):
    settings = settings.model_copy(update={"jurors": 3, "rounds": 1, "media_store": str(tmp_path / "store")})
    valid_big = whole(case("big", [{"id": f"b{n}", "kind": "text", "text": "t" * 19_000} for n in range(75)]))
    junk_3mb = b"{" + b"x" * 3_000_000
    junk_09mb = b"[" + b"y" * 900_000  # under max_event_bytes; as base64 its letter would be over
    after = whole(case("after", [{"id": "b1", "kind": "text", "text": "Torn seam."}]))
    assert len(valid_big) > 1_400_000
    await ensure_topics(settings)
    async with running_app(create_app(settings)):
        await send_raw(settings, [("big", valid_big), ("junk3", junk_3mb), ("junk09", junk_09mb), ("after", after)])
        verdicts = await read_topic(settings, "disputes.verdicts", until=1, keys={"after"}, timeout_s=120)
        raw = await read_topic(settings, "disputes.dlq", until=3, timeout_s=60)
    assert Verdict.model_validate_json(verdicts[0][1]).case_id == "after"
    letters = {d.key: d for d in (DeadLetter.model_validate_json(v) for _, v in raw)}
    assert {k: d.reason for k, d in letters.items()} == {
        "big": "event_too_large",
        "junk3": "event_too_large",
        "junk09": "invalid_json",
    }
    store = LocalMediaStore(tmp_path / "store")
    for key, original in (("big", valid_big), ("junk3", junk_3mb), ("junk09", junk_09mb)):
        assert letters[key].replayable is False and letters[key].original_bytes == len(original)
        assert await store.get(letters[key].original_ref, len(original)) == original
    assert all(len(v) <= settings.intake_limits.max_event_bytes for _, v in raw)


@pytest.mark.integration
async def test_a_case_with_inline_media_travels_with_references_and_gets_its_verdict(settings, tmp_path):
    settings = settings.model_copy(update={"jurors": 3, "rounds": 1, "media_store": str(tmp_path / "store")})
    photos = [noise_png(300, n) for n in range(2)]  # ~270 kB each, ~720 kB as base64 in the event
    submitted = whole(case("photos", [photo("b1", photos[0]), photo("b2", photos[1])]))
    assert (
        settings.intake_limits.max_case_bytes < len(submitted) < settings.intake_limits.max_event_bytes
    )  # too big to travel inline
    await ensure_topics(settings)
    async with running_app(create_app(settings)):
        await send_raw(settings, [("photos", submitted)])
        verdicts = await read_topic(settings, "disputes.verdicts", until=1, keys={"photos"}, timeout_s=120)
        ready = await read_topic(settings, "disputes.intake", until=1, keys={"photos"}, timeout_s=10)
    assert Verdict.model_validate_json(verdicts[0][1]).case_id == "photos"
    [(_, value)] = ready
    assert len(value) < 10_000
    refs = [i.media.stored for i in CaseFile.model_validate_json(value).case.items() if i.media is not None]
    assert refs == [digest_of(owned(p, "photos")) for p in photos]  # the case's own objects
