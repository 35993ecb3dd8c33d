"""A table whose bytes values are sealed under their case's key (``payload_encryption``), so its
changelog topic and its RocksDB files hold only sealed records: ``erase`` destroying the key reaches
every copy of them (evidence/records.py). Keys are ``<case_id>/<what>``, as ``stage-results``'
are: the case is the key's first part.

Everything that writes through the mapping, ``send_changelog`` or the table's store (``expiry.put``
outside a stream event) seals; every read opens. A value of a case whose key was destroyed reads as
missing (its case was erased); one that does not open under its key raises ``Unreadable``."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any

from ..evidence.records import RecordSeal, Unreadable


def case_of(key: str) -> str:
    return key.split("/", 1)[0]


class SealedValues(MutableMapping[str, Any]):
    def __init__(self, table: MutableMapping[str, Any], seal: RecordSeal):
        self.raw = table
        self.seal = seal

    def _sealed(self, key: str, value: Any) -> Any:
        return self.seal.seal_now(case_of(key), value) if isinstance(value, bytes) else value

    def _opened(self, key: str, value: Any) -> Any:
        return self.seal.open_now(case_of(key), value, f"table value {key!r}") if isinstance(value, bytes) else value

    def __getitem__(self, key: str) -> Any:
        value = self.raw[key]
        try:
            return self._opened(key, value)
        except Unreadable as err:
            if err.kind == "case_erased":
                raise KeyError(key) from err
            raise

    def __setitem__(self, key: str, value: Any) -> None:
        self.raw[key] = self._sealed(key, value)

    def __delitem__(self, key: str) -> None:
        del self.raw[key]

    def __contains__(self, key: object) -> bool:
        return key in self.raw

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)

    def keys(self) -> Any:
        return self.raw.keys()

    def __getattr__(self, name: str) -> Any:  # the Faust table's own (its name, its changelog topic, ...)
        found = getattr(self.raw, name)
        if name == "send_changelog":  # expiry.put outside a stream event: the changelog record sealed
            return lambda partition, key, value, **options: found(partition, key, self._sealed(key, value), **options)
        if name == "data":  # and the table's store written alike
            return _SealingStore(found, self)
        return found


class _SealingStore:
    """A table's store as ``expiry.store_put`` writes it outside a stream event: sealed too."""

    def __init__(self, store: Any, values: SealedValues):
        self._store = store
        self._values = values

    def sealed_value(self, key: str, value: Any) -> Any:  # store_put's first step (RocksDB's path too)
        return self._values._sealed(key, value)

    def __setitem__(self, key: str, value: Any) -> None:
        self._store[key] = self._values._sealed(key, value)  # sealing a sealed value leaves it as it is

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
