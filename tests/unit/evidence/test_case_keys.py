"""A case's media key is made once and never replaced (issue 37, item 9): processes that make the
same case's key at once all end with the one key, so every object any of them sealed opens; a key
found only in an expired day folder (not yet swept) is moved into today's, not made again; a reader
finds it there too; and destroying a case's key leaves nothing of it, the creation marker included."""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from pathlib import Path

import pytest

from cyberjurors.errors import StoreError
from cyberjurors.evidence.media_store import DAY_S, LocalMediaStore, day_of
from cyberjurors.evidence.sealing import CREATING, KeyRing, SealedStore

from .test_media_store import RETENTION, T0, Clock, store_at
from .test_media_store import s3_endpoint as s3_endpoint  # fixtures, requested by name
from .test_media_store import url as url

SECRET = "s" * 32
PROCESSES = 4
CASES = 24  # rounds of the race: each one a case whose key every process asks for at the same moment


class FarStore(LocalMediaStore):
    """A folder answering as slowly as an object store does (each HEAD and PUT a round trip): the
    time between looking for a key and filing a new one that any process can fall into."""

    def _size(self, key: str) -> int | None:
        time.sleep(0.002)
        return super()._size(key)

    def _write(self, key: str, data: bytes) -> None:
        time.sleep(0.01)
        super()._write(key, data)


def sealed_at(root: Path, clock=None, far: bool = False) -> SealedStore:
    clock = clock or Clock()
    keys = KeyRing((FarStore if far else LocalMediaStore)(root / "keys", RETENTION, clock), SECRET)
    return SealedStore(LocalMediaStore(root / "media", RETENTION, clock), keys)


def racer(root: str, seat: int, barrier, results) -> None:  # a separate process (spawned)
    store = sealed_at(Path(root), far=True)

    async def run() -> dict[str, str]:
        refs = {}
        for n in range(CASES):
            await asyncio.to_thread(barrier.wait)  # every process makes case n's key at the same moment
            refs[f"c-{n}"] = await store.put(f"photo {n} of process {seat}".encode(), f"c-{n}")
        return refs

    results.put((seat, asyncio.run(run())))


def test_processes_making_one_case_s_key_at_once_all_seal_under_the_same_key(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=racer, args=(str(tmp_path), seat, barrier, results)) for seat in range(PROCESSES)]
    for p in procs:
        p.start()
    try:
        refs = dict(results.get(timeout=300) for _ in procs)
    finally:
        for p in procs:
            p.join(timeout=30)
    assert all(p.exitcode == 0 for p in procs)
    store = sealed_at(tmp_path)

    async def read_back() -> dict[tuple[int, str], str]:
        unreadable = {}
        for seat, theirs in refs.items():
            for case_id, ref in theirs.items():
                try:
                    assert await store.get(ref, 1000) == f"photo {case_id[2:]} of process {seat}".encode()
                except StoreError as err:
                    unreadable[(seat, case_id)] = err.kind
        return unreadable

    assert asyncio.run(read_back()) == {}  # no object sealed under a key another process replaced
    keys = [p for p in (tmp_path / "keys").rglob("*") if p.is_file()]
    assert len(keys) == CASES and not any(CREATING in p.parts for p in keys)  # one key a case, no marker left


async def test_a_key_found_only_in_an_expired_folder_is_moved_into_today_not_made_again(tmp_path):
    clock = Clock()
    store = sealed_at(tmp_path, clock)
    old = await store.put(b"the first photo", "c-1")
    clock.now += DAY_S
    # the object refreshed without its key (the key store was unreachable at that moment), so it lives
    # past the key's folder
    assert await store.store.touch(old)
    clock.now = T0 + RETENTION + DAY_S  # the key's folder expired, not swept yet
    assert store.keys.store._find(store.keys.key_id("c-1")) is None
    new = await store.put(b"the second photo", "c-1")
    assert await store.get(old, 1000) == b"the first photo"  # still opens: the key was not made anew
    assert await store.get(new, 1000) == b"the second photo"
    today = tmp_path / "keys" / day_of(clock.now)
    [moved] = [p for p in today.rglob("*") if p.is_file()]
    [first] = [p for p in (tmp_path / "keys" / day_of(T0)).rglob("*") if p.is_file()]
    assert moved.read_bytes() == first.read_bytes()


async def test_a_reader_finds_a_key_left_in_an_expired_folder(tmp_path):
    clock = Clock()
    store = sealed_at(tmp_path, clock)
    ref = await store.put(b"the photo", "c-1")
    clock.now += DAY_S
    assert await store.store.touch(ref)  # the object refreshed, its key not
    clock.now = T0 + RETENTION + DAY_S
    assert await store.get(ref, 1000) == b"the photo"  # not "shredded": the key is there, unswept


async def test_a_key_left_half_made_is_finished_by_the_next_put_and_destroyed_with_the_case(tmp_path):
    store = sealed_at(tmp_path)
    ring = store.keys
    key_id = ring.key_id("c-1")
    marker = ring.store.key(CREATING, key_id)
    ring.store._write(marker, b"k" * 64)  # a process killed between making the key and filing it
    ref = await store.put(b"the photo", "c-1")
    assert await store.get(ref, 1000) == b"the photo"
    assert ring.store._size(marker) is None  # filed in today's folder, the marker gone
    assert (tmp_path / "keys" / day_of(T0) / key_id[:2] / key_id).read_bytes() == b"k" * 64
    ring.store._write(marker, b"k" * 64)
    assert await ring.destroy("c-1") == 2  # today's copy and the marker
    with pytest.raises(StoreError) as err:
        await store.get(ref, 1000)
    assert err.value.kind == "shredded"


def test_a_key_is_created_exclusively_on_every_backend(url):
    """The primitive the creation rests on: a second create of one name is refused and changes
    nothing (S3: moto's server answers a PUT with If-None-Match: * on an existing key with 412)."""
    store = store_at(url, Clock())
    assert store._create("creating/ab/x", b"first") is True
    assert store._create("creating/ab/x", b"second") is False
    assert store._read("creating/ab/x", 100) == b"first"
