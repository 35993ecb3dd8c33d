"""Settings precedence: code, then CYBERJURORS_*, then the settings file, then the ecosystem names
(KAFKA_BOOTSTRAP_SERVERS, ANTHROPIC_*, OPENAI_*, ELASTICSEARCH_*); and the settings a command
hands its child worker are the ones it runs with, whatever the environment exports. `demo` and
`eval` with the ecosystem names exported: tests/integration/test_settings_precedence.py."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest

from cyberjurors.config import ECOSYSTEM_ENV, SETTINGS_FILE_ENV, Settings
from cyberjurors.tooling.worker_process import child_env

from ...conftest import EXAMPLES

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
    assert {path.split(".")[0] for path in ECOSYSTEM_ENV.values()} <= set(Settings.model_fields)


@pytest.mark.parametrize("env", sorted(ECOSYSTEM_ENV))
def test_the_cyberjurors_name_beats_the_ecosystem_name(env: str, clean_env: pytest.MonkeyPatch) -> None:
    path = ECOSYSTEM_ENV[env]  # a nested setting's field dotted: elasticsearch.url

    def read(settings: Settings) -> object:
        return functools.reduce(getattr, path.split("."), settings)

    clean_env.setenv(env, DEAD[env])
    assert read(Settings()) == DEAD[env]  # read as it is when nothing else says otherwise
    clean_env.setenv(f"CYBERJURORS_{path.replace('.', '__').upper()}", "chosen")  # the setting's own name
    assert read(Settings()) == "chosen"
    head, *rest = path.split(".")
    assert read(Settings(**{head: {rest[0]: "in code"} if rest else "in code"})) == "in code"


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
        'kafka_bootstrap_servers = "from-file:9092"\njurors = 9\n[elasticsearch]\nurl = "http://from-file:9200"\n'
    )
    clean_env.setenv(SETTINGS_FILE_ENV, str(toml))
    clean_env.setenv("KAFKA_BOOTSTRAP_SERVERS", DEAD["KAFKA_BOOTSTRAP_SERVERS"])
    clean_env.setenv("ELASTICSEARCH_URL", DEAD["ELASTICSEARCH_URL"])
    clean_env.setenv("OPENAI_BASE_URL", DEAD["OPENAI_BASE_URL"])  # not in the file: the ecosystem name holds
    settings = Settings()
    assert settings.kafka_bootstrap_servers == "from-file:9092"
    assert settings.elasticsearch.url == "http://from-file:9200"
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
