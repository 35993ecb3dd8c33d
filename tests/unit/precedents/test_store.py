"""The SQLite precedent store beyond what both stores share (test_embedded.py): a crash
mid-write (a real process killed with SIGKILL while it writes a large batch), a second process's
writes seen by a search without reopening, the HNSW snapshot and the changes after it, and the
migration from the previous store (`cyberjurors precedents migrate`, as an operator runs it)."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from cyberjurors.precedents import embedded
from cyberjurors.precedents.embedded import DB_FILE, EmbeddedIndex
from cyberjurors.precedents.migrate import migrate
from cyberjurors.precedents.models import Document, PrecedentError

from ... import precedent_data as data
from ...conftest import ROOT
from .store_contract import CASES, GUIDELINES, MODEL, PROBES, CachingEmbedder


@pytest.fixture
def embedder(shared_embedder) -> CachingEmbedder:
    return shared_embedder


def previous_store(folder: Path, docs: list[Document], vectors: np.ndarray, model: str = MODEL) -> None:
    """The files the previous store (format 1) left in a folder, written as it wrote them: per kind
    a generation's JSON lines and numpy rows, then the manifest naming them with sizes and sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.0000*"):
        old.unlink()
    parts = {}
    for kind in ("case", "guideline"):
        rows = [(d, v) for d, v in zip(docs, vectors, strict=True) if d.kind == kind]
        buf = io.BytesIO()
        np.save(buf, np.array([v for _, v in rows], np.float32).reshape(len(rows), vectors.shape[1]))
        files = {}
        for what, name, content in (
            ("documents", f"{kind}.000002.jsonl", b"".join(d.model_dump_json().encode() + b"\n" for d, _ in rows)),
            ("vectors", f"{kind}.000002.npy", buf.getvalue()),
        ):
            (folder / name).write_bytes(content)
            files[what] = {"file": name, "bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}
        parts[kind] = {"count": len(rows), **files}
    manifest = {"format": 1, "embedding_model": model, "dims": int(vectors.shape[1]), "generation": 2, "parts": parts}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))


def child(script: str) -> subprocess.Popen[str]:
    """A Python process of its own on the store: it opens the store with an embedder of the model's
    name that hands out vectors computed beforehand (or none), as a worker that loaded the model would."""
    prelude = textwrap.dedent(
        f"""
        import asyncio, sys
        import numpy as np
        sys.path.insert(0, {str(ROOT)!r})
        from cyberjurors.precedents.embedded import EmbeddedIndex
        from cyberjurors.precedents.models import Document

        class Given:
            name, dims = {MODEL!r}, 384
            def encode(self, texts):
                raise RuntimeError("this process embeds nothing")
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", prelude + textwrap.dedent(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


# --- crash safety -----------------------------------------------------------------------------------


async def test_a_process_killed_mid_write_leaves_the_previous_state(embedder, tmp_path: Path):
    folder = tmp_path / "idx"
    index = await EmbeddedIndex.open(folder, embedder)
    assert not (await index.upsert(CASES[:50])).failed
    before = await index.search(CASES[7].text, kind="case", k=5)

    # 20,000 cases in one upsert (~60 MB): far more than SQLite's page cache, so the transaction
    # spills pages into the write-ahead log long before it commits
    writer = child(
        f"""
        from tests import precedent_data
        async def main():
            index = await EmbeddedIndex.open({str(folder)!r}, Given(), create=False)
            docs = [Document.of_case(c) for c in precedent_data.cases(20_000, seed=99)]
            vectors = np.random.default_rng(0).normal(size=(len(docs), 384)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            print("writing", flush=True)
            index.write(list(zip(docs, vectors)))
            print("committed", flush=True)
        asyncio.run(main())
        """
    )
    assert writer.stdout is not None
    assert writer.stdout.readline().strip() == "writing", writer.stderr.read() if writer.stderr else ""
    wal = folder / f"{DB_FILE}-wal"
    while writer.poll() is None and (not wal.exists() or wal.stat().st_size < 16 * 2**20):
        time.sleep(0.02)
    writer.send_signal(signal.SIGKILL)
    out, _ = writer.communicate()
    assert writer.returncode == -signal.SIGKILL and "committed" not in out, "the batch committed before the kill"

    # the process that was open all along, and a fresh one, see the 50 cases and nothing of the batch
    assert await index.count("case") == 50
    assert await index.search(CASES[7].text, kind="case", k=5) == before
    reopened = await EmbeddedIndex.open(folder, embedder, create=False)
    assert await reopened.count("case") == 50
    assert await reopened.search(CASES[7].text, kind="case", k=5) == before
    assert await reopened.get([f"case:h99-{i:06d}" for i in range(3)]) == []
    with sqlite3.connect(folder / DB_FILE) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("SELECT count(*) FROM documents").fetchone() == (50,)
    # and the store takes writes again (the dead writer's lock went with it)
    assert not (await reopened.upsert([CASES[50]])).failed
    assert await index.count("case") == 51
    assert (await index.search(CASES[50].text, kind="case", k=1))[0].id == CASES[50].id


# --- two processes --------------------------------------------------------------------------------------


async def test_another_processs_writes_are_searched_without_reopening(embedder, tmp_path: Path):
    folder = tmp_path / "idx"
    index = await EmbeddedIndex.open(folder, embedder)
    assert not (await index.upsert(CASES[:30] + GUIDELINES[:10])).failed
    code, moved, gone = PROBES[1], CASES[1], CASES[0]
    assert code.id not in {h.id for h in await index.search(data.PROBE_CODE_QUERY, kind="case", k=5, mode="bm25")}
    new_category = next(c for c in data.CATEGORY_NAMES if c != moved.category)
    moved_now = moved.model_copy(update={"category": new_category})
    np.save(tmp_path / "vectors.npy", embedder.encode([code.text, moved.text]))
    (tmp_path / "docs.json").write_text(f"[{code.model_dump_json()}, {moved_now.model_dump_json()}]")

    other = child(
        f"""
        import json
        async def main():
            index = await EmbeddedIndex.open({str(folder)!r}, Given(), create=False)
            docs = [Document.model_validate(d) for d in json.load(open({str(tmp_path / "docs.json")!r}))]
            index.write(list(zip(docs, np.load({str(tmp_path / "vectors.npy")!r}))))
            assert await index.delete([{gone.id!r}]) == 1
            await index.close()
            print("done", flush=True)
        asyncio.run(main())
        """
    )
    out, err = other.communicate(timeout=120)
    assert other.returncode == 0 and out.strip() == "done", err

    # the same handle, opened before the other process wrote
    hits = await index.search(data.PROBE_CODE_QUERY, kind="case", k=5, mode="bm25")
    assert hits[0].id == code.id and hits[0].document == code
    assert (await index.search(code.text, kind="case", k=1, mode="vector"))[0].id == code.id
    assert await index.count("case") == 30  # one added, one deleted
    assert await index.get([gone.id]) == []
    for mode in ("hybrid", "bm25", "vector"):
        assert gone.id not in {h.id for h in await index.search(gone.text, kind="case", k=30, mode=mode)}
        in_new = await index.search(moved.text, kind="case", category=new_category, k=3, mode=mode)
        assert in_new[0].id == moved.id and in_new[0].document.category == new_category
        in_old = await index.search(moved.text, kind="case", category=moved.category, k=30, mode=mode)
        assert moved.id not in {h.id for h in in_old}


# --- the vector snapshot ------------------------------------------------------------------------------------


async def test_the_graphs_reopen_from_a_snapshot_plus_the_changes_after_it(
    embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(embedded, "SNAPSHOT_MIN_CHANGES", 50)
    monkeypatch.setattr(embedded, "EXACT_BELOW", 0)  # the HNSW graphs themselves, not the exact scan
    folder = tmp_path / "idx"
    index = await EmbeddedIndex.open(folder, embedder)
    await index.upsert(CASES[:120])  # 120 changes: a snapshot
    with sqlite3.connect(folder / DB_FILE) as db:
        assert db.execute("SELECT count(*), min(seq), max(seq) FROM vector_snapshot").fetchone() == (
            len(embedded.PARTS),
            1,
            1,
        )
    # after the snapshot: added, deleted, changed category; fewer changes than the next snapshot needs
    moved = CASES[5].model_copy(update={"category": "digital" if CASES[5].category != "digital" else "food"})
    await index.upsert([*CASES[120:130], moved])
    await index.delete([CASES[0].id, CASES[1].id])
    await index.close()
    with sqlite3.connect(folder / DB_FILE) as db:
        assert db.execute("SELECT DISTINCT seq FROM vector_snapshot").fetchall() == [(1,)]

    asks = [(d.text, d.category) for d in (*CASES[:12], *CASES[120:130], moved)]

    async def answers(idx: EmbeddedIndex) -> list[list[str]]:
        return [
            [h.id for h in await idx.search(text, kind="case", category=c, k=5, mode="vector")]
            + [h.id for h in await idx.search(text, kind="case", k=5, mode="vector")]
            for text, c in asks
        ]

    restored = await EmbeddedIndex.open(folder, embedder, create=False)
    from_snapshot = await answers(restored)
    await restored.close()
    with sqlite3.connect(folder / DB_FILE) as db:
        db.execute("UPDATE vector_snapshot SET data = x'00ff00'")  # unreadable: the rows are the truth
    rebuilt = await EmbeddedIndex.open(folder, embedder, create=False)
    assert await answers(rebuilt) == from_snapshot
    found = {doc_id for ids in from_snapshot for doc_id in ids}
    assert CASES[0].id not in found and CASES[1].id not in found
    assert all(ids[0] == d.id for ids, d in zip(from_snapshot[12:], [*CASES[120:130], moved], strict=True))
    assert from_snapshot[-1][0] == moved.id  # in its new category's graph


# --- migration --------------------------------------------------------------------------------------------


def migrate_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CYBERJURORS_")} | {"COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "cyberjurors", "precedents", "migrate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )


async def test_migrate_a_store_built_by_the_previous_code(embedder, tmp_path: Path):
    folder = tmp_path / "old"
    kept = [d for d in CASES[:80] + GUIDELINES + PROBES if d.id != CASES[3].id]
    old_vectors = embedder.encode([d.text for d in kept])
    previous_store(folder, kept, old_vectors)
    with pytest.raises(PrecedentError) as err:  # the new code will not open it as it is
        await EmbeddedIndex.open(folder, embedder)
    assert err.value.kind == "needs_migration" and "precedents migrate" in str(err.value)
    assert not (folder / DB_FILE).exists()

    done = migrate_cli("--from", folder)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(kept)} read: {len(kept)} written, 0 already there alike" in done.stdout
    assert {p.name for p in folder.iterdir()} >= {"manifest.json", DB_FILE}  # the old files stay
    assert not [p for p in folder.iterdir() if p.name.startswith(".migrating-")]

    new = await EmbeddedIndex.open(folder, embedder, create=False)
    ids = [d.id for d in kept]
    assert await new.get(ids) == kept and await new.get([CASES[3].id]) == []
    assert await new.count("case") == sum(d.kind == "case" for d in kept)
    assert await new.count("guideline") == sum(d.kind == "guideline" and d.keywords["active"] == ["true"] for d in kept)
    # the vectors are the old ones, byte for byte (nothing was embedded again)
    stored = new.stored(ids)
    calls = embedder.calls
    assert all(stored[d.id][1] == v.astype("<f4").tobytes() for d, v in zip(kept, old_vectors, strict=True))
    assert embedder.calls == calls
    # and they are searched: each searchable document's own text finds it first (or, where several
    # documents share that text, one of them)
    for doc in [d for d in kept if d.keywords.get("active") != ["false"]][::5]:
        for mode in ("bm25", "vector"):
            assert (await new.search(doc.text, kind=doc.kind, k=1, mode=mode))[0].document.text == doc.text
    assert (await new.search(data.PROBE_CODE_QUERY, kind="case", k=1, mode="bm25"))[0].id == PROBES[1].id
    await new.close()

    again = migrate_cli("--from", folder)  # idempotent
    assert again.returncode == 0 and f"{len(kept)} read: 0 written, {len(kept)} already there alike" in again.stdout

    changed = kept[0].model_copy(update={"text": "A kettle that whistles the national anthem, then stops working."})
    old_vectors[0] = embedder.encode([changed.text])[0]
    previous_store(folder, [changed, *kept[1:]], old_vectors)  # the old store, written to once more
    elsewhere = tmp_path / "new"
    assert migrate_cli("--from", folder, "--to", elsewhere).returncode == 0  # a fresh target
    third = migrate_cli("--from", folder)  # in place again: only the changed document
    assert third.returncode == 0 and f"{len(kept)} read: 1 written, {len(kept) - 1} already there alike" in third.stdout
    for target in (folder, elsewhere):
        moved = await EmbeddedIndex.open(target, embedder, create=False)
        assert (await moved.get([changed.id]))[0].text == changed.text
        hits = await moved.search("kettle whistles national anthem", kind="case", k=1, mode="bm25")
        assert hits[0].id == changed.id
        await moved.close()


async def test_migrate_says_what_is_wrong(tmp_path: Path):
    nothing = migrate_cli("--from", tmp_path / "nowhere")
    assert nothing.returncode == 2 and "index_missing" in nothing.stdout and "manifest.json" in nothing.stdout


async def corrupt(folder: Path) -> str:
    with pytest.raises(PrecedentError) as err:
        await migrate(folder, folder / "new")
    assert err.value.kind == "corrupt" and not (folder / "new" / DB_FILE).exists()
    return str(err.value)


def reseal(folder: Path, kind: str, what: str, content: bytes) -> None:
    """Rewrite a data file and fix its manifest entry, as a buggy writer would: the checksums pass,
    the content is wrong."""
    manifest = json.loads((folder / "manifest.json").read_text())
    entry = manifest["parts"][kind][what]
    (folder / entry["file"]).write_bytes(content)
    entry.update(bytes=len(content), sha256=hashlib.sha256(content).hexdigest())
    (folder / "manifest.json").write_text(json.dumps(manifest))


async def test_migrate_refuses_damaged_files_of_the_previous_store(embedder, tmp_path: Path):
    """Checksums, sizes and rows checked before anything is written; and the store moves once whole."""
    folder = tmp_path / "old"
    docs = CASES[:12] + GUIDELINES[:3]
    previous_store(folder, docs, embedder.encode([d.text for d in docs]))
    vectors, documents, manifest = (folder / n for n in ("case.000002.npy", "case.000002.jsonl", "manifest.json"))
    original = {p: p.read_bytes() for p in (vectors, documents, manifest)}

    def restore() -> None:
        for path, content in original.items():
            path.write_bytes(content)

    vectors.write_bytes(original[vectors][:-1000])  # truncated
    assert vectors.name in (said := await corrupt(folder)) and "truncated" in said
    restore()
    lines = original[documents].splitlines(keepends=True)
    documents.write_bytes(b"".join([*lines[:3], lines[4], lines[3], *lines[5:]]))  # same size, other bytes
    assert documents.name in (said := await corrupt(folder)) and "checksum" in said
    restore()
    buf = io.BytesIO()
    np.save(buf, np.load(io.BytesIO(original[vectors]))[:-1])
    reseal(folder, "case", "vectors", buf.getvalue())  # one vector row short
    assert "11 vector rows" in (said := await corrupt(folder)) and "12 documents" in said
    restore()
    reseal(folder, "case", "documents", b"{not json\n" + b"".join(lines[1:]))
    assert "line 1" in await corrupt(folder)
    restore()
    manifest.write_bytes(original[manifest][:-40] + b"#garbled")
    assert "manifest.json" in (said := await corrupt(folder)) and "JSON" in said
    restore()
    report = await migrate(folder, folder / "new")  # and all is well again
    assert report.documents == report.written == 15 and report.created


def test_the_writer_waits_for_another_writer_rather_than_failing(embedder, tmp_path: Path):
    """Two handles writing at once (as two workers absorbing outcomes): every write lands."""

    async def run() -> int:
        folder = tmp_path / "idx"
        a = await EmbeddedIndex.open(folder, embedder)
        b = await EmbeddedIndex.open(folder, embedder, create=False)
        await asyncio.gather(*(idx.upsert([doc]) for idx, doc in zip([a, b] * 20, CASES[:40], strict=True)))
        return await b.count("case") + await a.count("case")

    assert asyncio.run(run()) == 80
