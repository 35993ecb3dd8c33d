"""The local model server's checks that start no server (cyberjurors/llm/local_server.py): the GGUF is
found in the server's venv without importing its package and refused unless it is the pinned one;
a server that exits is reported with its log. A stand-in "python" (a shell script) plays the venv's
interpreter. tests/integration/test_local_model.py starts the real one."""

from __future__ import annotations

import hashlib
import stat
from pathlib import Path

import pytest

from cyberjurors.llm.local_server import LocalModel, LocalServerError, local_server, model_file

BYTES = b"GGUF" + bytes(60)
TINY = LocalModel(
    name="tiny",
    package="tiny_pkg",
    file="tiny.gguf",
    size=len(BYTES),
    sha256=hashlib.sha256(BYTES).hexdigest(),
    source="test",
)


def fake_python(tmp_path: Path, folder: Path, server_exit: str = "echo 'error loading model' >&2; exit 3") -> Path:
    """A 'python' that answers the package lookup (``-c``) with ``folder`` and runs ``server_exit`` as the server."""
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\nif [ "$1" = "-c" ]; then echo "{folder}"; exit 0; fi\n{server_exit}\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_the_pinned_gguf_is_found_in_the_venv(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / TINY.file).write_bytes(BYTES)
    assert model_file(fake_python(tmp_path, tmp_path / "pkg"), TINY) == tmp_path / "pkg" / TINY.file


@pytest.mark.parametrize(
    ("content", "said"),
    [(BYTES[:-1], f"{len(BYTES) - 1:,} bytes"), (b"XXXX" + BYTES[4:], "sha256 ")],
    ids=["size", "sum"],
)
def test_a_gguf_that_is_not_the_pinned_one_is_refused(tmp_path: Path, content: bytes, said: str):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / TINY.file).write_bytes(content)
    with pytest.raises(LocalServerError) as refused:
        model_file(fake_python(tmp_path, tmp_path / "pkg"), TINY)
    assert refused.value.kind == "model_tampered" and said in refused.value.detail


def test_no_venv_and_no_model_say_how_to_get_them(tmp_path: Path):
    with pytest.raises(LocalServerError) as missing:
        model_file(tmp_path / "nowhere" / "python", TINY)
    assert missing.value.kind == "not_built" and "make llm-server" in missing.value.detail
    with pytest.raises(LocalServerError) as missing:
        model_file(fake_python(tmp_path, tmp_path / "empty"), TINY)
    assert missing.value.kind == "model_missing" and "requirements/llm-model.txt" in missing.value.detail


def test_a_server_that_exits_is_reported_with_its_log(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / TINY.file).write_bytes(BYTES)
    with (
        pytest.raises(LocalServerError) as failed,
        local_server(
            fake_python(tmp_path, tmp_path / "pkg"), log=tmp_path / "server.log", model=TINY, ready_timeout_s=30
        ),
    ):
        pass
    assert failed.value.kind == "not_ready" and "exited (3)" in failed.value.detail
    assert "error loading model" in failed.value.detail
