"""Settings in sections: every field in exactly one, the environment names unchanged, and each room's
functions typed with the section they need."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from cyberjurors.config import SECTIONS, ConsoleSettings, EvidenceSettings, JurySettings, Settings
from cyberjurors.evidence import intake, media
from cyberjurors.jury import budget, prompts
from cyberjurors.llm.backends import anthropic, openai, routed
from cyberjurors.observability import logs, tracing
from cyberjurors.precedents import base, elastic, retrieval
from cyberjurors.schemas import DisputeCase

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
EXAMPLES = ROOT / "examples" / "cases"


def test_every_setting_is_in_exactly_one_section_and_every_section_field_is_a_setting():
    seen: dict[str, str] = {}
    for name, section in SECTIONS.items():
        for field in section.model_fields:
            assert field not in seen, f"{field} is in both {seen[field]} and {name}"
            seen[field] = name
    assert set(seen) == set(Settings.model_fields)
    assert all(issubclass(Settings, section) for section in SECTIONS.values())


@pytest.mark.parametrize(
    ("variable", "value", "field", "expected"),
    [
        ("CYBERJURORS_PARTITIONS", "6", "partitions", 6),
        ("CYBERJURORS_JURORS", "5", "jurors", 5),
        ("CYBERJURORS_MODEL", "claude-haiku-4-5", "model", "claude-haiku-4-5"),
        ("CYBERJURORS_PRECEDENT_POOL_K", "7", "precedent_pool_k", 7),
        ("CYBERJURORS_TABLE_STORE", "memory", "table_store", "memory"),
        ("CYBERJURORS_LOG_FORMAT", "json", "log_format", "json"),
        ("CYBERJURORS_CONSOLE_PORT", "8181", "console_port", 8181),
    ],
)
def test_each_section_reads_the_flat_environment_names_it_always_had(monkeypatch, variable, value, field, expected):
    monkeypatch.setenv(variable, value)
    assert getattr(Settings(llm_backend="offline"), field) == expected


def test_a_nested_setting_is_read_whole_or_by_its_field(monkeypatch):
    monkeypatch.setenv("CYBERJURORS_INTAKE_LIMITS__MAX_TEXT_CHARS", "999")
    assert Settings(llm_backend="offline").intake_limits.max_text_chars == 999
    monkeypatch.setenv("CYBERJURORS_INTAKE_LIMITS", '{"max_media_items": 7}')
    limits = Settings(llm_backend="offline").intake_limits
    assert (limits.max_text_chars, limits.max_media_items, limits.max_case_items) == (999, 7, 200)


def test_a_sections_validators_run_in_the_composed_settings():
    with pytest.raises(ValueError, match="argon2"):
        Settings(llm_backend="offline", console_users={"ann": "plain"})
    with pytest.raises(ValueError, match="argon2"):
        ConsoleSettings(console_users={"ann": "plain"})
    assert Settings(llm_backend="offline", case_token_budget=None).case_token_budget == 0
    assert JurySettings(max_select_steps=0).clues_stage is False


def _annotation(fn: object, parameter: str = "settings") -> str:
    return str(inspect.signature(fn).parameters[parameter].annotation)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fn", "section"),
    [
        (intake.admit, "EvidenceSettings"),
        (intake.check_size, "EvidenceSettings"),
        (media.check_reference, "EvidenceSettings"),
        (logs.configure, "ObservabilitySettings"),
        (tracing.setup, "ObservabilitySettings"),
        (base.open_index, "PrecedentSettings"),
        (retrieval.retrieve, "PrecedentSettings"),
        (elastic.ElasticsearchIndex.from_settings, "PrecedentSettings"),
        (anthropic.AnthropicLLM.from_settings, "LLMSettings"),
        (openai.OpenAICompatibleLLM.from_settings, "LLMSettings"),
        (routed.routed, "LLMSettings"),
        (budget.round_stop, "JurySettings"),
        (prompts.rules_for, "JurySettings"),
    ],
)
def test_a_room_takes_the_section_it_needs_not_the_whole_settings(fn, section):
    assert _annotation(fn) == section


def test_a_function_typed_with_a_section_accepts_the_whole_settings():
    case = DisputeCase.model_validate_json((EXAMPLES / "appl-001-kettle-crack.json").read_text())
    whole = Settings(llm_backend="offline", intake_limits={"max_text_chars": 10})
    assert isinstance(whole, EvidenceSettings)
    with pytest.raises(intake.Rejected) as err:
        intake.admit(case, whole)
    assert err.value.reason == "text_too_long"
    assert intake.admit(case, EvidenceSettings(media_root=EXAMPLES.parent)) is not None
