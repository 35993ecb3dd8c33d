"""The evidence section: what a case may hold, how media is read, and where it is stored."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ..schemas import PersonalData
from .fields import ConfigModel, nested

FormField = Literal["product", "dispute_reason", "requested_remedy"]
# every kind but URLs: a link to the listing is evidence more often than it is anyone's
DEFAULT_MASKED: tuple[PersonalData, ...] = ("phone", "email", "card", "iban", "address", "person")

# A number the dispute may turn on, kept as evidence: a label (order, tracking, parcel, invoice, ..., in
# each language letters are written in, and Chinese) then up to six groups of letters and digits with at
# least one digit ("tracking SP 4471 9023 3186 DE", "order #A-10293", "Invoice no. 2026-0042",
# "Bestellnummer 302-1234567", "订单号：2597343742"); lowercase words end it, so "order 12345 was late"
# keeps "order 12345". What it keeps is decided per detection (evidence/privacy.py): never a card or an IBAN.
_KEEP_LABELS = (
    "order|tracking|parcel|shipment|consignment|invoice|receipt|rma|ticket|reference|ref|sku|ean|gtin|isbn|asin|"
    "upc|mpn|model|bestellung|bestellnummer|auftrag|auftragsnummer|sendung|sendungsnummer|paket|paketnummer|"
    "rechnung|rechnungsnummer|quittung|artikelnummer|artikel|art\\.-nr\\.?|commande|suivi|colis|facture|reçu|"
    "référence|réf|pedido|envío|envio|seguimiento|factura|recibo|referencia|código|ordine|spedizione|"
    "tracciamento|fattura|ricevuta|riferimento|codice|bestelling|bestelnummer|zending|trackingcode|pakket|"
    "factuur|referentie|productcode|zamówienie|zamówienia|przesyłka|przesyłki|paczka|faktura|paragon|kod|"
    "encomenda|rastreio|rastreamento|referência|código|order|beställning|ordernummer|försändelse|faktura|kvitto"
)
DEFAULT_KEEP = (
    rf"(?:(?i:\b(?:{_KEEP_LABELS})(?:\s+(?:number|no\.?|nr\.?|n[º°o.]\.?|id|code|nummer|numéro|número|numero|"
    r"de suivi|di tracciamento|de seguimiento|de rastreio|produit|prodotto|de producto|do produto|produktu))?)"
    r"|(?:订单|运单|快递单|物流单|发票|商品|货|包裹)(?:号|编号)?)"
    r"\s*[:#：]?\s*#?(?=[A-Za-z0-9 -]{0,40}\d)"
    r"(?:[A-Za-z0-9]*\d[A-Za-z0-9-]*|[A-Z]{1,3})(?:[ -](?:[A-Za-z0-9]*\d[A-Za-z0-9-]*|[A-Z]{1,3}\b)){0,5}"
)


class IntakeLimits(ConfigModel):
    """The caps a case and its media are held to (the setting ``intake_limits``): what intake refuses
    whole, and what a media item over is noted on that item, never fatal."""

    # Kafka's broker message.max.bytes / topic max.message.bytes default to 1 MiB (1,048,588); keep
    # max_event_bytes below whatever your cluster sets. The producers allow it plus record overhead.
    max_event_bytes: int = Field(
        1_000_000,
        ge=16_384,
        description="largest message taken or sent: a bigger event "
        "is dead-lettered (event_too_large), a bigger stage output too (output_too_large)",
    )
    max_case_bytes: int = Field(
        400_000,
        ge=4_096,
        description="the case file at admission (inline media moved to "
        "the media store); the rest of max_event_bytes is room for what the stages add",
    )
    # each item costs its tags and ids in every juror's prompt whatever its text: 7,000 one-character
    # items (within the text cap and max_case_bytes) cost 2.3M tokens against a normal case's 74k
    max_case_items: int = Field(200, ge=1, description="evidence items of a case, both parties' rounds together")
    max_case_text_chars: int = Field(60_000, ge=1, description="all evidence text and captions of a case together")
    max_rounds_per_party: int = Field(10, ge=1, description="evidence rounds one party may submit in a case")
    max_text_chars: int = Field(20_000, description="longest text of one evidence item")
    max_media_items: int = Field(40, description="most media items in a case")
    max_inline_bytes: int = Field(512_000, description="largest inline (base64) media item, decoded")
    max_media_bytes: int = Field(50_000_000, description="largest media file or download read")
    max_url_redirects: int = Field(
        3, ge=0, description="redirects followed by a URL fetch, each target checked against url_allowlist again"
    )
    # Media within bounds (issue 11): every cap is checked from the header before a full decode; an
    # item over a cap is noted on that item ("image_too_large", "video_too_long", ...), never fatal.
    max_image_pixels: int = Field(50_000_000, ge=1, description="width x height an image may declare")
    max_image_dimension: int = Field(16_384, ge=64, description="longest side an image may declare, in pixels")
    max_video_pixels: int = Field(4096 * 2160, ge=1, description="width x height of a video's frames (DCI 4K)")
    max_video_dimension: int = Field(4096, ge=64, description="longest side of a video's frames, in pixels")
    max_video_duration_s: float = Field(600.0, gt=0, description="longest video, by its header and its timestamps")
    max_video_frames: int = Field(36_000, ge=1, description="most frames a video may hold (10 min at 60 fps)")

    @model_validator(mode="after")
    def _room_for_the_stages(self) -> IntakeLimits:
        if self.max_case_bytes >= self.max_event_bytes:
            raise ValueError("max_case_bytes must be below max_event_bytes: the stages add to the case file")
        return self


class PrivacySettings(ConfigModel):
    """Minimisation before the model (the setting ``privacy``, evidence/privacy.py and evidence/ocr.py): personal data in party text, and with ``ocr`` in images, replaced before any prompt is built."""

    # Minimisation before the model (issue 30, evidence/privacy.py): personal data in party text is
    # replaced by stable per-case placeholders before any prompt is built.
    mask: list[PersonalData] = Field(
        default_factory=lambda: list(DEFAULT_MASKED),
        description="the kinds of personal data replaced by placeholders ([PHONE_1], [EMAIL_1], ...) in the "
        "dispute form and the evidence before any prompt is built: phone, email, card, iban, address, person, "
        "url; [] = off (the model sees the text as submitted)",
    )
    phone_regions: list[str] = Field(
        default_factory=lambda: ["GB", "US", "DE", "FR"],
        description="where a phone number written without its country code may be from (ISO 3166 regions, "
        "the first that reads it as a valid number wins), read after the regions of the case's locale and the "
        "parties' and before those of the case's languages and currency; numbers with + or 00 are found "
        "whatever this says",
    )
    keep_patterns: list[str] = Field(
        default_factory=lambda: [DEFAULT_KEEP],
        description="regular expressions whose matches stay as they are, evidence a dispute may turn on: never "
        "a card number or an IBAN, a phone number only when written as no phone number is, any other value only "
        "when a match covers all of it; the default keeps a labelled order, tracking, parcel, invoice, reference "
        "or product number in the letters' languages ('tracking SP 4471 9023 3186 DE', 'Bestellnummer 302-1234567')",
    )
    keep_fields: list[FormField] = Field(
        default_factory=list,
        description="fields of the dispute form left unmasked (product, dispute_reason, requested_remedy), "
        "a placeholder typed in them still escaped; the evidence and appeal grounds are always masked",
    )
    # Text in photos and video frames (issue 39, evidence/ocr.py): read by Tesseract, the words that hold
    # personal data boxed out before the image reaches any model, the text read (masked) in the caption
    # of a model that reads captions only. Off by default: docs/benchmarks.md gives its cost per image.
    ocr: bool = Field(
        False,
        description="read the text in photos and video frames (Tesseract) and box out the words that hold "
        "personal data of the mask kinds before any model sees the image; the text read, masked, joins "
        "the item's caption. An image that cannot be read this way (no tesseract, a timeout) is withheld with a note",
    )
    ocr_timeout_s: float = Field(
        20.0, gt=0, description="longest Tesseract may take over one image or frame before the item is withheld"
    )

    @field_validator("phone_regions")
    @classmethod
    def _known_regions(cls, regions: list[str]) -> list[str]:
        import phonenumbers  # only when the setting is given or defaulted: the settings import nothing else heavy

        unknown = [r for r in regions if r not in phonenumbers.SUPPORTED_REGIONS]
        if unknown:
            raise ValueError(f"not a region phonenumbers knows: {', '.join(unknown)} (ISO 3166 codes, e.g. GB, US)")
        return regions

    @field_validator("keep_patterns")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as err:
                raise ValueError(f"privacy.keep_patterns: {pattern!r} is no regular expression ({err})") from None
        return patterns


class FrameSettings(ConfigModel):
    """Which frames of a video a model sees (the setting ``frames``, evidence/media.py)."""

    per_video: int = Field(30, ge=1, description="frames of each video the perceiver sees (the paper: 30)")
    passive_per_video: int = Field(8, ge=1, description="frames per video attached when stage II is off")
    # Which frames of a video (issue 15): evenly spaced, or a uniform skeleton plus the clip's visual
    # events (cuts, brief changes), found by decoding up to event_max_frames small frames.
    sampling: Literal["uniform", "events"] = Field(
        "uniform",
        description="uniform = evenly spaced frames; events = a uniform skeleton plus the clip's visual events "
        "(cuts, brief changes)",
    )
    event_share: float = Field(0.5, ge=0, le=1, description="most of a video's frame budget spent on events")
    event_max_frames: int = Field(1800, ge=2, description="most frames the event pass decodes per video")


class KeyServiceSettings(ConfigModel):
    """What wraps each case's data key before it is kept (the setting ``key_service``,
    evidence/key_service.py): the key store then holds only wrapped keys."""

    kind: Literal["local", "aws_kms"] = Field(
        "local",
        description="local: a key-encryption key in kek_file (none: the keys are kept unwrapped); "
        "aws_kms: AWS KMS wraps them under kms_key_id (the kms extra, boto3)",
    )
    kek_file: Path | None = Field(
        None, description="local: a file of 64 random bytes (`head -c 64 /dev/urandom`) wrapping every case key"
    )
    kms_key_id: str | None = Field(None, description="aws_kms: the KMS key's id, ARN or alias")
    kms_region: str | None = Field(None, description="aws_kms: its region (else the SDK's own configuration)")
    kms_endpoint_url: str | None = Field(None, description="aws_kms: an endpoint other than AWS's own")
    timeout_s: float = Field(
        5.0,
        gt=0,
        description="aws_kms: the connection to KMS, and then its answer, each within this; botocore tries "
        "a call twice at most",
    )
    cache_s: float = Field(
        30.0,
        ge=0,
        le=3600,
        description="how long a worker may hold a case key it read (0: never): a key erase destroyed "
        "stays usable by a worker that held it for at most this long",
    )


class EvidenceSettings(BaseModel):
    """What ``evidence/`` needs: the caps intake checks (``intake_limits``), media reading, the media store."""

    media_root: Path = Field(
        Path("."), description="the folder local media paths are read under; a path escaping it is refused"
    )
    url_allowlist: list[str] = Field(
        default_factory=list,
        description="allowed origins: host (http on 80, https on 443), host:port, or scheme://host[:port]",
    )
    intake_limits: IntakeLimits = nested(
        IntakeLimits,
        "the caps a case and its media are held to, any of them by itself "
        '(intake_limits={"max_event_bytes": 900000}, CYBERJURORS_INTAKE_LIMITS__MAX_EVENT_BYTES)',
        then=" (their defaults and meanings: reference/settings.md#intake_limits)",
    )
    frames: FrameSettings = nested(
        FrameSettings,
        'the frames of a video a model sees, any of these by itself (frames={"per_video": 16}, '
        "CYBERJURORS_FRAMES__SAMPLING)",
    )
    max_image_side: int = Field(768, ge=64, description="images are downscaled to this before the model")
    media_decode_concurrency: int = Field(2, ge=1, description="image and video decodes at once per process")
    media_fetch_timeout_s: float = Field(30.0, gt=0, description="one deadline for a URL fetch, body included")
    media_store: str = Field(
        "data/media",
        description="content-addressed store for inline media and dead-letter "
        "originals too large to carry: a folder or file:// URL, or an object store by URL "
        "(s3://bucket/prefix, gs://, az://, memory://) through fsspec",
    )
    media_sweep_interval_s: float = Field(3600.0, gt=0, description="how often a worker deletes expired media")
    privacy: PrivacySettings = nested(
        PrivacySettings,
        'personal data before the model, any of these by itself (privacy={"mask": []}, CYBERJURORS_PRIVACY__OCR)',
        then=" (their defaults and meanings: reference/settings.md#privacy)",
    )

    # Crypto-shredding (docs/operations/data-rights.md): each case's media sealed under a key of its
    # own, kept apart from the media; `erase` deletes the key, and every copy of the objects (backups,
    # object versions, a replica) is unreadable from then on.
    media_encryption: bool = Field(
        False,
        description="seal the media a case puts in the media store (inline media, large dead-letter "
        "originals) with AES-SIV under a key of the case's own, kept in case_key_store; needs case_key_secret",
    )
    case_key_store: str = Field(
        "data/case-keys",
        description="where the per-case keys are kept (a folder, or an object store by URL, as media_store): "
        "apart from the media store, on storage whose deletions you trust; every worker, the console "
        "and `erase` must reach it",
    )
    payload_encryption: bool = Field(
        False,
        description="seal every record the service writes that carries party text or a case file (its "
        "topics, the workers' stage results, dead letters) under the case's key, as media_encryption "
        "does the media; needs media_encryption",
    )
    key_service: KeyServiceSettings = nested(
        KeyServiceSettings,
        'what wraps each case key before it is kept, any of these by itself (key_service={"kind": '
        '"aws_kms", "kms_key_id": "alias/cj"}, CYBERJURORS_KEY_SERVICE__CACHE_S)',
        then=" (reference/settings.md#key_service)",
    )
    case_key_secret: str | None = Field(
        None,
        description="the secret (32+ characters) the key store names each case's key by (an HMAC of the "
        "case id), so it holds no case id; the same in every worker, the console and `erase`",
    )
