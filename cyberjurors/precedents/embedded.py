"""``EmbeddedIndex``: the default precedent store, one SQLite database in a folder, no server.

Storage (the source of truth)
    ``precedents.sqlite3`` in the folder, in WAL mode: one row per document (its id, kind,
    category, whether it is searchable, its text, the ``Document`` as JSON, the vector as float32
    bytes, and the change sequence that last wrote it). Every upsert or delete batch is one
    transaction that takes the next change sequence (``counter.seq``) and stamps the rows it writes
    with it; a delete leaves the row's key in ``deleted`` with that sequence. A crash (a kill, a
    power cut) mid-write leaves the previous state: SQLite rolls the unfinished transaction back.
    Writers in several processes queue on SQLite's write lock (``busy_timeout``); readers never
    wait for writers.

Retrieval (derived, in each process's memory)
    BM25 by tantivy (Lucene's formula, k1=1.2 b=0.75, as Elasticsearch and the previous store),
    over one in-memory tantivy index per kind; its analyzer is the previous store's: words of 2+
    word characters, lower-cased, bm25s's English stopwords removed, Snowball English stems.
    Vectors by usearch: one HNSW graph per (kind, category), vectors quantised to int8 (cosine),
    searched exactly (a scan) while a graph holds fewer than ``EXACT_BELOW`` vectors. Hybrid takes
    the top ``max(4k, 50)`` of each side and fuses them with ``index.fuse`` (reciprocal rank); a
    side only contributes documents it matched (BM25: sharing a term with the query). Filters come
    before the top-n of each side (the category is a filter inside the BM25 query and the choice of
    graphs for the vectors), so a filtered search is not starved by other categories. Plain RRF
    has a known blind spot: a document only one retriever finds, even at rank 1 (an exact product
    code), scores 1/61 and falls below everything both retrievers rank in their top ~60.

    Cases and guidelines are apart (``kind`` is always a filter); inactive guidelines are stored
    (``get`` returns them) but never enter the in-memory indexes, so they are never searched, and
    ``count`` leaves them out.

Freshness
    Each process remembers the change sequence its in-memory indexes reflect. Before each search it
    reads ``counter.seq`` (one indexed row); when another process (or this one) wrote since, it
    reads the rows stamped after its sequence and the keys deleted after it, in one read
    transaction, and applies just those: no rebuild. tantivy makes added documents searchable at
    a commit, so a kind's index is committed lazily, by the first search of that kind after a change.

    The in-memory indexes are built when the store opens: tantivy from the texts (seconds at 100k
    documents); the HNSW graphs from the newest snapshot of them kept in the database
    (``vector_snapshot``, written by a writer once enough changes accumulated since the last),
    plus the rows changed since it; without a snapshot, from the stored vectors (HNSW insertions:
    ~15 s at 100k documents on two cores).

Concurrency
    Within a process: CPU work runs in ``asyncio.to_thread``; a state lock guards the in-memory
    indexes (searches hold it while scoring), one connection writes and another reads, each under
    a lock of its own. Embedding a batch happens before any lock is taken.

The previous store (JSON lines + numpy files + manifest) is read only by
``cyberjurors precedents migrate`` (``migrate.py``); a folder that holds one and no database
refuses to open with ``needs_migration``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import numpy as np
import tantivy
import usearch
from bm25s.stopwords import STOPWORDS_EN  # type: ignore[import-untyped]
from pydantic import ValidationError
from usearch.index import Index as VectorGraph

from ..evidence.scrub import purge_sqlite
from ..schemas import now
from .embeddings import Embedder, canonical
from .index import ENCODE_CHUNK, PrecedentIndex, candidates, category_filter, embedding_failed, fuse, problem
from .models import (
    ANY_CATEGORY,
    CATEGORIES,
    KINDS,
    Document,
    Hit,
    Kind,
    PrecedentError,
    SearchMode,
    UpsertReport,
    decided_before,
)

log = logging.getLogger("cyberjurors.precedents.embedded")

P = ParamSpec("P")
T = TypeVar("T")

FORMAT = 2  # the legacy store (manifest.json) was format 1
DB_FILE = "precedents.sqlite3"
LEGACY_MANIFEST = "manifest.json"
QUERY_CACHE = 256  # recent query embeddings kept (the pipeline searches cases, then guidelines)
EXACT_BELOW = 4096  # a graph smaller than this is scanned exactly
CONNECTIVITY, EXPANSION_ADD, EXPANSION_SEARCH = 16, 128, 128  # HNSW: M, ef at build, ef at search
VECTOR_DTYPE = "i8"
SNAPSHOT_MIN_CHANGES = 5000  # changes applied since the last vector snapshot before a writer saves one
SNAPSHOT_SHARE = 0.1  # ... and at least this share of the documents
TIE_MARGIN = 10  # hits fetched beyond n from each retriever, so that ties at the cut are broken by key
BUSY_TIMEOUT_MS = 60_000
WRITER_HEAP = 15_000_000  # tantivy's minimum arena per indexing thread
READ_CHUNK = 4096  # rows per fetch while loading
TERM_PATTERN = r"(?u)\b\w\w+\b"  # bm25s's token pattern

# every (kind, category) that has a graph of its own: cases belong to one category, guidelines
# may apply to all
PARTS: tuple[tuple[Kind, str], ...] = (
    *(("case", c) for c in CATEGORIES),
    *(("guideline", c) for c in (*CATEGORIES, ANY_CATEGORY)),
)
PART_CODES = {part: i for i, part in enumerate(PARTS)}
VECTOR_SPEC = (
    f"usearch {usearch.__version__.split('.')[0]} {VECTOR_DTYPE} cos "
    f"M={CONNECTIVITY} ef_add={EXPANSION_ADD} parts={len(PARTS)}"
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS counter (one INTEGER PRIMARY KEY CHECK (one = 1), seq INTEGER NOT NULL, store TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    key INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    category TEXT NOT NULL,
    active INTEGER NOT NULL,
    text TEXT NOT NULL,
    body TEXT NOT NULL,
    vector BLOB NOT NULL,
    seq INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS documents_seq ON documents (seq);
CREATE INDEX IF NOT EXISTS documents_filter ON documents (kind, category, active);
CREATE TABLE IF NOT EXISTS deleted (key INTEGER PRIMARY KEY, seq INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS deleted_seq ON deleted (seq);
CREATE TABLE IF NOT EXISTS vector_snapshot (part INTEGER PRIMARY KEY, seq INTEGER NOT NULL, spec TEXT NOT NULL, data BLOB NOT NULL);
"""


def _analyzer() -> tantivy.TextAnalyzer:
    """The previous store's BM25 terms, made by tantivy: bm25s's token pattern, lower case,
    bm25s's English stopwords, Snowball English stemming (the algorithm PyStemmer runs)."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(TERM_PATTERN))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.custom_stopword(list(STOPWORDS_EN)))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


_local = threading.local()


def bm25_terms(text: str) -> list[str]:
    """The terms BM25 sees for a text: lower-cased words of 2+ characters, English stopwords
    removed, Snowball-stemmed."""
    if not hasattr(_local, "analyzer"):
        _local.analyzer = _analyzer()
    return list(_local.analyzer.analyze(text))


def _corrupt(path: Path, problem: str) -> PrecedentError:
    return PrecedentError(
        "corrupt",
        f"precedent store {path}: {problem}. Restore the folder from a backup "
        "or rebuild the index (delete the folder, then re-index the precedents)",
    )


class _Words:
    """One kind's BM25 index, in memory (tantivy). Documents are keyed by the row's key."""

    def __init__(self) -> None:
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("text", stored=False, tokenizer_name="bm25", index_option="freq")
        builder.add_text_field("category", stored=False, tokenizer_name="raw", index_option="basic")
        builder.add_integer_field("key", stored=False, indexed=True, fast=True)
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema)
        self.index.register_tokenizer("bm25", _analyzer())
        # reloaded by ``commit`` only: the default (reload on commit, on a thread of tantivy's) takes
        # the same lock as an explicit reload, and a collision costs tantivy's 100 ms retry
        self.index.config_reader(reload_policy="Manual")
        self.writer = self.index.writer(heap_size=WRITER_HEAP, num_threads=1)
        self.pending = False  # changes not committed yet (not searchable)

    def put(self, key: int, category: str, text: str, replace: bool = True) -> None:
        if replace:  # a delete costs every segment a look-up at the commit: only when the key is there
            self.writer.delete_documents_by_term("key", key)
        self.writer.add_document(tantivy.Document(text=text, category=category, key=key))
        self.pending = True

    def remove(self, key: int) -> None:
        self.writer.delete_documents_by_term("key", key)
        self.pending = True

    def commit(self) -> None:
        if self.pending:
            self.writer.commit()
            self.index.reload()
            self.pending = False

    def search(self, terms: list[str], categories: tuple[str, ...] | None, n: int) -> list[int]:
        """Keys of the n best BM25 scores among documents sharing a term with the query (and in
        one of the categories), best first; equal scores in key order."""
        if not terms:
            return []
        query = tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "text", t)) for t in terms]
        )
        if categories is not None:
            admitted = tantivy.Query.term_set_query(self.schema, "category", list(categories))
            query = tantivy.Query.boolean_query(
                [
                    (tantivy.Occur.Must, tantivy.Query.const_score_query(admitted, 0.0)),
                    (tantivy.Occur.Must, query),
                ]
            )
        searcher = self.index.searcher()
        hits = searcher.search(query, n + TIE_MARGIN, count=False).hits
        keys = searcher.fast_field_values("key", [address for _, address in hits])
        ranked = sorted(zip((score for score, _ in hits), keys, strict=True), key=lambda sk: (-sk[0], sk[1]))
        return [int(key or 0) for _, key in ranked[:n]]


class _Vectors:
    """The vectors in memory: one usearch graph per part, keyed by the row's key."""

    def __init__(self, dims: int, graphs: list[VectorGraph] | None = None):
        self.dims = dims
        self.graphs = graphs or [self._graph() for _ in PARTS]
        self.where = np.full(1024, -1, np.int8)  # key -> part code, -1 when absent
        for code, graph in enumerate(self.graphs):
            if len(graph):
                self._place(np.asarray(graph.keys, dtype=np.int64), code)

    def _graph(self) -> VectorGraph:
        return VectorGraph(
            ndim=self.dims,
            metric="cos",
            dtype=VECTOR_DTYPE,
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )

    def _place(self, keys: np.ndarray, code: int) -> None:
        if len(keys) and keys.max() >= len(self.where):
            grown = np.full(max(int(keys.max()) + 1, 2 * len(self.where)), -1, np.int8)
            grown[: len(self.where)] = self.where
            self.where = grown
        self.where[keys] = code

    def kind_of(self, key: int) -> Kind | None:
        """The kind this key is searched under now (None: not in memory, e.g. an inactive guideline)."""
        code = int(self.where[key]) if key < len(self.where) else -1
        return PARTS[code][0] if code >= 0 else None

    def remove(self, keys: np.ndarray) -> None:
        keys = keys[keys < len(self.where)]
        codes = self.where[keys]
        for code in np.unique(codes[codes >= 0]):
            self.graphs[code].remove(keys[codes == code])
        self.where[keys] = -1

    def put(self, keys: np.ndarray, codes: np.ndarray, vectors: np.ndarray) -> None:
        """Add or replace: a key already present (in any part) is removed first."""
        self.remove(keys)
        for code in np.unique(codes):
            chosen = codes == code
            self.graphs[code].add(keys[chosen], vectors[chosen], threads=0 if chosen.sum() > 1000 else 1)
            self._place(keys[chosen], int(code))

    def search(self, codes: list[int], vector: np.ndarray, n: int) -> list[int]:
        found: list[tuple[float, int]] = []
        for code in codes:
            graph = self.graphs[code]
            if not len(graph):
                continue
            count = min(n + TIE_MARGIN, len(graph))
            matches = graph.search(vector, count, exact=len(graph) < EXACT_BELOW, threads=1)
            found += zip(matches.distances.tolist(), matches.keys.tolist(), strict=True)
        found.sort()
        return [int(key) for _, key in found[:n]]

    def __len__(self) -> int:
        return sum(len(g) for g in self.graphs)


class EmbeddedIndex(PrecedentIndex):
    """Hybrid BM25 + vector precedent index on SQLite. Open with ``EmbeddedIndex.open``."""

    def __init__(self, folder: Path, embedder: Embedder):
        self.folder = Path(folder)
        self.path = self.folder / DB_FILE
        self.embedder = embedder
        self.embedding_model = embedder.name
        self.dims = int(embedder.dims)
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._state = threading.RLock()
        self._words: dict[Kind, _Words] = {}
        self._vectors = _Vectors(self.dims)
        self._applied = -1  # the change sequence the in-memory indexes reflect
        self._store = ""  # the database's identity (a new one means a full reload)
        self._since_snapshot = 0
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries_lock = threading.Lock()
        self._closed = False

    # --- opening -------------------------------------------------------------------------------

    @classmethod
    async def open(
        cls, folder: Path, embedder: Embedder, create: bool = True, beside_legacy: bool = False
    ) -> EmbeddedIndex:
        """Open the store in ``folder``. A missing folder or database raises ``index_missing``
        unless ``create``; a folder holding only the previous store's files raises
        ``needs_migration``; a store built with another embedding model raises ``model_mismatch``;
        an unreadable database raises ``corrupt``. ``beside_legacy`` (the migration) creates the
        database in a folder that holds the previous store's files."""
        index = cls(folder, embedder)
        try:
            await asyncio.to_thread(index._open_sync, create, beside_legacy)
        except BaseException:
            await asyncio.to_thread(index._disconnect)
            raise
        return index

    def _open_sync(self, create: bool, beside_legacy: bool = False) -> None:
        if not self.path.exists():
            if (self.folder / LEGACY_MANIFEST).exists() and not beside_legacy:
                raise PrecedentError(
                    "needs_migration",
                    f"the precedent index at {self.folder} is in the previous format (manifest.json, "
                    "JSON lines and numpy files). Convert it once: cyberjurors precedents migrate "
                    f"--from {self.folder}",
                )
            if not create:
                why = "does not exist" if not self.folder.exists() else f"has no {DB_FILE}"
                raise PrecedentError(
                    "index_missing",
                    f"no precedent index at {self.folder}: the folder {why}. "
                    "Build it first: cyberjurors precedents build FILE|DIR",
                )
            self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self._writer = self._connect()
            self._reader = self._connect()
            with self._transaction(self._writer, immediate=True):
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        self._writer.execute(statement)
                self._writer.execute(
                    "INSERT OR IGNORE INTO counter (one, seq, store) VALUES (1, 0, ?)", (uuid.uuid4().hex,)
                )
                meta = dict(self._writer.execute("SELECT key, value FROM meta").fetchall())
                if not meta:
                    meta = {
                        "format": str(FORMAT),
                        "embedding_model": self.embedding_model,
                        "dims": str(self.dims),
                        "created_at": now().isoformat(timespec="seconds"),
                    }
                    self._writer.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
        except sqlite3.DatabaseError as err:
            raise _corrupt(self.path, f"not a readable SQLite database ({err})") from err
        self._check_meta(meta)
        self._load()

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(
            "PRAGMA synchronous = NORMAL"
        )  # in WAL mode: atomic and consistent; a power cut may lose the last commits
        db.execute("PRAGMA journal_size_limit = 67108864")
        # what a delete or an update replaces is overwritten with zeros, not left in free space: a case
        # erased from the base (`cyberjurors erase`) leaves no bytes behind in the file
        db.execute("PRAGMA secure_delete = ON")
        return db

    def _check_meta(self, meta: dict[str, str]) -> None:
        if meta.get("format") != str(FORMAT):
            raise _corrupt(self.path, f"format {meta.get('format')!r} is not the supported format {FORMAT}")
        model, dims = meta.get("embedding_model"), meta.get("dims")
        if canonical(str(model)) != canonical(self.embedding_model) or dims != str(self.dims):
            raise PrecedentError(
                "model_mismatch",
                f"the precedent index at {self.folder} holds vectors of embedding model {model!r} ({dims} dims), "
                f"but the configured embedding model is {self.embedding_model!r} ({self.dims} dims). Either set "
                f"embedding.model (CYBERJURORS_EMBEDDING__MODEL) back to {model!r}, or rebuild the index with the "
                f"new model: delete {self.folder} and re-index the precedents",
            )

    @contextlib.contextmanager
    def _transaction(self, db: sqlite3.Connection, immediate: bool = False) -> Iterator[None]:
        db.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def _disconnect(self) -> None:
        for db in (self._writer, self._reader):
            if db is not None:
                with contextlib.suppress(sqlite3.Error):
                    db.close()
        self._writer = self._reader = None

    # --- the in-memory indexes ------------------------------------------------------------------

    def _load(self) -> None:
        """Build the in-memory indexes from the database (the HNSW graphs from the newest snapshot
        when it is usable, then the changes after it)."""
        assert self._reader is not None
        with self._state, self._read_lock, self._transaction(self._reader):
            seq, store = self._reader.execute("SELECT seq, store FROM counter").fetchone()
            words: dict[Kind, _Words] = {k: _Words() for k in KINDS}
            vectors, since = self._restore_vectors(seq)
            rows = self._reader.execute("SELECT key, kind, category, text FROM documents WHERE active = 1 ORDER BY key")
            while batch := rows.fetchmany(READ_CHUNK):
                for key, kind, category, text in batch:
                    words[kind].put(key, category, text, replace=False)
            if since is None:  # no usable snapshot: every vector from its row
                self._apply_vectors(vectors, "SELECT key, kind, category, active, vector FROM documents", ())
                since_count = len(vectors)
            else:
                since_count = self._catch_up_vectors(vectors, since)
        for w in words.values():
            w.commit()
        self._words, self._vectors, self._applied, self._store = words, vectors, seq, store
        self._since_snapshot = since_count

    def _restore_vectors(self, seq: int) -> tuple[_Vectors, int | None]:
        """The graphs of the newest snapshot and the sequence it reflects, or empty graphs and None."""
        assert self._reader is not None
        rows = self._reader.execute("SELECT part, seq, spec, data FROM vector_snapshot ORDER BY part").fetchall()
        if len(rows) != len(PARTS) or {r[1] for r in rows} != {rows[0][1]} or rows[0][1] > seq:
            return _Vectors(self.dims), None
        if any(r[2] != f"{VECTOR_SPEC} dims={self.dims}" for r in rows):
            log.info("precedent store %s: the vector snapshot is of another layout; rebuilding the graphs", self.folder)
            return _Vectors(self.dims), None
        try:
            graphs = [VectorGraph.restore(bytes(r[3]), view=False) for r in rows]
        except Exception as err:  # usearch raises plain errors; the rows are the truth
            log.warning("precedent store %s: the vector snapshot cannot be read (%s); rebuilding", self.folder, err)
            return _Vectors(self.dims), None
        restored: list[VectorGraph] = []
        for g in graphs:
            if g is None or g.ndim != self.dims:
                return _Vectors(self.dims), None
            g.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # a setter at run time; restore resets it
            restored.append(g)
        return _Vectors(self.dims, restored), int(rows[0][1])

    def _catch_up_vectors(self, vectors: _Vectors, since: int) -> int:
        """Apply to ``vectors`` the rows written and deleted after ``since`` (inside a read transaction)."""
        assert self._reader is not None
        gone = [k for (k,) in self._reader.execute("SELECT key FROM deleted WHERE seq > ?", (since,))]
        if gone:
            vectors.remove(np.asarray(gone, np.int64))
        return len(gone) + self._apply_vectors(
            vectors, "SELECT key, kind, category, active, vector FROM documents WHERE seq > ?", (since,)
        )

    def _apply_vectors(self, vectors: _Vectors, sql: str, args: tuple[Any, ...]) -> int:
        assert self._reader is not None
        rows = self._reader.execute(sql, args)
        applied = 0
        while batch := rows.fetchmany(READ_CHUNK):
            applied += len(batch)
            keys = np.fromiter((r[0] for r in batch), np.int64, len(batch))
            searchable = np.fromiter((bool(r[3]) for r in batch), np.bool_, len(batch))
            vectors.remove(keys[~searchable])
            if not searchable.any():
                continue
            kept = [r for r in batch if r[3]]
            codes = np.fromiter((PART_CODES[(r[1], r[2])] for r in kept), np.int64, len(kept))
            blobs = b"".join(r[4] for r in kept)
            if len(blobs) != len(kept) * self.dims * 4:
                raise _corrupt(self.path, f"a stored vector is not {self.dims} float32 values")
            matrix = np.frombuffer(blobs, dtype="<f4").reshape(len(kept), self.dims)
            vectors.put(keys[searchable], codes, matrix)
        return applied

    def _refresh(self) -> None:
        """Bring the in-memory indexes up to the database: one read of the counter, and when it
        moved, the rows changed since (another process's writes or this one's)."""
        assert self._reader is not None
        ((seq, store),) = self._read("SELECT seq, store FROM counter")
        if seq == self._applied and store == self._store:
            return
        with self._state:
            if store != self._store or seq < self._applied:  # another database at this path
                log.info("precedent store %s was replaced; reloading", self.folder)
                self._load()
                return
            if seq == self._applied:
                return
            with self._read_lock, self._transaction(self._reader):
                seq = self._reader.execute("SELECT seq FROM counter").fetchone()[0]
                since = self._applied
                gone = [k for (k,) in self._reader.execute("SELECT key FROM deleted WHERE seq > ?", (since,))]
                changed = self._reader.execute(
                    "SELECT key, kind, category, active, text, vector FROM documents WHERE seq > ? ORDER BY seq, key",
                    (since,),
                ).fetchall()
            for key in gone:
                held = self._vectors.kind_of(key)
                if held is not None:
                    self._words[held].remove(key)
            if gone:
                self._vectors.remove(np.asarray(gone, np.int64))
            for key, kind, category, active, text, _ in changed:
                held = self._vectors.kind_of(key)  # where this process has it now, if anywhere
                if held is not None and (held != kind or not active):
                    self._words[held].remove(key)
                if active:
                    self._words[kind].put(key, category, text, replace=held == kind)
            for start in range(0, len(changed), READ_CHUNK):
                chunk = changed[start : start + READ_CHUNK]
                keys = np.fromiter((r[0] for r in chunk), np.int64, len(chunk))
                searchable = np.fromiter((bool(r[3]) for r in chunk), np.bool_, len(chunk))
                self._vectors.remove(keys[~searchable])
                kept = [r for r in chunk if r[3]]
                if kept:
                    codes = np.fromiter((PART_CODES[(r[1], r[2])] for r in kept), np.int64, len(kept))
                    matrix = np.frombuffer(b"".join(r[5] for r in kept), dtype="<f4").reshape(len(kept), self.dims)
                    self._vectors.put(keys[searchable], codes, matrix)
            self._applied = seq
            self._since_snapshot += len(gone) + len(changed)

    def _maybe_snapshot(self) -> None:
        """Save the HNSW graphs when enough changed since the last snapshot (so that opening does
        not rebuild them). Called by writers; one transaction, skipped if a newer one exists."""
        assert self._writer is not None
        with self._state:
            if self._since_snapshot < max(SNAPSHOT_MIN_CHANGES, SNAPSHOT_SHARE * len(self._vectors)):
                return
            seq = self._applied
            blobs = [bytes(graph.save() or b"") for graph in self._vectors.graphs]
            self._since_snapshot = 0
        spec = f"{VECTOR_SPEC} dims={self.dims}"
        try:
            with self._write_lock, self._transaction(self._writer, immediate=True):
                newest = self._writer.execute("SELECT max(seq) FROM vector_snapshot").fetchone()[0]
                if newest is not None and newest >= seq:
                    return
                self._writer.execute("DELETE FROM vector_snapshot")
                self._writer.executemany(
                    "INSERT INTO vector_snapshot (part, seq, spec, data) VALUES (?, ?, ?, ?)",
                    [(code, seq, spec, blob) for code, blob in enumerate(blobs)],
                )
        except sqlite3.Error as err:  # the write it follows is committed: a snapshot is only a shortcut
            log.warning("precedent store %s: the vector snapshot was not saved (%s)", self.folder, err)
            return
        log.info("precedent store %s: vector snapshot saved at change %d", self.folder, seq)

    # --- the PrecedentIndex protocol ------------------------------------------------------------

    async def upsert(self, documents: Sequence[Document]) -> UpsertReport:
        """Add or replace documents by id (re-running a build is idempotent): one transaction."""
        self._check_open()
        report = UpsertReport()
        latest: dict[str, Document] = {}
        for doc in documents:  # the last of duplicate ids in one batch wins
            latest.pop(doc.id, None)
            latest[doc.id] = doc
        valid: list[Document] = []
        for doc in latest.values():
            refused = problem(doc)
            if refused:
                report.failed[doc.id] = refused
            else:
                valid.append(doc)
        encoded: list[tuple[Document, np.ndarray]] = []
        for start in range(0, len(valid), ENCODE_CHUNK):
            chunk = valid[start : start + ENCODE_CHUNK]
            try:
                vectors = await asyncio.to_thread(self._encode, [d.text for d in chunk])
            except Exception as err:
                for d in chunk:
                    report.failed[d.id] = embedding_failed(err)
                continue
            encoded += zip(chunk, vectors, strict=True)
        if encoded:
            await asyncio.to_thread(self.write, encoded)
        report.indexed = [d.id for d, _ in encoded]
        return report

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.dims):
            raise ValueError(f"embedder returned shape {vectors.shape}, expected {(len(texts), self.dims)}")
        if not np.isfinite(vectors).all():
            raise ValueError("embedder returned non-finite values")
        return vectors

    def write(self, encoded: Sequence[tuple[Document, np.ndarray]]) -> None:
        """Write documents with their vectors (already embedded, by this store's model) in one
        transaction, then bring this process's indexes up to date. ``upsert`` embeds and calls
        this; the migration calls it with the previous store's vectors."""
        self._check_open()
        rows = [
            (
                doc.id,
                doc.kind,
                doc.category,
                int(doc.keywords.get("active", ["true"]) != ["false"]),
                doc.text,
                doc.model_dump_json(),
                np.asarray(vector, dtype="<f4").tobytes(),
            )
            for doc, vector in encoded
        ]
        assert self._writer is not None
        with self._write_lock, self._transaction(self._writer, immediate=True):
            seq = self._writer.execute("UPDATE counter SET seq = seq + 1 RETURNING seq").fetchone()[0]
            self._writer.executemany(
                "INSERT INTO documents (id, kind, category, active, text, body, vector, seq) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET kind = excluded.kind, "
                "category = excluded.category, active = excluded.active, text = excluded.text, "
                "body = excluded.body, vector = excluded.vector, seq = excluded.seq",
                [(*row, seq) for row in rows],
            )
        self._refresh()
        self._maybe_snapshot()

    def stored(self, ids: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """id -> (the Document's JSON, the vector's float32 bytes) as stored, for the ids present."""
        self._check_open()
        return {doc_id: (body, bytes(vector)) for doc_id, body, vector in self._by_id("id, body, vector", ids)}

    def _by_id(self, columns: str, ids: Sequence[str]) -> list[Any]:
        """The ``columns`` of the stored documents with these ids (each once), 500 ids a query."""
        unique = list(dict.fromkeys(ids))
        rows: list[Any] = []
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            rows += self._read(f"SELECT {columns} FROM documents WHERE id IN ({','.join('?' * len(chunk))})", chunk)
        return rows

    def _read(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        """The rows of a query on the reader connection (one thread at a time uses it)."""
        assert self._reader is not None
        with self._read_lock:
            return self._reader.execute(sql, args).fetchall()

    async def _off_loop(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``work`` on a thread (SQLite and the in-memory indexes block), on an open index."""
        self._check_open()
        return await asyncio.to_thread(work, *args, **kwargs)

    async def ranked(
        self, text: str, kind: Kind, category: str | None, k: int, mode: SearchMode, vector: np.ndarray | None
    ) -> list[Hit]:
        self._check_open()
        if vector is None and mode != "bm25":
            vector = await asyncio.to_thread(self.query_vector, text)
        return await asyncio.to_thread(self._search, text, vector, kind, category, k, mode)

    def query_vector(self, text: str) -> np.ndarray:
        """The query's embedding, from a small LRU cache (the pipeline searches cases and then
        guidelines with the same text)."""
        with self._queries_lock:
            if text in self._queries:
                self._queries.move_to_end(text)
                return self._queries[text]
        vector = self._encode([text])[0]
        with self._queries_lock:
            self._queries[text] = vector
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def _search(
        self, text: str, vector: np.ndarray | None, kind: Kind, category: str | None, k: int, mode: SearchMode
    ) -> list[Hit]:
        self._check_open()
        self._refresh()
        n = k if mode != "hybrid" else candidates(k)
        admitted = category_filter(category, kind)
        found: dict[str, list[int]] = {}
        with self._state:
            if mode in ("hybrid", "bm25"):
                words = self._words[kind]
                words.commit()
                found["bm25"] = words.search(sorted(set(bm25_terms(text))), admitted, n)
            if mode in ("hybrid", "vector"):
                codes = [PART_CODES[(kind, c)] for c in (admitted or [c for kd, c in PARTS if kd == kind])]
                assert vector is not None
                found["vector"] = self._vectors.search(codes, vector, n)
        keys = list(dict.fromkeys(key for ranked in found.values() for key in ranked))
        if not keys:
            return []
        stored = self._rows(keys)  # key -> (id, body, vector); a row deleted meanwhile is left out
        fused = fuse({name: [stored[key][0] for key in ranked if key in stored] for name, ranked in found.items()})
        rows = {doc_id: (body, vector) for doc_id, body, vector in stored.values()}
        return [
            Hit(
                id=doc_id,
                kind=kind,
                score=score,
                rank=rank,
                sources=sources,
                document=self._parse(rows[doc_id][0], doc_id),
                vector=rows[doc_id][1],
            )
            for rank, (doc_id, score, sources) in enumerate(fused[:k], 1)
        ]

    def _rows(self, keys: list[int]) -> dict[int, tuple[str, str, bytes]]:
        rows = self._read(
            f"SELECT key, id, body, vector FROM documents WHERE key IN ({','.join('?' * len(keys))})", keys
        )
        return {key: (doc_id, body, bytes(vector)) for key, doc_id, body, vector in rows}

    def _parse(self, body: str, doc_id: str) -> Document:
        try:
            return Document.model_validate_json(body)
        except ValidationError as err:
            raise _corrupt(self.path, f"stored document {doc_id!r} does not validate ({err})") from err

    async def get(self, ids: Sequence[str]) -> list[Document]:
        """The stored documents for these ids, in the order asked; unknown ids are skipped."""
        return await self._off_loop(self._get, list(ids))

    def _get(self, ids: list[str]) -> list[Document]:
        found: dict[str, str] = dict(self._by_id("id, body", ids))
        return [self._parse(found[doc_id], doc_id) for doc_id in ids if doc_id in found]

    async def delete(self, ids: Sequence[str]) -> int:
        """Remove documents by id; returns how many existed. One transaction."""
        return await self._off_loop(self._delete, list(dict.fromkeys(ids)))

    def _delete(self, ids: list[str]) -> int:
        assert self._writer is not None
        removed = 0
        with self._write_lock, self._transaction(self._writer, immediate=True):
            keys: list[int] = []
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                keys += [
                    k
                    for (k,) in self._writer.execute(
                        f"SELECT key FROM documents WHERE id IN ({','.join('?' * len(chunk))})", chunk
                    )
                ]
            if keys:
                seq = self._writer.execute("UPDATE counter SET seq = seq + 1 RETURNING seq").fetchone()[0]
                self._writer.executemany("DELETE FROM documents WHERE key = ?", [(k,) for k in keys])
                self._writer.executemany(
                    "INSERT OR REPLACE INTO deleted (key, seq) VALUES (?, ?)", [(k, seq) for k in keys]
                )
                removed = len(keys)
        if removed:
            self._refresh()
            self._maybe_snapshot()
        return removed

    # --- erasure (`cyberjurors erase`, precedents/erasure.py) -----------------------------------

    async def guidelines_citing(self, case_id: str) -> list[Document]:
        """Every guideline, retired ones too, whose provenance names the case (its supporting cases,
        or its history)."""
        return await self._off_loop(self._citing, case_id)

    def _citing(self, case_id: str) -> list[Document]:
        rows = self._read("SELECT id, body FROM documents WHERE kind = 'guideline' AND instr(body, ?) > 0", (case_id,))
        docs = [self._parse(body, doc_id) for doc_id, body in rows]
        return [d for d in docs if d.guideline is not None and d.guideline.cites(case_id)]

    async def cases_decided_before(self, before: datetime) -> list[str]:
        """The ids of the historical cases decided before ``before`` (precedent_case_retention_s)."""
        return await self._off_loop(self._decided_before, before)

    def _decided_before(self, before: datetime) -> list[str]:
        rows = self._read(
            "SELECT json_extract(body, '$.case.case_id'), json_extract(body, '$.case.decided_at') "
            "FROM documents WHERE kind = 'case' AND json_extract(body, '$.case.decided_at') IS NOT NULL"
        )
        return sorted(case_id for case_id, at in rows if decided_before(at, before))

    async def rewrite(self, documents: Sequence[Document]) -> None:
        """Replace stored documents whose text is unchanged (their provenance rewritten): the stored
        vectors are kept, nothing is embedded again."""
        self._check_open()
        if documents:
            await asyncio.to_thread(self._rewrite, list(documents))

    def _rewrite(self, documents: list[Document]) -> None:
        vectors = self.stored([d.id for d in documents])
        self.write([(d, np.frombuffer(vectors[d.id][1], dtype="<f4")) for d in documents if d.id in vectors])

    async def purge(self, needles: Sequence[str]) -> list[str]:
        """After an erasure's deletes, the bytes out of the files: the vector snapshot dropped (its
        graphs keep the vectors of removed documents; the next opening rebuilds them from the rows),
        the write-ahead log checkpointed and truncated, and, should a needle (the case id) still be
        found in the database file (free pages from deletions made before secure_delete was on), a
        VACUUM. What could not be done, as notes (an empty list: done)."""
        return await self._off_loop(self._purge, list(needles))

    def _purge(self, needles: list[str]) -> list[str]:
        assert self._writer is not None
        with self._write_lock:
            self._writer.execute("DELETE FROM vector_snapshot")
            return purge_sqlite(self._writer, self.path, needles)

    async def counted(self, kind: Kind, category: str | None) -> int:
        return await self._off_loop(self._count, kind, category)

    def _count(self, kind: Kind, category: str | None) -> int:
        admitted = category_filter(category, kind)
        sql, args = "SELECT count(*) FROM documents WHERE kind = ? AND active = 1", [str(kind)]
        if admitted is not None:
            sql += f" AND category IN ({','.join('?' * len(admitted))})"
            args += admitted
        return int(self._read(sql, args)[0][0])

    async def close(self) -> None:
        """Every write is committed when it returns, so closing only drops the in-memory indexes."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._write_lock, self._read_lock, self._state:
            self._closed = True
            self._words, self._vectors = {}, _Vectors(self.dims)
            self._disconnect()

    def _check_open(self) -> None:
        if self._closed:
            raise PrecedentError("index_missing", f"the precedent index at {self.folder} is closed")

    def __repr__(self) -> str:
        return f"EmbeddedIndex({str(self.folder)!r}, model={self.embedding_model!r}, change={self._applied})"
