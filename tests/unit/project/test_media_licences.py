"""What the service needs of FFmpeg, against what PyAV's wheels bundle (docs/dependencies.md,
Licences): the wheels carry GPL-licensed encoders (x264, x265) beside FFmpeg's own LGPL libraries.
The service only decodes, with FFmpeg's native decoders, and opens no media for writing outside the
synthetic-data tooling, which falls back to FFmpeg's own MPEG-4 encoder where there is no libx264.
So an image built on a decode-only, LGPL FFmpeg (the documented alternative) runs the same; these
tests keep it so, and keep the page naming every GPL library the installed wheel carries."""

from __future__ import annotations

import ast
import base64
import io
from pathlib import Path

import av
import pytest
from PIL import Image

from cyberjurors.evaluation import synth_media
from cyberjurors.evidence import media
from cyberjurors.schemas import MediaRef

from ...factories import settings

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "cyberjurors"
# what builds media (the synthetic cases and the example files): the one part allowed to encode
TOOLING = {PACKAGE / "evaluation"}
# the GPL-licensed libraries PyAV's wheels are known to bundle, by the name their shared object starts with
GPL_LIBRARIES = {"libx264": "x264", "libx265": "x265"}


def runtime_modules() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if not any(p.is_relative_to(t) for t in TOOLING)]


def test_the_service_opens_media_for_reading_only_and_names_no_encoder():
    found = []
    for path in runtime_modules():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("libx26"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} names {node.value}")
            if isinstance(node, ast.Attribute) and node.attr == "add_stream":  # an output stream: an encoder
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} add_stream")
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "av.open":
                mode = (
                    node.args[1]
                    if len(node.args) > 1
                    else next((k.value for k in node.keywords if k.arg == "mode"), None)
                )
                if not (isinstance(mode, ast.Constant) and mode.value == "r"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} av.open without mode 'r'")
    assert found == [], "the service would need an encoder (GPL x264/x265 in PyAV's wheels): " + "; ".join(found)
    assert len(runtime_modules()) > 100  # the walk saw the package


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "media").glob("*.mp4")), ids=lambda p: p.name)
def test_the_example_videos_decode_with_ffmpegs_own_decoders(path):
    with av.open(str(path), "r") as container:
        decoder = container.streams.video[0].codec_context.codec
        assert decoder.is_decoder and decoder.name in ("h264", "mpeg4"), decoder.name  # FFmpeg's own (LGPL)
        assert not decoder.name.startswith("lib")  # no external library's wrapper


async def test_synthetic_video_without_libx264_is_mpeg4_and_the_service_reads_it(monkeypatch):
    """What the tooling makes on an FFmpeg without x264 (a decode-only, LGPL build) and what the
    worker's frame sampler then reads."""
    monkeypatch.setattr(synth_media.av, "codecs_available", av.codecs_available - {"libx264"})
    clip = synth_media.encode_clip((Image.new("RGB", (160, 96), (40 * i, 80, 120)) for i in range(10)), fps=5)
    with av.open(io.BytesIO(clip), "r") as container:
        assert container.streams.video[0].codec_context.name == "mpeg4"
    ref = MediaRef(media_type="video/mp4", data_base64=base64.b64encode(clip).decode())
    frames = await media.sample_frames(ref, settings(), count=3)
    assert len(frames) == 3


def test_the_licences_page_names_every_gpl_library_the_installed_wheel_bundles():
    bundled = Path(av.__file__).resolve().parent.parent / "av.libs"
    if not bundled.is_dir():
        pytest.skip("PyAV built from source against a system FFmpeg: no bundled libraries")
    names = {p.name.split("-")[0].split(".")[0] for p in bundled.iterdir()}
    page = (ROOT / "docs" / "dependencies.md").read_text()
    licences = page[page.index("## Licences") :]
    carried = {name: GPL_LIBRARIES[name] for name in names if name in GPL_LIBRARIES}
    assert carried, "the wheel carries no GPL encoder any more: say so in docs/dependencies.md"
    for name, project in carried.items():
        assert project in licences and name in licences, f"docs/dependencies.md Licences does not name {name}"
