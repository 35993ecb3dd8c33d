"""Sealed records (payload_encryption, evidence/records.py): what a handler sends and what a table
keeps is sealed under the case's key, every agent opens it before its handler, and a record nothing
opens is a dead letter that says why, never an exception and never a clear copy."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from cyberjurors.errors import StoreError
from cyberjurors.evidence.media_store import LocalMediaStore
from cyberjurors.evidence.records import SEALED, RecordSeal, Sealed, Unreadable, is_sealed, record_seal
from cyberjurors.evidence.sealing import KeyRing
from cyberjurors.observability import metrics
from cyberjurors.schemas import DeadLetter
from cyberjurors.state import expiry
from cyberjurors.state.sealed import SealedValues
from cyberjurors.streams.app import Handlers, each, opened
from cyberjurors.streams.dead_letters import DeadLetters

from ..evidence.test_media_store import RETENTION, Clock
from .test_app_handlers import Topic

SECRET = "s" * 32
TEXT = b'{"case_id": "c-1", "text": "my address is 12 Quillfeather Lane"}'


def ring(tmp_path, cache_s: float = 0.0, now: list[float] | None = None) -> KeyRing:
    clock = now or [0.0]
    return KeyRing(LocalMediaStore(tmp_path / "keys", RETENTION, Clock()), SECRET, cache_s, lambda: clock[0])


def event(value: bytes, key: bytes = b"c-1", topic: str = "disputes.focus") -> SimpleNamespace:
    return SimpleNamespace(
        value=value, message=SimpleNamespace(key=key, value=value, topic=topic, partition=0, offset=3)
    )


async def test_a_record_seals_under_its_case_s_key_the_same_way_twice_and_opens_back(tmp_path):
    seal = RecordSeal(ring(tmp_path))
    sealed = await seal.seal("c-1", TEXT)
    assert is_sealed(sealed) and b"Quillfeather" not in sealed
    assert await seal.seal("c-1", TEXT) == sealed  # deterministic: a redelivered stage sends the same record
    assert await seal.seal("c-1", sealed) == sealed  # never sealed twice
    assert await seal.open("c-1", sealed) == TEXT
    assert seal.open_now("c-1", sealed) == TEXT
    assert await seal.open("c-1", TEXT) == TEXT  # written before encryption was on: read as it is


async def test_a_record_that_cannot_be_opened_says_why(tmp_path):
    seal = RecordSeal(ring(tmp_path))
    sealed = await seal.seal("c-1", TEXT)
    with pytest.raises(Unreadable) as err:
        await seal.open("c-2", sealed)  # another case's key id
    assert err.value.kind == "sealed_unknown_key"
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(Unreadable) as err:
        await seal.open("c-1", tampered)
    assert err.value.kind == "sealed_tampered"
    await seal.keys.destroy("c-1")
    with pytest.raises(Unreadable) as err:
        await seal.open("c-1", sealed)
    assert err.value.kind == "case_erased"
    with pytest.raises(Unreadable) as err:
        seal.open_now("c-1", sealed)
    assert err.value.kind == "case_erased"


async def test_a_key_is_held_no_longer_than_cache_s_and_never_past_its_own_destruction(tmp_path):
    now = [0.0]
    worker, erase = ring(tmp_path, cache_s=30, now=now), ring(tmp_path)
    seal = RecordSeal(worker)
    sealed = await seal.seal("c-1", TEXT)
    shutil.rmtree(tmp_path / "keys")  # another process destroys it: the worker still holds the key it read
    assert await seal.open("c-1", sealed) == TEXT
    now[0] = 30.0  # cache_s later: read from the store again, and it is gone
    with pytest.raises(Unreadable):
        await seal.open("c-1", sealed)
    sealed = await seal.seal("c-3", TEXT)
    await erase.destroy("c-3")  # a ring of this process (the console's erasure): forgotten by every ring at once
    with pytest.raises(Unreadable):
        await seal.open("c-3", sealed)
    never = RecordSeal(ring(tmp_path / "b", cache_s=0))
    sealed = await never.seal("c-1", TEXT)
    await ring(tmp_path / "b").destroy("c-1")
    with pytest.raises(Unreadable):  # cache_s=0: not held at all
        await never.open("c-1", sealed)


async def test_a_sealed_sender_sends_sealed_values_with_the_key_id_in_a_header(tmp_path):
    seal, topic = RecordSeal(ring(tmp_path)), Topic()
    await Sealed(topic, seal).send(key=b"c-1", value=TEXT, headers=[("trace", b"t")])
    ((key, value),) = topic.sent
    assert key == b"c-1" and b"Quillfeather" not in value and await seal.open("c-1", value) == TEXT
    assert topic.headers[0] == {"trace": b"t", SEALED: seal.keys.key_id("c-1").encode()}


async def test_a_sealed_table_keeps_only_sealed_bytes_and_reads_them_open(tmp_path):
    seal, raw = RecordSeal(ring(tmp_path)), {}
    table = SealedValues(raw, seal)
    table["c-1/focus"] = TEXT
    expiry.put(table, "c-1/verdict", TEXT, partition=0)  # outside a stream event, through the table's store too
    table["c-1/meta"] = {"at": 1}  # not bytes: as it is
    assert all(b"Quillfeather" not in v for k, v in raw.items() if k != "c-1/meta")
    assert table["c-1/focus"] == TEXT and table.get("c-1/verdict") == TEXT and table["c-1/meta"] == {"at": 1}
    await seal.keys.destroy("c-1")
    assert table.get("c-1/focus") is None and "c-1/focus" in table  # erased: read as missing, deleted by the sweep


def test_record_seal_is_none_unless_payload_encryption_is_on(tmp_path):
    assert record_seal(SimpleNamespace(payload_encryption=False), None) is None
    with pytest.raises(StoreError):
        record_seal(SimpleNamespace(payload_encryption=True), None)


@pytest.mark.parametrize("why", ["case_erased", "sealed_unknown_key", "sealed_tampered"])
async def test_an_agent_hands_its_handler_the_opened_record_or_dead_letters_it_in_the_clear(tmp_path, why):
    seal, dlq = RecordSeal(ring(tmp_path)), Topic()
    letters = DeadLetters(Sealed(dlq, seal), metrics.CasesInFlight())
    sealed = await seal.seal("c-1", TEXT)
    good = event(sealed)
    assert await opened(good, seal, letters, "focus") and good.value == good.message.value == TEXT
    bad = {
        "case_erased": sealed,
        "sealed_unknown_key": sealed,
        "sealed_tampered": sealed[:-1] + bytes([sealed[-1] ^ 1]),
    }[why]
    key = b"c-2" if why == "sealed_unknown_key" else b"c-1"
    if why == "case_erased":
        await seal.keys.destroy("c-1")
    assert not await opened(event(bad, key, "disputes.events"), seal, letters, "intake")
    ((_, value),) = dlq.sent
    letter = DeadLetter.model_validate_json(value)  # sent as it is: the erased case gets no new key
    assert (letter.reason, letter.stage, letter.replayable) == (why, "intake", False)
    assert letter.original_bytes == len(bad) and b"Quillfeather" not in value
    assert why != "case_erased" or not await seal.keys.has("c-1")


async def test_a_key_service_that_fails_stops_the_agent_before_anything_is_handled_or_written(tmp_path):
    seal, dlq, handled = RecordSeal(ring(tmp_path)), Topic(), []
    sealed = await seal.seal("c-1", TEXT)

    def down(*args):  # type: ignore[no-untyped-def]
        raise OSError("connection refused")

    seal.keys.store._newest = down  # type: ignore[method-assign]
    if True:

        class Stream:
            async def events(self):  # type: ignore[no-untyped-def]
                yield event(sealed)

        async def handler(e):  # type: ignore[no-untyped-def]
            handled.append(e)

        h = Handlers(*[None] * 5, dead_letters=DeadLetters(dlq, metrics.CasesInFlight()), seal=seal)  # type: ignore[arg-type]
        with pytest.raises(StoreError) as err:
            await each(Stream(), handler, h, "focus")  # type: ignore[arg-type]
        assert err.value.kind == "unavailable" and handled == [] and dlq.sent == []


async def test_a_platform_seals_its_own_event_under_the_key_the_workers_open_it_with(tmp_path):
    from cyberjurors.config import Settings
    from cyberjurors.evidence.records import seal_event
    from cyberjurors.evidence.stores import open_store

    settings = Settings(
        media_store=str(tmp_path / "media"),
        media_encryption=True,
        payload_encryption=True,
        case_key_secret=SECRET,
        case_key_store=str(tmp_path / "keys"),
    )
    value, headers = await seal_event(settings, "c-1", TEXT)
    assert b"Quillfeather" not in value and dict(headers) == {SEALED: value[8:40].hex().encode()}
    worker = RecordSeal(open_store(settings).keys)  # type: ignore[attr-defined]
    assert await worker.open("c-1", value) == TEXT
    with pytest.raises(StoreError):
        await seal_event(settings.model_copy(update={"payload_encryption": False}), "c-1", TEXT)
