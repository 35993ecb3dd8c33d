"""Masking proven by properties (issue 39 item 1): over party text that hypothesis writes, with Faker's
values of every kind mixed in (next to each other, inside brackets, among Unicode, beside typed
look-alike placeholders), ``minimise`` always returns, masks nothing more when run on what it gave,
numbers the placeholders of each kind 1..n with no gap, gives one value one placeholder, and leaves
no value it found in the text of the party that wrote it."""

from __future__ import annotations

import re

from faker import Faker
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cyberjurors.config import EvidenceSettings
from cyberjurors.evidence import detectors, privacy
from cyberjurors.evidence.privacy import minimise

from ... import factories
from ...privacy_corpus import LOCALES, probes

# a pool of values of every kind in every locale, drawn once: hypothesis picks and places them
POOL = sorted(
    {
        p.value
        for locale in LOCALES
        for kind in ("phone", "email", "card", "iban", "person", "address")
        for p in probes(locale, kind, 6, seed=7)
    }
)
NAMES = [f"{Faker('en_GB').first_name()} {Faker('en_GB').last_name()}" for _ in range(4)]
CUES = ["My name is ", "Regards, ", "Mit freundlichen Grüßen\n", "Je m'appelle ", "Mr ", "signed by ", "Nazywam się "]
LOOK_ALIKES = [
    "[PHONE_1]",
    "[phone 2]",
    "[\u0420\u0415RS\u041eN_1]",
    "\uff3bADDRESS_1\uff3d",
    "[EMA\u200bIL_3]",
    "(CARD_1)",
    "[WITHHELD]",
    "[URL_9]",
]
GLUE = ["", " ", "  ", "\n", ", ", "/", "(", ")", "[", "]", "-", ".", "\u200b", "+"]

text_part = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x2FFFF), max_size=12
) | st.sampled_from(
    ["order 12345", "tracking SP 4471 9023 3186 DE", "€1.299,00", "06.10.2026", "https://shop.example/item/"]
)
piece = st.one_of(
    st.sampled_from(POOL),
    st.tuples(st.sampled_from(CUES), st.sampled_from(NAMES)).map("".join),
    st.sampled_from(LOOK_ALIKES),
    text_part,
)
party_text = st.lists(st.tuples(piece, st.sampled_from(GLUE)), min_size=1, max_size=7).map(
    lambda parts: "".join(p + g for p, g in parts)
)


def case_of(buyer: list[str], seller: list[str], locale: str) -> object:
    items = [{"id": f"b{i}", "kind": "text", "text": t} for i, t in enumerate(buyer) if t.strip()]
    tag, currency, _, _ = LOCALES[locale]
    metadata = {**factories.METADATA, "locale": tag, "currency": currency}
    rounds = []
    if items:
        rounds.append({"party": "buyer", "round": 1, "items": items})
    s_items = [{"id": f"s{i}", "kind": "text", "text": t} for i, t in enumerate(seller) if t.strip()]
    if s_items:
        rounds.append({"party": "seller", "round": 1, "items": s_items})
    return factories.case("prop", rounds=rounds, metadata=metadata) if rounds else None


cases = st.builds(
    case_of,
    st.lists(party_text, min_size=1, max_size=3),
    st.lists(party_text, min_size=0, max_size=3),
    st.sampled_from(sorted(LOCALES)),
).filter(lambda c: c is not None)

SETTINGS = EvidenceSettings()
PROPERTIES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def texts(case) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(t.author or "", t.text) for t in privacy._texts(case, ())]


@PROPERTIES
@given(cases)
def test_minimise_always_returns_and_withholds_nothing_it_can_read(case):  # type: ignore[no-untyped-def]
    done = minimise(case, SETTINGS)
    assert done.report is not None
    assert done.report.withheld == []


@PROPERTIES
@given(cases)
# two numbers side by side, the first also written alone (found by a fresh clone's run of this property)
@example(case_of(["(07949) 768108"], ["(07949) 768108 0114 496 0286"], "de_DE"))
def test_masking_what_minimise_gave_finds_nothing_more(case):  # type: ignore[no-untyped-def]
    once = minimise(case, SETTINGS)
    twice = minimise(once.case, SETTINGS)
    assert twice.report is not None and twice.report.masked == {}
    # all a second pass does is take our placeholders for typed ones
    ours = re.compile(rf"\[({privacy.PLACEHOLDER_BODY}|WITHHELD)\]")
    assert [t for _, t in texts(twice.case)] == [ours.sub(r"(\1)", t) for _, t in texts(once.case)]


@PROPERTIES
@given(cases)
def test_placeholders_are_numbered_one_to_n_per_kind_and_each_stands_for_its_values(case):  # type: ignore[no-untyped-def]
    done = minimise(case, SETTINGS)
    shown = {p for _, t in texts(done.case) for p in privacy.PLACEHOLDER.findall(t)}
    assert shown == set(done.values)
    for kind, masked in (done.report.masked if done.report else {}).items():
        numbers = sorted(int(p[1:-1].rsplit("_", 1)[1]) for p in shown if p.startswith(f"[{kind.upper()}_"))
        assert numbers == list(range(1, masked.values + 1))


@PROPERTIES
@given(cases)
def test_one_value_one_placeholder_and_no_value_found_is_left(case):  # type: ignore[no-untyped-def]
    done = minimise(case, SETTINGS)
    # what privacy.keep_patterns keeps stays as written, a value found elsewhere or not
    keep = [re.compile(p) for p in SETTINGS.privacy.keep_patterns]
    out = [(author, keep_out(keep, t)) for author, t in texts(done.case)]
    keys: dict[str, str] = {}
    for placeholder, value in done.values.items():
        for party, forms in value.written.items():
            for form in forms:
                where = [t for author, t in out if value.kind != "person" or author == party]
                assert not any(re.search(rf"(?<!\w){re.escape(form)}(?!\w)", t) for t in where), (placeholder, form)
                if value.kind in ("email", "card", "iban"):
                    key = _key(value.kind, form)
                    assert keys.setdefault(key, placeholder) == placeholder  # two placeholders, one value
                    assert {_key(value.kind, f) for fs in value.written.values() for f in fs} == {key}


def keep_out(keep: list[re.Pattern[str]], text: str) -> str:
    for pattern in keep:
        text = pattern.sub(lambda m: "\x00" * len(m.group()), text)
    return text


def _key(kind: str, form: str) -> str:
    found = {"email": detectors.emails, "card": detectors.cards, "iban": detectors.ibans}[kind](form)
    return next(iter(found)).key


@PROPERTIES
@given(st.sampled_from(POOL), st.sampled_from(sorted(LOCALES)))
def test_a_value_standing_alone_between_spaces_is_always_masked(value, locale):  # type: ignore[no-untyped-def]
    # e-mail addresses, cards and IBANs need no context; every value of the pool is found on its own
    # line in its case's locale, where its kind's detector is a checksum or a registry
    case = case_of([f"see \n{value}\n end"], [], locale)
    done = minimise(case, SETTINGS)
    text = done.case.items("buyer")[0].text or ""
    kind = next((k for k in ("email", "card", "iban") if any(True for _ in getattr(detectors, f"{k}s")(value))), None)
    if kind is not None:
        assert value not in text and f"[{kind.upper()}_1]" in text
