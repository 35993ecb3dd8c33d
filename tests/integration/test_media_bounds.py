"""Media within bounds on a real worker (issue 11, item 3): bombs, oversized and mislabelled media
end in verdicts with notes, and the worker keeps serving (tests/unit/evidence/test_media_bounds.py
has the bounds themselves)."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from ..unit.evidence.test_media_bounds import huge_clip as huge_clip
from ..unit.evidence.test_media_bounds import png

# --- end to end: a real worker on the embedded broker -----------------------------------------


@pytest.mark.integration
async def test_bombs_and_oversized_media_end_in_verdicts_with_notes_on_a_real_worker(settings, tmp_path, huge_clip):
    """Before issue 11 a PNG bomb dead-lettered its whole case as stage_failed: each case here must
    reach a verdict whose notes name the item and the reason, and the worker keeps serving."""
    import json

    from cyberjurors.schemas import Verdict
    from cyberjurors.tooling.clients import Outgoing, produce

    from ..conftest import read_topic, worker_process
    from ..factories import whole
    from .test_bad_input import case, image, video

    settings = settings.model_copy(update={"media_root": tmp_path, "jurors": 3, "rounds": 1})
    (tmp_path / "bomb.png").write_bytes(png((15_000, 15_000)))
    (tmp_path / "huge.png").write_bytes(png((12_000, 12_000)))
    (tmp_path / "huge.mp4").write_bytes(huge_clip)
    (tmp_path / "fine.png").write_bytes(png((64, 64), "RGB"))
    for name, fmt in [("tiff.png", "TIFF"), ("photo.mp4", "PNG"), ("jpeg.png", "JPEG")]:  # bytes not as declared
        out = io.BytesIO()
        Image.new("RGB", (64, 64), (200, 30, 30)).save(out, fmt)
        (tmp_path / name).write_bytes(out.getvalue())
    cases = {  # key -> the note its verdict must carry (None: no note)
        "bomb": ([image("b1", media_type="image/png", path="bomb.png")], "image_bomb"),
        "huge-photo": ([image("b1", media_type="image/png", path="huge.png")], "image_too_large"),
        "huge-video": ([video("b1", media_type="video/mp4", path="huge.mp4")], "video_too_large"),
        "tiff-as-png": ([image("b1", media_type="image/png", path="tiff.png")], "unsupported_media_type"),
        "png-as-mp4": ([video("b1", media_type="video/mp4", path="photo.mp4")], "unsupported_media_type"),
        "jpeg-as-png": ([image("b1", media_type="image/png", path="jpeg.png")], "the bytes are JPEG"),
        "fine": ([image("b1", media_type="image/png", path="fine.png")], None),
    }
    outgoing = [Outgoing(key, whole(case(key, items)), key) for key, (items, _) in cases.items()]
    async with worker_process(settings, tmp_path / "worker.log") as worker:
        await produce(settings, outgoing)
        found = await read_topic(settings, "disputes.verdicts", until=len(cases), timeout_s=180)
        assert worker.alive(), (tmp_path / "worker.log").read_text()[-3000:]
    verdicts = {key: Verdict.model_validate_json(value) for key, value in found}
    assert set(verdicts) == set(cases), json.dumps(sorted(verdicts))
    for key, (_, reason) in cases.items():
        notes = [p for p in verdicts[key].problems if "b1" in p]
        assert ([reason in p for p in notes] == [True]) if reason else not notes, (key, verdicts[key].problems)
