"""The embedded precedent store (``EmbeddedIndex``, the default) with the real embedding model:
the store contract (store_contract.py) on a folder of its own, and what only this store has: its
SQLite rows and files, a damaged database, the previous store's BM25 terms. Its crash safety,
two-process visibility, vector snapshot and the migration are in test_store.py."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import bm25s
import pytest
import Stemmer  # type: ignore[import-not-found]

from cyberjurors.precedents.embedded import DB_FILE, EmbeddedIndex, bm25_terms
from cyberjurors.precedents.models import Document, PrecedentError

from ... import precedent_data as data
from .store_contract import CASES, CORPUS, GUIDELINES, PROBES, StoreContract


class Folder:
    """One store: the database in a folder of the test's."""

    reports_sources = True

    def __init__(self, folder: Path):
        self.folder, self.where = folder, str(folder)
        self.opened: list[EmbeddedIndex] = []

    async def open(self, embedder, *, create: bool = True) -> EmbeddedIndex:
        index = await EmbeddedIndex.open(self.folder, embedder, create=create)
        self.opened.append(index)
        return index

    async def damage(self, doc_id: str) -> None:
        with sqlite3.connect(self.folder / DB_FILE) as db:
            assert db.execute("UPDATE documents SET body = '{\"id\": 7' WHERE id = ?", (doc_id,)).rowcount == 1


class TestEmbeddedStore(StoreContract):
    @pytest.fixture
    async def backend(self, tmp_path: Path):
        folder = Folder(tmp_path / "precedents")
        yield folder
        for index in folder.opened:
            await index.close()


async def fresh(folder: Path, embedder, docs: list[Document] | None = None) -> EmbeddedIndex:
    index = await EmbeddedIndex.open(folder, embedder)
    if docs:
        assert not (await index.upsert(docs)).failed
    return index


async def test_one_row_per_id_however_often_upserted(shared_embedder, tmp_path: Path):
    docs = CASES[:40] + GUIDELINES[:10]
    index = await fresh(tmp_path / "idx", shared_embedder, docs)
    await index.upsert(docs)
    await index.upsert([docs[0].model_copy(update={"text": "A toaster with a Martian plug."})])
    with sqlite3.connect(tmp_path / "idx" / DB_FILE) as db:
        assert db.execute("SELECT kind, count(*) FROM documents GROUP BY kind ORDER BY kind").fetchall() == [
            ("case", 40),
            ("guideline", 10),
        ]
    await index.close()


async def test_the_store_is_its_database_and_a_closed_handle_refuses(shared_embedder, tmp_path: Path):
    folder = tmp_path / "idx"
    index = await fresh(folder, shared_embedder, CASES[:20] + PROBES)
    await index.close()
    with pytest.raises(PrecedentError):
        await index.search("anything", kind="case")
    # the database and SQLite's write-ahead log and its index: nothing else
    files = {p.name for p in folder.iterdir()}
    assert files <= {DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm"} and DB_FILE in files


async def test_opening_makes_the_folder_only_when_asked(shared_embedder, tmp_path: Path):
    for folder in (tmp_path / "nowhere", tmp_path):  # no folder; a folder without a database
        with pytest.raises(PrecedentError) as err:
            await EmbeddedIndex.open(folder, shared_embedder, create=False)
        assert err.value.kind == "index_missing" and str(folder) in str(err.value)
    assert not (tmp_path / "nowhere").exists()
    created = await EmbeddedIndex.open(tmp_path / "new" / "idx", shared_embedder)
    assert (tmp_path / "new" / "idx" / DB_FILE).is_file()
    await created.close()


async def test_a_damaged_database_is_reported_as_corrupt(shared_embedder, tmp_path: Path):
    folder = tmp_path / "idx"
    await (await fresh(folder, shared_embedder, CASES[:12])).close()
    database = folder / DB_FILE
    original = database.read_bytes()
    database.write_bytes(b"not a database at all" + original[22:])  # the header overwritten
    with pytest.raises(PrecedentError) as err:
        await EmbeddedIndex.open(folder, shared_embedder, create=False)
    assert err.value.kind == "corrupt" and DB_FILE in str(err.value) and "SQLite" in str(err.value)
    database.write_bytes(original)
    ok = await EmbeddedIndex.open(folder, shared_embedder, create=False)
    assert await ok.count("case") == 12
    await ok.close()


def test_the_analyzer_makes_the_previous_stores_terms():
    """tantivy's analyzer and the previous store's (bm25s's tokenizer and English stopwords,
    PyStemmer's Snowball English) give every text of the corpus and every query the same terms, so
    a migrated store ranks as the old one did."""
    texts = [d.text for d in CORPUS] + [q for q, _ in data.queries(200)] + ["Café déjà-vu, the RE-shipped item_42!"]
    stemmer = Stemmer.Stemmer("english")
    previous = bm25s.tokenize(texts, lower=True, stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
    assert [bm25_terms(t) for t in texts] == [[t for t in terms if t] for terms in previous]
