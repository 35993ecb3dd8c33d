"""The media store: the protocol (put/get/has/size/touch) and its guarantees on every backend — a
folder, fsspec's memory filesystem, and S3 through s3fs/botocore against moto's S3 server (started
here on a free port: no S3 can run on these machines otherwise) — then expiry: day folders swept once
the retention has passed, a re-put or a reference keeps an object, a dry run deletes nothing,
concurrent sweeps and `cyberjurors media sweep`. Time is a clock the test moves. The worker's timer
and disputes.dlq's retention on a broker: tests/integration/test_media_store.py."""

from __future__ import annotations

import asyncio
import calendar
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from cyberjurors.config import Settings
from cyberjurors.evidence.media_store import (
    DAY_S,
    OWNED,
    OWNED_HEADER,
    FsspecMediaStore,
    LocalMediaStore,
    StoreError,
    day_of,
    digest_of,
    owner_tag,
    shown_url,
)
from cyberjurors.evidence.stores import open_store
from cyberjurors.kafka.cluster import topic_configs
from cyberjurors.tooling.worker_process import child_env

T0 = calendar.timegm((2026, 3, 10, 12, 0, 0)) + 0.0  # noon UTC: the day ends 12 h later
T0_DAY_END = T0 + DAY_S / 2
RETENTION = 3 * DAY_S
PHOTO, OTHER = b"\x89PNG a photo of the seam", b"a different photo, of the label"


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- backends -------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server in a child process; s3fs finds it and its (dummy) credentials through the AWS
    SDK's own environment, as it would find a real S3's."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    port = free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT
    )
    endpoint = f"http://127.0.0.1:{port}"
    with pytest.MonkeyPatch.context() as env:
        for name, value in {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL_S3": endpoint,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }.items():
            env.setenv(name, value)
        env.delenv("AWS_PROFILE", raising=False)
        try:
            for _ in range(300):
                try:
                    urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1)
                    break
                except OSError:
                    if server.poll() is not None:
                        pytest.fail(f"moto's server exited with {server.returncode}")
                    time.sleep(0.1)
            import s3fs

            s3fs.S3FileSystem.clear_instance_cache()
            s3fs.S3FileSystem().mkdir("media-test")
            yield endpoint
        finally:
            server.terminate()
            server.wait(timeout=10)
            log.close()
            s3fs.S3FileSystem.clear_instance_cache()


BACKENDS = ["folder", "memory", "s3"]


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of each kind, by the URL the media_store setting would hold."""
    run = uuid.uuid4().hex[:8]
    if request.param == "folder":
        yield str(tmp_path / "media")
    elif request.param == "memory":
        yield f"memory://cj-{run}"
        import fsspec

        memory = fsspec.filesystem("memory")
        if memory.exists(f"/cj-{run}"):
            memory.rm(f"/cj-{run}", recursive=True)
    else:
        request.getfixturevalue("s3_endpoint")
        yield f"s3://media-test/{run}/media"


def store_at(url: str, clock: Clock, retention_s: float = RETENTION):
    settings = Settings(
        llm_backend="offline", media_store=url, retention={"state_s": retention_s / 2, "dlq_s": retention_s / 2}
    )
    assert settings.media_retention == retention_s
    return open_store(settings, clock)


def stored_keys(store) -> set[str]:
    """Every object the store holds (temporary files included), as keys relative to its root."""
    if isinstance(store, LocalMediaStore):
        return {str(p.relative_to(store.root)) for p in store.root.rglob("*") if p.is_file()}
    return {path.removeprefix(store.root + "/") for path in store.fs.find(store.root)}


def overwrite(store, ref: str, data: bytes) -> None:
    """Change an object's bytes behind the store's back (a disk fault, a hand edit)."""
    key = store._find(ref)[0]
    if isinstance(store, LocalMediaStore):
        (store.root / key).write_bytes(data)
    else:
        store.fs.pipe_file(store._path(key), data)


def deleted_total() -> float:
    return REGISTRY.get_sample_value("cyberjurors_media_objects_deleted_total") or 0.0


# --- the protocol, on every backend -------------------------------------------------------------


async def test_put_get_has_size_round_trip_content_addressed(url):
    store = store_at(url, Clock())
    ref = await store.put(PHOTO)
    assert ref == digest_of(PHOTO)
    assert await store.put(PHOTO) == ref  # the same bytes again: the same object
    assert stored_keys(store) == {f"{day_of(T0)}/{ref[:2]}/{ref}"}
    assert await store.get(ref, len(PHOTO)) == PHOTO  # a limit of exactly its size is enough
    assert await store.has(ref) and await store.size(ref) == len(PHOTO)
    other = digest_of(OTHER)
    assert not await store.has(other) and await store.size(other) is None


async def test_each_case_s_objects_are_its_own_so_erasing_one_case_leaves_the_other_s(url):
    """Issue 37, item 1: two cases that submit the same photo hold two objects; a redelivery of one
    case's photo is the same object; erasing the first case's deletes nothing the second names."""
    store = store_at(url, Clock())
    first, second = await store.put(PHOTO, "c-1"), await store.put(PHOTO, "c-2")
    assert first != second and await store.put(PHOTO, "c-1") == first
    assert first == digest_of(OWNED + owner_tag("c-1") + PHOTO)  # named by what is stored, as any object
    assert await store.get(first, len(PHOTO)) == PHOTO  # the tag is not counted against the limit
    assert await store.erase(first) == 1
    assert await store.get(second, len(PHOTO)) == PHOTO
    with pytest.raises(StoreError):
        await store.get(first, len(PHOTO))
    assert await store.adopt(second, "c-2", len(PHOTO)) == second  # the case's own: the same object
    adopted = await store.adopt(second, "c-3", len(PHOTO))  # another case naming it gets its own copy
    assert adopted not in (None, second) and await store.get(adopted, len(PHOTO)) == PHOTO
    assert await store.adopt(digest_of(OTHER), "c-3", 100) is None


async def test_a_missing_object_is_missing(url):
    store = store_at(url, Clock())
    with pytest.raises(StoreError) as err:
        await store.get(digest_of(OTHER), 1000)
    assert err.value.kind == "missing"


async def test_an_object_over_the_limit_is_refused_before_its_body_is_read(url):
    store = store_at(url, Clock())
    ref = await store.put(PHOTO)
    reads: list[tuple[str, int]] = []
    read = store._read
    store._read = lambda key, most: reads.append((key, most)) or read(key, most)
    with pytest.raises(StoreError) as err:
        await store.get(ref, len(PHOTO) - 1)
    # at most the first bytes, which say whether the object is a case's own (its tag comes first)
    assert err.value.kind == "too_large" and all(most <= len(OWNED) for _, most in reads)
    reads.clear()
    assert await store.get(ref, len(PHOTO) + 10) == PHOTO
    # never more than the limit, a case's tag and one byte
    assert [most for _, most in reads] == [len(PHOTO) + 10 + OWNED_HEADER + 1]


async def test_an_object_that_grew_after_its_size_was_read_is_still_read_only_up_to_the_limit(url):
    store = store_at(url, Clock())
    ref = await store.put(PHOTO)
    size = store._size
    store._size = lambda key: None if size(key) is None else 1  # a stale listing says 1 byte
    with pytest.raises(StoreError) as err:
        await store.get(ref, 10)
    assert err.value.kind == "too_large"


async def test_an_object_that_does_not_match_its_sha256_is_corrupt(url):
    store = store_at(url, Clock())
    ref = await store.put(PHOTO)
    overwrite(store, ref, b"tampered" + PHOTO[8:])  # same size, other bytes
    with pytest.raises(StoreError) as err:
        await store.get(ref, 1000)
    assert err.value.kind == "corrupt"


@pytest.mark.parametrize("ref", ["ab" * 31, "AB" * 32, "../" * 21 + "x", "ab" * 32 + "\n", ""])
async def test_a_reference_that_is_no_sha256_is_refused_before_the_store_is_asked(ref, tmp_path):
    store = LocalMediaStore(tmp_path / "media")
    for call in (store.get(ref, 10), store.has(ref), store.size(ref), store.touch(ref)):
        with pytest.raises(StoreError) as err:
            await call
        assert err.value.kind == "bad_ref"
    assert not (tmp_path / "media").exists()


async def test_memory_and_s3_urls_open_object_stores_and_folders_stay_the_default(tmp_path):
    assert isinstance(open_store(Settings(llm_backend="offline", media_store="memory://cj-x")), FsspecMediaStore)
    folder = open_store(Settings(llm_backend="offline", media_store=(tmp_path / "m").as_uri()))
    assert isinstance(folder, LocalMediaStore) and folder.root == tmp_path / "m"
    default = open_store(Settings(llm_backend="offline"))
    assert isinstance(default, LocalMediaStore) and default.root == Path("data/media")


@pytest.mark.parametrize("where", ["ftp://host/media", "https://cdn.example/media", "sftp://host/x"])
def test_a_store_whose_writes_could_be_seen_half_done_is_refused_at_start(where):
    with pytest.raises(StoreError) as err:
        open_store(Settings(llm_backend="offline", media_store=where))
    assert err.value.kind == "unsupported"


def test_an_object_store_whose_fsspec_package_is_missing_says_what_to_install():
    try:
        import gcsfs  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("gcsfs is installed here")
    with pytest.raises(StoreError) as err:
        open_store(Settings(llm_backend="offline", media_store="gs://bucket/media"))
    assert err.value.kind == "unsupported" and "gcsfs" in err.value.detail


def test_credentials_in_a_store_url_never_reach_a_message():
    shown = shown_url("az://account:s3cr3t@container/media?sig=t0k3n#frag")
    assert "s3cr3t" not in shown and "t0k3n" not in shown and shown == "az://container/media"


async def test_a_write_that_fails_midway_leaves_nothing_under_its_name(tmp_path, monkeypatch):
    store = LocalMediaStore(tmp_path / "media", clock=Clock())

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(StoreError) as err:
        await store.put(PHOTO)
    assert err.value.kind == "unavailable" and "No space left" in err.value.detail
    assert stored_keys(store) == set()  # neither the object nor its temporary file
    monkeypatch.undo()
    assert not await store.has(digest_of(PHOTO))


async def test_a_store_that_cannot_be_written_is_unavailable(tmp_path):
    (tmp_path / "media").write_text("a file where the folder should be")
    with pytest.raises(StoreError) as err:
        await LocalMediaStore(tmp_path / "media").put(PHOTO)
    assert err.value.kind == "unavailable"


# --- retention settings -------------------------------------------------------------------------


def test_media_outlives_the_state_and_the_dead_letters_that_can_name_it():
    settings = Settings(llm_backend="offline", retention={"state_s": 5 * DAY_S, "dlq_s": 9 * DAY_S})
    assert settings.media_retention == 14 * DAY_S
    assert (
        Settings(
            llm_backend="offline", retention={"media_s": 9 * DAY_S, "state_s": DAY_S, "dlq_s": 9 * DAY_S}
        ).media_retention
        == 9 * DAY_S
    )
    with pytest.raises(ValidationError, match=r"retention\.media_s"):
        Settings(llm_backend="offline", retention={"media_s": 8 * DAY_S, "dlq_s": 9 * DAY_S})
    with pytest.raises(ValidationError, match=r"retention\.media_s"):
        Settings(llm_backend="offline", retention={"media_s": 8 * DAY_S, "state_s": 9 * DAY_S})
    # the letters' retention is what disputes.dlq is created with
    assert topic_configs(settings, "disputes.dlq") == {"retention.ms": str(9 * DAY_S * 1000)}
    assert topic_configs(settings, "disputes.events") == {"retention.ms": str(7 * DAY_S * 1000)}  # retention_period


# --- expiry, on every backend ---------------------------------------------------------------------


async def test_an_object_goes_once_its_day_is_a_retention_old_not_before(url):
    clock = Clock()
    store = store_at(url, clock)
    ref = await store.put(PHOTO)
    clock.now = T0_DAY_END + RETENTION - 1  # the last second it must still be there
    assert await store.get(ref, 1000) == PHOTO
    report = await store.sweep()
    assert (report.deleted, report.days) == (0, [])
    assert await store.has(ref)

    clock.now = T0_DAY_END + RETENTION
    assert not await store.has(ref)  # expired: no longer served, whether or not a sweep ran yet
    report = await store.sweep()
    assert (report.deleted, report.bytes, report.days) == (1, len(PHOTO), [day_of(T0)])
    assert stored_keys(store) == set()
    assert (await store.sweep()).deleted == 0  # nothing twice


async def test_a_re_put_keeps_an_object_a_retention_from_then(url):
    clock = Clock()
    store = store_at(url, clock)
    ref = await store.put(PHOTO)
    clock.now = T0 + 2 * DAY_S  # a newer case sends the same photo
    assert await store.put(PHOTO) == ref
    clock.now = T0_DAY_END + RETENTION  # the first put's day expires; the second copy serves
    assert (await store.sweep()).deleted == 1
    assert await store.get(ref, 1000) == PHOTO
    assert stored_keys(store) == {f"{day_of(T0 + 2 * DAY_S)}/{ref[:2]}/{ref}"}
    clock.now = T0_DAY_END + 2 * DAY_S + RETENTION  # and a retention after the re-put, it goes too
    assert (await store.sweep()).deleted == 1
    assert not await store.has(ref)


async def test_a_case_naming_a_stored_object_keeps_it_like_a_put(url):
    clock = Clock()
    store = store_at(url, clock)
    ref = await store.put(PHOTO)
    assert not await store.touch(digest_of(OTHER))  # nothing stored under it: nothing to keep
    clock.now = T0 + 2 * DAY_S
    assert await store.touch(ref)
    assert await store.touch(ref)  # twice the same day: still one copy for that day
    assert len(stored_keys(store)) == 2
    clock.now = T0_DAY_END + RETENTION
    assert (await store.sweep()).deleted == 1
    assert await store.get(ref, 1000) == PHOTO


async def test_a_dry_run_counts_what_a_sweep_would_delete_and_deletes_nothing(url):
    clock = Clock()
    store = store_at(url, clock)
    old = [await store.put(PHOTO), await store.put(OTHER)]
    clock.now = T0 + 2 * DAY_S
    fresh = await store.put(b"put two days later")
    clock.now = T0_DAY_END + RETENTION
    before, counted = deleted_total(), []
    report = await store.sweep(dry_run=True, progress=counted.append)
    assert (report.dry_run, report.deleted, report.bytes) == (True, 2, len(PHOTO) + len(OTHER))
    assert sum(counted) == 2 and deleted_total() == before
    assert len(stored_keys(store)) == 3
    report = await store.sweep()
    assert (report.dry_run, report.deleted) == (False, 2)
    assert deleted_total() == before + 2
    assert [await store.has(ref) for ref in old] == [False, False] and await store.has(fresh)


async def test_a_sweep_leaves_folders_that_are_no_day_alone(tmp_path):
    clock = Clock()
    store = LocalMediaStore(tmp_path / "media", RETENTION, clock)
    await store.put(PHOTO)
    keep = tmp_path / "media" / "sha256" / "ab" / ("ab" * 32)  # the earlier layout, or anything else
    keep.parent.mkdir(parents=True)
    keep.write_bytes(b"not ours to judge")
    clock.now = T0 + 100 * DAY_S
    assert (await store.sweep()).deleted == 1
    assert keep.read_bytes() == b"not ours to judge"
    assert sorted(p.name for p in (tmp_path / "media").iterdir()) == ["sha256"]  # the day folder went


async def test_an_object_put_while_a_sweep_runs_survives_it(url):
    """The race a sweep could lose: it lists an expired copy, a new case puts the same bytes, then it
    deletes. The put goes to today's folder, which no sweep touches, so the new case keeps its media."""
    clock = Clock()
    store = store_at(url, clock)
    refs = [await store.put(f"photo {n}".encode()) for n in range(40)]  # spread over many shards
    clock.now = T0_DAY_END + RETENTION
    puts: list[asyncio.Task] = []

    def put_again(removed: int) -> None:  # after the first shard is deleted, mid-sweep
        if not puts:
            puts.extend(asyncio.ensure_future(store.put(f"photo {n}".encode())) for n in range(40))

    report = await store.sweep(progress=put_again)
    await asyncio.gather(*puts)
    assert report.deleted == 40
    assert all([await store.get(ref, 100) == f"photo {n}".encode() for n, ref in enumerate(refs)])
    clock.now += RETENTION - 1
    assert (await store.sweep()).deleted == 0 and await store.has(refs[0])


# --- sweeps at once, the command ----------------------------------------------------


async def test_sweeps_at_once_on_one_store_delete_each_object_once(tmp_path):
    clock = Clock()
    root = tmp_path / "media"
    first = LocalMediaStore(root, RETENTION, clock)
    for n in range(300):
        await first.put(f"evidence {n}".encode())
    clock.now = T0_DAY_END + RETENTION
    sweeps = [LocalMediaStore(root, RETENTION, clock) for _ in range(3)]  # three workers' stores
    reports = await asyncio.gather(*(s.sweep() for s in sweeps))
    assert sum(r.deleted for r in reports) == 300  # a folder counts what it removed: each object once
    assert stored_keys(first) == set() and list(root.iterdir()) == []


def test_the_media_sweep_command_dry_run_then_sweep(tmp_path):
    root = tmp_path / "media"
    settings = Settings(llm_backend="offline", media_store=str(root))
    month_ago = LocalMediaStore(root, settings.media_retention, Clock(time.time() - 30 * DAY_S))
    old = [asyncio.run(month_ago.put(data)) for data in (PHOTO, OTHER)]
    fresh = asyncio.run(LocalMediaStore(root, settings.media_retention).put(b"today's photo"))
    env = child_env(settings)

    def media_sweep(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cyberjurors", "media", "sweep", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    dry = media_sweep("--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would delete 2 object(s)" in " ".join(dry.stdout.split())
    assert len([p for p in root.rglob("*") if p.is_file()]) == 3
    done = media_sweep()
    assert done.returncode == 0, done.stderr
    assert f"deleted 2 object(s), {len(PHOTO) + len(OTHER)} bytes" in " ".join(done.stdout.split())
    assert [p.name for p in root.rglob("*") if p.is_file()] == [fresh]
    assert not any(ref in done.stdout for ref in old)
    again = media_sweep()
    assert again.returncode == 0 and "deleted 0 object(s)" in " ".join(again.stdout.split())

    refused = subprocess.run(
        [sys.executable, "-m", "cyberjurors", "media", "sweep"],
        capture_output=True,
        text=True,
        env=env | {"CYBERJURORS_MEDIA_STORE": "ftp://files.example/media"},
        timeout=120,
    )
    assert refused.returncode == 2 and "ftp://" in refused.stdout
