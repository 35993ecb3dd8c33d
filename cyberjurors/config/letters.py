"""The letters section: whether each party gets a letter after a verdict, the languages letters may be
written in, the platform's default one, and how much of the other party's private evidence a letter
may disclose."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ..schemas.case import Locale, language_of

# the languages the offline stand-in has a template for (jury/letter_text.py): a platform on a real
# model may list more, and the stand-in then writes its English template, noted on the letter
DEFAULT_LETTER_LOCALES = ["en", "de", "fr", "es", "it"]


class LetterSettings(BaseModel):
    """What the letters stage (``jury/letters.py``, ``streams/letters.py``) needs besides the model."""

    letters: bool = Field(
        True,
        description="after every verdict (and an appeal's), write each party a letter in their language "
        "to disputes.letters: a model call per party, and a verifier call per letter when the "
        "verifier is on; off = no letters",
    )
    letter_locales: list[Locale] = Field(
        default_factory=lambda: list(DEFAULT_LETTER_LOCALES),
        min_length=1,
        description="the languages letters may be written in (language subtags); a party whose language "
        "is not among them gets letter_default_locale, and the letter says so",
    )
    letter_default_locale: Locale = Field(
        "en",
        description="the platform's default language: for a party whose language is not given, cannot be "
        "detected from their messages, or is not in letter_locales",
    )
    letter_private_evidence: Literal["withhold", "mention", "disclose"] = Field(
        "withhold",
        description="what a letter may say of evidence the other party submitted in confidence (private: "
        "true): withhold = nothing, and a statement resting on it is removed; mention = that such "
        "evidence exists and counted, never what it shows; disclose = described like any other",
    )

    @field_validator("letter_locales", mode="after")
    @classmethod
    def _languages(cls, value: list[str]) -> list[str]:
        # letters are matched by language subtag: "pt-BR" and "pt" are one entry
        return list(dict.fromkeys(language_of(v) for v in value))

    @field_validator("letter_default_locale", mode="after")
    @classmethod
    def _language(cls, value: str) -> str:
        return language_of(value)

    @model_validator(mode="after")
    def _default_is_writable(self) -> LetterSettings:
        if self.letter_default_locale not in self.letter_locales:
            raise ValueError(
                f"letter_default_locale={self.letter_default_locale} is not in letter_locales "
                f"({', '.join(self.letter_locales)}): the fallback language must be one letters can be written in"
            )
        return self
