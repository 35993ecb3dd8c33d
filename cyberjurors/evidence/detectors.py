"""The personal-data detectors ``evidence/privacy.py`` masks with: each yields the spans of one kind in one
text, keyed by the value's normalised form (what makes "+44 20 7946 0958" and "020 7946 0958" one value).

Phone numbers by libphonenumber's matcher (``phonenumbers``), cards and IBANs by their checksums and
registries (``python-stdnum``), e-mail addresses and URLs by pattern (Unicode and IDN included), and
street addresses and names by patterns over the words of ``pii_words.py``: those two are heuristics.
A URL never shields what it holds: its path and query are decoded and searched like any text
(``inside_urls``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

import phonenumbers
from stdnum import ean, luhn, numdb
from stdnum import iban as stdnum_iban

from ..schemas import PersonalData
from . import pii_words as words


@dataclass(frozen=True)
class Span:
    """One detected value: where it is in a text, its kind and its normalised form (the key)."""

    start: int
    end: int
    kind: PersonalData
    key: str

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end

    def __len__(self) -> int:
        return self.end - self.start

    def within(self, start: int, end: int) -> bool:
        return start <= self.start and self.end <= end


def _class(test: Callable[[str], bool]) -> str:
    """A character class of the Latin, Greek and Cyrillic letters ``test`` holds for, as ranges."""
    chars = [c for c in range(0x41, 0x530) if test(chr(c))] + [c for c in range(0x1E00, 0x1F00) if test(chr(c))]
    ranges: list[tuple[int, int]] = []
    for c in chars:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1] = (ranges[-1][0], c)
        else:
            ranges.append((c, c))
    return "".join(re.escape(chr(a)) + (f"-{re.escape(chr(b))}" if b > a else "") for a, b in ranges)


UPPER = f"[{_class(lambda c: c.isupper() or c.istitle())}]"
LETTER = f"[{_class(str.isalpha)}]"
HAN = r"[\u3400-\u4dbf\u4e00-\u9fff]"


def fold(text: str) -> str:
    """A word as a key: NFKC, case folded, accents and apostrophes aside ("Müller" is "muller")."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold().replace("ß", "ss"))
    return "".join(c for c in text if not unicodedata.combining(c))


def key_words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", fold(text).replace("'", "").replace("’", ""))


def _alternation(items: Iterable[str], escape: bool = True) -> str:
    return "|".join(re.escape(i) if escape else i for i in sorted(set(items), key=len, reverse=True))


# --- e-mail addresses and URLs ----------------------------------------------------------------------

_LOCAL = r"\w[\w!#$%&'*+/=?^`{|}~.-]*"
_EMAIL = re.compile(
    rf"(?<![\w.+-]){_LOCAL}@(?:[^\W_](?:[\w-]{{0,61}}[^\W_])?\.)+(?:[^\W\d_]{{2,}}|xn--[a-z0-9-]+)(?![\w-])"
)
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"'()\[\]]+", re.IGNORECASE)


def _idna(domain: str) -> str:
    try:
        return domain.encode("idna").decode("ascii")
    except UnicodeError:
        return domain


def emails(text: str) -> Iterator[Span]:
    """Local part and domain in any script ("zoé.lefèvre@exämple.fr"); one value however it is cased,
    and with its domain in Unicode or in its ASCII (IDNA) form alike."""
    for m in _EMAIL.finditer(text):
        local, _, domain = unicodedata.normalize("NFKC", m.group()).rpartition("@")
        yield Span(m.start(), m.end(), "email", f"{local.casefold()}@{_idna(domain.casefold())}")


def urls(text: str) -> Iterator[Span]:
    for m in _URL.finditer(text):
        url = m.group().rstrip(".,;:!?")  # a sentence's own punctuation is not part of the address
        yield Span(m.start(), m.start() + len(url), "url", url.lower().rstrip("/"))


# --- phone numbers ----------------------------------------------------------------------------------

# libphonenumber's matcher leaves out slashed dates and time stamps, not dotted dates: "06.10.2026" is a
# valid number in Germany (06102 is Neu-Isenburg's area code)
_DATE = re.compile(r"[0-9]{1,4}[./-][0-9]{1,2}[./-][0-9]{1,4}")
# where a number may be: at least five digits among phone punctuation (the matcher reads only these)
_PHONE_CHUNK = re.compile(
    r"(?:\+|\uff0b|\b00)?[(\[]?\d(?:[\d \t\u00a0().\-/]){3,40}\d(?:[ \t]*(?:x|ext\.?|extn\.?|#)[ \t]*\d{1,7})?",
    re.IGNORECASE,
)


# a number written without its country code is at least this long: shorter ones, valid in a few small
# countries' plans, are more often a price's or a date's digits ("4 475,67 €")
_SHORTEST = 7


def _in_code(text: str, start: int, end: int) -> bool:
    """Digits joined to letters or digits by a dash or a slash are part of a code ("ORD-2026-044737")."""
    # a placeholder is such a neighbour too, so that masking what was masked decides alike
    if not text[start : start + 1].isdigit():
        return False
    return bool(re.search(r"[A-Za-z0-9\]][-/]$", text[max(start - 2, 0) : start])) or bool(
        re.match(r"[-/][A-Za-z0-9\[]", text[end : end + 2])
    )


def written_as_phone(written: str, e164: str) -> bool:
    """Whether a number is written the way only phone numbers are: with "+" or "00", a bracket, or
    its country's trunk prefix and grouped as its country groups phone numbers ("07911 123456",
    libphonenumber's strict grouping); an order or tracking number is written as none of these."""
    if written.startswith(("+", "00")) or "(" in written:
        return True
    region = phonenumbers.region_code_for_number(phonenumbers.parse(e164))
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region) if region else None
    prefix = metadata.national_prefix if metadata is not None else None
    if not prefix or not written.startswith(prefix):
        return False
    strict = phonenumbers.Leniency.STRICT_GROUPING
    return any(m.raw_string == written for m in phonenumbers.PhoneNumberMatcher(written, region, leniency=strict))


def _barcode(written: str) -> bool:
    """Unbroken 8, 12, 13 or 14 digits whose GS1 check digit holds: a product's barcode (EAN, UPC)."""
    return written.isdigit() and len(written) in (8, 12, 13, 14) and ean.is_valid(written)


def phones(text: str, regions: Iterable[str]) -> Iterator[Span]:
    """Valid numbers by libphonenumber's metadata, keyed in E.164: "+44 20 7946 0958", "020 7946 0958"
    (read in GB) and "0044 (0)20 7946-0958" are one number. The matcher runs only on the stretches
    that hold five digits or more, with a character either side; of the regions' readings of a
    stretch, the one whose numbers cover the most digits wins, the first region on a tie (digits
    that one region reads as a single long number, another as two numbers side by side)."""
    chunks = [(max(m.start() - 1, 0), m.end() + 1) for m in _PHONE_CHUNK.finditer(text)]
    regions = list(regions)
    for begin, end in chunks:
        readings = [list(_read(text, begin, end, region)) for region in regions]
        yield from max(
            readings, key=lambda spans: sum(sum(c.isdigit() for c in text[x.start : x.end]) for x in spans), default=[]
        )


def _read(text: str, begin: int, end: int, region: str) -> Iterator[Span]:
    for m in _matched(text[begin:end], region):
        if _DATE.fullmatch(m.raw_string) or _barcode(m.raw_string) or _in_code(text, begin + m.start, begin + m.end):
            continue
        national = phonenumbers.national_significant_number(m.number)
        if len(national) < _SHORTEST and not m.raw_string.startswith(("+", "00")):
            continue
        e164 = phonenumbers.format_number(m.number, phonenumbers.PhoneNumberFormat.E164)
        yield Span(begin + m.start, begin + m.end, "phone", e164)


_GAP = re.compile(r"[ \t\u00a0]+")
_MOST_SPLITS = 8


def _matched(
    chunk: str, region: str, seen: dict[str, tuple[phonenumbers.PhoneNumberMatch, ...]] | None = None
) -> tuple[phonenumbers.PhoneNumberMatch, ...]:
    """libphonenumber's matches in a chunk; where it finds none, the chunk split at gaps into numbers
    written side by side ("(07949) 768108 0114 496 0286" is two, which its matcher takes for one
    candidate and rejects): of the splits whose first part is one number end to end, the one whose
    numbers cover the most digits (the longer first part on a tie). ``seen`` remembers the tails
    already read within this one chunk, never across texts: a process-wide cache would keep
    parties' numbers past their case's erasure."""
    found = tuple(phonenumbers.PhoneNumberMatcher(chunk, region, leniency=phonenumbers.Leniency.VALID))
    if found:
        return found
    seen = {} if seen is None else seen
    if chunk not in seen:
        seen[chunk] = _split(chunk, region, seen)
    return seen[chunk]


def _split(
    chunk: str, region: str, seen: dict[str, tuple[phonenumbers.PhoneNumberMatch, ...]]
) -> tuple[phonenumbers.PhoneNumberMatch, ...]:
    best: tuple[phonenumbers.PhoneNumberMatch, ...] = ()
    for gap in reversed(list(_GAP.finditer(chunk))[:_MOST_SPLITS]):
        head = chunk[: gap.start()]
        first = list(phonenumbers.PhoneNumberMatcher(head, region, leniency=phonenumbers.Leniency.VALID))
        lead = len(head) - len(head.lstrip())  # the chunk keeps one character before the number
        if len(first) != 1 or first[0].start > lead + 1 or first[0].end < len(head.rstrip()):
            continue
        shift = gap.end()
        rest = [
            phonenumbers.PhoneNumberMatch(m.start + shift, m.raw_string, m.number)
            for m in _matched(chunk[shift:], region, seen)
        ]
        option = (first[0], *rest)
        if _digits(option) > _digits(best):
            best = option
    return best


def _digits(matches: tuple[phonenumbers.PhoneNumberMatch, ...]) -> int:
    return sum(sum(c.isdigit() for c in m.raw_string) for m in matches)


def international(digits: str) -> str | None:
    """A number written with its country code and no "+" (wa.me/447911123456): E.164, or None."""
    if not 11 <= len(digits) <= 15:
        return None
    try:
        number = phonenumbers.parse("+" + digits, None)
    except phonenumbers.NumberParseException:
        return None
    return (
        phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
        if phonenumbers.is_valid_number(number)
        else None
    )


# --- cards and IBANs --------------------------------------------------------------------------------

_SEP = r"(?:[ \t\u00a0\u2009\u202f]{1,3}|[-./])"
# 13 to 19 digits, any separator between; not after "+" ("+44 20 7946 0958" is a phone number, however
# its digits add up) and not inside a longer run of digit groups (a 22-digit tracking number)
_DIGIT_RUN = re.compile(rf"(?<![A-Za-z0-9_+.,/-])\d(?:{_SEP}?\d){{11,18}}(?![A-Za-z0-9_])(?!{_SEP}?\d)")
# card numbers are printed in fours (the last group shorter), Amex as 4-6-5 and Diners as 4-6-4
_CARD_LAYOUTS = ((4, 6, 5), (4, 6, 4))


def card_scheme(digits: str) -> bool:
    """Whether the number starts as a card scheme's do (Visa, Mastercard, Amex, Diners, Discover, JCB,
    UnionPay, Maestro) and has a length they issue: most other long numbers do not."""
    two, three, four = int(digits[:2]), int(digits[:3]), int(digits[:4])
    if len(digits) == 12:  # Maestro alone issues 12 digits
        return two == 50 or 56 <= two <= 69
    if len(digits) == 15 and four in (1800, 2131):  # JCB's first ranges
        return True
    return 13 <= len(digits) <= 19 and (
        digits[0] == "4"
        or 51 <= two <= 55
        or 2221 <= four <= 2720
        or two in (34, 36, 37, 38, 39, 50, 62, 65)
        or 300 <= three <= 305
        or 644 <= three <= 649
        or four == 6011
        or two == 35  # JCB (3528-3589 issued today)
        or 56 <= two <= 69
    )


def _card_layout(written: str) -> bool:
    groups = tuple(len(g) for g in re.split(r"\D+", written))
    if len(groups) == 1:
        return True
    return groups in _CARD_LAYOUTS or (all(g == 4 for g in groups[:-1]) and 1 <= groups[-1] <= 4)


def cards(text: str) -> Iterator[Span]:
    """A card scheme's prefix and length, Luhn-valid, written unbroken or in a card's groups with any
    separator (spaces, dashes, dots, slashes): a number that fails the check is no card number,
    whatever it looks like; nor one grouped as an order number is ("113-4567890-1234567"), nor an
    unbroken 13 digits whose EAN check digit holds (a barcode), nor one written as an IBAN's account part."""
    written_as_iban = [(m.start(), m.end()) for m in _IBAN.finditer(text) if _iban_country(m.group()[:2].upper())]
    for m in _DIGIT_RUN.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if any(b <= m.start() < e for b, e in written_as_iban):
            continue
        if len(digits) == 13 and digits == m.group() and ean.is_valid(digits):
            continue
        if _card_layout(m.group()) and card_scheme(digits) and luhn.is_valid(digits):
            yield Span(m.start(), m.end(), "card", digits)


# a country code and check digits, then up to 30 letters and digits, spaced anyhow, any case
_IBAN = re.compile(rf"(?<![A-Za-z0-9])[A-Za-z]{{2}}{_SEP}?[0-9]{_SEP}?[0-9](?:{_SEP}?[A-Za-z0-9]){{10,32}}")


@functools.cache
def _iban_country(code: str) -> bool:
    return bool(numdb.get("iban").info(code)[0][1])


def _overlapping(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Every match, the next searched from the character after the last one's start: a candidate
    that fails its check must not hide one that starts inside it ("ab12 DE89 3704 ...")."""
    at = 0
    while (m := pattern.search(text, at)) is not None:
        yield m
        at = m.start() + 1


def ibans(text: str) -> Iterator[Span]:
    """Country code, check digits and the country's account format (python-stdnum's registry), the
    checksum holding, in any case and spacing; a word that follows the number ("DE89 3704 0044 0532
    0130 00 EUR") is not part of it."""
    done = 0
    for m in _overlapping(_IBAN, text):
        if m.start() < done:
            continue
        found = m.group()
        ends = [i for i in range(len(found), 3, -1) if i == len(found) or not found[i].isalnum()]
        for end in ends:
            if end < len(found) and not found[end - 1].isalnum():
                continue
            compact = re.sub(r"[^A-Za-z0-9]", "", found[:end]).upper()
            if stdnum_iban.is_valid(compact):
                yield Span(m.start(), m.start() + end, "iban", compact)
                done = m.start() + end
                break


# --- street addresses -------------------------------------------------------------------------------

_L = f"(?:{LETTER}|ß)"
_W = rf"{UPPER}{_L}*(?:['’]{_L}+)*(?:-{_L}+)*(?!\w)"  # a capitalised word: "Baker", "O'Connell", "Saint-Germain"
# a number in a street's name: "5th Avenue"; first, before a capitalised word: "ul. 3 Maja"
_ORDINAL = r"\d{1,3}(?:st|nd|rd|th|e|er|ème|º|ª|a|o)(?!\w)"
_FIRST_NUMBER = rf"(?:{_ORDINAL}|\d{{1,3}}(?=[ \t]+(?!(?:{_alternation([*words.UNITS, *words.SECONDARY])})\b){UPPER}))"
_PART = r"(?:de|du|des|la|le|les|del|della|delle|dei|degli|di|da|dos|das|do|of|the|y|e|i|von|van|der|den|ter|im|am)"
_STREET_NAME = (
    rf"(?:{_W}|{_FIRST_NUMBER})(?:(?:[ \t]+(?:{_PART}[ \t]+){{0,3}}|[ \t]*[dlDL]['’])(?:{_W}|{_FIRST_NUMBER})){{0,4}}"
)
_NUMBER = r"\d{1,5}(?:[ \t]?[A-Za-z](?!\w))?(?:[ \t]?[-/][ \t]?\d{1,5}[A-Za-z]?(?!\w))?(?:[ \t](?:bis|ter)\b)?"
_POSTCODE = (
    r"(?:[A-Z]{1,2}\d[A-Z\d]?[ \t]?\d[A-Z]{2}"  # GB
    r"|[A-Z]{2}[ \t]\d{5}(?:-\d{4})?"  # a US state and ZIP code
    r"|\d{4}[ \t]?[A-Z]{2}"  # NL
    r"|\d{2}-\d{3}"  # PL
    r"|\d{5}-?\d{3}"  # BR
    r"|\d{4,6})(?!\w)"  # DE, FR, ES, IT, US; CN's six
)
_TOWN_PART = r"(?:op|aan|bij|en|in|sur|sous|bei|an|am|im|der|den|de|la|le|les|da|do|das|dos|di|del)"
_TOWN = (
    rf"(?:['’][st][ -]|{_TOWN_PART}[ \t]+)?{_W}['’]?(?:(?:[ \t]+(?:{_TOWN_PART}[ \t]+){{0,2}}|-)(?:{_W}['’]?|{_ORDINAL})){{0,5}}"
    rf"(?:[ \t]\({UPPER}{{2}}\)|[ \t]/[ \t][A-Z]{{2}}|[ \t][-–][ \t][A-Z]{{2}}(?!\w))?"
)
# what follows the street: a flat, then towns and postcodes, each after a comma or a line break
# (a postcode after a space too); "London NW1 6XE", "West Jerry, IN 60742", "00080-636 Moura / ES"
_SECONDARY = _alternation([*words.UNITS, *words.SECONDARY])
_UNIT = rf"(?:(?:{_SECONDARY})(?![a-z])|#)\.?[ \t]?(?:(?=[\w-]{{0,5}}\d)[\w-]{{1,6}}|[A-Z](?!\w))"
_TAIL = (
    rf"(?:(?:[ \t]*,[ \t]*|[ \t]+){_UNIT}){{0,2}}"
    rf"(?:(?:[ \t]*(?:,|\n|[-–](?=[ \t]))[ \t]*|[ \t]+(?={_POSTCODE}))(?:{_POSTCODE}(?:[ \t]+{_TOWN})?|{_TOWN}(?:,?[ \t]+{_POSTCODE}(?:[ \t]+{_TOWN})?)?)){{0,3}}"
)
_SUFFIX = rf"(?:{_alternation(words.STREET_SUFFIXES)}|{_alternation(s.upper() for s in words.STREET_SUFFIXES)})\b\.?"
_TYPE = _alternation(words.STREET_TYPES)
_TYPE_NUMBERED = _alternation(words.STREET_TYPES_NUMBERED)
_ENDING = _alternation(words.STREET_ENDINGS)
_LOWER = r"[a-zà-öø-ÿß\u0100-\u017f]"
_PARTS = rf"(?:{_PART}[ \t]+|[dl]['’]){{0,3}}"  # "rue de la Paix", "Rua das Flores", "rue d'Alésia"
# a house number after the street's name: four digits at most ("Calle Mayor, 28013 Madrid" has none)
_NUMBER_AFTER = r"(?:(?:[ \t]*,[ \t]*|[ \t]+)(?:n[º°.]?[ \t]?)?\d{1,4}(?:[ \t]?[A-Za-z](?!\w))?(?:[ \t]?[-/][ \t]?\d{1,5}[A-Za-z]?)?(?!\w))"
_STREET_WORD_FIRST = rf"(?:{_TYPE})[ \t]+{_PARTS}{_STREET_NAME}{_NUMBER_AFTER}?"
_ZH_CHAR = rf"(?:(?![的是在到为我你他她请把与或从给寄送发址]){HAN})"
_ADDRESSES = [
    # English: a house number (or a flat first), the street's words and its suffix
    re.compile(
        rf"(?<![\w-])(?:(?:{_UNIT},?\s+)(?:{_NUMBER},?[ \t]+)?|{_NUMBER},?[ \t]+)"
        rf"(?:(?:{_W}|{_ORDINAL})[ \t]+){{1,4}}{_SUFFIX}(?!\w){_TAIL}"
    ),
    # a street's word first (French, Spanish, Italian, Portuguese, Polish), its number before or after
    re.compile(rf"(?<![\w'’-])(?:{_NUMBER},?[ \t]+)?{_STREET_WORD_FIRST}{_TAIL}"),
    re.compile(
        rf"(?<![\w'’-])(?:{_NUMBER},?[ \t]+(?:{_TYPE_NUMBERED})[ \t]+{_PARTS}{_STREET_NAME}|"
        rf"(?:{_TYPE_NUMBERED})[ \t]+{_PARTS}{_STREET_NAME}{_NUMBER_AFTER}){_TAIL}"
    ),
    # the street's word last (German, Dutch, Swedish), a number after it
    re.compile(
        rf"(?<![\w-])(?={UPPER})(?:(?:(?:{UPPER}{_LOWER}*\.?|{_PART})[-\s]){{1,3}}{_L}*?|{UPPER}{_L}+?)(?i:{_ENDING})(?!\w)"
        rf"[ \t]?{_NUMBER}{_TAIL}"
    ),
    # Chinese: the street (街, 路, ...), its number and 号 or 座, the postcode
    re.compile(
        rf"{_ZH_CHAR}{{1,16}}?(?:大道|街|路|道|巷|胡同|弄|里)(?:\d{{1,5}}|[A-Za-z])(?:号|座|栋|幢|楼|室)(?:[ \t]?\d{{6}})?"
    ),
    # a US military address
    re.compile(
        r"\b(?:Unit|PSC|CMR|USNS|USNV|USS|USCGC)[ \t][\w ,]{1,30}?,?\s+(?:APO|FPO|DPO)[ \t](?:AA|AE|AP)[ \t]\d{5}\b"
    ),
]
# after an address cue, a street is one whatever its words ("meine Adresse ist Am Markt 3, 12345 Berlin")
_CUED_ADDRESS = re.compile(
    rf"(?i:\b(?:{_alternation(words.ADDRESS_CUES, escape=False)}))[ \t]*[:,]?\s+"
    rf"(?P<address>(?:{_NUMBER},?[ \t]+)?(?:(?:{_alternation([*words.STREET_TYPES, *words.STREET_TYPES_NUMBERED, *words.STREET_ARTICLES])})[ \t]+)?"
    rf"{_PARTS}{_STREET_NAME}{_NUMBER_AFTER}?{_TAIL})"
)
_ABBREVIATIONS = {
    "st": "street", "rd": "road", "ave": "avenue", "av": "avenue", "avda": "avenue", "avenida": "avenue",
    "ln": "lane", "dr": "drive", "str": "strasse", "blvd": "boulevard", "bd": "boulevard", "ul": "ulica",
    "al": "aleja", "pl": "place", "plac": "place", "c": "calle", "pza": "plaza", "ctra": "carretera",
    "sq": "square", "ct": "court", "cres": "crescent", "pkwy": "parkway", "hwy": "highway", "ter": "terrace",
}  # fmt: skip


def _address_key(written: str) -> str:
    """The street (up to its house number) and the rest (flat, town, postcode), each as folded words
    with abbreviations spelt out: "221B Baker St." keys as the street of "221b Baker Street, London"."""
    found = re.search(r"\d", written)
    street_end = len(written)
    if found is not None:
        number = re.compile(_NUMBER).match(written, found.start())
        street_end = number.end() if number else found.end()
        if found.start() == 0 or not re.search(LETTER, written[: found.start()]):  # the number came first
            after = re.search(rf"(?:,|\n|{_SUFFIX}(?!\w))", written[street_end:])
            street_end += after.end() if after else len(written) - street_end
    street = [_ABBREVIATIONS.get(w, w) for w in key_words(written[:street_end])]
    rest = [_ABBREVIATIONS.get(w, w) for w in key_words(written[street_end:])]
    return " ".join(street) + "|" + " ".join(rest)


def addresses(text: str) -> Iterator[Span]:
    for pattern in _ADDRESSES:
        for m in pattern.finditer(text):
            written = m.group().rstrip(" \t,.-–")
            yield Span(m.start(), m.start() + len(written), "address", _address_key(written))
    for m in _CUED_ADDRESS.finditer(text):
        written = m.group("address").rstrip(" \t,.-–")
        if re.search(r"\d", written) or len(written.split()) >= 2:
            yield Span(m.start("address"), m.start("address") + len(written), "address", _address_key(written))


# --- names ------------------------------------------------------------------------------------------

_INITIAL = rf"{UPPER}\."
_NAME_WORD = rf"(?:{_INITIAL}[ \t]?)*{_W}"
_PARTICLE = _alternation(words.PARTICLES)
_NAME = rf"{_NAME_WORD}(?:(?:[ \t]+(?:(?:{_PARTICLE})[ \t]+){{0,2}}|[ \t]*[dl]['’]){_NAME_WORD}){{0,3}}"
_TITLE = rf"\b(?:{_alternation(words.TITLES)})\.?[ \t]+"
# after a cue, "M." is an initial ("signed by M. PARK"), not the French title
_CUED_TITLE = rf"\b(?:{_alternation(t for t in words.TITLES if len(t) > 1)})\.?[ \t]+"
_CUES = _alternation((c for cues in words.NAME_CUES.values() for c in cues), escape=False)
_NAMED = re.compile(rf"(?:(?i:\b(?:{_CUES}))[ \t]*[,:]?\s+(?:{_CUED_TITLE})?|{_TITLE})(?P<name>{_NAME})")
_NAMED_ZH = re.compile(rf"(?:{'|'.join(words.NAME_CUES_ZH)})[ \t]*(?P<name>{HAN}{{2,3}})")


def _is_name_word(word: str, table: frozenset[str]) -> bool:
    return word.strip(".").casefold() in table


def persons(text: str) -> Iterator[Span]:
    """A name after a title ("Mr J. Park", keyed without the title) or a cue in any of the languages
    ("signed by J. PARK", "Mit freundlichen Grüßen, Anna Weber", "Je m'appelle Zoé Lefèvre", "我叫王伟"):
    non-ASCII capitals, apostrophes and hyphens are part of a name ("Mr O'Brien", "Jean-Pierre Łukasik"),
    and lower-case particles inside one ("Sanne de Jong"). Words that name nobody ("Dear Sir",
    "received by DHL") and a business's signature ("Kind regards, Blendmax Store") are left out."""
    for m in _NAMED.finditer(text):
        name = re.sub(r"['’]s$", "", m.group("name"))  # "Mr Smith's parcel": the possessive is not the name
        parts = name.split()
        while parts and parts[-1] in words.PARTICLES:
            parts.pop()
        if not parts or _is_name_word(parts[0], words.NOT_NAMES):
            continue
        if any(_is_name_word(w, words.BUSINESS) for w in m.group("name").split()):
            continue
        end = m.start("name") + list(re.finditer(r"\S+", name))[len(parts) - 1].end()
        yield Span(m.start("name"), end, "person", " ".join(key_words(text[m.start("name") : end])))
    for m in _NAMED_ZH.finditer(text):
        yield Span(m.start("name"), m.end("name"), "person", m.group("name"))


def full_name(key: str) -> bool:
    """Given name and surname: what the other party may write too and mean the same person."""
    return len([w for w in key.split() if len(w) > 1 and w not in words.PARTICLES]) >= 2 or (
        re.fullmatch(f"{HAN}{{2,3}}", key) is not None
    )


# --- inside URLs, and every detector on a text ------------------------------------------------------

# a number in a URL's path or query is a phone number when written with its country code, or named one
_PHONE_KEY = re.compile(
    r"(?:phone|tel|telefon|telephone|telefono|telefone|telefoon|mobile|mobil|cell|celular|handy|portable|whatsapp|wa\.me)\W{0,3}$",
    re.IGNORECASE,
)


def _decoded(url: str) -> tuple[str, list[tuple[int, int]]]:
    """A URL as text, and where in it each character came from: percent-escapes decoded, "+" and the
    separators (/ ? & # =) as spaces, "=" as ": " ("name=Anna+Weber" reads "name: Anna Weber")."""
    out: list[str] = []
    where: list[tuple[int, int]] = []
    i = 0
    while i < len(url):
        escaped = re.match(r"(?:%[0-9A-Fa-f]{2})+", url[i:])
        if escaped:
            decoded = unquote_to_bytes(escaped.group()).decode("utf-8", errors="replace")
            out += decoded
            where += [(i, i + escaped.end())] * len(decoded)
            i += escaped.end()
            continue
        c = url[i]
        shown = ": " if c == "=" else " " if c in "+/?&#" else c
        out += shown
        where += [(i, i + 1)] * len(shown)
        i += 1
    return "".join(out), where


def _url_phones(decoded: str, regions: Iterable[str]) -> Iterator[Span]:
    for span in phones(decoded, regions):
        written = decoded[span.start : span.end]
        if written.startswith(("+", "00")) or _PHONE_KEY.search(decoded[max(span.start - 16, 0) : span.start]):
            yield span
    for m in re.finditer(r"(?<!\d)\d{11,15}(?!\d)", decoded):
        e164 = international(m.group())
        if e164 is not None:
            yield Span(m.start(), m.end(), "phone", e164)


def inside_urls(
    text: str, url_spans: Iterable[Span], kinds: frozenset[PersonalData], regions: tuple[str, ...]
) -> Iterator[Span]:
    """What a URL's path and query hold (https://wa.me/447911123456, ...?iban=DE89...,
    maps...?q=221B+Baker+Street), found in its decoded text and placed back on the URL as written.
    A number in a URL is taken for a phone number only when written with its country code or under
    a phone's name (``phone=``): a product's id in a path is not one."""
    for url in url_spans:
        decoded, where = _decoded(text[url.start : url.end])
        found: list[Span] = [*emails(decoded)] if "email" in kinds else []
        found += _text_spans(decoded, kinds - {"phone"}, regions)
        if "phone" in kinds:
            found += _url_phones(decoded, regions)
        for span in found:
            yield Span(url.start + where[span.start][0], url.start + where[span.end - 1][1], span.kind, span.key)


def _text_spans(text: str, kinds: frozenset[PersonalData], regions: tuple[str, ...]) -> Iterator[Span]:
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


# a placeholder, ours or one a party typed and escaped: no detector reads its digits ("(PHONE_2)5 0366")
_MARKER = re.compile(r"[\[(](?:(?:PHONE|EMAIL|CARD|IBAN|ADDRESS|PERSON|URL)_[0-9]+|WITHHELD)[\])]")


def blanked(text: str, spans: Iterable[Span | re.Match[str]]) -> str:
    """The text with these stretches as NULs: offsets kept, their characters read by no detector, and
    no space made where there was none (a cue does not reach across a blanked placeholder)."""
    out = list(text)
    for s in spans:
        start, end = (s.start, s.end) if isinstance(s, Span) else s.span()
        out[start:end] = "\x00" * (end - start)
    return "".join(out)


def detect(text: str, kinds: frozenset[PersonalData], regions: tuple[str, ...]) -> list[Span]:
    """Every detection of the kinds in one text, overlapping ones included. E-mail addresses first
    (an address is no URL, whatever follows its @); then URLs, which the other detectors read decoded
    (and the text's own detectors never, so a product id in a link is not read as a phone number);
    a URL itself only when ``url`` is masked. Placeholders are read as spaces."""
    text = blanked(text, _MARKER.finditer(text))
    found = [*emails(text)] if "email" in kinds else []
    links = [u for u in urls(text) if not any(u.overlaps(e) for e in found)]
    if "url" in kinds:
        found += links
    found += _text_spans(blanked(text, links), kinds, regions)
    found += inside_urls(text, links, kinds, regions)
    return found
