"""Write the labelled historical cases in this folder (the precedent base's H, from which N is distilled).

The cases are hand-written below: invented orders, messages and jury votes (17 jurors), not real
platform data. Outcomes follow plausible platform conventions: signed proof of delivery -> seller;
a defect visible on arrival (photo, unboxing video) -> buyer; return asked after the window with
no defect -> seller; item used or worn -> seller; food past its date -> buyer; a listing that
clearly stated what arrived -> seller; no delivery proof at all -> buyer; and some close calls.

Deterministic: the same JSON on every run.

    .venv/bin/python examples/precedents/make_precedents.py            # rewrites examples/precedents/*.json
    .venv/bin/python examples/precedents/make_precedents.py --out /tmp/p
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent

# (number, category code, category, product, amount, currency, ordered, days to delivery or None,
#  dispute reason, requested remedy, [(party, [statements]), ...] in submission order, (buyer, seller) votes)
CASES = [
    # --- appliances ------------------------------------------------------------------------------
    (
        1,
        "appl",
        "appliances",
        "Espresso machine, 15 bar, with 1.2 L water tank",
        "229.00",
        "EUR",
        "2025-03-02",
        3,
        "Water tank arrived cracked and the machine leaks",
        "Replacement water tank or full refund",
        [
            (
                "buyer",
                [
                    "The water tank was cracked when I opened the box, water runs out under the machine on the first fill.",
                    "I filmed the unboxing the same afternoon: the crack along the tank base is visible before I touched it.",
                ],
            ),
            (
                "seller",
                [
                    "Every machine is tested before dispatch and the tank was intact when packed.",
                    "We think the tank may have been dropped after delivery.",
                ],
            ),
            (
                "buyer",
                [
                    "The video starts with the sealed box and the courier's tape; the crack is there when the tank comes out."
                ],
            ),
        ],
        (15, 2),
    ),
    (
        2,
        "appl",
        "appliances",
        "Robot vacuum cleaner with charging dock",
        "349.00",
        "EUR",
        "2025-01-10",
        4,
        "Robot stopped charging after five months",
        "Repair or replacement under warranty",
        [
            (
                "buyer",
                [
                    "After five months the robot no longer charges on its dock; the light blinks red and the battery stays at 0%.",
                    "The listing promised a 12-month warranty and I used it normally, once a day.",
                ],
            ),
            (
                "seller",
                [
                    "Batteries wear with use and this is normal wear, not a defect.",
                    "The buyer may have used a third-party dock.",
                ],
            ),
            (
                "buyer",
                [
                    "I only ever used the original dock that came in the box. A dead battery after five months is a fault."
                ],
            ),
        ],
        (11, 6),
    ),
    (
        3,
        "appl",
        "appliances",
        "Stand mixer, 5 L bowl, 1000 W",
        "189.00",
        "GBP",
        "2025-04-05",
        2,
        "Buyer wants to return the mixer 47 days after delivery",
        "Return for full refund",
        [
            (
                "buyer",
                ["I would like to return the mixer, it is too big for my kitchen.", "It works, but I changed my mind."],
            ),
            (
                "seller",
                [
                    "Our return window is 30 days from delivery and is stated on the listing.",
                    "The request came 47 days after delivery, after the deadline, and the mixer has no defect.",
                ],
            ),
        ],
        (1, 16),
    ),
    (
        4,
        "appl",
        "appliances",
        "Microwave oven, 25 L, stainless steel",
        "139.00",
        "EUR",
        "2025-02-14",
        3,
        "Buyer says the microwave never arrived",
        "Full refund",
        [
            ("buyer", ["I never received the microwave although the tracking says delivered."]),
            (
                "seller",
                [
                    "The parcel was sent with signature on delivery; the courier's proof of delivery is signed with the buyer's name at the buyer's address.",
                    "The recorded parcel weight of 14.2 kg matches the boxed microwave.",
                ],
            ),
            ("buyer", ["I don't know who signed, I was not home."]),
        ],
        (3, 14),
    ),
    (
        5,
        "appl",
        "appliances",
        "Air fryer, listed as 5.5 L basket",
        "99.00",
        "EUR",
        "2025-05-20",
        3,
        "Air fryer is much smaller than the listing says",
        "Refund on return",
        [
            (
                "buyer",
                [
                    "The listing says 5.5 L but the basket holds 3.5 L; the rating plate under the fryer says 3.5 L.",
                    "My photo of the rating plate shows model AF-35 and 3.5 L.",
                ],
            ),
            ("seller", ["The photos show the correct product.", "Capacity can be measured in different ways."]),
        ],
        (14, 3),
    ),
    (
        6,
        "appl",
        "appliances",
        "Electric kettle, 1.7 L, glass",
        "45.00",
        "EUR",
        "2024-06-01",
        2,
        "Kettle leaks at the base after eight months",
        "Refund",
        [
            ("buyer", ["After eight months the kettle started leaking at the base.", "It is clearly faulty."]),
            (
                "seller",
                [
                    "The kettle was used daily for eight months; the returned unit is full of limescale and the seal is damaged by a vinegar descaler the manual forbids.",
                    "That is misuse, not a manufacturing defect.",
                ],
            ),
        ],
        (5, 12),
    ),
    (
        7,
        "appl",
        "appliances",
        "Hair dryer, 2200 W, with diffuser",
        "59.00",
        "EUR",
        "2025-07-03",
        2,
        "Buyer reports a dented housing three weeks after delivery",
        "Replacement",
        [
            (
                "buyer",
                [
                    "The housing of the dryer is dented on one side.",
                    "I only noticed it now when I took it out of the drawer.",
                ],
            ),
            (
                "seller",
                [
                    "The buyer confirmed in chat on the day of delivery that everything arrived in good condition.",
                    "The first photo of the dent was sent three weeks after delivery; it could have happened in use.",
                ],
            ),
        ],
        (7, 10),
    ),
    (
        8,
        "appl",
        "appliances",
        "Dehumidifier, 20 L per day",
        "219.00",
        "EUR",
        "2025-09-11",
        None,
        "Parcel marked delivered to a locker in another town",
        "Full refund",
        [
            (
                "buyer",
                [
                    "Tracking says delivered to a parcel locker 40 km from my address, I never chose a locker and never got a pickup code.",
                    "I have not received the dehumidifier.",
                ],
            ),
            ("seller", ["The courier marked it delivered, so the parcel is the buyer's responsibility now."]),
            ("buyer", ["There is no signature and no pickup record, only a scan at a locker in another town."]),
        ],
        (13, 4),
    ),
    (
        9,
        "appl",
        "appliances",
        "Toaster, 2 slots, stainless steel",
        "39.00",
        "GBP",
        "2025-03-10",
        2,
        "One slot never heated; reported 20 days after delivery, outside the 14-day return window",
        "Replacement",
        [
            (
                "buyer",
                [
                    "The left slot never heated, from the first day. I reported it on day 20 because I was travelling.",
                    "My video shows the right element glowing and the left one dark.",
                ],
            ),
            (
                "seller",
                [
                    "The 14-day return window had closed when the buyer complained.",
                    "We accept returns only within the window.",
                ],
            ),
            ("buyer", ["This is not a change of mind, the toaster is defective and the warranty is one year."]),
        ],
        (10, 7),
    ),
    (
        10,
        "appl",
        "appliances",
        "Cordless drill 18 V, tool only",
        "79.00",
        "EUR",
        "2025-08-02",
        3,
        "Buyer says the battery and charger are missing",
        "Send battery and charger or refund",
        [
            (
                "buyer",
                [
                    "The drill came without a battery and without a charger, it is missing parts.",
                    "You can't use a drill without a battery.",
                ],
            ),
            (
                "seller",
                [
                    "The title and the description say tool only, battery and charger not included, in bold.",
                    "The package was complete as described.",
                ],
            ),
        ],
        (4, 13),
    ),
    # --- clothing --------------------------------------------------------------------------------
    (
        1,
        "clot",
        "clothing",
        "Running sneakers, size 42",
        "89.00",
        "EUR",
        "2025-04-01",
        3,
        "Sole separated from the upper after one week of normal wear",
        "Refund or replacement",
        [
            (
                "buyer",
                [
                    "After one week of normal running the sole came away from the upper at the toe; photos attached.",
                    "The glue line is visible, there is no damage to the sole itself.",
                ],
            ),
            ("seller", ["The shoes left our warehouse in perfect condition.", "Worn shoes cannot be returned."]),
            ("buyer", ["A week of normal wear is not misuse; the sole should not detach."]),
        ],
        (12, 5),
    ),
    (
        2,
        "clot",
        "clothing",
        "Evening dress, satin, size S",
        "129.00",
        "EUR",
        "2025-05-15",
        2,
        "Returned dress was worn: tags removed and make-up on the collar",
        "Buyer: full refund; seller: refuse",
        [
            (
                "buyer",
                ["The dress did not fit well so I sent it back within the return window.", "I want my full refund."],
            ),
            (
                "seller",
                [
                    "The returned dress has its tags cut off, make-up on the collar and a smell of perfume.",
                    "Our policy and the law allow refusing returns of worn clothing.",
                ],
            ),
        ],
        (1, 16),
    ),
    (
        3,
        "clot",
        "clothing",
        "Slim fit jeans, labelled W32 L32",
        "59.00",
        "EUR",
        "2025-06-03",
        3,
        "Jeans labelled W32 measure like a W30",
        "Exchange or refund",
        [
            (
                "buyer",
                [
                    "The waist measures 76 cm flat-doubled, the seller's own size chart says W32 is 82 cm.",
                    "My photo shows the tape measure along the waistband next to the W32 label.",
                ],
            ),
            ("seller", ["Sizes vary slightly between models.", "Other customers are happy with the fit."]),
        ],
        (11, 6),
    ),
    (
        4,
        "clot",
        "clothing",
        "Winter coat, wool blend, size M",
        "199.00",
        "EUR",
        "2025-11-04",
        2,
        "Buyer says the coat was not received",
        "Full refund",
        [
            ("buyer", ["The coat never arrived."]),
            (
                "seller",
                [
                    "Delivered and signed: the courier's proof of delivery shows the buyer's signature at the buyer's address.",
                    "The signature matches the name on the order.",
                ],
            ),
        ],
        (2, 15),
    ),
    (
        5,
        "clot",
        "clothing",
        "Merino wool sweater",
        "95.00",
        "EUR",
        "2025-01-20",
        3,
        "Sweater shrank two sizes after washing",
        "Refund",
        [
            (
                "buyer",
                [
                    "After the first wash the sweater shrank two sizes, the quality is poor.",
                    "I washed it at 60 degrees like my other clothes.",
                ],
            ),
            (
                "seller",
                [
                    "The care label and the listing say hand wash cold, do not machine wash at 60 degrees.",
                    "Wool shrinks when washed hot; this is not a defect.",
                ],
            ),
        ],
        (3, 14),
    ),
    (
        6,
        "clot",
        "clothing",
        "Biker jacket listed as genuine leather",
        "249.00",
        "EUR",
        "2025-09-08",
        4,
        "Jacket is not genuine leather as advertised",
        "Full refund on return",
        [
            (
                "buyer",
                [
                    "The listing says genuine leather but the inner label says 100% PU, and the material smells of plastic.",
                    "Photo of the inner label attached.",
                ],
            ),
            ("seller", ["Our supplier certified the jacket as leather.", "The buyer may have swapped the label."]),
        ],
        (15, 2),
    ),
    (
        7,
        "clot",
        "clothing",
        "Linen shirt, unworn with tags",
        "49.00",
        "GBP",
        "2025-07-01",
        2,
        "Return requested 35 days after delivery, the policy allows 30",
        "Return for refund",
        [
            (
                "buyer",
                [
                    "I want to return the shirt, it is unworn and still has its tags.",
                    "I was on holiday so I am a bit late.",
                ],
            ),
            (
                "seller",
                [
                    "The return window of 30 days had closed five days before the request.",
                    "The shirt is not defective.",
                ],
            ),
        ],
        (5, 12),
    ),
    (
        8,
        "clot",
        "clothing",
        "Swimsuit, listed colour navy",
        "35.00",
        "EUR",
        "2025-06-20",
        3,
        "Swimsuit colour looks black, not navy as in the photos",
        "Refund",
        [
            (
                "buyer",
                [
                    "In the listing photo the swimsuit looks bright navy, the one I received looks almost black.",
                    "It is different from the listing.",
                ],
            ),
            (
                "seller",
                [
                    "The listing text says navy and the swimsuit is navy; screens show colours differently.",
                    "In daylight the colour matches the colour code on the label.",
                ],
            ),
        ],
        (8, 9),
    ),
    (
        9,
        "clot",
        "clothing",
        "Hiking boots, waterproof, size 44",
        "139.00",
        "EUR",
        "2025-10-02",
        3,
        "Boots arrived with torn stitching on the left boot",
        "Replacement",
        [
            (
                "buyer",
                [
                    "The stitching on the left boot is torn at the heel; my unboxing video shows it before the boots were ever worn.",
                    "The soles are clean, they were never used.",
                ],
            ),
            ("seller", ["The boots passed our quality check.", "Stitching can be pulled when putting boots on."]),
        ],
        (14, 3),
    ),
    (
        10,
        "clot",
        "clothing",
        "Rain jacket, size L",
        "75.00",
        "EUR",
        "2025-03-18",
        2,
        "Parcel left at the door without signature or photo and was not found",
        "Full refund",
        [
            (
                "buyer",
                [
                    "The tracking says left at front door, but nothing was there when I came home an hour later.",
                    "No photo, no signature, no neighbour has it.",
                ],
            ),
            ("seller", ["The courier delivered it, so it is not our problem.", "The buyer should ask the neighbours."]),
        ],
        (10, 7),
    ),
    # --- food --------------------------------------------------------------------------------
    (
        1,
        "food",
        "food",
        "Box of Belgian chocolates, 500 g",
        "32.00",
        "EUR",
        "2025-02-01",
        3,
        "Chocolates delivered past their best-before date",
        "Full refund",
        [
            (
                "buyer",
                [
                    "The box says best before 15.01.2025 and it was delivered on 04.02.2025, the chocolate has a white bloom.",
                    "Photo of the date on the box attached.",
                ],
            ),
            ("seller", ["Chocolate is safe to eat after the best-before date.", "We can offer a 10% discount."]),
        ],
        (16, 1),
    ),
    (
        2,
        "food",
        "food",
        "Coffee beans, single origin, 1 kg",
        "28.00",
        "EUR",
        "2025-03-05",
        2,
        "Buyer says the coffee tastes stale",
        "Refund",
        [
            ("buyer", ["The coffee tastes flat and stale to me.", "I expected more aroma."]),
            (
                "seller",
                [
                    "The sealed bag shows roasted 24.02.2025 and it was delivered on 07.03.2025, eleven days later, with the valve intact.",
                    "Taste is personal; the beans are fresh by any standard.",
                ],
            ),
        ],
        (5, 12),
    ),
    (
        3,
        "food",
        "food",
        "Frozen seafood pack, 2 kg, shipped on dry ice",
        "64.00",
        "EUR",
        "2025-07-10",
        4,
        "Seafood arrived thawed after a two-day courier delay",
        "Full refund",
        [
            (
                "buyer",
                [
                    "The pack arrived two days late and completely thawed, warm to the touch; photo of the thermometer at 14 degrees attached.",
                    "The dry ice was gone. I threw it away for safety.",
                ],
            ),
            (
                "seller",
                ["We packed it with enough dry ice for 48 hours.", "The delay was caused by the courier, not by us."],
            ),
        ],
        (14, 3),
    ),
    (
        4,
        "food",
        "food",
        "Raw forest honey, 1 kg jar",
        "22.00",
        "EUR",
        "2025-01-12",
        3,
        "Buyer says the honey has gone bad because it turned solid",
        "Refund",
        [
            ("buyer", ["The honey is solid and grainy, it has gone bad.", "Good honey should be liquid."]),
            (
                "seller",
                [
                    "Raw honey crystallises naturally; the listing says so and explains how to warm it.",
                    "It is within its date and not spoiled.",
                ],
            ),
        ],
        (4, 13),
    ),
    (
        5,
        "food",
        "food",
        "Extra virgin olive oil, 3 L tin",
        "39.00",
        "EUR",
        "2025-04-22",
        3,
        "Tin arrived dented and leaking oil",
        "Replacement",
        [
            (
                "buyer",
                [
                    "The tin arrived dented at the corner and leaking; the box was soaked in oil when the courier handed it over.",
                    "I took photos at the door with the courier present.",
                ],
            ),
            ("seller", ["We packed the tin in a double box.", "Maybe it was damaged by the courier."]),
        ],
        (15, 2),
    ),
    (
        6,
        "food",
        "food",
        "Protein powder, vanilla, 2 kg tub",
        "49.00",
        "EUR",
        "2025-05-03",
        2,
        "Buyer wants to return a half-used tub because of the taste",
        "Refund",
        [
            ("buyer", ["I don't like the taste, I want to return it.", "I used about half to be sure."]),
            (
                "seller",
                [
                    "The tub was opened and half used; food supplements cannot be returned once opened.",
                    "The flavour was described accurately.",
                ],
            ),
        ],
        (1, 16),
    ),
    (
        7,
        "food",
        "food",
        "Infant formula, 6 tins",
        "119.00",
        "EUR",
        "2025-08-14",
        2,
        "Formula was delivered to a neighbour who says they never got it",
        "Full refund",
        [
            (
                "buyer",
                [
                    "Tracking says delivered to a neighbour at number 12, but they say they never got it.",
                    "I need the formula for my baby.",
                ],
            ),
            (
                "seller",
                [
                    "The buyer set the delivery preference 'neighbour allowed' at checkout, and the courier's record is signed by the neighbour at number 12.",
                    "We followed the buyer's own delivery instruction.",
                ],
            ),
        ],
        (7, 10),
    ),
    (
        8,
        "food",
        "food",
        "Custom birthday cake, guaranteed delivery on Saturday",
        "85.00",
        "EUR",
        "2025-06-02",
        6,
        "Cake arrived on Sunday, one day after the party it was ordered for",
        "Full refund",
        [
            (
                "buyer",
                [
                    "I paid extra for guaranteed Saturday delivery for a birthday party and the cake came on Sunday.",
                    "It was useless to us by then.",
                ],
            ),
            ("seller", ["The cake was fresh and in perfect condition.", "Delivery days are handled by the courier."]),
        ],
        (13, 4),
    ),
    (
        9,
        "food",
        "food",
        "Dried mango, 1 kg pack",
        "18.00",
        "EUR",
        "2025-09-01",
        3,
        "Mould visible in the pack on arrival",
        "Refund",
        [
            (
                "buyer",
                [
                    "When I opened the pack on arrival there was white and green mould on several pieces; photo attached.",
                    "The pack is within its date.",
                ],
            ),
            (
                "seller",
                ["Our dried fruit is checked before packing.", "Storage at the buyer's home may have caused it."],
            ),
        ],
        (15, 2),
    ),
    (
        10,
        "food",
        "food",
        "Cheese hamper, 5 cheeses",
        "69.00",
        "EUR",
        "2025-12-10",
        2,
        "Buyer says one cheese was missing from the hamper",
        "Partial refund",
        [
            ("buyer", ["The hamper is missing the goat cheese, there were only four.", "I want a partial refund."]),
            (
                "seller",
                [
                    "The dispatch weight of 2.31 kg matches the complete hamper with five cheeses, and our packing photo shows all five.",
                    "The hamper was sealed with our tape.",
                ],
            ),
        ],
        (6, 11),
    ),
    # --- digital -----------------------------------------------------------------------------
    (
        1,
        "digi",
        "digital",
        "Game activation key, PC",
        "49.99",
        "EUR",
        "2025-02-10",
        None,
        "Key was already used when the buyer tried to activate it",
        "Full refund",
        [
            (
                "buyer",
                [
                    "Four minutes after buying I tried to activate the key and got 'this key has already been redeemed'; screenshot attached with the time.",
                    "It does not work.",
                ],
            ),
            ("seller", ["We sell only new keys from authorised distributors.", "The buyer may have shared the key."]),
        ],
        (13, 4),
    ),
    (
        2,
        "digi",
        "digital",
        "Game activation key, console",
        "59.99",
        "EUR",
        "2025-03-12",
        None,
        "Buyer says the key does not work",
        "Full refund",
        [
            ("buyer", ["The key doesn't work, I want my money back."]),
            (
                "seller",
                [
                    "The buyer wrote to us two days ago that the key works fine and the game is installed; chat screenshot attached.",
                    "The key was activated on the buyer's account.",
                ],
            ),
        ],
        (1, 16),
    ),
    (
        3,
        "digi",
        "digital",
        "Antivirus licence, 1 device, 1 year",
        "19.99",
        "EUR",
        "2025-04-01",
        None,
        "Buyer expected a licence for five devices",
        "Refund",
        [
            (
                "buyer",
                [
                    "The licence only works on one device, I need it for my whole family.",
                    "This is not what I expected.",
                ],
            ),
            (
                "seller",
                ["The title says 1 device, 1 year, and the description repeats it.", "The licence works as described."],
            ),
        ],
        (3, 14),
    ),
    (
        4,
        "digi",
        "digital",
        "Streaming subscription, 12 months",
        "79.00",
        "EUR",
        "2025-05-05",
        None,
        "Subscription account was banned after one week",
        "Full refund",
        [
            (
                "buyer",
                [
                    "After one week the account stopped working: 'account suspended for terms violation'.",
                    "I paid for 12 months.",
                ],
            ),
            (
                "seller",
                ["The account worked when delivered.", "We are not responsible for what the streaming service does."],
            ),
        ],
        (12, 5),
    ),
    (
        5,
        "digi",
        "digital",
        "Online photography course, lifetime access",
        "149.00",
        "EUR",
        "2025-01-15",
        None,
        "Buyer wants a refund after completing most of the course",
        "Full refund",
        [
            ("buyer", ["The course was not as advanced as I hoped.", "I want a refund."]),
            (
                "seller",
                [
                    "Our platform log shows the buyer completed 82% of the lessons over six weeks and downloaded all workbooks.",
                    "Refunds are available within 14 days if less than 20% was viewed.",
                ],
            ),
        ],
        (2, 15),
    ),
    (
        6,
        "digi",
        "digital",
        "E-book bundle, 10 titles",
        "29.00",
        "EUR",
        "2025-06-18",
        None,
        "Download codes never arrived",
        "Full refund",
        [
            (
                "buyer",
                [
                    "I never received the download codes by email, not even in spam.",
                    "I wrote to the seller three times.",
                ],
            ),
            ("seller", ["Codes are sent automatically."]),
            ("buyer", ["The seller has not shown any delivery log or resent the codes."]),
        ],
        (14, 3),
    ),
    (
        7,
        "digi",
        "digital",
        "Used smartphone, listed battery health 90%",
        "329.00",
        "EUR",
        "2025-07-22",
        3,
        "Battery health is 78%, not 90% as listed",
        "Partial refund or return",
        [
            (
                "buyer",
                [
                    "The battery settings screen shows maximum capacity 78% on arrival, the listing says 90%; screenshot attached.",
                    "The battery drains by midday.",
                ],
            ),
            ("seller", ["The phone was tested before shipping.", "Battery readings can vary."]),
        ],
        (13, 4),
    ),
    (
        8,
        "digi",
        "digital",
        "Wireless earbuds",
        "119.00",
        "EUR",
        "2025-02-28",
        2,
        "Left earbud stopped working after two months",
        "Replacement",
        [
            ("buyer", ["The left earbud stopped working after two months.", "This is a defect."]),
            (
                "seller",
                [
                    "The returned left earbud has its liquid damage indicator turned red; the earbuds are not waterproof, as the listing says.",
                    "Water damage is not covered by the warranty.",
                ],
            ),
        ],
        (5, 12),
    ),
    (
        9,
        "digi",
        "digital",
        "Tablet, 10 inch, 128 GB",
        "279.00",
        "EUR",
        "2025-09-03",
        2,
        "Return requested 20 days after delivery on a 14-day return policy",
        "Return for refund",
        [
            ("buyer", ["I want to return the tablet, I found a cheaper one.", "It is in its box."]),
            (
                "seller",
                [
                    "The 14-day return window had passed; the tablet works and has no defect.",
                    "The return policy is on the listing.",
                ],
            ),
        ],
        (2, 15),
    ),
    (
        10,
        "digi",
        "digital",
        "Gift card code, 100 EUR",
        "100.00",
        "EUR",
        "2025-12-01",
        None,
        "Gift card code had zero balance on first use",
        "Full refund",
        [
            (
                "buyer",
                [
                    "The code showed a balance of 0.00 the first time I used it; screenshot of the balance check attached.",
                    "I never used it before.",
                ],
            ),
            (
                "seller",
                [
                    "The card issuer's log shows the code was redeemed 2 hours before the buyer's purchase, so it was sold already used.",
                    "We are checking with our supplier.",
                ],
            ),
        ],
        (15, 2),
    ),
    # --- others ------------------------------------------------------------------------------
    (
        1,
        "othr",
        "others",
        "Camping tent, 4 person",
        "159.00",
        "EUR",
        "2025-05-10",
        3,
        "Tent delivered without its poles",
        "Send the poles or refund",
        [
            (
                "buyer",
                [
                    "The tent bag has no poles in it; my unboxing video shows the sealed bag opened and emptied.",
                    "Without poles the tent cannot be set up.",
                ],
            ),
            ("seller", ["We pack every tent complete.", "The buyer may have lost them."]),
        ],
        (13, 4),
    ),
    (
        2,
        "othr",
        "others",
        "Office chair, gas lift, 2-year warranty",
        "189.00",
        "EUR",
        "2025-01-05",
        4,
        "Gas lift sinks after three months",
        "Repair or replacement",
        [
            (
                "buyer",
                [
                    "After three months the seat slowly sinks to the lowest position, the gas lift is faulty.",
                    "The chair is used at a desk, nothing unusual.",
                ],
            ),
            (
                "seller",
                [
                    "The buyer assembled the chair themselves and may have fitted the lift wrongly.",
                    "The chair has been used for three months.",
                ],
            ),
        ],
        (10, 7),
    ),
    (
        3,
        "othr",
        "others",
        "Ceramic vase, hand painted",
        "89.00",
        "EUR",
        "2025-03-03",
        3,
        "Vase arrived shattered in a crushed box",
        "Full refund",
        [
            (
                "buyer",
                [
                    "The box was crushed and the vase was in pieces; I took photos at the door before opening it fully.",
                    "The courier saw it.",
                ],
            ),
            ("seller", ["We used bubble wrap.", "The damage must have happened in transit."]),
        ],
        (16, 1),
    ),
    (
        4,
        "othr",
        "others",
        "Board game, strategy",
        "64.00",
        "EUR",
        "2025-02-01",
        2,
        "Return requested 45 days after delivery, game opened and played",
        "Return for refund",
        [
            ("buyer", ["We played it a few times and did not like it, I want to return it."]),
            (
                "seller",
                [
                    "The return window is 30 days and closed two weeks before the request; the game was opened and the pieces punched.",
                    "No defect is claimed.",
                ],
            ),
        ],
        (2, 15),
    ),
    (
        5,
        "othr",
        "others",
        "Luggage set, 3 suitcases",
        "249.00",
        "EUR",
        "2025-06-12",
        3,
        "Buyer says the luggage never arrived",
        "Full refund",
        [
            ("buyer", ["The suitcases never arrived."]),
            (
                "seller",
                [
                    "The courier's proof of delivery is signed by the buyer and has a GPS-stamped photo of the boxes at the buyer's door.",
                    "Three boxes with a total of 18 kg were handed over.",
                ],
            ),
        ],
        (3, 14),
    ),
    (
        6,
        "othr",
        "others",
        "Desk lamp, LED, warm white 2700 K",
        "42.00",
        "EUR",
        "2025-08-08",
        2,
        "Buyer expected a daylight colour, the lamp is yellowish",
        "Refund",
        [
            ("buyer", ["The light is yellowish, I wanted white light for work.", "It is not what I expected."]),
            (
                "seller",
                [
                    "The listing says warm white 2700 K in the title and the specifications.",
                    "The lamp works and is exactly as described.",
                ],
            ),
        ],
        (4, 13),
    ),
    (
        7,
        "othr",
        "others",
        "Children's bicycle, 16 inch",
        "179.00",
        "EUR",
        "2025-11-20",
        4,
        "Bicycle arrived with a bent front wheel",
        "Replacement wheel or refund",
        [
            (
                "buyer",
                [
                    "The front wheel is bent; the unboxing video shows it bent as it comes out of the box.",
                    "The bike was never ridden.",
                ],
            ),
            ("seller", ["The bike was checked before shipping.", "Maybe it was bent during assembly."]),
        ],
        (14, 3),
    ),
    (
        8,
        "othr",
        "others",
        "Yoga mat, natural rubber",
        "55.00",
        "EUR",
        "2025-04-14",
        3,
        "Mat has a strong rubber smell",
        "Refund",
        [
            ("buyer", ["The mat smells strongly of rubber, I can't use it in my flat.", "It smells like chemicals."]),
            (
                "seller",
                [
                    "Natural rubber has a smell that fades in a few weeks; the listing says so and advises airing it.",
                    "The mat is not defective.",
                ],
            ),
        ],
        (8, 9),
    ),
    (
        9,
        "othr",
        "others",
        "Kitchen knife set, carbon steel",
        "129.00",
        "EUR",
        "2025-01-25",
        3,
        "Blades rusted after a few weeks",
        "Refund",
        [
            (
                "buyer",
                ["The blades have rust spots after a few weeks, poor quality steel.", "I wash them in the dishwasher."],
            ),
            (
                "seller",
                [
                    "Carbon steel rusts in a dishwasher; the listing and the box say hand wash and dry immediately.",
                    "This is a care issue, not a defect.",
                ],
            ),
        ],
        (4, 13),
    ),
    (
        10,
        "othr",
        "others",
        "Garden hose reel, 30 m",
        "69.00",
        "EUR",
        "2025-04-02",
        None,
        "Tracking stuck in transit for 25 days and the seller does not answer",
        "Full refund",
        [
            (
                "buyer",
                [
                    "The tracking has said in transit for 25 days and the parcel never arrived.",
                    "I wrote to the seller four times without any answer.",
                ],
            ),
            ("seller", ["Shipped on time."]),
        ],
        (16, 1),
    ),
]


def case_json(entry: tuple) -> tuple[str, dict]:
    n, code, category, product, amount, currency, ordered, days, reason, remedy, rounds, (buyer, seller) = entry
    assert buyer + seller == 17, (code, n)
    case_id = f"hist-{code}-{n:03d}"
    ordered_at = datetime.fromisoformat(ordered).replace(hour=10)
    delivered_at = ordered_at + timedelta(days=days, hours=4) if days is not None else None
    start = (delivered_at or ordered_at) + timedelta(days=2)
    counts = {"buyer": 0, "seller": 0}
    out_rounds = []
    for step, (party, texts) in enumerate(rounds):
        counts[party] += 1
        r = counts[party]
        out_rounds.append(
            {
                "party": party,
                "round": r,
                "submitted_at": (start + timedelta(hours=5 * step)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "items": [{"id": f"{party[0]}{r}-{i}", "kind": "text", "text": t} for i, t in enumerate(texts, 1)],
            }
        )
    case = {
        "case_id": case_id,
        "metadata": {
            "category": category,
            "product": product,
            "order_amount": amount,
            "currency": currency,
            "ordered_at": ordered_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "delivered_at": delivered_at.strftime("%Y-%m-%dT%H:%M:%SZ") if delivered_at else None,
            "dispute_reason": reason,
            "requested_remedy": remedy,
        },
        "rounds": out_rounds,
        "ground_truth": {"buyer": buyer, "seller": seller},
    }
    return case_id, case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    out = parser.parse_args().out
    out.mkdir(parents=True, exist_ok=True)
    for entry in CASES:
        case_id, case = case_json(entry)
        (out / f"{case_id}.json").write_text(json.dumps(case, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {case_id}.json")


if __name__ == "__main__":
    main()
