"""Which language a party's letter is written in: the platform's field for the party, else the case's,
else detected from the party's own messages, else the platform's default, and the default too for
a language letters cannot be written in (``letter_locales``), said in a note.

Detection is a stopword count, not a model: the share of a party's words that are among the most
frequent function words of each language, the highest share winning when it is clear of the next.
A few lines of chat are enough for that between the languages listed here, it costs nothing, and
it needs no model files (``lingua`` and ``langdetect`` ship tens of megabytes of profiles for
languages letters are not written in). What it cannot tell apart it leaves undetected, and the
default language applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from ..config import LetterSettings
from ..schemas import DisputeCase, Party, language_of

# the most frequent function words of each language, few shared between them; a language is listed
# only where its list tells it from the others on a few chat messages
FUNCTION_WORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in {
        "en": "the and is are was were have has had not this that with you your my it of to for on be been would "
        "will what which there they we but i me",
        "de": "der die das und ist nicht ich sie es mit auf für ein eine einen dem den des zu von sich auch wir "
        "war haben habe hat wurde aber noch mein meine kein keine bitte",
        "fr": "le les et est une des du je vous nous pas qui pour avec dans sur ce cette mais très ai été sont "
        "mon ma mes il elle au aux",
        "es": "el los las y es una del que por para con no muy pero mi mis se lo su al está fue han he ha como "
        "también hasta desde usted nos",
        "it": "il gli e è della delle degli che non per sono mi ho ha ma anche molto questo questa nel nella "
        "del alla come più stato",
        "pt": "o os e é um uma do da dos das não que para com em no na muito mas eu foi está meu minha você "
        "seu sua ao pelo pela a ele ela isso já também",
        "nl": "de het een en is niet ik je u van op met voor dat die wij we zijn was heb heeft maar ook geen "
        "mijn naar bij nog er",
        "pl": "i w z na nie się to jest że do o jak ale po czy tak mam jestem był była ten ta mój moja dla przez od",
        "sv": "och att det som en är på för med jag inte av den till har de om ett var men så vi min mitt kan",
    }.items()
}
WORD = re.compile(r"[^\W\d_]+")
MIN_HITS = 3
"""function words a party's messages must hold before a language is named at all"""
MIN_SHARE = 0.12
"""and the share of their words they must be: a product name or a list of model numbers is no sentence"""
CLEAR_OF_NEXT = 1.25
"""how far the best language's count must be ahead of the next one's"""

Source = Literal["party", "case", "detected", "default"]


def detect(texts: Iterable[str]) -> str | None:
    """The language of ``texts`` (a language subtag), or None when it cannot be told."""
    words = [w.lower() for text in texts for w in WORD.findall(text)]
    if not words:
        return None
    hits = {lang: sum(w in listed for w in words) for lang, listed in FUNCTION_WORDS.items()}
    ranked = sorted(hits.items(), key=lambda kv: (-kv[1], kv[0]))
    (best, count), (_, second) = ranked[0], ranked[1]
    if count < MIN_HITS or count / len(words) < MIN_SHARE or count < CLEAR_OF_NEXT * second:
        return None
    return best


def party_texts(case: DisputeCase, party: Party) -> list[str]:
    """What the party wrote: their messages and their captions of photos and videos."""
    return [item.text for item in case.items(party) if item.text]


@dataclass(frozen=True)
class LetterLocale:
    """The language a letter is written in, where it came from, and what a reader should know."""

    locale: str
    source: Source
    requested: str | None = None
    """the locale given or detected, when letters cannot be written in it"""
    notes: list[str] = field(default_factory=list)


def letter_locale(case: DisputeCase, party: Party, settings: LetterSettings) -> LetterLocale:
    """The letter's language for ``party``: given (the party's field, then the case's), else detected
    from their messages, else the platform's default; a language not in letter_locales becomes the
    default, with a note saying which was asked for."""
    default = settings.letter_default_locale
    given, source = case.metadata.locale_of(party)
    if given is None:
        texts = party_texts(case, party)
        found = detect(texts)
        if found is None:
            why = "sent no messages" if not texts else "wrote too little to tell their language"
            return LetterLocale(
                default,
                "default",
                notes=[f"the {party} {why}: the letter is in the platform's default language ({default})"],
            )
        given, source = found, "detected"
    language = language_of(given)
    if language in settings.letter_locales:
        return LetterLocale(language, source)  # type: ignore[arg-type]  # source is one of the given ones here
    where = {"party": f"{party}_locale", "case": "the case's locale", "detected": "detected from their messages"}
    return LetterLocale(
        default,
        "default",
        requested=given,
        notes=[
            f"the {party}'s language {given} ({where[source]}) is not one letters are written in "
            f"(letter_locales: {', '.join(settings.letter_locales)}): the letter is in the platform's "
            f"default language ({default})"
        ],
    )
