"""Delivery labels for the OCR tests and bench/ocr.py (issue 39): Pillow draws a label with a Faker name,
street address and phone number of a locale, and an order number that must stay readable; seeded, so
the same seed is the same label."""

from __future__ import annotations

import io
from dataclasses import dataclass

import phonenumbers
from faker import Faker
from PIL import Image, ImageDraw, ImageFont

# locales whose labels Tesseract's English data reads (Latin letters), with the phone region
LOCALES = {"en_GB": "GB", "en_US": "US", "en_IE": "IE", "en_AU": "AU"}
SIZE = (760, 460)


@dataclass(frozen=True)
class Label:
    name: str
    street: str
    town: str
    phone: str
    order: str
    png: bytes

    @property
    def values(self) -> dict[str, str]:
        return {"person": self.name, "address": self.street, "phone": self.phone}


def _phone(fake: Faker, region: str) -> str:
    """A number of the region that libphonenumber deems valid, in its international form."""
    for _ in range(200):
        try:
            number = phonenumbers.parse(fake.phone_number(), region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL)
    raise AssertionError(f"no valid {region} number from Faker")


def label(locale: str = "en_GB", seed: int = 0) -> Label:
    fake = Faker(locale)
    fake.seed_instance(seed)
    name = f"{fake.first_name()} {fake.last_name()}"
    street, town = fake.street_address().replace("\n", " "), fake.city()
    phone = _phone(fake, LOCALES[locale])
    order = f"{40000 + seed * 7919 % 60000}-{10 + seed % 90}"
    lines = [
        "PARCEL DELIVERY LABEL",
        f"Order {order}",
        f"Recipient: {name}",
        f"Ship to: {street}, {town}",
        f"Phone: {phone}",
        "Weight 2.4 kg  Handle with care",
    ]
    image = Image.new("RGB", SIZE, (250, 248, 240))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=26)
    for i, line in enumerate(lines):
        draw.text((30, 30 + i * 62), line, fill=(20, 20, 20), font=font)
    out = io.BytesIO()
    image.save(out, "PNG")
    return Label(name, street, town, phone, order, out.getvalue())
