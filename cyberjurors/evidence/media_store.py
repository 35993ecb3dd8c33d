"""A content-addressed store for bytes that must not travel in the stream (a claim check).

Inline media (``data_base64``) is moved here at intake and the case carries only the sha256 of the
object (``MediaRef.stored``), so every message of an admitted case stays small; a dead letter whose
original is too large to carry stores the original here and names it (``DeadLetter.original_ref``).

Each case's objects are its own. A put that names its case stores ``OWNED`` + a digest of the case
id + the bytes, so the same photo submitted by two cases is two objects, and erasing one case
(``erase``) can never delete what another names; the same bytes of one case again (a redelivered
event) are the same object. A case that names an object already stored (a ``stored`` reference)
gets its own copy of it (``adopt``), unless it is the case's already. Only a put that names no case
(a dead letter without a key) is named by the bytes' own sha256 and may be shared; no erasure of a
case names it. Reads take the tag off: callers see the bytes they put.

``MediaStore`` is the protocol. ``open_store`` (stores.py) picks the store the ``media_store`` setting names: a
path or ``file://`` URL is a folder (``LocalMediaStore``, the default); ``s3://bucket/prefix``,
``gs://``, ``az://`` (``abfs://``) and ``memory://`` are object stores reached through fsspec
(``FsspecMediaStore``; s3fs, gcsfs or adlfs must be installed, credentials come from that SDK's own
environment: ``AWS_*``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``AZURE_STORAGE_*``). Workers on several
machines need a store they all reach (a shared folder or an object store).

Expiry without a race. Objects are filed by the UTC day they were last put:
``<root>/<YYYY-MM-DD>/<ab>/<sha256>``. A put writes the object into today's folder unless it is
already there, and a case that names its own object already stored (``touch``) copies it there: either
way an object lives ``retention_s`` after the last put or reference that needed it. The sweep only
ever deletes whole day folders whose last possible put is older than the retention
(``day end + retention <= now``). Today's folder, where every put and refresh goes, is never one of
them, so a sweep can never delete an object refreshed after it looked: there is no time of an object
to read, compare and race with, only the folder it was written to. This holds for any number of
workers and CLI sweeps on one store (deleting what another sweep already deleted is fine) and needs
no conditional delete from the store (S3's ETags cannot tell a re-put of the same bytes). The price:
an object is kept up to one day longer than the retention, and one put or referenced on several days
has a copy in each of those days' folders until they expire. Readers look through the folders still
alive, newest first; machines' clocks must agree to well within the retention (NTP does).

Every write is whole or absent under its name: a folder writes a temporary file and renames it; an
object store's single PUT (or completed multipart upload) is atomic, which is why only stores with
that guarantee are accepted. Every read is checked against its sha256, and never reads more than the
caller's limit.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import hashlib
import logging
import os
import random
import re
import shutil
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import unquote, urlsplit

from ..errors import StoreError, install_extra
from ..observability import metrics

log = logging.getLogger("cyberjurors.media_store")

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A plain object of one case's: this, the case's tag (``owner_tag``), then the bytes. Two cases that
# submit the same photo store two objects, so erasing one case deletes nothing the other names.
OWNED = b"CJCASE1\0"
OWNED_HEADER = len(OWNED) + 32
_DAY_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}$")
DAY_S = 86_400
# fsspec protocols whose one write is atomic (whole object or nothing under its name)
OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "memory"}

Clock = Callable[[], float]
T = TypeVar("T")


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def owner_tag(case_id: str) -> bytes:
    """What an object of the case's carries after ``OWNED``: a digest of the case id (not the id)."""
    return hashlib.sha256(b"cyberjurors-media-owner:" + case_id.encode()).digest()


def owned(data: bytes, case_id: str) -> bytes:
    return OWNED + owner_tag(case_id) + data


def checked(ref: str) -> str:
    if not isinstance(ref, str) or not _SHA256.fullmatch(ref):
        raise StoreError(f"{str(ref)[:80]!r} is not a sha256", kind="bad_ref")
    return ref


def stored_refs(data: Any) -> set[str]:
    """Every media store object a JSON document names (a case file, a verdict, an escalation, a dead
    letter, an event): the ``stored`` reference of each media item and a letter's ``original_ref``,
    wherever they sit; what erasing a case deletes from the store."""
    found: set[str] = set()
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for name in ("stored", "original_ref"):
                value = node.get(name)
                if isinstance(value, str) and _SHA256.fullmatch(value):
                    found.add(value)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def day_of(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def day_end(name: str) -> float | None:
    """When the day a folder is named after ends (unix seconds); None for a name that is no day."""
    if not _DAY_NAME.match(name):
        return None
    try:
        return calendar.timegm(time.strptime(name, "%Y-%m-%d")) + DAY_S
    except ValueError:
        return None


def alive_days(now: float, retention_s: float) -> Iterator[str]:
    """Day folders a sweep at ``now`` keeps, newest first: those whose end is within the retention."""
    start = now - now % DAY_S
    while start + DAY_S + retention_s > now:
        yield day_of(start)
        start -= DAY_S


@dataclass
class SweepReport:
    deleted: int = 0  # objects removed (or, in a dry run, that would be)
    bytes: int = 0
    days: list[str] = field(default_factory=list)  # the expired day folders swept
    dry_run: bool = False


class MediaStore(Protocol):
    url: str

    async def put(self, data: bytes, case_id: str | None = None) -> str:
        """Store ``data``; return the sha256 (hex) of what is stored. ``case_id`` says whose it is: the
        object is that case's own (a plain store files it behind the case's tag, a sealing store,
        ``sealing.py``, seals it under the case's key), so the same bytes of two cases are two
        objects, and the same bytes of one case again are the same object, kept another retention.
        Without ``case_id`` (a dead letter with no key) the object is named by the bytes' own sha256."""
        ...

    async def adopt(self, ref: str, case_id: str, limit: int) -> str | None:
        """The case's own object holding what ``ref`` holds (a ``stored`` reference a case names):
        ``ref`` itself, kept another retention, when it is already the case's; else a copy put as the
        case's (read within ``limit``). None when ``ref`` is not stored."""
        ...

    async def get(self, ref: str, limit: int) -> bytes:
        """The bytes stored under ``ref``, checked against it; StoreError when missing, over ``limit``
        or not matching."""
        ...

    async def has(self, ref: str) -> bool: ...

    async def size(self, ref: str) -> int | None: ...

    async def touch(self, ref: str) -> bool:
        """Keep ``ref`` another retention (a new case names it); False when it is not stored."""
        ...

    async def sweep(self, dry_run: bool = False, progress: Callable[[int], None] | None = None) -> SweepReport:
        """Delete the objects whose retention has passed; ``progress`` hears each batch's count."""
        ...

    async def erase(self, ref: str) -> int:
        """Delete every copy of ``ref``, in every day folder, live or expired and not yet swept (an
        erasure: `cyberjurors erase`); the number of copies deleted, 0 when there was none."""
        ...


class DatedStore(ABC):
    """The layout, lookup, refresh and sweep common to both stores, over a few blocking primitives on
    keys (``<day>/<ab>/<sha256>``, relative to the store's root) that each store implements."""

    url: str

    def __init__(self, retention_s: float, clock: Clock = time.time):
        self.retention_s = retention_s
        self.clock = clock

    # --- primitives (blocking; run in a thread) --------------------------------------------
    @abstractmethod
    def _size(self, key: str) -> int | None: ...

    @abstractmethod
    def _write(self, key: str, data: bytes) -> None: ...

    @abstractmethod
    def _create(self, key: str, data: bytes) -> bool:
        """Write ``data`` under ``key`` only if nothing is there (whole or absent, as ``_write``): True
        when this call made it, False when it was there already (and is left as it was)."""

    @abstractmethod
    def _read(self, key: str, most: int) -> bytes: ...

    @abstractmethod
    def _copy(self, src: str, dst: str) -> None: ...

    @abstractmethod
    def _days(self) -> list[str]: ...

    @abstractmethod
    def _shards(self, day: str) -> list[str]: ...

    @abstractmethod
    def _objects(self, shard: str) -> list[tuple[str, int]]: ...

    @abstractmethod
    def _delete(self, keys: list[str]) -> int: ...

    def _tidy(self, day: str, shards: list[str]) -> None:  # noqa: B027  # an optional hook: object stores have no folders
        ...

    # --- the protocol ------------------------------------------------------------------------
    @staticmethod
    def key(day: str, ref: str) -> str:
        return f"{day}/{ref[:2]}/{ref}"

    async def _run(self, what: str, fn: Callable[..., T], *args: Any) -> T:
        """``fn`` in a thread; a failure of the store becomes StoreError ``unavailable``."""
        try:
            return await asyncio.to_thread(fn, *args)
        except StoreError:
            raise
        except Exception as err:  # OSError, the SDK's own errors: the store could not do it
            raise StoreError(f"media store {self.url}: cannot {what}: {reason(err)}", kind="unavailable") from err

    def _find(self, ref: str) -> tuple[str, int] | None:
        """The newest live copy of ``ref``: its key and size."""
        for day in alive_days(self.clock(), self.retention_s):
            key = self.key(day, ref)
            size = self._size(key)
            if size is not None:
                return key, size
        return None

    async def put(self, data: bytes, case_id: str | None = None) -> str:
        if case_id is not None:
            data = owned(data, case_id)
        ref = digest_of(data)
        key = self.key(day_of(self.clock()), ref)
        if await self._run("look up an object", self._size, key) is None:  # already put today: it lives on
            await self._run("write an object", self._write, key, data)
        return ref

    async def touch(self, ref: str) -> bool:
        today = self.key(day_of(self.clock()), checked(ref))
        found = await self._run("look up an object", self._find, ref)
        if found is None:
            return False
        if found[0] != today:
            await self._run("refresh an object", self._copy, found[0], today)
        return True

    async def size(self, ref: str) -> int | None:
        found = await self._run("look up an object", self._find, checked(ref))
        return None if found is None else found[1]

    async def has(self, ref: str) -> bool:
        return await self.size(ref) is not None

    async def get(self, ref: str, limit: int) -> bytes:
        found = await self._run("look up an object", self._find, checked(ref))
        if found is None:
            raise StoreError(f"media {ref[:12]}… is not in the media store", kind="missing")
        key, size = found
        most = limit + OWNED_HEADER  # a case's object carries its tag before the bytes
        if size > most or (size > limit and not await self._owned(key)):  # before any byte of the body is read
            raise StoreError(f"media {ref[:12]}…: {size} bytes, limit {limit}", kind="too_large")
        try:
            data = await self._run("read an object", self._read, key, most + 1)
        except StoreError as err:
            if isinstance(err.__cause__, FileNotFoundError):
                raise StoreError(f"media {ref[:12]}… is not in the media store", kind="missing") from err
            raise
        if len(data) > most:
            raise StoreError(f"media {ref[:12]}…: over the limit of {limit} bytes", kind="too_large")
        if digest_of(data) != ref:
            raise StoreError(f"media {ref[:12]}… does not match its sha256", kind="corrupt")
        if data.startswith(OWNED):
            data = data[OWNED_HEADER:]
        if len(data) > limit:
            raise StoreError(f"media {ref[:12]}…: {len(data)} bytes, limit {limit}", kind="too_large")
        return data

    async def _owned(self, key: str) -> bool:
        """Whether the object under ``key`` is a case's own (its first bytes, not its body)."""
        try:
            return await self._run("read an object", self._read, key, len(OWNED)) == OWNED
        except StoreError as err:
            if isinstance(err.__cause__, FileNotFoundError):
                return False
            raise

    async def adopt(self, ref: str, case_id: str, limit: int) -> str | None:
        head = await self.head(ref, OWNED_HEADER)
        if head is None:
            return None
        if head == OWNED + owner_tag(case_id):
            return ref if await self.touch(ref) else None
        try:
            data = await self.get(ref, limit)
        except StoreError as err:
            if err.kind == "missing":  # swept or erased since the look
                return None
            raise
        return await self.put(data, case_id)

    def _copies(self, ref: str) -> list[str]:
        """The keys of every copy of ``ref``, whatever its day folder's age (and in any other folder)."""
        return [key for day in self._days() if self._size(key := self.key(day, ref)) is not None]

    def _newest(self, ref: str) -> str | None:
        """The key of the newest copy of ``ref`` in any day folder, live or expired and not yet swept."""
        found = self._find(ref)
        if found is not None:
            return found[0]
        older = sorted((day for day in self._days() if day_end(day) is not None), reverse=True)
        return next((key for day in older if self._size(key := self.key(day, ref)) is not None), None)

    async def erase(self, ref: str) -> int:
        # every day folder, not only the live ones: an expired folder not yet swept still holds the bytes
        copies = await self._run("look up an object", self._copies, checked(ref))
        return await self._run("delete objects", self._delete, copies) if copies else 0

    async def head(self, ref: str, most: int) -> bytes | None:
        """The first ``most`` bytes of the newest live copy of ``ref`` (None when it is not stored),
        unchecked: what a sealed object's header says (``sealing.py``), without reading the object."""
        found = await self._run("look up an object", self._find, checked(ref))
        return None if found is None else await self._run("read an object", self._read, found[0], most)

    async def sweep(self, dry_run: bool = False, progress: Callable[[int], None] | None = None) -> SweepReport:
        """Delete every expired day folder, one shard (``<day>/<ab>``) at a time: memory holds one shard's
        listing, and a cancelled sweep stops between shards (the next one carries on). Shards are taken
        in random order, so sweeps running at once on one store mostly share the work out."""
        now = self.clock()
        days = sorted(
            d
            for d in await self._run("list the store", self._days)
            if (end := day_end(d)) is not None and end + self.retention_s <= now
        )
        report = SweepReport(days=days, dry_run=dry_run)
        for day in days:
            shards = await self._run("list a day", self._shards, day)
            random.shuffle(shards)
            for shard in shards:
                objects = await self._run("list a shard", self._objects, shard)
                removed = (
                    len(objects)
                    if dry_run
                    else await self._run("delete objects", self._delete, [key for key, _ in objects])
                )
                report.deleted += removed
                report.bytes += sum(size for _, size in objects)
                if not dry_run:
                    metrics.MEDIA_DELETED.inc(removed)
                if progress is not None:
                    progress(removed)
            if not dry_run:
                await self._run("remove a day", self._tidy, day, shards)
        return report


def reason(err: BaseException) -> str:
    """One line about a failure, for people and logs (OSError's own words, else the SDK's message)."""
    text = getattr(err, "strerror", None) or str(err) or type(err).__name__
    return " ".join(text.split())[:200]


class LocalMediaStore(DatedStore):
    """Objects as files ``<root>/<day>/ab/abcdef…``: written to a temporary file and renamed, so a
    reader never sees half an object and a crash leaves no partial one under its name (a leftover
    temporary file goes with its day). A refresh is a hard link (a copy where links are refused)."""

    def __init__(self, root: Path, retention_s: float = 14 * DAY_S, clock: Clock = time.time):
        super().__init__(retention_s, clock)
        self.root = root
        self.url = root.resolve().as_uri()

    def path(self, ref: str) -> Path | None:
        """Where the newest live copy of ``ref`` is; None when it is not stored."""
        found = self._find(checked(ref))
        return None if found is None else self.root / found[0]

    def _size(self, key: str) -> int | None:
        try:
            return (self.root / key).stat().st_size
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _staged(self, key: str, data: bytes) -> tuple[Path, str]:
        """``key``'s path, and ``data`` written whole to a temporary file beside it, so that moving it
        into place (a rename or a link, on the same filesystem) shows a reader all of it or nothing."""
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path, tmp

    def _write(self, key: str, data: bytes) -> None:
        path, tmp = self._staged(key, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _create(self, key: str, data: bytes) -> bool:
        path, tmp = self._staged(key, data)
        try:
            try:
                os.link(tmp, path)  # whole, and only where nothing is: link(2) refuses an existing name
            except FileExistsError:
                return False
            except OSError:  # a filesystem without hard links: exclusive, but a reader may see it partly written
                return self._create_in_place(path, data)
            return True
        finally:
            Path(tmp).unlink(missing_ok=True)

    @staticmethod
    def _create_in_place(path: Path, data: bytes) -> bool:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        return True

    def _read(self, key: str, most: int) -> bytes:
        with open(self.root / key, "rb") as f:
            return f.read(most)

    def _copy(self, src: str, dst: str) -> None:
        target = self.root / dst
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(self.root / src, target)  # a whole file under its name at once
        except FileExistsError:
            return
        except OSError:  # a filesystem without hard links: copy aside, then rename
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
            os.close(fd)
            try:
                shutil.copyfile(self.root / src, tmp)
                os.replace(tmp, target)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise

    def _dirs(self, folder: Path) -> list[str]:
        try:
            with os.scandir(folder) as entries:
                return [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except FileNotFoundError:
            return []

    def _days(self) -> list[str]:
        return self._dirs(self.root)

    def _shards(self, day: str) -> list[str]:
        return [f"{day}/{name}" for name in self._dirs(self.root / day)]

    def _objects(self, shard: str) -> list[tuple[str, int]]:
        found = []
        try:
            with os.scandir(self.root / shard) as entries:
                for entry in entries:
                    try:
                        found.append((f"{shard}/{entry.name}", entry.stat(follow_symlinks=False).st_size))
                    except FileNotFoundError:  # another sweep took it
                        continue
        except FileNotFoundError:
            pass
        return found

    def _delete(self, keys: list[str]) -> int:
        removed = 0
        for key in keys:
            try:
                (self.root / key).unlink()
                removed += 1
            except FileNotFoundError:  # another sweep took it first
                continue
        return removed

    def _tidy(self, day: str, shards: list[str]) -> None:
        for folder in [*(self.root / s for s in shards), self.root / day]:
            with contextlib.suppress(
                OSError
            ):  # gone already, or not empty (a put still landing): the next sweep retries
                folder.rmdir()


class FsspecMediaStore(DatedStore):
    """An object store through fsspec: one PUT per object (atomic), HEAD for lookups, a ranged GET of at
    most the limit, a server-side copy to refresh, bulk deletes. Listings are never cached (a cached
    listing would hide another worker's puts and keep every listing in memory)."""

    def __init__(self, url: str, retention_s: float = 14 * DAY_S, clock: Clock = time.time):
        super().__init__(retention_s, clock)
        import fsspec  # only for object stores

        self.url = shown_url(url)
        try:
            self.fs, root = fsspec.core.url_to_fs(url, use_listings_cache=False)
        except ImportError as err:
            raise StoreError(
                f"{self.url}: {reason(err)} (for s3://, {install_extra('s3')})", kind="unsupported"
            ) from err
        except (ValueError, TypeError) as err:
            raise StoreError(f"{self.url}: {reason(err)}", kind="unsupported") from err
        self.root = root.rstrip("/")

    def _path(self, key: str) -> str:
        return f"{self.root}/{key}"

    def _size(self, key: str) -> int | None:
        try:
            info = self.fs.info(self._path(key))
        except FileNotFoundError:
            return None
        return int(info["size"]) if info.get("type") == "file" else None

    def _write(self, key: str, data: bytes) -> None:
        self.fs.pipe_file(self._path(key), data)

    def _create(self, key: str, data: bytes) -> bool:
        # S3: a PUT with If-None-Match: *, refused (412) when the object exists; the memory filesystem
        # opens "xb". A filesystem without a conditional write falls back to fsspec's look, then write.
        try:
            self.fs.pipe_file(self._path(key), data, mode="create")
        except FileExistsError:
            return False
        return True

    def _read(self, key: str, most: int) -> bytes:
        return self.fs.cat_file(self._path(key), start=0, end=most)

    def _copy(self, src: str, dst: str) -> None:
        self.fs.copy(self._path(src), self._path(dst))

    def _ls(self, path: str, kind: str) -> list[dict[str, Any]]:
        try:
            return [e for e in self.fs.ls(path, detail=True) if e.get("type") == kind]
        except FileNotFoundError:
            return []

    def _days(self) -> list[str]:
        return [e["name"].rstrip("/").rsplit("/", 1)[-1] for e in self._ls(self.root, "directory")]

    def _shards(self, day: str) -> list[str]:
        return [f"{day}/{e['name'].rstrip('/').rsplit('/', 1)[-1]}" for e in self._ls(self._path(day), "directory")]

    def _objects(self, shard: str) -> list[tuple[str, int]]:
        return [
            (f"{shard}/{e['name'].rsplit('/', 1)[-1]}", int(e.get("size") or 0))
            for e in self._ls(self._path(shard), "file")
        ]

    def _delete(self, keys: list[str]) -> int:
        if not keys:
            return 0
        paths = [self._path(k) for k in keys]
        try:
            self.fs.rm(paths)  # S3: DeleteObjects, 1,000 keys a request
            return len(paths)
        except FileNotFoundError:  # some were gone (another sweep): one by one
            removed = 0
            for path in paths:
                try:
                    self.fs.rm_file(path)
                    removed += 1
                except FileNotFoundError:
                    continue
            return removed


def shown_url(url: str) -> str:
    """``url`` fit for logs and messages: no user info, password, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def dated_store(where: str, retention: float, clock: Clock = time.time) -> DatedStore:
    """A folder (a path or ``file://`` URL) or an object store by URL, keeping what it holds ``retention``."""
    parts = urlsplit(where)
    if parts.scheme == "file":
        return LocalMediaStore(Path(unquote(parts.path)), retention, clock)
    if not parts.scheme or len(parts.scheme) == 1:  # "C:\\…" is a path
        return LocalMediaStore(Path(where), retention, clock)
    if parts.scheme in OBJECT_STORES:
        return FsspecMediaStore(where, retention, clock)
    raise StoreError(
        f"no media store for {parts.scheme}:// URLs: use a folder, or one of "
        f"{', '.join(sorted(s + '://' for s in OBJECT_STORES))} (a write there is whole or absent)",
        kind="unsupported",
    )
