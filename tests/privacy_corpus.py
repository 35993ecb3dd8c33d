"""A corpus of party text for the masking's recall and false positives (issue 39), generated with Faker
in ten locales: each value of a kind (phone, email, card, iban, person, address) put in a sentence of
the locale's language, and decoys (order and tracking numbers, prices, dates, product codes) that
must come out as they went in. Shared by tests/unit/evidence/test_privacy_corpus.py (the floors) and
bench/privacy_recall.py (the table); seeded, so the same seed is the same corpus.

How the values are drawn, and what is left out, said once here:

* phones: Faker's numbers that libphonenumber deems valid in the locale's region (Faker writes many that
  are not: the UK's drama ranges, US area codes not in service), written as Faker wrote them, and in
  national, international and E.164 form in turn;
* e-mail addresses: Faker's, and as many built from the locale's names with their accents and a
  Unicode (IDN) domain, or that domain in its ASCII form;
* cards: every scheme Faker draws but 13-digit Visa (no longer issued; an unbroken 13 digits whose EAN
  check holds is read as a barcode), unbroken or in the scheme's groups with spaces, dashes, dots,
  slashes or double spaces;
* IBANs: Faker's for the locale (a German one for the US and China, which have none), compact, in fours,
  in lower case or oddly spaced;
* names: a given name and a surname after one of the language's cues (an introduction, a signature,
  a recipient);
* street addresses: Faker's street address or full address (its lines joined by commas or kept as
  lines), in a sentence with an address cue or without one.

A probe is found when the text comes back as the sentence with the value, and only the value's
characters or more, replaced by one placeholder of its kind.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import phonenumbers
from faker import Faker
from stdnum import iban as stdnum_iban

from cyberjurors.config import EvidenceSettings
from cyberjurors.evidence.privacy import minimise, readable
from cyberjurors.schemas import DisputeCase

from . import factories

# locale -> (the case's locale, its currency, the phone region, the sentences' language)
LOCALES: dict[str, tuple[str, str, str, str]] = {
    "en_GB": ("en-GB", "GBP", "GB", "en"),
    "en_US": ("en-US", "USD", "US", "en"),
    "de_DE": ("de-DE", "EUR", "DE", "de"),
    "fr_FR": ("fr-FR", "EUR", "FR", "fr"),
    "es_ES": ("es-ES", "EUR", "ES", "es"),
    "it_IT": ("it-IT", "EUR", "IT", "it"),
    "nl_NL": ("nl-NL", "EUR", "NL", "nl"),
    "pl_PL": ("pl-PL", "PLN", "PL", "pl"),
    "pt_BR": ("pt-BR", "BRL", "BR", "pt"),
    "zh_CN": ("zh-CN", "CNY", "CN", "zh"),
}
KINDS = ("phone", "email", "card", "iban", "person", "address")
DECOYS = ("order", "tracking", "price", "date", "product")

# {v} is the value; each kind's sentences in each language
SENTENCES: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {
        "phone": ("Please call me on {v} after six.", "My number is {v}", "The courier rang {v} twice."),
        "email": ("Write to me at {v} please.", "My e-mail: {v}"),
        "card": ("I paid with my card {v} on the day.", "Card number {v}, expiry 09/28."),
        "iban": ("Refund to IBAN {v} please.", "Our account is {v}."),
        "person": (
            "My name is {v} and I ordered the coat.",
            "Kind regards,\n{v}",
            "It was signed by {v} at the door.",
            "Dear {v}, thank you.",
        ),
        "address": (
            "Please send it to {v} instead.",
            "My address is {v}.",
            "The parcel went to {v} by mistake.",
            "{v}",
        ),
    },
    "de": {
        "phone": ("Bitte rufen Sie mich unter {v} an.", "Meine Nummer: {v}"),
        "email": ("Schreiben Sie mir an {v}.", "E-Mail: {v}"),
        "card": ("Ich habe mit der Karte {v} bezahlt.", "Kartennummer {v}"),
        "iban": ("Bitte erstatten auf {v}.", "IBAN: {v}"),
        "person": ("Mein Name ist {v}, ich habe bestellt.", "Mit freundlichen Grüßen\n{v}", "Unterschrieben von {v}."),
        "address": ("Meine Adresse ist {v}.", "Das Paket ging an {v}.", "Bitte an {v} liefern."),
    },
    "fr": {
        "phone": ("Appelez-moi au {v} svp.", "Mon numéro : {v}"),
        "email": ("Écrivez-moi à {v}.", "Mon e-mail est {v}"),
        "card": ("J'ai payé avec la carte {v}.", "Carte {v}"),
        "iban": ("Remboursez sur l'IBAN {v}.", "Mon compte : {v}"),
        "person": ("Je m'appelle {v} et j'ai commandé.", "Cordialement,\n{v}", "Colis reçu par {v}."),
        "address": ("Mon adresse est {v}.", "Le colis est parti au {v}.", "Livrez au {v} svp."),
    },
    "es": {
        "phone": ("Llámeme al {v}, por favor.", "Mi teléfono: {v}"),
        "email": ("Escríbame a {v}.", "Mi correo es {v}"),
        "card": ("Pagué con la tarjeta {v}.", "Tarjeta {v}"),
        "iban": ("Devuelvan el dinero a {v}.", "Mi cuenta: {v}"),
        "person": ("Me llamo {v} y compré el abrigo.", "Atentamente,\n{v}", "Lo firmó {v}.", "Recibido por {v}."),
        "address": ("Mi dirección es {v}.", "El paquete fue a {v}.", "Envíenlo a {v}."),
    },
    "it": {
        "phone": ("Chiamatemi al {v}, grazie.", "Il mio numero: {v}"),
        "email": ("Scrivetemi a {v}.", "Email: {v}"),
        "card": ("Ho pagato con la carta {v}.", "Carta {v}"),
        "iban": ("Rimborsate su {v}.", "IBAN: {v}"),
        "person": ("Mi chiamo {v} e ho ordinato.", "Cordiali saluti,\n{v}", "Ricevuto da {v}."),
        "address": ("Il mio indirizzo è {v}.", "Il pacco è andato a {v}.", "Spedite a {v}."),
    },
    "nl": {
        "phone": ("Bel me op {v} alstublieft.", "Mijn nummer: {v}"),
        "email": ("Mail me op {v}.", "E-mail: {v}"),
        "card": ("Ik betaalde met kaart {v}.", "Kaartnummer {v}"),
        "iban": ("Stort terug op {v}.", "Rekening: {v}"),
        "person": ("Mijn naam is {v} en ik bestelde.", "Met vriendelijke groet,\n{v}", "Ontvangen door {v}."),
        "address": ("Mijn adres is {v}.", "Het pakket ging naar {v}.", "Bezorg op {v} aub."),
    },
    "pl": {
        "phone": ("Proszę dzwonić pod {v}.", "Mój numer: {v}"),
        "email": ("Proszę pisać na {v}.", "E-mail: {v}"),
        "card": ("Zapłaciłem kartą {v}.", "Karta {v}"),
        "iban": ("Proszę o zwrot na {v}.", "Konto: {v}"),
        "person": ("Nazywam się {v} i zamówiłem kurtkę.", "Z poważaniem,\n{v}", "Odebrane przez {v}."),
        "address": ("Mój adres to {v}.", "Paczka trafiła na {v}.", "Proszę wysłać na {v}."),
    },
    "pt": {
        "phone": ("Ligue para {v}, por favor.", "Meu telefone: {v}"),
        "email": ("Escreva para {v}.", "Meu e-mail é {v}"),
        "card": ("Paguei com o cartão {v}.", "Cartão {v}"),
        "iban": ("Reembolso para {v}.", "Conta: {v}"),
        "person": ("Meu nome é {v} e comprei o casaco.", "Atenciosamente,\n{v}", "Recebido por {v}."),
        "address": ("Meu endereço é {v}.", "O pacote foi para {v}.", "Enviem para {v}."),
    },
    "zh": {
        "phone": ("请拨打{v}联系我。", "我的电话：{v}"),
        "email": ("请发邮件到{v}。", "邮箱：{v}"),
        "card": ("我用卡{v}付款。", "卡号{v}"),
        "iban": ("请退款到{v}。", "账户：{v}"),
        "person": ("我叫{v}，我买了外套。", "收件人：{v}", "联系人{v}"),
        "address": ("我的地址是{v}。", "包裹寄到了{v}。", "请送到{v}"),
    },
}

DECOY_SENTENCES: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {"order": ("My order {v} never came.", "Order number {v}", "Order {v} was wrong."), "tracking": ("Tracking {v} shows nothing.", "The parcel {v} is lost."), "price": ("I paid {v} for it.", "It cost {v}"), "date": ("It arrived on {v}.", "Ordered {v}"), "product": ("Product code {v}", "The box says {v}.")},
    "de": {"order": ("Meine Bestellung {v} kam nie an.", "Bestellnummer {v}"), "tracking": ("Sendungsnummer {v}", "Paket {v} ist weg."), "price": ("Ich habe {v} bezahlt.", "Preis: {v}"), "date": ("Geliefert am {v}.", "Bestellt am {v}"), "product": ("Artikelnummer {v}", "Auf der Packung steht {v}.")},
    "fr": {"order": ("Ma commande {v} n'est jamais arrivée.", "Commande n° {v}"), "tracking": ("Numéro de suivi {v}", "Le colis {v} est perdu."), "price": ("J'ai payé {v}.", "Prix : {v}"), "date": ("Livré le {v}.", "Commandé le {v}"), "product": ("Référence produit {v}", "La boîte indique {v}.")},
    "es": {"order": ("Mi pedido {v} no llegó.", "Pedido nº {v}"), "tracking": ("Número de seguimiento {v}", "El envío {v} se perdió."), "price": ("Pagué {v}.", "Precio: {v}"), "date": ("Entregado el {v}.", "Pedido el {v}"), "product": ("Código de producto {v}", "La caja dice {v}.")},
    "it": {"order": ("Il mio ordine {v} non è arrivato.", "Ordine n. {v}"), "tracking": ("Numero di tracciamento {v}", "La spedizione {v} è persa."), "price": ("Ho pagato {v}.", "Prezzo: {v}"), "date": ("Consegnato il {v}.", "Ordinato il {v}"), "product": ("Codice prodotto {v}", "Sulla scatola c'è {v}.")},
    "nl": {"order": ("Mijn bestelling {v} kwam nooit.", "Bestelnummer {v}"), "tracking": ("Trackingcode {v}", "Het pakket {v} is kwijt."), "price": ("Ik betaalde {v}.", "Prijs: {v}"), "date": ("Bezorgd op {v}.", "Besteld op {v}"), "product": ("Productcode {v}", "Op de doos staat {v}.")},
    "pl": {"order": ("Moje zamówienie {v} nie dotarło.", "Zamówienie nr {v}"), "tracking": ("Numer przesyłki {v}", "Paczka {v} zaginęła."), "price": ("Zapłaciłem {v}.", "Cena: {v}"), "date": ("Dostarczono {v}.", "Zamówiono {v}"), "product": ("Kod produktu {v}", "Na pudełku jest {v}.")},
    "pt": {"order": ("Meu pedido {v} não chegou.", "Pedido nº {v}"), "tracking": ("Código de rastreio {v}", "A encomenda {v} sumiu."), "price": ("Paguei {v}.", "Preço: {v}"), "date": ("Entregue em {v}.", "Pedido em {v}"), "product": ("Código do produto {v}", "A caixa diz {v}.")},
    "zh": {"order": ("我的订单{v}没有到。", "订单号：{v}"), "tracking": ("快递单号{v}", "包裹{v}丢了。"), "price": ("我付了{v}。", "价格：{v}"), "date": ("{v}送达。", "下单日期：{v}"), "product": ("商品编号{v}", "盒子上写着{v}。")},
}  # fmt: skip


@dataclass(frozen=True)
class Probe:
    """A value of ``kind`` written into ``text`` at ``start``; ``kind`` is a decoy's kind for a decoy."""

    locale: str
    kind: str
    text: str
    start: int
    value: str


def case_of(locale: str, texts: list[str], case_id: str) -> DisputeCase:
    """One case whose buyer wrote each text as an item, in the locale's language and currency."""
    tag, currency, _, _ = LOCALES[locale]
    items = [{"id": f"b{i + 1}", "kind": "text", "text": t} for i, t in enumerate(texts)]
    metadata = {**factories.METADATA, "currency": currency, "locale": tag, "order_amount": Decimal("10")}
    return factories.case(case_id, items, metadata=metadata)


def _placed(locale: str, kind: str, value: str, rng: random.Random, sentences: tuple[str, ...]) -> Probe:
    sentence = rng.choice(sentences)
    start = sentence.index("{v}")
    return Probe(locale, kind, sentence.replace("{v}", value), start, value)


def probes(locale: str, kind: str, count: int, seed: int = 0) -> list[Probe]:
    """``count`` distinct values of ``kind`` in sentences of the locale's language."""
    # card numbers are the schemes' own the world over (Faker's zh_CN has other schemes' names)
    fake, rng = Faker("en_US" if kind == "card" else locale), random.Random(f"{seed}-{locale}-{kind}")
    fake.seed_instance(f"{seed}-{locale}-{kind}")
    draw = _DRAWS[kind]
    values: dict[str, None] = {}
    for i in range(count * 50):
        if len(values) >= count:
            break
        value = draw(fake, locale, i, rng)
        if value:
            values.setdefault(value)
    language = LOCALES[locale][3]
    return [_placed(locale, kind, v, rng, SENTENCES[language][kind]) for v in values]


def decoys(locale: str, kind: str, count: int, seed: int = 0) -> list[Probe]:
    """``count`` texts holding no personal data, only a decoy of ``kind``."""
    fake, rng = Faker(locale), random.Random(f"{seed}-{locale}-decoy-{kind}")
    fake.seed_instance(f"{seed}-{locale}-decoy-{kind}")
    language = LOCALES[locale][3]
    return [
        _placed(locale, kind, _DECOY_DRAWS[kind](fake, locale, i, rng), rng, DECOY_SENTENCES[language][kind])
        for i in range(count)
    ]


# --- the values ---------------------------------------------------------------------------------------


def _phone(fake: Faker, locale: str, i: int, rng: random.Random) -> str | None:
    region = LOCALES[locale][2]
    written = fake.phone_number()
    try:
        number = phonenumbers.parse(written, region)
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(number):
        return None
    forms = [
        written,
        phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.NATIONAL),
        phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.INTERNATIONAL),
        phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164),
    ]
    return forms[i % 4]


def _email(fake: Faker, locale: str, i: int, rng: random.Random) -> str:
    if i % 2 == 0:
        return fake.email()
    local = re.sub(r"[\s'’,]", "", f"{fake.first_name()}.{fake.last_name()}".lower())
    domain = re.sub(r"[\s'’,]", "", fake.last_name().lower()) if locale != "zh_CN" else fake.domain_word()
    domain = f"{domain}.{fake.tld()}"
    if i % 4 == 3:
        domain = domain.encode("idna").decode("ascii")
    return f"{local}@{domain}"


_CARD_TYPES = ("amex", "diners", "discover", "jcb15", "jcb16", "maestro", "mastercard", "visa16", "visa19")


def _card(fake: Faker, locale: str, i: int, rng: random.Random) -> str | None:
    digits = fake.credit_card_number(_CARD_TYPES[i % len(_CARD_TYPES)])
    if digits.startswith("0604"):  # a Maestro prefix of Faker's that no scheme's range holds
        return None
    if i % 6 == 0:
        return digits
    if len(digits) == 15 or len(digits) == 14:
        groups = [digits[:4], digits[4:10], digits[10:]]
    else:
        groups = [digits[k : k + 4] for k in range(0, len(digits), 4)]
    return [" ", "-", ".", "/", "  "][i % 5].join(groups)


def _iban(fake: Faker, locale: str, i: int, rng: random.Random) -> str | None:
    compact = fake.iban() if locale not in ("en_US", "zh_CN") else Faker("de_DE").iban()
    if not stdnum_iban.is_valid(compact):
        return None
    fours = " ".join(compact[k : k + 4] for k in range(0, len(compact), 4))
    odd, at = [], 0
    while at < len(compact):
        size = rng.randint(2, 6)
        odd.append(compact[at : at + size])
        at += size
    return [compact, fours, fours.lower(), rng.choice(["  ", " ", " "]).join(odd)][i % 4]


def _surname(fake: Faker) -> str:
    """A surname as written in a sentence: Faker lists some as sorted ("Bourgondië, van", "Dussen van")."""
    name = fake.last_name()
    inverted = re.fullmatch(r"(.+?),? (van|von|de|der|den|van der|van den|van de|ten|ter)", name)
    return f"{inverted.group(2)} {inverted.group(1)}" if inverted else name


def _person(fake: Faker, locale: str, i: int, rng: random.Random) -> str:
    if locale == "zh_CN":
        return fake.last_name() + fake.first_name()
    return f"{fake.first_name()} {_surname(fake)}"


def _address(fake: Faker, locale: str, i: int, rng: random.Random) -> str:
    if i % 2 == 0:
        return fake.street_address().strip()
    lines = [line.strip() for line in fake.address().splitlines()]
    return (", " if i % 4 == 1 else "\n").join(lines)


_DRAWS = {"phone": _phone, "email": _email, "card": _card, "iban": _iban, "person": _person, "address": _address}


# --- the decoys ---------------------------------------------------------------------------------------

_ORDERS = (
    "###-#######-#######",
    "##-#####-#####",
    "#1####",
    "ORD-2026-######",
    "8###############",
    "%#########",
    "A-#####",
    "%######",
    "2026-####",
    "??-%#####",
)
_TRACKING = ("1Z###??#########", "9400 1%## #### #### #### ##", "#### #### ####", "JD01460000########", "??#########GB", "0150 %### #### ##", "3S????#######", "SF%############", "LP00#########CN", "%#### ####### ####")  # fmt: skip


def _order(fake: Faker, locale: str, i: int, rng: random.Random) -> str:
    return fake.bothify(_ORDERS[i % len(_ORDERS)]).upper()


def _tracking(fake: Faker, locale: str, i: int, rng: random.Random) -> str:
    return fake.bothify(_TRACKING[i % len(_TRACKING)]).upper()


def _price(fake: Faker, locale: str, i: int, rng: random.Random) -> str:
    amount = Decimal(rng.randint(100, 999_999)) / 100
    whole, cents = f"{amount:,.2f}".split(".")
    symbol = {"GBP": "£", "USD": "$", "EUR": "€", "PLN": "zł", "BRL": "R$", "CNY": "¥"}[LOCALES[locale][1]]
    if locale in ("en_GB", "en_US", "zh_CN"):
        return f"{symbol}{whole}.{cents}"
    sep = {"fr_FR": "\u202f", "pl_PL": " "}.get(locale, ".")
    written = f"{whole.replace(',', sep)},{cents}"
    return f"{symbol} {written}" if locale == "pt_BR" else f"{written} {symbol}"


_DATES = ("%d.%m.%Y", "%Y-%m-%d", "%d/%m/%Y", "%m/%d/%Y", "%d/%m/%Y %H:%M", "%d %B %Y", "%Y-%m-%dT%H:%M:%S", "%d-%m-%Y")


def _date(fake: Faker, locale: str, i: int, rng: random.Random) -> str:
    when = fake.date_time_between("-3y", "now")
    if locale == "zh_CN" and i % 3 == 0:
        return f"{when.year}年{when.month}月{when.day}日"
    return when.strftime(_DATES[i % len(_DATES)])


def _product(fake: Faker, locale: str, i: int, rng: random.Random) -> str:
    return [fake.ean13(), fake.ean8(), fake.isbn13(), fake.bothify("SKU-#####-???").upper(), fake.bothify("??-####??#").upper(), fake.bothify("B0#?#?#?#?").upper()][i % 6]  # fmt: skip


_DECOY_DRAWS = {"order": _order, "tracking": _tracking, "price": _price, "date": _date, "product": _product}


def found(probe: Probe, masked: str) -> bool:
    """Whether the masked text is the sentence with the value, and no more than its surrounding
    characters, replaced by one placeholder of its kind (the sentence read as the jury reads it, NFKC)."""
    before, after = readable(probe.text[: probe.start]), readable(probe.text[probe.start + len(probe.value) :])
    m = re.fullmatch(rf"(.*)\[{probe.kind.upper()}_[0-9]+\](.*)", masked, re.DOTALL)
    return m is not None and before.startswith(m.group(1)) and after.endswith(m.group(2))


def masked(locale: str, texts: list[Probe], settings: EvidenceSettings | None = None) -> list[str]:
    """Each text as the jury reads it, all of them the buyer's items of one case in the locale."""
    case = case_of(locale, [p.text for p in texts], f"corpus-{locale}")
    seen = minimise(case, settings or EvidenceSettings())
    return [seen.case.item(f"b{i + 1}").text or "" for i in range(len(texts))]


def recall(locale: str, texts: list[Probe]) -> list[Probe]:
    """The probes whose value was not masked as one placeholder of its kind."""
    return [p for p, out in zip(texts, masked(locale, texts), strict=True) if not found(p, out)]


def false_positives(locale: str, texts: list[Probe]) -> list[tuple[Probe, str]]:
    """The decoys that did not come back as they went in."""
    return [(p, out) for p, out in zip(texts, masked(locale, texts), strict=True) if out != readable(p.text)]


def rows(count: int, seed: int = 0) -> Iterator[tuple[str, str, list[Probe]]]:
    for locale in LOCALES:
        for kind in KINDS:
            yield locale, kind, probes(locale, kind, count, seed)
