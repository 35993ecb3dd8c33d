"""The audit trail: every decision, override, replay, sign-in, sign-out and refusal, with who (and in
which roles), when, what, from which address, and whether it was done or refused.

An entry is written to the console's store first, then published to disputes.audit (keyed by its
own id, compacted: nothing is dropped) by a background flush that retries until the broker takes
it; the feed reads the topic back, so a console whose database is lost rebuilds its audit log from
the topic. Entries carry the actor and ids (escalation, letter, case), never party text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from aiokafka.errors import KafkaError

from ..config import Settings
from ..kafka.cluster import AUDIT
from ..tooling.clients import Outgoing, produce
from .store import Store, stamp

log = logging.getLogger("cyberjurors.console.audit")
FIELDS = ("id", "at", "actor", "roles", "action", "result", "target", "detail", "address")
MAX_DETAIL_CHARS = 500


class Audit:
    def __init__(self, settings: Settings, store: Store):
        self.settings, self.store = settings, store
        self._wake = asyncio.Event()

    def record(
        self,
        actor: str,
        roles: str,
        action: str,
        result: str,
        address: str,
        target: str = "",
        detail: str = "",
    ) -> dict[str, Any]:
        entry = {
            "id": uuid.uuid4().hex,
            "at": stamp(datetime.now(UTC)),
            "actor": actor[:128],
            "roles": roles,
            "action": action,
            "result": result,
            "target": target[:200],
            "detail": detail[:MAX_DETAIL_CHARS],
            "address": address,
        }
        with self.store.transaction() as db:
            db.execute(
                f"INSERT OR IGNORE INTO audit ({', '.join(FIELDS)}, published) VALUES ({', '.join('?' * len(FIELDS))}, 0)",
                tuple(entry[f] for f in FIELDS),
            )
        log.info("audit: %s %s %s (%s) from %s: %s", actor, action, target, result, address, detail)
        self._wake.set()
        return entry

    def entries(self, limit: int = 500) -> list[dict[str, Any]]:
        rows = self.store._rows("SELECT * FROM audit ORDER BY at DESC, rowid DESC LIMIT ?", limit)
        return [dict(r) for r in rows]

    async def flush(self) -> int:
        """Publish what is not yet on disputes.audit; the number published."""
        rows = self.store._rows("SELECT * FROM audit WHERE published = 0 ORDER BY at LIMIT 500")
        if not rows:
            return 0
        out = [Outgoing(r["id"], json.dumps({f: r[f] for f in FIELDS}).encode(), "console", route=AUDIT) for r in rows]
        await produce(self.settings, out)
        with self.store.transaction() as db:
            db.executemany("UPDATE audit SET published = 1 WHERE id = ?", [(r["id"],) for r in rows])
        return len(rows)

    async def run(self, every_s: float = 1.0) -> None:
        """Flush as entries come, and retry on a timer while the broker cannot be reached."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), every_s)
            self._wake.clear()
            try:
                while await self.flush():
                    pass
            except (KafkaError, OSError) as err:
                log.warning("audit entries not yet published to %s (%s): kept, tried again", AUDIT, err)
                await asyncio.sleep(every_s)
