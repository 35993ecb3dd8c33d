"""The media store the settings name: a folder or an object store (media_store.py), behind the
sealing store (sealing.py) with ``media_encryption``. Here, above both, since sealing builds on the
media store: media_store.py never imports sealing.py."""

from __future__ import annotations

import time

from ..config import Settings
from .key_service import key_wrap
from .media_store import Clock, MediaStore, dated_store
from .sealing import KeyRing, SealedStore


def open_store(settings: Settings, clock: Clock = time.time) -> MediaStore:
    """The store the ``media_store`` setting names: a folder (a path or ``file://`` URL), or an object
        store by URL. An unknown scheme fails here, at start-up, rather than at the first case. With
        ``media_encryption``, that store behind the sealing one, with its key store and the key service
    that wraps the keys kept there (``key_service``)."""
    store = dated_store(settings.media_store, settings.media_retention, clock)
    if not settings.media_encryption:
        return store
    keys = dated_store(settings.case_key_store, settings.media_retention, clock)
    ring = KeyRing(
        keys, settings.case_key_secret or "", cache_s=settings.key_service.cache_s, wrap=key_wrap(settings.key_service)
    )
    return SealedStore(store, ring)
