"""Sealed records: with ``payload_encryption``, what the service writes to Kafka and to its tables is
sealed under the case's own key, so destroying that key (``erase``) makes every copy unreadable: the
topics, their changelogs, a mirror, a backup of the cluster.

A record's value is sealed whole, as the media store seals an object (``sealing.py``, the same
format: ``MAGIC``, the key id, AES-SIV with both as associated data); its key (the case id) stays in
the clear (the case's reference), so partitioning, compaction and tombstones work as before, and a
header names the key::

    cj-sealed: <key id, hex>    the case key it is sealed under (an HMAC of the case id: no case id)

AES-SIV is deterministic: a stage that runs again seals the same bytes, so a redelivered record is
the same record, and the stages' dedupe holds. A consumer opens a record by its magic bytes, not by
its headers (a header a proxy dropped loses nothing); a record without them is one written before
encryption was on, and reads as it is. One that cannot be opened is ``Unreadable``, with one of:

- ``case_erased``: its key id is the case's, and the key is gone (``erase``): a clear marker, the
  record is dropped on purpose;
- ``sealed_unknown_key``: its key id is not the case's (sealed for another case, another secret, or
  another deployment): nothing opens it here;
- ``sealed_tampered``: its key is there and the record does not open under it.

A key service that cannot be reached is a ``StoreError`` ``unavailable``, never a record written in
the clear: the worker stops taking records (``streams/probes.py``: not ready) until it comes back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import CyberJurorsError, StoreError
from .sealing import HEADER, MAGIC, KeyRing

SEALED = "cj-sealed"
REASONS = ("case_erased", "sealed_unknown_key", "sealed_tampered")


class Unreadable(CyberJurorsError):
    """A sealed record nothing here can open; ``kind`` is one of ``REASONS``."""

    kind = "case_erased"


def is_sealed(value: bytes | None) -> bool:
    return value is not None and value.startswith(MAGIC) and len(value) > HEADER


def key_id_of(value: bytes) -> str:
    return value[len(MAGIC) : HEADER].hex()


class RecordSeal:
    """Seals and opens the records of the cases, under the keys of ``keys`` (the media store's ring)."""

    def __init__(self, keys: KeyRing):
        self.keys = keys

    async def seal(self, case_id: str, value: bytes) -> bytes:
        return value if is_sealed(value) else await self.keys.seal(case_id, value)

    def seal_now(self, case_id: str, value: bytes) -> bytes:
        """``seal`` for a table's value, written synchronously."""
        return value if is_sealed(value) else self.keys.seal_now(case_id, value)

    def headers(self, sealed: bytes) -> list[tuple[str, bytes]]:
        if not is_sealed(sealed):
            return []
        return [(SEALED, key_id_of(sealed).encode())]

    async def open(self, case_id: str | None, value: bytes, what: str = "record") -> bytes:
        """The record as it was before sealing (a clear one as it is); ``Unreadable`` when it cannot be."""
        if not is_sealed(value):
            return value
        self._check_key(case_id, value, what)
        try:
            return await self.keys.open(value, what)
        except StoreError as err:
            raise self._unreadable(err, what) from err

    def open_now(self, case_id: str | None, value: bytes, what: str = "record") -> bytes:
        if not is_sealed(value):
            return value
        self._check_key(case_id, value, what)
        try:
            return self.keys.open_now(value, what)
        except StoreError as err:
            raise self._unreadable(err, what) from err

    def _check_key(self, case_id: str | None, value: bytes, what: str) -> None:
        if case_id is not None and key_id_of(value) != self.keys.key_id(case_id):
            raise Unreadable(
                f"{what} is sealed under a key that is not its case's (another case's, another "
                "case_key_secret's, another deployment's)",
                kind="sealed_unknown_key",
            )

    @staticmethod
    def _unreadable(err: StoreError, what: str) -> CyberJurorsError:
        if err.kind == "shredded":
            return Unreadable(f"{what}: its case was erased (its key destroyed)", kind="case_erased")
        if err.kind == "corrupt":
            return Unreadable(f"{what} does not open under its case key (altered)", kind="sealed_tampered")
        return err  # the key service: unavailable, never taken for an erasure


class Sealed:
    """A sender (a topic, a publisher) whose records are sealed under their key's case: every send a
    handler makes with ``payload_encryption`` goes through one."""

    def __init__(self, out: Any, seal: RecordSeal):
        self.out = out
        self.seal = seal

    async def send(self, *, key: bytes, value: bytes, headers: Any = None, **kwargs: Any) -> Any:
        sealed = await self.seal.seal(key.decode(errors="replace"), value) if value is not None else value
        added = self.seal.headers(sealed)
        return await self.out.send(key=key, value=sealed, headers=with_headers(headers, added), **kwargs)

    def __getattr__(self, name: str) -> Any:  # the topic's own attributes (its name, say)
        return getattr(self.out, name)


def with_headers(headers: Any, added: Sequence[tuple[str, bytes]]) -> Any:
    if not added:
        return headers
    if headers is None:
        return list(added)
    if isinstance(headers, Mapping):
        return {**headers, **dict(added)}
    return [*[(k, v) for k, v in headers if k != SEALED], *added]


UNREADABLE = "cyberjurors_unreadable"  # the marker a reader gets in place of a record nothing opens


def marker(err: Unreadable) -> bytes:
    """What a reader (``cyberjurors verdicts``, the console) gets for a record nothing opens: JSON
    naming why, never an exception."""
    return json.dumps({UNREADABLE: err.kind, "detail": err.detail}).encode()


def unreadable(value: bytes | None) -> str | None:
    """The reason a ``marker`` names, or None for any other value."""
    if not value or not value.startswith(b'{"' + UNREADABLE.encode()):
        return None
    return str(json.loads(value)[UNREADABLE])


def record_seal(settings: Any, keys: KeyRing | None) -> RecordSeal | None:
    """The seal ``payload_encryption`` asks for, over the media store's keys; None when it is off."""
    if not settings.payload_encryption:
        return None
    if keys is None:
        raise StoreError("payload_encryption needs media_encryption (the case keys)", kind="unsupported")
    return RecordSeal(keys)


async def seal_event(settings: Any, case_id: str, value: bytes) -> tuple[bytes, list[tuple[str, bytes]]]:
    """For a platform sealing its own events at the source (``cyberjurors produce --seal`` does it):
    the value sealed under the case's key, and the header to send beside it. The workers open it as
    any sealed record; the key is the one every record of the case is sealed under, so ``erase``
    reaches the platform's events on ``disputes.events`` too. Needs the settings the workers use
    (``payload_encryption``, ``media_encryption``, ``case_key_secret``, ``case_key_store``,
    ``key_service``)::

        value, headers = await seal_event(Settings(), "c-1", json.dumps(event).encode())
        await producer.send_and_wait("disputes.events", value, key=b"c-1", headers=headers)
    """
    from .stores import open_store  # the store is built once per caller, not at import

    store = open_store(settings)
    seal = record_seal(settings, getattr(store, "keys", None))
    if seal is None:
        raise StoreError("sealing an event needs payload_encryption (and media_encryption)", kind="unsupported")
    sealed = await seal.seal(case_id, value)
    return sealed, seal.headers(sealed)
