"""Evidence media: admission checks on references, and reading photos and video frames for the model.

Two kinds of failure, handled differently on purpose: a reference that is unsafe or unsupported
is rejected at intake (``MediaRejected``: the event is dead-lettered), while media that turns out
unreadable when the jury looks at it (``MediaUnreadable``) is recorded on the clue and the case
goes on, as a human juror would note "the video does not play" and still decide.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import av
from PIL import Image, UnidentifiedImageError

from .config import Settings
from .errors import CyberJurorsError, for_people
from .llm import ImagePart
from .media_store import StoreError, open_store
from .schemas import MediaRef

SUPPORTED_IMAGE_TYPES = {"image/jpeg", "image/png", "image/webp", "image/gif"}
SUPPORTED_VIDEO_TYPES = {"video/mp4", "video/webm", "video/quicktime", "video/x-matroska"}


class MediaRejected(CyberJurorsError, ValueError):
    """A media reference refused at intake; intake turns it into a ``Rejected`` with the same reason."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail, kind=reason, message=f"{reason}: {detail}")
        self.reason = reason


class MediaUnreadable(CyberJurorsError, RuntimeError):
    """Media that could not be read when a stage needed it: noted on the clue, not fatal."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail, kind=reason, message=f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class Frame:
    index: int  # 1-based among the sampled frames: what the model is told ("frame 7")
    source_index: int
    time_s: float
    image: ImagePart


def check_reference(kind: str, ref: MediaRef, settings: Settings) -> None:
    supported = {"image": SUPPORTED_IMAGE_TYPES, "video": SUPPORTED_VIDEO_TYPES}.get(kind, set())
    if ref.media_type not in SUPPORTED_IMAGE_TYPES | SUPPORTED_VIDEO_TYPES:
        raise MediaRejected("unsupported_media_type", f"{ref.media_type!r} is not a supported image or video type")
    if ref.media_type not in supported:
        raise MediaRejected("kind_mismatch", f"{ref.media_type!r} given for {kind} evidence")
    if ref.path is not None:
        _resolve(ref.path, settings)
    elif ref.url is not None:
        _check_url(ref.url, settings)
    else:
        data = _decode_inline(ref.data_base64 or "")
        if len(data) > settings.max_inline_bytes:
            raise MediaRejected("inline_too_large", f"{len(data)} bytes inline, limit {settings.max_inline_bytes}")


def _resolve(path: str, settings: Settings) -> Path:
    root = settings.media_root.resolve()
    try:
        full = (root / path).resolve()  # follows symlinks and "..", so neither can escape the root
    except (OSError, ValueError, RuntimeError) as err:  # a NUL byte, a symlink loop: nothing inside to read
        raise MediaRejected("path_outside_media_root", f"{path!r} is not a path inside the media root") from err
    if not full.is_relative_to(root):
        raise MediaRejected("path_outside_media_root", f"{path!r} resolves outside the media root")
    return full


def _check_url(url: str, settings: Settings) -> None:
    try:
        parts = urlsplit(url)
    except ValueError as err:  # e.g. an unclosed "[" in the host
        raise MediaRejected("url_not_allowed", "the URL cannot be parsed") from err
    if parts.scheme not in ("http", "https") or parts.hostname not in settings.url_allowlist:
        raise MediaRejected("url_not_allowed", f"{parts.scheme}://{parts.hostname} is not on the URL allow-list")


def _decode_inline(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as err:
        raise MediaRejected("bad_base64", f"inline data is not base64: {for_people(err)}") from err


async def read_bytes(ref: MediaRef, settings: Settings) -> bytes:
    try:
        data = await _read(ref, settings)
    except MediaRejected as err:  # admitted, but refused now (a symlink moved, the settings changed): noted, not fatal
        raise MediaUnreadable(err.reason, err.detail) from err
    if ref.sha256 and hashlib.sha256(data).hexdigest() != ref.sha256:
        raise MediaUnreadable("hash_mismatch", "content does not match its sha256")
    if len(data) > settings.max_media_bytes:
        raise MediaUnreadable("too_large", f"{len(data)} bytes, limit {settings.max_media_bytes}")
    return data


async def _read(ref: MediaRef, settings: Settings) -> bytes:
    if ref.path is not None:
        path = _resolve(ref.path, settings)
        try:
            size = path.stat().st_size
            if size > settings.max_media_bytes:
                raise MediaUnreadable("too_large", f"{ref.path}: {size} bytes, limit {settings.max_media_bytes}")
            return await asyncio.to_thread(path.read_bytes)
        except OSError as err:
            raise MediaUnreadable("missing_file", f"{ref.path}: {err.strerror}") from err
    if ref.url is not None:
        _check_url(ref.url, settings)
        return await _fetch(ref.url, settings.max_media_bytes, settings.llm_timeout_s)
    if ref.stored is not None:  # moved out of the stream at ingest (claim check): read from the media store
        try:
            return await open_store(settings).get(ref.stored, settings.max_media_bytes)
        except StoreError as err:
            reason = {"corrupt": "hash_mismatch", "too_large": "too_large"}.get(err.kind, "missing_file")
            raise MediaUnreadable(reason, err.detail) from err
    return _decode_inline(ref.data_base64 or "")


async def _fetch(url: str, limit: int, timeout_s: float) -> bytes:
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(url, allow_redirects=False) as response:
                response.raise_for_status()
                data = await response.content.read(limit + 1)
    except (aiohttp.ClientError, asyncio.TimeoutError) as err:
        raise MediaUnreadable("fetch_failed", f"{url}: {for_people(err) if str(err) else type(err).__name__}") from err
    if len(data) > limit:
        raise MediaUnreadable("too_large", f"{url}: more than {limit} bytes")
    return data


def _to_jpeg(image: Image.Image, max_side: int, label: str = "") -> ImagePart:
    image = image.convert("RGB")
    image.thumbnail((max_side, max_side))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=85)
    return ImagePart(out.getvalue(), "image/jpeg", label)


async def load_image(ref: MediaRef, settings: Settings, *, label: str = "") -> ImagePart:
    """The photo as a JPEG for the model, labelled with the evidence it belongs to so it can be cited
    (``LLMRequest`` refuses an image without a label)."""
    data = await read_bytes(ref, settings)

    def decode() -> ImagePart:
        try:
            with Image.open(io.BytesIO(data)) as probe:
                probe.verify()  # catches truncation that a lazy open would not
            with Image.open(io.BytesIO(data)) as image:
                image.load()
                return _to_jpeg(image, settings.max_image_side, label)
        except UnidentifiedImageError as err:
            raise MediaUnreadable("corrupt_image", f"not an image Pillow can read (declared {ref.media_type})") from err
        except (OSError, SyntaxError, ValueError) as err:
            raise MediaUnreadable("corrupt_image", f"cannot decode the image: {for_people(err)}") from err

    return await asyncio.to_thread(decode)


async def sample_frames(ref: MediaRef, settings: Settings, count: int | None = None, *,
                        label: str = "") -> list[Frame]:
    """Uniformly spaced frames over the whole video (all of them if it is shorter), each labelled
    "<label> frame 7 at 3.50s" so the model can cite the evidence and the frame."""
    data = await read_bytes(ref, settings)
    wanted = count or settings.frames_per_video

    def decode() -> list[Frame]:
        if not data:
            raise MediaUnreadable("no_frames", "the video file is empty")
        try:
            total = _count_frames(data)
            if total == 0:
                raise MediaUnreadable("no_frames", "the video has no decodable frames")
            k = min(wanted, total)
            picks = sorted({round(i * (total - 1) / (k - 1)) for i in range(k)} if k > 1 else {0})
            frames = []
            with av.open(io.BytesIO(data)) as container:
                stream = container.streams.video[0]
                for n, frame in enumerate(container.decode(stream)):
                    if n in picks:
                        time_s = float(frame.time) if frame.time is not None else n / float(stream.average_rate or 1)
                        index = len(frames) + 1
                        image = _to_jpeg(frame.to_image(), settings.max_image_side,
                                         f"{label} frame {index} at {time_s:.2f}s".lstrip())
                        frames.append(Frame(index, n, time_s, image))
            if not frames:
                raise MediaUnreadable("no_frames", "none of the video's frames could be decoded")
            return frames
        except av.FFmpegError as err:
            raise MediaUnreadable("corrupt_video", f"cannot decode the video: {for_people(err)}") from err

    return await asyncio.to_thread(decode)


def _count_frames(data: bytes) -> int:
    # Container headers often omit or misstate the frame count; counting the video packets is
    # honest and, unlike decoding, cheap (one compressed packet per video frame).
    with av.open(io.BytesIO(data)) as container:
        if not container.streams.video:
            return 0
        return sum(1 for packet in container.demux(container.streams.video[0]) if packet.size)
