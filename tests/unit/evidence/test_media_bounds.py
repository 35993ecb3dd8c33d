"""Media within bounds (issue 11, item 3): caps checked from the header before a full decode,
reduced decodes, bombs and over-limit items noted on the item (never the case dead-lettered),
frames reached by seeking, a bounded number of decodes at once, and URL fetches that read the
whole body under one deadline, from an origin on the allow-list only.

Memory is never measured: each test asserts that the full decode is not attempted (the decoder
is never called on it) or that what is decoded is bounded in size. Every refusal has a control.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import random
import stat
from collections.abc import AsyncIterator
from fractions import Fraction

import av
import pytest
from aiohttp import web
from PIL import Image, ImageFile, PngImagePlugin

from cyberjurors.config import IntakeLimits, Settings
from cyberjurors.evidence import media
from cyberjurors.evidence.media import (
    MediaRejected,
    MediaUnreadable,
    check_reference,
    load_image,
    read_bytes,
    sample_frames,
)
from cyberjurors.jury.clues import find_clues, passive_evidence
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.schemas import CaseFile, DisputeCase, MediaRef
from cyberjurors.tooling.broker import free_port

from ...concurrency import Peak
from ...factories import settings
from .test_media_safety import FOCUS, PALETTE, colour_of, one_photo_case, select_first_then_perceive


def png(size: tuple[int, int], mode: str = "1", info: PngImagePlugin.PngInfo | None = None) -> bytes:
    """One colour: a PNG of any size compresses to a few kilobytes (12000x12000 is ~20 KB)."""
    out = io.BytesIO()
    Image.new(mode, size).save(out, "PNG", pnginfo=info)
    return out.getvalue()


@pytest.fixture
def loads(monkeypatch) -> list[tuple[int, int]]:
    """The size of every image Pillow actually decodes (a spy: the real load runs)."""
    sizes: list[tuple[int, int]] = []
    real = ImageFile.ImageFile.load

    def load(self):
        if self.tile:  # not yet decoded: this call decodes
            sizes.append(self.size)
        return real(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    return sizes


def image_ref(data: bytes, media_type: str = "image/png") -> MediaRef:
    import base64

    return MediaRef(media_type=media_type, data_base64=base64.b64encode(data).decode())


# --- images ---------------------------------------------------------------------------------


async def test_a_12000_square_png_is_refused_from_its_header_and_never_decoded(tmp_path, loads):
    s = settings(media_root=tmp_path)
    data = png((12_000, 12_000))
    assert len(data) < 100_000  # small on the wire: only the header tells
    with pytest.raises(MediaUnreadable) as err:
        await load_image(image_ref(data), s)
    assert err.value.reason == "image_too_large" and "12000x12000" in err.value.detail
    assert loads == []  # refused before any decode

    part = await load_image(image_ref(png((600, 400), "RGB")), s)  # the control decodes
    assert loads == [(600, 400)] and Image.open(io.BytesIO(part.data)).size == (600, 400)


@pytest.mark.parametrize(
    "size, limits, refused",
    [
        ((20_000, 8), {}, True),  # few pixels, one side too long
        ((20_000, 8), {"intake_limits": IntakeLimits(max_image_dimension=20_000)}, False),
        (
            (3_000, 3_000),
            {"intake_limits": IntakeLimits(max_image_pixels=8_999_999)},
            True,
        ),  # sides fine, too many pixels
        ((3_000, 3_000), {"intake_limits": IntakeLimits(max_image_pixels=9_000_000)}, False),
    ],
)
async def test_the_dimension_and_pixel_caps_are_separate_settings(tmp_path, loads, size, limits, refused):
    s = settings(media_root=tmp_path, **limits)
    if refused:
        with pytest.raises(MediaUnreadable) as err:
            await load_image(image_ref(png(size)), s)
        assert err.value.reason == "image_too_large" and loads == []
    else:
        part = await load_image(image_ref(png(size)), s)
        assert loads and max(Image.open(io.BytesIO(part.data)).size) == s.max_image_side


async def test_a_png_decompression_bomb_is_an_image_bomb_even_with_the_caps_raised(tmp_path, loads):
    # 15000x15000 = 225M pixels: past twice Pillow's MAX_IMAGE_PIXELS, so Image.open itself refuses
    s = settings(media_root=tmp_path, intake_limits={"max_image_pixels": 10**9, "max_image_dimension": 100_000})
    with pytest.raises(MediaUnreadable) as err:
        await load_image(image_ref(png((15_000, 15_000))), s)
    assert err.value.reason == "image_bomb" and loads == []


async def test_a_png_with_a_huge_compressed_text_chunk_is_an_image_bomb(tmp_path):
    def with_text(chars: int) -> bytes:
        info = PngImagePlugin.PngInfo()
        info.add_text("comment", "0" * chars, zip=True)  # zTXt: 10 MB of text deflates to ~10 KB
        return png((32, 32), "RGB", info)

    s = settings(media_root=tmp_path)
    with pytest.raises(MediaUnreadable) as err:
        await load_image(image_ref(with_text(10_000_000)), s)
    assert err.value.reason == "image_bomb"
    assert (await load_image(image_ref(with_text(1000)), s)).data  # a modest text chunk is fine


@pytest.mark.parametrize("special", ["fifo", "device", "folder"])
async def test_a_path_to_a_fifo_a_device_or_a_folder_is_a_note_and_nothing_waits_on_it(tmp_path, special):
    """A FIFO under media_root never answers (opening it for reading waits for a writer: the decode
    pool's threads hung, and every later media item with them) and a device may never end (one with
    /dev/zero's numbers, read whole, took a worker to 13 GB): neither is opened for reading nor handed
    to Pillow or FFmpeg; each is a note on its item."""
    target = tmp_path / "item"
    if special == "fifo":
        os.mkfifo(target)
    elif special == "device":
        try:
            os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
        except PermissionError:
            pytest.skip("making a device node needs root")
    else:
        target.mkdir()
    config = settings(media_root=tmp_path)
    reads = [media.check_header] if special == "device" else [read_bytes, media.check_header]  # a broken
    # read_bytes would read a device without end: only the header check, which reads a few bytes, is tried on it
    try:
        for media_type in ("image/png", "video/mp4"):
            for read in reads:
                with pytest.raises(MediaUnreadable) as err:
                    await asyncio.wait_for(
                        read(MediaRef(media_type=media_type, path="item"), config), 30
                    )  # a hang fails
                assert (err.value.reason, err.value.detail) == (
                    "not_a_file",
                    "item is not a regular file (a directory, device or pipe)",
                )
    finally:  # a reader a broken version left waiting on the FIFO gets its end of file, so the run can finish
        if special == "fifo":
            with contextlib.suppress(OSError):
                os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))


async def test_a_large_jpeg_is_decoded_reduced_never_at_full_size(tmp_path, loads):
    out = io.BytesIO()
    Image.new("RGB", (4000, 3000), (30, 120, 200)).save(out, "JPEG")
    s = settings(media_root=tmp_path, max_image_side=768)
    part = await load_image(image_ref(out.getvalue(), "image/jpeg"), s)
    assert Image.open(io.BytesIO(part.data)).size == (768, 576)
    [decoded] = loads
    assert decoded[0] < 2 * 768 and decoded[0] >= 768  # DCT-scaled (1/4 here), not 4000 wide


async def test_a_bomb_or_an_oversized_photo_is_a_note_on_that_item_and_the_case_goes_on(tmp_path):
    (tmp_path / "bomb.png").write_bytes(png((15_000, 15_000)))
    (tmp_path / "huge.png").write_bytes(png((12_000, 12_000)))
    (tmp_path / "fine.png").write_bytes(png((16, 16), "RGB"))
    s = settings(media_root=tmp_path, max_select_steps=2)
    for path, problem in [("bomb.png", "image_bomb"), ("huge.png", "image_too_large"), ("fine.png", None)]:
        llm = ScriptedLLM(select_first_then_perceive)
        chain, _, problems = await find_clues(one_photo_case(path, None), FOCUS, llm, s)
        [photo] = chain.buyer
        assert photo.problem == problem
        assert [c.evidence_id for c in chain.seller] == ["s-text"]  # the case went on
        assert len(problems) == (problem is not None)

        # stage II off: the jurors' passive read notes it the same way
        case_file = CaseFile(case=one_photo_case(path, None), received_at="2026-09-02T10:00:00Z")
        parts, problems = await passive_evidence(case_file, s)
        assert len(parts) == (problem is None)
        assert [problem in p for p in problems] == ([True] if problem else [])


async def test_at_most_media_decode_concurrency_decodes_run_at_once(tmp_path, monkeypatch):
    spy = Peak(media._image_part, bound=2)
    monkeypatch.setattr(media, "_image_part", spy)
    s = settings(media_root=tmp_path, media_decode_concurrency=2)
    parts = await asyncio.gather(*(load_image(image_ref(png((16, 16), "RGB")), s) for _ in range(6)))
    assert len(parts) == 6 and spy.most == 2


# --- videos ---------------------------------------------------------------------------------


def clip(
    frames: int,
    *,
    size: tuple[int, int] = (64, 64),
    fps: int = 5,
    per_colour: int = 1,
    gop: int | None = None,
    noise: int = 0,
    pts_step: int = 1,
    fast: bool = False,
) -> bytes:
    """H.264 in MP4; frame i has the colour PALETTE[i // per_colour] (with a noisy strip of
    ``noise`` rows at the top to give the frames weight), at pts i * pts_step in 1/fps units."""
    out, rnd = io.BytesIO(), random.Random(1)
    options = {"preset": "ultrafast", "tune": "zerolatency", "threads": "1"} if fast else {}
    if gop:
        options["x264-params"] = f"keyint={gop}:min-keyint={gop}:scenecut=0"
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps, options=options)
        stream.width, stream.height, stream.pix_fmt = *size, "yuv420p"
        for i in range(frames):
            if fast:  # no RGB picture at full size: a plain yuv frame
                frame = av.VideoFrame(*size, "yuv420p")
                for plane in frame.planes:
                    plane.update(bytes(plane.buffer_size))
            else:
                image = Image.new("RGB", size, PALETTE[(i // per_colour) % len(PALETTE)])
                if noise:
                    image.paste(Image.frombytes("RGB", (size[0], noise), rnd.randbytes(size[0] * noise * 3)))
                frame = av.VideoFrame.from_image(image)
            frame.pts, frame.time_base = i * pts_step, Fraction(1, fps)
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return out.getvalue()


@pytest.fixture(scope="module")
def huge_clip() -> bytes:
    return clip(2, size=(8192, 8192), fast=True)


async def test_an_8192_square_video_is_refused_from_its_header_before_any_frame_is_decoded(
    tmp_path, monkeypatch, huge_clip
):
    grabs: list[int] = []
    real = media._grab
    monkeypatch.setattr(media, "_grab", lambda *a: grabs.append(1) or real(*a))  # the only decoding step
    (tmp_path / "huge.mp4").write_bytes(huge_clip)
    ref = MediaRef(media_type="video/mp4", path="huge.mp4")
    with pytest.raises(MediaUnreadable) as err:
        await sample_frames(ref, settings(media_root=tmp_path))
    assert err.value.reason == "video_too_large" and "8192x8192" in err.value.detail and grabs == []

    (tmp_path / "small.mp4").write_bytes(clip(3))  # the control goes through the same step
    assert (
        len(await sample_frames(MediaRef(media_type="video/mp4", path="small.mp4"), settings(media_root=tmp_path))) == 3
    )
    assert grabs == [1]


async def test_a_video_longer_than_the_cap_is_refused_by_its_timestamps(tmp_path):
    # two frames 700 s apart: tiny to make, and longer than the default 600 s
    (tmp_path / "long.mp4").write_bytes(clip(2, pts_step=3500))
    ref = MediaRef(media_type="video/mp4", path="long.mp4")
    with pytest.raises(MediaUnreadable) as err:
        await sample_frames(ref, settings(media_root=tmp_path))
    assert err.value.reason == "video_too_long"
    frames = await sample_frames(ref, settings(media_root=tmp_path, intake_limits={"max_video_duration_s": 800}))
    assert [round(f.time_s) for f in frames] == [0, 700]


@pytest.mark.parametrize("cap, refused", [(9, True), (10, False)])
async def test_a_video_with_more_frames_than_the_cap_is_refused(tmp_path, cap, refused):
    (tmp_path / "ten.mp4").write_bytes(clip(10))
    ref = MediaRef(media_type="video/mp4", path="ten.mp4")
    s = settings(media_root=tmp_path, intake_limits={"max_video_frames": cap})
    if refused:
        with pytest.raises(MediaUnreadable) as err:
            await sample_frames(ref, s)
        assert err.value.reason == "video_too_long"
    else:
        assert len(await sample_frames(ref, s, 4)) == 4


class CountingReader(io.BytesIO):
    """The clip as a file that counts the bytes the demuxer reads from it."""

    read_total = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.read_total += len(data)
        return data

    def readinto(self, buffer) -> int:
        n = super().readinto(buffer)
        self.read_total += n
        return n


@pytest.fixture(scope="module")
def long_gop_clip() -> bytes:
    # 600 frames, a keyframe every 10, a colour every 60 frames
    return clip(600, size=(128, 128), per_colour=60, gop=10, noise=12)


def test_frames_are_reached_by_seeking_not_by_decoding_the_whole_stream(long_gop_clip):
    s = Settings(llm_backend="offline", precedent_backend="none")
    source = CountingReader(long_gop_clip)
    frames = media._sample_video(source, "video/mp4", 3, s, "evidence b1", None)
    assert [f.source_index for f in frames] == [0, 300, 599]
    assert [colour_of(f.image.data) for f in frames] == [0, 5, 9]
    assert [f.time_s for f in frames] == [0.0, 60.0, pytest.approx(119.8)]
    assert [f.image.label for f in frames] == [
        "evidence b1 frame 1 at 0.00s",
        "evidence b1 frame 2 at 60.00s",
        "evidence b1 frame 3 at 119.80s",
    ]
    # one read of the packets' timestamps, then three groups of pictures: decoding every frame
    # would read the whole file a second time
    assert source.read_total < 1.5 * len(long_gop_clip)


@pytest.mark.parametrize("budget", [7, 30, 600])
def test_seeking_keeps_every_label_right_however_the_picks_fall(long_gop_clip, budget):
    s = Settings(llm_backend="offline", precedent_backend="none")
    frames = media._sample_video(io.BytesIO(long_gop_clip), "video/mp4", budget, s, "v", None)
    sources = [f.source_index for f in frames]
    expected = sorted({round(i * 599 / (budget - 1)) for i in range(budget)})
    assert sources == expected and [f.index for f in frames] == list(range(1, len(expected) + 1))
    assert [f.time_s for f in frames] == [pytest.approx(n / 5) for n in expected]
    for f in frames[:: max(1, len(frames) // 12)]:  # the decoded picture is that frame
        assert colour_of(f.image.data) == f.source_index // 60


async def test_frames_are_downscaled_as_they_are_decoded(tmp_path):
    (tmp_path / "wide.mp4").write_bytes(clip(4, size=(1280, 720)))
    frames = await sample_frames(
        MediaRef(media_type="video/mp4", path="wide.mp4"), settings(media_root=tmp_path, max_image_side=256)
    )
    assert [Image.open(io.BytesIO(f.image.data)).size for f in frames] == [(256, 144)] * 4


async def test_an_oversized_video_is_a_note_on_that_item_and_the_case_goes_on(tmp_path, huge_clip):
    (tmp_path / "huge.mp4").write_bytes(huge_clip)
    raw = one_photo_case("huge.mp4", None).model_dump(mode="json")
    raw["rounds"][0]["items"][0].update(kind="video", media={"media_type": "video/mp4", "path": "huge.mp4"})
    case = DisputeCase.model_validate(raw)
    llm = ScriptedLLM(select_first_then_perceive)
    chain, _, problems = await find_clues(case, FOCUS, llm, settings(media_root=tmp_path, max_select_steps=2))
    [video] = chain.buyer
    assert video.problem == "video_too_large" and len(problems) == 1
    assert [c.evidence_id for c in chain.seller] == ["s-text"]


async def test_media_the_selector_passed_over_are_noted_from_their_headers_nothing_decoded_or_fetched(
    tmp_path, loads, monkeypatch, huge_clip
):
    """Only the text is examined (one selection step): every other item's header is still checked,
    and each one over a cap, a bomb or corrupt gets its note; a URL is not fetched for it, a fine
    photo gets none, and no picture or frame is decoded."""
    import base64

    grabs: list[object] = []
    monkeypatch.setattr(media, "_grab", lambda *a: grabs.append(a) or [])
    (tmp_path / "huge.png").write_bytes(png((12_000, 12_000)))
    (tmp_path / "bomb.png").write_bytes(png((15_000, 15_000)))
    (tmp_path / "garbage.png").write_bytes(b"not a picture at all")
    (tmp_path / "huge.mp4").write_bytes(huge_clip)
    (tmp_path / "fine.png").write_bytes(png((16, 16), "RGB"))
    photo = {"media_type": "image/png"}
    items = [
        {"id": "b-text", "kind": "text", "text": "The seam was torn."},
        {"id": "b-huge", "kind": "image", "media": {**photo, "path": "huge.png"}},
        {"id": "b-bomb", "kind": "image", "media": {**photo, "path": "bomb.png"}},
        {"id": "b-garbage", "kind": "image", "media": {**photo, "path": "garbage.png"}},
        {"id": "b-gone", "kind": "image", "media": {**photo, "path": "gone.png"}},
        {"id": "b-inline", "kind": "image", "media": {**photo, "data_base64": base64.b64encode(b"junk").decode()}},
        {"id": "b-video", "kind": "video", "media": {"media_type": "video/mp4", "path": "huge.mp4"}},
        {"id": "b-url", "kind": "image", "media": {**photo, "url": f"http://127.0.0.1:{free_port()}/x.png"}},
        {"id": "b-fine", "kind": "image", "media": {**photo, "path": "fine.png"}},
    ]
    raw = one_photo_case("fine.png", None).model_dump(mode="json")
    raw["rounds"][0]["items"] = items
    s = settings(media_root=tmp_path, max_select_steps=1, url_allowlist=["127.0.0.1"])
    chain, _, problems = await find_clues(
        DisputeCase.model_validate(raw), FOCUS, ScriptedLLM(select_first_then_perceive), s
    )
    assert [c.evidence_id for c in chain.buyer] == ["b-text"]
    noted = {p.split()[1]: p for p in problems}
    assert {
        k: next(
            r for r in ("image_too_large", "image_bomb", "corrupt_image", "missing_file", "video_too_large") if r in p
        )
        for k, p in noted.items()
    } == {
        "b-huge": "image_too_large",
        "b-bomb": "image_bomb",
        "b-garbage": "corrupt_image",
        "b-gone": "missing_file",
        "b-inline": "corrupt_image",
        "b-video": "video_too_large",
    }
    assert "(buyer, not selected for examination)" in noted["b-huge"] and "12000x12000" in noted["b-huge"]
    assert loads == [] and grabs == []  # headers only


# --- URLs -----------------------------------------------------------------------------------


def noisy_jpeg(side: int = 1000) -> bytes:
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), random.Random(2).randbytes(side * side * 3)).save(out, "JPEG", quality=95)
    return out.getvalue()


BIG_JPEG = noisy_jpeg()


class Server:
    """A real aiohttp server on 127.0.0.1 that counts the requests it serves."""

    def __init__(self, other: str = "") -> None:
        self.hits: list[str] = []
        self.other = other  # another server's host:port, for redirects
        self.app = web.Application()
        self.app.router.add_get("/{name}", self.handle)
        self.host = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.hits.append(name)
        if name == "big.jpg":  # sent in pieces, so a single read returns only the first
            response = web.StreamResponse(headers={"Content-Type": "image/jpeg"})
            if request.query.get("length") != "no":
                response.content_length = len(BIG_JPEG)
            await response.prepare(request)
            for start in range(0, len(BIG_JPEG), 16_384):
                await response.write(BIG_JPEG[start : start + 16_384])
                await asyncio.sleep(0)
            return response
        if name == "trickle.png":
            response = web.StreamResponse(headers={"Content-Type": "image/png"})
            await response.prepare(request)
            for byte in png((16, 16), "RGB") * 20:  # one byte every 50 ms: ~30 s in all
                await response.write(bytes([byte]))
                await asyncio.sleep(0.05)
            return response
        if name.startswith("to-"):  # /to-<target>: a redirect to <target>, a URL path-encoded
            raise web.HTTPFound(name[3:].replace("!", "/"))
        return web.Response(body=png((16, 16), "RGB"), content_type="image/png")


@pytest.fixture
async def servers() -> AsyncIterator[tuple[Server, Server]]:
    made, runners = [], []
    for _ in range(2):
        server = Server()
        runner = web.AppRunner(server.app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server.host = f"127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        made.append(server)
        runners.append(runner)
    yield made[0], made[1]
    for runner in runners:
        await runner.cleanup()


def url_ref(url: str, media_type: str = "image/png") -> MediaRef:
    return MediaRef(media_type=media_type, url=url)


@pytest.mark.parametrize("length", ["yes", "no"])
async def test_a_body_over_a_megabyte_is_read_whole(tmp_path, servers, length):
    allowed, _ = servers
    assert len(BIG_JPEG) > 1_100_000
    s = settings(media_root=tmp_path, url_allowlist=[allowed.host])
    ref = url_ref(f"http://{allowed.host}/big.jpg?length={length}", "image/jpeg")
    assert await read_bytes(ref, s) == BIG_JPEG
    assert Image.open(io.BytesIO((await load_image(ref, s)).data)).size == (768, 768)

    small = settings(
        media_root=tmp_path, url_allowlist=[allowed.host], intake_limits={"max_media_bytes": len(BIG_JPEG) - 1}
    )
    with pytest.raises(MediaUnreadable) as err:  # and never more than the limit
        await read_bytes(ref, small)
    assert err.value.reason == "too_large"


async def test_a_body_that_trickles_in_is_cut_off_at_the_one_deadline(tmp_path, servers):
    allowed, _ = servers
    s = settings(media_root=tmp_path, url_allowlist=[allowed.host], media_fetch_timeout_s=1.0)
    with pytest.raises(MediaUnreadable) as err:
        await read_bytes(url_ref(f"http://{allowed.host}/trickle.png"), s)
    assert err.value.reason == "fetch_timeout"
    assert await read_bytes(url_ref(f"http://{allowed.host}/photo.png"), s)  # the control, same deadline


async def test_a_redirect_is_followed_only_to_an_origin_on_the_list(tmp_path, servers):
    allowed, other = servers
    s = settings(media_root=tmp_path, url_allowlist=[allowed.host])
    port = allowed.host.split(":")[1]
    same = f"http:!!{allowed.host}!photo.png"
    assert await read_bytes(url_ref(f"http://{allowed.host}/to-{same}"), s) == png((16, 16), "RGB")
    assert await read_bytes(url_ref(f"http://{allowed.host}/to-photo.png"), s)  # relative: same origin

    for target in (f"http:!!localhost:{port}!photo.png", f"http:!!{other.host}!photo.png"):
        with pytest.raises(MediaUnreadable) as err:  # another host; another port
            await read_bytes(url_ref(f"http://{allowed.host}/to-{target}"), s)
        assert err.value.reason == "url_not_allowed"
    assert other.hits == []  # the off-list server was never asked

    loop = settings(media_root=tmp_path, url_allowlist=[allowed.host], intake_limits={"max_url_redirects": 0})
    with pytest.raises(MediaUnreadable) as err:
        await read_bytes(url_ref(f"http://{allowed.host}/to-{same}"), loop)
    assert err.value.reason == "fetch_failed"


async def test_the_allow_list_compares_the_port(tmp_path, servers):
    allowed, other = servers
    for allowlist in ([allowed.host], ["127.0.0.1"]):  # another port; a bare host means the default ports
        s = settings(media_root=tmp_path, url_allowlist=allowlist)
        ref = url_ref(f"http://{other.host}/photo.png")
        with pytest.raises(MediaRejected) as err:
            check_reference("image", ref, s)
        assert err.value.reason == "url_not_allowed"
        with pytest.raises(MediaUnreadable) as err:
            await read_bytes(ref, s)
        assert err.value.reason == "url_not_allowed"
    assert other.hits == []
    s = settings(media_root=tmp_path, url_allowlist=[other.host])
    check_reference("image", url_ref(f"http://{other.host}/photo.png"), s)  # the control
    assert await read_bytes(url_ref(f"http://{other.host}/photo.png"), s)


@pytest.mark.parametrize(
    "entry, allowed, refused",
    [
        (
            "photos.example",
            ["http://photos.example/a.png", "https://photos.example:443/a.png", "HTTP://Photos.Example/x"],
            ["http://photos.example:8080/a.png", "https://photos.example:80/a.png", "ftp://photos.example/a.png"],
        ),
        ("https://photos.example", ["https://photos.example/a.png"], ["http://photos.example/a.png"]),
        (
            "photos.example:8443",
            ["https://photos.example:8443/a", "http://photos.example:8443/a"],
            ["https://photos.example/a"],
        ),
        ("::1", ["http://[::1]/a.png"], ["http://[::1]:8080/a.png"]),
        ("[::1]:8080", ["http://[::1]:8080/a.png"], ["http://[::1]/a.png"]),
    ],
)
def test_allow_list_entries_are_origins(tmp_path, entry, allowed, refused):
    s = settings(media_root=tmp_path, url_allowlist=[entry])
    for url in allowed:
        check_reference("image", url_ref(url), s)
    for url in refused:
        with pytest.raises(MediaRejected):
            check_reference("image", url_ref(url), s)


@pytest.mark.parametrize(
    "url",
    [
        "http://a\\@b/x.png",
        "http://b\\x.png",
        "http://user@b/x.png",
        "http://user:pw@b/x.png",
        "http://b/ x.png",
        "//b/x.png",
    ],
)
async def test_urls_parsers_disagree_on_are_refused(tmp_path, url):
    s = settings(media_root=tmp_path, url_allowlist=["a", "b"])
    with pytest.raises(MediaRejected) as err:
        check_reference("image", url_ref(url), s)
    assert err.value.reason == "url_not_allowed"
    with pytest.raises(MediaUnreadable) as err:
        await read_bytes(url_ref(url), s)
    assert err.value.reason == "url_not_allowed"
    check_reference("image", url_ref("http://b/x.png"), s)  # the control
