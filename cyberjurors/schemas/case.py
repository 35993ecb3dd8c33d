"""The dispute case D = {d, e_1^b, e_1^s, ...}: metadata d and evidence rounds per party."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Annotated, Any, Final, Literal, Protocol, get_args

from iso4217 import Currency
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StringConstraints,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

SCHEMA_VERSION: Final = 1
JURY_SIZE = 17  # ground-truth votes come from the platform's 17 human jurors

Party = Literal["buyer", "seller"]
PARTIES: tuple[Party, ...] = get_args(Party)
Category = Literal["appliances", "clothing", "food", "digital", "others"]
CATEGORIES: tuple[Category, ...] = get_args(Category)
EvidenceKind = Literal["text", "image", "video"]
CaseId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")]
EvidenceId = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._:-]+$")]
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
# a sane ceiling whatever the currency (10^12 of the smallest-valued one is still far beyond any order);
# it keeps 1e308 and the like out of arithmetic and prompts
MAX_ORDER_AMOUNT = Decimal(10) ** 12


def _iso4217(code: str) -> str:
    # the iso4217 package tracks the published ISO list; codes without a minor unit (metals, XDR,
    # the testing code XTS and the no-currency code) are never what an order was paid in
    try:
        if Currency(code).exponent is not None:
            return code
    except ValueError:
        pass
    raise PydanticCustomError("unknown_currency", "not an ISO 4217 currency code: {code}", {"code": code})


CurrencyCode = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$"), AfterValidator(_iso4217)]
# a BCP 47 language tag as platforms send them ("de", "pt-BR", "en_GB"); whether letters can be written
# in it is the letters stage's question (letter_locales), not the schema's
Locale = Annotated[
    str, StringConstraints(min_length=2, max_length=35, pattern=r"^[A-Za-z]{2,8}(?:[-_][A-Za-z0-9]{1,8})*$")
]


def language_of(locale: str) -> str:
    """The primary language subtag, lower-cased: "pt-BR" -> "pt", "en_GB" -> "en"."""
    return locale.replace("_", "-").split("-")[0].lower()


def _without_added_defaults(data: Any, model: BaseModel, added: tuple[str, ...]) -> Any:
    """A field added after schema version 1 is left out of the JSON while it holds its default, so a
    case that does not use it serialises (and hashes: ``DisputeCase.digest``, verdict ids, the
    precedent base's digests) byte for byte as it did before the field existed."""
    if isinstance(data, dict):
        for name in added:
            if getattr(model, name) == type(model).model_fields[name].default:
                data.pop(name, None)
    return data


def now() -> datetime:
    """The time every record is stamped with: aware, in UTC."""
    return datetime.now(UTC)


class Strict(BaseModel):
    """Events from outside are parsed strictly: unknown fields are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Record(BaseModel):
    """What the pipeline itself writes (case files, verdicts, letters): no unknown field, and not frozen."""

    model_config = ConfigDict(extra="forbid")


class MediaRef(Strict):
    """Where a photo or video lives. Exactly one of path, url, data_base64, stored."""

    media_type: str = Field(description="MIME type, e.g. image/jpeg, image/png, video/mp4")
    path: str | None = Field(None, description="relative to the worker's media root")
    url: str | None = Field(None, description="http(s) URL on the worker's allow-list")
    data_base64: str | None = Field(None, description="small inline payload")
    stored: Sha256 | None = Field(
        None,
        description="sha256 of the bytes in the media store: what intake puts in place of data_base64 (a claim check)",
    )
    sha256: Sha256 | None = Field(None, description="content hash, checked when the media is read")

    @model_validator(mode="after")
    def _one_source(self) -> MediaRef:
        given = [s for s in (self.path, self.url, self.data_base64, self.stored) if s is not None]
        if len(given) != 1:
            raise ValueError("media needs exactly one of path, url, data_base64, stored")
        return self


class EvidenceItem(Strict):
    id: EvidenceId
    kind: EvidenceKind
    text: str | None = Field(None, description="chat text, or the party's caption for media")
    media: MediaRef | None = None
    private: bool = Field(
        False,
        description="submitted to the platform in confidence, not shown to the other party: the jury "
        "weighs it, and a letter to the other party discloses it only as letter_private_evidence allows",
    )

    @model_serializer(mode="wrap")
    def _serialise(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_added_defaults(handler(self), self, ("private",))

    @model_validator(mode="after")
    def _shape(self) -> EvidenceItem:
        if self.kind == "text":
            if not self.text or self.media is not None:
                raise ValueError(f"text evidence {self.id!r} needs text and no media")
        elif self.media is None:
            raise ValueError(f"{self.kind} evidence {self.id!r} needs media")
        return self


class EvidenceRound(Strict):
    party: Party
    round: int = Field(ge=1)
    submitted_at: AwareDatetime | None = None
    items: list[EvidenceItem] = Field(min_length=1)


class CaseMetadata(Strict):
    """d: the order and the dispute as the platform records them."""

    category: Category
    product: str = Field(min_length=1, max_length=500)
    # ge=0, not gt: an order paid entirely by voucher can still be disputed
    order_amount: Decimal = Field(ge=0, le=MAX_ORDER_AMOUNT, allow_inf_nan=False)
    currency: CurrencyCode
    ordered_at: AwareDatetime
    delivered_at: AwareDatetime | None = None
    dispute_reason: str = Field(min_length=1, max_length=2000)
    requested_remedy: str = Field(min_length=1, max_length=500)
    locale: Locale | None = Field(
        None, description="the case's language (BCP 47, e.g. de, pt-BR): both parties' unless set for one"
    )
    buyer_locale: Locale | None = Field(None, description="the buyer's language, over locale")
    seller_locale: Locale | None = Field(None, description="the seller's language, over locale")

    @model_validator(mode="after")
    def _delivered_after_order(self) -> CaseMetadata:
        if self.delivered_at is not None and self.delivered_at < self.ordered_at:
            raise PydanticCustomError("delivered_before_ordered", "delivered_at is before ordered_at")
        return self

    @model_serializer(mode="wrap")
    def _serialise(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_added_defaults(handler(self), self, ("locale", "buyer_locale", "seller_locale"))

    def locale_of(self, party: Party) -> tuple[str | None, str]:
        """The language the platform gave for ``party`` and where it was given: the party's own
        field, else the case's; (None, "") when neither is set."""
        own = self.buyer_locale if party == "buyer" else self.seller_locale
        if own is not None:
            return own, "party"
        return (self.locale, "case") if self.locale is not None else (None, "")


class Voter(Protocol):
    @property
    def vote(self) -> Party: ...


class Votes(Strict):
    # strict: a vote count given as a string ("12") is an error, not coerced
    buyer: int = Field(ge=0, strict=True)
    seller: int = Field(ge=0, strict=True)
    abstained: int = Field(
        0,
        ge=0,
        strict=True,
        description="jurors seated for the round who gave no valid ballot (their answer was cut off or "
        "invalid twice): counted here, never as a vote for either side",
    )

    @model_serializer(mode="wrap")
    def _serialise(self, handler: SerializerFunctionWrapHandler) -> Any:
        return _without_added_defaults(handler(self), self, ("abstained",))

    @classmethod
    def of(cls, ballots: Iterable[Voter], abstained: int = 0) -> Votes:
        """The split of a round's ballots (anything with a ``vote``), and the seats that abstained."""
        sides = [b.vote for b in ballots]
        return cls(buyer=sides.count("buyer"), seller=sides.count("seller"), abstained=abstained)

    @property
    def total(self) -> int:
        """The votes cast (abstentions are no votes)."""
        return self.buyer + self.seller

    @property
    def seats(self) -> int:
        """The jurors seated for the round: the votes cast and the abstentions."""
        return self.total + self.abstained

    @property
    def winner(self) -> Party:
        return "seller" if self.seller > self.buyer else "buyer"


class GroundTruthVotes(Votes):
    @model_validator(mode="after")
    def _jury_size(self) -> GroundTruthVotes:
        if self.total != JURY_SIZE:
            raise ValueError(f"ground-truth votes must sum to {JURY_SIZE}, got {self.total}")
        return self


class DisputeCase(Strict):
    case_id: CaseId
    metadata: CaseMetadata
    rounds: list[EvidenceRound] = Field(min_length=1)
    ground_truth: GroundTruthVotes | None = None

    @model_validator(mode="after")
    def _unique_ids(self) -> DisputeCase:
        seen: set[str] = set()
        for item in self.items():
            if item.id in seen:
                raise ValueError(f"evidence id {item.id!r} appears twice")
            seen.add(item.id)
        return self

    def digest(self) -> str:
        """Content hash: the same case content always gives the same digest."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()

    def items(self, party: Party | None = None) -> list[EvidenceItem]:
        return [i for r in self.rounds if party in (None, r.party) for i in r.items]

    def item(self, evidence_id: str) -> EvidenceItem:
        for item in self.items():
            if item.id == evidence_id:
                return item
        raise KeyError(evidence_id)

    def party_of(self, evidence_id: str) -> Party:
        for r in self.rounds:
            if any(i.id == evidence_id for i in r.items):
                return r.party
        raise KeyError(evidence_id)

    def texts(self, party: Party) -> list[tuple[int, EvidenceItem]]:
        """T^p: the party's text evidence with its round number."""
        return [(r.round, i) for r in self.rounds if r.party == party for i in r.items if i.kind == "text"]
