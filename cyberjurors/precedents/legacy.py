"""``LegacyIndex``: the previous embedded precedent store (format 1), kept so that
``cyberjurors precedents migrate`` can read it (``migrate.py``); workers open ``embedded.EmbeddedIndex``.

What follows is how it worked when it was the default.

Retrieval
    BM25 by ``bm25s`` (Lucene's formula, k1=1.2 b=0.75 like Elasticsearch; its tokenizer with
    English stopwords, Snowball stemming when PyStemmer happens to be installed) and exact cosine
    over a float32 numpy matrix (the embeddings are normalised, so a dot product). Hybrid takes the
    top ``max(4k, 50)`` of each side and fuses them with ``index.fuse`` (reciprocal rank); a side
    only contributes documents it actually matched (BM25 score > 0). Filters are applied before the
    top-n of each side, so a filtered search is not starved by other categories. Plain RRF has
    a known blind spot: a document only one retriever finds, even at rank 1 (an exact product
    code), scores 1/61 and falls below everything both retrievers rank in their top ~60.

    Cases and guidelines live in separate parts (``kind`` is always a filter); inactive guidelines
    stay stored (``get`` returns them) but are never searched or counted.

Cost (figures in docs/precedents.md)
    Exact vector search is one matrix-vector product over the part's rows: no approximate index to
    build or tune, and fast enough at the sizes a platform's precedent base reaches. bm25s cannot
    add documents to a built index, so an upsert/delete marks its part dirty and the next search
    of that part rebuilds the BM25 matrix from cached token ids (tokenising happens once per
    document, at upsert or open). A steady trickle of single upserts between searches pays that
    rebuild on the next search each time; batch writes when you can.

Files (all under the folder)
    manifest.json                 format, embedding model and dims, generation, per part: count,
                                  and per file its name, size and sha256. The commit point.
    case.<gen>.jsonl, guideline.<gen>.jsonl   one ``Document`` JSON per line, row order
    case.<gen>.npy, guideline.<gen>.npy       (rows, dims) float32, same row order
    .lock                         advisory lock (flock): exclusive while writing, shared while loading

    Every upsert/delete batch rewrites the changed part's two files under a new generation number
    (temp file, fsync, os.replace) and then replaces the manifest, so a crash leaves either the
    old or the new index, never a mix; files of the previous generation are deleted afterwards.
    The rewrite is O(part size), the price of never leaving a half-written part.

    The BM25 part is not persisted: it is rebuilt from the documents on open (checksums, parsing,
    tokenising, BM25), so a stemmer or bm25s upgrade never meets a stale index.

Concurrency
    Within a process: CPU work runs in ``asyncio.to_thread``; a state lock guards the in-memory
    index (searches hold it only while scoring), a write lock serialises upserts/deletes and their
    saves. Embedding a batch happens before either lock is taken. Across processes: writers take an
    exclusive flock and, if another process saved since this one loaded, reload before applying
    their change (no lost updates); searches notice a newer manifest (one stat per search) and
    reload. Each process holds the whole index in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import logging
import os
import threading
import uuid
from array import array
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bm25s
import numpy as np
from pydantic import ValidationError

from ..schemas import now
from .embeddings import Embedder, canonical
from .index import category_filter, check_query, fuse, given_vector
from .models import ANY_CATEGORY, CATEGORIES, KINDS, Document, Hit, Kind, PrecedentError, SearchMode, UpsertReport

try:  # advisory file locks; absent on Windows, where a single process per folder is assumed
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("cyberjurors.precedents.legacy")
logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s sets DEBUG on import: a line per BM25 build

FORMAT = 1
MANIFEST = "manifest.json"
LOCK_FILE = ".lock"
CATEGORY_CODES = {c: i for i, c in enumerate((*CATEGORIES, ANY_CATEGORY))}
BM25_K1, BM25_B = 1.2, 0.75  # Elasticsearch's defaults, so both backends rank alike
STOPWORDS = "en"
MIN_CANDIDATES = 50  # per retriever in hybrid mode: max(4k, MIN_CANDIDATES)
ENCODE_CHUNK = 256  # texts per embedder call at upsert (failures are reported per chunk)
QUERY_CACHE = 256  # recent query embeddings kept (the pipeline searches cases, then guidelines)


def _stemmer() -> Any | None:
    """Snowball English if PyStemmer is installed (it is optional), else no stemming."""
    try:
        import Stemmer  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


STEMMER_NAME = "snowball-english" if _stemmer() is not None else None
_local = threading.local()  # PyStemmer objects are not thread-safe: one per searching thread


def bm25_terms(text: str) -> list[str]:
    """The terms BM25 sees for a text: lower-cased words of 2+ characters, English stopwords
    removed, stemmed when PyStemmer is installed."""
    if not hasattr(_local, "stemmer"):
        _local.stemmer = _stemmer()
    tokens = bm25s.tokenize(
        [text], lower=True, stopwords=STOPWORDS, stemmer=_local.stemmer, return_ids=False, show_progress=False
    )
    return [t for t in tokens[0] if t]


def _corrupt(what: str, problem: str) -> PrecedentError:
    return PrecedentError(
        "corrupt",
        f"precedent index file {what}: {problem}. Restore the folder from a backup "
        "or rebuild the index (delete the folder, then re-index the precedents)",
    )


class _Grow:
    """A numpy array with spare rows, so appends are amortised O(1)."""

    def __init__(self, shape_tail: tuple[int, ...], dtype: Any, data: np.ndarray | None = None):
        self.n = 0 if data is None else len(data)
        self.buf = np.zeros((max(self.n, 16), *shape_tail), dtype=dtype)
        if data is not None:
            self.buf[: self.n] = data

    @property
    def view(self) -> np.ndarray:
        return self.buf[: self.n]

    def append(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.buf):
            bigger = np.zeros((max(need, 2 * len(self.buf)), *self.buf.shape[1:]), dtype=self.buf.dtype)
            bigger[: self.n] = self.buf[: self.n]
            self.buf = bigger
        self.buf[self.n : need] = values
        self.n = need

    def pop_into(self, row: int) -> None:
        """Move the last row into ``row`` and drop the last row."""
        self.n -= 1
        if row != self.n:
            self.buf[row] = self.buf[self.n]


@dataclass
class _Part:
    """One kind's documents. Row i of every field is the same document; a delete moves the last
    row into the freed slot."""

    kind: Kind
    dims: int
    ids: list[str] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)  # the Document as stored (JSON), parsed on demand
    rows: dict[str, int] = field(default_factory=dict)
    tokens: list[array] = field(default_factory=list)  # bm25s token ids per row
    vectors: _Grow = None  # type: ignore[assignment]
    category: _Grow = None  # type: ignore[assignment]
    active: _Grow = None  # type: ignore[assignment]
    tokenizer: bm25s.tokenization.Tokenizer = None
    vocab: dict[str, int] = field(default_factory=dict)  # tokenizer vocabulary as of the last applied change
    bm25: bm25s.BM25 | None = None
    dirty: bool = True  # BM25 lags the documents
    unsaved: bool = False  # files lag memory
    files: dict[str, Any] = field(default_factory=dict)  # this part's manifest entry

    def __post_init__(self) -> None:
        self.vectors = self.vectors or _Grow((self.dims,), np.float32)
        self.category = self.category or _Grow((), np.int8)
        self.active = self.active or _Grow((), np.bool_)
        self.tokenizer = self.tokenizer or bm25s.tokenization.Tokenizer(stopwords=STOPWORDS, stemmer=_stemmer())

    def __len__(self) -> int:
        return len(self.ids)

    def tokenize(self, texts: list[str]) -> list[array]:
        ids = self.tokenizer.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
        return [array("i", doc) for doc in ids]

    def put(self, doc_id: str, line: bytes, vector: np.ndarray, category: int, active: bool, tokens: array) -> None:
        row = self.rows.get(doc_id)
        if row is None:
            self.rows[doc_id] = len(self.ids)
            self.ids.append(doc_id)
            self.lines.append(line)
            self.tokens.append(tokens)
            self.vectors.append(vector[None, :])
            self.category.append(np.array([category], np.int8))
            self.active.append(np.array([active]))
        else:
            self.lines[row], self.tokens[row] = line, tokens
            self.vectors.buf[row], self.category.buf[row], self.active.buf[row] = vector, category, active
        self.dirty = self.unsaved = True

    def remove(self, doc_id: str) -> bool:
        row = self.rows.pop(doc_id, None)
        if row is None:
            return False
        last = len(self.ids) - 1
        for seq in (self.ids, self.lines, self.tokens):
            _pop_into(seq, row)
        for grow in (self.vectors, self.category, self.active):
            grow.pop_into(row)
        if row != last:
            self.rows[self.ids[row]] = row
        self.dirty = self.unsaved = True
        return True

    def searchable(self, category: str | None) -> np.ndarray | None:
        """Row mask for a category filter and active guidelines; None when every row qualifies."""
        mask = None
        admitted = category_filter(category, self.kind)
        if admitted is not None:
            mask = np.isin(self.category.view, [CATEGORY_CODES[c] for c in admitted])
        if self.kind == "guideline":
            mask = self.active.view.copy() if mask is None else mask & self.active.view
        return mask

    def ensure_bm25(self) -> bm25s.BM25 | None:
        if self.dirty:
            if self.ids:
                bm25 = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
                bm25.index((list(self.tokens), dict(self.vocab)), show_progress=False)
                self.bm25 = bm25
            else:
                self.bm25 = None
            self.dirty = False
        return self.bm25


def _top(scores: np.ndarray, n: int, keep: np.ndarray) -> list[int]:
    """Rows of the n best scores among rows where keep is true, best first (ties: lower row)."""
    candidates = np.flatnonzero(keep)
    if len(candidates) == 0:
        return []
    sub = scores[candidates]
    if len(sub) > n:
        part = np.argpartition(-sub, n - 1)[:n]
        candidates, sub = candidates[part], sub[part]
    order = np.lexsort((candidates, -sub))
    return candidates[order].tolist()


class _HashingWriter:
    """A write-only file wrapper that hashes and counts what passes through."""

    def __init__(self, f: io.BufferedWriter):
        self.f, self.sha, self.size = f, hashlib.sha256(), 0

    def write(self, data: bytes | memoryview) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.f.write(data)


class LegacyIndex:
    """Hybrid BM25 + vector precedent index in a local folder. Open with ``LegacyIndex.open``."""

    def __init__(self, folder: Path, embedder: Embedder):
        self.folder = Path(folder)
        self.embedder = embedder
        self.embedding_model = embedder.name
        self.dims = int(embedder.dims)
        self._parts: dict[Kind, _Part] = {k: _Part(k, self.dims) for k in KINDS}
        self._generation = 0
        self._loaded_stamp: tuple[int, int, int] | None = None  # manifest (inode, mtime_ns, size) as loaded
        self._unloadable: tuple[int, int, int] | None = None  # a newer manifest that failed to load
        self._state = threading.RLock()
        self._write = threading.Lock()
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._queries_lock = threading.Lock()
        self._closed = False

    # --- opening -------------------------------------------------------------------------------

    @classmethod
    async def open(cls, folder: Path, embedder: Embedder, create: bool = True) -> LegacyIndex:
        """Open the index in ``folder``. A missing folder or manifest raises ``index_missing``
        unless ``create``; an index built with another embedding model raises ``model_mismatch``;
        unreadable or inconsistent files raise ``corrupt``."""
        index = cls(folder, embedder)
        await asyncio.to_thread(index._open_sync, create)
        return index

    def _open_sync(self, create: bool) -> None:
        manifest = self.folder / MANIFEST
        if not manifest.exists():
            if not create:
                why = "does not exist" if not self.folder.exists() else f"has no {MANIFEST}"
                raise PrecedentError(
                    "index_missing",
                    f"no precedent index at {self.folder}: the folder {why}. "
                    "Build it first: cyberjurors precedents build FILE|DIR",
                )
            self.folder.mkdir(parents=True, exist_ok=True)
            with self._flock(exclusive=True):
                if not manifest.exists():  # another process may have created it meanwhile
                    for part in self._parts.values():
                        part.unsaved = True
                    self._save_locked()
                    return
        with self._write:
            self._reload()
        for part in self._parts.values():  # build BM25 now rather than on the first search
            with self._state:
                part.ensure_bm25()

    def _manifest_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.folder / MANIFEST)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size

    @contextlib.contextmanager
    def _flock(self, exclusive: bool) -> Iterator[None]:
        if fcntl is None:
            yield
            return
        fd = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _reload(self, flocked: bool = False) -> None:
        """Load the folder's current state into memory (caller holds the write lock, and the
        exclusive flock if ``flocked``: a second flock from this process would wait on it)."""
        if not self.folder.exists():
            raise PrecedentError("index_missing", f"no precedent index at {self.folder}: the folder does not exist")
        with contextlib.nullcontext() if flocked else self._flock(exclusive=False):
            stamp = self._manifest_stamp()
            if stamp is None:
                raise PrecedentError("index_missing", f"no precedent index at {self.folder}: no {MANIFEST}")
            manifest = self._read_manifest()
            parts = {kind: self._load_part(kind, manifest["parts"][kind]) for kind in KINDS}
        with self._state:
            self._parts, self._generation, self._loaded_stamp = parts, manifest["generation"], stamp

    def _read_manifest(self) -> dict[str, Any]:
        path = self.folder / MANIFEST
        try:
            manifest = json.loads(path.read_bytes())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise _corrupt(str(path), f"unreadable or not valid JSON ({err})") from err
        if not isinstance(manifest, dict):
            raise _corrupt(str(path), "not a JSON object")
        if manifest.get("format") != FORMAT:
            raise _corrupt(str(path), f"format {manifest.get('format')!r} is not the supported format {FORMAT}")
        model, dims = manifest.get("embedding_model"), manifest.get("dims")
        if canonical(str(model)) != canonical(self.embedding_model) or dims != self.dims:
            raise PrecedentError(
                "model_mismatch",
                f"the precedent index at {self.folder} holds vectors of embedding model {model!r} ({dims} dims), "
                f"but the configured embedding model is {self.embedding_model!r} ({self.dims} dims). Either set "
                f"embedding_model (CYBERJURORS_EMBEDDING_MODEL) back to {model!r}, or rebuild the index with the "
                f"new model: delete {self.folder} and re-index the precedents",
            )
        try:
            generation = int(manifest["generation"])
            for kind in KINDS:
                entry = manifest["parts"][kind]
                int(entry["count"]), entry["documents"]["file"], entry["vectors"]["file"]
        except (KeyError, TypeError, ValueError) as err:
            raise _corrupt(str(path), f"missing or malformed field ({err!r})") from err
        manifest["generation"] = generation
        return manifest

    def _read_checked(self, entry: dict[str, Any]) -> tuple[str, bytes]:
        name = str(entry["file"])
        if Path(name).name != name:
            raise _corrupt(MANIFEST, f"file name {name!r} is not a plain name")
        path = self.folder / name
        try:
            data = path.read_bytes()
        except FileNotFoundError as err:
            raise _corrupt(str(path), "missing") from err
        except OSError as err:
            raise _corrupt(str(path), f"unreadable ({err})") from err
        if len(data) != entry.get("bytes"):
            raise _corrupt(
                str(path),
                f"{len(data)} bytes on disk but the manifest says {entry.get('bytes')} (truncated or overwritten)",
            )
        if hashlib.sha256(data).hexdigest() != entry.get("sha256"):
            raise _corrupt(str(path), "sha256 checksum does not match the manifest")
        return str(path), data

    def _load_part(self, kind: Kind, entry: dict[str, Any]) -> _Part:
        count = int(entry["count"])
        doc_path, doc_data = self._read_checked(entry["documents"])
        vec_path, vec_data = self._read_checked(entry["vectors"])

        lines = doc_data.splitlines()
        if len(lines) != count:
            raise _corrupt(doc_path, f"{len(lines)} documents but the manifest says {count}")
        try:
            vectors = np.load(io.BytesIO(vec_data), allow_pickle=False)
        except (ValueError, TypeError, EOFError, OSError) as err:
            raise _corrupt(vec_path, f"not a readable .npy array ({err})") from err
        if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape[1] != self.dims:
            raise _corrupt(
                vec_path, f"expected a float32 array (rows, {self.dims}), found {vectors.dtype} {vectors.shape}"
            )
        if len(vectors) != len(lines):
            raise _corrupt(vec_path, f"{len(vectors)} vector rows but {doc_path} has {len(lines)} documents")

        part = _Part(kind, self.dims, vectors=_Grow((self.dims,), np.float32, vectors))
        del vectors
        texts, categories, actives = [], [], []
        for number, line in enumerate(lines, 1):
            try:
                doc = json.loads(line)
                doc_id, text, category = doc["id"], doc["text"], doc["category"]
                active = doc.get("keywords", {}).get("active", ["true"]) != ["false"]
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                raise _corrupt(doc_path, f"line {number} is not a stored document ({err!r})") from err
            if doc.get("kind") != kind or not isinstance(doc_id, str) or category not in CATEGORY_CODES:
                raise _corrupt(
                    doc_path,
                    f"line {number} has kind {doc.get('kind')!r} / category {category!r}, "
                    f"expected a {kind} of a known category",
                )
            if doc_id in part.rows:
                raise _corrupt(doc_path, f"document {doc_id!r} appears twice")
            part.rows[doc_id] = len(part.ids)
            part.ids.append(doc_id)
            texts.append(text)
            categories.append(CATEGORY_CODES[category])
            actives.append(active)
        part.lines = lines
        part.category = _Grow((), np.int8, np.array(categories, np.int8))
        part.active = _Grow((), np.bool_, np.array(actives, np.bool_))
        part.tokens = part.tokenize(texts)
        part.vocab = dict(part.tokenizer.get_vocab_dict())
        part.files = entry
        return part

    def _refresh_if_stale(self) -> None:
        """Reload when another process saved since this one loaded (one stat per call). If what
        it saved cannot be loaded, keep answering from memory (a writer would refuse to write
        over it) and say so once per bad version."""
        stamp = self._manifest_stamp()
        if stamp == self._loaded_stamp or stamp == self._unloadable:
            return
        with self._write:
            stamp = self._manifest_stamp()
            if stamp == self._loaded_stamp or stamp == self._unloadable:
                return
            log.info("precedent index %s changed on disk; reloading", self.folder)
            try:
                self._reload()
            except PrecedentError as err:
                self._unloadable = stamp
                log.warning(
                    "precedent index %s changed on disk but cannot be loaded (%s: %s); "
                    "searching the version loaded before",
                    self.folder,
                    err.kind,
                    err,
                )

    # --- saving --------------------------------------------------------------------------------

    def _save_locked(self) -> None:
        """Write the unsaved parts under a new generation and commit with the manifest. Caller
        holds the write lock and the exclusive flock; readers in this process may run meanwhile
        (only writers change the parts' rows)."""
        generation = self._generation + 1
        written: list[Path] = []
        old_files: list[str] = []
        try:
            entries = {}
            for kind, part in self._parts.items():
                if not part.unsaved and part.files:
                    entries[kind] = part.files
                    continue
                with self._state:  # a consistent snapshot of the rows (cheap: references)
                    lines, vectors = list(part.lines), part.vectors.view
                doc_entry = self._write_file(
                    f"{kind}.{generation:06d}.jsonl", lambda w, lines=lines: _write_lines(w, lines)
                )
                written.append(self.folder / doc_entry["file"])
                vec_entry = self._write_file(
                    f"{kind}.{generation:06d}.npy",
                    lambda w, vectors=vectors: np.lib.format.write_array(w, vectors, allow_pickle=False),
                )
                written.append(self.folder / vec_entry["file"])
                vec_entry.update(shape=[len(lines), self.dims], dtype="float32")
                entries[kind] = {"count": len(lines), "documents": doc_entry, "vectors": vec_entry}
                old_files += [part.files[f]["file"] for f in ("documents", "vectors") if part.files]
            manifest = {
                "format": FORMAT,
                "embedding_model": self.embedding_model,
                "dims": self.dims,
                "generation": generation,
                "revision": uuid.uuid4().hex,
                "saved_at": now().isoformat(timespec="seconds"),
                "bm25": {
                    "library": f"bm25s {bm25s.__version__}",
                    "k1": BM25_K1,
                    "b": BM25_B,
                    "stopwords": STOPWORDS,
                    "stemmer": STEMMER_NAME,
                    "persisted": False,
                },
                "parts": entries,
            }
            self._write_file(MANIFEST, lambda w: w.write(json.dumps(manifest, indent=1).encode()), final=MANIFEST)
        except OSError as err:
            for path in written:
                with contextlib.suppress(OSError):
                    path.unlink()
            raise PrecedentError(
                "bulk_failed",
                f"saving the precedent index to {self.folder} failed ({err}); "
                "the change is in memory and the next successful save writes "
                "it",
            ) from err
        _fsync_dir(self.folder)
        with self._state:
            for kind, part in self._parts.items():
                if part.files is not entries[kind]:
                    part.files, part.unsaved = entries[kind], False
            self._generation, self._loaded_stamp = generation, self._manifest_stamp()
        for name in old_files:
            with contextlib.suppress(OSError):
                (self.folder / name).unlink()

    def _write_file(self, name: str, write: Any, final: str | None = None) -> dict[str, Any]:
        tmp = self.folder / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with open(tmp, "wb") as f:
                writer = _HashingWriter(f)
                write(writer)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.folder / (final or name))
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        return {"file": final or name, "bytes": writer.size, "sha256": writer.sha.hexdigest()}

    # --- the PrecedentIndex protocol ------------------------------------------------------------

    async def upsert(self, documents: Sequence[Document]) -> UpsertReport:
        """Add or replace documents by id (re-running a build is idempotent), then save."""
        self._check_open()
        report = UpsertReport()
        latest: dict[str, Document] = {}
        for doc in documents:  # the last of duplicate ids in one batch wins
            latest.pop(doc.id, None)
            latest[doc.id] = doc
        valid: list[Document] = []
        for doc in latest.values():
            problem = _problem(doc)
            if problem:
                report.failed[doc.id] = problem
            else:
                valid.append(doc)
        encoded: list[tuple[Document, np.ndarray]] = []
        for start in range(0, len(valid), ENCODE_CHUNK):
            chunk = valid[start : start + ENCODE_CHUNK]
            try:
                vectors = await asyncio.to_thread(self._encode, [d.text for d in chunk])
            except Exception as err:
                for d in chunk:
                    report.failed[d.id] = f"embedding failed: {type(err).__name__}: {err}"[:300]
                continue
            encoded += zip(chunk, vectors, strict=True)
        if encoded:
            await asyncio.to_thread(self._apply, encoded)
        report.indexed = [d.id for d, _ in encoded]
        return report

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.dims):
            raise ValueError(f"embedder returned shape {vectors.shape}, expected {(len(texts), self.dims)}")
        if not np.isfinite(vectors).all():
            raise ValueError("embedder returned non-finite values")
        return vectors

    def _apply(self, encoded: list[tuple[Document, np.ndarray]]) -> None:
        lines = [doc.model_dump_json().encode() for doc, _ in encoded]
        with self._write, self._flock(exclusive=True):
            if self._manifest_stamp() != self._loaded_stamp:
                self._reload(flocked=True)  # another process saved since we loaded: build on its state
            by_kind: dict[Kind, list[int]] = {k: [] for k in KINDS}
            for i, (doc, _) in enumerate(encoded):
                by_kind[doc.kind].append(i)
            tokens = {
                kind: self._parts[kind].tokenize([encoded[i][0].text for i in rows])
                for kind, rows in by_kind.items()
                if rows
            }
            with self._state:
                for kind, rows in by_kind.items():
                    part, other = self._parts[kind], self._parts["guideline" if kind == "case" else "case"]
                    for i, toks in zip(rows, tokens.get(kind, []), strict=False):
                        doc, vector = encoded[i]
                        other.remove(doc.id)  # an id that changed kind
                        part.put(
                            doc.id,
                            lines[i],
                            vector,
                            CATEGORY_CODES[doc.category],
                            doc.keywords.get("active", ["true"]) != ["false"],
                            toks,
                        )
                    if rows:
                        part.vocab = dict(part.tokenizer.get_vocab_dict())
            self._save_locked()

    async def search(
        self,
        query: str,
        *,
        kind: Kind,
        category: str | None = None,
        k: int = 10,
        mode: SearchMode = "hybrid",
        vector: np.ndarray | None = None,
    ) -> list[Hit]:
        self._check_open()
        text = check_query(query, category, k)
        if kind not in KINDS:
            raise PrecedentError("bad_query", f"unknown kind {kind!r}; expected case or guideline")
        if mode not in ("hybrid", "bm25", "vector"):
            raise PrecedentError("bad_query", f"unknown search mode {mode!r}; expected hybrid, bm25 or vector")
        if mode == "bm25":
            vector = None
        elif vector is None:
            vector = await asyncio.to_thread(self.query_vector, text)
        else:
            vector = given_vector(vector, self.dims)
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
        self._refresh_if_stale()
        n = k if mode != "hybrid" else max(4 * k, MIN_CANDIDATES)
        rankings: dict[str, list[str]] = {}
        with self._state:
            part = self._parts[kind]
            if not part.ids:
                return []
            mask = part.searchable(category)
            keep = np.ones(len(part), np.bool_) if mask is None else mask
            if mode in ("hybrid", "bm25"):
                bm25 = part.ensure_bm25()
                assert bm25 is not None
                term_ids = sorted(set(bm25.get_tokens_ids(bm25_terms(text))))
                rows: list[int] = []
                if term_ids:
                    scores = bm25.get_scores_from_ids(term_ids)
                    rows = _top(scores, n, keep & (scores > 0))
                rankings["bm25"] = [part.ids[r] for r in rows]
            if mode in ("hybrid", "vector"):
                sims = part.vectors.view @ vector
                rankings["vector"] = [part.ids[r] for r in _top(sims, n, keep)]
            fused = fuse(rankings)[:k]
            lines = [part.lines[part.rows[doc_id]] for doc_id, _, _ in fused]
        hits = []
        for rank, ((doc_id, score, sources), line) in enumerate(zip(fused, lines, strict=True), 1):
            hits.append(
                Hit(id=doc_id, kind=kind, score=score, rank=rank, sources=sources, document=self._parse(line, doc_id))
            )
        return hits

    def _parse(self, line: bytes, doc_id: str) -> Document:
        try:
            return Document.model_validate_json(line)
        except ValidationError as err:
            raise _corrupt(str(self.folder), f"stored document {doc_id!r} does not validate ({err})") from err

    def documents(self) -> Iterator[tuple[Document, np.ndarray]]:
        """Every stored document with its stored vector, part by part (what ``migrate`` copies)."""
        with self._state:
            parts = [(list(p.ids), list(p.lines), p.vectors.view.copy()) for p in self._parts.values()]
        for ids, lines, vectors in parts:
            for doc_id, line, vector in zip(ids, lines, vectors, strict=True):
                yield self._parse(line, doc_id), vector

    def __len__(self) -> int:
        return sum(len(p) for p in self._parts.values())

    async def get(self, ids: Sequence[str]) -> list[Document]:
        """The stored documents for these ids, in the order asked; unknown ids are skipped."""
        self._check_open()
        return await asyncio.to_thread(self._get, list(ids))

    def _get(self, ids: list[str]) -> list[Document]:
        self._refresh_if_stale()
        found: list[tuple[str, bytes]] = []
        with self._state:
            for doc_id in ids:
                for part in self._parts.values():
                    row = part.rows.get(doc_id)
                    if row is not None:
                        found.append((doc_id, part.lines[row]))
                        break
        return [self._parse(line, doc_id) for doc_id, line in found]

    async def delete(self, ids: Sequence[str]) -> int:
        """Remove documents by id; returns how many existed. Saves when anything changed."""
        self._check_open()
        return await asyncio.to_thread(self._delete, list(ids))

    def _delete(self, ids: list[str]) -> int:
        with self._write, self._flock(exclusive=True):
            if self._manifest_stamp() != self._loaded_stamp:
                self._reload(flocked=True)
            with self._state:
                removed = sum(any(part.remove(doc_id) for part in self._parts.values()) for doc_id in set(ids))
            if removed:
                self._save_locked()
        return removed

    async def count(self, kind: Kind, category: str | None = None) -> int:
        """Documents a search with the same kind and category could return: the category's
        (guidelines marked 'all' included for guidelines), inactive guidelines left out."""
        self._check_open()
        if kind not in KINDS:
            raise PrecedentError("bad_query", f"unknown kind {kind!r}; expected case or guideline")
        if category is not None:
            check_query("count", category, 1)  # an unknown category is an error, as in search
        return await asyncio.to_thread(self._count, kind, category)

    def _count(self, kind: Kind, category: str | None) -> int:
        self._refresh_if_stale()
        with self._state:
            part = self._parts[kind]
            mask = part.searchable(category)
            return len(part) if mask is None else int(mask.sum())

    async def close(self) -> None:
        """Everything is saved after each write, so closing only drops the in-memory index."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._write, self._state:
            self._closed = True
            self._parts = {k: _Part(k, self.dims) for k in KINDS}

    def _check_open(self) -> None:
        if self._closed:
            raise PrecedentError("index_missing", f"the precedent index at {self.folder} is closed")

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={len(p)}" for k, p in self._parts.items())
        return f"LegacyIndex({str(self.folder)!r}, model={self.embedding_model!r}, {sizes})"


def _problem(doc: Document) -> str | None:
    if doc.category not in CATEGORY_CODES:
        return f"unknown category {doc.category!r}"
    if doc.kind == "case" and doc.category == ANY_CATEGORY:
        return "a case belongs to one category, not 'all'"
    if not doc.text.strip():
        return "empty text"
    return None


def _pop_into(seq: list[Any], row: int) -> None:
    """Remove ``seq[row]`` by moving the last item into its place (rows need not keep their order)."""
    seq[row] = seq[-1]
    seq.pop()


def _write_lines(writer: _HashingWriter, lines: list[bytes]) -> None:
    buf: list[bytes] = []
    size = 0
    for line in lines:
        buf.append(line)
        buf.append(b"\n")
        size += len(line) + 1
        if size > 1 << 20:
            writer.write(b"".join(buf))
            buf, size = [], 0
    if buf:
        writer.write(b"".join(buf))


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
