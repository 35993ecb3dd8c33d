"""Personal data kept out of prompts (issue 30): detection, and stable per-case placeholders.

Before any prompt is built, the jury's stages see a case whose party-authored text (the dispute
form's product, dispute reason and requested remedy, every evidence text and caption, an appeal's
grounds) has each value of the kinds in ``privacy_mask`` replaced by a placeholder: ``[PHONE_1]``,
``[EMAIL_1]``, ``[CARD_1]``, ``[IBAN_1]``, ``[ADDRESS_1]``, ``[PERSON_1]`` (and ``[URL_1]`` when
asked). The same value, normalised (a phone in E.164, an e-mail address in lower case, a card or
IBAN without separators, a name or address without case, punctuation or a title), gets the same
placeholder throughout the case, so jurors can still reason ("the phone on the delivery note is the
buyer's [PHONE_1]").

Placeholders are numbered per kind in the order the values are first found, reading the form's
fields, then every item in submission order, then an appeal's grounds. Masking is a pure function of
the case and the settings, so every stage on any worker masks a case alike, and a case that grows
(an appeal's new evidence comes last) keeps every number it had.

A party that types a placeholder (``[PHONE_1]``, ``[phone 1]``) must not be taken for one: any
bracketed text of that shape in party text reaches the jury in round brackets, ``(PHONE_1)``, and the
jurors' rule says only square-bracketed placeholders are ours.

What the detectors find: phone numbers through libphonenumber's matcher (``phonenumbers``; a number
without its country code is read in the regions of ``privacy_phone_regions``); card numbers of a
card scheme's prefix and length whose Luhn check holds, and IBANs whose national format and
checksum hold (``python-stdnum``); e-mail addresses and URLs by pattern; street addresses and
postcodes, and names after a title or a cue ("my name is", "signed by", "Regards,"), by pattern:
those two are heuristics, and a value once found is masked wherever else the case writes it. What
``privacy_keep_patterns`` matches stays as written: an order or tracking number the dispute turns on.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum import luhn

from ..config import EvidenceSettings
from ..schemas import DisputeCase, Masked, Minimisation, PersonalData

# One of ours: upper case, an underscore, a number from 1. Anything the jury reads in this shape was put there here.
PLACEHOLDER_BODY = r"(?:PHONE|EMAIL|CARD|IBAN|ADDRESS|PERSON|URL)_[1-9][0-9]*"
PLACEHOLDER = re.compile(rf"\[{PLACEHOLDER_BODY}\]")
# What a party may type that a model could take for one: any case, spaces, a missing underscore.
_TYPED = re.compile(r"\[\s*(phone|e-?mail|card|iban|address|person|url)\s*[_ -]?\s*([0-9]+)\s*\]", re.IGNORECASE)

# ours, or one a party typed, escaped: what a prompt must explain when a case shows either
_SHOWN = re.compile(rf"\[{PLACEHOLDER_BODY}\]|\({PLACEHOLDER_BODY}\)")
# Said with the case, only when it shows a placeholder (system prompts stay the same for every case, cached).
PLACEHOLDER_RULE = (
    "Personal data in the parties' text (phone numbers, e-mail addresses, street addresses, card and bank "
    "account numbers, names) may have been replaced by placeholders in square brackets, e.g. [PHONE_1], [EMAIL_2], "
    "[PERSON_1]. Within a case the same placeholder always stands for the same value and different placeholders "
    "for different values, so compare them as you would the values themselves (for instance, whether the phone "
    "on a delivery note is the buyer's [PHONE_1]); a past case's placeholders are that case's own. They are not "
    "evidence or clue ids. Text a party typed in that shape is shown in round brackets, e.g. (PHONE_1)."
)


def shows_placeholders(case: DisputeCase) -> bool:
    """Whether the case's party text holds a placeholder (or a typed one, escaped): its prompts say what they are."""
    return any(_SHOWN.search(text) for text in _texts(case, ()))


# when two detections overlap, the more specific wins: an e-mail holds a name, an IBAN or a URL digits
_PRIORITY: dict[PersonalData, int] = {
    "email": 0,
    "url": 1,
    "iban": 2,
    "card": 3,
    "phone": 4,
    "address": 5,
    "person": 6,
}


@dataclass(frozen=True)
class Span:
    """One detected value: where it is in a text, its kind and its normalised form (the key)."""

    start: int
    end: int
    kind: PersonalData
    key: str

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end


# --- detectors: each yields the spans of one kind in one text -------------------------------------

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*\.)+[A-Za-z]{2,}(?![\w-])")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"'()\[\]]+", re.IGNORECASE)


def emails(text: str) -> Iterator[Span]:
    for m in _EMAIL.finditer(text):
        yield Span(m.start(), m.end(), "email", m.group().lower())


def urls(text: str) -> Iterator[Span]:
    for m in _URL.finditer(text):
        url = m.group().rstrip(".,;:!?")  # a sentence's own punctuation is not part of the address
        yield Span(m.start(), m.start() + len(url), "url", url.lower().rstrip("/"))


# libphonenumber's matcher leaves out slashed dates and time stamps, not dotted dates: "06.10.2026" is a
# valid number in Germany (06102 is Neu-Isenburg's area code)
_DATE = re.compile(r"[0-9]{1,4}[./-][0-9]{1,2}[./-][0-9]{1,4}")


def phones(text: str, regions: Iterable[str]) -> Iterator[Span]:
    """Valid numbers by libphonenumber's metadata, keyed in E.164: "+44 20 7946 0958", "020 7946 0958"
    (read in GB) and "0044 (0)20 7946-0958" are one number. The first region that reads a span wins."""
    for region in regions:
        for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID):
            if _DATE.fullmatch(m.raw_string):
                continue
            yield Span(
                m.start, m.end, "phone", phonenumbers.format_number(m.number, phonenumbers.PhoneNumberFormat.E164)
            )


# a country code, check digits and up to 30 characters in groups: what is written as an IBAN
_IBAN = re.compile(r"\b[A-Z]{2}[0-9]{2}(?:[ -]?[A-Z0-9]{1,4}){2,8}\b", re.IGNORECASE)
# not after "+": "+44 20 7946 0958" is a phone number, however its digits add up
_DIGIT_RUN = re.compile(r"(?<![\w+-])(?:\d[ -]?){12,18}\d(?![\w-])")


def _card_scheme(digits: str) -> bool:
    """Whether the number starts as a card scheme's do (Visa, Mastercard, Amex, Diners, Discover, JCB,
    UnionPay, Maestro) and has a length they issue: most other long numbers do not."""
    two, three, four = int(digits[:2]), int(digits[:3]), int(digits[:4])
    return 13 <= len(digits) <= 19 and (
        digits[0] == "4"
        or 51 <= two <= 55
        or 2221 <= four <= 2720
        or two in (34, 36, 37, 38, 39, 50, 62, 65)
        or 300 <= three <= 305
        or 644 <= three <= 649
        or four == 6011
        or 3528 <= four <= 3589
        or 56 <= two <= 69
    )


def cards(text: str) -> Iterator[Span]:
    """13 to 19 digits (spaces or dashes between them) of a card scheme's prefix, Luhn-valid: a
    number that fails the check is no card number, whatever it looks like; nor is one written as an
    IBAN's account part (a mistyped IBAN's digits are one chance in ten to pass Luhn)."""
    written_as_iban = [(m.start(), m.end()) for m in _IBAN.finditer(text)]
    for m in _DIGIT_RUN.finditer(text):
        digits = re.sub(r"[ -]", "", m.group())
        if any(b <= m.start() < e for b, e in written_as_iban):
            continue
        if _card_scheme(digits) and luhn.is_valid(digits):
            yield Span(m.start(), m.end(), "card", digits)


_GROUP_END = re.compile(r"(?=[ -])|$")


def ibans(text: str) -> Iterator[Span]:
    """Country code, check digits and the country's account format (python-stdnum's registry), the
    checksum holding; a word that follows the number ("DE89 3704 0044 0532 0130 00 EUR") is not part of it."""
    for m in _IBAN.finditer(text):
        found = m.group()
        for end in sorted((g.start() for g in _GROUP_END.finditer(found)), reverse=True):
            compact = stdnum_iban.compact(found[:end])
            if stdnum_iban.is_valid(compact):
                yield Span(m.start(), m.start() + end, "iban", compact.upper())
                break


# street, road, ... in English; -straße, -weg, ... in German; a UK or US postcode may follow
_SUFFIX = (
    r"(?:Street|St|Road|Rd|Avenue|Ave|Lane|Ln|Drive|Dr|Boulevard|Blvd|Way|Court|Ct|Place|Pl|Close|Crescent|"
    r"Terrace|Square|Sq|Gardens|Grove|Row|Hill|Parkway|Mews|Walk|Highway|Hwy)\b(?:\.(?=,))?"  # "St." ends a sentence
)
_POSTCODE = r"(?:[A-Z]{1,2}[0-9][A-Z0-9]? ?[0-9][A-Z]{2}|[A-Z]{2} [0-9]{5}(?:-[0-9]{4})?|[0-9]{4,5})"
_PLACE = r"[A-Z][a-zà-öø-ÿ'-]+(?: [A-Z][a-zà-öø-ÿ'-]+)?"
_ADDRESSES = [
    re.compile(
        rf"\b[0-9]{{1,5}}[A-Za-z]?(?:[-/][0-9]{{1,4}})?,? (?:[A-Z][A-Za-z'-]* ){{1,3}}{_SUFFIX}"
        rf"(?:,? (?:Apt|Flat|Unit|Suite)\.? ?[0-9A-Za-z]+)?(?:, {_PLACE}){{0,2}}(?:,? {_POSTCODE}\b)?"
    ),
    re.compile(
        r"\b[A-ZÄÖÜ][a-zäöüß]*(?:straße|strasse|str\.|weg|gasse|platz|allee)"
        rf" ?[0-9]{{1,4}} ?[A-Za-z]?\b(?:, ?[0-9]{{5}} {_PLACE})?",
    ),
]  # no postcode on its own: "PS5 2TB" is written like one
_ABBREVIATIONS = {"st": "street", "rd": "road", "ave": "avenue", "ln": "lane", "dr": "drive", "str": "strasse"}


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKC", text).casefold().replace("ß", "ss")
    return re.findall(r"[0-9a-zà-öø-ÿ]+", folded)


def addresses(text: str) -> Iterator[Span]:
    for pattern in _ADDRESSES:
        for m in pattern.finditer(text):
            key = " ".join(_ABBREVIATIONS.get(w, w) for w in _words(m.group()))
            yield Span(m.start(), m.end(), "address", key)


_TITLE = r"\b(?:Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Herr|Frau|Mme|Mlle)\.? "
_CUE = (
    r"(?i:\bmy name is|\bmy name's|\bname:|\bsigned (?:for )?by|\breceived by|\brecipient:|\baddressed to|"
    r"\bregards,|\bsincerely,|\bdear|\bhello|\bhi|\bcontact person:|\battn\.?:?|\bc/o)\s+"
)
_WORD = (
    r"(?:[A-Z]\. ?)*[A-Z][a-zà-öø-ÿ'\u2019-]+|(?:[A-Z]\. ?)*[A-Z][A-Z'\u2019-]+"  # \u2019: the typographic apostrophe
)
_NAMED = re.compile(rf"(?:{_TITLE}|{_CUE})(?P<name>(?:{_WORD})(?: (?:{_WORD})){{0,2}})")
# capitalised words a cue is often followed by that name nobody
_NOT_NAMES = {
    "sir", "madam", "team", "there", "all", "everyone", "seller", "buyer", "customer", "support", "service",
    "jury", "jurors", "the", "this", "that", "we", "you", "courier", "shop", "store", "thanks", "thank",
    "please", "dhl", "ups", "fedex", "dpd", "gls", "hermes", "usps", "amazon", "post", "office", "neighbour",
    "neighbor", "reception", "concierge",
}  # fmt: skip
# a signature with one of these is a business's ("Kind regards, Blendmax Store"), not a person's
_BUSINESS = {
    "store", "shop", "team", "support", "service", "services", "ltd", "limited", "gmbh", "inc", "llc", "co",
    "company", "sarl", "sas", "bv", "ag", "plc", "official", "outlet", "trading", "customer",
}  # fmt: skip


def persons(text: str) -> Iterator[Span]:
    """A name after a title ("Mr J. Park", keyed without the title) or a cue ("signed by J. PARK",
    "Regards, Anna Weber"): words that name nobody ("Dear Sir", "received by DHL") are left out."""
    for m in _NAMED.finditer(text):
        words = m.group("name").split(" ")
        while words and words[-1].strip(".").casefold() in _NOT_NAMES:
            words.pop()
        if not words or words[0].strip(".").casefold() in _NOT_NAMES:
            continue
        if any(w.strip(".").casefold() in _BUSINESS for w in m.group("name").split(" ")):
            continue
        name = " ".join(words)
        yield Span(m.start("name"), m.start("name") + len(name), "person", " ".join(_words(name)))


def _same_person(a: str, b: str) -> bool:
    """The same surname (the last word), and given names that agree where both are written: each the
    same word, or one the other's initial."""
    *given_a, surname_a = a.split(" ")
    *given_b, surname_b = b.split(" ")
    agree = all(x == y or x == y[0] or y == x[0] for x, y in zip(given_a, given_b, strict=False))
    return surname_a == surname_b and agree


# --- masking --------------------------------------------------------------------------------------


def _detected(text: str, kinds: frozenset[PersonalData], regions: tuple[str, ...]) -> Iterator[Span]:
    yield from urls(text)  # always: a URL the settings leave unmasked is not searched for numbers either
    if "email" in kinds:
        yield from emails(text)
    if "iban" in kinds:
        yield from ibans(text)
    if "card" in kinds:
        yield from cards(text)
    if "phone" in kinds:
        yield from phones(text, regions)
    if "address" in kinds:
        yield from addresses(text)
    if "person" in kinds:
        yield from persons(text)


def _resolved(spans: Iterable[Span]) -> list[Span]:
    """Overlapping detections: the most specific kind, then the longest, then the first, wins."""
    taken: list[Span] = []
    for span in sorted(spans, key=lambda s: (_PRIORITY[s.kind], s.start - s.end, s.start)):
        if not any(span.overlaps(t) for t in taken):
            taken.append(span)
    return sorted(taken, key=lambda s: s.start)


# the kinds whose detectors need a context a value may appear without (a cue before a name, a region for
# a national phone number): found once, a value of these is masked wherever else the case writes it
_FOUND_AGAIN: frozenset[PersonalData] = frozenset({"phone", "address", "person"})


@dataclass
class _Placeholders:
    """One case's values and their placeholders, numbered per kind in the order first found."""

    kinds: frozenset[PersonalData]
    keep: list[re.Pattern[str]]
    regions: tuple[str, ...]
    numbers: dict[tuple[PersonalData, str], str] = field(default_factory=dict)
    written: dict[str, tuple[PersonalData, str]] = field(default_factory=dict)
    """a value of ``_FOUND_AGAIN`` as the case wrote it -> the value"""
    detected: dict[str, list[Span]] = field(default_factory=dict)
    occurrences: Counter[PersonalData] = field(default_factory=Counter)
    escaped: int = 0
    kept: int = 0

    def spans(self, text: str, count: bool = False) -> list[Span]:
        if text not in self.detected:  # the detectors run once per text: numbering, then masking
            self.detected[text] = list(_detected(text, self.kinds, self.regions))
        kept = [(m.start(), m.end()) for p in self.keep for m in p.finditer(text)]
        found = [*self.detected[text], *self.again(text)]
        inside = {s for s in found if any(s.start < e and b < s.end for b, e in kept)}
        if count:
            self.kept += len(_resolved(s for s in inside if s.kind in self.kinds))
        return _resolved(s for s in found if s not in inside)

    def again(self, text: str) -> Iterator[Span]:
        """The values found elsewhere in the case, as they were written there (case and all: "Park" the
        name is not "park" the place): a name a cue found in round 3 is masked in round 1 too."""
        if not self.written:
            return
        forms = sorted(self.written, key=len, reverse=True)
        for m in re.finditer(r"(?<!\w)(?:" + "|".join(map(re.escape, forms)) + r")(?!\w)", text):
            kind, key = self.written[m.group()]
            yield Span(m.start(), m.end(), kind, key)

    def learn(self, text: str) -> None:
        """Number the values this text holds that the case has not shown before."""
        for span in self.spans(text):
            if span.kind not in self.kinds:
                continue
            if (span.kind, span.key) not in self.numbers:
                self.numbers[span.kind, span.key] = self.same_person(span) or self.next(span.kind)
            if span.kind in _FOUND_AGAIN and span.end - span.start >= 3:
                self.written.setdefault(text[span.start : span.end], (span.kind, span.key))

    def placeholders(self, kind: PersonalData) -> set[str]:
        return {p for (k, _), p in self.numbers.items() if k == kind}

    def next(self, kind: PersonalData) -> str:
        return f"[{kind.upper()}_{len(self.placeholders(kind)) + 1}]"

    def same_person(self, span: Span) -> str | None:
        """A name found before that this one may be written differently: "J. PARK" and "Jiwon Park",
        "Mr Park" and "Anna Park" (a reader would take them for one person, and a juror must be able to)."""
        if span.kind != "person":
            return None
        return next((p for (k, key), p in self.numbers.items() if k == "person" and _same_person(key, span.key)), None)

    def mask(self, text: str) -> str:
        out, at = [], 0
        for span in self.spans(text, count=True):
            if span.kind not in self.kinds:
                continue  # an unmasked URL: kept whole
            out += [text[at : span.start], self.numbers[span.kind, span.key]]
            self.occurrences[span.kind] += 1
            at = span.end
        return "".join([*out, text[at:]])

    def escape(self, text: str) -> str:
        escaped, n = _TYPED.subn(lambda m: f"({m.group(1).upper().replace('-', '')}_{m.group(2)})", text)
        self.escaped += n
        return escaped

    def report(self) -> Minimisation:
        found = sorted({kind for kind, _ in self.numbers}, key=list(_PRIORITY).index)
        return Minimisation(
            kinds=sorted(self.kinds, key=list(_PRIORITY).index),
            masked={k: Masked(values=len(self.placeholders(k)), occurrences=self.occurrences[k]) for k in found},
            escaped=self.escaped,
            kept=self.kept,
        )


@dataclass(frozen=True)
class Minimised:
    """A case as the jury sees it, the extra texts given with it (an appeal's grounds) masked alike,
    and what was masked (None when ``privacy_mask`` is empty: nothing was looked at)."""

    case: DisputeCase
    extra: tuple[str, ...]
    report: Minimisation | None


_FORM = ("product", "dispute_reason", "requested_remedy")


def _texts(case: DisputeCase, keep_fields: Iterable[str]) -> list[str]:
    """Every party-authored text of the case in reading order: the form's fields, then each item."""
    form = [getattr(case.metadata, f) for f in _FORM if f not in keep_fields]
    return form + [item.text for item in case.items() if item.text]


def _rebuilt(case: DisputeCase, keep_fields: Iterable[str], masked: Iterator[str]) -> DisputeCase:
    """The case with its texts replaced, in ``_texts``' order (model_copy: the jury's view is never
    validated again, so a placeholder longer than a short value breaks no length limit)."""
    form = {f: next(masked) for f in _FORM if f not in keep_fields}
    rounds = [
        r.model_copy(update={"items": [i.model_copy(update={"text": next(masked)}) if i.text else i for i in r.items]})
        for r in case.rounds
    ]
    return case.model_copy(update={"metadata": case.metadata.model_copy(update=form), "rounds": rounds})


def _minimise(case: DisputeCase, settings: EvidenceSettings, extra: tuple[str, ...]) -> Minimised:
    if not settings.privacy_mask:
        return Minimised(case, extra, None)
    places = _Placeholders(
        frozenset(settings.privacy_mask),
        [re.compile(p) for p in settings.privacy_keep_patterns],
        tuple(settings.privacy_phone_regions),
    )
    texts = [places.escape(t) for t in [*_texts(case, settings.privacy_keep_fields), *extra]]
    for text in texts:  # first every value is numbered, in reading order; then every text is masked
        places.learn(text)
    masked = [places.mask(t) for t in texts]
    split = len(masked) - len(extra)
    return Minimised(
        _rebuilt(case, settings.privacy_keep_fields, iter(masked[:split])), tuple(masked[split:]), places.report()
    )


class _Recent:
    """The last few cases masked in this process: a case's every stage on one worker masks it once."""

    def __init__(self, size: int = 64):
        self.size, self.done = size, OrderedDict[str, Minimised]()

    def get(self, case: DisputeCase, settings: EvidenceSettings, extra: tuple[str, ...]) -> Minimised:
        parts = [
            case.model_dump_json(),
            *extra,
            repr(
                (
                    settings.privacy_mask,
                    settings.privacy_phone_regions,
                    settings.privacy_keep_patterns,
                    settings.privacy_keep_fields,
                )
            ),
        ]
        key = hashlib.sha256("\x00".join(parts).encode()).hexdigest()
        if key in self.done:
            self.done.move_to_end(key)
            return self.done[key]
        result = self.done[key] = _minimise(case, settings, extra)
        if len(self.done) > self.size:
            self.done.popitem(last=False)
        return result


_recent = _Recent()


def minimise(case: DisputeCase, settings: EvidenceSettings, extra: tuple[str, ...] = ()) -> Minimised:
    """The case as the jury sees it: every value of the kinds in ``privacy_mask`` in its party text
    (and in ``extra``, read after the case) replaced by its placeholder, placeholder-shaped text a
    party typed put in round brackets, what ``privacy_keep_patterns`` matches kept as written."""
    return _recent.get(case, settings, extra)
