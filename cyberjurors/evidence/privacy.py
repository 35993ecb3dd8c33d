"""Personal data kept out of prompts (issues 30 and 39): stable per-case placeholders over the values
``evidence/detectors.py`` finds.

Before any prompt is built, the jury's stages see a case whose party-authored text (the dispute
form's product, dispute reason and requested remedy, every evidence text and caption, an appeal's
grounds) has each value of the kinds in ``privacy.mask`` replaced by a placeholder: ``[PHONE_1]``,
``[EMAIL_1]``, ``[CARD_1]``, ``[IBAN_1]``, ``[ADDRESS_1]``, ``[PERSON_1]`` (and ``[URL_1]`` when
asked). One value, one placeholder, throughout the case: the same value however it is written (a
phone in E.164, an e-mail address case aside, a card or IBAN without separators, a name or address
without case, accents or punctuation; a shortened address or name is the full one it can only be),
and two values never one (two people who share a surname are two placeholders, and a surname alone
that could be either is a third).

Placeholders are numbered per kind from 1, with no gaps, in the order the values are first found,
reading the form's fields, then every item in submission order, then an appeal's grounds. Masking
is a pure function of the case and the settings, so every stage on any worker masks a case alike,
and a case that grows (an appeal's new evidence comes last) keeps every number it had.

How it cannot fail a case: the detectors run once per text and the values are numbered from the
very spans that are then masked (one set of forms for both), so no span is replaced without its
number; a text whose detection fails all the same reaches the jury as ``[WITHHELD]``, said in the
report (``Minimisation.withheld``) and in the verdict's problems, never as a dead letter.

A party that types a placeholder (``[PHONE_1]``, ``[phone 1]``, ``\uff3b\u0420\u0415RS\u041eN_1\uff3d`` in Cyrillic and
full-width letters) must not be taken for one: party text is NFKC-normalised and stripped of format
characters (zero-width spaces and the like) in every field, ``privacy.keep_fields`` too, and any
bracketed text that then reads as a placeholder, Greek and Cyrillic look-alike letters folded,
reaches the jury in round brackets, ``(PHONE_1)``; the jurors' rule says only square-bracketed
placeholders are ours.

What ``privacy.keep_patterns`` matches stays as written (an order or tracking number the dispute
turns on), and only that: a detection reaching past the match is masked whole, a card number or an
IBAN is never kept, and a phone number only when written as an order number is (unbroken digits not
starting with 0) or as a part of a longer reference.

A name found after a cue in one party's text is masked in that party's text wherever it stands; in
the other party's only as a full name (given name and surname) written the same: a party's "Regards,
Mark" does not blank the other's "Mark".
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import phonenumbers

from ..config import EvidenceSettings
from ..schemas import DisputeCase, Masked, Minimisation, Party, PersonalData
from . import pii_words
from .detectors import Span, blanked, card_scheme, detect, full_name, written_as_phone
from .detectors import addresses as addresses
from .detectors import cards as cards
from .detectors import emails as emails
from .detectors import ibans as ibans
from .detectors import persons as persons
from .detectors import phones as phones
from .detectors import urls as urls

_card_scheme = card_scheme  # the name the tests of issue 30 know it by

# One of ours: upper case, an underscore, a number from 1. Anything the jury reads in this shape was put there here.
PLACEHOLDER_BODY = r"(?:PHONE|EMAIL|CARD|IBAN|ADDRESS|PERSON|URL)_[1-9][0-9]*"
PLACEHOLDER = re.compile(rf"\[{PLACEHOLDER_BODY}\]")
WITHHELD = "[WITHHELD]"
"""what the jury reads for a text whose personal data could not be searched for"""
# What a party may type that a model could take for one, read after NFKC and folding: any case, spaces, a missing underscore.
_TYPED = re.compile(
    r"\[\s*(?:(phone|e-?mail|card|iban|address|person|url)\s*[_ -]?\s*([0-9]+)|(withheld))\s*\]", re.IGNORECASE
)

# ours, or one a party typed, escaped: what a prompt must explain when a case shows either
_SHOWN = re.compile(rf"\[{PLACEHOLDER_BODY}\]|\({PLACEHOLDER_BODY}\)|\[WITHHELD\]|\(WITHHELD\)")
# Said with the case, only when it shows a placeholder (system prompts stay the same for every case, cached).
PLACEHOLDER_RULE = (
    "Personal data in the parties' text (phone numbers, e-mail addresses, street addresses, card and bank "
    "account numbers, names) may have been replaced by placeholders in square brackets, e.g. [PHONE_1], [EMAIL_2], "
    "[PERSON_1]. Within a case the same placeholder always stands for the same value and different placeholders "
    "for different values, so compare them as you would the values themselves (for instance, whether the phone "
    "on a delivery note is the buyer's [PHONE_1]); a name written so that it could be either of two people "
    "(a surname alone) has a placeholder of its own; a past case's placeholders are that case's own. They are not "
    "evidence or clue ids. [WITHHELD] stands for a text that could not be checked for personal data and was "
    "left out. Text a party typed in that shape is shown in round brackets, e.g. (PHONE_1)."
)


def shows_placeholders(case: DisputeCase) -> bool:
    """Whether the case's party text holds a placeholder (or a typed one, escaped): its prompts say what they are."""
    return any(_SHOWN.search(text.text) for text in _texts(case, ()))


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


# --- party text as the jury may read it ---------------------------------------------------------------

# Greek and Cyrillic letters that read as the Latin ones of a placeholder's words, and brackets that
# read as square ones (NFKC already folds full-width and mathematical letters)
_CONFUSABLE = str.maketrans(
    dict(
        zip(
            "\u0410\u0412\u0421\u0415\u041d\u0406\u0408\u041a\u041c\u041e\u0420\u0405\u0422\u0425\u0423\u0430\u0435\u0456\u0458\u043e\u0440\u0441\u0445\u0443\u0455\u0501\u0500\u051c\u051d\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7\u03b1\u03b5\u03b9\u03ba\u03bd\u03bf\u03c1\u03c4\u03c5\u03c7\u3014\u3018\u3010\u27e6\u2772\u298b\u3015\u3019\u3011\u27e7\u2773\u298c",
            "ABCEHIJKMOPSTXYaeijopcxysdDWwABEZHIKMNOPTYXaeiknoptux[[[[[[]]]]]]",
            strict=True,
        )
    )
)


def readable(text: str) -> str:
    """Party text as the jury reads it: NFKC-normalised, without format characters (zero-width spaces,
    joiners, bidirectional marks): what the detectors and the escaping see, and what gets masked."""
    if text.isascii():  # as it is: NFKC keeps ASCII, and ASCII has no format character
        return text
    text = unicodedata.normalize("NFKC", text)
    return "".join(c for c in text if unicodedata.category(c) != "Cf")


def escaped(text: str) -> tuple[str, int]:
    """Placeholder-shaped text a party typed, in round brackets: matched on the text with look-alike
    letters folded and combining marks removed, replaced in the text as written."""
    folded = text.translate(_CONFUSABLE)  # one character for one: the offsets hold
    if "[" not in folded:
        return text, 0
    where = list(range(len(text)))
    if any(unicodedata.category(c) == "Mn" for c in folded):
        where = [i for i, c in enumerate(folded) if unicodedata.category(c) != "Mn"]
        folded = "".join(folded[i] for i in where)
    out, at, n = [], 0, 0
    for m in _TYPED.finditer(folded):
        start, end = where[m.start()], where[m.end() - 1] + 1
        kind = (m.group(1) or m.group(3)).upper().replace("-", "")
        out += [text[at:start], f"({kind}_{m.group(2)})" if m.group(2) else f"({kind})"]
        at, n = end, n + 1
    return "".join([*out, text[at:]]), n


@dataclass(frozen=True)
class Text:
    """One party-authored text of a case: who wrote it (None: not known), where it is, and whether it
    is masked (a field of ``privacy.keep_fields`` is only escaped)."""

    text: str
    author: Party | None
    where: str
    masked: bool = True


_FORM = ("product", "dispute_reason", "requested_remedy")


def _texts(
    case: DisputeCase, keep_fields: Iterable[str], extra: Iterable[str] = (), extra_by: Party | None = None
) -> list[Text]:
    """Every party-authored text of the case in reading order: the form's fields (the buyer's, who
    files the dispute), then each item, then the extra texts (an appeal's grounds)."""
    form = [Text(getattr(case.metadata, f), "buyer", f, f not in keep_fields) for f in _FORM]
    items = [Text(item.text, r.party, item.id) for r in case.rounds for item in r.items if item.text]
    return [*form, *items, *(Text(t, extra_by, f"extra {i + 1}") for i, t in enumerate(extra))]


def _rebuilt(case: DisputeCase, masked: Iterator[str]) -> DisputeCase:
    """The case with its texts replaced, in ``_texts``' order (model_copy: the jury's view is never
    validated again, so a placeholder longer than a short value breaks no length limit)."""
    form = {f: next(masked) for f in _FORM}
    rounds = [
        r.model_copy(update={"items": [i.model_copy(update={"text": next(masked)}) if i.text else i for i in r.items]})
        for r in case.rounds
    ]
    return case.model_copy(update={"metadata": case.metadata.model_copy(update=form), "rounds": rounds})


# --- which regions a case's phone numbers may be from -------------------------------------------------


def phone_regions(case: DisputeCase, settings: EvidenceSettings) -> tuple[str, ...]:
    """The regions a number written without its country code is read in: the case's own (the region
    of its locale and the parties', "pt-BR" -> BR), then ``privacy.phone_regions``, then those of the
    case's languages and of its currency (pii_words; a currency of many countries only for a case
    whose languages are not given), in that order, each once: each region is a pass of the matcher."""
    d = case.metadata
    locales = [loc.replace("_", "-").split("-") for loc in (d.locale, d.buyer_locale, d.seller_locale) if loc]
    own = [p.upper() for parts in locales for p in parts[1:] if len(p) == 2 and p.isalpha()]
    derived = [r for parts in locales for r in pii_words.LANGUAGE_REGIONS.get(parts[0].lower(), ())]
    currency = pii_words.CURRENCY_REGIONS.get(d.currency, ())
    if len(currency) == 1 or not locales:  # a case in German paid in euros: its languages say where
        derived += currency
    regions = [*own, *settings.privacy.phone_regions, *derived]
    return tuple(dict.fromkeys(r for r in regions if r in phonenumbers.SUPPORTED_REGIONS))


# --- one value, one placeholder ------------------------------------------------------------------------


def _given(key: str) -> tuple[list[str], str]:
    *given, surname = key.split()
    return [g for g in given if g not in pii_words.PARTICLES], surname


def _same_person(a: str, b: str) -> bool:
    """The same surname (the last word), and given names that agree where both are written: each the
    same word, or one the other's initial."""
    (given_a, surname_a), (given_b, surname_b) = _given(a), _given(b)
    agree = all(x == y or x == y[0] or y == x[0] for x, y in zip(given_a, given_b, strict=False))
    return surname_a == surname_b and agree


def _same_address(a: str, b: str) -> bool:
    """The same street and house number, and where both say more (a flat, a town, a postcode) one
    saying all the other does: "221B Baker St." is "221B Baker Street, London NW1 6XE"."""
    (street_a, _, rest_a), (street_b, _, rest_b) = a.partition("|"), b.partition("|")
    words_a, words_b = set(rest_a.split()), set(rest_b.split())
    return street_a == street_b and (words_a <= words_b or words_b <= words_a)


def _fullness(kind: PersonalData, key: str) -> int:
    if kind == "person":
        return sum(len(g) > 1 for g in _given(key)[0]) * 10 + len(_given(key)[0])
    return len(key.partition("|")[2].split())


_SAME: dict[PersonalData, Callable[[str, str], bool]] = {"person": _same_person, "address": _same_address}


def _values(keys: list[tuple[PersonalData, str]]) -> dict[tuple[PersonalData, str], int]:
    """Each distinct (kind, key), in the order first found, -> the index of the value it is. A name or
    address joins the one value it agrees with, the fullest first; one that agrees with two or more
    that disagree among themselves ("Mr Park" with Jiwon Park and Minho Park) is a value of its own."""
    clusters: list[list[tuple[PersonalData, str]]] = []
    first = {k: i for i, k in enumerate(keys)}
    for kind, key in sorted(keys, key=lambda k: (-_fullness(*k), first[k])):
        same = _SAME.get(kind)
        fits = [c for c in clusters if same and c[0][0] == kind and all(same(key, m) for _, m in c)]
        if len(fits) == 1:
            fits[0].append((kind, key))
        else:
            clusters.append([(kind, key)])
    ordered = sorted(clusters, key=lambda c: min(first[k] for k in c))
    return {k: i for i, c in enumerate(ordered) for k in c}


@dataclass(frozen=True)
class Value:
    """What one placeholder stands for: its kind and, per party whose text held it, the forms that
    party wrote it in, first found first (what a letter needs to give a party its own words back)."""

    kind: PersonalData
    written: dict[Party, tuple[str, ...]]

    @property
    def parties(self) -> frozenset[Party]:
        return frozenset(self.written)


@dataclass(frozen=True)
class Minimised:
    """A case as the jury sees it, the extra texts given with it (an appeal's grounds) masked alike,
    what was masked (None when ``privacy.mask`` is empty: nothing was looked at), and what each
    placeholder stands for (``values``: never sent anywhere; kept for the letters to the parties)."""

    case: DisputeCase
    extra: tuple[str, ...]
    report: Minimisation | None
    values: dict[str, Value] = field(default_factory=dict)
    keys: dict[tuple[PersonalData, str], str] = field(default_factory=dict)
    """each detected value's (kind, normalised form) -> its placeholder: how text read elsewhere (an
    image's, ``mask_read_text``) gets the case's placeholders"""


# found once, a value is masked wherever else the case writes it as it was written there: the detectors
# of names and national phone numbers need a context (a cue, a region) a value may appear without, and
# any value may stand where its detector does not read it (a card number glued to another by a slash)
_FOUND_AGAIN: frozenset[PersonalData] = frozenset({"phone", "email", "card", "iban", "address", "person"})


_BEFORE, _AFTER = r"(?<!\w)", r"(?!\w)"


@functools.lru_cache(maxsize=256)
def _forms_pattern(forms: tuple[str, ...]) -> re.Pattern[str]:
    """The forms, longest first, each as whole words where it starts or ends with a letter or digit."""
    return re.compile(
        "|".join(
            (_BEFORE if w[0].isalnum() else "") + re.escape(w) + (_AFTER if w[-1].isalnum() else "") for w in forms
        )
    )


@dataclass(frozen=True)
class _Form:
    kind: PersonalData
    key: str
    authors: frozenset[Party | None]

    def applies(self, author: Party | None) -> bool:
        """A name is masked where its own party writes it, or as a full name anywhere."""
        return self.kind != "person" or author is None or author in self.authors or full_name(self.key)


@dataclass
class _Masking:
    """One case's masking: the texts' detections (each detector run once per text), the forms found,
    the values and their placeholders."""

    kinds: frozenset[PersonalData]
    keep: list[re.Pattern[str]]
    regions: tuple[str, ...]
    kept: int = 0
    withheld: list[str] = field(default_factory=list)

    def resolved(self, spans: Iterable[Span], text: str, count: bool = False) -> list[Span]:
        """Overlapping detections: what a keep pattern keeps aside, then the most specific kind, then
        the longest, then the first, wins."""
        spans = list(spans)
        if not spans:
            return spans
        # a keep pattern reads the text as a second masking would: without what is never kept (a
        # label inside an e-mail address masked, "...@jones.net.tracking SP 4471", labels nothing)
        never = [s for s in _overlap_free(spans) if s.kind in _NEVER_KEPT and s.kind in self.kinds]
        shown = blanked(text, never) if never else text
        kept_by = [(m.start(), m.end()) for p in self.keep for m in p.finditer(shown)]
        kept = {s for s in spans if any(_kept(s, text, b, e) for b, e in kept_by)}
        if count:
            self.kept += len(_overlap_free(s for s in kept if s.kind in self.kinds))
        return [s for s in _overlap_free(s for s in spans if s not in kept) if s.kind in self.kinds]

    def forms(self, texts: list[Text], spans: list[list[Span] | None]) -> dict[str, _Form]:
        """Values of ``_FOUND_AGAIN`` as the case wrote them, with the parties who did."""
        found: dict[str, tuple[PersonalData, str, set[Party | None]]] = {}
        for text, own in zip(texts, spans, strict=True):
            for s in own or ():
                written = text.text[s.start : s.end]
                if s.kind in _FOUND_AGAIN and len(written) >= 3:
                    found.setdefault(written, (s.kind, s.key, set()))[2].add(text.author)
        return {w: _Form(kind, key, frozenset(authors)) for w, (kind, key, authors) in found.items()}

    def again(self, text: Text, forms: dict[str, _Form]) -> Iterator[Span]:
        """The values found elsewhere in the case, as they were written there (case and all: "Park" the
        name is not "park" the place): a name a cue found in round 3 is masked in round 1 too."""
        usable = sorted((w for w, f in forms.items() if f.applies(text.author)), key=len, reverse=True)
        if not usable:
            return
        for m in _forms_pattern(tuple(usable)).finditer(text.text):
            form = forms[m.group()]
            yield Span(m.start(), m.end(), form.kind, form.key)

    def final(self, text: Text, raw: list[Span], forms: dict[str, _Form]) -> list[Span]:
        return self.closed(text, [*raw, *self.again(text, forms)])

    def closed(self, text: Text, found: list[Span], rounds: int = 3) -> list[Span]:
        """A text's spans, and what masking them brings to light: a value glued to another
        ("...768108155 0366 5173"), or the part of a detection another one overlapped ("My name is
        Denise Davey<e-mail>"), may be read only once its neighbour is a placeholder. Then the text is
        read again as a second masking would read it (placeholders escaped) until nothing new is found."""
        spans = self.resolved(found, text.text, count=True)
        lost = any(
            f.kind in self.kinds and f not in spans and not any(f.within(s.start, s.end) for s in spans) for f in found
        )
        for _ in range(rounds):
            if not lost and not any(_glued(text.text, s) for s in spans):
                return spans
            shown: list[str] = []
            where: list[int] = []
            at = 0
            for s in spans:
                shown.append(text.text[at : s.start])
                where += range(at, s.start)
                stand_in = f"({s.kind.upper()}_1)"
                shown.append(stand_in)
                where += [-1] * len(stand_in)
                at = s.end
            shown.append(text.text[at:])
            where += range(at, len(text.text))
            seen = "".join(shown)
            new = [
                Span(where[n.start], where[n.end - 1] + 1, n.kind, n.key)
                for n in self.resolved(detect(seen, self.kinds, self.regions), seen)
                if -1 not in where[n.start : n.end]
            ]
            new = [n for n in new if not any(n.overlaps(s) for s in spans)]
            if not new:
                return spans
            spans = sorted([*spans, *new], key=lambda s: s.start)
        return spans


_NEVER_KEPT: frozenset[PersonalData] = frozenset({"email", "url", "card", "iban"})


def _glued(text: str, span: Span) -> bool:
    """Whether a value touches anything but a space or a sentence's end: masking it may change what
    its neighbour reads as ("768108.3504  9774")."""
    around = text[max(span.start - 1, 0) : span.start] + text[span.end : span.end + 1]
    return any(not c.isspace() and c not in "!?;\"'“”«»" for c in around)


def _kept(span: Span, text: str, start: int, end: int) -> bool:
    """Whether a keep match (start, end) keeps a detection: never a card or an IBAN; a phone number
    only when it is part of a longer reference, or written as no phone number but an order number
    may be (without "+", "00", brackets or its country's trunk prefix); any other only when the
    match covers all of it."""
    if span.kind in ("card", "iban") or not span.within(start, end):
        return False
    if span.kind != "phone":
        return True
    before = text[start : span.start].split()
    longer = re.search(r"[A-Za-z0-9]", text[span.end : end]) or (before and re.search(r"\d", before[-1]))
    return bool(longer) or not written_as_phone(text[span.start : span.end], span.key)


def _overlap_free(spans: Iterable[Span]) -> list[Span]:
    """A detection inside a longer one is part of it (a postcode read as a phone number inside an
    address); of the others that overlap, the more specific kind, then the longer, then the first."""
    spans = list(spans)
    inside = {s for s in spans if any(o.start <= s.start and s.end <= o.end and len(o) > len(s) for o in spans)}
    taken: list[Span] = []
    for group in ([s for s in spans if s not in inside], list(inside)):  # a part's turn comes if its whole lost
        for span in sorted(group, key=lambda s: (_PRIORITY[s.kind], s.start - s.end, s.start)):
            if not any(span.overlaps(t) for t in taken):
                taken.append(span)
    return sorted(taken, key=lambda s: s.start)


def _guarded(masking: _Masking, text: Text, find: Callable[[], list[Span]]) -> list[Span] | None:
    """A text's spans, or None (the text withheld, and said so) if finding them fails: a case is never
    lost to its own evidence."""
    try:
        return find()
    except Exception:  # any failure of a detector on party text withholds that text only
        if text.where not in masking.withheld:
            masking.withheld.append(text.where)
        return None


def _minimise(
    case: DisputeCase, settings: EvidenceSettings, extra: tuple[str, ...], extra_by: Party | None = None
) -> Minimised:
    if not settings.privacy.mask:
        return Minimised(case, extra, None)
    kinds = frozenset(settings.privacy.mask)
    masking = _Masking(kinds, [re.compile(p) for p in settings.privacy.keep_patterns], phone_regions(case, settings))
    texts, escapes = [], 0
    for t in _texts(case, settings.privacy.keep_fields, extra, extra_by):
        shown, n = escaped(readable(t.text))
        texts.append(Text(shown, t.author, t.where, t.masked))
        escapes += n
    raw = [
        _guarded(masking, t, functools.partial(detect, t.text, kinds, masking.regions)) if t.masked else []
        for t in texts
    ]
    first = [None if r is None else masking.resolved(r, t.text) for t, r in zip(texts, raw, strict=True)]
    forms = masking.forms(texts, first)
    final = [
        _guarded(masking, t, functools.partial(masking.final, t, r, forms)) if r is not None and t.masked else r
        for t, r in zip(texts, raw, strict=True)
    ]
    return _placed(case, texts, final, masking, escapes, len(extra))


def _placed(
    case: DisputeCase, texts: list[Text], final: list[list[Span] | None], masking: _Masking, escapes: int, extras: int
) -> Minimised:
    """The values numbered from the spans that are masked (no span without its number), then masked."""
    keys = list(dict.fromkeys((s.kind, s.key) for spans in final for s in spans or ()))
    index = _values(keys)
    numbers: dict[int, str] = {}
    for kind, key in keys:  # per kind in reading order, from 1
        if index[kind, key] not in numbers:
            numbers[index[kind, key]] = f"[{kind.upper()}_{sum(k == kind for k in _kinds(numbers)) + 1}]"
    written: dict[str, dict[Party, list[str]]] = {}
    occurrences: Counter[PersonalData] = Counter()
    masked = []
    for text, spans in zip(texts, final, strict=True):
        if spans is None:
            masked.append(WITHHELD)
            continue
        out, at = [], 0
        for s in spans:
            placeholder = numbers[index[s.kind, s.key]]
            out += [text.text[at : s.start], placeholder]
            at = s.end
            occurrences[s.kind] += 1
            if text.author is not None:
                forms = written.setdefault(placeholder, {}).setdefault(text.author, [])
                if text.text[s.start : s.end] not in forms:
                    forms.append(text.text[s.start : s.end])
        masked.append("".join([*out, text.text[at:]]))
    values = {
        p: Value(_kind(p), {party: tuple(f) for party, f in written.get(p, {}).items()}) for p in numbers.values()
    }
    split = len(masked) - extras
    report = Minimisation(
        kinds=sorted(masking.kinds, key=list(_PRIORITY).index),
        masked={
            k: Masked(values=sum(v.kind == k for v in values.values()), occurrences=occurrences[k])
            for k in sorted({v.kind for v in values.values()}, key=list(_PRIORITY).index)
        },
        escaped=escapes,
        kept=masking.kept,
        withheld=masking.withheld,
    )
    keyed = {(kind, key): numbers[index[kind, key]] for kind, key in keys}
    return Minimised(_rebuilt(case, iter(masked[:split])), tuple(masked[split:]), report, values, keyed)


def _kind(placeholder: str) -> PersonalData:
    return placeholder[1:].rsplit("_", 1)[0].lower()  # type: ignore[return-value]  # one of PERSONAL_DATA by construction


def _kinds(numbers: dict[int, str]) -> Iterator[PersonalData]:
    return (_kind(p) for p in numbers.values())


class _Recent:
    """The last few cases masked in this process: a case's every stage on one worker masks it once."""

    def __init__(self, size: int = 64):
        self.size, self.done = size, OrderedDict[str, Minimised]()
        self.views: dict[int, Minimised] = {}  # the jury's case (by identity) -> the masking that made it

    def get(
        self, case: DisputeCase, settings: EvidenceSettings, extra: tuple[str, ...], extra_by: Party | None
    ) -> Minimised:
        parts = [
            case.model_dump_json(),
            *extra,
            repr(
                (
                    extra_by,
                    settings.privacy.mask,
                    settings.privacy.phone_regions,
                    settings.privacy.keep_patterns,
                    settings.privacy.keep_fields,
                )
            ),
        ]
        key = hashlib.sha256("\x00".join(parts).encode()).hexdigest()
        if key in self.done:
            self.done.move_to_end(key)
            return self.done[key]
        result = self.done[key] = _minimise(case, settings, extra, extra_by)
        self.views[id(result.case)] = result  # held here, so the id is no other object's while it is
        if len(self.done) > self.size:
            gone = self.done.popitem(last=False)[1]
            self.views.pop(id(gone.case), None)
        return result

    def of(self, view: DisputeCase) -> Minimised | None:
        found = self.views.get(id(view))
        return found if found is not None and found.case is view else None


_recent = _Recent()


def minimise(
    case: DisputeCase, settings: EvidenceSettings, extra: tuple[str, ...] = (), extra_by: Party | None = None
) -> Minimised:
    """The case as the jury sees it: every value of the kinds in ``privacy.mask`` in its party text
    (and in ``extra``, read after the case, written by ``extra_by``) replaced by its placeholder,
    placeholder-shaped text a party typed put in round brackets, what ``privacy.keep_patterns``
    matches kept as written. Never raises on party text: a text that cannot be searched is withheld."""
    return _recent.get(case, settings, extra, extra_by)


def masking_of(view: DisputeCase) -> Minimised | None:
    """The masking that made ``view``, the case as the jury sees it (what ``minimise`` returned as
    its ``case``, the very object), while this process keeps it; None for any other case."""
    return _recent.of(view)


# what an image's text reads in place of a value the case's own text does not hold: words, not a
# placeholder, so that two such values never pass for one, nor for one of the case's
_DESCRIBED: dict[PersonalData, str] = {
    "phone": "(a phone number)",
    "email": "(an e-mail address)",
    "card": "(a card number)",
    "iban": "(an IBAN)",
    "address": "(an address)",
    "person": "(a name)",
    "url": "(a URL)",
}


def mask_read_text(text: str, view: DisputeCase, settings: EvidenceSettings) -> tuple[list[Span], str]:
    """Text read in a photo or a video frame (``evidence/ocr.py``), masked as the case's own: the spans
    of personal data in it, and the text with each replaced. A value the case's text holds is found
    as the case writes it too (a name on a label has no cue) and reads as the case's placeholder
    ("[PHONE_1]": the buyer's phone); one it does not hold reads as its kind in words ("(a phone
    number)"). ``view`` is the case as the jury sees it (``masking_of``); for another case only the
    detectors look. Raises what a detector raises: the caller withholds the image."""
    if not settings.privacy.mask:
        return [], text
    done = masking_of(view)
    keys = done.keys if done is not None else {}
    masking = _Masking(
        frozenset(settings.privacy.mask),
        [re.compile(p) for p in settings.privacy.keep_patterns],
        phone_regions(view, settings),
    )
    key_of = {placeholder: key for (_, key), placeholder in reversed(keys.items())}
    known = {
        form: _Form(value.kind, key_of[placeholder], frozenset({None}))
        for placeholder, value in (done.values.items() if done is not None else ())
        for forms in value.written.values()
        for form in forms
        if len(form) >= 3 and placeholder in key_of
    }
    read = Text(text, None, "image")
    spans = masking.closed(read, [*detect(text, masking.kinds, masking.regions), *masking.again(read, known)])
    out, at = [], 0
    for s in spans:
        out += [escaped(text[at : s.start])[0], _placeholder_of(s, keys)]
        at = s.end
    return spans, "".join([*out, escaped(text[at:])[0]])


def _placeholder_of(span: Span, keys: dict[tuple[PersonalData, str], str]) -> str:
    """The case's placeholder for the value: its own key's, or the one name or address it can only be."""
    if (span.kind, span.key) in keys:
        return keys[span.kind, span.key]
    same = _SAME.get(span.kind)
    fits = {p for (kind, key), p in keys.items() if same and kind == span.kind and same(span.key, key)}
    return fits.pop() if len(fits) == 1 else _DESCRIBED[span.kind]
