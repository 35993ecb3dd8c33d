"""Each party's own words back (issue 39): a letter to a party shows that party's own values where the
jury read placeholders, and nothing else of what was masked.

The jury, the letter's model and its verifier only ever read the case minimised
(``evidence/privacy.py``), so a letter is written with placeholders: ``[ADDRESS_1]`` where the buyer
wrote their address. ``restored`` puts back, in the text of a letter addressed to one party, the
values of the placeholders that party wrote themselves, in the form they first wrote each one; a
placeholder only the other party wrote stays as it is. A placeholder both parties wrote (the same
address, given by each) shows the addressee's own form, never the other's. Placeholders are put back
in one pass over the text the model wrote, so a value that itself reads like a placeholder is never
replaced again.

The map (``PlaceholderMap``) is what ``Minimised.values`` holds, written down: the letters stage keeps
it in the workers' tables beside the letters, sealed under the case's key when ``media_encryption``
is on, and erased with the case (``streams/letters.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

from ..evidence.privacy import PLACEHOLDER, Value
from ..schemas import Party, PartyLetter, PersonalData


class Written(BaseModel):
    """One placeholder: its kind and, per party whose text held it, the forms they wrote it in."""

    kind: PersonalData
    written: dict[Party, list[str]] = Field(default_factory=dict)


class PlaceholderMap(BaseModel):
    """What each placeholder of a case stands for: never sent anywhere, read only to write a party's
    letter with that party's own values."""

    values: dict[str, Written] = Field(default_factory=dict)

    @classmethod
    def of(cls, values: Mapping[str, Value]) -> PlaceholderMap:
        return cls(
            values={
                p: Written(kind=v.kind, written={party: list(forms) for party, forms in v.written.items()})
                for p, v in values.items()
            }
        )

    def own(self, party: Party) -> dict[str, str]:
        """placeholder -> the form ``party`` first wrote it in, for every placeholder ``party`` wrote."""
        return {p: w.written[party][0] for p, w in self.values.items() if w.written.get(party)}


def restored_text(text: str, own: Mapping[str, str]) -> str:
    """``text`` with each placeholder in ``own`` replaced by its value, in one pass."""
    if not own or "[" not in text:
        return text
    return PLACEHOLDER.sub(lambda m: own.get(m.group(), m.group()), text)


def restored(letter: PartyLetter, placeholders: PlaceholderMap) -> PartyLetter:
    """The letter with its addressee's own values in place of their placeholders: the subject, the
    body, each statement, the remedy, and the statements the check removed (read by the platform, on
    the addressee's letter). The letter as it was when nothing of the addressee's was masked."""
    own = placeholders.own(letter.party)
    written = letter.model_dump_json()
    if not any(p in written for p in own):  # nothing of the addressee's masked: the same letter, the same bytes
        return letter
    data = letter.model_dump(mode="json")
    for field in ("subject", "body", "remedy"):
        data[field] = restored_text(data[field], own)
    for statement in (*data["statements"], *data["check"]["removed"]):
        statement["text"] = restored_text(statement["text"], own)
    # validated again, as every reader of disputes.letters will: a statement its values made longer than
    # its bound is cut here as there
    return PartyLetter.model_validate(data)
