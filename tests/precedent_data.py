"""Synthetic precedents: historical cases (H) and verdict guidelines (N) built from templates and a
seeded random, so tests and benchmarks get the same varied, realistic-looking corpus every run.

    cases(300)                   -> list[PrecedentCase]
    guidelines(60)               -> list[Guideline]   (some cross-category "all", some inactive)
    documents(1000)              -> list[Document]    (cases and guidelines mixed, ~1 in 10 a guideline)
    queries(200)                 -> list[(query text, category)]  (new disputes phrased like case summaries)

The PROBE_* documents are hand-written and fixed; they exist for retrieval tests: a theme the
templates never use (so it can be found by meaning alone) and an exact product code (found by words
alone). Nothing in the templates mentions customs, borders, import authorities or SKU-7Q4-ZX81.
"""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime, timedelta

from cyberjurors.precedents.models import Document, Guideline, PrecedentCase
from cyberjurors.schemas import Votes

CATEGORY_NAMES = ("appliances", "clothing", "food", "digital", "others")

PRODUCTS: dict[str, list[str]] = {
    "appliances": [
        "espresso machine",
        "robot vacuum",
        "air fryer",
        "microwave oven",
        "stand mixer",
        "blender",
        "electric kettle",
        "dishwasher",
        "washing machine",
        "space heater",
        "dehumidifier",
        "toaster",
        "rice cooker",
        "cordless drill",
        "hair dryer",
        "refrigerator",
        "induction hob",
    ],
    "clothing": [
        "winter jacket",
        "pair of running shoes",
        "silk dress",
        "wool sweater",
        "pair of jeans",
        "leather belt",
        "rain coat",
        "pair of hiking boots",
        "linen shirt",
        "swimsuit",
        "denim skirt",
        "cashmere scarf",
        "pair of sneakers",
        "wedding suit",
        "down vest",
        "yoga leggings",
    ],
    "food": [
        "box of chocolates",
        "bag of coffee beans",
        "olive oil tin",
        "frozen seafood pack",
        "organic honey jar",
        "protein powder tub",
        "cheese hamper",
        "case of craft beer",
        "baby formula",
        "matcha tea set",
        "fresh fruit basket",
        "dried mango pack",
        "birthday cake",
        "vitamin gummies",
    ],
    "digital": [
        "game activation key",
        "antivirus licence",
        "streaming subscription",
        "e-book bundle",
        "photo editing software",
        "online course",
        "cloud storage plan",
        "mobile game currency",
        "VPN subscription",
        "music production plugin",
        "gift card code",
        "office suite licence",
    ],
    "others": [
        "garden hose",
        "set of kitchen knives",
        "yoga mat",
        "camping tent",
        "office chair",
        "wall clock",
        "children's bicycle",
        "ceramic vase",
        "board game",
        "aquarium filter",
        "car phone mount",
        "pet carrier",
        "desk lamp",
        "luggage set",
        "framed print",
    ],
}

# dispute type -> (categories it occurs in, buyer claims, seller replies, evidence)
DISPUTES: dict[str, tuple[tuple[str, ...], list[str], list[str], list[str]]] = {
    "not_received": (
        (*CATEGORY_NAMES[:3], "others"),
        [
            "the buyer says the {product} never turned up at the door",
            "the buyer reports that nothing was handed over and no card was left",
            "the buyer claims the order is still missing {days} days after the promised date",
        ],
        [
            "the seller points to a delivery scan at the buyer's address",
            "the seller says the carrier confirmed drop-off at the front porch",
            "the seller argues a neighbour signed for it",
        ],
        [
            "a carrier scan with a GPS location two streets away",
            "a doorbell camera clip showing no visit",
            "a signature that does not match the buyer's name",
            "a photo of the empty mailbox",
        ],
    ),
    "damaged_in_transit": (
        ("appliances", "others", "food"),
        [
            "the buyer found the {product} cracked when the box was opened",
            "the buyer says the outer carton was crushed and the {product} dented",
            "the buyer reports broken glass rattling inside the box",
        ],
        [
            "the seller says it was packed with foam and double-boxed",
            "the seller blames rough handling by the carrier and offers a partial refund",
            "the seller claims the damage happened after delivery",
        ],
        [
            "unboxing photos of the crushed carton",
            "a video of the dented housing",
            "the packing slip photo",
            "a photo of the shipping label with a fragile sticker",
        ],
    ),
    "not_as_described": (
        CATEGORY_NAMES,
        [
            "the buyer says the {product} looks nothing like the listing photos",
            "the buyer claims the listed features are missing",
            "the buyer says the material is cheaper than advertised",
        ],
        [
            "the seller insists the listing matches the item shipped",
            "the seller says the photos are illustrative and the text was accurate",
            "the seller argues the buyer misread the specifications",
        ],
        [
            "screenshots of the listing next to photos of the item",
            "the product label photo",
            "a close-up of the fabric tag",
            "a comparison video",
        ],
    ),
    "wrong_item": (
        CATEGORY_NAMES,
        [
            "the buyer received a different model than the {product} ordered",
            "the buyer says the box contained someone else's order",
            "the buyer got the wrong colour and size",
        ],
        [
            "the seller says the warehouse scanned the correct barcode",
            "the seller offers an exchange if the item is sent back unused",
            "the seller believes the buyer swapped the item",
        ],
        ["a photo of the barcode on the box", "the order confirmation email", "a photo of the mismatched label"],
    ),
    "defective": (
        ("appliances", "digital", "others"),
        [
            "the buyer says the {product} stopped working after {days} days",
            "the buyer reports it will not power on at all",
            "the buyer says it overheats and smells of burning plastic",
        ],
        [
            "the seller says the fault was caused by misuse",
            "the seller points the buyer to the manufacturer's warranty",
            "the seller says their test before shipping showed it worked",
        ],
        [
            "a video of the unit failing to start",
            "a repair shop report",
            "photos of scorch marks",
            "the error code shown on the display",
        ],
    ),
    "missing_parts": (
        ("appliances", "others"),
        [
            "the buyer says the {product} arrived without its power cable",
            "the buyer reports screws and the manual were missing",
            "the buyer says one of the accessories listed was not in the box",
        ],
        [
            "the seller says every box is weighed before dispatch",
            "the seller offers to post the missing part separately",
            "the seller claims the part was taped under the lid",
        ],
        ["the dispatch weight record", "a photo of the open box contents", "the parts list from the manual"],
    ),
    "size_mismatch": (
        ("clothing",),
        [
            "the buyer says the {product} runs two sizes small",
            "the buyer claims the measurements differ from the size chart",
            "the buyer says the sleeves are much shorter than listed",
        ],
        [
            "the seller says the size chart was clearly shown",
            "the seller argues the buyer ordered the wrong size",
            "the seller accepts returns only for unworn items with tags",
        ],
        ["a photo of the garment next to a tape measure", "the size chart screenshot", "a photo of the tags"],
    ),
    "spoiled": (
        ("food",),
        [
            "the buyer says the {product} was past its best-before date on arrival",
            "the buyer reports mould and a sour smell",
            "the buyer says the cold pack had melted and the contents were warm",
        ],
        [
            "the seller says it left the warehouse chilled and within date",
            "the seller blames the buyer for leaving it outside for hours",
            "the seller says the date shown is the production date",
        ],
        ["a photo of the printed date", "a photo of the mouldy contents", "a thermometer reading photo"],
    ),
    "access_not_working": (
        ("digital",),
        [
            "the buyer says the {product} code was rejected as already redeemed",
            "the buyer reports the download link expired before it could be used",
            "the buyer says the account was locked right after activation",
        ],
        [
            "the seller says the code was valid when sent and redemption logs show it was used",
            "the seller argues the buyer redeemed it and wants a second copy",
            "the seller says region restrictions were stated in the listing",
        ],
        ["a screenshot of the redemption error", "the activation log export", "the listing's region notice"],
    ),
    "return_refused": (
        CATEGORY_NAMES,
        [
            "the buyer sent the {product} back but was never refunded",
            "the buyer says the seller refused a return within the stated window",
            "the buyer claims the return label never came",
        ],
        [
            "the seller says the returned item arrived used and incomplete",
            "the seller says the return window of {days} days had passed",
            "the seller says the return was never received at the warehouse",
        ],
        ["the return tracking receipt", "chat messages about the return", "photos of the returned item"],
    ),
}

GUIDELINE_RULES: dict[str, list[tuple[str, str | None]]] = {
    "not_received": [
        (
            "A delivery scan alone does not prove delivery when its GPS point is far from the buyer's "
            "address; the seller then bears the loss.",
            "buyer",
        ),
        (
            "A buyer who reports non-delivery long after the delivery scan, with no earlier contact, "
            "carries the burden of showing the item did not arrive.",
            "seller",
        ),
    ],
    "damaged_in_transit": [
        (
            "Damage visible in unboxing photos taken on the delivery day favours the buyer unless "
            "the seller shows adequate packaging.",
            "buyer",
        ),
        (
            "When the carrier's handling caused the damage, the seller who chose the carrier "
            "refunds the buyer and claims from the carrier.",
            "buyer",
        ),
    ],
    "not_as_described": [
        (
            "A material difference between listing text and the item shipped favours the buyer; "
            "illustrative photos do not excuse wrong specifications.",
            "buyer",
        ),
        (
            "If the listing text disclosed the limitation plainly, a buyer's misreading does not justify a refund.",
            "seller",
        ),
    ],
    "wrong_item": [
        ("A barcode scan record outweighs an unsupported claim of a swapped item.", "seller"),
        ("A photo of a mismatched label on the delivered box is strong evidence of a wrong shipment.", "buyer"),
    ],
    "defective": [
        ("A failure within the first weeks of ordinary use points to a defect, not misuse.", "buyer"),
        ("Physical damage consistent with a drop points to misuse rather than a manufacturing fault.", "seller"),
    ],
    "missing_parts": [
        ("A dispatch weight matching the complete box supports the seller's account of a complete shipment.", "seller")
    ],
    "size_mismatch": [
        (
            "When measurements differ from the published size chart by more than a size, the buyer "
            "may return the garment at the seller's cost.",
            "buyer",
        )
    ],
    "spoiled": [
        ("Perishable goods delivered warm or past date favour the buyer when photographed on arrival.", "buyer")
    ],
    "access_not_working": [
        ("Redemption logs showing the code was used on the buyer's account decide for the seller.", "seller")
    ],
    "return_refused": [
        (
            "A tracked return delivered to the seller's warehouse obliges a refund unless the "
            "seller documents damage on receipt.",
            "buyer",
        )
    ],
}

CROSS_CATEGORY_RULES: list[tuple[str, str, str | None]] = [
    ("evidence", "Specific, dated evidence outweighs general assertions from either party.", None),
    ("communication", "A party who ignored messages during the dispute window weakens their own account.", None),
    ("burden_of_proof", "The party with access to the records (tracking, logs, packing) should produce them.", None),
    ("partial_refund", "When both parties share responsibility, a partial refund is the usual outcome.", None),
]

# Fixed documents for retrieval tests (see the module docstring).
PROBE_SEMANTIC = PrecedentCase(
    case_id="probe-customs",
    category="others",
    summary=(
        "Customs officers held the shipment at the border for weeks, then the courier returned it "
        "to the sender; the buyer wants a refund and the seller wants the buyer to pay the duties."
    ),
    winner="buyer",
    votes=Votes(buyer=11, seller=6),
    tags=["probe"],
)
PROBE_SEMANTIC_QUERY = "package seized by import authorities"

PROBE_CODE = PrecedentCase(
    case_id="probe-sku",
    category="appliances",
    summary=(
        "The buyer says the stand mixer bowl wobbles and the motor grinds at low speed, and that the "
        "listing promised a quiet motor; the seller replies that the unit passed inspection (item "
        "SKU-7Q4-ZX81) and that the noise is normal. Evidence: a video of the mixer running and the "
        "inspection sheet."
    ),
    winner="seller",
    votes=Votes(buyer=5, seller=12),
    tags=["probe"],
)
PROBE_CODE_QUERY = "SKU-7Q4-ZX81"

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)


def _code(rng: random.Random) -> str:
    chars = string.ascii_uppercase + string.digits
    return f"SKU-{''.join(rng.choices(chars, k=3))}-{''.join(rng.choices(chars, k=4))}"


def _summary(rng: random.Random, category: str, dispute: str) -> str:
    _, buyer_claims, seller_replies, evidence = DISPUTES[dispute]
    product = rng.choice(PRODUCTS[category])
    days = rng.choice([3, 5, 7, 10, 14, 21, 30, 45])
    amount = rng.choice([9.99, 19.5, 35, 49.9, 89, 120, 249, 399, 650, 1200])
    article = "an" if product[0] in "aeiou" else "a"
    code = f" ({_code(rng)})" if rng.random() < 0.3 else ""
    parts = [f"Order of {article} {product} for {amount} EUR{code}."]
    parts.append(rng.choice(buyer_claims).format(product=product, days=days).capitalize() + ";")
    parts.append(rng.choice(seller_replies).format(days=days) + ".")
    items = rng.sample(evidence, k=min(len(evidence), rng.choice([1, 2])))
    parts.append("Evidence: " + " and ".join(items) + ".")
    return " ".join(parts)


def cases(n: int, seed: int = 7, prefix: str = "h") -> list[PrecedentCase]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        category = CATEGORY_NAMES[i % len(CATEGORY_NAMES)]
        dispute = rng.choice([d for d, (cats, *_) in DISPUTES.items() if category in cats])
        buyer_votes = rng.choice([rng.randint(0, 7), rng.randint(10, 17)])
        votes = Votes(buyer=buyer_votes, seller=17 - buyer_votes)
        out.append(
            PrecedentCase(
                case_id=f"{prefix}{seed}-{i:06d}",
                category=category,  # type: ignore[arg-type]
                summary=_summary(rng, category, dispute),
                winner=votes.winner,
                votes=votes,
                tags=[dispute],
                decided_at=EPOCH + timedelta(hours=rng.randint(0, 20_000)),
            )
        )
    return out


def guidelines(n: int, seed: int = 11, inactive_share: float = 0.1, prefix: str = "g") -> list[Guideline]:
    """Category rules for every (category, dispute type) the templates use, cross-category ("all")
    rules, cycled with a version suffix until n; about inactive_share of them inactive."""
    rng = random.Random(seed)
    pool: list[tuple[str, str, str, str | None]] = []
    for dispute, (cats, *_) in DISPUTES.items():
        for category in cats:
            for rule, favours in GUIDELINE_RULES[dispute]:
                pool.append((category, dispute, rule, favours))
    pool += [("all", dtype, rule, favours) for dtype, rule, favours in CROSS_CATEGORY_RULES]
    rng.shuffle(pool)
    out = []
    for i in range(n):
        category, dispute, rule, favours = pool[i % len(pool)]
        if i >= len(pool):
            rule = f"{rule} (Refinement {i // len(pool)}: applies to orders over {rng.choice([50, 100, 200])} EUR.)"
        out.append(
            Guideline(
                id=f"{prefix}-{seed:02d}{i:05d}",
                version=1 + i // len(pool),
                rule=rule,
                category=category,
                dispute_type=dispute,
                tags=[dispute],
                favours=favours,  # type: ignore[arg-type]
                supporting_cases=[f"h7-{rng.randint(0, 999):06d}" for _ in range(rng.randint(1, 4))],
                confidence=round(rng.uniform(0.3, 0.95), 2),
                active=rng.random() >= inactive_share,
                updated_at=EPOCH + timedelta(days=rng.randint(0, 300)),
            )
        )
    return out


def documents(n: int, seed: int = 7, guideline_share: float = 0.1) -> list[Document]:
    """n documents, cases and guidelines mixed (ids unique for a given seed)."""
    n_guidelines = int(n * guideline_share)
    docs = [Document.of_case(c) for c in cases(n - n_guidelines, seed=seed)]
    docs += [Document.of_guideline(g) for g in guidelines(n_guidelines, seed=seed + 1000)]
    random.Random(seed).shuffle(docs)
    return docs


def queries(n: int, seed: int = 99) -> list[tuple[str, str]]:
    """New disputes as the pipeline would query them: a short summary and the case's category."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        category = CATEGORY_NAMES[i % len(CATEGORY_NAMES)]
        dispute = rng.choice([d for d, (cats, *_) in DISPUTES.items() if category in cats])
        _, buyer_claims, seller_replies, _ = DISPUTES[dispute]
        product = rng.choice(PRODUCTS[category])
        text = (
            rng.choice(buyer_claims).format(product=product, days=rng.choice([4, 9, 20]))
            + "; "
            + rng.choice(seller_replies).format(days=14)
        )
        if rng.random() < 0.2:
            text = f"{text} {_code(rng)}"
        out.append((text, category))
    return out
