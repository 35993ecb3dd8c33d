"""The synthetic benchmark's templates: scenarios per category, each with the fact that decides it
for either side, the people, places and phrasings cases are drawn from, and ``case_facts``.
Data, mostly; ``synth.py`` turns them into cases."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Final

import numpy as np

from ..schemas import Party
from . import synth_media as media

# ----------------------------------------------------------------------------------------------
# templates: scenarios per category, each with the fact that decides it for either side
#
# In a record, [brackets] mark the clue words (removed from the text). A fact's holders say whose
# evidence may carry the clue: the favoured side's own proof, or the other side's admission (the
# seller's packing video showing the crack, the buyer's slip "it worked fine for weeks").

B: Final = "buyer"
S: Final = "seller"
_BRACKETS = re.compile(r"\[([^\]]*)\]")


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def fill(template: str, facts: dict) -> str:
    return _BRACKETS.sub(r"\1", template).format(**facts)


@dataclass(frozen=True)
class Fact:
    clue: str
    records: tuple[tuple[Party, str], ...]
    visual_spec: tuple[media.Scene, media.Mark, str, media.RGB]  # scene, mark, label, colour
    photo_holders: tuple[Party, ...]
    clip_holders: tuple[Party, ...]
    label_is_clue: bool = True  # False: the label repeats something the texts already say

    def holders(self, modality: str) -> tuple[Party, ...]:
        if modality == "text":
            return tuple(holder for holder, _ in self.records)
        return self.photo_holders if modality == "image" else self.clip_holders

    def clue_words(self, modality: str, variant: int) -> list[str]:
        if modality == "text":
            return _BRACKETS.findall(self.records[variant][1])
        label = self.visual_spec[2]
        return [label] if label and self.label_is_clue else []

    def visual(self, facts: dict, seed: int) -> media.Visual:
        scene, mark, label, colour = self.visual_spec
        return media.Visual(
            scene=scene, mark=mark, label=fill(label, facts), colour=colour, title=facts["short"], seed=seed
        )


@dataclass(frozen=True)
class Product:
    name: str
    short: str
    low: float
    high: float
    part: str
    sizing: str | None = None  # "garment" or "shoe"


@dataclass(frozen=True)
class Scenario:
    category: str
    kind: str
    products: tuple[Product, ...]
    reasons: tuple[str, ...]
    remedies: tuple[str, ...]
    buyer_claims: list[str]
    seller_claims: list[str]
    buyer: Fact
    seller: Fact

    @property
    def facts(self) -> dict[str, Fact]:
        return {"buyer": self.buyer, "seller": self.seller}


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "appliances",
        "fault",
        (
            Product("AeroChef 5.5 L air fryer", "air fryer", 69, 129, "basket"),
            Product("Nordhaus 25 L microwave", "microwave", 89, 159, "turntable"),
            Product("BrewMaster bean-to-cup coffee machine", "coffee machine", 199, 449, "brew unit"),
            Product("Kessler 2-zone induction hob", "hob", 79, 149, "control panel"),
        ),
        (
            "The {short} shows an error and does not heat, from the very first use",
            "Faulty on arrival: the {short} stopped heating the first time it was switched on",
        ),
        ("Full refund", "Replacement unit", "Refund on return of the unit"),
        [
            "It showed an error the very first time I switched it on.",
            "I followed the manual step by step and it simply does not heat.",
            "This is a factory defect, not something I did.",
            "I have not been able to use it once since it arrived.",
            "It is plugged straight into the wall socket, no extension lead.",
        ],
        [
            "Every unit is powered up and tested before it leaves our warehouse.",
            "Errors like this almost always come from the kitchen wiring or an extension lead.",
            "The {short} was working perfectly when we shipped it.",
            "We believe the unit was used a lot before this complaint.",
            "This model has one of the lowest return rates in our shop.",
        ],
        Fact(
            "the display shows the fault '{code}' at first power-on",
            (
                (
                    S,
                    "Our test bench log for serial {serial}, forwarded by the warehouse: '[{code} on first "
                    "heat-up], reset, passed on second try, shipped'.",
                ),
                (
                    B,
                    "Service centre report {ref}, {report_date}: '[heating element open circuit, factory "
                    "defect]', no signs of misuse or wear.",
                ),
            ),
            ("appliance", "banner", "{code}", media.RED),
            (B, S),
            (B, S),
        ),
        Fact(
            "the unit's own counter shows {hours} operating hours: it was used for weeks",
            (
                (B, "To be fair, [it worked fine for the first few weeks], the error only started after that."),
                (
                    S,
                    "Service centre report {ref}, {report_date}: no fault found, ran 3 hours without error, "
                    "[operating-hours counter at {hours} h].",
                ),
            ),
            ("appliance", "banner", "RUN TIME {hours} h", media.AMBER),
            (B, S),
            (B, S),
        ),
    ),
    Scenario(
        "appliances",
        "cracked",
        (
            Product("Glass electric kettle 1.7 L", "kettle", 29, 59, "glass jug"),
            Product("Blender with 1.5 L glass jar", "blender", 49, 119, "glass jar"),
            Product("Drip coffee maker with glass carafe", "coffee maker", 35, 79, "glass carafe"),
            Product("Glass teapot with warmer", "teapot", 25, 55, "glass pot"),
        ),
        ("The {part} was cracked when I opened the parcel", "Arrived broken: a crack in the {part}"),
        ("Full refund", "Replacement {part}", "Refund without return"),
        [
            "The crack was there when I took it out of the box.",
            "The box was dented on one side when it arrived.",
            "I have not even filled it with water yet.",
            "Glass like this should be packed much better.",
            "I opened the parcel carefully on the kitchen table.",
        ],
        [
            "It left our warehouse intact; we check every {part} against the light.",
            "The parcel was padded with foam on all sides.",
            "Glass does not crack on its own inside a padded box.",
            "We think this happened after delivery.",
            "We ship hundreds of these a month without breakage.",
        ],
        Fact(
            "a crack runs through the {part}",
            (
                (
                    S,
                    "Our packer's note for order {order}: '[small chip on the rim of the {part}], passed the "
                    "leak test, shipped anyway'.",
                ),
                (
                    B,
                    "Courier delivery record {tracking}: '[carton crushed on one corner, contents rattling, "
                    "accepted under reservation]'.",
                ),
            ),
            ("glassware", "crack", "", media.DARK),
            (B, S),
            (B, S),
        ),
        Fact(
            "the courier's proof of delivery is stamped as received in good condition, signed {initials}",
            (
                (
                    B,
                    "Since you ask: [it slipped out of my hand while I was rinsing it], but it should not crack "
                    "that easily.",
                ),
                (
                    S,
                    "Courier proof of delivery {tracking}: [signed by {initials}, box condition 'good', no "
                    "damage remarks].",
                ),
            ),
            ("document", "banner", "RECEIVED IN GOOD CONDITION - {initials}", media.GREEN),
            (S,),
            (S,),
        ),
    ),
    Scenario(
        "clothing",
        "size",
        (
            Product("Merino wool jumper, navy", "jumper", 59, 119, "jumper", "garment"),
            Product("Leather ankle boots, cognac", "boots", 89, 169, "boots", "shoe"),
            Product("Slim-fit chinos, olive", "chinos", 39, 79, "chinos", "garment"),
            Product("Trail running shoes", "running shoes", 79, 149, "shoes", "shoe"),
        ),
        (
            "Wrong size delivered: not the {ordered_size} I ordered",
            "The {short} delivered are not the size on my order ({ordered_size})",
        ),
        ("Exchange for size {ordered_size}", "Full refund", "Refund on return"),
        [
            "I ordered a {ordered_size} and what arrived is clearly smaller.",
            "I have worn {ordered_size} in this brand for years.",
            "It does not fit at all, this is not the size I paid for.",
            "I compared them with my other {short} and they are a size down.",
            "I tried them on once indoors and put them straight back in the bag.",
        ],
        [
            "We shipped exactly the size on your order, {ordered_size}.",
            "This maker's sizes run slightly small, which the listing mentions.",
            "Our pickers scan every item against the order.",
            "The size chart in the listing is accurate.",
            "We have had no other complaints about this batch.",
        ],
        Fact(
            "the size label reads {shown_size}, not the {ordered_size} ordered",
            (
                (
                    S,
                    "Checking our stock sheet again: [we shipped the {other_size} instead of the {ordered_size}], "
                    "the bins were mixed up that week.",
                ),
            ),
            ("fabric", "label", "EU {shown_size}", media.RED),
            (B, S),
            (B, S),
        ),
        Fact(
            "the size label reads {shown_size}, the size ordered",
            ((B, "[The label does say {ordered_size}], they just feel smaller than my other {short}."),),
            ("fabric", "label", "EU {shown_size}", media.RED),
            (B, S),
            (B, S),
        ),
    ),
    Scenario(
        "clothing",
        "torn",
        (
            Product("Linen summer dress", "dress", 49, 99, "side seam"),
            Product("Oxford cotton shirt", "shirt", 29, 59, "side seam"),
            Product("Wool-blend coat", "coat", 119, 249, "sleeve seam"),
            Product("Silk blouse", "blouse", 59, 119, "shoulder seam"),
        ),
        ("The {part} was torn when the parcel arrived", "Damaged on arrival: the {part} is split open"),
        ("Full refund", "Refund on return", "Replacement"),
        [
            "The {part} was split the moment I unfolded it.",
            "I tried it on once, carefully, and never wore it out.",
            "For this price the stitching should hold.",
            "The tear is exactly along the stitching, that is a sewing fault.",
            "I sent it back in its original bag.",
        ],
        [
            "Each garment is checked by hand before it is folded.",
            "Seams tear like this when a garment is worn and stretched.",
            "The item came back to us clearly worn.",
            "Our seamstresses double-stitch every {part}.",
            "We cannot accept returns of worn clothing.",
        ],
        Fact(
            "the {part} is torn open along its stitching",
            (
                (
                    S,
                    "Our quality log for this batch: '[{part}s loosely stitched on several pieces], sold as "
                    "first quality anyway'.",
                ),
            ),
            ("fabric", "tear", "", media.DARK),
            (B, S),
            (B, S),
        ),
        Fact(
            "make-up and lipstick marks near the collar: the garment was worn",
            ((B, "[I only wore it for the evening of my friend's birthday], the seam went on the way home."),),
            ("fabric", "stain", "", media.LIPSTICK),
            (S, B),
            (S,),
        ),
    ),
    Scenario(
        "food",
        "expired",
        (
            Product("Organic granola 750 g, pack of 3", "granola", 14, 29, "pack"),
            Product("Specialty coffee beans 1 kg", "coffee beans", 19, 39, "bag"),
            Product("Dark chocolate gift box 500 g", "chocolate", 18, 45, "box"),
            Product("Protein bars, box of 24", "protein bars", 24, 44, "box"),
        ),
        ("The {short} was past its best-before date on delivery", "Expired food delivered"),
        ("Full refund", "Refund without return", "Replacement with fresh stock"),
        [
            "The date on the {part} had already passed when it arrived.",
            "It tastes stale, this is clearly old stock.",
            "I expect fresh food, not leftovers.",
            "I checked the date the same evening it arrived.",
            "I cannot give this to my family.",
        ],
        [
            "Our stock rotates every week, nothing old is shipped.",
            "Every {part} was well within date when it left us.",
            "The taste is as intended for this product.",
            "Our warehouse checks dates on every order.",
            "We bought this batch fresh from the producer.",
        ],
        Fact(
            "the printed best-before date {bb} is before the delivery on {delivered_date}",
            ((S, "Warehouse note on order {order}: '[batch {lot} short-dated, best before {bb}], ship first'."),),
            ("pack", "banner", "BEST BEFORE {bb}", media.RED),
            (B, S),
            (B, S),
        ),
        Fact(
            "the printed best-before date {bb} is months after the delivery on {delivered_date}",
            ((B, "[The date on the {part} is {bb}], fine I suppose, but it still tastes old to me."),),
            ("pack", "banner", "BEST BEFORE {bb}", media.RED),
            (B, S),
            (B, S),
        ),
    ),
    Scenario(
        "food",
        "cold-chain",
        (
            Product("Cheese selection 1.2 kg, chilled", "cheese selection", 39, 79, "cheese"),
            Product("Smoked salmon 500 g, chilled", "smoked salmon", 24, 49, "salmon"),
            Product("Butter and cream hamper, chilled", "dairy hamper", 29, 59, "butter"),
        ),
        ("The chilled parcel arrived warm and the {part} had spoiled", "Cold chain broken: food delivered warm"),
        ("Full refund", "Refund without return", "Replacement delivery"),
        [
            "The ice packs were completely melted and the box was warm inside.",
            "The {part} smelled off as soon as I opened it.",
            "I could not risk eating it.",
            "I put everything in the fridge right after opening the box.",
            "The parcel felt warm when the courier handed it over.",
        ],
        [
            "We ship chilled goods in insulated boxes with a temperature logger.",
            "Our boxes keep below 7 °C for 48 hours.",
            "The contents were in perfect condition when delivered.",
            "Every box goes out with fresh ice packs.",
            "Our courier runs refrigerated vans for chilled parcels.",
        ],
        Fact(
            "the box's temperature logger shows an alarm: maximum {temp} °C",
            (
                (
                    S,
                    "Our courier's cold-chain report for {tracking}: '[van cooling failed, parcel at {temp} °C for "
                    "9 hours]'.",
                ),
            ),
            ("logger", "banner", "MAX {temp} C ALARM", media.RED),
            (B,),
            (B,),
        ),
        Fact(
            "the box's temperature logger stayed at or below {temp} °C for the whole trip",
            (
                (B, "[I only opened the box the evening after delivery, it stood in the hallway all day]."),
                (
                    S,
                    "Logger download for box {ref}: [maximum {temp} °C over the whole trip], delivered "
                    "{delivered_date}.",
                ),
            ),
            ("logger", "banner", "MAX {temp} C OK", media.GREEN),
            (B, S),
            (B,),
        ),
    ),
    Scenario(
        "digital",
        "battery",
        (
            Product("Refurbished ReNew Phone 12, 128 GB", "phone", 249, 349, "battery"),
            Product("Refurbished Pixelon 7 Pro, 256 GB", "phone", 299, 429, "battery"),
            Product("Refurbished TabletOne 10.9, 64 GB", "tablet", 199, 299, "battery"),
        ),
        (
            "Battery drains fast; battery health below the listed minimum of 85%",
            "The {short}'s battery does not meet the listing (at least 85% health)",
        ),
        ("Full refund on return", "Battery replacement at the seller's cost", "Partial refund of 30%"),
        [
            "The battery goes from full to nearly empty in an afternoon.",
            "The listing promised at least 85% battery health.",
            "It switched itself off twice this week.",
            "I barely use it, mostly messages and calls.",
            "My old {short} lasted two days on a charge.",
        ],
        [
            "Every device is tested and the battery checked before shipping.",
            "Fast drain in the first days is apps restoring from a backup.",
            "Our test report for this unit says the battery is within spec.",
            "Battery life depends a lot on screen brightness and apps.",
            "We grade every device by hand.",
        ],
        Fact(
            "the battery settings show a maximum capacity of {capacity}%, below the listed 85%",
            ((S, "Our test sheet for IMEI ending {imei4}: '[battery capacity {capacity}%], graded A by mistake'."),),
            ("phone", "banner", "Maximum Capacity {capacity}%", media.RED),
            (B, S),
            (B,),
        ),
        Fact(
            "the battery settings show a maximum capacity of {capacity}%, above the listed 85%",
            (
                (B, "[The settings do say {capacity}%], but it still drains fast when I play games."),
                (S, "Pre-shipment test sheet for IMEI ending {imei4}: [battery capacity {capacity}%, 312 cycles]."),
            ),
            ("phone", "banner", "Maximum Capacity {capacity}%", media.GREEN),
            (B, S),
            (B, S),
        ),
    ),
    Scenario(
        "digital",
        "used-key",
        (
            Product("Game key: Starfall Odyssey (PC)", "game key", 29, 59, "key"),
            Product("Software licence: PhotoForge Pro, 1 year", "licence key", 49, 99, "licence"),
            Product("Game key: Rally Kings 2 (PC)", "game key", 19, 39, "key"),
        ),
        ("The {part} was already used when I received it", "Code does not work: used before I got it"),
        ("A working {part} or a full refund", "Full refund"),
        [
            "The store said the code had been used before.",
            "I never shared the code with anyone.",
            "I entered it on my account {handle} the same day it arrived.",
            "I want a working {part} or my money back.",
            "I have bought keys from other shops without any problem.",
        ],
        [
            "Every {part} comes fresh from the publisher and is sent once.",
            "The {part} was unused when our system delivered it.",
            "We have sold thousands of keys without this problem.",
            "Once a code is revealed we cannot take it back.",
            "Our system logs every code we hand out.",
        ],
        Fact(
            "the store's redeem page says the key was redeemed on {early_date}, before it was delivered",
            (
                (
                    S,
                    "Our supplier has confirmed this batch was resold: [key ending {key4} was first activated on "
                    "{early_date}].",
                ),
            ),
            ("store", "banner", "ALREADY REDEEMED ON {early_date}", media.RED),
            (B,),
            (B,),
        ),
        Fact(
            "the publisher's activation log shows the key redeemed by the buyer's own account {handle}",
            (
                (B, "[I did activate it on my {handle} account first], but then it stopped working."),
                (
                    S,
                    "Publisher activation log for key ending {key4}: [redeemed by account {handle} on "
                    "{delivered_date}].",
                ),
            ),
            ("store", "banner", "REDEEMED BY {handle} ON {delivered_date}", media.GREEN),
            (S, B),
            (S,),
        ),
    ),
    Scenario(
        "others",
        "not-received",
        (
            Product("Bluetooth speaker, 20 W", "speaker", 39, 89, "parcel"),
            Product("Board game collection", "board games", 45, 95, "parcel"),
            Product("Cordless drill set", "drill set", 69, 139, "parcel"),
            Product("Houseplant set, 3 pots", "plant set", 29, 59, "parcel"),
        ),
        ("Parcel marked as delivered but never received", "Tracking says delivered, nothing arrived"),
        ("Full refund", "Reshipment at the seller's cost"),
        [
            "Nothing was left at my door, and my neighbours have nothing either.",
            "I was at home all afternoon and nobody rang.",
            "Tracking says delivered, but I never got it.",
            "My address is {address}, it is clearly marked.",
            "I have lived here for six years and never lost a parcel.",
        ],
        [
            "The courier confirmed delivery to your address with a photo.",
            "Once the courier has delivered, the parcel is no longer our responsibility.",
            "Tracking shows it as delivered on {delivered_date}.",
            "We used the address on your order, {address}.",
            "Perhaps a neighbour or housemate took it in.",
        ],
        Fact(
            "the courier's delivery photo shows house number {shown_door}, not the buyer's {door}",
            ((S, "The courier has now told us [the driver left it at number {wrong_door}], the next building."),),
            ("door", "plate", "{street} {shown_door}", media.BLUE),
            (S, B),
            (S,),
        ),
        Fact(
            "the courier's delivery photo shows the parcel at the buyer's own door, number {door}",
            (
                (B, "[My flatmate says she took a parcel in on {delivered_date}], I have not seen it yet."),
                (
                    S,
                    "Courier proof of delivery {tracking}: [parcel handed to a resident at the door], "
                    "{delivered_date} 14:17.",
                ),
            ),
            ("door", "plate", "{street} {shown_door}", media.BLUE),
            (S,),
            (S,),
            label_is_clue=False,
        ),
    ),
    Scenario(
        "others",
        "missing-part",
        (
            Product("Remote-control car 1:16 with controller", "RC car", 49, 99, "remote control"),
            Product("Mirrorless camera kit with charger", "camera kit", 399, 699, "charger"),
            Product("Kids' drum kit with stool", "drum kit", 89, 149, "stool"),
        ),
        ("The {part} was missing from the box", "Incomplete delivery: no {part} in the box"),
        ("Send the missing {part}", "Partial refund of 25%", "Full refund on return"),
        [
            "The {part} was not in the box, I checked every layer of foam.",
            "I unpacked it in front of my family.",
            "The listing clearly shows the {part} included.",
            "The tape on the box looked untouched.",
            "Without the {part} the set is useless to us.",
        ],
        [
            "Every {part} is packed with the set; we check against a list.",
            "The box was taped and sealed when it left us.",
            "The weight at dispatch matches a complete set.",
            "We film or photograph every order before it is sealed.",
            "No other buyer has reported a missing {part}.",
        ],
        Fact(
            "the seller's own packing slip is stamped '{PART}: OUT OF STOCK'",
            (
                (
                    S,
                    "Looking at our packing slip again: [the {part}s were out of stock that week] and should have "
                    "gone out separately.",
                ),
            ),
            ("slip", "banner", "{PART}: OUT OF STOCK", media.RED),
            (B, S),
            (B, S),
        ),
        Fact(
            "the {part} is placed in its slot before the box is closed",
            ((B, "[My son has now found the {part} in the foam], but it does not seem to work."),),
            ("foam", "part", "", media.WHITE),
            (S,),
            (S,),
        ),
    ),
)

FIRST = ("Jiwon", "Lena", "Marco", "Aisha", "Tomasz", "Sofia", "Daniel", "Mei", "Olu", "Hanna", "Pierre", "Ines")
LAST = ("Park", "Novak", "Rossi", "Khan", "Berg", "Silva", "Meyer", "Chen", "Adeyemi", "Larsen", "Dubois", "Costa")
SHOPS = {
    "appliances": ("Nordlicht Home", "KitchenCraft Direct", "Casa Verde"),
    "clothing": ("Linen & Co", "Urban Threads", "Maison Fil"),
    "food": ("Highland Pantry", "Green Larder", "Deli Nord"),
    "digital": ("ByteBay Refurb", "Pixel Point", "KeyVault"),
    "others": ("GadgetHub", "TopToys Outlet", "Casa Verde"),
}
COURIERS = ("SwiftPost", "ParcelOne", "RapidRoute", "CityCourier")
PLACES = (
    ("Berlin", "Lindenstr."),
    ("Hamburg", "Speicherstr."),
    ("Lyon", "Rue des Lilas"),
    ("Krakow", "ul. Dluga"),
    ("Manchester", "Oak Lane"),
    ("Utrecht", "Vondelstraat"),
    ("Gothenburg", "Linnegatan"),
)
CURRENCIES = (("EUR", 1.0), ("EUR", 1.0), ("EUR", 1.0), ("GBP", 0.86), ("USD", 1.08), ("PLN", 4.3), ("SEK", 11.2))
FAULT_CODES = ("E04 HEATER FAULT", "E07 SENSOR ERROR", "ERR 3 NO HEAT", "E12 TRIAC FAIL")

CAPTIONS = {
    "image": ["photo {n}", "picture {n}", "photo {n} attached", "see photo {n}", "here is photo {n}", "image {n}"],
    "video": ["video {n}", "clip {n}", "video {n} attached", "short video ({n})", "here is video {n}"],
}

LINES: dict[str, dict[str, list[str]]] = {
    "buyer": {
        "greetings": [
            "Hello,",
            "Hi there.",
            "Good morning.",
            "Hello, I hope you can help me with this.",
            "Hi, I am writing about order {order}.",
            "Dear {shop} team,",
        ],
        "chatter": [
            "The parcel came a day earlier than expected.",
            "Tracking showed it sitting in {city} for two days.",
            "The courier was friendly, no complaints there.",
            "I have bought from {shop} before and was always happy.",
            "I paid by card on {ordered_date}.",
            "The box had my name and address printed correctly.",
            "I am usually at home in the afternoons.",
        ],
        "records": [
            "Order confirmation {order}: {product}, {amount} {currency}, paid {ordered_date}.",
            "My order history shows order {order} as delivered on {delivered_date}.",
        ],
        "confident": [
            "I am completely sure about what I am telling you.",
            "I have described exactly what happened.",
            "Anyone looking at this can see I am right.",
        ],
        "filler": [
            "Please let me know what you need from me.",
            "I would like this settled quickly.",
            "I have kept all the packaging.",
        ],
        "signoffs": [
            "Thanks for looking into this.",
            "Regards, {buyer_first}",
            "I hope we can sort this out quickly.",
            "Thank you, {buyer_first}",
        ],
        "openers": [
            "That is simply not true.",
            "To answer your question:",
            "With respect, that is not what happened.",
            "I have to disagree.",
            "Thanks for the reply.",
        ],
        "nudges": [
            "Is there any update on this?",
            "I am still waiting for an answer.",
            "Please see my earlier messages.",
        ],
    },
    "seller": {
        "greetings": [
            "Hello, thank you for contacting {shop}.",
            "Hi, this is {agent} from {shop}.",
            "Good afternoon.",
            "Dear {buyer_first},",
            "Hello and thank you for your message.",
        ],
        "chatter": [
            "Your order {order} left our warehouse on {shipped_date}.",
            "We ship all orders of this size with {courier}.",
            "We have a 4.8 star rating from over 2,000 buyers.",
            "Orders placed before 2 pm are packed the same day.",
            "Our customer service team is available on weekdays from 9 to 5.",
            "We are a family business and take every complaint seriously.",
            "As a gesture of goodwill we could offer a {pct}% voucher.",
        ],
        "records": [
            "Dispatch record {order}: 1 x {product}, handed to {courier} on {shipped_date}, tracking {tracking}.",
            "Tracking {tracking}: picked up {shipped_date}, sorted in {city}, delivered {delivered_date}.",
        ],
        "confident": [
            "We are confident the order was correct when it left us.",
            "Our records are clear on this.",
            "We stand by our product.",
        ],
        "filler": [
            "We are happy to look into this further.",
            "Please send any further details you have.",
            "We will follow the platform's decision.",
        ],
        "signoffs": [
            "Kind regards, the {shop} team.",
            "Thank you for your patience.",
            "Best wishes, {agent}",
            "Kind regards, {agent} ({shop})",
        ],
        "openers": [
            "We have looked at this again.",
            "To clarify our position:",
            "We understand your frustration.",
            "Thank you for the extra details.",
            "We checked our records once more.",
        ],
        "nudges": ["We have nothing further to add at this point.", "Please refer to our earlier messages."],
    },
}


def case_facts(rng: np.random.Generator, scenario: Scenario, side: Party) -> dict:
    """Every value a template may name, drawn for one case; some depend on the planted side."""

    def one(options):
        return options[int(rng.integers(len(options)))]

    def day(d: datetime) -> str:
        return d.strftime("%d.%m.%Y")

    product = one(scenario.products)
    first, last = one(FIRST), one(LAST)
    city, street = one(PLACES)
    currency, rate = one(CURRENCIES)
    amount = Decimal(f"{float(rng.uniform(product.low, product.high)) * rate:.0f}") - Decimal("0.10")
    ordered = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(
        days=int(rng.integers(0, 300)), hours=int(rng.integers(8, 22)), minutes=15 * int(rng.integers(0, 4))
    )
    delivered = (ordered + timedelta(days=int(rng.integers(2, 7)))).replace(hour=int(rng.integers(9, 19)), minute=0)
    door_no = int(rng.integers(3, 60))
    door = f"{door_no}{one(('', 'A', 'B'))}"
    wrong_door = f"{door_no + one((-2, 2, 1))}{one(('', 'A', 'B'))}"
    ordered_size = int(one((36, 38, 40, 42, 44)) if product.sizing == "garment" else rng.integers(37, 46))
    other_size = ordered_size - (2 if product.sizing == "garment" else 1)
    buyer_side = side == "buyer"
    facts = {
        "product": product.name,
        "short": product.short,
        "part": product.part,
        "PART": product.part.upper(),
        "buyer_first": first,
        "street": street,
        "initials": f"{first[0]}. {last.upper()}",
        "agent": one([name for name in FIRST if name != first]),
        "shop": one(SHOPS[scenario.category]),
        "courier": one(COURIERS),
        "city": city,
        "door": door,
        "wrong_door": wrong_door,
        "shown_door": wrong_door if buyer_side else door,
        "address": f"{street} {door}, {city}",
        "order": f"{int(rng.integers(1000, 9999))}-{int(rng.integers(1000, 9999))}",
        "tracking": f"{one(COURIERS)[:2].upper()} {int(rng.integers(1000, 9999))} {int(rng.integers(1000, 9999))}",
        "ordered_date": day(ordered),
        "shipped_date": day(ordered + timedelta(days=1)),
        "delivered_date": day(delivered),
        "ordered_iso": iso(ordered),
        "delivered_iso": iso(delivered),
        "report_date": day(delivered + timedelta(days=int(rng.integers(8, 16)))),
        "early_date": day(delivered - timedelta(days=int(rng.integers(3, 31)))),
        "clip_stamp": (delivered + timedelta(minutes=int(rng.integers(30, 2880)))).strftime("%Y-%m-%d %H:%M"),
        "amount": str(amount),
        "currency": currency,
        "pct": int(one((10, 15, 20))),
        "serial": f"{int(rng.integers(10, 99))}S-{int(rng.integers(1000, 9999))}-{int(rng.integers(1000, 9999))}",
        "ref": f"SR-{int(rng.integers(10000, 99999))}",
        "lot": f"L{int(rng.integers(100, 999))}",
        "imei4": f"{int(rng.integers(1000, 9999))}",
        "key4": f"{int(rng.integers(1000, 9999))}-X",
        "handle": f"{first.lower()}_{last[:3].lower()}{int(rng.integers(10, 99))}",
        "code": one(FAULT_CODES),
        "hours": int(rng.integers(600, 2400)),
        "ordered_size": ordered_size,
        "other_size": other_size,
        "shown_size": other_size if buyer_side else ordered_size,
        "bb": day(
            delivered - timedelta(days=int(rng.integers(3, 41)))
            if buyer_side
            else delivered + timedelta(days=int(rng.integers(60, 241)))
        ),
        "capacity": int(rng.integers(62, 80)) if buyer_side else int(rng.integers(88, 98)),
        "temp": f"{float(rng.uniform(14, 25)):.1f}" if buyer_side else f"{float(rng.uniform(2.1, 6)):.1f}",
    }
    return facts
