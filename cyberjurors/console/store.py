"""The console's local store: what it read from the topics, kept in SQLite so it survives restarts.

Each record is applied in one transaction together with the next offset of its partition, so a
console stopped anywhere resumes at the first record it had not stored, and a record applied twice
changes nothing: verdicts are upserted by ``verdict_id``, escalations by ``escalation_id``, dead
letters by their topic/partition/offset (the id ``cyberjurors dlq --replay`` records), replay notes
by the letter id, outcomes by their topic/partition/offset. A case's record (the case file with its
evidence, clue chain and ballots) is kept per case and instance, the fullest one read wins.

What depends on one broker (offsets, dead letters, replay notes) is dropped when the console finds
itself on another cluster (the embedded broker gets a new id each start); verdicts, escalations,
records and decisions are history and stay.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from ..errors import StoreError
from ..evidence.records import unreadable
from ..evidence.scrub import ID_PUNCTUATION, replace_ids
from ..schemas import CaseFile, DeadLetter, Escalation, OutcomeReported, PartyLetter, Verdict

log = logging.getLogger("cyberjurors.console")

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS offsets (topic TEXT, partition INTEGER, next INTEGER, PRIMARY KEY (topic, partition));
CREATE TABLE IF NOT EXISTS verdicts (
  verdict_id TEXT PRIMARY KEY, case_id TEXT, instance INTEGER, category TEXT, winner TEXT, buyer INTEGER,
  seller INTEGER, margin INTEGER, rounds_used INTEGER, escalated INTEGER, reasons TEXT, latency_s REAL,
  cost_usd REAL, tokens INTEGER, decided_at TEXT, body TEXT);
CREATE INDEX IF NOT EXISTS verdicts_decided ON verdicts (decided_at);
CREATE INDEX IF NOT EXISTS verdicts_case ON verdicts (case_id);
CREATE TABLE IF NOT EXISTS escalations (
  escalation_id TEXT PRIMARY KEY, case_id TEXT, verdict_id TEXT, instance INTEGER, raised_at TEXT, body TEXT);
CREATE TABLE IF NOT EXISTS records (
  case_id TEXT, instance INTEGER, source TEXT, rounds INTEGER, ballots INTEGER, body TEXT,
  PRIMARY KEY (case_id, instance));
CREATE TABLE IF NOT EXISTS letters (
  id TEXT PRIMARY KEY, topic TEXT, partition INTEGER, offset INTEGER, failed_at TEXT, headers TEXT, body TEXT);
CREATE TABLE IF NOT EXISTS replayed (id TEXT PRIMARY KEY, note BLOB);
CREATE TABLE IF NOT EXISTS outcomes (
  id TEXT PRIMARY KEY, case_id TEXT, escalation_id TEXT, event_id TEXT, body TEXT);
CREATE TABLE IF NOT EXISTS decisions (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, escalation_id TEXT, case_id TEXT, event_id TEXT UNIQUE, winner TEXT,
  buyer INTEGER, seller INTEGER, rationale TEXT, reviewer TEXT, decided_at TEXT, published_at TEXT,
  override_of INTEGER, origin TEXT);
CREATE INDEX IF NOT EXISTS decisions_escalation ON decisions (escalation_id);
CREATE TABLE IF NOT EXISTS sessions (
  id TEXT PRIMARY KEY, user TEXT, via TEXT, csrf TEXT, created REAL, last_seen REAL, expires REAL);
CREATE TABLE IF NOT EXISTS signin_failures (key TEXT, at REAL);
CREATE INDEX IF NOT EXISTS signin_failures_key ON signin_failures (key, at);
CREATE TABLE IF NOT EXISTS audit (
  id TEXT PRIMARY KEY, at TEXT, actor TEXT, roles TEXT, action TEXT, result TEXT, target TEXT, detail TEXT,
  address TEXT, published INTEGER);
CREATE INDEX IF NOT EXISTS audit_at ON audit (at);
CREATE TABLE IF NOT EXISTS party_letters (
  letter_id TEXT PRIMARY KEY, case_id TEXT, verdict_id TEXT, instance INTEGER, party TEXT, written_at TEXT, body TEXT);
CREATE INDEX IF NOT EXISTS party_letters_case ON party_letters (case_id);
CREATE TABLE IF NOT EXISTS erased (deny TEXT PRIMARY KEY, ref TEXT, at REAL, erased TEXT);
"""
# columns added since a store was first made: (table, column, type)
# signin_failures.attempt: the sign-in still being checked that a row counts (console/sessions.py), NULL once settled
ADDED_COLUMNS = [("decisions", "role", "TEXT"), ("signin_failures", "attempt", "TEXT")]

# what each topic (unprefixed) holds, as the store files it
FILED_AS = {
    "disputes.verdicts": "verdict",
    "disputes.escalations": "escalation",
    "disputes.rounds": "record",
    "disputes.dlq": "letter",
    "disputes.dlq-replayed": "replayed",
    "disputes.outcomes": "outcome",
    "disputes.audit": "audit",
    "disputes.letters": "party_letter",  # letters to the parties; "letters" here are the dead letters
}
BROKER_BOUND = ("offsets", "letters", "replayed", "outcomes")


class Message(Protocol):
    """What the store needs of a consumed record (aiokafka's ConsumerRecord has it)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Any


WORDS = re.compile(r"[\s/,;()\[\]\"']+")


def case_of(kind: str, value: bytes | None) -> str | None:
    """The case a record of the console's topics belongs to (a letter's: its key), or None."""
    try:
        body = json.loads(value or b"")
    except ValueError:
        return None
    if not isinstance(body, dict):
        return None
    if kind == "record":
        body = body.get("case") or {}
    found = body.get("key" if kind == "letter" else "case_id")
    return found if isinstance(found, str) else None


def _put(db: sqlite3.Connection, table: str, *row: object) -> None:
    """A row of one of the store's tables, in place of the one with its key: a placeholder a value."""
    db.execute(f"INSERT OR REPLACE INTO {table} VALUES ({', '.join('?' * len(row))})", row)  # table names are ours


def stamp(at: datetime) -> str:
    """A time as the store keeps it: UTC, fixed width, so text order is time order."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Decision:
    """A human decision on an escalation: made in this console (``origin`` console, with the reviewer
    and rationale) or read from disputes.outcomes (``origin`` topic: another console, ``produce``)."""

    seq: int
    escalation_id: str
    case_id: str
    event_id: str
    winner: str
    buyer: int
    seller: int
    rationale: str | None
    reviewer: str | None
    decided_at: str
    published_at: str | None
    override_of: int | None
    origin: str
    role: str | None = None

    def same_votes(self, winner: str, buyer: int, seller: int) -> bool:
        return (self.winner, self.buyer, self.seller) == (winner, buyer, seller)


@dataclass(frozen=True)
class StoredLetter:
    id: str
    topic: str
    partition: int
    offset: int
    letter: DeadLetter
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class CaseFilter:
    category: str | None = None
    winner: str | None = None
    escalated: bool | None = None
    since: str | None = None  # stamps: decided_at >= since, < until
    until: str | None = None
    case: str | None = None  # a part of the case id


class Store:
    def __init__(self, path: Path, verified: Callable[[OutcomeReported], bool] | None = None):
        """``verified`` says whether a human panel's outcome read from the topic carries a valid
        signature; one that does not is kept as read, but decides nothing here (its escalation stays
        awaiting a decision), as the workers count and learn nothing from it."""
        self.path = path
        self.verified = verified or (lambda outcome: False)
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.RLock()  # one connection shared by the feed and the pages
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            # what a delete or an update replaces is overwritten with zeros, not left in free space: an
            # erased case (console/erasure.py) leaves no bytes behind in the file
            self._db.execute("PRAGMA secure_delete=ON")
            self._db.executescript(SCHEMA)
            for table, column, kind in ADDED_COLUMNS:
                have = {r["name"] for r in self._db.execute(f"PRAGMA table_info({table})")}
                if column not in have:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")  # names are ours

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, *args: object) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # --- the broker it follows -------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", key)
        return rows[0]["value"] if rows else None

    def on_cluster(self, cluster_id: str | None) -> bool:
        """Note the cluster the console reads; True when it differs from the one before, whose
        offsets, dead letters, replay notes and outcome positions were then dropped."""
        if not cluster_id:
            return False
        with self.transaction() as db:
            before = db.execute("SELECT value FROM meta WHERE key = 'cluster_id'").fetchone()
            if before is not None and before["value"] == cluster_id:
                return False
            if before is not None:
                for table in BROKER_BOUND:
                    db.execute(f"DELETE FROM {table}")  # table names are ours
            _put(db, "meta", "cluster_id", cluster_id)
        return before is not None

    def position(self, topic: str, partition: int) -> int | None:
        rows = self._rows("SELECT next FROM offsets WHERE topic = ? AND partition = ?", topic, partition)
        return rows[0]["next"] if rows else None

    # --- applying what was read ------------------------------------------------------------------

    def apply(self, kind: str, message: Message) -> bool:
        """File one record and move its partition's offset past it, in one transaction; False when the
        record could not be read (skipped, counted). A record of an erased case sent before its
        erasure is not filed (``erased``): the topics keep it until their retention passes; nor is a
        sealed one nothing opened (its ``marker``: the case's key destroyed), though its offset is
        passed, so the feed's lag does not wait on it."""
        with self.transaction() as db:
            try:
                if unreadable(message.value) is None and not self.erased(db, kind, message):
                    getattr(self, f"_{kind}")(db, message)
                read = True
            except (ValidationError, ValueError, UnicodeDecodeError) as err:
                log.warning(
                    "skipped %s/%d/%d: %s", message.topic, message.partition, message.offset, str(err).splitlines()[0]
                )
                db.execute(
                    "INSERT INTO meta VALUES ('skipped', '1') ON CONFLICT(key) DO UPDATE SET "
                    "value = CAST(value AS INTEGER) + 1"
                )
                read = False
            db.execute(
                "INSERT INTO offsets VALUES (?, ?, ?) ON CONFLICT(topic, partition) DO UPDATE SET "
                "next = max(next, excluded.next)",
                (message.topic, message.partition, message.offset + 1),
            )
        return read

    def _verdict(self, db: sqlite3.Connection, message: Message) -> None:
        v = Verdict.model_validate_json(message.value or b"")
        _put(
            db,
            "verdicts",
            v.verdict_id,
            v.case_id,
            v.instance,
            v.category,
            v.winner,
            v.votes.buyer,
            v.votes.seller,
            v.margin,
            v.rounds_used,
            int(v.escalated),
            json.dumps(v.escalation_reasons),
            v.latency_s,
            v.tokens.cost_usd,
            v.tokens.total_tokens,
            stamp(v.decided_at),
            v.model_dump_json(),
        )

    def _escalation(self, db: sqlite3.Connection, message: Message) -> None:
        e = Escalation.model_validate_json(message.value or b"")
        _put(
            db,
            "escalations",
            e.escalation_id,
            e.case_id,
            e.verdict_id,
            e.instance,
            stamp(e.raised_at),
            e.model_dump_json(exclude={"case_file"}),
        )
        self._keep_record(db, e.case_file, e.instance, "escalation")

    def _record(self, db: sqlite3.Connection, message: Message) -> None:
        self._keep_record(db, CaseFile.model_validate_json(message.value or b""), 1, "rounds")

    def _keep_record(self, db: sqlite3.Connection, record: CaseFile, instance: int, source: str) -> None:
        """The fullest record of a case's instance: more rounds, then more ballots (an escalation sent
        without its earlier rounds' ballots yields to the rounds read from disputes.rounds)."""
        rounds, ballots = len(record.rounds), sum(len(r.ballots) for r in record.rounds)
        db.execute(
            "INSERT INTO records VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(case_id, instance) DO UPDATE SET "
            "source = excluded.source, rounds = excluded.rounds, ballots = excluded.ballots, body = excluded.body "
            "WHERE (excluded.rounds, excluded.ballots) > (records.rounds, records.ballots)",
            (record.case_id, instance, source, rounds, ballots, record.model_dump_json()),
        )

    def _letter(self, db: sqlite3.Connection, message: Message) -> None:
        letter = DeadLetter.model_validate_json(message.value or b"")
        headers = [(k, base64.b64encode(v or b"").decode()) for k, v in (message.headers or ())]
        _put(
            db,
            "letters",
            f"{message.topic}/{message.partition}/{message.offset}",
            message.topic,
            message.partition,
            message.offset,
            stamp(letter.failed_at),
            json.dumps(headers),
            letter.model_dump_json(),
        )

    def _party_letter(self, db: sqlite3.Connection, message: Message) -> None:
        """A letter to a party, upserted by its id: a re-sent letter is the same letter."""
        letter = PartyLetter.model_validate_json(message.value or b"")
        _put(
            db,
            "party_letters",
            letter.letter_id,
            letter.case_id,
            letter.verdict_id,
            letter.instance,
            letter.party,
            stamp(letter.written_at),
            letter.model_dump_json(),
        )

    def _replayed(self, db: sqlite3.Connection, message: Message) -> None:
        key = (message.key or b"").decode()
        if message.value is None:  # a tombstone in the compacted topic
            db.execute("DELETE FROM replayed WHERE id = ?", (key,))
        else:
            _put(db, "replayed", key, message.value)

    def _outcome(self, db: sqlite3.Connection, message: Message) -> None:
        outcome = OutcomeReported.model_validate_json(message.value or b"")
        _put(
            db,
            "outcomes",
            f"{message.topic}/{message.partition}/{message.offset}",
            outcome.case_id,
            outcome.escalation_id,
            outcome.event_id,
            outcome.model_dump_json(),
        )
        if outcome.source != "human_panel" or outcome.escalation_id is None:
            return
        if not self.verified(outcome):
            log.warning(
                "a human panel's outcome for case %s at %s/%d/%d is not signed by a key this console holds: "
                "it decides nothing (the workers dead-letter it)",
                outcome.case_id,
                message.topic,
                message.partition,
                message.offset,
            )
            return
        event_id = outcome.event_id or f"{message.topic}/{message.partition}/{message.offset}"
        at = stamp(outcome.decided_at or datetime.now(UTC))
        known = db.execute("SELECT seq FROM decisions WHERE event_id = ?", (event_id,)).fetchone()
        if known is not None:  # ours, read back: published
            db.execute(
                "UPDATE decisions SET published_at = coalesce(published_at, ?) WHERE seq = ?", (at, known["seq"])
            )
            return
        v, by = outcome.votes, outcome.decided_by
        db.execute(
            "INSERT INTO decisions (escalation_id, case_id, event_id, winner, buyer, seller, decided_at, "
            "published_at, origin, reviewer, role) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'topic', ?, ?)",
            (
                outcome.escalation_id,
                outcome.case_id,
                event_id,
                v.winner,
                v.buyer,
                v.seller,
                at,
                at,
                by.reviewer if by else None,
                by.role if by else None,
            ),
        )

    def _audit(self, db: sqlite3.Connection, message: Message) -> None:
        entry = json.loads(message.value or b"")
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise ValueError("an audit entry is an object with an id")
        fields = ("id", "at", "actor", "roles", "action", "result", "target", "detail", "address")
        values = {f: str(entry.get(f, "")) for f in fields}
        for f in ("target", "detail"):  # an entry naming an erased case, read before its scrubbed copy
            values[f] = self.without_erased(db, values[f])
        # the later record of an id wins: an erasure republishes an entry with the case taken out
        db.execute(
            f"INSERT INTO audit ({', '.join(fields)}, published) VALUES ({', '.join('?' * len(fields))}, 1) "
            "ON CONFLICT(id) DO UPDATE SET published = 1, target = excluded.target, detail = excluded.detail",
            tuple(values[f] for f in fields),
        )

    # --- erased cases (console/erasure.py) -------------------------------------------------------

    def deny_key(self, db: sqlite3.Connection, case_id: str) -> str:
        """How the store names an erased case (or one of its ids) without keeping it: an HMAC under
        a salt of its own, made at the first erasure."""
        row = db.execute("SELECT value FROM meta WHERE key = 'erasure_salt'").fetchone()
        if row is None:
            salt = secrets.token_hex(32)
            db.execute("INSERT INTO meta VALUES ('erasure_salt', ?)", (salt,))
        else:
            salt = row["value"]
        return hmac.new(bytes.fromhex(salt), case_id.encode(), hashlib.sha256).hexdigest()

    def erased(self, db: sqlite3.Connection, kind: str, message: Message) -> bool:
        """Whether the record belongs to an erased case and was sent before the erasure (a record sent
        later is a new submission under the same id, and is filed)."""
        if kind in ("audit", "replayed") or not self._has_erased(db):
            return False
        case_id = case_of(kind, message.value)
        if case_id is None:
            return False
        row = db.execute("SELECT at FROM erased WHERE deny = ?", (self.deny_key(db, case_id),)).fetchone()
        sent_ms = getattr(message, "timestamp", None)
        return row is not None and (not isinstance(sent_ms, int) or sent_ms / 1000 <= row["at"])

    def without_erased(self, db: sqlite3.Connection, text: str) -> str:
        """``text`` with every word that names an erased case or one of its ids (a page's path, an
        escalation id) replaced by the erasure's reference."""
        if not text or not self._has_erased(db):
            return text
        found: dict[str, str] = {}
        for word in set(WORDS.split(text)) - {""}:
            # "c-1." ending a sentence, "c-1:" opening one: the id is the word without that punctuation
            for name in {word, word.strip(ID_PUNCTUATION)} - {""}:
                row = db.execute("SELECT ref FROM erased WHERE deny = ?", (self.deny_key(db, name),)).fetchone()
                if row is not None:
                    found[name] = row["ref"]
        for name, ref in found.items():  # where it stands as a whole id: c-1 leaves c-10 alone
            text = replace_ids(text, [name], f"erased:{ref}")
        return text

    @staticmethod
    def _has_erased(db: sqlite3.Connection) -> bool:
        return db.execute("SELECT 1 FROM erased LIMIT 1").fetchone() is not None

    # --- retention (console_retention_s) ---------------------------------------------------------

    def prune(self, before: datetime) -> int:
        """Forget the cases whose last verdict was decided before ``before`` (their verdicts,
        escalations, records and outcomes) and the dead letters that failed before it; blank the
        rationale of decisions made before it. Who decided what, and the audit trail, stay. The
        number of rows deleted; the write-ahead log truncated after (``secure_delete`` zeroed them)."""
        cutoff = stamp(before)
        with self.transaction() as db:
            old = [
                r["case_id"]
                for r in db.execute(
                    "SELECT case_id FROM verdicts GROUP BY case_id HAVING max(decided_at) < ?", (cutoff,)
                )
            ]
            deleted = 0
            for start in range(0, len(old), 500):
                chunk = old[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for table in ("verdicts", "escalations", "records", "outcomes", "party_letters"):
                    deleted += db.execute(f"DELETE FROM {table} WHERE case_id IN ({marks})", chunk).rowcount
            deleted += db.execute("DELETE FROM letters WHERE failed_at < ?", (cutoff,)).rowcount
            db.execute(
                "UPDATE decisions SET rationale = NULL WHERE decided_at < ? AND rationale IS NOT NULL", (cutoff,)
            )
        if deleted:
            with self._lock:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return deleted

    # --- reading for the pages -------------------------------------------------------------------

    def verdict_rows(self, chosen: CaseFilter, limit: int = 500) -> tuple[list[sqlite3.Row], int]:
        """Verdicts, newest first, with their escalation id and whether a decision was recorded; and
        how many matched in all."""
        where: list[str] = ["1 = 1"]
        args: list[str | int] = []
        for column, value in (("category", chosen.category), ("winner", chosen.winner)):
            if value:
                where.append(f"v.{column} = ?")
                args.append(value)
        if chosen.escalated is not None:
            where.append("v.escalated = ?")
            args.append(int(chosen.escalated))
        if chosen.since:
            where.append("v.decided_at >= ?")
            args.append(chosen.since)
        if chosen.until:
            where.append("v.decided_at < ?")
            args.append(chosen.until)
        if chosen.case:
            where.append("instr(lower(v.case_id), lower(?)) > 0")  # a plain substring: no LIKE wildcards
            args.append(chosen.case)
        clause = " AND ".join(where)
        total = self._rows(f"SELECT count(*) AS n FROM verdicts v WHERE {clause}", *args)[0]["n"]
        rows = self._rows(
            "SELECT v.*, e.escalation_id, (SELECT count(*) FROM decisions d WHERE d.escalation_id = e.escalation_id) "
            f"AS decisions FROM verdicts v LEFT JOIN escalations e ON e.verdict_id = v.verdict_id WHERE {clause} "
            "ORDER BY v.decided_at DESC, v.case_id LIMIT ?",
            *args,
            limit,
        )
        return rows, total

    def categories(self) -> list[str]:
        return [r["category"] for r in self._rows("SELECT DISTINCT category FROM verdicts ORDER BY category")]

    def verdicts_of(self, case_id: str) -> list[Verdict]:
        rows = self._rows("SELECT body FROM verdicts WHERE case_id = ? ORDER BY instance, decided_at", case_id)
        return [Verdict.model_validate_json(r["body"]) for r in rows]

    def record(self, case_id: str, instance: int) -> tuple[CaseFile, str] | None:
        rows = self._rows("SELECT source, body FROM records WHERE case_id = ? AND instance = ?", case_id, instance)
        return (CaseFile.model_validate_json(rows[0]["body"]), rows[0]["source"]) if rows else None

    def party_letters_of(self, case_id: str) -> list[PartyLetter]:
        """The letters the parties were sent about the case's verdicts: by instance, the buyer's first."""
        rows = self._rows("SELECT body FROM party_letters WHERE case_id = ? ORDER BY instance, party", case_id)
        return [PartyLetter.model_validate_json(r["body"]) for r in rows]

    def escalations_of(self, case_id: str) -> list[Escalation]:
        return [
            self._escalation_of(r)
            for r in self._rows("SELECT * FROM escalations WHERE case_id = ? ORDER BY instance", case_id)
        ]

    def escalation(self, escalation_id: str) -> Escalation | None:
        rows = self._rows("SELECT * FROM escalations WHERE escalation_id = ?", escalation_id)
        return self._escalation_of(rows[0]) if rows else None

    def _escalation_of(self, row: sqlite3.Row) -> Escalation:
        """The escalation as sent: the record is kept once, in ``records``."""
        record = self.record(row["case_id"], row["instance"])
        body = json.loads(row["body"])
        if record is None:
            raise StoreError(f"escalation {row['escalation_id']} has no record", kind="console_store")
        return Escalation.model_validate(body | {"case_file": record[0]})

    def escalation_ids(self, reviewed: bool | None = None, limit: int = 200) -> list[str]:
        """Escalations, oldest first (at most ``limit``): all, those with a decision, or those without."""
        having = {None: "", True: "WHERE d.n > 0", False: "WHERE coalesce(d.n, 0) = 0"}[reviewed]
        rows = self._rows(
            "SELECT e.escalation_id FROM escalations e LEFT JOIN (SELECT escalation_id, count(*) AS n "
            f"FROM decisions GROUP BY escalation_id) d USING (escalation_id) {having} "
            "ORDER BY e.raised_at, e.escalation_id LIMIT ?",
            limit,
        )
        return [r["escalation_id"] for r in rows]

    def outcomes_of(self, case_id: str) -> list[OutcomeReported]:
        """The outcomes reported for a case (the platform's jury, human panels), in the order read."""
        return [
            OutcomeReported.model_validate_json(r["body"])
            for r in self._rows("SELECT body FROM outcomes WHERE case_id = ? ORDER BY rowid", case_id)
        ]

    # --- decisions -------------------------------------------------------------------------------

    def decisions(self, escalation_id: str) -> list[Decision]:
        """Oldest first; the last is the one that stands."""
        return [
            Decision(**dict(r))
            for r in self._rows("SELECT * FROM decisions WHERE escalation_id = ? ORDER BY seq", escalation_id)
        ]

    def add_decision(
        self,
        escalation_id: str,
        case_id: str,
        winner: str,
        buyer: int,
        seller: int,
        rationale: str | None,
        reviewer: str,
        override_of: int | None,
        role: str,
    ) -> Decision:
        """Record a console decision, not yet published; its event id counts the escalation's decisions."""
        with self.transaction() as db:
            n = db.execute("SELECT count(*) AS n FROM decisions WHERE escalation_id = ?", (escalation_id,)).fetchone()[
                "n"
            ]
            cursor = db.execute(
                "INSERT INTO decisions (escalation_id, case_id, event_id, winner, buyer, seller, rationale, reviewer, "
                "decided_at, override_of, origin, role) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'console', ?)",
                (
                    escalation_id,
                    case_id,
                    f"console:{escalation_id}:{n + 1}",
                    winner,
                    buyer,
                    seller,
                    rationale,
                    reviewer,
                    stamp(datetime.now(UTC)),
                    override_of,
                    role,
                ),
            )
            row = db.execute("SELECT * FROM decisions WHERE seq = ?", (cursor.lastrowid,)).fetchone()
        return Decision(**dict(row))

    def decision(self, seq: int) -> Decision | None:
        rows = self._rows("SELECT * FROM decisions WHERE seq = ?", seq)
        return Decision(**dict(rows[0])) if rows else None

    def published(self, seq: int) -> None:
        with self.transaction() as db:
            db.execute(
                "UPDATE decisions SET published_at = coalesce(published_at, ?) WHERE seq = ?",
                (stamp(datetime.now(UTC)), seq),
            )

    # --- dead letters ----------------------------------------------------------------------------

    def letters(self) -> list[StoredLetter]:
        return [self._letter_of(r) for r in self._rows("SELECT * FROM letters ORDER BY failed_at DESC, id")]

    def letter(self, letter_id: str) -> StoredLetter | None:
        rows = self._rows("SELECT * FROM letters WHERE id = ?", letter_id)
        return self._letter_of(rows[0]) if rows else None

    @staticmethod
    def _letter_of(row: sqlite3.Row) -> StoredLetter:
        headers = tuple((k, base64.b64decode(v)) for k, v in json.loads(row["headers"]))
        return StoredLetter(
            row["id"],
            row["topic"],
            row["partition"],
            row["offset"],
            DeadLetter.model_validate_json(row["body"]),
            headers,
        )

    def replay_notes(self) -> dict[str, bytes]:
        return {r["id"]: bytes(r["note"]) for r in self._rows("SELECT id, note FROM replayed")}

    def note_replay(self, letter_id: str, note: bytes) -> None:
        """What the page's replay recorded in disputes.dlq-replayed, before the feed reads it back."""
        with self.transaction() as db:
            _put(db, "replayed", letter_id, note)

    def counts(self) -> dict[str, int]:
        tables = (
            "verdicts",
            "escalations",
            "records",
            "letters",
            "replayed",
            "outcomes",
            "decisions",
            "audit",
            "party_letters",
        )
        counted = {t: self._rows(f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in tables}
        return counted | {"skipped": int(self.meta("skipped") or 0)}
