"""Courts sized to the stakes (jury/stakes.py): the tier is chosen by the order amount in the base
currency and the category; a currency without a rate sits before its category's highest tier, noted
on the verdict; the court sizes the jury, its rounds, its model and its verifier, and the verdict
records which court sat. No policy: the default court, the jury the settings describe."""

from __future__ import annotations

import functools
from collections import Counter
from decimal import Decimal

from cyberjurors.jury.rounds import Jury
from cyberjurors.jury.stages import NoPrecedents, clues_stage, focus_stage, judge, round_stage
from cyberjurors.jury.stakes import choose, court_of, is_paper_court, sitting
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.schemas import AppealBrief, CaseFile, DisputeCase, JustificationDraft, VerificationDraft

from ...factories import METADATA, case, settings
from ..streams.test_app_handlers import NOW
from .test_escalation import jury

POLICY = [
    {"name": "small-claims", "max_amount": "50", "jurors": 5, "rounds": 1, "model": "claude-haiku-4-5"},
    {"name": "standard", "min_amount": "50", "max_amount": "1000"},
    {"name": "high-value", "min_amount": "1000", "verifier": True},
    # food of any value sits before its own court: the highest tier of food is this one
    {"name": "food", "categories": ["food"], "jurors": 9},
]
conf = functools.partial(
    settings,
    court_base_currency="EUR",
    court_rates={"USD": "0.5"},
    warm_cache_first=False,
    early_stop=0,  # every round its court allows: the rounds used are the court's
)
ALL_GOODS = [{**t, "categories": ["appliances", "clothing", "digital", "others"]} for t in POLICY[:3]]
courts = functools.partial(conf, court_policy=[*ALL_GOODS, POLICY[3]])


def order(amount: str, currency: str = "EUR", category: str = "clothing") -> DisputeCase:
    return case("st-1", metadata={**METADATA, "order_amount": amount, "currency": currency, "category": category})


def test_the_tier_is_chosen_by_the_amount_in_the_base_currency_and_the_category():
    s = courts()
    assert choose(order("49.99"), s).name == "small-claims"
    assert choose(order("50"), s).name == "standard"  # min_amount is inclusive, max_amount exclusive
    assert choose(order("999.99"), s).name == "standard"
    assert choose(order("1000"), s).name == "high-value"
    converted = choose(order("99.98", "USD"), s)  # 49.99 EUR at 0.5 EUR per USD
    assert (converted.name, converted.order_amount, converted.base_currency) == (
        "small-claims",
        Decimal("49.99"),
        "EUR",
    )
    assert choose(order("100", "USD"), s).name == "standard"
    assert choose(order("5", category="food"), s).name == "food"


def test_a_currency_without_a_rate_sits_before_the_highest_tier_of_its_category_with_a_note():
    s = courts()
    unrated = choose(order("3", "SEK"), s)  # a few crowns: small claims, had it a rate
    assert (unrated.name, unrated.order_amount) == ("high-value", None)
    assert unrated.note == (
        "no rate for SEK in court_rates: the order's value in EUR is unknown, so the highest court for clothing, "
        "'high-value', sat"
    )
    assert choose(order("3", "SEK", "food"), s).name == "food"  # the highest of the case's own category
    assert choose(order("3", "EUR"), s).note is None


async def test_the_verdict_says_which_court_sat_and_why_when_the_currency_had_no_rate():
    verdict = await judge(order("3", "SEK"), verifying(), courts())
    assert verdict.court is not None and verdict.court.name == "high-value"
    assert any("no rate for SEK in court_rates" in p for p in verdict.problems)
    plain = await judge(order("3", "EUR"), verifying(), courts())
    assert plain.court is not None and plain.court.name == "small-claims"
    assert not any("court_rates" in p for p in plain.problems)


def verifying() -> ScriptedLLM:
    """The scripted jury of test_escalation (the first 9 jurors for the seller) whose verifier passes every draft."""
    answer = jury(sellers=9).answer

    def respond(request, output_type):  # type: ignore[no-untyped-def]
        if output_type is VerificationDraft:
            return VerificationDraft(decision="pass", feedback="", untraceable_claims=[])
        if output_type is JustificationDraft:
            return JustificationDraft(justification="the round [s1]")
        return answer(request, output_type)

    return ScriptedLLM(respond)


async def test_each_court_seats_its_jurors_rounds_model_and_verifier():
    small_llm = verifying()
    small = await judge(order("10"), small_llm, courts())
    assert (small.votes.total, small.rounds_used, small.court.jurors) == (5, 1, 5)
    assert {r.model for r in small_llm.calls} == {"claude-haiku-4-5"}  # every call, stages I-II included
    assert "verify" not in small_llm.roles()
    standard_llm = verifying()
    standard = await judge(order("100"), standard_llm, courts())
    assert (standard.votes.total, standard.rounds_used, standard.court.name) == (17, 3, "standard")
    assert {r.model for r in standard_llm.calls} == {"claude-sonnet-5-5"} and "verify" not in standard_llm.roles()
    high_llm = verifying()
    high = await judge(order("5000"), high_llm, courts())
    assert (high.votes.total, high.court.verifier, high.verification.status) == (17, True, "passed")
    assert Counter(high_llm.roles())["verify"] == 1
    food = await judge(order("5", category="food"), verifying(), courts())
    assert (food.votes.total, food.court.name) == (9, "food")


async def test_without_a_policy_the_default_court_is_the_jury_the_settings_describe():
    llm = verifying()
    verdict = await judge(order("10"), llm, conf())
    court = verdict.court
    assert court is not None and (court.name, court.jurors, court.rounds, court.model) == ("default", 17, 3, None)
    assert is_paper_court(court) and verdict.votes.total == 17 and verdict.rounds_used == 3
    assert not is_paper_court(court.model_copy(update={"jurors": 5}))
    nine = await judge(order("10"), verifying(), conf(jurors=9, rounds=2))
    assert (nine.court.jurors, nine.votes.total, nine.rounds_used, is_paper_court(nine.court)) == (9, 9, 2, False)


async def test_a_case_keeps_the_court_seated_at_stage_i_when_the_policy_changes_in_flight():
    llm = jury(sellers=9)
    s = courts()
    case_file = await focus_stage(CaseFile(case=order("10"), received_at=NOW), llm, s)
    assert case_file.court is not None and case_file.court.name == "small-claims"
    # a worker restarted with another policy: this case's court is the one it started before
    later = conf(court_policy=[{"name": "everything", "jurors": 3}])
    case_file = await clues_stage(case_file, llm, later, NoPrecedents())
    case_file = await round_stage(case_file, Jury.from_settings(later), llm, later)
    assert len(case_file.rounds[-1].ballots) == 5 and sitting(later, case_file).jurors == 5


async def test_a_second_instance_sits_before_the_appeal_court_whatever_court_sat_first():
    s = courts()
    first = await judge(order("10"), jury(sellers=17), s)
    record = CaseFile(case=order("10"), received_at=NOW, court=first.court)
    brief = AppealBrief(appeal_id="a" * 64, appellant="buyer", grounds="g", filed_at=NOW, first_instance=first)
    appealed = record.model_copy(update={"appeal": brief})
    court = court_of(appealed, s)
    assert (court.name, court.jurors, court.rounds, court.model) == ("appeal", 31, 3, None)
    assert court.order_amount == Decimal("10") and sitting(s, appealed) is s  # the configured rounds and models
