"""The declared media type against the bytes: Pillow and FFmpeg identify a file by its contents,
so a TIFF declared image/png or a PNG declared video/mp4 would reach decoders the supported types
never admit. What the bytes turn out to be must be a supported format (else the item is noted
``unsupported_media_type``, never decoded, and the case goes on); a supported format other than
the declared one is read, with a note.

Every refusal has a control beside it: the same picture or clip in a supported format.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import av
import pytest
from PIL import Image

from cyberjurors.evidence import media
from cyberjurors.evidence.media import MediaUnreadable, check_header, load_image, sample_frames
from cyberjurors.jury.clues import find_clues, passive_evidence
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.schemas import CaseFile, DisputeCase, MediaRef

from ...factories import settings
from .test_media_bounds import clip
from .test_media_bounds import loads as loads  # a fixture, requested by name
from .test_media_safety import FOCUS, one_photo_case, select_first_then_perceive


def picture(fmt: str, **save) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 30, 30)).save(out, fmt, **save)
    return out.getvalue()


def multi_picture_jpeg() -> bytes:
    """A JPEG carrying a second picture (multi-picture format, as phones write): Pillow says MPO."""
    out = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 30, 30)).save(
        out, "MPO", save_all=True, append_images=[Image.new("RGB", (32, 24), (0, 0, 200))]
    )
    return out.getvalue()


def container_clip(fmt: str, frames: int = 3) -> bytes:
    """MPEG-4 part 2 video in the container ``fmt`` (matroska, avi, ...)."""
    out = io.BytesIO()
    with av.open(out, "w", format=fmt) as container:
        stream = container.add_stream("mpeg4", rate=5)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for _ in range(frames):
            for packet in stream.encode(av.VideoFrame.from_image(Image.new("RGB", (64, 64), (0, 200, 0)))):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return out.getvalue()


def inline(data: bytes, media_type: str) -> MediaRef:
    return MediaRef(media_type=media_type, data_base64=base64.b64encode(data).decode())


@pytest.fixture
def grabs(monkeypatch) -> list[object]:
    """Every call of the one step that decodes video frames (a spy: the real step runs)."""
    calls: list[object] = []
    real = media._grab
    monkeypatch.setattr(media, "_grab", lambda *a: calls.append(a) or real(*a))
    return calls


# --- photos ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fmt, declared", [("TIFF", "image/png"), ("ICO", "image/png"), ("BMP", "image/jpeg"), ("TIFF", "image/gif")]
)
async def test_an_image_whose_bytes_are_an_unsupported_format_is_refused_undecoded(tmp_path, loads, fmt, declared):
    s = settings(media_root=tmp_path)
    ref = inline(picture(fmt), declared)
    with pytest.raises(MediaUnreadable) as err:
        await load_image(ref, s)
    assert err.value.reason == "unsupported_media_type"
    assert fmt in err.value.detail and declared in err.value.detail
    with pytest.raises(MediaUnreadable) as err:  # the header check of an item no juror selects says the same
        await check_header(ref, s)
    assert err.value.reason == "unsupported_media_type"
    assert loads == []  # never decoded

    notes: list[str] = []
    await load_image(inline(picture("PNG"), "image/png"), s, notes=notes)  # the control
    assert loads == [(32, 24)] and notes == []


async def test_a_format_pillow_knows_only_by_trying_its_opener_is_not_tried(tmp_path, loads):
    """TGA has no signature: Image.open left to itself reads any bytes its opener takes as a TGA.
    (Run-length encoded: an uncompressed TGA's first bytes happen to be a cursor's signature.)"""
    ref = inline(picture("TGA", rle=True), "image/png")
    with pytest.raises(MediaUnreadable) as err:
        await load_image(ref, settings(media_root=tmp_path))
    assert err.value.reason == "corrupt_image" and loads == []


async def test_a_supported_format_other_than_the_declared_one_is_read_with_a_note(tmp_path):
    s = settings(media_root=tmp_path)
    notes: list[str] = []
    part = await load_image(inline(picture("JPEG"), "image/png"), s, notes=notes)
    assert Image.open(io.BytesIO(part.data)).size == (32, 24)
    [note] = notes
    assert "image/png" in note and "JPEG" in note
    notes.clear()
    await check_header(inline(picture("WEBP"), "image/gif"), s, notes)
    [note] = notes
    assert "image/gif" in note and "WEBP" in note

    # each declared type's own formats: no note
    for data, declared in [
        (picture("JPEG"), "image/jpeg"),
        (multi_picture_jpeg(), "image/jpeg"),
        (picture("PNG"), "image/png"),
        (picture("WEBP"), "image/webp"),
        (picture("GIF"), "image/gif"),
    ]:
        notes = []
        await load_image(inline(data, declared), s, notes=notes)
        await check_header(inline(data, declared), s, notes)
        assert notes == [], declared


# --- videos ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, demuxer",
    [
        (picture("PNG"), "png_pipe"),
        (picture("JPEG"), "jpeg_pipe"),
        (picture("GIF"), "gif"),
        (container_clip("avi"), "avi"),
    ],
    ids=["png", "jpeg", "gif", "avi"],
)
async def test_a_video_whose_bytes_are_no_supported_container_is_refused_undecoded(tmp_path, grabs, data, demuxer):
    s = settings(media_root=tmp_path)
    ref = inline(data, "video/mp4")
    with pytest.raises(MediaUnreadable) as err:
        await sample_frames(ref, s)
    assert err.value.reason == "unsupported_media_type"
    assert demuxer in err.value.detail and "video/mp4" in err.value.detail
    (tmp_path / "v").write_bytes(data)  # a file under media_root is probed where it lies
    with pytest.raises(MediaUnreadable) as err:
        await check_header(MediaRef(media_type="video/mp4", path="v"), s)
    assert err.value.reason == "unsupported_media_type"
    assert grabs == []

    notes: list[str] = []
    assert len(await sample_frames(inline(clip(3), "video/mp4"), s, notes=notes)) == 3  # the control
    assert notes == []


async def test_a_supported_container_other_than_the_declared_one_is_read_with_a_note(tmp_path):
    s = settings(media_root=tmp_path)
    mp4, mkv = clip(3), container_clip("matroska")
    notes: list[str] = []
    assert len(await sample_frames(inline(mp4, "video/webm"), s, notes=notes)) == 3
    [note] = notes
    assert "video/webm" in note and "mp4" in note
    notes.clear()
    await check_header(inline(mkv, "video/mp4"), s, notes)
    [note] = notes
    assert "video/mp4" in note and "matroska" in note

    # QuickTime and MP4 share one container, as Matroska and WebM do: no note between them
    for data, declared in [
        (mp4, "video/mp4"),
        (mp4, "video/quicktime"),
        (mkv, "video/x-matroska"),
        (mkv, "video/webm"),
    ]:
        notes = []
        assert len(await sample_frames(inline(data, declared), s, notes=notes)) == 3
        await check_header(inline(data, declared), s, notes)
        assert notes == [], declared


# --- on the clue and the verdict's notes ----------------------------------------------------


def case_with(items: list[dict]) -> DisputeCase:
    raw = one_photo_case("x.png", None).model_dump(mode="json")
    raw["rounds"][0]["items"] = items
    return DisputeCase.model_validate(raw)


async def test_a_mislabelled_photo_is_noted_on_its_clue_and_the_case_goes_on(tmp_path: Path, loads):
    (tmp_path / "kettle.png").write_bytes(picture("TIFF"))
    s = settings(media_root=tmp_path, max_select_steps=2)
    llm = ScriptedLLM(select_first_then_perceive)
    chain, _, problems = await find_clues(one_photo_case("kettle.png", None), FOCUS, llm, s)
    [photo] = chain.buyer
    assert photo.problem == "unsupported_media_type" and photo.leaning == "neutral"
    [note] = problems
    assert "b-photo" in note and "unsupported_media_type" in note and "TIFF" in note
    assert [c.task.item.id for c in llm.calls if c.role == "perceive"] == ["s-text"]  # no model call on it
    assert [c.evidence_id for c in chain.seller] == ["s-text"]
    assert loads == []

    # stage II off: the jurors' passive read notes it the same way
    parts, problems = await passive_evidence(
        CaseFile(case=one_photo_case("kettle.png", None), received_at="2026-09-02T10:00:00Z"), s
    )
    assert parts == [] and len(problems) == 1 and "unsupported_media_type" in problems[0]


async def test_a_jpeg_declared_png_is_perceived_and_the_mismatch_noted(tmp_path: Path):
    (tmp_path / "seam.png").write_bytes(picture("JPEG"))
    s = settings(media_root=tmp_path, max_select_steps=2)
    llm = ScriptedLLM(select_first_then_perceive)
    chain, _, problems = await find_clues(one_photo_case("seam.png", None), FOCUS, llm, s)
    [photo] = chain.buyer
    assert photo.problem is None and photo.clue == "looked at b-photo"
    [note] = problems
    assert note.startswith("evidence b-photo: ") and "JPEG" in note and "image/png" in note

    parts, problems = await passive_evidence(
        CaseFile(case=one_photo_case("seam.png", None), received_at="2026-09-02T10:00:00Z"), s
    )
    assert len(parts) == 1 and len(problems) == 1 and "JPEG" in problems[0]


async def test_mislabelled_media_the_selector_passed_over_are_noted_from_their_headers(tmp_path: Path, loads, grabs):
    (tmp_path / "a.png").write_bytes(picture("TIFF"))
    (tmp_path / "b.png").write_bytes(picture("ICO"))
    (tmp_path / "c.mp4").write_bytes(picture("PNG"))
    (tmp_path / "d.png").write_bytes(picture("JPEG"))
    (tmp_path / "e.png").write_bytes(picture("PNG"))
    (tmp_path / "f.mp4").write_bytes(clip(2))
    photo = {"media_type": "image/png"}
    case = case_with(
        [
            {"id": "b-text", "kind": "text", "text": "The glass was cracked."},
            {"id": "b-tiff", "kind": "image", "media": {**photo, "path": "a.png"}},
            {"id": "b-ico", "kind": "image", "media": {**photo, "path": "b.png"}},
            {"id": "b-png-video", "kind": "video", "media": {"media_type": "video/mp4", "path": "c.mp4"}},
            {"id": "b-jpeg", "kind": "image", "media": {**photo, "path": "d.png"}},
            {"id": "b-fine", "kind": "image", "media": {**photo, "path": "e.png"}},
            {"id": "b-clip", "kind": "video", "media": {"media_type": "video/mp4", "path": "f.mp4"}},
        ]
    )
    chain, _, problems = await find_clues(
        case, FOCUS, ScriptedLLM(select_first_then_perceive), settings(media_root=tmp_path, max_select_steps=1)
    )
    assert [c.evidence_id for c in chain.buyer] == ["b-text"]
    noted = {p.split()[1]: p for p in problems}
    assert set(noted) == {"b-tiff", "b-ico", "b-png-video", "b-jpeg"}
    assert all("unsupported_media_type" in noted[k] for k in ("b-tiff", "b-ico", "b-png-video"))
    assert "unsupported_media_type" not in noted["b-jpeg"] and "JPEG" in noted["b-jpeg"]
    assert "(buyer, not selected for examination)" in noted["b-jpeg"]
    assert loads == [] and grabs == []  # headers only
