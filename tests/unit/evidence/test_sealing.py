"""Crypto-shredding and erasure in the media store: a case's objects sealed under its own key (and
read back open), deterministic for a redelivery, unreadable once the key is destroyed; `erase` of an
object deletes every copy, in every day folder; the key store follows the media's retention; and
the scrub helpers (a needle found in a file, SQLite's bytes out, lines dropped)."""

from __future__ import annotations

import sqlite3

import pytest

from cyberjurors.config import Settings
from cyberjurors.evidence.media_store import DAY_S, LocalMediaStore, StoreError, digest_of, stored_refs
from cyberjurors.evidence.scrub import drop_lines, purge_sqlite, residue
from cyberjurors.evidence.sealing import MAGIC, KeyRing, SealedStore
from cyberjurors.evidence.stores import open_store

from .test_media_store import RETENTION, T0, Clock

SECRET = "s" * 32
PHOTO = b"\x89PNG the label says Quillfeather-7731"


def sealed(tmp_path, clock: Clock) -> SealedStore:
    keys = KeyRing(LocalMediaStore(tmp_path / "keys", RETENTION, clock), SECRET)
    return SealedStore(LocalMediaStore(tmp_path / "media", RETENTION, clock), keys)


def files_holding(folder, needle: bytes) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and needle in p.read_bytes()]


async def test_a_case_s_media_is_sealed_under_its_own_key_and_reads_back_open(tmp_path):
    store = sealed(tmp_path, Clock())
    ref = await store.put(PHOTO, "c-1")
    assert await store.get(ref, 1000) == PHOTO
    assert files_holding(tmp_path, b"Quillfeather") == []  # sealed on disk
    [held] = [p for p in (tmp_path / "media").rglob("*") if p.is_file()]
    assert held.read_bytes().startswith(MAGIC) and digest_of(held.read_bytes()) == ref
    assert await store.put(PHOTO, "c-1") == ref  # deterministic: a redelivered event stores the same object
    other = await store.put(PHOTO, "c-2")
    assert other != ref and await store.get(other, 1000) == PHOTO  # another case, another key, another object
    assert files_holding(tmp_path / "keys", b"c-1") == []  # keys are named by an HMAC, not the case id


async def test_destroying_the_key_makes_every_copy_unreadable_and_leaves_other_cases_alone(tmp_path):
    clock = Clock()
    store = sealed(tmp_path, clock)
    ref, other = await store.put(PHOTO, "c-1"), await store.put(PHOTO, "c-2")
    clock.now += DAY_S
    assert await store.touch(ref)  # a copy in a second day folder, as a backup would be one elsewhere
    assert len([p for p in (tmp_path / "media").rglob(ref)]) == 2
    assert await store.keys.destroy("c-1") == 2  # the key was refreshed with the object: both copies
    with pytest.raises(StoreError) as err:
        await store.get(ref, 1000)
    assert err.value.kind == "shredded"
    assert await store.get(other, 1000) == PHOTO
    assert await store.keys.destroy("c-1") == 0  # twice: nothing left


async def test_a_media_reference_refreshes_its_key_so_the_key_outlives_the_object(tmp_path):
    clock = Clock()
    store = sealed(tmp_path, clock)
    ref = await store.put(PHOTO, "c-1")
    for _ in range(5):  # a new case names the object every two days: both stay, past the first retention
        clock.now += 2 * DAY_S
        assert await store.touch(ref)
        await store.sweep()
    assert clock.now - T0 > RETENTION + DAY_S
    assert await store.get(ref, 1000) == PHOTO


async def test_an_object_put_before_encryption_reads_as_it_is(tmp_path):
    store = sealed(tmp_path, Clock())
    plain = await store.store.put(b"put before media_encryption was on")
    owned = await store.store.put(b"a case's own, put before media_encryption was on", "c-1")
    assert await store.get(plain, 1000) == b"put before media_encryption was on"
    assert await store.get(owned, 1000) == b"a case's own, put before media_encryption was on"
    with pytest.raises(StoreError) as err:
        await store.get(plain, 5)
    assert err.value.kind == "too_large"


async def test_a_put_that_names_no_case_is_refused_and_nothing_is_stored_in_the_clear(tmp_path):
    store = sealed(tmp_path, Clock())
    with pytest.raises(StoreError) as err:
        await store.put(b"no case named: Quillfeather-7731")
    assert err.value.kind == "no_case"
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


async def test_a_case_naming_another_case_s_sealed_object_gets_it_sealed_under_its_own_key(tmp_path):
    store = sealed(tmp_path, Clock())
    theirs = await store.put(PHOTO, "c-1")
    ours = await store.adopt(theirs, "c-2", 1000)
    assert ours is not None and ours != theirs
    assert await store.adopt(ours, "c-2", 1000) == ours  # its own already: the same object, refreshed
    assert await store.keys.destroy("c-1") == 1
    assert await store.get(ours, 1000) == PHOTO  # c-1's erasure leaves c-2's photo readable
    plain = await store.store.put(b"put before media_encryption was on")
    adopted = await store.adopt(plain, "c-2", 1000)
    assert adopted != plain and (await store.store.get(adopted, 1000)).startswith(MAGIC)  # sealed now
    assert await store.adopt("ab" * 32, "c-2", 1000) is None


def test_open_store_seals_only_with_media_encryption_and_a_secret(tmp_path):
    base = {"llm_backend": "offline", "media_store": str(tmp_path / "m"), "case_key_store": str(tmp_path / "k")}
    assert isinstance(open_store(Settings(**base, media_encryption=True, case_key_secret=SECRET)), SealedStore)
    assert isinstance(open_store(Settings(**base)), LocalMediaStore)
    with pytest.raises(ValueError, match="case_key_secret"):
        Settings(**base, media_encryption=True, case_key_secret="short")


async def test_erasing_an_object_deletes_every_copy_in_live_and_expired_day_folders(tmp_path):
    clock = Clock()
    store = LocalMediaStore(tmp_path / "media", RETENTION, clock)
    ref, kept = await store.put(PHOTO), await store.put(b"another case's photo")
    for _ in range(2):
        clock.now += DAY_S
        await store.touch(ref)
    clock.now += RETENTION + DAY_S  # the first day folders expired, not yet swept
    assert len(list((tmp_path / "media").rglob(ref))) == 3
    assert await store.erase(ref) == 3
    assert list((tmp_path / "media").rglob(ref)) == [] and list((tmp_path / "media").rglob(kept))
    assert await store.erase(ref) == 0


def test_stored_refs_finds_media_and_originals_wherever_they_sit():
    a, b = digest_of(b"a"), digest_of(b"b")
    doc = {"case": {"rounds": [{"items": [{"media": {"stored": a}}]}]}, "letter": {"original_ref": b}}
    assert stored_refs(doc) == {a, b}
    assert stored_refs({"stored": "not a digest", "x": [1, None]}) == set()


def test_residue_sees_a_needle_across_a_chunk_boundary(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * ((1 << 22) - 3) + b"needle" + b"y" * 10)
    assert residue(path, ["needle"]) and not residue(path, ["other"]) and not residue(tmp_path / "none", ["x"])


def test_purge_sqlite_leaves_no_byte_of_a_deleted_row_in_the_file_or_its_log(tmp_path):
    path = tmp_path / "db.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA secure_delete=OFF")  # as SQLite builds without SQLITE_SECURE_DELETE have it
    db.execute("CREATE TABLE t (k TEXT, v TEXT)")
    db.executemany("INSERT INTO t VALUES (?, ?)", [(f"k{i}", "filler " * 40) for i in range(300)])
    db.execute("INSERT INTO t VALUES ('c-1', 'Quillfeather-7731')")
    db.execute("DELETE FROM t WHERE k = 'c-1'")  # the bytes stay in free space
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert residue(path, ["Quillfeather"])
    assert purge_sqlite(db, path, ["Quillfeather"]) == []  # found, so vacuumed
    assert not residue(path, ["Quillfeather"]) and not residue(tmp_path / "db.sqlite3-wal", ["Quillfeather"])
    assert db.execute("SELECT count(*) FROM t").fetchone()[0] == 300


def test_drop_lines_rewrites_without_the_lines_picked(tmp_path):
    path = tmp_path / "calls.jsonl"
    path.write_bytes(b'{"case_id": "c-1"}\n{"case_id": "c-10"}\n{"case_id": "c-1"}\n')
    assert drop_lines(path, lambda line: b'"c-1"' in line) == 2
    assert path.read_bytes() == b'{"case_id": "c-10"}\n'
    assert drop_lines(path, lambda line: False) == 0 and drop_lines(tmp_path / "none", bool) == 0
