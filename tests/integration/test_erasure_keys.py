"""`cyberjurors erase` with the case keys on (the real parts, as tests/integration/test_erasure.py):
with `media_encryption` no copy of an erased case's media opens, and one case's erasure leaves
another case's identical photo readable; with `payload_encryption` no topic holds a readable seeded
value, every record of the case the service wrote is sealed, and erase shreds them all."""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from cyberjurors.config import Settings
from cyberjurors.errors import StoreError
from cyberjurors.evidence.media_store import dated_store
from cyberjurors.evidence.sealing import MAGIC, KeyRing
from cyberjurors.evidence.stores import open_store
from cyberjurors.kafka.cluster import client_options
from cyberjurors.schemas import CaseFile, PartyLetter, Verdict
from cyberjurors.tooling.clients import Outgoing, produce

from ..conftest import cli, read_topic, worker_process
from ..factories import whole
from .test_erasure import (
    ADDRESS_SAYS,
    BUYER_SAYS,
    KEPT_SAYS,
    PHOTO_SAYS,
    PRODUCT,
    SELLER_SAYS,
    data_settings,
    forms,
    found_in,
    keys_on,
    labelled_png,
    seeded_case,
)

pytestmark = pytest.mark.integration


async def test_with_media_encryption_an_erased_case_s_media_cannot_be_read_from_any_copy(settings, tmp_path):
    """Crypto-shredding: the worker seals the case's photo under the case's key; a copy taken before
    the erasure (a backup, an object version) cannot be opened after it, since the key is gone. The
    case's placeholder map, which its letters gave the parties their own words back from, is sealed
    the same way: erased from the tables with the case, and a copy taken before cannot be opened."""
    settings = data_settings(settings, tmp_path, media_encryption=True, case_key_secret="k" * 32,
                             case_key_store=str(tmp_path / "data" / "case-keys"), letters=True,
                             key_service={"cache_s": 0})  # fmt: skip  # this process reads as a new one would
    case_id = f"sealed-{uuid.uuid4().hex[:6]}"
    map_key = json.dumps(f"{case_id}/letters/placeholders").encode()  # a table's keys are JSON
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, [Outgoing(case_id, whole(seeded_case(case_id)), "test")])
        await read_topic(settings, "disputes.verdicts", until=1, keys={case_id}, timeout_s=180)
        assert found_in(tmp_path / "data", (PHOTO_SAYS,)) == {}  # sealed: never in the clear on disk
        letters = await read_topic(settings, "disputes.letters", until=2, keys={case_id}, timeout_s=120)
        assert {PartyLetter.model_validate_json(v).party for _, v in letters} == {"buyer", "seller"}
        sealed_map = (await keys_on(settings, "stage-results", case_id)).get(map_key)
        assert sealed_map is not None and sealed_map.startswith(MAGIC) and ADDRESS_SAYS.encode() not in sealed_map
        ring = KeyRing(dated_store(settings.case_key_store, settings.media_retention), "k" * 32)
        assert ADDRESS_SAYS.encode() in await ring.open(sealed_map, "the map")  # opens while the key lives
        backup = tmp_path / "backup"
        shutil.copytree(settings.media_store, backup)
        [copy] = [p for p in backup.rglob("*") if p.is_file()]
        store = open_store(settings.model_copy(update={"media_store": str(backup)}))
        assert PHOTO_SAYS.encode() in await store.get(copy.name, 10_000)  # readable while the key lives

        erased = await asyncio.to_thread(cli, settings, "erase", "--case", case_id)
        assert erased.returncode == 0, erased.stdout + erased.stderr
    with pytest.raises(StoreError) as err:
        await store.get(copy.name, 10_000)
    assert err.value.kind == "shredded"
    [entry] = [json.loads(line) for line in (settings.erasure.dir / "erasures.jsonl").read_text().splitlines()]
    assert entry["steps"]["keys"] == {"state": "done", "erased": 1}
    assert (await keys_on(settings, "stage-results", case_id))[map_key] is None  # the map: a tombstone
    with pytest.raises(StoreError) as err:  # and its copy taken before: shredded
        await ring.open(sealed_map, "the map")
    assert err.value.kind == "shredded"


async def stored_photo_refs(settings: Settings, case_ids: set[str]) -> dict[str, str]:
    """case id -> the media store reference its admitted case file names for its photo."""
    found = await read_topic(settings, "disputes.intake", until=len(case_ids), keys=case_ids, timeout_s=60)
    refs = {}
    for key, value in found:
        case = CaseFile.model_validate_json(value).case
        [ref] = [i.media.stored for i in case.items() if i.media is not None and i.media.stored]
        refs[key] = ref
    return refs


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "media_encryption"])
async def test_erasing_one_case_leaves_another_case_s_identical_photo_readable(settings, tmp_path, sealed):
    """Two cases submit the same photo; `erase` of the first, through the worker and every step,
    deletes the first's object (or shreds its key) and leaves the second's photo readable: each case's
    media objects are its own."""
    over: dict[str, object] = {}
    if sealed:
        over = {
            "media_encryption": True,
            "case_key_secret": "k" * 32,
            "case_key_store": str(tmp_path / "data" / "keys"),
        }
    settings = data_settings(settings, tmp_path, **over)
    first, second = f"twin-a-{uuid.uuid4().hex[:6]}", f"twin-b-{uuid.uuid4().hex[:6]}"
    photo = labelled_png(PHOTO_SAYS)
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, [Outgoing(c, whole(seeded_case(c)), "test") for c in (first, second)])
        await read_topic(settings, "disputes.verdicts", until=2, keys={first, second}, timeout_s=180)
        refs = await stored_photo_refs(settings, {first, second})
        store = open_store(settings)
        assert await store.get(refs[first], 10_000) == photo == await store.get(refs[second], 10_000)

        erased = await asyncio.to_thread(cli, settings, "erase", "--case", first)
        assert erased.returncode == 0, erased.stdout + erased.stderr
    with pytest.raises(StoreError) as err:
        await store.get(refs[first], 10_000)
    assert err.value.kind in ("missing", "shredded")  # deleted (and, sealed, its key destroyed)
    assert await store.get(refs[second], 10_000) == photo  # the other case's evidence is all there


def clear_topics(settings: Settings) -> set[str]:
    """What stays in the clear with payload_encryption: stamps (when, which partition, a digest, the
    CloudEvents ids intake took), never party text, and the erasure requests (a case id)."""
    return {f"{settings.app_id}-{t}-changelog" for t in ("stage-times", "intake")} | {
        settings.topic("disputes.erasures")
    }


async def every_record(settings: Settings) -> list[tuple[str, bytes, bytes]]:
    """(topic, key, value) of every record in every topic of the service (its prefix, its changelogs),
    read from the beginning by a plain consumer, as anyone with read access to the cluster would."""
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, enable_auto_commit=False)
    await consumer.start()
    found: list[tuple[str, bytes, bytes]] = []
    try:
        ours = (settings.topic(""), f"{settings.app_id}-")  # this test's topics and changelogs, on a shared broker
        topics = sorted(t for t in await consumer.topics() if t.startswith(ours))
        partitions = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        while batch := await consumer.getmany(timeout_ms=1500):
            found += [(tp.topic, r.key or b"", r.value or b"") for tp, rs in batch.items() for r in rs]
    finally:
        await consumer.stop()
    return found


async def test_with_payload_encryption_no_topic_holds_a_readable_seeded_value_and_erase_shreds_the_case(
    settings, tmp_path
):
    """payload_encryption: the case's text is sealed wherever the service writes it (its topics, the
    tables' changelogs, the dead letters); after `erase` its records cannot be opened, while another
    case's still open. disputes.events is the platform's own (written in the clear here)."""
    settings = data_settings(settings, tmp_path, media_encryption=True, payload_encryption=True,
                             case_key_secret="k" * 32, case_key_store=str(tmp_path / "data" / "case-keys"),
                             key_service={"cache_s": 0})  # fmt: skip
    erased_id, kept_id = f"pe-a-{uuid.uuid4().hex[:6]}", f"pe-b-{uuid.uuid4().hex[:6]}"
    kept = seeded_case(kept_id)
    kept["rounds"][0]["items"][0]["text"] = f"{KEPT_SAYS} never arrived"
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, [Outgoing(erased_id, whole(seeded_case(erased_id)), "test")])
        await produce(settings, [Outgoing(kept_id, whole(kept), "test")], seal=True)  # sealed at the source
        verdicts = await read_topic(settings, "disputes.verdicts", until=2, keys={erased_id, kept_id}, timeout_s=240)
        assert {Verdict.model_validate_json(v).case_id for _, v in verdicts} == {erased_id, kept_id}  # opened
        everything = await every_record(settings)
        [platform_sealed] = [v for t, k, v in everything if t.endswith("disputes.events") and k == kept_id.encode()]
        assert platform_sealed.startswith(MAGIC) and KEPT_SAYS.encode() not in platform_sealed
        before = [r for r in everything if not r[0].endswith("disputes.events")]
        ours = [(t, v) for t, k, v in before if erased_id.encode() in k]
        assert {t for t, _ in ours} >= {settings.topic(n) for n in ("disputes.intake", "disputes.verdicts")}
        for needle in (BUYER_SAYS, SELLER_SAYS, PRODUCT, KEPT_SAYS):
            assert not [t for t, _, v in before if any(f in v for f in forms(needle))], needle
        clear = {t: v[:120] for t, v in ours if v and not v.startswith(MAGIC)}
        assert set(clear) <= clear_topics(settings), clear
        erased = await asyncio.to_thread(cli, settings, "erase", "--case", erased_id)
        assert erased.returncode == 0, erased.stdout + erased.stderr
    [entry] = [json.loads(line) for line in (settings.erasure.dir / "erasures.jsonl").read_text().splitlines()]
    on_topics = [t for t, v in ours if v.startswith(MAGIC) and not t.endswith("changelog")]
    assert entry["steps"]["topics"]["erased"] == len(on_topics) > 0  # what became unreadable, counted
    ring = KeyRing(dated_store(settings.case_key_store, settings.media_retention), "k" * 32)
    for topic, value in ours:
        if value.startswith(MAGIC):
            with pytest.raises(StoreError) as err:
                await ring.open(value, topic)
            assert err.value.kind == "shredded", topic
    theirs = [v for t, k, v in before if kept_id.encode() in k and t.endswith("disputes.verdicts")]
    assert theirs
    assert Verdict.model_validate_json(await ring.open(theirs[0], "verdict")).case_id == kept_id
