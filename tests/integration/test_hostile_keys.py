"""A platform's producer picks the Kafka key: one that is not UTF-8 must end as a dead letter like any
other bad input, not crash the intake agent past it (the message was lost before); a valid case under
a key other than its case_id is refused (``key_mismatch``), since keys decide partitions."""

from __future__ import annotations

import base64
import json

import pytest
from aiokafka import AIOKafkaProducer

from cyberjurors.kafka.cluster import client_options
from cyberjurors.schemas import DeadLetter

from ..conftest import read_topic, worker_process
from ..factories import whole
from .test_bad_input import case

pytestmark = pytest.mark.integration


async def test_an_event_whose_key_is_not_utf8_is_dead_lettered_and_the_worker_goes_on(settings, tmp_path):
    bad_key, bad_value = b"\xff\xfe", json.dumps({"type": "case", "case": {}}).encode()
    producer = AIOKafkaProducer(**client_options(settings))
    async with worker_process(settings, tmp_path / "worker.log") as worker:
        await producer.start()
        try:
            events = settings.topic("disputes.events")
            await producer.send_and_wait(events, bad_value, key=bad_key)
            await producer.send_and_wait(events, whole(case("valid-bad-key")), key=bad_key)
            await producer.send_and_wait(events, whole(case("valid-other-key")), key=b"another-key")
            await producer.send_and_wait(events, whole(case("after-bad-key")), key=b"after-bad-key")
        finally:
            await producer.stop()
        letters = await read_topic(settings, "disputes.dlq", until=3, timeout_s=120)
        verdicts = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=180)
        assert worker.alive(), (tmp_path / "worker.log").read_text()[-3000:]
    first, bad_key_letter, other = [DeadLetter.model_validate_json(v) for _, v in letters]
    assert (first.stage, first.reason, first.key) == ("intake", "missing_case_id", "\ufffd\ufffd")
    assert base64.b64decode(first.original_base64) == bad_value
    assert (bad_key_letter.reason, bad_key_letter.key, bad_key_letter.replayable) == (
        "key_mismatch",
        "\ufffd\ufffd",
        False,
    )
    assert (other.reason, other.key) == ("key_mismatch", "another-key")
    assert 'the Kafka key "another-key" is not the case_id "valid-other-key"' in other.detail
    assert [k for k, _ in verdicts] == ["after-bad-key"]
