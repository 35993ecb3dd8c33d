"""The court policy's settings (config/courts.py): a policy whose tiers overlap or leave amounts
uncovered is refused when the settings load, the error naming the gap or the overlap, its tiers and
categories; rates and names are checked; no policy is the default."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from cyberjurors.config import CourtSettings, Settings

from ...factories import settings

SMALL = {"name": "small-claims", "max_amount": "50", "jurors": 5, "rounds": 1}
STANDARD = {"name": "standard", "min_amount": "50", "max_amount": "1000"}
HIGH = {"name": "high-value", "min_amount": "1000", "verifier": True}


def refusal(*tiers: dict, **over: object) -> str:
    with pytest.raises(ValidationError) as err:
        CourtSettings(court_policy=list(tiers), **over)
    return str(err.value)


def test_a_policy_covering_every_amount_once_loads_and_no_policy_is_the_default():
    assert [t.name for t in settings(court_policy=[SMALL, STANDARD, HIGH]).court_policy] == [
        "small-claims",
        "standard",
        "high-value",
    ]
    assert Settings(llm_backend="offline").court_policy == []  # one court: the jury the settings describe


def test_tiers_that_overlap_are_refused_naming_both_and_the_amounts():
    said = refusal(SMALL, {**STANDARD, "min_amount": "40"}, HIGH)
    assert "tiers 'small-claims' and 'standard' overlap from 40 USD to 50 USD for every category" in said
    # a tier that starts inside another and ends beyond it, in one category only
    said = refusal(SMALL, STANDARD, HIGH, {"name": "food-bulk", "min_amount": "900", "categories": ["food"]})
    assert "tiers 'standard' and 'food-bulk' overlap from 900 USD to 1000 USD for food" in said
    assert "tiers 'food-bulk' and 'high-value' overlap from 1000 USD up for food" in said


def test_amounts_no_tier_covers_are_refused_naming_the_gap():
    said = refusal(SMALL, {**STANDARD, "min_amount": "60"}, HIGH, court_base_currency="EUR")
    assert "amounts from 50 EUR to 60 EUR are uncovered (between 'small-claims' and 'standard') for every category" in (
        said
    )
    assert "amounts from 1000 USD up are uncovered (above 'standard') for every category" in refusal(SMALL, STANDARD)
    assert "amounts from 0 USD to 50 USD are uncovered (below 'standard')" in refusal(STANDARD, HIGH)
    # a category left without any tier
    said = refusal({"name": "goods", "categories": ["appliances", "clothing", "digital", "others"]})
    assert "no tier sits on any amount for food" in said


def test_the_refusal_stops_the_settings_from_loading_and_lists_every_problem_at_once():
    with pytest.raises(ValidationError) as err:
        settings(court_policy=[SMALL, {**STANDARD, "min_amount": "40"}])
    said = str(err.value)
    assert "court_policy: " in said and "overlap from 40 USD to 50 USD" in said and "from 1000 USD up" in said


def test_names_bands_and_rates_are_checked():
    assert "names 'standard' more than once" in refusal(SMALL, STANDARD, {**HIGH, "name": "standard"})
    assert "max_amount 50 must be above min_amount 50" in refusal({"name": "empty", "min_amount": 50, "max_amount": 50})
    assert "the service names a court 'default' itself" in refusal({"name": "default"})
    assert "rate of 2: it is 1 by definition" in refusal(court_rates={"USD": 2})
    assert "greater than 0" in refusal(court_rates={"EUR": 0})
    assert "not an ISO 4217 currency code" in refusal(court_rates={"XYZ": 1})


def test_a_policy_comes_from_a_settings_file_and_the_environment(tmp_path, monkeypatch):
    toml = tmp_path / "courts.toml"
    toml.write_text(
        'court_base_currency = "EUR"\ncourt_rates = { USD = "0.93" }\n'
        '[[court_policy]]\nname = "small-claims"\nmax_amount = 60\njurors = 5\n'
        '[[court_policy]]\nname = "standard"\nmin_amount = 60\n'
    )
    monkeypatch.setenv("CYBERJURORS_SETTINGS_FILE", str(toml))
    loaded = Settings(llm_backend="offline")
    assert [(t.name, t.jurors) for t in loaded.court_policy] == [("small-claims", 5), ("standard", None)]
    assert str(loaded.court_rates["USD"]) == "0.93"
    monkeypatch.setenv("CYBERJURORS_COURT_POLICY", '[{"name": "one"}]')
    assert [t.name for t in Settings(llm_backend="offline").court_policy] == ["one"]


def test_a_tiers_model_is_checked_and_routed_like_any_model_setting():
    with pytest.raises(ValidationError, match=r"a model named openai:\.\.\. needs OPENAI_BASE_URL"):
        settings(court_policy=[{"name": "all", "model": "openai:gpt-5-mini"}])
    tiered = settings(court_policy=[{"name": "all", "model": "claude-haiku-4-5"}])
    assert "claude-haiku-4-5" in tiered.model_specs()
    assert settings(court_policy=[{**SMALL, "rounds": 4}, {**STANDARD, "max_amount": None}]).most_rounds == 4


def test_the_example_policy_loads(monkeypatch):
    from ...conftest import EXAMPLES

    monkeypatch.setenv("CYBERJURORS_SETTINGS_FILE", str(EXAMPLES / "courts.toml"))
    loaded = Settings(llm_backend="offline")
    assert [t.name for t in loaded.court_policy] == ["small-claims", "standard", "high-value"]
    assert loaded.court_base_currency == "EUR" and "SEK" not in loaded.court_rates  # the rule's example
