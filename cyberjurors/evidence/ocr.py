"""Text in photos and video frames (issue 39): read by Tesseract, personal data boxed out before any model
sees the image, the text read, masked, given to the models that read captions only.

With ``privacy.ocr`` on, each photo and each sampled frame, as the model would receive it, is read by
Debian's Tesseract (``tesseract - - tsv``: every word with its box, in a subprocess bounded by
``privacy.ocr_timeout_s``). The words are joined line by line into one text, and that text is searched
by the same detectors and the same masking as the party's text (``privacy.mask_read_text``): the
values the case holds are found as the case writes them too, and what ``privacy.keep_patterns``
keeps (an order number) stays readable. Every word a value touches is filled with black, with a
margin, and the picture is encoded again; the text read, each value replaced by the case's
placeholder (or its kind in words, for a value the case's text does not hold), is what a model
that reads no images gets in the item's caption.

It never sends less safely than it was asked to: an image that cannot be read this way (Tesseract
missing, over its time, failing, a detector failing) is withheld, as unreadable media is
(``MediaUnreadable``: noted on the clue and in the verdict's problems), never sent as it was.

Each image is read once per process and case masking: the result is kept by the image's digest,
so the jurors of a case and its stages that show the same photo share one reading.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import os
import shutil
import subprocess
from collections import OrderedDict
from dataclasses import dataclass, replace

from PIL import Image, ImageDraw

from ..config import Settings
from ..llm.port import ImagePart
from ..schemas import DisputeCase
from .detectors import Span
from .media import MediaUnreadable, decoding
from .privacy import mask_read_text, masking_of, readable

TESSERACT = "tesseract"
# Tesseract reads text best at about 30 pixels a line: a model's image (max_image_side, 768 by
# default) is read at twice its size when its longest side is under this
_UPSCALE_BELOW = 1200
_MARGIN = 3  # pixels around each word boxed out: anti-aliased edges of a glyph stay legible otherwise
MAX_CAPTION_CHARS = 600  # of the text read in one item, in its caption
CACHED = 256


@dataclass(frozen=True)
class Word:
    text: str
    box: tuple[int, int, int, int]  # left, top, right, bottom, in the image's pixels
    line: tuple[int, int, int, int]  # Tesseract's page, block, paragraph and line numbers


@dataclass(frozen=True)
class Read:
    """One image as the model receives it: boxed out where its text holds personal data, and the
    text read in it, masked."""

    image: ImagePart
    text: str
    boxed: int


def unavailable() -> str | None:
    """Why Tesseract cannot be run here, or None: what withholds every image while ``privacy.ocr`` is on."""
    if shutil.which(TESSERACT) is None:
        return (
            "privacy.ocr is on and tesseract is not installed (Debian: apt-get install tesseract-ocr): "
            "the image is withheld rather than sent with its text unread"
        )
    return None


def words(image: Image.Image, timeout_s: float) -> list[Word]:
    """The words Tesseract reads in the image, with their boxes (in the image's pixels)."""
    reason = unavailable()
    if reason is not None:
        raise MediaUnreadable("ocr_unavailable", reason)
    scale = 2 if max(image.size) < _UPSCALE_BELOW else 1
    shown = image.convert("L")
    if scale > 1:
        shown = shown.resize((image.width * scale, image.height * scale), Image.Resampling.LANCZOS)
    png = io.BytesIO()
    shown.save(png, "PNG", compress_level=1)
    try:
        done = subprocess.run(
            [TESSERACT, "-", "-", "-l", "eng", "tsv"],
            input=png.getvalue(),
            capture_output=True,
            timeout=timeout_s,
            check=False,
            # one thread: the decode pool bounds how many images are read at once, and OpenMP's
            # threads on top of it would only fight over the same cores
            env={**os.environ, "OMP_THREAD_LIMIT": "1"},
        )
    except subprocess.TimeoutExpired as err:
        raise MediaUnreadable(
            "ocr_timeout", f"tesseract took over {timeout_s}s (privacy.ocr_timeout_s): the image is withheld"
        ) from err
    except OSError as err:  # found by which() but not runnable
        raise MediaUnreadable(
            "ocr_unavailable", f"tesseract could not be run ({err.strerror}): the image is withheld"
        ) from err
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
        raise MediaUnreadable("ocr_failed", f"tesseract failed ({said[0]}): the image is withheld")
    return _parsed(done.stdout.decode(errors="replace"), scale)


def _parsed(tsv: str, scale: int) -> list[Word]:
    found = []
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        text = (row.get("text") or "").strip()
        if row.get("level") != "5" or not text:
            continue
        left, top, width, height = (int(row[k]) // scale for k in ("left", "top", "width", "height"))
        line = (int(row["page_num"]), int(row["block_num"]), int(row["par_num"]), int(row["line_num"]))
        found.append(Word(readable(text), (left, top, left + max(width, 1), top + max(height, 1)), line))
    return found


def joined(found: list[Word]) -> tuple[str, list[tuple[int, int]]]:
    """The words as one text, a line of the image a line of the text, and each word's (start, end) in it."""
    parts: list[str] = []
    where: list[tuple[int, int]] = []
    at = 0
    for i, word in enumerate(found):
        if i:
            sep = " " if word.line == found[i - 1].line else "\n"
            parts.append(sep)
            at += 1
        parts.append(word.text)
        where.append((at, at + len(word.text)))
        at += len(word.text)
    return "".join(parts), where


def boxed_out(image: Image.Image, boxes: list[tuple[int, int, int, int]]) -> Image.Image:
    out = image.convert("RGB")
    draw = ImageDraw.Draw(out)
    for left, top, right, bottom in boxes:
        draw.rectangle((left - _MARGIN, top - _MARGIN, right + _MARGIN, bottom + _MARGIN), fill=(0, 0, 0))
    return out


def redact(part: ImagePart, view: DisputeCase, settings: Settings) -> Read:
    """The image with every word that holds personal data boxed out, and its text masked."""
    with Image.open(io.BytesIO(part.data)) as opened:
        image = opened.convert("RGB")
    found = words(image, settings.privacy.ocr_timeout_s)
    text, where = joined(found)
    try:
        spans, masked = mask_read_text(text, view, settings)
    except Exception as err:  # a detector failing on what an image says withholds that image only
        raise MediaUnreadable("ocr_failed", f"its text could not be checked for personal data: {err!r}") from err
    boxes = [w.box for w, (start, end) in zip(found, where, strict=True) if _touched(start, end, spans)]
    if not boxes:
        return Read(part, masked, 0)
    out = io.BytesIO()
    boxed_out(image, boxes).save(out, "JPEG", quality=85)
    return Read(replace(part, data=out.getvalue(), media_type="image/jpeg"), masked, len(boxes))


def _touched(start: int, end: int, spans: list[Span]) -> bool:
    return any(start < s.end and s.start < end for s in spans)


class _Reads:
    """The images read in this process, by their digest and the case's masking; an image being read
    is awaited by whoever else asks for it meanwhile (the jurors of a case ask at once)."""

    def __init__(self, size: int = CACHED):
        self.size = size
        self.done: OrderedDict[tuple[str, ...], Read] = OrderedDict()
        self.reading: dict[tuple[str, ...], asyncio.Future[Read]] = {}

    async def get(self, part: ImagePart, view: DisputeCase, settings: Settings) -> Read:
        key = _key(part, view, settings)
        if key in self.done:
            self.done.move_to_end(key)
            return _labelled(self.done[key], part)
        pending = self.reading.get(key)
        if pending is not None and pending.get_loop() is asyncio.get_running_loop():
            return _labelled(await asyncio.shield(pending), part)
        future: asyncio.Future[Read] = asyncio.get_running_loop().create_future()
        self.reading[key] = future
        try:
            result = await decoding(settings, redact, part, view, settings)
        except BaseException as err:
            future.set_exception(err)
            future.exception()  # retrieved: a failure nobody else awaited is not "never retrieved"
            raise
        finally:
            self.reading.pop(key, None)
        future.set_result(result)
        self.done[key] = result
        if len(self.done) > self.size:
            self.done.popitem(last=False)
        return _labelled(result, part)


def _labelled(read: Read, part: ImagePart) -> Read:
    """The reading with this part's label and caption (the same photo may be two items' evidence)."""
    return replace(read, image=replace(read.image, label=part.label, caption=part.caption))


def _key(part: ImagePart, view: DisputeCase, settings: Settings) -> tuple[str, ...]:
    done = masking_of(view)
    known = (
        repr((sorted(done.keys.items()), sorted((p, sorted(v.written.items())) for p, v in done.values.items())))
        if done
        else ""
    )
    context = repr(
        (
            known,
            view.metadata.locale,
            view.metadata.buyer_locale,
            view.metadata.seller_locale,
            view.metadata.currency,
            settings.privacy.mask,
            settings.privacy.phone_regions,
            settings.privacy.keep_patterns,
        )
    )
    return hashlib.sha256(part.data).hexdigest(), hashlib.sha256(context.encode()).hexdigest()


_reads = _Reads()


async def read_image(part: ImagePart, view: DisputeCase, settings: Settings) -> Read:
    """The part as the model may receive it, read once per image and case masking in this process."""
    return await _reads.get(part, view, settings)


def item_text(texts: list[str]) -> str:
    """The text read in one item: each distinct text once (a video's frames in order), bounded."""
    said = " / ".join(dict.fromkeys(" ".join(t.split()) for t in texts if t.strip()))
    return said if len(said) <= MAX_CAPTION_CHARS else said[: MAX_CAPTION_CHARS - 1] + "…"


async def read_item(parts: list[ImagePart], view: DisputeCase, settings: Settings) -> tuple[list[ImagePart], str]:
    """An item's images (a photo, a video's frames) as the model may receive them with ``privacy.ocr``
    on, each boxed out where it shows personal data, and the item's text read, masked. Raises
    ``MediaUnreadable`` when any cannot be read: the whole item is withheld."""
    reads = [await read_image(p, view, settings) for p in parts]
    return [r.image for r in reads], item_text([r.text for r in reads])
