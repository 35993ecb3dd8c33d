"""Pixels for the synthetic benchmark: photos and short clips of a scene, with or without a clue mark.

A ``Visual`` says what a photo or clip shows: a scene (an appliance on a counter, a shirt's
fabric, a food pack, a phone's settings screen...), optionally a mark in it (a red banner on the
display, a crack in the glass, a size label...) and the text the mark carries. Rendering is pure
and seeded: the same ``Visual`` always gives the same picture (with the same Pillow: another
FreeType may anti-alias the text a little differently).

Encoding is where bytes stop being a contract. PNG is lossless, so its decoded pixels are the
rendered pixels, but its file bytes depend on the zlib build. JPEG and H.264 are lossy, and
H.264 in particular is not byte-reproducible: libx264 can encode the same frames to different
bytes on another CPU, with another build, and even twice in one process. What holds everywhere
is that the decoded picture equals the render to within compression noise, and that each mark's
``Probe`` sees it in the decoded pixels; that is what the tests check.

Every mark comes with a ``Probe``: a box and a colour, and the share of the box's pixels near that
colour that the mark reaches. The scenes are drawn so that without the mark the share is ~0, which
lets tests check that a clue is really in the pixels (and, in a clip, in which frames).
"""

from __future__ import annotations

import io
import itertools
import math
import random
from collections.abc import Callable, Iterable, Iterator
from typing import Literal

import av
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from pydantic import BaseModel, ConfigDict

from ..errors import CyberJurorsError

RGB = tuple[int, int, int]
W, H = 320, 240  # photos; clips are a (W - 2 * CROP) x (H - 2 * CROP) window that drifts by <= SHAKE px
CROP, SHAKE = 8, 2
CLIP_W, CLIP_H = W - 2 * CROP, H - 2 * CROP  # 304 x 224

RED, GREEN, AMBER, DARK = (205, 28, 32), (28, 150, 64), (240, 160, 0), (28, 26, 32)
LIPSTICK, BLUE, WHITE = (182, 26, 74), (24, 62, 160), (238, 238, 234)
SKIN, CARDBOARD = (222, 178, 146), (176, 136, 90)

Scene = Literal[
    "appliance",
    "glassware",
    "document",
    "fabric",
    "pack",
    "logger",
    "phone",
    "store",
    "door",
    "slip",
    "foam",
    "parcel",
    "receipt",
]
Mark = Literal["banner", "label", "crack", "tear", "stain", "plate", "part"]


class Visual(BaseModel):
    """What one photo or clip shows. ``label`` is the text in the mark (the clue, for text marks)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scene: Scene
    mark: Mark | None = None
    label: str = ""
    colour: RGB = RED
    title: str = ""  # neutral scene text: a brand, a page heading
    seed: int = 0


class Probe(BaseModel):
    """The clue is present when at least ``min_share`` of the box's pixels lie within ``tolerance``
    (RGB distance) of ``colour``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    box: tuple[int, int, int, int]
    colour: RGB
    tolerance: float = 60.0
    min_share: float

    def share(self, image: Image.Image) -> float:
        region = np.asarray(image.convert("RGB").crop(self.box), dtype=np.int32)
        distance = np.sqrt(((region - np.array(self.colour)) ** 2).sum(axis=-1))
        return float((distance <= self.tolerance).mean())

    def sees(self, image: Image.Image) -> bool:
        return self.share(image) >= self.min_share


# ----------------------------------------------------------------------------------------------
# drawing helpers

_FONTS: dict[int, ImageFont.FreeTypeFont | ImageFont.ImageFont] = {}


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    if size not in _FONTS:
        _FONTS[size] = ImageFont.load_default(size=size)
    return _FONTS[size]


def mottled(
    size: tuple[int, int], dark: RGB, light: RGB, rng: random.Random, grain: int = 4, stretch: tuple[int, int] = (1, 1)
) -> Image.Image:
    w = max(2, size[0] // (grain * stretch[0]) + 1)
    h = max(2, size[1] // (grain * stretch[1]) + 1)
    mask = Image.frombytes("L", (w, h), rng.randbytes(w * h)).resize(size, Image.Resampling.BILINEAR)
    return Image.composite(Image.new("RGB", size, light), Image.new("RGB", size, dark), mask)


def fitted_text(
    d: ImageDraw.ImageDraw, box: tuple[int, int, int, int], text: str, fill: RGB, largest: int = 22
) -> None:
    x0, y0, x1, y1 = box
    size = min(largest, y1 - y0 - 4)
    while size > 8 and d.textlength(text, font=font(size)) > x1 - x0 - 8:
        size -= 1
    d.text(((x0 + x1) / 2, (y0 + y1) / 2), text, font=font(size), fill=fill, anchor="mm")


def jagged(
    rng: random.Random, start: tuple[float, float], end: tuple[float, float], steps: int, wobble: float
) -> list[tuple[float, float]]:
    (x0, y0), (x1, y1) = start, end
    return (
        [start]
        + [
            (
                x0 + (x1 - x0) * i / steps + rng.uniform(-wobble, wobble),
                y0 + (y1 - y0) * i / steps + rng.uniform(-wobble, wobble),
            )
            for i in range(1, steps)
        ]
        + [end]
    )


def text_lines(d: ImageDraw.ImageDraw, x: int, y: int, widths: list[int], fill: RGB, step: int = 12) -> None:
    """Greeked print: bars standing in for lines of small text."""
    for k, width in enumerate(widths):
        d.rectangle((x, y + k * step, x + width, y + k * step + 4), fill=fill)


def backdrop(
    rng: random.Random, wall: RGB, top_dark: RGB, top_light: RGB, horizon: int = 170, size: tuple[int, int] = (W, H)
) -> Image.Image:
    """A plain wall above ``horizon`` and a grained table top below it."""
    im = Image.new("RGB", size, wall)
    im.paste(mottled((size[0], size[1] - horizon), top_dark, top_light, rng, grain=3, stretch=(8, 1)), (0, horizon))
    return im


# ----------------------------------------------------------------------------------------------
# scenes: each draws the neutral picture and returns the area a mark may occupy

Box = tuple[int, int, int, int]


def scene_appliance(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = backdrop(rng, (206, 200, 188), (118, 84, 54), (146, 106, 72))
    d = ImageDraw.Draw(im)
    body = rng.choice([(38, 38, 42), (62, 64, 68), (214, 214, 210)])
    d.rounded_rectangle((78, 36, 244, 196), radius=16, fill=body)
    d.rounded_rectangle((92, 120, 230, 188), radius=10, fill=tuple(max(0, c - 14) for c in body))
    d.ellipse((146, 132, 176, 162), fill=(120, 120, 124), outline=(90, 90, 94), width=2)
    d.rectangle((88, 54, 234, 98), fill=(18, 20, 22))
    d.text((161, 76), "- -:- -", font=font(14), fill=(70, 72, 76), anchor="mm")
    d.text((161, 110), title[:18], font=font(10), fill=(150, 150, 150), anchor="mm")
    d.line((244, 170, 300, 192), fill=(20, 20, 20), width=3)
    return im, (90, 56, 232, 96)


def scene_glassware(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = backdrop(rng, (214, 210, 200), (170, 166, 160), (196, 192, 186), horizon=176)
    d = ImageDraw.Draw(im)
    d.polygon([(104, 34), (214, 34), (226, 180), (92, 180)], fill=(198, 214, 224))
    d.polygon([(112, 40), (124, 40), (116, 176), (104, 176)], fill=(228, 236, 242))  # highlight
    d.arc((206, 60, 262, 150), 270, 90, fill=(150, 160, 168), width=8)  # handle
    d.rounded_rectangle((86, 178, 232, 198), radius=6, fill=(44, 44, 48))  # base
    d.text((160, 188), title[:20], font=font(9), fill=(150, 150, 150), anchor="mm")
    return im, (126, 52, 204, 160)


def scene_document(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = mottled((W, H), (150, 150, 146), (176, 176, 170), rng, grain=5)
    d = ImageDraw.Draw(im)
    d.rectangle((36, 20, 284, 232), fill=(248, 246, 240))
    d.rectangle((36, 20, 284, 40), fill=(34, 34, 36))
    d.text((44, 24), title[:28] or "DELIVERY RECEIPT", font=font(12), fill=(255, 255, 255))
    text_lines(d, 48, 52, [rng.randint(90, 200) for _ in range(5)], (90, 90, 92))
    for k in range(18):  # barcode
        d.rectangle((52 + k * 7, 196, 52 + k * 7 + rng.randint(1, 4), 222), fill=(20, 20, 20))
    d.line((190, 216, 270, 210), fill=(40, 40, 120), width=2)  # signature
    return im, (64, 118, 256, 164)


def scene_fabric(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    tint = rng.choice([(176, 198, 226), (222, 210, 186), (206, 206, 210), (232, 206, 206), (196, 220, 200)])
    light = (min(255, tint[0] + 18), min(255, tint[1] + 18), min(255, tint[2] + 18))
    im = mottled((W, H), tint, light, rng, grain=2)
    d = ImageDraw.Draw(im)
    weave = tuple(c - 10 for c in tint)
    for y in range(0, H, 3):
        d.line((0, y, W, y), fill=weave)
    d.rectangle((150, 0, 176, H), fill=tuple(c - 6 for c in tint))
    d.line((150, 0, 150, H), fill=tuple(c - 40 for c in tint), width=2)
    for x in (156, 170):
        for y in range(0, H, 12):
            d.line((x, y, x, y + 7), fill=(244, 244, 246), width=2)
    return im, (96, 40, 232, 172)


def scene_pack(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = mottled((W, H), (150, 150, 146), (178, 178, 172), rng, grain=5)
    d = ImageDraw.Draw(im)
    colour = rng.choice([(196, 160, 110), (236, 232, 220), (170, 196, 160)])
    d.polygon([(84, 18), (236, 18), (250, 230), (70, 230)], fill=colour)
    d.rectangle((84, 18, 236, 34), fill=tuple(c - 30 for c in colour))
    d.text((160, 62), (title or "ORGANIC")[:16].upper(), font=font(15), fill=(60, 40, 24), anchor="mm")
    text_lines(d, 108, 84, [100, 80, 94], (110, 90, 70), step=10)
    text_lines(d, 108, 178, [104, 70, 90, 60], (110, 90, 70), step=10)
    return im, (92, 124, 228, 164)


def scene_logger(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = backdrop(rng, (200, 204, 208), (226, 226, 228), (240, 240, 240), horizon=120)
    d = ImageDraw.Draw(im)
    d.rounded_rectangle((80, 40, 240, 190), radius=14, fill=(236, 236, 232), outline=(150, 150, 150), width=2)
    d.rectangle((100, 60, 220, 116), fill=(168, 178, 158))
    d.text((160, 88), "LOG", font=font(13), fill=(120, 128, 112), anchor="mm")
    d.text((160, 134), "TEMP LOGGER  TL-20", font=font(10), fill=(80, 80, 80), anchor="mm")
    d.ellipse((148, 150, 172, 174), fill=(180, 180, 184))
    return im, (102, 62, 218, 114)


def scene_phone(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = Image.new("RGB", (W, H), (242, 242, 247))
    d = ImageDraw.Draw(im)
    d.text((20, 26), "< Settings", font=font(12), fill=(0, 122, 255))
    d.text((20, 44), title[:24] or "Battery", font=font(20), fill=(0, 0, 0))
    for y0 in (76, 124, 176):
        d.rounded_rectangle((14, y0, W - 14, y0 + 40), radius=8, fill=(255, 255, 255))
    text_lines(d, 28, 86, [120, 180], (150, 150, 156), step=14)
    text_lines(d, 28, 186, [140, 90], (150, 150, 156), step=14)
    return im, (24, 128, W - 24, 160)


def scene_store(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = Image.new("RGB", (W, H), (252, 252, 252))
    d = ImageDraw.Draw(im)
    d.rectangle((0, 0, W, 40), fill=(222, 224, 228))
    d.rounded_rectangle((40, 24, W - 20, 36), radius=5, fill=(255, 255, 255))
    d.text((48, 24), "store.example/redeem", font=font(9), fill=(90, 90, 90))
    d.text((24, 52), (title or "Redeem a code")[:30], font=font(14), fill=(20, 20, 20))
    d.rectangle((24, 76, 230, 96), outline=(160, 160, 160))
    text_lines(d, 30, 84, [130], (120, 120, 120))
    text_lines(d, 24, 170, [220, 180, 200], (190, 190, 194))
    return im, (24, 112, W - 24, 156)


def scene_door(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = mottled((W, H), (206, 196, 176), (222, 214, 196), rng, grain=4)
    d = ImageDraw.Draw(im)
    d.rectangle((96, 26, 216, 206), fill=(118, 80, 50), outline=(86, 58, 36), width=3)
    d.ellipse((194, 116, 204, 126), fill=(200, 190, 140))
    d.rectangle((84, 206, 228, 222), fill=(62, 56, 50))  # mat
    d.rectangle((116, 178, 176, 208), fill=CARDBOARD, outline=(140, 104, 64))  # the parcel
    d.rectangle((0, 222, W, H), fill=(150, 150, 150))
    return im, (220, 56, 306, 92)


def scene_slip(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = mottled((W, H), (150, 112, 72), (176, 136, 90), rng, grain=4)
    d = ImageDraw.Draw(im)
    d.rectangle((20, 14, 300, 226), outline=(130, 96, 60), width=6)
    d.polygon([(62, 30), (262, 24), (268, 190), (58, 196)], fill=(250, 250, 246))
    d.text((76, 38), "PACKING SLIP", font=font(13), fill=(20, 20, 20))
    text_lines(d, 78, 60, [150, 120, 160], (80, 80, 80), step=11)
    text_lines(d, 78, 152, [140, 100], (80, 80, 80), step=11)
    return im, (76, 98, 250, 138)


def scene_foam(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = mottled((W, H), (150, 112, 72), (176, 136, 90), rng, grain=4)
    d = ImageDraw.Draw(im)
    d.rectangle((30, 26, 290, 206), fill=(62, 62, 68))
    d.rounded_rectangle((44, 40, 186, 192), radius=10, fill=(38, 38, 42))
    d.rounded_rectangle((204, 44, 276, 188), radius=10, fill=(38, 38, 42))
    item = rng.choice([(196, 32, 36), (40, 40, 120), (230, 160, 30)])
    d.rounded_rectangle((58, 56, 172, 176), radius=18, fill=item)
    d.rectangle((80, 90, 150, 130), fill=(30, 30, 40))
    return im, (208, 48, 272, 184)


def scene_parcel(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = backdrop(rng, (196, 196, 200), (120, 120, 124), (140, 140, 144), horizon=180)
    d = ImageDraw.Draw(im)
    d.polygon([(70, 80), (230, 64), (262, 96), (104, 114)], fill=(196, 156, 108))  # lid
    d.polygon([(70, 80), (104, 114), (104, 212), (70, 184)], fill=(150, 112, 72))
    d.polygon([(104, 114), (262, 96), (262, 196), (104, 212)], fill=CARDBOARD)
    d.line((150, 72, 184, 106), fill=(200, 180, 140), width=10)  # tape
    d.rectangle((160, 128, 240, 176), fill=(250, 250, 250))
    text_lines(d, 166, 134, [60, 40, 52], (40, 40, 40), step=10)
    return im, (0, 0, 0, 0)


def scene_receipt(rng: random.Random, title: str) -> tuple[Image.Image, Box]:
    im = mottled((W, H), (90, 70, 56), (112, 88, 70), rng, grain=4)
    d = ImageDraw.Draw(im)
    d.rectangle((96, 10, 224, 236), fill=(250, 250, 248))
    d.text((160, 24), (title or "RECEIPT")[:16].upper(), font=font(11), fill=(20, 20, 20), anchor="mm")
    text_lines(d, 106, 40, [rng.randint(50, 100) for _ in range(12)], (70, 70, 70), step=12)
    d.rectangle((150, 196, 214, 202), fill=(20, 20, 20))
    return im, (0, 0, 0, 0)


SCENES: dict[str, Callable[[random.Random, str], tuple[Image.Image, Box]]] = {
    name.removeprefix("scene_"): fn for name, fn in globals().items() if name.startswith("scene_")
}


# ----------------------------------------------------------------------------------------------
# marks: each draws into the scene's area and returns the probe for it


def mark_banner(d: ImageDraw.ImageDraw, area: Box, v: Visual, rng: random.Random) -> Probe:
    d.rectangle(area, fill=v.colour)
    ink = (0, 0, 0) if sum(v.colour) > 380 else (255, 255, 255)
    fitted_text(d, area, v.label, ink)
    return Probe(box=area, colour=v.colour, min_share=0.35)


def mark_label(d: ImageDraw.ImageDraw, area: Box, v: Visual, rng: random.Random) -> Probe:
    """A woven size label sewn next to the seam."""
    x0, y0, _x1, _y1 = area
    box = (x0 + 8, y0 + 30, x0 + 50, y0 + 62)
    d.rectangle(box, fill=v.colour)
    fitted_text(d, box, v.label, (255, 255, 255), largest=14)
    return Probe(box=box, colour=v.colour, min_share=0.35)


def mark_plate(d: ImageDraw.ImageDraw, area: Box, v: Visual, rng: random.Random) -> Probe:
    d.rounded_rectangle(area, radius=6, fill=v.colour, outline=(255, 255, 255), width=2)
    fitted_text(d, area, v.label, (255, 255, 255), largest=26)
    return Probe(box=area, colour=v.colour, min_share=0.35)


def mark_crack(d: ImageDraw.ImageDraw, area: Box, v: Visual, rng: random.Random) -> Probe:
    x0, y0, x1, y1 = area
    origin = (x0 + rng.uniform(4, 20), y0 + rng.uniform(4, 20))
    for _ in range(6):
        end = (rng.uniform(x0 + 20, x1 - 2), rng.uniform(y0 + 30, y1 - 2))
        d.line(jagged(rng, origin, end, 7, 4), fill=v.colour, width=3)
    return Probe(box=area, colour=v.colour, min_share=0.03)


def mark_tear(d: ImageDraw.ImageDraw, area: Box, v: Visual, rng: random.Random) -> Probe:
    x0, y0, x1, y1 = area
    seam, top, bottom = (x0 + x1) // 2, y0 + 20, y1 - 20
    left = jagged(rng, (seam - 4, top), (seam - 6, bottom), 10, 3)
    right = [
        (seam + 4 + 16 * math.sin(math.pi * i / 10) + rng.uniform(-2, 2), y)
        for i, (_, y) in enumerate(jagged(rng, (seam + 4, top), (seam + 6, bottom), 10, 3))
    ]
    d.polygon(left + right[::-1], fill=v.colour)
    for x, y in left[1:-1]:  # frayed threads
        a = rng.uniform(0, 2 * math.pi)
        d.line((x, y, x + 8 * math.cos(a), y + 8 * math.sin(a)), fill=(236, 236, 240), width=1)
    return Probe(box=(seam - 8, top + 10, seam + 14, bottom - 10), colour=v.colour, min_share=0.3)


def mark_stain(d: ImageDraw.ImageDraw, area: Box, v: Visual, rng: random.Random) -> Probe:
    x0, y0, _x1, _y1 = area
    box = (x0 + 10, y0 + 10, x0 + 70, y0 + 60)
    for _ in range(10):
        x, y = rng.uniform(box[0], box[2] - 14), rng.uniform(box[1], box[3] - 10)
        d.ellipse((x, y, x + rng.uniform(12, 24), y + rng.uniform(8, 14)), fill=v.colour)
    return Probe(box=box, colour=v.colour, min_share=0.15)


def mark_part(d: ImageDraw.ImageDraw, area: Box, v: Visual, rng: random.Random) -> Probe:
    x0, y0, x1, y1 = area
    d.rounded_rectangle((x0 + 4, y0 + 6, x1 - 4, y1 - 6), radius=10, fill=v.colour)
    cx = (x0 + x1) // 2
    d.ellipse((cx - 12, y0 + 36, cx + 12, y0 + 60), fill=(150, 150, 156))
    d.rectangle((cx - 4, y1 - 44, cx + 4, y1 - 20), fill=(150, 150, 156))
    return Probe(box=(x0 + 8, y0 + 10, x1 - 8, y1 - 10), colour=v.colour, min_share=0.4)


MARKS = {name.removeprefix("mark_"): fn for name, fn in globals().items() if name.startswith("mark_")}


# ----------------------------------------------------------------------------------------------
# rendering and encoding


def compose(v: Visual) -> tuple[Image.Image, Image.Image, Probe | None]:
    """(neutral picture, picture with the mark, probe). Without a mark both pictures are the same."""
    rng = random.Random(v.seed)
    neutral, area = SCENES[v.scene](rng, v.title)
    if v.mark is None:
        return neutral, neutral, None
    marked = neutral.copy()
    probe = MARKS[v.mark](ImageDraw.Draw(marked), area, v, random.Random(v.seed + 1))
    return neutral, marked, probe


def render_still(v: Visual, clue: bool = True) -> Image.Image:
    neutral, marked, _ = compose(v)
    return marked if clue else neutral


def still_probe(v: Visual) -> Probe | None:
    return compose(v)[2]


def clip_probe(v: Visual) -> Probe | None:
    """The still's probe moved into clip coordinates and shrunk by the camera drift."""
    probe = still_probe(v)
    if probe is None:
        return None
    x0, y0, x1, y1 = probe.box  # scene x maps to clip x - CROP - dx with |dx| <= SHAKE
    return probe.model_copy(
        update={"box": (x0 - CROP + SHAKE, y0 - CROP + SHAKE, x1 - CROP - SHAKE, y1 - CROP - SHAKE)}
    )


def encode_photo(image: Image.Image, media_type: str, quality: int = 85) -> bytes:
    out = io.BytesIO()
    if media_type == "image/png":
        image.save(out, "PNG", optimize=True)
    else:
        image.save(out, "JPEG", quality=quality, optimize=True)
    return out.getvalue()


def drift(i: int, seed: int) -> tuple[int, int]:
    """Hand-held camera drift, at most SHAKE px each way."""
    return round(SHAKE * math.sin(i * 0.7 + seed)), round(SHAKE * math.cos(i * 0.45 + 2 * seed))


def handheld(im: Image.Image, i: int, seed: int, margin: int = CROP, pan: tuple[int, int] = (0, 0)) -> Image.Image:
    """Frame ``i`` as a hand-held camera sees the scene: the picture less ``margin`` px each way,
    moved by the camera's drift (and ``pan``); a scene is drawn ``margin`` px larger to allow for it."""
    dx, dy = drift(i, seed)
    x, y = margin + dx + pan[0], margin + dy + pan[1]
    return im.crop((x, y, x + im.width - 2 * margin, y + im.height - 2 * margin))


def rec_overlay(im: Image.Image, i: int, fps: int, start: str) -> None:
    """A camera's REC bar across the top of frame ``i``: a blinking dot, when the clip began, the time since."""
    d = ImageDraw.Draw(im)
    d.rectangle((0, 0, im.width, 13), fill=(0, 0, 0))
    d.ellipse((4, 3, 10, 9), fill=(230, 40, 40) if i % 6 < 4 else (60, 0, 0))
    d.text((16, 1), f"REC {start}", font=font(10), fill=(255, 255, 255))
    d.text((im.width - 4, 1), f"{i / fps:04.1f}s", font=font(10), fill=(200, 200, 200), anchor="ra")


def clip_frames(v: Visual, frames: int, fps: int, clue: range, start: str) -> list[Image.Image]:
    """A hand-held clip of the scene: the mark shows only in the ``clue`` frames (the display
    flashes, the jug turns, the camera passes the label); a hand moves along the bottom edge."""
    neutral, marked, _ = compose(v)
    rng = random.Random(v.seed + 2)
    hand_from, hand_len = rng.randint(0, frames // 2), rng.randint(8, 16)
    leftwards = rng.random() < 0.5
    out = []
    for i in range(frames):
        im = (marked if i in clue else neutral).copy()
        d = ImageDraw.Draw(im)
        if hand_from <= i < hand_from + hand_len:
            t = (i - hand_from) / hand_len
            x = int((W + 10) * (1 - t) - 60) if leftwards else int((W + 10) * t - 60)
            d.rounded_rectangle((x, 204, x + 70, 230), radius=12, fill=SKIN)
        im = handheld(im, i, v.seed % 7)
        rec_overlay(im, i, fps, start)
        out.append(im)
    return out


# ----------------------------------------------------------------------------------------------
# long clips: shots, cuts, pans and sensor noise around a clue that lasts a few frames

ZOOM = 1.5  # cutaways are drawn at this scale, so the camera can pan across them
NOISE_SD, NOISE_FIELDS = 3.0, 8  # sensor noise, in levels; a few fields drawn once, shuffled per frame
CUTAWAYS: tuple[Scene, ...] = ("parcel", "receipt", "slip", "door", "document")


class Shot(BaseModel):
    """Frames [start, end) of a long clip: the clip's own scene (``main``: hand-held, the mark
    shows only in the clue frames) or a cutaway panned across from ``pan[:2]`` to ``pan[2:]``
    (the window's top-left corner on the cutaway drawn at ``ZOOM``; main shots ignore it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: int
    end: int
    main: bool
    visual: Visual
    pan: tuple[int, int, int, int] = (0, 0, 0, 0)


def plan_shots(v: Visual, frames: int, fps: int, clue: range) -> list[Shot]:
    """A few cuts (2 to 6, about one per 150 frames), none within a second of the clue, with a
    cutaway shot on each side of the shot that holds it; main shots and cutaways alternate.
    Seeded by the visual and the clue, so the plant's record is enough to draw the clip again."""
    rng = random.Random(f"{v.seed}/{frames}/{fps}/{clue.start}/{clue.stop}")
    cuts = _cuts(rng, frames, fps, clue)
    bounds = [0, *cuts, frames]
    holder = next((k for k in range(len(bounds) - 1) if bounds[k] <= clue.start < bounds[k + 1]), 0)
    probe = clip_probe(v)
    shots = []
    for k in range(len(bounds) - 1):
        start, end = bounds[k], bounds[k + 1]
        if (k - holder) % 2 == 0:
            shots.append(Shot(start=start, end=end, main=True, visual=v))
            continue
        shots.append(_cutaway(rng, v, probe, start, end))
    return shots


def _cuts(rng: random.Random, frames: int, fps: int, clue: range) -> list[int]:
    """Cut positions: at least ``shortest`` frames apart and from either end, none within ``fps``
    frames (a second) of the clue; one before and one after it whenever there is room."""
    shortest = max(10, fps)
    wanted = max(2, min(6, frames // 150 + rng.randint(-1, 1)))
    allowed = [
        c for c in range(shortest, frames - shortest + 1) if not clue or not clue.start - fps < c < clue.stop + fps
    ]
    chosen: list[int] = []

    def take(pool: list[int], n: int) -> None:
        for c in rng.sample(pool, len(pool)):
            if len(chosen) >= wanted or n == 0:
                return
            if all(abs(c - x) >= shortest for x in chosen):
                chosen.append(c)
                n -= 1

    if clue:
        take([c for c in allowed if c <= clue.start], 1)
        take([c for c in allowed if c >= clue.stop], 1)
    take(allowed, wanted)
    return sorted(chosen)


def _cutaway(rng: random.Random, v: Visual, probe: Probe | None, start: int, end: int) -> Shot:
    """A cutaway whose pan never brings anything like the clue's colour into the probe's box
    (a white receipt would pass for a white part): the first such scene of a seeded order."""
    span_x, span_y = round(W * ZOOM) - CLIP_W, round(H * ZOOM) - CLIP_H
    for scene in [*rng.sample(CUTAWAYS, len(CUTAWAYS)), v.scene]:  # last: the scene itself, from further back
        visual = Visual(scene=scene, title=v.title, seed=rng.randrange(2**31))
        pan = (
            rng.randrange(span_x + 1),
            rng.randrange(span_y + 1),
            rng.randrange(span_x + 1),
            rng.randrange(span_y + 1),
        )
        shot = Shot(start=start, end=end, main=False, visual=visual, pan=pan)
        if probe is None:
            return shot
        canvas = _canvas(visual)
        if all(probe.share(_cutaway_window(shot, canvas, i)) < 0.1 * probe.min_share for i in range(start, end)):
            return shot
    raise CyberJurorsError(f"no cutaway keeps the probe of {v.scene}/{v.mark} dark", kind="bad_synth_options")


def _canvas(v: Visual) -> Image.Image:
    still = compose(v)[0]
    return still.resize((round(W * ZOOM), round(H * ZOOM)), Image.Resampling.BILINEAR)


def _cutaway_window(shot: Shot, canvas: Image.Image, i: int) -> Image.Image:
    t = (i - shot.start) / max(1, shot.end - shot.start - 1)
    t = t * t * (3 - 2 * t)  # eased: the pan starts and stops smoothly
    x0, y0, x1, y1 = shot.pan
    x, y = round(x0 + (x1 - x0) * t), round(y0 + (y1 - y0) * t)
    return canvas.crop((x, y, x + CLIP_W, y + CLIP_H))


def _settle(shot: Shot, i: int, fps: int, rng_seed: int) -> tuple[int, int]:
    """A main shot's pan: the camera swings in over its first second and away over its last,
    up to CROP - SHAKE px, and holds still (hand-held drift only) in between."""
    rng = random.Random(f"{rng_seed}/{shot.start}")
    enter = (rng.randint(-CROP + SHAKE, CROP - SHAKE), rng.randint(-CROP + SHAKE, CROP - SHAKE))
    leave = (rng.randint(-CROP + SHAKE, CROP - SHAKE), rng.randint(-CROP + SHAKE, CROP - SHAKE))
    ramp = max(1, min(fps, (shot.end - shot.start) // 3))
    into, out_of = (i - shot.start) / ramp, (shot.end - 1 - i) / ramp
    if into < 1:
        return round(enter[0] * (1 - into)), round(enter[1] * (1 - into))
    if out_of < 1:
        return round(leave[0] * (1 - out_of)), round(leave[1] * (1 - out_of))
    return 0, 0


def shot_clip_frames(v: Visual, frames: int, fps: int, clue: range, start: str) -> Iterator[Image.Image]:
    """A long clip, one frame at a time: the shots of ``plan_shots``, sensor noise on every frame,
    a hand crossing the bottom edge once in each main shot, the REC overlay. The mark shows only
    in the ``clue`` frames, which lie in a main shot where the camera holds (drift of SHAKE px), so
    ``clip_probe`` finds it there and nowhere else."""
    shots = plan_shots(v, frames, fps, clue)
    neutral, marked, _ = compose(v)
    canvases = {id(s): _canvas(s.visual) for s in shots if not s.main}
    noise_rng = np.random.default_rng(v.seed)
    fields = noise_rng.normal(0, NOISE_SD, (NOISE_FIELDS, CLIP_H, CLIP_W, 3)).round().astype(np.int16)
    order = random.Random(v.seed + 5)
    hands = {
        id(s): (order.randint(s.start, max(s.start, s.end - 16)), order.randint(8, 16), order.random() < 0.5)
        for s in shots
        if s.main
    }
    for shot in shots:
        for i in range(shot.start, shot.end):
            if shot.main:
                im = _main_frame(marked if i in clue else neutral, shot, i, fps, v.seed, hands[id(shot)])
            else:
                im = _cutaway_window(shot, canvases[id(shot)], i)
            rec_overlay(im, i, fps, start)
            noisy = np.asarray(im, dtype=np.int16) + fields[order.randrange(NOISE_FIELDS)]
            yield Image.fromarray(noisy.clip(0, 255).astype(np.uint8))


def _main_frame(base: Image.Image, shot: Shot, i: int, fps: int, seed: int, hand: tuple[int, int, bool]) -> Image.Image:
    im = base.copy()
    hand_from, hand_len, leftwards = hand
    if hand_from <= i < hand_from + hand_len:
        t = (i - hand_from) / hand_len
        x = int((W + 10) * (1 - t) - 60) if leftwards else int((W + 10) * t - 60)
        ImageDraw.Draw(im).rounded_rectangle((x, 204, x + 70, 230), radius=12, fill=SKIN)
    return handheld(im, i, seed % 7, pan=_settle(shot, i, fps, seed))


def encode_clip(
    images: Iterable[Image.Image], fps: int, crf: str = "24", preset: str = "veryfast", gop: int | None = None
) -> bytes:
    """H.264 (libx264, one thread; MPEG-4 Part 2 where PyAV has no libx264) in MP4. The example
    media (examples/make_media.py) are encoded here too.

    Lossy, and not byte-reproducible: the same frames can give different bytes on another CPU,
    with another FFmpeg/x264 build, and even twice in one process (seen with libx264's assembly
    code and macroblock-tree rate control, one thread and bit-exact flags notwithstanding). What
    is reproducible is the decoded picture, to within compression noise: tests compare decoded
    frames and probe their pixels, never the bytes. The bitexact flags only keep FFmpeg's version
    strings out of the file (the codec's is set as an option: PyAV 13 has no enum member for it).
    ``images`` may be a generator (a long clip is never held whole); ``gop`` is the longest
    distance between keyframes (FFmpeg's default of 12 when not given)."""
    frames = iter(images)
    first = next(frames)
    out = io.BytesIO()
    with av.open(out, "w", format="mp4", options={"fflags": "+bitexact"}) as container:
        codec: Literal["libx264", "mpeg4"] = "libx264" if "libx264" in av.codecs_available else "mpeg4"
        options = {"threads": "1", "flags": "+bitexact"}
        if codec == "libx264":
            options.update(crf=crf, preset=preset)
        stream = container.add_stream(codec, rate=fps, options=options)
        stream.width, stream.height = first.size
        stream.pix_fmt = "yuv420p"
        if gop is not None:
            stream.codec_context.gop_size = gop
        for i, image in enumerate(itertools.chain([first], frames)):
            frame = av.VideoFrame.from_image(image).reformat(format="yuv420p")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return out.getvalue()


def decode_clip(data: bytes) -> list[Image.Image]:
    with av.open(io.BytesIO(data), "r") as container:
        return [frame.to_image() for frame in container.decode(video=0)]


def difference(a: Image.Image, b: Image.Image, block: int = 16) -> tuple[float, float]:
    """How far apart two pictures of one size are, in 0-255 levels: the mean absolute difference
    over all pixels and channels, and the largest such mean over any ``block`` x ``block`` tile
    (edge tiles may be smaller). The tile figure is what catches a small mark that is missing or
    has moved, which a whole-picture mean would average away; compression noise stays low in both."""
    if a.size != b.size:
        raise ValueError(f"sizes differ: {a.size} != {b.size}")
    d = np.abs(np.asarray(a.convert("RGB"), dtype=np.int16) - np.asarray(b.convert("RGB"), dtype=np.int16))
    d = d.sum(axis=-1, dtype=np.int64)
    rows, cols = np.arange(0, d.shape[0], block), np.arange(0, d.shape[1], block)
    sums = np.add.reduceat(np.add.reduceat(d, rows, axis=0), cols, axis=1)
    counts = np.outer(np.diff(np.append(rows, d.shape[0])), np.diff(np.append(cols, d.shape[1]))) * 3
    return float(d.mean() / 3), float((sums / counts).max())
