"""Crypto-shredding for the media store: each case's objects sealed under a key of the case's own.

``SealedStore`` wraps the media store (``media_store.DatedStore``) when ``media_encryption`` is on.
Every put names its case (intake's claim check, an appeal's new evidence, a dead letter's original
too large to carry); one that does not (a dead letter without a key) is refused (``no_case``), never
stored in the clear. It is sealed with AES-SIV (RFC 5297, ``cryptography``'s ``AESSIV``) under that
case's key, and stored as any object is, named by the sha256 of what is stored::

    b"CJSEAL1\\0" + key id (32 bytes) + AES-SIV(key, data, associated data = the first two)

AES-SIV is deterministic: the same bytes sealed under the same key give the same object, so a
redelivered intake event stores the same reference, as a plain store does. A read recognises a
sealed object by its header, finds the key by the id it carries and opens it; an object put before
encryption was turned on reads as it is. A case naming an object that is not sealed under its own
key (another case's, or one put before encryption) gets it sealed again under its key (``adopt``). ``erase`` destroys the case's key (``KeyRing.destroy``):
every copy of the case's sealed objects, wherever it was copied (a backup, a bucket's object
versions, a replica), can no longer be read, whether or not ``erase`` reached it.

``KeyRing`` keeps the keys in a store of their own (``case_key_store``: a folder or an object store,
apart from the media), in the media store's dated layout (``<day>/<ab>/<key id>``): a key is put or
refreshed into today's folder by every sealed put of its case, and a sweep deletes whole expired
days, as it does the media, so a key outlives every object sealed under it. A key is made once,
exclusively, and never replaced (``KeyRing``'s docstring says how). A key's file is named
by its id, the HMAC-SHA256 of the case id under ``case_key_secret``: the store holds no case id,
and only whoever holds the secret can tell which case a key (or a sealed object) belongs to.

The same seal (``KeyRing.seal`` and ``open``) keeps a case's placeholder map in the workers' tables
(``streams/letters.py``): what each placeholder the jury read stands for, which the letters give each
party back; erasing the case shreds it with the media.

A key read from the store is held in memory for at most ``cache_s`` seconds (``key_service.cache_s``,
0: never held), in a bounded map: a key ``erase`` destroyed goes on being used by a worker that read
it before for no longer than that, and a record sealed and opened in one stage reads the store once.
The records on the topics and in the tables are sealed under the same keys (``records.py``).

A key is stored wrapped by the key service (``key_service.py``: a local KEK, AWS KMS), so the key
store alone opens nothing; the memory holds it unwrapped, for at most ``cache_s``. A key stored
raw, before there was a key service, reads as it is.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from ..errors import StoreError
from .key_service import MAX_WRAPPED, KeyWrap, Unwrapped
from .media_store import DatedStore, SweepReport, day_of

MAGIC = b"CJSEAL1\0"
KEY_ID_BYTES = 32
HEADER = len(MAGIC) + KEY_ID_BYTES
OVERHEAD = HEADER + 16  # the header and AES-SIV's synthetic IV
KEY_BITS = 512  # AES-256-SIV: two 256-bit keys
CREATING = "creating"  # the key store's folder where a new key is made, exclusively, before it is filed by day
CACHED_KEYS = 4096  # keys held at once (cache_s bounds how long): the cases a worker has in flight, and more
# the keys held, per key store, shared by every ring of the process: a key one ring destroys (the
# console's erasure, `erase` run in-process) is forgotten by every other ring at once
_HELD: dict[str, tuple[threading.Lock, OrderedDict[str, tuple[float, bytes]]]] = {}
_HELD_LOCK = threading.Lock()


def _held(url: str) -> tuple[threading.Lock, OrderedDict[str, tuple[float, bytes]]]:
    with _HELD_LOCK:
        return _HELD.setdefault(url, (threading.Lock(), OrderedDict()))


class _Moved(StoreError):
    """A key or its creation marker went between looking and reading (filed, swept, or destroyed by
    another process): look again (what is left after the retries: the key store is ``unavailable``)."""

    kind = "unavailable"


class KeyRing:
    """Per-case keys in a ``DatedStore`` of their own (its primitives, not its content addressing:
    a key is filed under its id, not under the digest of its bytes).

    A key is made once. A new one is first written, exclusively (``_create``: ``link(2)`` in a
    folder, a conditional PUT on an object store), under one name that does not depend on the day
    (``creating/<ab>/<key id>``): of processes making the same case's key at once, one writes it and
    every other reads that one, whatever their clocks say the day is. It is then filed in today's
    folder and the marker deleted. A key found only in an expired day folder not yet swept is copied
    into today's (moved, not made again), so what was sealed under it still opens."""

    def __init__(
        self,
        store: DatedStore,
        secret: str,
        cache_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        wrap: KeyWrap | None = None,
    ):
        self.store = store
        self.wrap = wrap or Unwrapped()  # what wraps a key before it is stored (key_service.py)
        self._secret = secret.encode()
        self._creating = threading.Lock()  # two puts of one case in this process: one looks at a time
        self.cache_s = cache_s
        self._clock = clock
        self._cache_lock, self._cache = _held(store.url)  # key id -> (read at, key); calls run in threads

    def _recall(self, key_id: str) -> bytes | None:
        with self._cache_lock:
            found = self._cache.get(key_id)
            if found is None:
                return None
            if self._clock() - found[0] >= self.cache_s:
                del self._cache[key_id]
                return None
            return found[1]

    def _remember(self, key_id: str, key: bytes) -> bytes:
        if self.cache_s > 0:
            with self._cache_lock:
                self._cache[key_id] = (self._clock(), key)
                self._cache.move_to_end(key_id)
                while len(self._cache) > CACHED_KEYS:
                    self._cache.popitem(last=False)
        return key

    def forget(self, key_id: str) -> None:
        with self._cache_lock:
            self._cache.pop(key_id, None)

    def key_id(self, case_id: str) -> str:
        return hmac.new(self._secret, b"case-key:" + case_id.encode(), hashlib.sha256).hexdigest()

    def _read_stored(self, where: str) -> bytes:
        """The key as stored (wrapped, or raw from before there was a key service)."""
        try:
            stored = self.store._read(where, MAX_WRAPPED + 1)
        except FileNotFoundError as err:
            raise _Moved(f"case key {where.rsplit('/', 1)[-1][:12]}… went while it was read") from err
        if len(stored) > MAX_WRAPPED:
            raise StoreError(
                f"case key {where.rsplit('/', 1)[-1][:12]}… is damaged (over {MAX_WRAPPED} bytes)", kind="corrupt"
            )
        return stored

    def _read_key(self, where: str) -> bytes:
        return self.wrap.unwrap(where.rsplit("/", 1)[-1], self._read_stored(where))

    def _get(self, key_id: str) -> bytes | None:
        """The key, from the newest copy in any day folder (an expired one not yet swept too: the
        objects sealed under it may have been refreshed without it)."""
        if (key := self._recall(key_id)) is not None:
            return key
        where = self.store._newest(key_id)
        if where is None:
            return None
        try:
            return self._remember(key_id, self._read_key(where))
        except _Moved:  # swept or destroyed as it was read
            return None

    def _key_for(self, case_id: str) -> tuple[str, bytes]:
        """The case's key, made on its first sealed put; kept in today's folder, so it lives another
        retention from now, as the object about to be sealed with it does."""
        key_id = self.key_id(case_id)
        if (key := self._recall(key_id)) is not None:  # kept in today's folder when it was read, or since
            return key_id, key
        with self._creating:
            for attempt in Retrying(retry=retry_if_exception_type(_Moved), stop=stop_after_attempt(8), reraise=True):
                with attempt:
                    return key_id, self._remember(key_id, self._filed(key_id))
        raise AssertionError("unreachable: the retry returns or raises")  # pragma: no cover

    def _filed(self, key_id: str) -> bytes:
        today = self.store.key(day_of(self.store.clock()), key_id)
        found = self.store._newest(key_id)
        if found is not None:
            return self._refreshed(found, today)
        marker = self.store.key(CREATING, key_id)
        made = self.store._create(marker, self.wrap.wrap(key_id, AESSIV.generate_key(KEY_BITS)))
        found = self.store._newest(key_id)  # filed by another process before this one's marker
        if found is not None:
            if made:
                self.store._delete([marker])
            return self._refreshed(found, today)
        stored = self._read_stored(marker)  # this process's or another's: the one every process uses
        if not self.store._create(today, stored):  # filed meanwhile by a process holding the same marker
            stored = self._read_stored(today)
        self.store._delete([marker])
        return self.wrap.unwrap(key_id, stored)

    def _refreshed(self, found: str, today: str) -> bytes:
        if found != today:
            try:
                self.store._copy(found, today)
            except FileNotFoundError as err:  # swept or destroyed since it was found
                raise _Moved(f"case key {found.rsplit('/', 1)[-1][:12]}… went while it was copied") from err
        return self._read_key(today)

    def _destroy(self, case_id: str) -> int:
        self.forget(self.key_id(case_id))
        copies = self.store._copies(self.key_id(case_id))  # every folder: the creation marker too
        return self.store._delete(copies) if copies else 0

    async def key_for(self, case_id: str) -> tuple[str, bytes]:
        return await self.store._run("keep a case key", self._key_for, case_id)

    async def get(self, key_id: str) -> bytes | None:
        return await self.store._run("read a case key", self._get, key_id)

    async def has(self, case_id: str) -> bool:
        return await self.get(self.key_id(case_id)) is not None

    async def destroy(self, case_id: str) -> int:
        """Delete every copy of the case's key: its sealed objects can no longer be read, anywhere.
        The number of copies deleted (0: there was none, or it was destroyed before)."""
        return await self.store._run("delete a case key", self._destroy, case_id)

    async def refresh(self, key_id: str) -> None:
        """Keep the key another retention (a case names an object sealed under it)."""
        await self.store._run("refresh a case key", self._refresh, key_id)

    def _refresh(self, key_id: str) -> None:
        found = self.store._newest(key_id)
        today = self.store.key(day_of(self.store.clock()), key_id)
        if found is not None and found != today:
            with contextlib.suppress(FileNotFoundError):  # swept or destroyed meanwhile: nothing to keep
                self.store._copy(found, today)

    async def sweep(self, dry_run: bool = False) -> SweepReport:
        return await self.store.sweep(dry_run=dry_run)

    async def seal(self, case_id: str, data: bytes) -> bytes:
        """``data`` sealed under the case's key (made on its first use, kept another retention from
        now): ``MAGIC``, the key id, then AES-SIV of ``data`` with the two as associated data."""
        if self.cache_s <= 0:
            return await self.store._run("seal with a case key", self.seal_now, case_id, data)
        if self._recall(self.key_id(case_id)) is None:
            await self.key_for(case_id)  # the store's I/O in a thread; the key held after it
        return self.seal_now(case_id, data)

    def seal_now(self, case_id: str, data: bytes) -> bytes:
        """``seal`` in this thread: for a table's value, which is written synchronously (the key is
        usually held already: the record being handled was opened under it)."""
        key_id, key = self._key_for(case_id)
        header = MAGIC + bytes.fromhex(key_id)
        return header + AESSIV(key).encrypt(data, [header])

    async def open(self, data: bytes, what: str) -> bytes:
        """What ``seal`` sealed; ``data`` as it is when it is not sealed (put before encryption was on).
        StoreError ``shredded`` when its case key was erased, ``corrupt`` when it does not open."""
        if self.cache_s <= 0:
            return await self.store._run("open with a case key", self.open_now, data, what)
        key_id = data[len(MAGIC) : HEADER].hex()
        if data.startswith(MAGIC) and self._recall(key_id) is None and await self.get(key_id) is None:
            raise StoreError(f"{what} is sealed under a case key that was erased", kind="shredded")
        return self.open_now(data, what)  # the key held now: no I/O in the event loop

    def open_now(self, data: bytes, what: str) -> bytes:
        """``open`` in this thread (a table's value, read synchronously)."""
        if not data.startswith(MAGIC):
            return data
        header, sealed = data[:HEADER], data[HEADER:]
        key = self._get(header[len(MAGIC) :].hex())
        if key is None:
            raise StoreError(f"{what} is sealed under a case key that was erased", kind="shredded")
        try:
            return AESSIV(key).decrypt(sealed, [header])
        except InvalidTag as err:
            raise StoreError(f"{what} does not open under its case key", kind="corrupt") from err


class SealedStore:
    """The media store with each case's objects sealed (the ``MediaStore`` protocol)."""

    def __init__(self, store: DatedStore, keys: KeyRing):
        self.store = store
        self.keys = keys
        self.url = store.url

    async def put(self, data: bytes, case_id: str | None = None) -> str:
        if case_id is None:  # nothing to seal it under: refused rather than stored in the clear
            raise StoreError(
                "media_encryption is on and the object names no case to seal it under: not stored",
                kind="no_case",
            )
        return await self.store.put(await self.keys.seal(case_id, data))

    async def get(self, ref: str, limit: int) -> bytes:
        data = await self.store.get(ref, limit + OVERHEAD)
        if not data.startswith(MAGIC) and len(data) > limit:
            raise StoreError(f"media {ref[:12]}…: {len(data)} bytes, limit {limit}", kind="too_large")
        return await self.keys.open(data, f"media {ref[:12]}…")

    async def adopt(self, ref: str, case_id: str, limit: int) -> str | None:
        """``ref`` when it is sealed under the case's own key (kept another retention, its key too);
        else what it holds sealed again under the case's key: an object of another case's, or one
        put before encryption was on, becomes the case's own, so destroying the other case's key
        leaves this case's media readable."""
        head = await self.store.head(ref, HEADER)
        if head is None:
            return None
        if head == MAGIC + bytes.fromhex(self.keys.key_id(case_id)):
            return ref if await self.touch(ref) else None
        try:
            data = await self.get(ref, limit)
        except StoreError as err:
            if err.kind == "missing":
                return None
            raise
        return await self.put(data, case_id)

    async def has(self, ref: str) -> bool:
        return await self.store.has(ref)

    async def size(self, ref: str) -> int | None:
        return await self.store.size(ref)

    async def touch(self, ref: str) -> bool:
        """Keep the object another retention, and its key with it (a case naming a sealed object
        refreshes the key too, or the key could expire before the object)."""
        head = await self.store.head(ref, HEADER)
        if head is None:
            return False
        if head.startswith(MAGIC) and len(head) == HEADER:  # the key first: it must outlive the object
            await self.keys.refresh(head[len(MAGIC) :].hex())
        return await self.store.touch(ref)

    async def sweep(self, dry_run: bool = False, progress: Callable[[int], None] | None = None) -> SweepReport:
        report = await self.store.sweep(dry_run=dry_run, progress=progress)
        await self.keys.sweep(dry_run=dry_run)  # keys expire as the media does: whole days, after it
        return report

    async def erase(self, ref: str) -> int:
        return await self.store.erase(ref)
