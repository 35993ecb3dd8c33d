"""The settings issue 41 removed are still accepted for one release, each onto its replacement with a
warning naming it: by keyword, by CYBERJURORS_* variable, in the settings file and in model_copy."""

from __future__ import annotations

from pathlib import Path

import pytest

from cyberjurors.config import Settings
from cyberjurors.config.deprecated import RENAMED


def offline(**given: object) -> Settings:
    return Settings(llm_backend="offline", **given)


def test_every_removed_name_is_no_setting_and_every_replacement_resolves() -> None:
    for old, new in RENAMED.items():
        assert old not in Settings.model_fields, old
        assert new.split(".")[0] in Settings.model_fields, new


# --- llm roles ---------------------------------------------------------------------------------


def test_a_role_s_model_setting_lands_in_llm_roles_with_its_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"model_judge is deprecated .* use llm_roles\.judge\.model"):
        settings = offline(model_judge="claude-opus-4-5")
    assert settings.model_for("judge") == "claude-opus-4-5"
    assert settings.model_for("juror") == settings.model  # the others unmoved
    assert settings.deprecations == [
        "setting model_judge is deprecated and will be removed in the next release: use llm_roles.judge.model"
    ]


def test_the_global_effort_and_thinking_become_llm_roles_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CYBERJURORS_LLM_EFFORT", "max")
    monkeypatch.setenv("cyberjurors_llm_thinking_budget", "2000")  # names are read whatever their case
    with pytest.warns(DeprecationWarning, match=r"llm_effort .* use llm_roles\.default\.effort"):
        settings = offline(llm_roles={"judge": {"effort": "low"}})
    assert settings.call_for("juror").effort == "max" and settings.call_for("juror").thinking_budget == 2000
    assert settings.call_for("judge").effort == "low"  # a role's own entry still beats the default
    assert {n.split()[1] for n in settings.deprecations} == {"llm_effort", "llm_thinking_budget"}


def test_the_new_name_wins_over_the_old_and_the_warning_says_so() -> None:
    with pytest.warns(DeprecationWarning, match="llm_roles.focus.model is set too and wins, so model_focus is ignored"):
        settings = offline(model_focus="old", llm_roles={"focus": {"model": "new"}})
    assert settings.model_for("focus") == "new"


def test_old_names_in_the_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toml = tmp_path / "cyberjurors.toml"
    toml.write_text('model_letter = "claude-haiku-4-5"\nmax_output_tokens = 777\n')
    monkeypatch.setenv("CYBERJURORS_SETTINGS_FILE", str(toml))
    with pytest.warns(DeprecationWarning, match="max_output_tokens"):
        settings = offline()
    assert settings.model_for("letter") == "claude-haiku-4-5"
    assert settings.call_for("select").max_output_tokens == 777


def test_old_names_in_model_copy_move_too_and_unknown_names_are_refused() -> None:
    settings = offline(llm_roles={"judge": {"effort": "high", "model": "j"}})
    with pytest.warns(DeprecationWarning, match="llm_thinking"):
        copied = settings.model_copy(update={"llm_thinking": "off", "model_verify": "v"})
    assert copied.call_for("judge").thinking == "off" and copied.call_for("judge").effort == "high"
    assert (copied.model_for("judge"), copied.model_for("verify")) == ("j", "v")
    assert settings.model_for("verify") == settings.model  # the original untouched
    with pytest.raises(ValueError, match="no such setting: model_jurors"):
        settings.model_copy(update={"model_jurors": "x"})


def test_the_default_entry_takes_no_model() -> None:
    with pytest.raises(ValueError, match="default entry takes no model"):
        offline(llm_roles={"default": {"model": "x"}})


# --- intake limits -----------------------------------------------------------------------------


def test_the_intake_caps_land_in_intake_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CYBERJURORS_MAX_VIDEO_FRAMES", "1200")
    with pytest.warns(DeprecationWarning, match=r"max_event_bytes .* use intake_limits\.max_event_bytes"):
        settings = offline(max_event_bytes=500_000, intake_limits={"max_case_items": 9})
    limits = settings.intake_limits
    assert (limits.max_event_bytes, limits.max_video_frames, limits.max_case_items) == (500_000, 1200, 9)
    assert limits.max_case_bytes == 400_000  # the others keep their defaults
    assert {n.split()[1] for n in settings.deprecations} == {"max_event_bytes", "max_video_frames"}


def test_an_old_cap_is_checked_as_the_new_one() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="max_case_bytes must be below"):
        offline(max_case_bytes=2_000_000)
    settings = offline()
    with pytest.warns(DeprecationWarning, match="max_text_chars"):
        copied = settings.model_copy(update={"max_text_chars": 5})
    assert copied.intake_limits.max_text_chars == 5 and copied.intake_limits.max_media_items == 40


# --- retention ---------------------------------------------------------------------------------


def test_one_period_sets_every_case_lifetime_and_an_override_sets_one() -> None:
    settings = offline(retention_period=3 * 86400, retention={"dlq_s": 5 * 86400})
    assert (settings.state_retention_s, settings.topic_retention_s, settings.intake_draft_ttl_s) == (3 * 86400,) * 3
    assert settings.dlq_retention_s == 5 * 86400 and settings.media_retention == 8 * 86400
    assert settings.console_retention_s is None and settings.compaction_lag_s == 86400


def test_the_retention_settings_land_in_retention(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CYBERJURORS_DLQ_RETENTION_S", "1209600")
    toml = tmp_path / "cyberjurors.toml"
    toml.write_text("console_retention_s = 7776000\n")
    monkeypatch.setenv("CYBERJURORS_SETTINGS_FILE", str(toml))
    with pytest.warns(DeprecationWarning, match=r"state_retention_s .* use retention\.state_s"):
        settings = offline(state_retention_s=3600)
    assert (settings.state_retention_s, settings.dlq_retention_s) == (3600, 1209600)
    assert settings.console_retention_s == 7776000 and settings.retention.console_s == 7776000
    assert {n.split()[1] for n in settings.deprecations} == {
        "state_retention_s",
        "dlq_retention_s",
        "console_retention_s",
    }
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match=r"retention\.media_s must be at least"):
        offline(media_retention_s=60, state_retention_s=3600)


# --- kafka profile -----------------------------------------------------------------------------


def test_the_profile_sets_the_liveness_timeouts_and_an_override_sets_one() -> None:
    local, cluster = offline(), offline(kafka_profile="cluster", kafka_timeouts={"stop_deadline_s": 40})
    assert (local.session_timeout_s, local.commit_interval_s, local.kafka_fetch_max_wait_ms) == (6, 0.2, 50)
    assert (cluster.session_timeout_s, cluster.kafka_fetch_max_wait_ms, cluster.stop_deadline_s) == (30, 500, 40)


def test_the_timeouts_land_in_kafka_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CYBERJURORS_KAFKA_FETCH_MAX_WAIT_MS", "700")
    with pytest.warns(DeprecationWarning, match=r"session_timeout_s .* use kafka_timeouts\.session_timeout_s"):
        settings = offline(kafka_profile="cluster", session_timeout_s=45)
    assert (settings.session_timeout_s, settings.kafka_fetch_max_wait_ms, settings.heartbeat_interval_s) == (45, 700, 3)
    assert {n.split()[1] for n in settings.deprecations} == {"session_timeout_s", "kafka_fetch_max_wait_ms"}
