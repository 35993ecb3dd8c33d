"""Text in photos and video frames (issue 39 item 4, ``evidence/ocr.py``): what a model receives of a
delivery label with a Faker name, address and phone reads none of them, run through Tesseract again,
while the order number still reads; the caption a caption-only model gets holds the text read,
masked with the case's placeholders; with Tesseract missing (or over its time) nothing is sent.

Every leak check has its control: the label as the party sent it reads each value, so a test whose
OCR read nothing would fail rather than pass.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from cyberjurors.evaluation.synth_media import encode_clip
from cyberjurors.evidence.detectors import key_words
from cyberjurors.evidence.privacy import minimise
from cyberjurors.jury.clues import find_clues, passive_evidence
from cyberjurors.jury.stages import seen
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.fitting import captioned
from cyberjurors.llm.port import ImagePart, TextPart
from cyberjurors.schemas import CaseFile, DisputeCase, Focus, Perception, Selection, now

from ...factories import settings
from ...ocr_labels import Label, label

needs_tesseract = pytest.mark.skipif(
    shutil.which("tesseract") is None,
    reason="Debian's tesseract-ocr is not installed (make test installs it as root: apt-get install tesseract-ocr)",
)
FOCUS = Focus(
    focus="Was the parcel delivered to the buyer?", buyer_claims=["not delivered"], seller_claims=["delivered"]
)


def read(data: bytes) -> str:
    """What Tesseract reads in an image: the test's own reading, apart from the code's."""
    done = subprocess.run(["tesseract", "-", "-", "-l", "eng"], input=data, capture_output=True, timeout=60, check=True)
    return done.stdout.decode()


def leaks(text: str, shown: Label) -> list[str]:
    """The label's values (a name's or a street's words, a phone's last seven digits) found in ``text``."""
    words = set(key_words(text))
    found = [w for w in key_words(shown.name) + key_words(shown.street) if len(w) > 2 and w in words]
    digits = re.sub(r"\D", "", shown.phone)[-7:]
    return found + ([shown.phone] if digits in re.sub(r"\D", "", text) else [])


def label_case(media: dict, buyer_text: str = "The label shows where it went.", kind: str = "image") -> DisputeCase:
    return DisputeCase.model_validate(
        {
            "case_id": "ocr-1",
            "metadata": {
                "category": "others",
                "product": "Headphones",
                "order_amount": "80.00",
                "currency": "GBP",
                "ordered_at": "2026-09-01T10:00:00Z",
                "dispute_reason": "Parcel not received",
                "requested_remedy": "Refund",
                "locale": "en-GB",
            },
            "rounds": [
                {
                    "party": "buyer",
                    "round": 1,
                    "items": [
                        {"id": "b1", "kind": "text", "text": buyer_text},
                        {"id": "b2", "kind": kind, "text": "the delivery label", "media": media},
                    ],
                },
                {"party": "seller", "round": 1, "items": [{"id": "s1", "kind": "text", "text": "It was delivered."}]},
            ],
        }
    )


def every_item(request, output_type):
    """Selector: each unseen item in turn; perceiver: a fixed clue."""
    if output_type is Selection:
        candidates = request.task.candidates
        return Selection(evidence_id=candidates[0].id if candidates else None, reason="next")
    return Perception(clue=f"looked at {request.task.item.id}", assessment="fine", leaning="neutral")


async def perceived(case: DisputeCase, media_root: Path, **over) -> tuple[list[ImagePart], ScriptedLLM, list[str]]:
    """Stage II on the case as the jury sees it (masked): the images the perceiver was sent."""
    s = settings(media_root=media_root, max_select_steps=3, **over)
    llm = ScriptedLLM(every_item)
    _, _, problems = await find_clues(minimise(case, s).case, FOCUS, llm, s)
    return [image for call in llm.calls for image in call.images()], llm, problems


@needs_tesseract
@pytest.mark.parametrize(("locale", "seed"), [(loc, seed) for loc in ("en_GB", "en_US", "en_IE") for seed in (0, 1, 2)])
async def test_the_photo_a_model_receives_reads_no_name_address_or_phone_and_still_reads_the_order(
    tmp_path, locale, seed
):
    shown = label(locale, seed)
    (tmp_path / "label.png").write_bytes(shown.png)
    assert len(leaks(read(shown.png), shown)) >= 3  # control: as sent, the label reads each value

    [image], _, problems = await perceived(
        label_case({"media_type": "image/png", "path": "label.png"}), tmp_path, privacy={"ocr": True}
    )
    received = read(image.data)
    assert leaks(received, shown) == [] and not problems
    assert shown.order in received  # what the dispute turns on is not boxed out
    assert leaks(image.text, shown) == [] and shown.order in image.text


@needs_tesseract
async def test_without_the_switch_the_photo_goes_as_it_was(tmp_path):
    shown = label("en_GB", 4)
    (tmp_path / "label.png").write_bytes(shown.png)
    [image], _, _ = await perceived(label_case({"media_type": "image/png", "path": "label.png"}), tmp_path)
    assert len(leaks(read(image.data), shown)) >= 3 and image.text == ""


@needs_tesseract
async def test_a_caption_only_model_reads_the_label_masked_with_the_cases_own_placeholders(tmp_path):
    """The buyer's text gives the phone; the label's phone is then [PHONE_1], the buyer's; the name
    only the label holds reads as a name in words, never as a placeholder another value could have."""
    shown = label("en_GB", 5)
    (tmp_path / "label.png").write_bytes(shown.png)
    case = label_case({"media_type": "image/png", "path": "label.png"}, f"Call me on {shown.phone} about it.")
    _, llm, _ = await perceived(case, tmp_path, privacy={"ocr": True})
    [call] = [c for c in llm.calls if c.images()]
    [line] = [p.text for p in captioned(call.parts()) if isinstance(p, TextPart) and "not shown" in p.text]
    assert "[PHONE_1]" in line and "(a name)" in line and shown.order in line
    assert leaks(line, shown) == []
    assert "[PHONE_1]" in minimise(case, settings()).case.item("b1").text  # the same placeholder as the text's


@needs_tesseract
async def test_a_video_frame_a_model_receives_reads_no_personal_data(tmp_path):
    shown = label("en_US", 7)
    with Image.open(io.BytesIO(shown.png)) as opened:
        picture = opened.convert("RGB")
    (tmp_path / "label.mp4").write_bytes(encode_clip([picture] * 6, fps=2, crf="18"))
    case = label_case({"media_type": "video/mp4", "path": "label.mp4"}, kind="video")
    frames, _, problems = await perceived(case, tmp_path, privacy={"ocr": True}, frames={"per_video": 2})
    assert len(frames) == 2 and not problems
    for frame in frames:
        received = read(frame.data)
        assert leaks(received, shown) == [] and shown.order in received
    assert {f.text for f in frames} == {frames[0].text} and shown.order in frames[0].text  # the item's text, once


@needs_tesseract
async def test_stage_two_off_the_jurors_photo_is_boxed_out_too(tmp_path):
    shown = label("en_GB", 8)
    (tmp_path / "label.png").write_bytes(shown.png)
    s = settings(media_root=tmp_path, max_select_steps=0, privacy={"ocr": True})
    case = label_case({"media_type": "image/png", "path": "label.png"})
    parts, problems = await passive_evidence(seen(CaseFile(case=case, received_at=now(), digest="ocr-passive"), s), s)
    [image] = [p for p in parts if isinstance(p, ImagePart)]
    assert leaks(read(image.data), shown) == [] and not problems


async def test_with_tesseract_missing_the_photo_is_withheld_with_a_note_never_sent(tmp_path, monkeypatch):
    shown = label("en_GB", 9)
    (tmp_path / "label.png").write_bytes(shown.png)
    monkeypatch.setenv("PATH", str(tmp_path / "no-binaries-here"))
    case = label_case({"media_type": "image/png", "path": "label.png"})
    images, llm, problems = await perceived(case, tmp_path, privacy={"ocr": True})
    assert images == []  # in no request at all
    assert [c.task.item.id for c in llm.calls if c.role == "perceive"] == ["b1", "s1"]
    assert any("b2" in p and "ocr_unavailable" in p and "tesseract" in p for p in problems)

    s = settings(media_root=tmp_path, max_select_steps=0, privacy={"ocr": True})  # nor to the jurors, stage II off
    parts, problems = await passive_evidence(seen(CaseFile(case=case, received_at=now(), digest="ocr-missing"), s), s)
    assert not any(isinstance(p, ImagePart) for p in parts)
    assert any("b2" in p and "ocr_unavailable" in p for p in problems)


@needs_tesseract
async def test_a_reading_over_its_time_withholds_the_photo(tmp_path):
    shown = label("en_GB", 10)
    (tmp_path / "label.png").write_bytes(shown.png)
    case = label_case({"media_type": "image/png", "path": "label.png"})
    images, _, problems = await perceived(case, tmp_path, privacy={"ocr": True, "ocr_timeout_s": 1e-6})
    assert images == [] and any("b2" in p and "ocr_timeout" in p for p in problems)
