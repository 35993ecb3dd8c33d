"""Each party's own words back (issue 39 item 5), the substitution alone: over placeholder maps and
letter texts that hypothesis writes, with Faker's values, a letter to a party shows every value that
party wrote in place of its placeholder (in the form they first wrote it), never a value only the
other party wrote, and keeps the other party's placeholders masked. Through ``minimise`` on a case,
and the letter record as a whole. The stage that stores the map and sends the letters:
tests/unit/streams/test_letters.py; on a real worker: tests/integration/test_letters.py."""

from __future__ import annotations

import functools

from faker import Faker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cyberjurors.evidence.privacy import minimise
from cyberjurors.jury.own_words import PlaceholderMap, Written, restored, restored_text
from cyberjurors.schemas import PARTIES, LetterCheck, LetterStatement, PartyLetter, RemovedStatement, Usage, now

from ... import factories

KINDS = ("phone", "email", "card", "iban", "address", "person")
OTHER = {"buyer": "seller", "seller": "buyer"}


@functools.cache
def fakers() -> list[Faker]:
    return [Faker(locale) for locale in ("en_GB", "de_DE", "fr_FR", "pl_PL", "pt_BR")]


def faked(kind: str, seed: int) -> str:
    fake = fakers()[seed % len(fakers())]
    fake.seed_instance(seed)
    value = {
        "phone": fake.phone_number,
        "email": fake.email,
        "card": fake.credit_card_number,
        "iban": fake.iban,
        "address": lambda: fake.address().replace("\n", ", "),
        "person": fake.name,
    }[kind]()
    return value


@st.composite
def maps(draw: st.DrawFn) -> tuple[PlaceholderMap, dict[str, dict[str, list[str]]]]:
    """A placeholder map, each placeholder written by the buyer, the seller or both, in one form or
    more; every form tagged with who wrote it, so a form in a letter tells whose it is."""
    values: dict[str, Written] = {}
    counts = dict.fromkeys(KINDS, 0)
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(KINDS))
        counts[kind] += 1
        placeholder = f"[{kind.upper()}_{counts[kind]}]"
        writers = draw(st.sampled_from([("buyer",), ("seller",), ("buyer", "seller")]))
        written = {}
        for party in writers:
            forms = draw(st.integers(1, 3))
            seeds = draw(st.lists(st.integers(0, 10**6), min_size=forms, max_size=forms, unique=True))
            written[party] = [f"<{party}:{placeholder[1:-1]}:{i}> {faked(kind, s)}" for i, s in enumerate(seeds)]
        values[placeholder] = Written(kind=kind, written=written)
    placeholders = PlaceholderMap(values=values)
    return placeholders, {p: dict(w.written) for p, w in values.items()}


FILLER = st.text(st.characters(codec="utf-8", exclude_characters="[]<>"), max_size=12)


@st.composite
def letters_for(draw: st.DrawFn) -> tuple[PlaceholderMap, str, list[str]]:
    """A map, and letter text that writes its placeholders (some more than once, some not at all)
    between filler text, and placeholders of no map (the model's own, or a party's typed and escaped)."""
    placeholders, _ = draw(maps())
    pool = [*placeholders.values, "[PHONE_99]", "(ADDRESS_1)", "[b1]"]
    parts = draw(st.lists(st.sampled_from(pool), max_size=12))
    filler = draw(st.lists(FILLER, min_size=len(parts) + 1, max_size=len(parts) + 1))
    text = "".join(f + p for f, p in zip(filler, parts, strict=False)) + filler[-1]
    return placeholders, text, parts


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(letters_for(), st.sampled_from(PARTIES))
def test_a_letter_shows_its_addressee_s_own_values_and_only_those(found, party):
    placeholders, text, parts = found
    shown = restored_text(text, placeholders.own(party))
    for placeholder, value in placeholders.values.items():
        mine, theirs = value.written.get(party), value.written.get(OTHER[party], [])
        if placeholder not in parts:
            assert not any(f in shown for f in [*(mine or []), *theirs])
            continue
        if mine:  # the addressee's own, in the first form they wrote it: no placeholder of theirs left
            assert placeholder not in shown and mine[0] in shown
            assert shown.count(mine[0]) == parts.count(placeholder)
        else:  # only the other party wrote it: it stays masked
            assert shown.count(placeholder) == parts.count(placeholder)
        assert not any(f in shown for f in theirs)  # a value written by both: the addressee's form, never theirs
    assert f"<{OTHER[party]}:" not in shown  # nothing the other party wrote, in any form
    # what is no placeholder of the map stays as the model wrote it
    assert shown.count("[PHONE_99]") == parts.count("[PHONE_99]") and shown.count("[b1]") == parts.count("[b1]")
    assert shown.count("(ADDRESS_1)") >= parts.count("(ADDRESS_1)")


@settings(max_examples=150, deadline=None)
@given(maps())
def test_a_value_that_reads_as_a_placeholder_is_not_replaced_again(found):
    placeholders, _ = found
    # the buyer's first value written as another placeholder of the map: one pass, so it stays as written
    first, *rest = placeholders.values
    if not rest:
        return
    tricky = {first: rest[0]}
    assert restored_text(f"a {first} b", tricky) == f"a {rest[0]} b"


def letter(party: str, text: str) -> PartyLetter:
    statements = [LetterStatement(section="evidence", text=text, cites=["b1"])]
    return PartyLetter(
        letter_id="l-1",
        case_id="c-1",
        verdict_id="v-1",
        instance=1,
        party=party,
        locale="en",
        locale_source="case",
        outcome="won",
        remedy=f"a refund to {text[:40]}",
        final=False,
        subject="Your dispute",
        body=text,
        statements=statements,
        check=LetterCheck(
            status="corrected", checked_by="ids", removed=[RemovedStatement(text=text, reason="uncited")]
        ),
        backend="offline",
        model="offline",
        tokens=Usage(),
        written_at=now(),
    )


@settings(max_examples=100, deadline=None)
@given(letters_for(), st.sampled_from(PARTIES))
def test_every_text_of_the_letter_record_gets_its_addressee_s_own_values(found, party):
    placeholders, text, _ = found
    text = text[:500]
    masked = letter(party, text)
    shown = restored(masked, placeholders)
    own = placeholders.own(party)
    assert shown.body == restored_text(masked.body, own)
    restored_statement = restored_text(masked.statements[0].text, own)  # cut at its bound, as readers cut it
    assert shown.statements[0].text == (
        restored_statement if len(restored_statement) <= 600 else restored_statement[:599] + "…"
    )
    assert shown.check.removed[0].text == restored_text(text, own)
    assert shown.remedy == restored_text(masked.remedy, own)
    assert f"<{OTHER[party]}:" not in shown.model_dump_json()
    if not any(p in text for p in own):
        assert shown is masked  # nothing of the addressee's masked: the same letter, the same bytes


def test_through_minimise_the_buyer_gets_their_address_back_and_never_the_seller_s_phone():
    address = "221B Baker Street, London NW1 6XE"
    phone = "+44 7911 123456"
    shared = "14 Elm Road, Leeds LS1 4AB"
    case = factories.case(
        buyer=f"I live at {address}; the parcel went to {shared} instead.",
        seller=f"Call me on {phone}. We sent it to {shared} as the label says.",
    )
    done = minimise(case, factories.settings())
    placeholders = PlaceholderMap.of(done.values)
    texts = [i.text or "" for r in done.case.rounds for i in r.items]
    letter_text = " ".join(texts)  # a letter quoting both sides, as the jury read them
    assert address not in letter_text and phone not in letter_text  # the model never read a value
    to_buyer = restored_text(letter_text, placeholders.own("buyer"))
    to_seller = restored_text(letter_text, placeholders.own("seller"))
    assert address in to_buyer and phone not in to_buyer and shared in to_buyer
    assert phone in to_seller and address not in to_seller and shared in to_seller
    [phone_placeholder] = [p for p, v in done.values.items() if v.kind == "phone"]
    assert phone_placeholder in to_buyer  # masked for the buyer, who never wrote it
    # the buyer's own text comes back as they wrote it, the seller's with only the address both wrote
    assert f"I live at {address}; the parcel went to {shared} instead." in to_buyer
    assert f"Call me on {phone_placeholder}. We sent it to {shared}" in to_buyer
