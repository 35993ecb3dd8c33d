"""Console sessions and the sign-in lockout, kept in the console's store.

A session id is 256 random bits, handed to the browser once and stored only as its sha256, so a copy
of the database opens no session. Sign-in always makes a new one (an id planted before sign-in is
worth nothing after it), and sign-out deletes it.

Failed sign-ins are counted per user name and per address over ``console_signin.lockout_s``; past
``console_signin.max_failures`` for a name (four times that for an address, where several people may
share a proxy) sign-in is refused for the rest of the window, the right password included. Each
attempt is recorded, atomically with the count it is checked against, before its password is
checked (``attempt``), so the limits hold however many sign-ins arrive at once. The rows are pruned
as the window passes and capped, so a flood of names cannot grow the table without bound.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Literal

from ..config import Settings
from .store import Store

MAX_FAILURE_ROWS = 100_000


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass(frozen=True)
class Session:
    id: str  # only in the cookie and in this object: the store keeps its digest
    user: str
    via: Literal["password", "sso"]
    csrf: str
    created: float


class Sessions:
    def __init__(self, store: Store, settings: Settings, clock=time.time):
        self.store, self.settings, self.clock = store, settings, clock

    def start(self, user: str, via: Literal["password", "sso"], replacing: str | None = None) -> Session:
        now = self.clock()
        session = Session(secrets.token_urlsafe(32), user, via, secrets.token_urlsafe(32), now)
        with self.store.transaction() as db:
            if replacing:
                db.execute("DELETE FROM sessions WHERE id = ?", (_digest(replacing),))
            db.execute("DELETE FROM sessions WHERE expires < ? OR last_seen < ?", (now, now - self._idle))
            db.execute(
                "INSERT INTO sessions (id, user, via, csrf, created, last_seen, expires) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    _digest(session.id),
                    user,
                    via,
                    session.csrf,
                    now,
                    now,
                    now + self.settings.console_signin.session_ttl_s,
                ),
            )
        return session

    @property
    def _idle(self) -> float:
        return self.settings.console_signin.session_idle_s

    def get(self, session_id: str | None) -> Session | None:
        """The live session with this id (its use noted), or None: unknown, expired, or idle too long."""
        if not session_id:
            return None
        now = self.clock()
        with self.store.transaction() as db:
            row = db.execute(
                "SELECT * FROM sessions WHERE id = ? AND expires >= ? AND last_seen >= ?",
                (_digest(session_id), now, now - self._idle),
            ).fetchone()
            if row is None:
                return None
            db.execute("UPDATE sessions SET last_seen = ? WHERE id = ?", (now, row["id"]))
        return Session(session_id, row["user"], row["via"], row["csrf"], row["created"])

    def end(self, session_id: str | None) -> None:
        if session_id:
            with self.store.transaction() as db:
                db.execute("DELETE FROM sessions WHERE id = ?", (_digest(session_id),))

    # --- the lockout -------------------------------------------------------------------------------

    def _keys(self, user: str, address: str) -> list[tuple[str, int]]:
        most = self.settings.console_signin.max_failures
        return [(f"user:{user}", most), (f"addr:{address}", 4 * most)]

    def attempt(self, user: str, address: str) -> str | None:
        """Take a sign-in attempt for ``user`` from ``address``, before its password is checked: an
        attempt id, or None when either is locked. Counting the window's failures and the attempts
        still being checked, and recording this one, is one transaction (SQLite's write lock, held
        from BEGIN IMMEDIATE), so concurrent sign-ins cannot all pass a count that none of them has
        added to yet. The attempt counts as a failure until ``succeeded`` takes it back; one never
        settled (a crash mid-check) stays a failure."""
        now = self.clock()
        since = now - self.settings.console_signin.lockout_s
        attempt = secrets.token_hex(16)
        with self.store.transaction() as db:
            db.execute("DELETE FROM signin_failures WHERE at < ?", (since,))
            for key, most in self._keys(user, address):
                n = db.execute(
                    "SELECT count(*) FROM signin_failures WHERE key = ? AND at >= ?", (key, since)
                ).fetchone()
                if n[0] >= most:
                    return None
            db.executemany(
                "INSERT INTO signin_failures (key, at, attempt) VALUES (?, ?, ?)",
                [(key, now, attempt) for key, _ in self._keys(user, address)],
            )
            db.execute(
                "DELETE FROM signin_failures WHERE rowid IN (SELECT rowid FROM signin_failures ORDER BY at DESC "
                "LIMIT -1 OFFSET ?)",
                (MAX_FAILURE_ROWS,),
            )
        return attempt

    def locked(self, user: str, address: str) -> bool:
        """Whether a sign-in for ``user`` from ``address`` would be refused now (what ``attempt`` checks)."""
        since = self.clock() - self.settings.console_signin.lockout_s
        for key, most in self._keys(user, address):
            n = self.store._rows("SELECT count(*) AS n FROM signin_failures WHERE key = ? AND at >= ?", key, since)
            if n[0]["n"] >= most:
                return True
        return False

    def failed(self, attempt: str) -> None:
        """The attempt's password was wrong: it stays counted, settled."""
        with self.store.transaction() as db:
            db.execute("UPDATE signin_failures SET attempt = NULL WHERE attempt = ?", (attempt,))

    def succeeded(self, attempt: str, user: str) -> None:
        """The attempt signed in: it was no failure, and the name's settled failures are forgotten
        (attempts still being checked for it count on until they settle)."""
        with self.store.transaction() as db:
            db.execute("DELETE FROM signin_failures WHERE attempt = ?", (attempt,))
            db.execute("DELETE FROM signin_failures WHERE key = ? AND attempt IS NULL", (f"user:{user}",))
