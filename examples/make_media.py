"""Render the synthetic evidence media used by the sample cases into examples/media/.

    .venv/bin/python examples/make_media.py            # writes examples/media/
    .venv/bin/python examples/make_media.py --out DIR  # writes somewhere else (tests use this)

Everything is drawn with Pillow (default font, no font files) and encoded with PyAV; nothing is
downloaded. The textures, the hand-held camera, the REC overlay and the encoders are the synthetic
benchmark's (cyberjurors.evaluation.synth_media): only the scenes are drawn here. The pictures are
reproducible: all "randomness" (fabric weave, wall texture, camera shake) comes from fixed seeds,
so a rerun draws the same frames (another FreeType may anti-alias text a little differently). The files' bytes are not: PNG's zlib stream and JPEG depend on the
library build, and libx264 may encode the same frames to other bytes on another CPU or build,
or even on a second run. The committed files are therefore the reference. The sha256 and size
in MANIFEST.json (and the sha256 the cases carry) identify those particular encodes, and a rerun
writes its own; tests/unit/project/test_examples.py compares a rerun with them by decoded pixels and probes,
never by bytes. Rewriting examples/media/ means copying the new sha256 into the cases.

Each file holds a clue a juror who looks at the pixels can find (a battery level, a stamp, a
date...). In the videos the key clue is visible in only a few consecutive frames; MANIFEST.json
records where, and a pixel probe (a region and a statistic) that the tests use to check it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw

from cyberjurors.evaluation.synth_media import (
    RGB,
    backdrop,
    encode_clip,
    encode_photo,
    font,
    handheld,
    jagged,
    mottled,
    rec_overlay,
)

HERE = Path(__file__).resolve().parent


# ----------------------------------------------------------------------------------------------
# helpers


def text_centered(draw: ImageDraw.ImageDraw, xy: tuple[float, float], text: str, size: int, fill) -> None:
    draw.text(xy, text, font=font(size), fill=fill, anchor="mm")


# ----------------------------------------------------------------------------------------------
# images


def phone_battery() -> Image.Image:
    """A phone's battery settings: level 2 % shortly after a full charge, maximum capacity 71 %."""
    w, h = 300, 620
    im = Image.new("RGB", (w, h), (242, 242, 247))
    d = ImageDraw.Draw(im)
    d.text((20, 14), "09:41", font=font(15), fill=(0, 0, 0))
    d.text((214, 14), "2%", font=font(15), fill=(220, 30, 30))
    d.rounded_rectangle((244, 14, 276, 30), radius=4, outline=(60, 60, 60), width=2)
    d.rectangle((247, 17, 249, 27), fill=(220, 30, 30))
    d.rectangle((277, 19, 279, 25), fill=(60, 60, 60))
    d.text((16, 52), "< Settings", font=font(15), fill=(0, 122, 255))
    d.text((16, 80), "Battery", font=font(28), fill=(0, 0, 0))

    d.rounded_rectangle((14, 124, w - 14, 176), radius=10, fill=(255, 255, 255))
    d.text((28, 134), "Battery Level", font=font(15), fill=(0, 0, 0))
    d.text((w - 30, 134), "2%", font=font(15), fill=(220, 30, 30), anchor="ra")
    d.text((28, 156), "Last charged to 100% - 47 min ago", font=font(11), fill=(120, 120, 128))

    # level over the last hour: a steep fall from 100 % to 2 %
    d.rounded_rectangle((14, 188, w - 14, 318), radius=10, fill=(255, 255, 255))
    d.text((28, 196), "LAST 60 MINUTES", font=font(11), fill=(120, 120, 128))
    for k in range(24):
        level = 100 if k < 8 else max(2, 100 - (k - 7) * 6.2)
        x = 30 + k * 10
        top = 306 - int(level * 0.9)
        colour = (52, 199, 89) if level > 20 else (220, 30, 30)
        d.rectangle((x, top, x + 6, 306), fill=colour)

    d.text((16, 332), "BATTERY HEALTH", font=font(11), fill=(120, 120, 128))
    d.rounded_rectangle((14, 350, w - 14, 470), radius=10, fill=(255, 255, 255))
    d.text((28, 362), "Maximum Capacity", font=font(15), fill=(0, 0, 0))
    d.text((w - 30, 358), "71%", font=font(22), fill=(0, 0, 0), anchor="ra")
    d.line((28, 392, w - 28, 392), fill=(225, 225, 230))
    d.multiline_text(
        (28, 400),
        "This is a measure of battery capacity\nrelative to when it was new.",
        font=font(11),
        fill=(120, 120, 128),
        spacing=3,
    )
    d.multiline_text(
        (28, 434),
        "Your battery's health is significantly\ndegraded. Service is recommended.",
        font=font(11),
        fill=(220, 30, 30),
        spacing=3,
    )

    d.rounded_rectangle((14, 486, w - 14, 540), radius=10, fill=(255, 255, 255))
    d.text((28, 496), "Peak Performance Capability", font=font(13), fill=(0, 0, 0))
    d.text((28, 518), "Unexpected shutdowns: 3 this week", font=font(11), fill=(120, 120, 128))
    d.rounded_rectangle((110, 600, 190, 605), radius=2, fill=(0, 0, 0))
    return im


def shipping_label() -> Image.Image:
    """A courier label scan: tracking number, weight, and a DELIVERED - signed by: J. PARK stamp."""
    w, h = 480, 370
    im = Image.new("RGB", (w, h), (250, 249, 245))
    d = ImageDraw.Draw(im)
    d.rectangle((10, 10, w - 11, h - 11), outline=(0, 0, 0), width=3)
    d.rectangle((10, 10, w - 11, 46), fill=(0, 0, 0))
    d.text((22, 17), "SWIFTPOST EXPRESS", font=font(20), fill=(255, 255, 255))
    d.text((w - 24, 20), "PARCEL 1/1", font=font(14), fill=(255, 255, 255), anchor="ra")
    d.text((22, 56), "FROM: Nordlicht Outdoor GmbH, Speicherstr. 8, 20457 Hamburg", font=font(12), fill=(0, 0, 0))
    d.text((22, 78), "TO:", font=font(14), fill=(0, 0, 0))
    d.multiline_text((60, 78), "Jiwon Park\nLindenstr. 14B\n10969 Berlin  DE", font=font(16), fill=(0, 0, 0), spacing=4)
    d.text((300, 80), "WEIGHT: 1.24 kg", font=font(14), fill=(0, 0, 0))
    d.text((300, 100), "SERVICE: SIGNATURE", font=font(12), fill=(0, 0, 0))
    d.text((300, 116), "SHIPPED: 03.10.2026", font=font(12), fill=(0, 0, 0))
    # barcode: bar widths from the tracking digits
    tracking = "SP 4471 9023 3186 DE"
    x = 30
    for n, ch in enumerate("4471902331864471"):
        for width in (1 + int(ch) % 3, 1 + (int(ch) * 7 + n) % 3):
            d.rectangle((x, 146, x + width - 1, 200), fill=(0, 0, 0))
            x += width + 2
    d.text((30, 208), f"TRACKING: {tracking}", font=font(15), fill=(0, 0, 0))
    d.text((30, 232), "Order 7731-0558  Ref: rain jacket, size M", font=font(12), fill=(0, 0, 0))

    stamp = Image.new("RGBA", (330, 96), (0, 0, 0, 0))
    s = ImageDraw.Draw(stamp)
    red = (200, 20, 30, 235)
    s.rounded_rectangle((3, 3, 326, 92), radius=10, outline=red, width=4)
    s.text((165, 30), "DELIVERED - signed by: J. PARK", font=font(18), fill=red, anchor="mm")
    s.text((165, 64), "06.10.2026 11:42  SwiftPost B-Kreuzberg", font=font(13), fill=red, anchor="mm")
    stamp = stamp.rotate(8, resample=Image.Resampling.BICUBIC, expand=True)
    im.paste(stamp, (118, 212), stamp)
    return im


def shirt_torn_seam() -> Image.Image:
    """Close-up of a blue oxford shirt: the side seam is split open along its stitching."""
    w, h = 560, 420
    rng = random.Random(3)
    im = mottled((w, h), (118, 150, 196), (150, 180, 222), rng=random.Random(31), grain=2)
    d = ImageDraw.Draw(im)
    for y in range(0, h, 3):  # weave
        d.line((0, y, w, y), fill=(128, 160, 205))
    for x in range(0, w, 4):
        d.line((x, 0, x, h), fill=(140, 171, 214))
    # seam allowance fold and the two stitch rows
    d.rectangle((262, 0, 300, h), fill=(128, 160, 206))
    d.line((262, 0, 262, h), fill=(92, 120, 160), width=2)
    for x in (270, 292):
        for y in range(0, h, 12):
            d.line((x, y, x, y + 7), fill=(235, 238, 245), width=2)
    # the tear: a jagged opening along the seam with the dark lining showing through
    left = jagged(rng, (278, 110), (272, 310), 14, 5)
    right = jagged(rng, (286, 110), (288, 310), 14, 5)
    middle = [(x + rng.uniform(10, 22) * math.sin(math.pi * i / 14), y) for i, (x, y) in enumerate(right)]
    d.polygon(left + middle[::-1], fill=(38, 34, 44))
    for x, y in left[1:-1] + middle[1:-1]:  # frayed threads
        for _ in range(3):
            a = rng.uniform(0, 2 * math.pi)
            length = rng.uniform(5, 14)
            d.line((x, y, x + length * math.cos(a), y + length * math.sin(a)), fill=(225, 232, 244), width=1)
    # broken stitches hanging out of the seam
    for y in range(116, 300, 18):
        d.line((284, y, 284 + rng.uniform(-10, 10), y + rng.uniform(6, 14)), fill=(245, 245, 250), width=2)
    # a coin for scale
    d.ellipse((440, 320, 500, 380), fill=(196, 160, 90), outline=(150, 120, 60), width=3)
    text_centered(d, (470, 350), "1", 26, (150, 120, 60))
    return im


def food_best_before() -> Image.Image:
    """A granola bag whose printed best-before date (14.09.2026) had passed on delivery."""
    w, h = 480, 480
    im = mottled((w, h), (150, 150, 146), (178, 178, 172), rng=random.Random(41), grain=5)
    d = ImageDraw.Draw(im)
    d.polygon([(88, 40), (392, 40), (404, 450), (76, 450)], fill=(246, 236, 214))
    d.rectangle((88, 40, 392, 64), fill=(196, 98, 36))
    for x in range(92, 392, 8):  # crimped seal
        d.line((x, 40, x + 4, 64), fill=(170, 80, 28))
    d.rectangle((84, 70, 396, 170), fill=(225, 120, 40))
    text_centered(d, (240, 100), "MORNING CRUNCH", 32, (255, 255, 255))
    text_centered(d, (240, 140), "Honey Almond Granola", 20, (255, 244, 220))
    d.ellipse((150, 186, 330, 318), fill=(214, 170, 100))
    rng = random.Random(4)
    for _ in range(45):  # oat clusters
        a, r = rng.uniform(0, 2 * math.pi), rng.uniform(0, 1) ** 0.5
        x, y = 234 + 76 * r * math.cos(a), 248 + 52 * r * math.sin(a)
        d.ellipse((x, y, x + rng.uniform(8, 14), y + rng.uniform(6, 10)), fill=(176, 124, 62))
    text_centered(d, (240, 340), "500 g  -  baked with real honey", 16, (120, 70, 30))
    # printed date strip
    d.rectangle((120, 370, 360, 428), fill=(255, 255, 255), outline=(60, 60, 60))
    d.text((130, 376), "BEST BEFORE", font=font(13), fill=(20, 20, 20))
    d.text((130, 392), "14.09.2026", font=font(24), fill=(20, 20, 20))
    d.text((262, 380), "LOT 2608B", font=font(12), fill=(60, 60, 60))
    d.text((262, 398), "07:31  L2", font=font(12), fill=(60, 60, 60))
    return im


def courier_door() -> Image.Image:
    """The courier's proof-of-delivery photo: a parcel on the mat in front of door 14B."""
    w, h = 480, 360
    im = mottled((w, h), (200, 188, 160), (222, 212, 188), rng=random.Random(51), grain=4)
    d = ImageDraw.Draw(im)
    d.rectangle((0, 290, w, h), fill=(150, 146, 140))  # landing floor
    d.rectangle((150, 20, 330, 292), fill=(50, 92, 78))  # door
    d.rectangle((140, 12, 340, 20), fill=(240, 238, 230))
    for box in ((165, 40, 315, 150), (165, 165, 315, 280)):
        d.rectangle(box, outline=(38, 74, 62), width=4)
    d.rectangle((300, 160, 312, 176), fill=(196, 170, 90))  # handle
    d.rounded_rectangle((210, 60, 270, 94), radius=4, fill=(226, 210, 150))
    text_centered(d, (240, 77), "14B", 24, (40, 40, 40))
    d.rectangle((360, 130, 380, 150), fill=(230, 230, 230), outline=(90, 90, 90))
    d.ellipse((366, 136, 374, 144), fill=(40, 40, 40))  # doorbell
    d.polygon([(140, 300), (340, 300), (356, 340), (124, 340)], fill=(122, 86, 52))  # mat
    d.rectangle((196, 236, 290, 318), fill=(186, 144, 96), outline=(140, 104, 64))  # parcel
    d.line((243, 236, 243, 318), fill=(210, 190, 150), width=6)
    d.rectangle((206, 250, 236, 272), fill=(250, 250, 250))
    d.rectangle((0, 330, w, h), fill=(0, 0, 0))
    d.text(
        (8, 336), "SwiftPost POD  08.10.2026 14:17  52.4891N 13.4218E  drv #2291", font=font(13), fill=(255, 220, 60)
    )
    return im


def chat_screenshot() -> Image.Image:
    """The marketplace chat: the buyer confirms the game key worked, days before the dispute."""
    w, h = 360, 620
    im = Image.new("RGB", (w, h), (236, 239, 243))
    d = ImageDraw.Draw(im)
    d.rectangle((0, 0, w, 64), fill=(36, 52, 90))
    d.text((16, 12), "PixelKeys Store", font=font(18), fill=(255, 255, 255))
    d.text((16, 38), "Order #K-88412  -  Starfall Odyssey (Steam key)", font=font(11), fill=(190, 200, 225))
    y = 80

    def bubble(text: str, stamp: str, mine: bool) -> None:
        nonlocal y
        lines = text.split("\n")
        height = 18 * len(lines) + 26
        x0, x1 = (110, w - 12) if mine else (12, w - 110)
        d.rounded_rectangle((x0, y, x1, y + height), radius=12, fill=(210, 236, 200) if mine else (255, 255, 255))
        d.multiline_text((x0 + 12, y + 8), text, font=font(13), fill=(20, 20, 20), spacing=5)
        d.text((x1 - 10, y + height - 16), stamp, font=font(10), fill=(120, 120, 120), anchor="ra")
        y += height + 12

    text_centered(d, (w / 2, y + 6), "1 October 2026", 11, (120, 120, 120))
    y += 22
    bubble("Hi! Your key for Starfall\nOdyssey is on the order\npage. Enjoy the game!", "18:02", mine=False)
    bubble("got it, redeemed it on\nsteam just now, works\nfine. thanks!!", "18:09  seen", mine=True)
    bubble("Great, have fun! A review\nwould help us a lot :)", "18:11", mine=False)
    text_centered(d, (w / 2, y + 6), "5 October 2026", 11, (120, 120, 120))
    y += 22
    bubble("the key says already\nused, I want a refund", "21:47  seen", mine=True)
    d.rectangle((0, h - 52, w, h), fill=(255, 255, 255))
    d.rounded_rectangle((12, h - 42, w - 60, h - 12), radius=14, outline=(200, 200, 205))
    d.text((26, h - 35), "Message...", font=font(13), fill=(160, 160, 165))
    d.ellipse((w - 48, h - 44, w - 14, h - 10), fill=(36, 52, 90))
    return im


def order_page() -> Image.Image:
    """The order page: delivered 4 Aug 2026; the 30-day return window closed on 3 Sep 2026."""
    w, h = 480, 430
    im = Image.new("RGB", (w, h), (255, 255, 255))
    d = ImageDraw.Draw(im)
    d.rectangle((0, 0, w, 44), fill=(19, 25, 33))
    d.text((14, 12), "shopmarket", font=font(18), fill=(255, 153, 0))
    d.text((w - 14, 15), "Your orders", font=font(13), fill=(255, 255, 255), anchor="ra")
    d.text((18, 58), "Order details", font=font(22), fill=(17, 17, 17))
    d.text((18, 88), "Ordered 29 July 2026   |   Order # A-20931-77", font=font(12), fill=(90, 90, 90))
    d.rounded_rectangle((14, 110, w - 14, 250), radius=6, outline=(213, 217, 217))
    d.text((28, 122), "Delivered 4 August 2026", font=font(16), fill=(0, 118, 0))
    d.rectangle((28, 150, 108, 230), fill=(232, 236, 240))
    d.rectangle((52, 160, 84, 200), fill=(60, 64, 72))
    d.polygon([(50, 200), (86, 200), (92, 222), (44, 222)], fill=(40, 42, 48))
    d.multiline_text(
        (122, 152),
        "PowerBlend 1200 High-Speed\nBlender, 2 L jar, black\nSold by: Vortek Home Store\nEUR 89.00",
        font=font(13),
        fill=(17, 17, 17),
        spacing=5,
    )
    d.rounded_rectangle((14, 262, w - 14, 360), radius=6, fill=(255, 248, 240), outline=(240, 180, 120))
    d.text((28, 272), "Return window closed on 3 September 2026", font=font(15), fill=(180, 40, 20))
    d.multiline_text(
        (28, 296),
        "Returns were accepted for 30 days after delivery.\n"
        "Covered by the 2-year manufacturer warranty (Vortek)\nuntil 4 August 2028.",
        font=font(12),
        fill=(60, 60, 60),
        spacing=4,
    )
    d.rounded_rectangle((14, 376, 226, 410), radius=16, fill=(238, 238, 238))
    text_centered(d, (120, 393), "Return item (unavailable)", 13, (150, 150, 150))
    d.rounded_rectangle((240, 376, w - 14, 410), radius=16, fill=(255, 216, 20))
    text_centered(d, (353, 393), "Contact seller", 13, (17, 17, 17))
    return im


def kettle_crack() -> Image.Image:
    """A glass kettle on the counter with a crack running up from its base and water under it."""
    w, h = 480, 480
    rng = random.Random(8)
    im = Image.new("RGB", (w, h), (236, 236, 232))
    d = ImageDraw.Draw(im)
    for x in range(0, w, 60):  # wall tiles
        d.line((x, 0, x, 330), fill=(205, 205, 200), width=2)
    for y in range(0, 330, 60):
        d.line((0, y, w, y), fill=(205, 205, 200), width=2)
    im.paste(mottled((w, h - 330), (96, 96, 100), (128, 128, 132), rng=random.Random(81), grain=3), (0, 330))
    d.ellipse((110, 388, 390, 430), fill=(150, 172, 186))  # puddle
    d.ellipse((150, 394, 330, 420), fill=(176, 196, 208))
    d.rounded_rectangle((140, 360, 340, 400), radius=10, fill=(30, 30, 32))  # base
    d.polygon([(160, 120), (320, 120), (336, 364), (144, 364)], fill=(196, 214, 222))  # glass body
    d.polygon([(150, 250), (330, 250), (336, 364), (144, 364)], fill=(170, 196, 210))  # water
    d.line((168, 130, 156, 350), fill=(236, 244, 248), width=6)  # highlight
    d.rounded_rectangle((150, 100, 330, 128), radius=8, fill=(36, 36, 38))  # lid
    d.rounded_rectangle((226, 84, 254, 102), radius=5, fill=(36, 36, 38))
    d.polygon(
        [(320, 130), (372, 140), (378, 330), (330, 340), (330, 310), (352, 302), (350, 162), (322, 156)],
        fill=(36, 36, 38),
    )  # handle
    d.polygon([(160, 124), (118, 150), (126, 156), (166, 140)], fill=(180, 200, 210))  # spout
    d.text((292, 210), "1.5L", font=font(12), fill=(90, 110, 120))
    for y in range(230, 352, 24):
        d.line((300, y, 316, y), fill=(110, 130, 140), width=2)
    # the crack: from the base up the glass, with branches
    trunk = jagged(rng, (232, 362), (262, 190), 12, 7)
    d.line(trunk, fill=(40, 48, 52), width=3)
    for i in (3, 6, 9):
        x, y = trunk[i]
        d.line(
            jagged(rng, (x, y), (x + rng.choice((-1, 1)) * rng.uniform(30, 50), y - rng.uniform(10, 30)), 5, 4),
            fill=(50, 58, 62),
            width=2,
        )
    for x in range(220, 250, 6):  # drips from the crack
        d.ellipse((x, 380 + (x % 5), x + 4, 386 + (x % 5)), fill=(210, 226, 236))
    return im


def dispatch_photo() -> Image.Image:
    """The seller's dispatch photo: a sealed 1 kg coffee bag, roasted 28.09, packed 30.09.2026."""
    w, h = 480, 360
    im = mottled((w, h), (150, 110, 70), (180, 140, 96), rng=random.Random(91), grain=4, stretch=(6, 1))
    d = ImageDraw.Draw(im)
    d.polygon([(60, 40), (240, 40), (252, 320), (48, 320)], fill=(176, 138, 92))  # kraft bag
    d.rectangle((60, 40, 240, 62), fill=(150, 114, 72))
    for x in range(64, 240, 7):
        d.line((x, 42, x, 60), fill=(126, 94, 58))
    d.ellipse((128, 80, 172, 124), fill=(60, 50, 40), outline=(40, 32, 26), width=3)  # degassing valve
    d.ellipse((142, 94, 158, 110), fill=(30, 26, 22))
    d.rectangle((76, 140, 224, 280), fill=(250, 248, 240))
    text_centered(d, (150, 162), "HIGHLAND ROASTERS", 14, (30, 30, 30))
    text_centered(d, (150, 186), "Ethiopia Yirgacheffe", 13, (30, 30, 30))
    text_centered(d, (150, 206), "whole beans  1 kg", 13, (30, 30, 30))
    d.line((90, 222, 210, 222), fill=(160, 160, 160))
    text_centered(d, (150, 240), "ROASTED 28.09.2026", 14, (0, 0, 0))
    text_centered(d, (150, 262), "best within 3 months", 11, (80, 80, 80))
    # dispatch slip
    d.polygon([(268, 70), (464, 62), (470, 262), (276, 270)], fill=(255, 255, 255))
    d.multiline_text(
        (288, 84),
        "DISPATCH SLIP\n\nORDER #55102\n1 x Yirgacheffe 1 kg\nbag sealed, valve intact\n"
        "PACKED 30.09.2026 10:14\npacker: M.K.",
        font=font(13),
        fill=(20, 20, 20),
        spacing=6,
    )
    d.text((w - 12, h - 12), "30/09/2026 10:15", font=font(18), fill=(255, 150, 30), anchor="rd")
    return im


def returned_dress() -> Image.Image:
    """The returned dress as the seller received it: tag cut off, make-up marks on the neckline."""
    w, h = 400, 560
    rng = random.Random(10)
    im = mottled((w, h), (214, 214, 210), (232, 232, 228), rng=random.Random(101), grain=6)
    d = ImageDraw.Draw(im)
    d.arc((176, 20, 224, 70), 180, 360, fill=(90, 90, 90), width=4)  # hanger
    d.line((200, 45, 200, 80), fill=(90, 90, 90), width=4)
    d.line((200, 80, 90, 120), fill=(140, 100, 60), width=8)
    d.line((200, 80, 310, 120), fill=(140, 100, 60), width=8)
    green = (24, 112, 84)
    d.polygon(
        [
            (130, 96),
            (176, 86),
            (200, 118),
            (224, 86),
            (270, 96),
            (290, 150),
            (262, 170),
            (256, 260),
            (330, 520),
            (70, 520),
            (144, 260),
            (138, 170),
            (110, 150),
        ],
        fill=green,
    )
    d.line((144, 260, 256, 260), fill=(16, 90, 66), width=3)
    for x in range(120, 300, 28):
        d.line((200, 262, x, 518), fill=(20, 100, 74), width=2)  # pleats
    # neckline: a cut plastic tag fastener and a torn-off label stub
    d.rectangle((192, 112, 208, 122), fill=(246, 246, 240))
    d.line((202, 120, 214, 150), fill=(230, 230, 230), width=2)
    d.line((214, 150, 218, 146), fill=(230, 230, 230), width=2)
    # make-up smears on the collar
    for _ in range(14):
        x, y = 160 + rng.uniform(0, 30), 108 + rng.uniform(0, 20)
        d.ellipse((x, y, x + rng.uniform(6, 14), y + rng.uniform(3, 7)), fill=(198, 150, 120))
    d.ellipse((236, 104, 248, 110), fill=(176, 50, 70))  # lipstick
    # the seller's return card
    d.rectangle((246, 420, 392, 548), fill=(255, 255, 250), outline=(120, 120, 120))
    d.multiline_text(
        (254, 428),
        "RETURN RCVD\n12.10.2026\nRMA 40917\n- tags removed\n- make-up on collar",
        font=font(13),
        fill=(30, 30, 30),
        spacing=5,
    )
    return im


def rating_plate() -> Image.Image:
    """The rating plate on the back of a microwave: model MW-25S, capacity 25 L."""
    w, h = 480, 300
    im = mottled((w, h), (168, 170, 172), (196, 198, 200), rng=random.Random(111), grain=2, stretch=(8, 1))
    d = ImageDraw.Draw(im)
    d.rounded_rectangle((30, 24, 450, 276), radius=8, fill=(214, 216, 218), outline=(110, 110, 112), width=3)
    for x, y in ((44, 38), (436, 38), (44, 262), (436, 262)):
        d.ellipse((x - 6, y - 6, x + 6, y + 6), fill=(130, 130, 132), outline=(90, 90, 92))
    d.text((60, 46), "NORDHAUS", font=font(24), fill=(20, 20, 20))
    d.text((230, 54), "Microwave Oven", font=font(16), fill=(20, 20, 20))
    d.line((56, 82, 424, 82), fill=(60, 60, 60), width=2)
    d.multiline_text(
        (60, 94),
        "MODEL:\nCAPACITY:\nRATED VOLTAGE:\nRATED INPUT:\nOUTPUT:\nSERIAL No.:",
        font=font(15),
        fill=(20, 20, 20),
        spacing=9,
    )
    d.multiline_text(
        (220, 94),
        "MW-25S\n25 L\n230 V ~ 50 Hz\n1250 W\n800 W\n25S-0921-4471",
        font=font(15),
        fill=(20, 20, 20),
        spacing=9,
    )
    d.text((60, 250), "MADE IN PRC    CE    2026-08", font=font(12), fill=(40, 40, 40))
    return im


# ----------------------------------------------------------------------------------------------
# videos: neutral footage with the key clue in a few consecutive frames only

W, H = 320, 240
MARGIN = 4  # drawn this much larger each way, for the camera drift (synth_media.handheld)


@dataclass(frozen=True)
class Probe:
    """A region of the frame and a statistic on it that the clue drives over ``minimum``."""

    box: tuple[int, int, int, int]
    stat: str  # "red_minus_green" or "luma"
    minimum: float

    def measure(self, image: Image.Image) -> float:
        region = image.convert("RGB").crop(self.box)
        n = region.width * region.height
        r, g, b = (sum(i * c for i, c in enumerate(band.histogram())) / n for band in region.split())
        if self.stat == "red_minus_green":
            return r - g
        if self.stat == "luma":
            return 0.299 * r + 0.587 * g + 0.114 * b
        raise ValueError(self.stat)

    def json(self) -> dict:
        return {"box": list(self.box), "stat": self.stat, "min": self.minimum}


@dataclass(frozen=True)
class VideoSpec:
    name: str
    fps: int
    frames: int
    clue: range
    probe: Probe
    draw: Callable[[int, VideoSpec], Image.Image]
    start: str  # wall-clock of frame 0, shown in the overlay
    description: str


def table_scene(seed: int, wall: RGB, table_dark: RGB, table_light: RGB) -> Image.Image:
    """The frame with a MARGIN px margin each way for the camera drift: a wall, and a table from y = H - 100."""
    size = (W + 2 * MARGIN, H + 2 * MARGIN)
    return backdrop(random.Random(seed), wall, table_dark, table_light, horizon=H - 100, size=size)


def airfryer_frame(i: int, spec: VideoSpec) -> Image.Image:
    """Unboxing an air fryer: box, box open, fryer on the table; at power-on it shows E04 HEATER FAULT."""
    im = table_scene(7, (206, 200, 186), (120, 84, 52), (146, 106, 70))
    d = ImageDraw.Draw(im)
    cardboard, dark_card = (176, 136, 90), (140, 104, 64)
    if i < 28:
        d.rectangle((70, 70, 250, 206), fill=cardboard, outline=dark_card, width=2)
        d.rectangle((90, 90, 160, 150), fill=(40, 40, 44))
        d.text((170, 96), "AEROCHEF", font=font(14), fill=(30, 30, 30))
        d.text((170, 116), "5.5 L", font=font(13), fill=(30, 30, 30))
        d.text((170, 134), "air fryer", font=font(12), fill=(30, 30, 30))
        if i >= 18:  # flaps open
            d.polygon([(70, 70), (160, 70), (150, 40), (80, 44)], fill=dark_card)
            d.polygon([(160, 70), (250, 70), (240, 44), (170, 40)], fill=dark_card)
        if 8 <= i < 26:  # a hand reaching in
            x = 260 - (i - 8) * 4
            d.rounded_rectangle((x, 120, x + 70, 150), radius=12, fill=(222, 178, 146))
    else:
        d.rectangle((10, 120, 90, 206), fill=cardboard, outline=dark_card, width=2)  # empty box aside
        d.rounded_rectangle((130, 50, 270, 206), radius=18, fill=(34, 34, 38))  # fryer body
        d.rounded_rectangle((138, 120, 262, 200), radius=12, fill=(48, 48, 54))  # basket
        d.rounded_rectangle((176, 150, 224, 166), radius=6, fill=(20, 20, 22))  # handle
        d.line((270, 180, 310, 200), fill=(20, 20, 20), width=3)  # cable
        display = (140, 62, 260, 98)
        d.rectangle(display, fill=(24, 26, 28))
        if 36 <= i < spec.clue.start:  # powered on, preheating
            d.text((200, 80), "200°C  15:00", font=font(13), fill=(60, 190, 230), anchor="mm")
        elif i in spec.clue:  # the fault, only for these frames: then the unit shuts off
            d.rectangle(display, fill=(225, 28, 28))
            d.text((200, 80), "E04 HEATER FAULT", font=font(12), fill=(255, 255, 255), anchor="mm")
        if 30 <= i < 36 or i >= 60:
            d.rounded_rectangle((250, 150, 318, 178), radius=12, fill=(222, 178, 146))  # hand on the fryer
    im = handheld(im, i, 1, margin=MARGIN)
    rec_overlay(im, i, spec.fps, spec.start)
    return im


def phone_frame(i: int, spec: VideoSpec) -> Image.Image:
    """Unboxing a refurbished phone: the screen lights up once, showing a cracked display, then goes dark."""
    im = table_scene(17, (226, 226, 228), (196, 196, 200), (214, 214, 218))
    d = ImageDraw.Draw(im)
    d.rectangle((84, 40, 244, 220), fill=(250, 250, 250), outline=(200, 200, 204), width=2)  # box
    d.rectangle((100, 54, 228, 206), fill=(30, 30, 34))  # tray
    d.rounded_rectangle((124, 62, 204, 200), radius=12, fill=(12, 12, 14))  # phone
    screen = (130, 72, 198, 190)
    d.rectangle(screen, fill=(16, 16, 20))
    if i < 14:
        d.rectangle((84, 40, 244, 100), fill=(244, 244, 246), outline=(200, 200, 204))  # lid half on
        d.text((120, 62), "ReNew Phone 12", font=font(12), fill=(60, 60, 60))
    if i in spec.clue:  # lock screen lights up: cracked glass from the top-left corner
        rng = random.Random(5)
        x0, y0, x1, y1 = screen
        for y in range(y0, y1 + 1):
            shade = int(150 + 90 * (y - y0) / (y1 - y0))
            d.line((x0, y, x1, y), fill=(shade - 40, shade - 10, 255))
        d.text((164, 96), "10:12", font=font(18), fill=(255, 255, 255), anchor="mm")
        for _ in range(7):
            end = (x0 + rng.uniform(10, 68), y0 + rng.uniform(30, 118))
            d.line(jagged(rng, (x0 + 8, y0 + 10), end, 6, 4), fill=(10, 10, 10), width=2)
    if 20 <= i < 33 or 40 <= i < 52:  # a hand pressing the side button
        d.rounded_rectangle((200, 100, 270, 128), radius=12, fill=(222, 178, 146))
    im = handheld(im, i, 2, margin=MARGIN)
    rec_overlay(im, i, spec.fps, spec.start)
    return im


def rccar_frame(i: int, spec: VideoSpec) -> Image.Image:
    """The seller's packing video: the car goes in, the remote goes in the slot, the lid closes."""
    im = table_scene(27, (210, 212, 214), (172, 172, 176), (190, 190, 194))
    d = ImageDraw.Draw(im)
    cardboard = (176, 136, 90)
    d.rectangle((40, 30, 280, 226), fill=cardboard, outline=(140, 104, 64), width=2)
    if i < spec.clue.stop:
        d.rectangle((52, 42, 268, 214), fill=(62, 62, 68))  # foam insert
        d.rounded_rectangle((64, 60, 180, 196), radius=8, fill=(36, 36, 40))  # car cavity
        d.rounded_rectangle((196, 60, 256, 196), radius=8, fill=(36, 36, 40))  # remote slot
        if i >= 6:  # the car
            d.rounded_rectangle((76, 70, 168, 186), radius=18, fill=(200, 30, 36))
            d.rectangle((92, 100, 152, 140), fill=(40, 40, 60))
            for x, y in ((70, 82), (160, 82), (70, 160), (160, 160)):
                d.rounded_rectangle((x - 8, y - 12, x + 8, y + 12), radius=4, fill=(20, 20, 20))
        if i in spec.clue:  # the remote control placed in its slot
            d.rounded_rectangle((202, 66, 250, 190), radius=10, fill=(238, 238, 236))
            d.ellipse((214, 100, 238, 124), fill=(150, 150, 156))
            d.rectangle((222, 150, 230, 176), fill=(150, 150, 156))
            if i < spec.clue.start + 2:
                d.rounded_rectangle((244, 120, 310, 148), radius=12, fill=(222, 178, 146))  # hand letting go
        if 20 <= i < 38:  # warranty card on the table, outside the box
            d.rectangle((284, 150, 316, 196), fill=(252, 252, 252))
    else:  # lid closed and taped down the middle
        d.rectangle((40, 30, 280, 226), fill=(182, 142, 96), outline=(140, 104, 64), width=2)
        d.text((62, 60), "TURBO RACER RC 1:16", font=font(14), fill=(40, 30, 20))
        d.text((62, 84), "2.4 GHz  -  ages 8+", font=font(11), fill=(40, 30, 20))
        if i >= spec.clue.stop + 8:
            d.rectangle((40, 124, 280, 146), fill=(150, 120, 80))
    if spec.clue.stop + 2 <= i < spec.clue.stop + 14:
        x = 20 + (i - spec.clue.stop) * 10
        d.rounded_rectangle((x, 200, x + 70, 228), radius=12, fill=(222, 178, 146))
    im = handheld(im, i, 3, margin=MARGIN)
    rec_overlay(im, i, spec.fps, spec.start)
    return im


VIDEOS = [
    VideoSpec(
        "airfryer-unboxing.mp4",
        fps=8,
        frames=80,
        clue=range(41, 44),
        probe=Probe((146, 66, 250, 88), "red_minus_green", 100.0),
        draw=airfryer_frame,
        start="2026-10-05 19:22:07",
        description="buyer's unboxing: at first power-on the display shows a red 'E04 HEATER FAULT' "
        "banner, then the unit shuts off",
    ),
    VideoSpec(
        "phone-unboxing.mp4",
        fps=6,
        frames=60,
        clue=range(33, 36),
        probe=Probe((134, 110, 188, 180), "luma", 110.0),
        draw=phone_frame,
        start="2026-10-09 10:11:40",
        description="buyer's unboxing: the phone's screen lights up once and shows cracked glass "
        "spreading from the top-left corner, then goes dark",
    ),
    VideoSpec(
        "rccar-packing.mp4",
        fps=10,
        frames=90,
        clue=range(46, 50),
        probe=Probe((208, 70, 240, 90), "luma", 185.0),
        draw=rccar_frame,
        start="2026-09-22 15:04:31",
        description="seller's packing video: the white remote control is placed in its slot next to "
        "the car just before the lid is closed and taped",
    ),
]


def encode_video(spec: VideoSpec) -> bytes:
    return encode_clip([spec.draw(i, spec) for i in range(spec.frames)], spec.fps, crf="26", preset="medium")


# ----------------------------------------------------------------------------------------------

IMAGES: list[tuple[str, Callable[[], Image.Image], str]] = [
    (
        "phone-battery.png",
        phone_battery,
        "battery settings screenshot: level 2% 47 min after a full charge, maximum capacity 71% (degraded)",
    ),
    (
        "shipping-label.png",
        shipping_label,
        "courier label for Jiwon Park, tracking SP 4471 9023 3186 DE, 1.24 kg, stamped "
        "'DELIVERED - signed by: J. PARK' on 06.10.2026 11:42",
    ),
    (
        "shirt-torn-seam.jpg",
        shirt_torn_seam,
        "close-up of a blue shirt whose side seam is split open along the stitching, broken stitches hanging out",
    ),
    (
        "food-best-before.jpg",
        food_best_before,
        "granola bag printed 'BEST BEFORE 14.09.2026' (delivered 03.10.2026: already past)",
    ),
    (
        "courier-door.jpg",
        courier_door,
        "courier proof-of-delivery photo: parcel on the mat in front of door 14B, 08.10.2026 14:17",
    ),
    (
        "chat-screenshot.png",
        chat_screenshot,
        "marketplace chat: on 1 Oct the buyer writes the game key 'works fine'; on 5 Oct says it was 'already used'",
    ),
    (
        "order-page.png",
        order_page,
        "order page: delivered 4 Aug 2026, 'Return window closed on 3 September 2026', manufacturer warranty to 2028",
    ),
    (
        "kettle-crack.jpg",
        kettle_crack,
        "glass kettle with a crack running up from the base and a puddle of water under it",
    ),
    (
        "dispatch-photo.jpg",
        dispatch_photo,
        "seller's dispatch photo: sealed 1 kg coffee bag 'ROASTED 28.09.2026', slip 'PACKED 30.09.2026', valve intact",
    ),
    (
        "returned-dress.jpg",
        returned_dress,
        "returned dress as received by the seller: tag cut off, make-up and lipstick marks on the collar, "
        "'RETURN RCVD 12.10.2026'",
    ),
    ("rating-plate.jpg", rating_plate, "microwave rating plate: 'MODEL MW-25S', 'CAPACITY 25 L', 800 W output"),
]

MEDIA_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".mp4": "video/mp4"}


def build(out: Path) -> dict[str, dict]:
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict] = {}

    def write(name: str, data: bytes, entry: dict) -> None:
        (out / name).write_bytes(data)
        digest = hashlib.sha256(data).hexdigest()
        manifest[name] = {"sha256": digest, "bytes": len(data), "media_type": MEDIA_TYPES[Path(name).suffix], **entry}
        print(f"{out / name}  {len(data):>7} bytes  sha256 {digest}")

    for name, render, clue in IMAGES:
        image = render()
        data = encode_photo(image, MEDIA_TYPES[Path(name).suffix], quality=80)
        write(name, data, {"kind": "image", "width": image.width, "height": image.height, "clue": clue})
    for spec in VIDEOS:
        write(
            spec.name,
            encode_video(spec),
            {
                "kind": "video",
                "width": W,
                "height": H,
                "fps": spec.fps,
                "frames": spec.frames,
                "duration_s": spec.frames / spec.fps,
                "clue": spec.description,
                "clue_frames": [spec.clue.start, spec.clue.stop - 1],  # inclusive, 0-based decode order
                "clue_times_s": [spec.clue.start / spec.fps, (spec.clue.stop - 1) / spec.fps],
                "probe": spec.probe.json(),
            },
        )
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(f"{out / 'MANIFEST.json'}")
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "media", help="output folder (default: examples/media)")
    build(parser.parse_args().out)


if __name__ == "__main__":
    main()
