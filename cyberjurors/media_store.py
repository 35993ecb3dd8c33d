"""A content-addressed store for bytes that must not travel in the stream (a claim check).

Inline media (``data_base64``) is moved here at ingest and the case carries only its sha256
(``MediaRef.stored``), so every message of an admitted case stays small; a dead letter whose
original is too large to carry stores the original here and names it (``DeadLetter.original_ref``).

``MediaStore`` is the protocol; ``LocalMediaStore`` (a folder, the default) is the one implemented
here. ``open_store`` picks by the ``media_store`` setting: a path or ``file://`` URL. An object
store (``s3://``, ``gs://``, ``https://``) would be a class with the same four methods chosen by
its scheme; until one is written such a setting fails at start-up rather than at the first case.
Workers on several machines need a store they all reach (a shared folder or an object store).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlsplit

from .config import Settings
from .errors import CyberJurorsError

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class StoreError(CyberJurorsError, RuntimeError):
    """The store cannot give or take an object: ``missing``, ``corrupt``, ``too_large``, ``bad_ref``,
    ``unavailable`` (a write failed), ``unsupported`` (no store for that URL scheme)."""


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class MediaStore(Protocol):
    url: str

    async def put(self, data: bytes) -> str:
        """Store ``data``; return its sha256 (hex). Storing the same bytes twice is one object."""
        ...

    async def get(self, ref: str, limit: int) -> bytes:
        """The bytes stored under ``ref``, checked against it; StoreError when missing, over ``limit``
        or not matching."""
        ...

    async def has(self, ref: str) -> bool: ...

    async def size(self, ref: str) -> int | None: ...


class LocalMediaStore:
    """Objects as files ``<root>/sha256/ab/abcdef…``: written to a temporary file and renamed, so a
    reader never sees half an object and a crash leaves no partial one under its name."""

    def __init__(self, root: Path):
        self.root = root
        self.url = root.resolve().as_uri()

    def path(self, ref: str) -> Path:
        if not _SHA256.match(ref):
            raise StoreError(f"{ref[:80]!r} is not a sha256", kind="bad_ref")
        return self.root / "sha256" / ref[:2] / ref

    async def put(self, data: bytes) -> str:
        ref = digest_of(data)
        try:
            await asyncio.to_thread(self._write, self.path(ref), data)
        except OSError as err:
            raise StoreError(f"cannot write to the media store: {err.strerror}", kind="unavailable") from err
        return ref

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        if path.exists():  # content-addressed: the same name holds the same bytes
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    async def get(self, ref: str, limit: int) -> bytes:
        path = self.path(ref)
        size = await self.size(ref)
        if size is None:
            raise StoreError(f"media {ref[:12]}… is not in the media store", kind="missing")
        if size > limit:
            raise StoreError(f"media {ref[:12]}…: {size} bytes, limit {limit}", kind="too_large")
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except OSError as err:
            raise StoreError(f"media {ref[:12]}…: {err.strerror}", kind="missing") from err
        if digest_of(data) != ref:
            raise StoreError(f"media {ref[:12]}… does not match its sha256", kind="corrupt")
        return data

    async def has(self, ref: str) -> bool:
        return await self.size(ref) is not None

    async def size(self, ref: str) -> int | None:
        try:
            return (await asyncio.to_thread(self.path(ref).stat)).st_size
        except FileNotFoundError:
            return None


def open_store(settings: Settings) -> MediaStore:
    """The store the ``media_store`` setting names: a folder (a path or ``file://`` URL)."""
    where = settings.media_store
    parts = urlsplit(where)
    if parts.scheme == "file":
        return LocalMediaStore(Path(unquote(parts.path)))
    if parts.scheme and len(parts.scheme) > 1:  # "C:\\…" is a path, "s3://…" a store we do not have
        raise StoreError(f"no media store for {parts.scheme}:// URLs here; use a folder, or add a MediaStore "
                         "for it", kind="unsupported")
    return LocalMediaStore(Path(where))
