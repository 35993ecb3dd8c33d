"""The settings issue 41 removed are still accepted for one release, each onto its replacement with a
warning naming it: by keyword, by CYBERJURORS_* variable, in the settings file and in model_copy."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from cyberjurors.config import PIPELINES, PipelineOverrides, Settings
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


# --- pipeline ----------------------------------------------------------------------------------


def test_the_pipeline_names_a_rung_s_switches_and_an_override_sets_one() -> None:
    full, chateval = offline(), offline(pipeline="chateval", pipeline_overrides={"round_summary": True})
    assert (full.focus_stage, full.verdict_rules, full.round_summary, full.verifies) == (True, True, True, False)
    assert (chateval.focus_stage, chateval.social_graph, chateval.round_summary) == (False, "complete", True)
    juris = offline(pipeline="juris")
    assert (juris.justification, juris.verifier, juris.deliberation) == ("juris", True, "jury")
    with pytest.raises(ValueError, match="pipeline"):
        offline(pipeline="paper")


def test_every_rung_of_the_ladder_is_a_pipeline_and_sets_no_removed_name() -> None:
    from cyberjurors.evaluation.ladder import LADDER, REFERENCES

    base = offline(pipeline_overrides={"round_summary": False, "deliberation": "court"})
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # a removed name in a rung's overrides would warn
        for ablation in [*LADDER, *REFERENCES]:
            s = ablation.settings(base)
            assert s.pipeline == ablation.key and s.pipeline_overrides == PipelineOverrides(), ablation.key
            assert s.deliberation == ("court" if ablation.key == "agentscourt" else "jury"), ablation.key
    assert set(PIPELINES) == {"full", *(a.key for a in [*LADDER, *REFERENCES])}


def test_the_switches_land_in_pipeline_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CYBERJURORS_ROUND_SUMMARY", "false")
    toml = tmp_path / "cyberjurors.toml"
    toml.write_text('justification = "juris"\n')
    monkeypatch.setenv("CYBERJURORS_SETTINGS_FILE", str(toml))
    with pytest.warns(DeprecationWarning, match=r"focus_stage .* use pipeline_overrides\.focus_stage"):
        settings = offline(focus_stage=False, pipeline_overrides={"verifier": True})
    assert (settings.focus_stage, settings.round_summary, settings.justification) == (False, False, "juris")
    assert settings.verifier and settings.verdict_rules  # the one given new, the other the pipeline's
    assert {n.split()[1] for n in settings.deprecations} == {"focus_stage", "round_summary", "justification"}
    with pytest.warns(DeprecationWarning, match="per_juror_stages"):
        copied = settings.model_copy(update={"per_juror_stages": True})
    assert copied.per_juror_stages and copied.verifier and not copied.focus_stage  # laid over what was set


def test_a_mapping_for_a_nested_setting_in_model_copy_is_laid_over_and_checked() -> None:
    settings = offline(pipeline_overrides={"verifier": True})
    copied = settings.model_copy(update={"pipeline_overrides": {"round_summary": False}})
    assert isinstance(copied.pipeline_overrides, PipelineOverrides)
    assert copied.verifier and not copied.round_summary
    with pytest.raises(ValueError, match="social_graph"):
        settings.model_copy(update={"pipeline_overrides": {"social_graph": "ring"}})


# --- early_stop --------------------------------------------------------------------------------


def test_early_stop_zero_is_off_and_a_share_at_or_below_half_is_refused() -> None:
    assert offline(early_stop=0).early_stop == 0 and offline().early_stop == 0.8
    with pytest.raises(ValueError, match=r"majority share above 0\.5, or 0"):
        offline(early_stop=0.5)


def test_early_stopping_false_becomes_early_stop_zero_and_true_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.warns(DeprecationWarning, match="early_stopping is deprecated .* use early_stop"):
        assert offline(early_stopping=False).early_stop == 0
    monkeypatch.setenv("CYBERJURORS_EARLY_STOPPING", "true")
    with pytest.warns(DeprecationWarning, match="early_stopping"):
        settings = offline(early_stop=0.9)
    assert settings.early_stop == 0.9 and settings.deprecations[0].endswith("so early_stopping is ignored")
    monkeypatch.setenv("CYBERJURORS_EARLY_STOPPING", "no")
    with pytest.warns(DeprecationWarning):
        assert offline().early_stop == 0  # read as a boolean is: no, off, 0, false
    with pytest.warns(DeprecationWarning):
        assert settings.model_copy(update={"early_stopping": False}).early_stop == 0


# --- settings moved into a nested one as they were: by keyword, by variable, in model_copy --------

# each group's old names, a value of each (read back the same in the new place)
MOVED: list[tuple[str, object]] = [
    ("batch_poll_s", 5.0),
    ("batch_max_cases", 40),
    ("kafka_security_protocol", "SASL_SSL"),
    ("kafka_sasl_password", "s3cret"),
    ("kafka_ssl_cafile", Path("/etc/kafka/ca.pem")),
    ("embedding_model_dir", Path("/models/minilm")),
    ("embedding_threads", 2),
    ("elasticsearch_index_prefix", "staging"),
    ("elasticsearch_password", "p@ss"),
    ("privacy_ocr", True),
    ("privacy_ocr_timeout_s", 5.0),
    ("frame_sampling", "events"),
    ("passive_frames_per_video", 4),
    ("graph_seed", 11),
    ("early_evidence_per_case", 5),
    ("qualification_min_accuracy", 0.7),
    ("console_behind_proxy", True),
    ("console_tls_key", Path("/tls/tls.key")),
    ("console_signin_lockout_s", 60.0),
    ("consistency_min_precedents", 3),
    ("juris_voters", 3),
    ("juris_max_sentences", 4),
    ("erasure_dir", Path("/var/lib/cyberjurors/erasures")),
    ("erasure_wait_s", 60.0),
]


def _at(settings: Settings, path: str) -> object:
    here: object = settings
    for part in path.split("."):
        here = getattr(here, part)
    return here


@pytest.mark.parametrize(("old", "value"), MOVED, ids=[old for old, _ in MOVED])
def test_a_moved_setting_lands_in_its_nested_one(old: str, value: object, monkeypatch: pytest.MonkeyPatch) -> None:
    new = RENAMED[old]
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated .* use {re.escape(new)}$"):
        assert _at(offline(**{old: value}), new) == value
    monkeypatch.setenv(f"CYBERJURORS_{old.upper()}", str(value))
    with pytest.warns(DeprecationWarning, match=old):
        settings = offline()
    assert _at(settings, new) == value
    head = new.split(".")[0]
    untouched = {k: v for k, v in getattr(offline(), head).model_dump().items() if k != new.split(".")[1]}
    assert {k: v for k, v in getattr(settings, head).model_dump().items() if k in untouched} == untouched
    monkeypatch.delenv(f"CYBERJURORS_{old.upper()}")
    with pytest.warns(DeprecationWarning, match=old):
        assert _at(offline().model_copy(update={old: value}), new) == value


def test_the_kafka_password_stays_out_of_a_run_s_stored_settings() -> None:
    from cyberjurors.evaluation.runs import public_settings

    stored = public_settings(offline(kafka_auth={"security_protocol": "SASL_SSL", "sasl_password": "s3cret"}))
    assert "sasl_password" not in stored["kafka_auth"] and stored["kafka_auth"]["security_protocol"] == "SASL_SSL"
    assert "s3cret" not in str(stored)


def test_kafka_auth_reaches_the_clients_as_the_old_names_did() -> None:
    from cyberjurors.kafka.cluster import client_options, faust_credentials

    with pytest.warns(DeprecationWarning, match="kafka_sasl_username"):
        settings = offline(
            kafka_sasl_username="cj",
            kafka_auth={"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512"},
        )
    options = client_options(settings)
    assert (options["security_protocol"], options["sasl_mechanism"], options["sasl_plain_username"]) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-512",
        "cj",
    )
    assert options["ssl_context"] is None and faust_credentials(settings).username == "cj"  # type: ignore[union-attr]


def test_the_sentence_transformers_runtime_is_refused_without_its_extra_under_either_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    # as a venv without the torch extra answers
    monkeypatch.setattr(importlib.util, "find_spec", lambda n: None if n == "sentence_transformers" else find_spec(n))
    with pytest.raises(ValueError, match=r"embedding\.runtime=sentence-transformers needs the torch extra"):
        offline(precedent_backend="embedded", embedding={"runtime": "sentence-transformers"})
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="needs the torch extra"):
        offline(precedent_backend="embedded", embedding_runtime="sentence-transformers")


def test_an_old_elasticsearch_name_beats_the_ecosystem_name_as_its_replacement_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ELASTICSEARCH_URL", "http://ecosystem:9200")
    monkeypatch.setenv("ELASTICSEARCH_API_KEY", "ecosystem-key")
    assert offline().elasticsearch.url == "http://ecosystem:9200"  # read where nothing else says
    toml = tmp_path / "cyberjurors.toml"
    toml.write_text('elasticsearch_url = "http://from-file:9200"\n')
    monkeypatch.setenv("CYBERJURORS_SETTINGS_FILE", str(toml))
    with pytest.warns(DeprecationWarning, match=r"elasticsearch_url .* use elasticsearch\.url$"):
        settings = offline()
    assert settings.elasticsearch.url == "http://from-file:9200" and settings.elasticsearch.api_key == "ecosystem-key"
    monkeypatch.setenv("CYBERJURORS_ELASTICSEARCH__URL", "http://new-name:9200")
    with pytest.warns(DeprecationWarning, match="elasticsearch.url is set too and wins"):
        assert offline().elasticsearch.url == "http://new-name:9200"


def test_the_privacy_settings_are_checked_in_their_new_place_under_either_name() -> None:
    with pytest.warns(DeprecationWarning, match=r"privacy_phone_regions .* use privacy\.phone_regions"):
        assert offline(privacy_phone_regions=["DE"]).privacy.phone_regions == ["DE"]
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="not a region phonenumbers knows: UK"):
        offline(privacy_phone_regions=["UK"])
    with pytest.raises(ValueError, match=r"privacy\.keep_patterns: 'order \(' is no regular expression"):
        offline(privacy={"keep_patterns": ["order ("]})
    assert offline(privacy={"mask": []}).privacy.keep_patterns == offline().privacy.keep_patterns  # one by itself


def test_a_worker_is_handed_no_console_tls_key_under_either_name() -> None:
    with pytest.warns(DeprecationWarning, match=r"console_tls_key .* use console_tls\.key"):
        settings = offline(
            console_tls_cert="/tls/tls.crt", console_tls_key="/tls/tls.key", console_proxy={"behind": True}
        )
    worker = settings.for_worker()
    assert worker.console_tls.key is None and settings.console_tls.key == Path("/tls/tls.key")
    assert worker.console_proxy.behind  # what is no secret stays


def test_a_moved_list_given_by_its_old_variable_is_read_as_json_as_a_current_variable_is(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CYBERJURORS_CONSOLE_TRUSTED_PROXIES", '["10.0.0.1", "10.1.0.0/16"]')
    monkeypatch.setenv("CYBERJURORS_KAFKA_SASL_PASSWORD", '["not", "a list"]')  # a string field stays a string
    with pytest.warns(DeprecationWarning, match="console_trusted_proxies"):
        settings = offline()
    assert [str(p) for p in settings.console_proxy.trusted] == ["10.0.0.1", "10.1.0.0/16"]
    assert settings.kafka_auth.sasl_password == '["not", "a list"]'
