"""What a new user's try found on a real worker (issue 11): a record with no value (a Kafka tombstone)
on the three input topics, an outcome decided at a time UTC cannot hold, and evidence whose path is a
FIFO under media_root. Before, the outcomes and appeals agents crashed on the first two (Faust
restarted them past the record: lost, no letter), a tombstone on disputes.events was a bug letter
marked replayable, and the FIFO hung the clues stage on that case for good. Each now ends as a letter
with its reason and flag, or a verdict with a note, and a case sent after them is judged."""

from __future__ import annotations

import os

import pytest
from aiokafka import AIOKafkaProducer

from cyberjurors.kafka.cluster import client_options
from cyberjurors.schemas import DeadLetter, Verdict

from ..conftest import read_topic, worker_process
from ..factories import whole
from .test_bad_input import case, image

pytestmark = pytest.mark.integration


async def test_tombstones_times_out_of_range_and_a_fifo_end_in_letters_or_notes(settings, tmp_path):
    settings = settings.model_copy(update={"media_root": tmp_path, "jurors": 5, "rounds": 1})
    os.mkfifo(tmp_path / "pipe.png")
    year_one = (
        b'{"type": "outcome", "case_id": "old", "votes": {"buyer": 9, "seller": 8}, '
        b'"decided_at": "0001-01-01T00:00:00+01:00"}'
    )
    sends = [
        ("disputes.events", b"gone-event", None),
        ("disputes.outcomes", b"gone-outcome", None),
        ("disputes.appeals", b"gone-appeal", None),
        ("disputes.outcomes", b"old", year_one),
        ("disputes.events", b"fifo", whole(case("fifo", [image("b1", media_type="image/png", path="pipe.png")]))),
        ("disputes.events", b"after", whole(case("after"))),
    ]
    producer = AIOKafkaProducer(**client_options(settings))
    try:
        async with worker_process(settings, tmp_path / "worker.log") as worker:
            await producer.start()
            for topic, key, value in sends:
                await producer.send_and_wait(settings.topic(topic), value, key=key)
            letters = await read_topic(settings, "disputes.dlq", until=4, timeout_s=120)
            verdicts = await read_topic(settings, "disputes.verdicts", until=2, timeout_s=180)
            assert worker.alive(), (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        await producer.stop()
    got = {key: DeadLetter.model_validate_json(value) for key, value in letters}
    assert {k: (d.stage, d.reason, d.replayable) for k, d in got.items()} == {
        "gone-event": ("intake", "invalid_json", False),
        "gone-outcome": ("outcome", "invalid_outcome", False),
        "gone-appeal": ("appeal", "invalid_appeal", False),
        "old": ("outcome", "case_expired", False),
    }
    assert all("no value (a Kafka tombstone)" in got[k].detail for k in ("gone-event", "gone-outcome", "gone-appeal"))
    assert "decided at 0001-01-01T00:00+01:00" in got["old"].detail
    judged = {key: Verdict.model_validate_json(value) for key, value in verdicts}
    assert set(judged) == {"fifo", "after"}
    assert any("b1" in p and "not_a_file" in p for p in judged["fifo"].problems), judged["fifo"].problems
