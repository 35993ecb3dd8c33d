"""Media references at unit level: what intake refuses (``check_reference``), what reading refuses
again (``read_bytes``), and what stage II notes on the clue instead of failing the case.

Every refusal has a control beside it (the same reference made acceptable), so a check that
refuses everything fails as surely as one that refuses nothing. Reasons are asserted as codes;
the human-readable details are not part of the contract, except where a detail is the only thing
that tells the sender what to change (a URL's scheme, against a URL that cannot be parsed).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from PIL import Image, ImageStat

from cyberjurors.evidence.intake import Rejected, admit
from cyberjurors.evidence.media import MediaRejected, MediaUnreadable, check_reference, load_image, read_bytes
from cyberjurors.jury.clues import find_clues
from cyberjurors.jury.model_inputs import PerceiveTask, SelectTask
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.schemas import DisputeCase, Focus, MediaRef, Perception, Selection

from ...factories import settings


def png(colour: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16, 16), colour).save(out, "PNG")
    return out.getvalue()


@pytest.fixture
def media(tmp_path: Path) -> Path:
    """tmp/media is the media root; tmp/secret.png lies beside it, outside."""
    root = tmp_path / "media"
    (root / "sub").mkdir(parents=True)
    (root / "inside.png").write_bytes(png((10, 200, 10)))
    (root / "sub" / "deep.png").write_bytes(png((10, 10, 200)))
    (tmp_path / "secret.png").write_bytes(png((250, 250, 0)))
    (root / "escape.png").symlink_to(tmp_path / "secret.png")  # inside the root, pointing outside
    (root / "escape-dir").symlink_to(tmp_path, target_is_directory=True)
    (root / "alias.png").symlink_to(root / "sub" / "deep.png")  # inside, pointing inside: fine
    return root


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- sha256 ---------------------------------------------------------------------------------


async def test_read_bytes_checks_the_sha256_of_a_file_and_of_inline_data(media):
    s = settings(media_root=media)
    data = (media / "inside.png").read_bytes()
    assert await read_bytes(MediaRef(media_type="image/png", path="inside.png", sha256=sha(data)), s) == data
    inline = base64.b64encode(data).decode()
    assert await read_bytes(MediaRef(media_type="image/png", data_base64=inline, sha256=sha(data)), s) == data

    wrong = sha(data + b"tampered")
    for ref in (
        MediaRef(media_type="image/png", path="inside.png", sha256=wrong),
        MediaRef(media_type="image/png", data_base64=inline, sha256=wrong),
    ):
        with pytest.raises(MediaUnreadable) as err:
            await read_bytes(ref, s)
        assert err.value.reason == "hash_mismatch"
        with pytest.raises(MediaUnreadable) as err:  # and so does every reader built on it
            await load_image(ref, s)
        assert err.value.reason == "hash_mismatch"


def select_first_then_perceive(request, output_type):
    """Selector: the first unseen item, then none; perceiver: a fixed clue."""
    if output_type is Selection:
        task: SelectTask = request.task
        return Selection(evidence_id=task.candidates[0].id if task.candidates else None, reason="first unseen")
    task: PerceiveTask = request.task
    return Perception(clue=f"looked at {task.item.id}", assessment="fine", leaning="buyer")


def one_photo_case(path: str | None, digest: str | None, url: str | None = None) -> DisputeCase:
    media = {"media_type": "image/png", **({"path": path} if path else {"url": url})}
    media |= {"sha256": digest} if digest else {}
    return DisputeCase.model_validate(
        {
            "case_id": "hash-1",
            "metadata": {
                "category": "clothing",
                "product": "Linen shirt",
                "order_amount": "45.00",
                "currency": "EUR",
                "ordered_at": "2026-09-01T10:00:00Z",
                "dispute_reason": "Seam torn on arrival",
                "requested_remedy": "Refund",
            },
            "rounds": [
                {
                    "party": "buyer",
                    "round": 1,
                    "items": [{"id": "b-photo", "kind": "image", "text": "the seam", "media": media}],
                },
                {"party": "seller", "round": 1, "items": [{"id": "s-text", "kind": "text", "text": "It left intact."}]},
            ],
        }
    )


FOCUS = Focus(focus="Was the shirt torn on arrival?", buyer_claims=["torn"], seller_claims=["intact"])


async def test_stage_two_records_a_hash_mismatch_on_the_clue_and_goes_on(media):
    s = settings(media_root=media, max_select_steps=2)
    data = (media / "inside.png").read_bytes()

    good = ScriptedLLM(select_first_then_perceive)
    chain, _, problems = await find_clues(one_photo_case("inside.png", sha(data)), FOCUS, good, s)
    [photo] = chain.buyer
    assert photo.problem is None and photo.clue == "looked at b-photo" and not problems
    assert good.roles().count("perceive") == 2  # the photo and the seller's text

    bad = ScriptedLLM(select_first_then_perceive)
    chain, _, problems = await find_clues(one_photo_case("inside.png", sha(b"something else")), FOCUS, bad, s)
    [photo] = chain.buyer
    assert photo.evidence_id == "b-photo" and photo.problem == "hash_mismatch"
    assert photo.leaning == "neutral"  # an unread photo supports no one
    assert len(problems) == 1 and "b-photo" in problems[0] and "hash_mismatch" in problems[0]
    assert [c.task.item.id for c in bad.calls if c.role == "perceive"] == ["s-text"]  # no model call on the photo
    assert [c.evidence_id for c in chain.seller] == ["s-text"]  # the case went on


# --- URLs: scheme and host ------------------------------------------------------------------


@pytest.fixture
async def photo_server() -> AsyncIterator[tuple[str, bytes]]:
    """A local HTTP server with one photo: the allowed-host control for the URL checks."""
    data = png((0, 120, 240))

    async def photo(request: web.Request) -> web.Response:
        return web.Response(body=data, content_type="image/png")

    app = web.Application()
    app.router.add_get("/photo.png", photo)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"127.0.0.1:{port}", data
    await runner.cleanup()


NON_HTTP = ["ftp", "file", "gopher", "ws", "data"]


@pytest.mark.parametrize("scheme", NON_HTTP)
async def test_a_non_http_scheme_on_an_allowed_host_is_refused_at_intake_and_at_read_time(media, photo_server, scheme):
    host, data = photo_server
    s = settings(media_root=media, url_allowlist=[host])  # 127.0.0.1:<port>: the allow-list compares the port too
    allowed = MediaRef(media_type="image/png", url=f"http://{host}/photo.png")
    check_reference("image", allowed, s)  # the control: same host, http
    assert await read_bytes(allowed, s) == data

    refused = MediaRef(media_type="image/png", url=f"{scheme}://{host}/photo.png")
    with pytest.raises(MediaRejected) as err:
        check_reference("image", refused, s)
    assert err.value.reason == "url_not_allowed"
    # the sender learns what to change, not that the URL "cannot be parsed"
    assert err.value.detail == f"{scheme} scheme: only http and https are fetched"
    with pytest.raises((MediaRejected, MediaUnreadable)) as err:  # an admitted reference may meet other settings
        await read_bytes(refused, s)
    assert err.value.reason == "url_not_allowed"  # refused by the check, not a failed fetch
    assert err.value.detail == f"{scheme} scheme: only http and https are fetched"


def test_a_url_without_a_scheme_is_told_only_http_and_https_are_fetched(media):
    s = settings(media_root=media, url_allowlist=["photos.example"])
    with pytest.raises(MediaRejected) as err:
        check_reference("image", MediaRef(media_type="image/png", url="//photos.example/x.png"), s)
    assert err.value.detail == "no scheme: only http and https are fetched"
    rejected = intake_rejection(s, "//photos.example/x.png")
    assert rejected.reason == "url_not_allowed"
    assert rejected.detail == "evidence b-photo: no scheme: only http and https are fetched"


@pytest.mark.parametrize(
    "url",
    ["http://[::1/photo.png", "https://[photos.example/x.png", "http://photos.example:99999/x.png", "ftp://[::1/x"],
)
def test_a_url_that_cannot_be_parsed_says_so(media, url):
    s = settings(media_root=media, url_allowlist=["photos.example", "::1"])
    with pytest.raises(MediaRejected) as err:
        check_reference("image", MediaRef(media_type="image/png", url=url), s)
    assert err.value.reason == "url_not_allowed" and err.value.detail == "the URL cannot be parsed"
    assert intake_rejection(s, url).detail == "evidence b-photo: the URL cannot be parsed"


async def test_an_http_url_on_a_host_not_allowed_is_refused_at_intake_and_at_read_time(media, photo_server):
    host, _ = photo_server
    s = settings(media_root=media, url_allowlist=["photos.example"])
    ref = MediaRef(media_type="image/png", url=f"http://{host}/photo.png")
    with pytest.raises(MediaRejected) as err:
        check_reference("image", ref, s)
    assert err.value.reason == "url_not_allowed"
    with pytest.raises((MediaRejected, MediaUnreadable)) as err:
        await read_bytes(ref, s)
    assert err.value.reason == "url_not_allowed"


@pytest.mark.parametrize(
    "url", ["http://[::1/photo.png", "https://[photos.example/x.png", "http://photos.example\x00/x"]
)
def test_a_malformed_url_is_refused_not_an_escaping_error(media, url):
    s = settings(media_root=media, url_allowlist=["photos.example", "::1"])
    with pytest.raises(MediaRejected) as err:
        check_reference("image", MediaRef(media_type="image/png", url=url), s)
    assert err.value.reason == "url_not_allowed"


def intake_rejection(s, url: str) -> Rejected:  # type: ignore[no-untyped-def]
    """What intake tells the sender of a case whose photo is at ``url``."""
    with pytest.raises(Rejected) as err:
        admit(one_photo_case(None, None, url=url), s)
    return err.value


# --- paths: traversal and symlinks ----------------------------------------------------------

INSIDE = ["inside.png", "sub/deep.png", "sub/../inside.png", "./sub/./deep.png", "alias.png"]
OUTSIDE = [
    "../secret.png",
    "sub/../../secret.png",
    "sub/../../media/../secret.png",
    "escape.png",
    "escape-dir/secret.png",
    "escape-dir/media/../secret.png",
]


@pytest.mark.parametrize("path", INSIDE)
async def test_paths_that_stay_inside_the_media_root_are_accepted_and_read(media, path):
    s = settings(media_root=media)
    check_reference("image", MediaRef(media_type="image/png", path=path), s)
    assert await read_bytes(MediaRef(media_type="image/png", path=path), s) == (media / path).resolve().read_bytes()


@pytest.mark.parametrize("path", [*OUTSIDE, str(Path("/etc/passwd"))])
async def test_paths_leaving_the_media_root_by_dotdot_or_symlink_are_refused(media, path):
    s = settings(media_root=media)
    ref = MediaRef(media_type="image/png", path=path)
    with pytest.raises(MediaRejected) as err:
        check_reference("image", ref, s)
    assert err.value.reason == "path_outside_media_root"
    with pytest.raises((MediaRejected, MediaUnreadable)) as err:
        await read_bytes(ref, s)
    assert err.value.reason == "path_outside_media_root"


@pytest.mark.parametrize("path", ["in\x00side.png", "sub/\x00", "loop.png"])
async def test_a_path_that_cannot_be_resolved_is_refused_not_an_escaping_error(media, path):
    os.symlink("loop.png", media / "loop.png")  # a symlink to itself
    s = settings(media_root=media)
    with pytest.raises(MediaRejected) as err:
        check_reference("image", MediaRef(media_type="image/png", path=path), s)
    assert err.value.reason == "path_outside_media_root"


async def test_a_symlink_retargeted_outside_after_admission_is_noted_on_the_clue(media):
    """Admitted while it pointed inside; by the time stage II reads it, it points outside. The
    read is refused and, like any unreadable item, noted on the clue; the case goes on."""
    s = settings(media_root=media, max_select_steps=2)
    link = media / "moving.png"
    link.symlink_to(media / "inside.png")
    case = one_photo_case("moving.png", None)
    check_reference("image", case.item("b-photo").media, s)  # admitted

    link.unlink()
    link.symlink_to(media.parent / "secret.png")
    llm = ScriptedLLM(select_first_then_perceive)
    chain, _, problems = await asyncio.wait_for(find_clues(case, FOCUS, llm, s), 30)
    [photo] = chain.buyer
    assert photo.problem == "path_outside_media_root"
    assert len(problems) == 1 and "path_outside_media_root" in problems[0]
    assert [c.task.item.id for c in llm.calls if c.role == "perceive"] == ["s-text"]


# --- video frames ---------------------------------------------------------------------------

PALETTE = [
    (255, 0, 0),
    (0, 255, 0),
    (0, 0, 255),
    (255, 255, 0),
    (0, 255, 255),
    (255, 0, 255),
    (255, 255, 255),
    (0, 0, 0),
    (128, 128, 128),
    (255, 128, 0),
]
FPS = 5


def solid_colour_clip(colours: list[tuple[int, int, int]]) -> bytes:
    """One frame per colour, each frame a single solid colour, H.264 (or MPEG-4) in MP4."""
    import av

    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
        stream = container.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for colour in colours:
            frame = av.VideoFrame.from_image(Image.new("RGB", (64, 64), colour))
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return out.getvalue()


def colour_of(jpeg: bytes) -> int:
    """Index in PALETTE of the decoded frame's mean colour (and it must be unambiguous)."""
    with Image.open(io.BytesIO(jpeg)) as image:
        mean = ImageStat.Stat(image.convert("RGB")).mean
    distances = [sum((m - p) ** 2 for m, p in zip(mean, colour, strict=True)) ** 0.5 for colour in PALETTE]
    best = min(range(len(PALETTE)), key=distances.__getitem__)
    assert distances[best] < 40, f"frame colour {mean} is near no palette colour"
    return best


@pytest.fixture
def clip(media: Path) -> str:
    (media / "clip.mp4").write_bytes(solid_colour_clip(PALETTE))
    return "clip.mp4"


@pytest.mark.parametrize("budget", [2, 3, 4, 7, 9])
async def test_sampled_frames_span_the_video_from_first_to_last(media, clip, budget):
    from cyberjurors.evidence.media import sample_frames

    total = len(PALETTE)
    frames = await sample_frames(MediaRef(media_type="video/mp4", path=clip), settings(media_root=media), budget)
    sources = [f.source_index for f in frames]
    assert len(frames) == budget and sources == sorted(set(sources))
    assert sources[0] == 0 and sources[-1] == total - 1  # the last frame is there whenever two fit
    assert [colour_of(f.image.data) for f in frames] == sources  # what was decoded is that frame
    assert [f.index for f in frames] == list(range(1, budget + 1))
    assert frames[-1].time_s == pytest.approx((total - 1) / FPS)


@pytest.mark.parametrize("budget", [10, 11, 30, None])
async def test_a_budget_at_least_the_length_samples_every_frame(media, clip, budget):
    from cyberjurors.evidence.media import sample_frames

    s = settings(media_root=media, frames={"per_video": 30})  # None: the configured default
    frames = await sample_frames(MediaRef(media_type="video/mp4", path=clip), s, budget)
    assert [f.source_index for f in frames] == list(range(len(PALETTE)))
    assert [colour_of(f.image.data) for f in frames] == list(range(len(PALETTE)))
