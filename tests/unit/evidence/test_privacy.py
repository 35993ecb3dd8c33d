"""Minimisation before the model (issue 30): each detector, the placeholders a case gets, and the
rules a party's text cannot break (a typed placeholder, evidence that is nothing but personal data).

The values are fictional: Ofcom's drama numbers, the card schemes' test numbers, the IBANs of the
registries' own examples, example.org addresses."""

from __future__ import annotations

import functools
import re

import pytest

from cyberjurors.config import EvidenceSettings, PrivacySettings, Settings
from cyberjurors.evidence import detectors, privacy
from cyberjurors.evidence.privacy import minimise
from cyberjurors.schemas import DisputeCase

from ... import factories


def on(**privacy) -> EvidenceSettings:  # type: ignore[no-untyped-def]
    return EvidenceSettings(privacy=PrivacySettings(**{"phone_regions": ["GB", "US", "DE"], **privacy}))


def masked(text: str, **settings) -> str:  # type: ignore[no-untyped-def]
    """One text as the jury sees it, as the buyer's only item of a case."""
    case = factories.case("p-1", [{"id": "b1", "kind": "text", "text": text}])
    return minimise(case, on(**settings)).case.item("b1").text or ""


def kinds(text: str, finder) -> list[str]:  # type: ignore[no-untyped-def]
    return [text[s.start : s.end] for s in finder(text)]


# --- each detector --------------------------------------------------------------------------------

FIVE_WAYS = ["+44 20 7946 0958", "020 7946 0958", "(020) 7946-0958", "+44 (0)20 7946 0958", "0044 20 7946 0958"]


def test_the_same_phone_number_written_five_ways_is_one_placeholder():
    text = "Call " + ", or ".join(FIVE_WAYS) + "."
    assert masked(text) == "Call " + ", or ".join(["[PHONE_1]"] * 5) + "."
    assert {s.key for s in privacy.phones(text, ["GB"])} == {"+442079460958"}


def test_a_national_number_is_read_in_the_first_region_that_reads_it_and_numbers_differ():
    assert kinds("ring (415) 555-2671 or 030 901820", functools.partial(privacy.phones, regions=["US", "DE"])) == [
        "(415) 555-2671",
        "030 901820",
    ]
    # without its region a national number is not found: the setting says where parties may be from
    assert kinds("ring (415) 555-2671", functools.partial(privacy.phones, regions=["GB"])) == []
    assert masked("+1 415-555-2671 then +44 20 7946 0958") == "[PHONE_1] then [PHONE_2]"


def test_numbers_written_side_by_side_are_each_masked_and_the_reading_covering_most_digits_wins():
    # libphonenumber takes the whole stretch for one candidate and rejects it, so neither was found
    text = "(07949) 768108 0114 496 0286"
    assert [s.key for s in privacy.phones(text, ["GB"])] == ["+447949768108", "+441144960286"]
    # in DE the first 15 digits are one valid number, leaving 496 0286 standing; GB reads them all
    assert [s.key for s in privacy.phones(text, ["DE", "GB"])] == ["+447949768108", "+441144960286"]
    assert masked(text) == "[PHONE_1] [PHONE_2]"


def test_a_dotted_date_is_no_phone_number():
    # libphonenumber reads 06.10.2026 as a valid German number (06102 is an area code)
    assert masked("signed on 06.10.2026 at 11:42") == "signed on 06.10.2026 at 11:42"


def test_e_mail_addresses_are_one_value_whatever_their_case():
    assert masked("Write to Jane.Doe+shop@Mail.example.co.uk or jane.doe+shop@mail.example.co.uk.") == (
        "Write to [EMAIL_1] or [EMAIL_1]."
    )
    assert masked("a@b and @handle and x@y.z1") == "a@b and @handle and x@y.z1"  # no domain, no e-mail


def test_card_numbers_are_masked_only_when_their_luhn_check_holds():
    assert masked("Paid with 4111 1111 1111 1111 and 5500-0000-0000-0004.") == "Paid with [CARD_1] and [CARD_2]."
    # one digit off: no card number, whatever it looks like, and left as evidence
    assert masked("Paid with 4111 1111 1111 1112.") == "Paid with 4111 1111 1111 1112."
    assert masked("Paid with 4111111111111111 (4111 1111 1111 1111)") == "Paid with [CARD_1] ([CARD_1])"


def test_a_luhn_valid_number_no_card_scheme_issues_is_not_a_card():
    # 79927398713 is the Luhn check's textbook example; 8-prefixed 16 digits are no scheme's
    assert privacy._card_scheme("8000000000000002") is False
    assert list(privacy.cards("parcel 8000 0000 0000 0002")) == []


def test_ibans_are_masked_when_their_national_format_and_checksum_hold():
    text = "IBAN DE89 3704 0044 0532 0130 00 EUR, GB82WEST12345698765432, not DE89 3704 0044 0532 0130 01."
    assert masked(text) == "IBAN [IBAN_1] EUR, [IBAN_2], not DE89 3704 0044 0532 0130 01."
    assert {s.key for s in privacy.ibans(text)} == {"DE89370400440532013000", "GB82WEST12345698765432"}


def test_street_addresses_and_their_postcode_are_one_value_and_a_shortened_address_is_the_full_one():
    text = "Send it to 221B Baker Street, London NW1 6XE or to Lindenstr. 14B, 10115 Berlin; 221b Baker St."
    assert masked(text) == "Send it to [ADDRESS_1] or to [ADDRESS_2]; [ADDRESS_1]."
    # the street keys alike, its town and postcode aside: "221b Baker St." can only be the London one
    assert [s.key for s in privacy.addresses("221B Baker St. and 221b baker Street")][:1] == ["221b baker street|"]
    # and where two full addresses share the street, the shortened one could be either: a value of its own
    text = "221B Baker Street, London; 221B Baker Street, Leeds; 221B Baker St."
    assert masked(text) == "[ADDRESS_1]; [ADDRESS_2]; [ADDRESS_3]."


def test_names_after_a_title_or_a_cue_and_the_same_person_written_differently():
    text = "Signed by J. PARK. My name is Jiwon Park. Regards, Anna Weber. Mr Okafor called."
    assert masked(text) == "Signed by [PERSON_1]. My name is [PERSON_1]. Regards, [PERSON_2]. Mr [PERSON_3] called."
    # given names that disagree are two people, however alike; and a surname alone that could be
    # either of them is neither: a value of its own (issue 39: two people shared a placeholder)
    text = "My name is Jiwon Park. Signed by M. PARK. Regards, Minho Park. Mr Park called."
    assert masked(text) == "My name is [PERSON_1]. Signed by [PERSON_2]. Regards, [PERSON_2]. Mr [PERSON_3] called."
    # with one Park in the case, "Mr Park" is that one
    assert masked("My name is Jiwon Park. Mr Park called.") == "My name is [PERSON_1]. Mr [PERSON_1] called."


def test_words_after_a_cue_that_name_nobody_are_left():
    text = "Dear Sir or Madam, received by DHL. Kind regards, Blendmax Store. Hi there"
    assert masked(text) == text


def test_a_name_found_once_is_masked_where_no_cue_stands_before_it():
    case = factories.case(
        "p-2",
        [{"id": "b1", "kind": "text", "text": "Anna Weber never got it."}],
        seller="Regards, Anna Weber",
    )
    seen = minimise(case, on()).case
    assert [seen.item("b1").text, seen.item("s1").text] == ["[PERSON_1] never got it.", "Regards, [PERSON_1]"]
    # as written, case and all: "Park" the name is not "park" the place
    case = factories.case("p-3", [{"id": "b1", "kind": "text", "text": "Mr Park left it in the park."}])
    assert minimise(case, on()).case.item("b1").text == "Mr [PERSON_1] left it in the park."


# --- the rules a party's text cannot break --------------------------------------------------------


def test_a_placeholder_a_party_types_reaches_the_jury_in_round_brackets():
    text = "My number is [PHONE_1], not +44 20 7946 0958; see [ email 2 ] and [Person_3]."
    assert masked(text) == "My number is (PHONE_1), not [PHONE_1]; see (EMAIL_2) and (PERSON_3)."
    assert minimise(factories.case("p-4", buyer=text), on()).report.escaped == 3  # type: ignore[union-attr]
    assert privacy.PLACEHOLDER.findall(masked(text)) == ["[PHONE_1]"]  # the one real placeholder


def test_evidence_that_is_nothing_but_personal_data_is_only_placeholders():
    case = factories.case(
        "p-5",
        [
            {"id": "b1", "kind": "text", "text": "+44 20 7946 0958"},
            {"id": "b2", "kind": "text", "text": "jiwon.park@mail.example"},
            {"id": "b3", "kind": "text", "text": "4111 1111 1111 1111 DE89 3704 0044 0532 0130 00"},
        ],
    )
    seen = minimise(case, on()).case
    assert [i.text for i in seen.items("buyer")] == ["[PHONE_1]", "[EMAIL_1]", "[CARD_1] [IBAN_1]"]


def test_the_dispute_form_is_masked_and_fields_may_be_kept():
    form = {
        **factories.METADATA,
        "product": "Jacket for Mr Okafor",
        "dispute_reason": "Courier signed by J. PARK",
        "requested_remedy": "Refund to DE89 3704 0044 0532 0130 00",
    }
    case = factories.case("p-6", metadata=form)
    d = minimise(case, on()).case.metadata
    assert (d.product, d.dispute_reason, d.requested_remedy) == (
        "Jacket for Mr [PERSON_1]",
        "Courier signed by [PERSON_2]",
        "Refund to [IBAN_1]",
    )
    kept = minimise(case, on(keep_fields=["product"])).case.metadata
    assert (kept.product, kept.dispute_reason) == ("Jacket for Mr Okafor", "Courier signed by [PERSON_1]")


def test_an_order_or_tracking_number_the_dispute_turns_on_stays_evidence():
    text = "tracking SP 4471 9023 3186 DE; Order number 4155552671; call 020 7946 0958"
    assert masked(text) == "tracking SP 4471 9023 3186 DE; Order number 4155552671; call [PHONE_1]"
    assert minimise(factories.case("p-7", buyer=text), on()).report.kept == 2  # type: ignore[union-attr]
    # the platform's own pattern instead: its reference numbers kept, and nothing else
    assert masked(text, keep_patterns=[r"\bSP(?: \d{4}){3} DE\b"]) == (
        "tracking SP 4471 9023 3186 DE; Order number [PHONE_1]; call [PHONE_2]"
    )


def test_which_kinds_are_masked_is_a_setting():
    text = "Mr Okafor, +44 20 7946 0958, jane@mail.example, https://shop.example/u/okafor"
    assert masked(text, mask=["email"]) == "Mr Okafor, +44 20 7946 0958, [EMAIL_1], https://shop.example/u/okafor"
    assert masked(text, mask=["url"]) == "Mr Okafor, +44 20 7946 0958, jane@mail.example, [URL_1]"
    # off: the text as submitted, a typed placeholder too (there is nothing it could be taken for)
    off = factories.case("p-8", buyer=text + " [PHONE_1]")
    assert minimise(off, on(mask=[])).case is off
    assert minimise(off, on(mask=[])).report is None


def test_an_unmasked_url_is_kept_whole():
    assert masked("see https://shop.example/item/4155552671?ref=2079460958 now") == (
        "see https://shop.example/item/4155552671?ref=2079460958 now"
    )


# --- what the jury gets and what the verdict records ------------------------------------------------


def test_numbers_follow_the_reading_order_and_a_case_that_grows_keeps_them():
    """The form first, then the items in submission order; an appeal's grounds come last, so the
    numbers of the first instance hold in the second."""
    case = factories.case(
        "p-9",
        [{"id": "b1", "kind": "text", "text": "Mine is +44 20 7946 0958, theirs 020 7946 0000."}],
        seller="Call us on 020 7946 0000 or +44 20 7946 0958.",
        metadata={**factories.METADATA, "dispute_reason": "Called 0161 496 0000 twice"},
    )
    first = minimise(case, on())
    assert first.case.metadata.dispute_reason == "Called [PHONE_1] twice"
    assert first.case.item("b1").text == "Mine is [PHONE_2], theirs [PHONE_3]."
    assert first.case.item("s1").text == "Call us on [PHONE_3] or [PHONE_2]."
    appealed = minimise(case, on(), ("The seller's 020 7946 0000 rang me from 0161 496 0999.",))
    assert appealed.case == first.case
    assert appealed.extra == ("The seller's [PHONE_3] rang me from [PHONE_4].",)


def test_the_report_counts_kinds_and_places_never_values():
    case = factories.case(
        "p-10",
        buyer="Call +44 20 7946 0958 or 020 7946 0958; mail jane@mail.example; typed [CARD_1]; order 12345",
    )
    report = minimise(case, on()).report
    assert report is not None
    assert report.model_dump() == {
        "kinds": ["email", "iban", "card", "phone", "address", "person"],
        "masked": {"phone": {"values": 1, "occurrences": 2}, "email": {"values": 1, "occurrences": 1}},
        "escaped": 1,
        "kept": 0,
        "withheld": [],
    }
    assert not re.search(r"\d{4}|@", report.model_dump_json())


def test_the_same_case_masks_the_same_way_every_time_and_the_case_itself_is_untouched():
    case = factories.case("p-11", buyer="Mr Okafor, +44 20 7946 0958")
    before = case.model_dump_json()
    assert minimise(case, on()) == privacy._minimise(case, on(), ())  # the cache gives what masking gives
    assert case.model_dump_json() == before


def test_a_case_shows_placeholders_only_once_masked():
    case = factories.case("p-12", buyer="Mr Okafor called.")
    assert not privacy.shows_placeholders(case)
    assert privacy.shows_placeholders(minimise(case, on()).case)
    assert privacy.shows_placeholders(factories.case("p-13", buyer="I typed (PHONE_1)."))


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("phone_regions", ["UK"], "not a region phonenumbers knows: UK"),
        ("keep_patterns", ["order ("], "is no regular expression"),
        ("mask", ["ssn"], "privacy.mask"),
        ("keep_fields", ["rounds"], "privacy.keep_fields"),
    ],
)
def test_settings_that_cannot_work_are_refused_at_start(field, value, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        Settings(privacy={field: value})


# --- issue 37 item 0 and issue 39's probes: each failed before the fix ---------------------------------


def items(*texts: str, metadata: dict | None = None, seller: str | None = None) -> DisputeCase:  # type: ignore[type-arg]
    buyer = [{"id": f"b{i + 1}", "kind": "text", "text": t} for i, t in enumerate(texts)]
    extra = {"seller": seller} if seller else {}
    return factories.case("p-39", buyer, metadata={**factories.METADATA, **(metadata or {})}, **extra)


def test_a_span_masked_is_always_a_span_numbered_so_a_case_is_never_lost_to_its_evidence():
    # issue 37 item 0: the phone found in the second item made the first resolve differently when
    # masked than when numbered, and "Smith Rd" was masked without a number (KeyError, a dead letter)
    seen = minimise(items("Paid $020 7183 8712 Dr Smith Rd", "call 020 7183 8712"), on())
    texts = [i.text for i in seen.case.items("buyer")]
    assert texts == ["Paid $[PHONE_1] Dr [PERSON_1]", "call [PHONE_1]"]


def test_a_text_whose_detection_fails_is_withheld_with_a_note_and_the_rest_is_masked(monkeypatch):
    real = privacy.detect

    def failing(text, kinds, regions):  # type: ignore[no-untyped-def]
        if "boom" in text:
            raise RecursionError("a detector gave up")
        return real(text, kinds, regions)

    monkeypatch.setattr(privacy, "detect", failing)
    seen = privacy._minimise(items("boom, call +44 20 7946 0958", "call +44 20 7946 0958"), on(), ())
    assert [i.text for i in seen.case.items("buyer")] == [privacy.WITHHELD, "call [PHONE_1]"]
    assert seen.report is not None and seen.report.withheld == ["b1"]
    assert privacy.shows_placeholders(seen.case)


def test_personal_data_inside_a_url_is_masked_and_the_url_kept():
    assert masked("https://wa.me/447911123456") == "https://wa.me/[PHONE_1]"
    assert masked("pay at https://bank.example/pay?iban=DE89370400440532013000&x=1") == (
        "pay at https://bank.example/pay?iban=[IBAN_1]&x=1"
    )
    assert masked("https://maps.example/?q=221B+Baker+Street,+London") == "https://maps.example/?q=[ADDRESS_1]"
    assert masked("https://shop.example/?email=jane%40mail.example") == "https://shop.example/?email=[EMAIL_1]"
    # a product's id in a path is not a phone number: only one with its country code, or named one
    assert masked("https://shop.example/item/4155552671?ref=2079460958") == (
        "https://shop.example/item/4155552671?ref=2079460958"
    )
    assert masked("https://shop.example/c?phone=020+7946+0958") == "https://shop.example/c?phone=[PHONE_1]"


def test_a_keep_pattern_never_keeps_a_card_an_iban_or_a_phone_written_as_one():
    assert masked("Receipt 4111 1111 1111 1111") == "Receipt [CARD_1]"
    assert masked("Ref 07911 123456") == "Ref [PHONE_1]"
    assert masked("Reference DE89 3704 0044 0532 0130 00") == "Reference [IBAN_1]"
    assert masked("Ref +44 7911 123456 and order (020) 7946 0958") == "Ref [PHONE_1] and order [PHONE_2]"
    # what a keep match covers only: an address it touches is masked whole
    assert masked("Parcel 12 Baker Street, London") == "Parcel [ADDRESS_1]"
    # and an order or tracking number, written as one, is still kept
    assert masked("Order number 4155552671, tracking 0150 1234 5678 90") == (
        "Order number 4155552671, tracking 0150 1234 5678 90"
    )


def test_national_numbers_are_read_in_the_regions_of_the_case_locale_currency_and_languages():
    polish = items("Proszę dzwonić pod 609 141 777.", metadata={"locale": "pl-PL", "currency": "PLN"})
    assert minimise(polish, on()).case.item("b1").text == "Proszę dzwonić pod [PHONE_1]."
    brazilian = items("Ligue para (11) 91234-5678.", metadata={"currency": "BRL"})
    assert minimise(brazilian, on()).case.item("b1").text == "Ligue para [PHONE_1]."
    italian = items("Chiamatemi al 06 6982 2931.", metadata={"seller_locale": "it"})
    assert minimise(italian, on()).case.item("b1").text == "Chiamatemi al [PHONE_1]."
    assert privacy.phone_regions(brazilian, on())[:1] == ("BR",) or "BR" in privacy.phone_regions(brazilian, on())


def test_cards_and_ibans_with_any_separator_and_case():
    text = "4111.1111.1111.1111, 4111/1111/1111/1111, 4111  1111  1111  1111, 3782 822463 10005"
    assert masked(text) == "[CARD_1], [CARD_1], [CARD_1], [CARD_2]"
    assert masked("de89 3704  0044 053 2013 000 or DE 89 370400440532013000") == "[IBAN_1] or [IBAN_1]"
    # a lower-cased IBAN whose account digits pass as a card is an IBAN still, to each detector alone
    assert [s.kind for s in detectors.cards("de96 5300 6907 1115 7359 90")] == []
    # an order number grouped as no card is, and a barcode, are left
    assert masked("113-4567890-1234567 and EAN 4006381333931") == "113-4567890-1234567 and EAN 4006381333931"


def test_e_mail_addresses_in_unicode_and_idn_are_one_value_in_either_form():
    text = "zoé.lefèvre@exämple.fr, ZOÉ.LEFÈVRE@xn--exmple-cua.fr and 用户@例子.中国"
    assert masked(text) == "[EMAIL_1], [EMAIL_1] and [EMAIL_2]"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Mr O'Brien called", "Mr [PERSON_1] called"),
        ("Mein Name ist Jürgen Müller-Lüdenscheidt.", "Mein Name ist [PERSON_1]."),
        ("Mit freundlichen Grüßen\nAnna Weber", "Mit freundlichen Grüßen\n[PERSON_1]"),
        ("Je m'appelle Zoé Lefèvre.", "Je m'appelle [PERSON_1]."),
        ("Cordialement,\nMarie-Claire d'Arcy", "Cordialement,\n[PERSON_1]"),
        ("Me llamo Íñigo Peña.", "Me llamo [PERSON_1]."),
        ("Mi chiamo Gianluca D'Angelo.", "Mi chiamo [PERSON_1]."),
        ("Mijn naam is Sanne de Jong.", "Mijn naam is [PERSON_1]."),
        ("Nazywam się Łukasz Wójcik.", "Nazywam się [PERSON_1]."),
        ("Meu nome é Conceição da Silva.", "Meu nome é [PERSON_1]."),
        ("Med vänliga hälsningar, Åsa Öberg", "Med vänliga hälsningar, [PERSON_1]"),
        ("我叫王伟，谢谢。", "我叫[PERSON_1],谢谢。"),
    ],
)
def test_names_after_the_cues_of_every_language_the_letters_speak(text, want):
    assert masked(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("Envoyez au 12, rue de la Paix, 75002 Paris.", "Envoyez au [ADDRESS_1]."),
        ("Envíenlo a Calle Mayor 5, 28013 Madrid.", "Envíenlo a [ADDRESS_1]."),
        ("Spedite a Via Roma 12, 00184 Roma.", "Spedite a [ADDRESS_1]."),
        ("Bezorg op Kerkstraat 12, 1017 GC Amsterdam.", "Bezorg op [ADDRESS_1]."),
        ("Proszę wysłać na ul. Kwiatowa 5/3, 00-950 Warszawa.", "Proszę wysłać na [ADDRESS_1]."),
        ("Enviem para Rua das Flores, 123, 01310-100 São Paulo - SP.", "Enviem para [ADDRESS_1]."),
        ("Send to 123 Main St Apt 4B, Springfield, IL 62704.", "Send to [ADDRESS_1]."),
        ("Send to 35913 Curtis Junction Suite 037, Stephenberg, HI 87804.", "Send to [ADDRESS_1]."),
        ("Send to 66 Elm Ave #5, Springfield, IL 62704.", "Send to [ADDRESS_1]."),
        ("Bitte an Karl-Marx-Allee 12, 10178 Berlin.", "Bitte an [ADDRESS_1]."),
    ],
)
def test_street_addresses_of_the_letters_countries(text, want):
    assert masked(text) == want


def test_a_name_learned_from_one_party_is_masked_in_the_other_party_only_as_a_full_name():
    case = items(
        "Mark my words: the parcel never came. Anna Weber saw it.", seller="Regards, Mark. Signed by Anna Weber."
    )
    seen = minimise(case, on())
    assert seen.case.item("b1").text == "Mark my words: the parcel never came. [PERSON_1] saw it."
    assert seen.case.item("s1").text == "Regards, [PERSON_2]. Signed by [PERSON_1]."
    # a carrier's name signed off is nobody's
    case = items("Royal Mail lost it.", seller="Regards, Royal Mail")
    assert minimise(case, on()).case.item("b1").text == "Royal Mail lost it."


def test_typed_look_alike_placeholders_are_escaped_in_every_field():
    text = "[\u0420\u0415RS\u041eN_1] (Cyrillic), \uff3bPHONE_2\uff3d (full width), [PHO\u200bNE_3] (a zero-width space), [\u03a1erson 4] (Greek)"
    assert (
        masked(text)
        == "(PERSON_1) (Cyrillic), (PHONE_2) (full width), (PHONE_3) (a zero-width space), (PERSON_4) (Greek)"
    )
    case = items("fine", metadata={"product": "Coat [\uff30\uff28\uff2f\uff2e\uff25_1]"})
    kept = minimise(case, on(keep_fields=["product"])).case.metadata.product
    assert kept == "Coat (PHONE_1)"


def test_the_values_each_placeholder_stands_for_and_who_wrote_them():
    case = items("Call me on 020 7946 0958.", seller="We rang +44 20 7946 0958 and 0161 496 0000.")
    values = minimise(case, on()).values
    assert values["[PHONE_1]"] == privacy.Value("phone", {"buyer": ("020 7946 0958",), "seller": ("+44 20 7946 0958",)})
    assert values["[PHONE_2]"].parties == {"seller"}
    assert set(values) == {"[PHONE_1]", "[PHONE_2]"}
