"""Settings precedence: code, then CYBERJURORS_*, then the settings file, then the ecosystem names
(KAFKA_BOOTSTRAP_SERVERS, ANTHROPIC_*, OPENAI_*, ELASTICSEARCH_*); and the settings a command
hands its child worker are the ones it runs with, whatever the environment exports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cyberjurors.config import ECOSYSTEM_ENV, SETTINGS_FILE_ENV, Settings
from cyberjurors.streams.worker_process import child_env

from .conftest import EXAMPLES
from .test_eval import sample_dataset

# every ecosystem name, pointing somewhere nothing listens
DEAD = {
    "KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1",
    "ANTHROPIC_API_KEY": "sk-ant-dead",
    "OPENAI_API_KEY": "sk-dead",
    "OPENAI_BASE_URL": "http://127.0.0.1:1/v1",
    "ELASTICSEARCH_URL": "http://127.0.0.1:1",
    "ELASTICSEARCH_API_KEY": "dead",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1",
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.upper().startswith("CYBERJURORS_") or name in ECOSYSTEM_ENV:
            monkeypatch.delenv(name)
    return monkeypatch


def test_every_ecosystem_name_is_covered() -> None:
    assert set(DEAD) == set(ECOSYSTEM_ENV)
    assert set(ECOSYSTEM_ENV.values()) <= set(Settings.model_fields)


@pytest.mark.parametrize("env", sorted(ECOSYSTEM_ENV))
def test_the_cyberjurors_name_beats_the_ecosystem_name(env: str, clean_env: pytest.MonkeyPatch) -> None:
    field = ECOSYSTEM_ENV[env]
    clean_env.setenv(env, DEAD[env])
    assert getattr(Settings(), field) == DEAD[env]  # read as it is when nothing else says otherwise
    clean_env.setenv(f"CYBERJURORS_{field.upper()}", "chosen")  # the setting's own name
    assert getattr(Settings(), field) == "chosen"
    assert getattr(Settings(**{field: "in code"}), field) == "in code"


def test_an_empty_ecosystem_name_counts_as_unset(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("KAFKA_BOOTSTRAP_SERVERS", "")
    clean_env.setenv("ANTHROPIC_API_KEY", "")  # docker-compose's ${ANTHROPIC_API_KEY:-}
    settings = Settings()
    assert settings.kafka_bootstrap_servers == "127.0.0.1:9092"
    assert settings.anthropic_api_key is None and settings.backend == "offline"


def test_the_settings_file_beats_the_ecosystem_name_and_loses_to_cyberjurors_names(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    toml = tmp_path / "settings.toml"
    toml.write_text(
        'kafka_bootstrap_servers = "from-file:9092"\nelasticsearch_url = "http://from-file:9200"\njurors = 9\n'
    )
    clean_env.setenv(SETTINGS_FILE_ENV, str(toml))
    clean_env.setenv("KAFKA_BOOTSTRAP_SERVERS", DEAD["KAFKA_BOOTSTRAP_SERVERS"])
    clean_env.setenv("ELASTICSEARCH_URL", DEAD["ELASTICSEARCH_URL"])
    clean_env.setenv("OPENAI_BASE_URL", DEAD["OPENAI_BASE_URL"])  # not in the file: the ecosystem name holds
    settings = Settings()
    assert settings.kafka_bootstrap_servers == "from-file:9092"
    assert settings.elasticsearch_url == "http://from-file:9200"
    assert settings.openai_base_url == DEAD["OPENAI_BASE_URL"] and settings.jurors == 9
    clean_env.setenv("CYBERJURORS_KAFKA_BOOTSTRAP_SERVERS", "from-env:9092")
    assert Settings().kafka_bootstrap_servers == "from-env:9092"


def test_backend_auto_follows_the_key_that_wins(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ANTHROPIC_API_KEY", DEAD["ANTHROPIC_API_KEY"])
    assert Settings().backend == "anthropic"  # the documented default: auto = anthropic when a key is there
    clean_env.setenv("CYBERJURORS_LLM_BACKEND", "offline")
    assert Settings().backend == "offline"


def test_a_child_gets_exactly_its_parents_settings(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    parent = Settings(
        kafka_bootstrap_servers="127.0.0.1:4242",
        llm_backend="offline",
        jurors=5,
        media_root=EXAMPLES,
        datadir=tmp_path / "faust",
    )  # no ES URL, no keys: None
    inherited = {
        **DEAD,
        "PATH": os.environ.get("PATH", ""),
        "CYBERJURORS_JURORS": "11",
        "cyberjurors_rounds": "1",
        SETTINGS_FILE_ENV: str(tmp_path / "nowhere.toml"),
    }
    env = child_env(parent, inherited)
    assert not set(DEAD) & set(env), "the ecosystem names are not handed down"
    assert env["CYBERJURORS_KAFKA_BOOTSTRAP_SERVERS"] == "127.0.0.1:4242" and env["PATH"] == inherited["PATH"]
    assert "cyberjurors_rounds" not in env and SETTINGS_FILE_ENV not in env
    # the child's view: Settings() in exactly that environment
    for name in list(os.environ):
        clean_env.delenv(name)
    for name, value in env.items():
        clean_env.setenv(name, value)
    assert Settings().model_dump() == parent.model_dump()


# --- the real commands, with every ecosystem name pointing at a dead port ----------------------


def cyberjurors(*args: str, cwd: Path, timeout_s: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
    """The CLI with DEAD exported, as docs/operations/kafka.md does with a real bootstrap."""
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("CYBERJURORS_")}
    full = (
        base
        | DEAD
        | {
            "CYBERJURORS_LLM_BACKEND": "offline",  # ANTHROPIC_API_KEY is set: auto would pick anthropic
            "CYBERJURORS_PRECEDENT_BACKEND": "none",
            "CYBERJURORS_METRICS_PORT": "0",
            "CYBERJURORS_SESSION_TIMEOUT_S": "6",
            "CYBERJURORS_HEARTBEAT_INTERVAL_S": "0.5",
            "COLUMNS": "200",
        }
        | env
    )
    try:
        return subprocess.run(
            [sys.executable, "-m", "cyberjurors", *args],
            env=full,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as err:  # run() killed the command; say what it printed
        raise AssertionError(f"cyberjurors {' '.join(args)} ran over {timeout_s}s:\n{err.stdout}") from err


@pytest.mark.integration
def test_demo_gets_verdicts_with_ecosystem_names_exported(tmp_path: Path) -> None:
    cases = [
        EXAMPLES / "cases" / "appl-001-kettle-crack.json",
        EXAMPLES / "cases" / "food-001-granola-past-best-before.json",
    ]
    result = cyberjurors(
        "demo",
        *map(str, cases),
        "--timeout",
        "120",
        cwd=tmp_path,
        CYBERJURORS_DATADIR=str(tmp_path / "demo" / "faust"),
        CYBERJURORS_MEDIA_ROOT=str(EXAMPLES),
    )
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-4000:]
    assert "2 verdicts, 0 dead letters, 0 missing" in said, said[-4000:]


@pytest.mark.integration
def test_eval_gets_verdicts_with_ecosystem_names_exported(tmp_path: Path) -> None:
    data = sample_dataset(tmp_path / "data", ["appl-001-kettle-crack", "food-001-granola-past-best-before"])
    out = tmp_path / "eval"
    result = cyberjurors(
        "eval", str(data), "--ablation", "baseline", "--out", str(out), "--timeout", "120", cwd=tmp_path
    )
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-4000:]
    (report,) = json.loads((out / "report.json").read_text())
    assert report["summary"]["verdicts"] == 2 and report["failed_cases"] == {}
    assert report["settings"]["kafka_bootstrap_servers"] != DEAD["KAFKA_BOOTSTRAP_SERVERS"]
