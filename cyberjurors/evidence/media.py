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
import bisect
import contextlib
import functools
import hashlib
import io
import os
import stat
import struct
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

import aiohttp
import av
from PIL import Image, UnidentifiedImageError
from yarl import URL

from ..config import EvidenceSettings, Settings
from ..errors import CyberJurorsError, for_people
from ..llm.port import ImagePart
from ..schemas import MediaRef
from . import frame_events
from .media_store import StoreError
from .stores import open_store

# What the bytes may turn out to be (Pillow's ``format``, PyAV's demuxer name) for each declared
# type. The declared type is the sender's claim; Pillow and FFmpeg go by the contents, so bytes
# that are none of these are refused whatever the claim. A phone's JPEG with a second picture in
# it (multi-picture format) opens as MPO, which is still a JPEG.
IMAGE_FORMATS = {"image/jpeg": ("JPEG", "MPO"), "image/png": ("PNG",), "image/webp": ("WEBP",), "image/gif": ("GIF",)}
_MP4 = "mov,mp4,m4a,3gp,3g2,mj2"
_MATROSKA = "matroska,webm"
VIDEO_CONTAINERS = {"video/mp4": _MP4, "video/quicktime": _MP4, "video/webm": _MATROSKA, "video/x-matroska": _MATROSKA}
SUPPORTED_IMAGE_TYPES = set(IMAGE_FORMATS)
SUPPORTED_VIDEO_TYPES = set(VIDEO_CONTAINERS)
_DECODED_IMAGE_FORMATS = ("JPEG", "PNG", "WEBP", "GIF")  # Pillow's openers (the JPEG one also yields MPO)
REDIRECTS = {301, 302, 303, 307, 308}
DEFAULT_PORTS = {"http": 80, "https": 443}
T = TypeVar("T")


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


def check_reference(kind: str, ref: MediaRef, settings: EvidenceSettings) -> None:
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
        if len(data) > settings.intake_limits.max_inline_bytes:
            raise MediaRejected(
                "inline_too_large", f"{len(data)} bytes inline, limit {settings.intake_limits.max_inline_bytes}"
            )


def _resolve(path: str, settings: EvidenceSettings) -> Path:
    root = settings.media_root.resolve()
    try:
        full = (root / path).resolve()  # follows symlinks and "..", so neither can escape the root
    except (OSError, ValueError, RuntimeError) as err:  # a NUL byte, a symlink loop: nothing inside to read
        raise MediaRejected("path_outside_media_root", f"{path!r} is not a path inside the media root") from err
    if not full.is_relative_to(root):
        raise MediaRejected("path_outside_media_root", f"{path!r} resolves outside the media root")
    return full


def _regular_file(path: Path, shown: str) -> BinaryIO:
    """The file opened for reading, only if it is a regular file: a device under media_root may
    never end (/dev/zero's numbers: read whole, it fills memory) and a FIFO never answers. Opened
    without blocking, since opening a FIFO waits for a writer, and checked on the opened file."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MediaUnreadable("not_a_file", f"{shown} is not a regular file (a directory, device or pipe)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _check_url(url: str, settings: EvidenceSettings, base: URL | None = None) -> URL:
    """The URL parsed once, by yarl (aiohttp's own URL type), and that same object is what is
    fetched: a check and a fetcher that parse differently (``http://a\\@b/``) cannot disagree."""
    if "\\" in url or any(ord(c) < 0x21 or c == "\x7f" for c in url):  # read differently by different parsers
        raise MediaRejected("url_not_allowed", "the URL holds a backslash, a space or a control character")
    try:
        parsed = base.join(URL(url)) if base is not None else URL(url)
    except (ValueError, TypeError) as err:  # an unclosed "[" in the host
        raise MediaRejected("url_not_allowed", "the URL cannot be parsed") from err
    # outside the try: MediaRejected is a ValueError, and caught there it would tell the sender the URL
    # cannot be parsed instead of what to change
    if parsed.scheme not in DEFAULT_PORTS:
        raise MediaRejected("url_not_allowed", f"{parsed.scheme or 'no'} scheme: only http and https are fetched")
    try:
        origin = (parsed.scheme, parsed.host, parsed.port)  # .port: explicit, else the scheme's default
    except (ValueError, TypeError) as err:  # a port out of range
        raise MediaRejected("url_not_allowed", "the URL cannot be parsed") from err
    if parsed.raw_user is not None or parsed.raw_password is not None:
        raise MediaRejected("url_not_allowed", "a URL with user information is not fetched")
    if origin not in _allowed_origins(tuple(settings.url_allowlist)):
        raise MediaRejected(
            "url_not_allowed",
            f"{parsed.scheme}://{parsed.host}:{parsed.port} is not on the URL allow-list (scheme, host and port)",
        )
    return parsed


@functools.lru_cache(maxsize=8)
def _allowed_origins(allowlist: tuple[str, ...]) -> frozenset[tuple[str, str | None, int | None]]:
    """(scheme, host, port) triples: "host" allows http on 80 and https on 443, "host:port" both
    schemes on that port, "scheme://host[:port]" exactly that origin. A bare IPv6 address is a host."""
    origins = set()
    for entry in allowlist:
        entry = entry.strip()
        bare_ipv6 = entry.count(":") > 1 and not entry.startswith("[") and "://" not in entry
        try:
            url = URL(entry if "://" in entry else f"//[{entry}]" if bare_ipv6 else f"//{entry}")
            schemes = [url.scheme] if url.scheme else list(DEFAULT_PORTS)
            origins |= {(s, url.host, url.explicit_port or DEFAULT_PORTS[s]) for s in schemes if s in DEFAULT_PORTS}
        except ValueError:
            continue  # an entry that is no origin allows nothing
    return frozenset(origins)


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
    if len(data) > settings.intake_limits.max_media_bytes:
        raise MediaUnreadable("too_large", f"{len(data)} bytes, limit {settings.intake_limits.max_media_bytes}")
    return data


async def _read(ref: MediaRef, settings: Settings) -> bytes:
    if ref.path is not None:
        path = _resolve(ref.path, settings)
        try:
            with _regular_file(path, ref.path) as file:
                size = os.fstat(file.fileno()).st_size
                if size > settings.intake_limits.max_media_bytes:
                    raise MediaUnreadable(
                        "too_large", f"{ref.path}: {size} bytes, limit {settings.intake_limits.max_media_bytes}"
                    )
                # one byte past the limit at most, should the file grow after its size was read
                return await asyncio.to_thread(file.read, settings.intake_limits.max_media_bytes + 1)
        except OSError as err:
            raise MediaUnreadable("missing_file", f"{ref.path}: {err.strerror}") from err
    if ref.url is not None:
        return await _fetch(_check_url(ref.url, settings), settings)
    if ref.stored is not None:  # moved out of the stream at intake (claim check): read from the media store
        try:
            return await open_store(settings).get(ref.stored, settings.intake_limits.max_media_bytes)
        except StoreError as err:
            reason = {"corrupt": "hash_mismatch", "too_large": "too_large"}.get(err.kind, "missing_file")
            raise MediaUnreadable(reason, err.detail) from err
    return _decode_inline(ref.data_base64 or "")


async def _fetch(url: URL, settings: Settings) -> bytes:
    """The whole body, up to ``max_media_bytes``, under one deadline for the whole exchange
    (connecting, redirects, a body that trickles in a byte at a time). Redirects are followed
    only to targets that pass the allow-list again."""
    shown = str(url)
    try:
        async with asyncio.timeout(settings.media_fetch_timeout_s):
            async with aiohttp.ClientSession() as session:
                for _ in range(settings.intake_limits.max_url_redirects + 1):
                    async with session.get(url, allow_redirects=False) as response:
                        if response.status not in REDIRECTS:
                            response.raise_for_status()
                            return await _body(response, shown, settings.intake_limits.max_media_bytes)
                        location = response.headers.get("Location", "")
                    url = _check_url(location, settings, base=url)  # MediaRejected: read_bytes notes it
                raise MediaUnreadable(
                    "fetch_failed", f"{shown}: more than {settings.intake_limits.max_url_redirects} redirects"
                )
    except TimeoutError as err:
        raise MediaUnreadable(
            "fetch_timeout", f"{shown}: not fetched within {settings.media_fetch_timeout_s}s"
        ) from err
    except aiohttp.ClientError as err:
        raise MediaUnreadable("fetch_failed", f"{shown}: {for_people(err)}") from err


async def _body(response: aiohttp.ClientResponse, shown: str, limit: int) -> bytes:
    # content.read(n) returns what has arrived so far, not n bytes: read chunk by chunk to the end
    if response.content_length is not None and response.content_length > limit:
        raise MediaUnreadable("too_large", f"{shown}: {response.content_length} bytes, limit {limit}")
    data = bytearray()
    async for chunk in response.content.iter_chunked(64 * 1024):
        data += chunk
        if len(data) > limit:
            raise MediaUnreadable("too_large", f"{shown}: more than {limit} bytes")
    return bytes(data)


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _decoder_pool(size: int) -> ThreadPoolExecutor:
    # One pool per process (another only if the setting differs, as in tests): at most `size`
    # decodes run at once however many cases and stages ask; the rest wait in its queue.
    if size not in _POOLS:
        _POOLS[size] = ThreadPoolExecutor(size, thread_name_prefix="media-decode")
    return _POOLS[size]


async def decoding(settings: Settings, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` in the process's decode pool: at most ``media_decode_concurrency`` decodes (and
    readings of an image's text, ``evidence/ocr.py``) at once, however many cases and stages ask."""
    pool = _decoder_pool(settings.media_decode_concurrency)
    return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(fn, *args))


_decode = decoding


def _fit(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    """The size within a max_side square, aspect kept, as ``Image.thumbnail`` computes it."""
    scale = min(1.0, max_side / max(size))
    return max(1, round(size[0] * scale)), max(1, round(size[1] * scale))


def _check_image_size(size: tuple[int, int], settings: Settings) -> None:
    width, height = size
    if max(width, height) > settings.intake_limits.max_image_dimension:
        raise MediaUnreadable(
            "image_too_large",
            f"{width}x{height} pixels, longest side limit {settings.intake_limits.max_image_dimension}",
        )
    if width * height > settings.intake_limits.max_image_pixels:
        raise MediaUnreadable(
            "image_too_large", f"{width}x{height} pixels, limit {settings.intake_limits.max_image_pixels}"
        )


def _to_jpeg(image: Image.Image, max_side: int, label: str = "") -> ImagePart:
    # A JPEG is decoded at 1/2, 1/4 or 1/8 scale straight away (never below the target); other
    # formats decode at full size, which the pixel cap bounds.
    image.draft("RGB", _fit(image.size, max_side))
    if image.mode not in ("RGB", "L", "RGBA", "LA"):  # palette, 1-bit, CMYK, 16-bit: resample in RGB
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
    image.thumbnail((max_side, max_side))
    out = io.BytesIO()
    image.convert("RGB").save(out, "JPEG", quality=85)
    return ImagePart(out.getvalue(), "image/jpeg", label)


def _image_part(data: bytes, media_type: str, settings: Settings, label: str, notes: list[str] | None) -> ImagePart:
    with _image_errors(media_type):
        _image_header(io.BytesIO(data), media_type, settings, notes)
        with Image.open(io.BytesIO(data)) as image:  # the header check admitted only the supported formats
            part = _to_jpeg(image, settings.max_image_side, label)
    return part


def _image_header(source: Path | io.BytesIO, media_type: str, settings: Settings, notes: list[str] | None) -> None:
    try:
        # only the supported formats' openers run: another plugin's may decode while opening (an
        # icon loads its largest picture), and a TIFF or an icon declared image/png is not admitted
        probe = Image.open(source, formats=_DECODED_IMAGE_FORMATS)  # lazy: reads the header only
    except UnidentifiedImageError:
        _refuse_other_format(source, media_type)
        raise  # nothing Pillow knows: corrupt_image, as before
    with probe:
        found = probe.format or ""
        if found not in IMAGE_FORMATS.get(media_type, ()) and notes is not None:
            notes.append(f"declared {media_type}, the bytes are {found}: read as {found}")
        _check_image_size(probe.size, settings)
        probe.verify()  # walks the chunks without inflating them: catches truncation a lazy open would not


def _refuse_other_format(source: Path | io.BytesIO, media_type: str) -> None:
    """Names the format of bytes no supported opener took, from its signature alone (each Pillow
    plugin's own test of the first 16 bytes, as ``Image.open`` makes it), nothing opened or decoded."""
    if isinstance(source, Path):
        with source.open("rb") as file:
            prefix = file.read(16)
    else:
        prefix = source.getvalue()[:16]
    Image.init()
    for name in Image.ID:
        accept = Image.OPEN[name][1]
        try:
            known = accept is not None and accept(prefix) is True  # a string: a warning, not a match
        except (SyntaxError, IndexError, TypeError, struct.error):  # what Image.open ignores from a test
            continue
        if known and name not in _DECODED_IMAGE_FORMATS:
            raise MediaUnreadable(
                "unsupported_media_type",
                f"the bytes are {name}, declared {media_type}: "
                "not a supported image format (JPEG, PNG, WebP, GIF); "
                "not decoded",
            )


@contextlib.contextmanager
def _image_errors(media_type: str) -> Iterator[None]:
    """What Pillow raises on hostile bytes, as MediaUnreadable reasons."""
    try:
        yield
    except MediaUnreadable:
        raise
    except Image.DecompressionBombError as err:  # beyond Pillow's own limit, refused in Image.open
        raise MediaUnreadable("image_bomb", for_people(err)) from err
    except UnidentifiedImageError as err:
        raise MediaUnreadable("corrupt_image", f"not an image Pillow can read (declared {media_type})") from err
    except ValueError as err:
        if "Decompressed data too large" in str(err) or "text chunks" in str(err):  # PNG zTXt/iTXt/iCCP bombs
            raise MediaUnreadable("image_bomb", for_people(err)) from err
        raise MediaUnreadable("corrupt_image", f"cannot decode the image: {for_people(err)}") from err
    except Exception as err:  # a decoder fed hostile bytes may raise anything: noted, not fatal
        raise MediaUnreadable("corrupt_image", f"cannot decode the image: {for_people(err)}") from err


async def load_image(
    ref: MediaRef, settings: Settings, *, label: str = "", notes: list[str] | None = None
) -> ImagePart:
    """The photo as a JPEG for the model, labelled with the evidence it belongs to so it can be cited
    (``LLMRequest`` refuses an image without a label). Its format is checked against the supported
    ones and its declared size against ``max_image_pixels`` and ``max_image_dimension`` before
    anything is decoded. A supported format other than the declared type is read, and said in ``notes``."""
    data = await read_bytes(ref, settings)
    return await _decode(settings, _image_part, data, ref.media_type, settings, label, notes)


async def sample_frames(
    ref: MediaRef, settings: Settings, count: int | None = None, *, label: str = "", notes: list[str] | None = None
) -> list[Frame]:
    """Frames over the whole video (all of them if it is shorter): uniformly spaced, or with
    ``frames.sampling = events`` a uniform skeleton plus its visual events, each labelled
    "<label> frame 7 at 3.50s" so the model can cite the evidence and the frame. The video's
    resolution, duration and frame count are checked before a frame is decoded; the frames are
    reached by seeking to the keyframe before each and come out downscaled. Only an MP4/QuickTime
    or Matroska/WebM container is read; one other than the declared type is said in ``notes``."""
    data = await read_bytes(ref, settings)
    wanted = count or settings.frames.per_video
    if not data:
        raise MediaUnreadable("no_frames", "the video file is empty")
    return await _decode(settings, _sample_video, io.BytesIO(data), ref.media_type, wanted, settings, label, notes)


@dataclass(frozen=True)
class Timeline:
    """The video stream's packets as the container lists them, read without decoding any."""

    pts: list[int]  # presentation order: pts[n] is frame n's timestamp
    keyframes: list[tuple[int, int]]  # (pts, dts) of each keyframe, by pts


# asks the probe in av.open not to decode frames: the header gives the size, a decoded 8192x8192
# frame would be the very allocation the caps exist to prevent
_PROBE_WITHOUT_DECODING = [{"skip_frame": "all"}] * 16


def _open_video(source: str | io.IOBase) -> av.container.InputContainer:
    """``av.open`` for reading (its default mode for these sources), the probe told not to decode."""
    # PyAV takes a dict of options per stream; its type hints say list[str], so no overload matches
    return av.open(source, "r", stream_options=_PROBE_WITHOUT_DECODING)  # type: ignore[call-overload]


def _sample_video(
    source: io.RawIOBase | io.BufferedIOBase,
    media_type: str,
    wanted: int,
    settings: Settings,
    label: str,
    notes: list[str] | None,
) -> list[Frame]:
    with _video_errors(), _open_video(source) as container:
        stream = _video_stream(container, media_type, settings, notes)
        line = _timeline(container, stream, settings)
        if not line.pts:
            raise MediaUnreadable("no_frames", "the video has no decodable frames")
        picks = _picks(container, stream, line, min(wanted, len(line.pts)), settings)
        frames = _grab(container, stream, line, picks, settings, label)
    if not frames:
        raise MediaUnreadable("no_frames", "none of the video's frames could be decoded")
    return frames


def _video_stream(
    container: av.container.InputContainer, media_type: str, settings: Settings, notes: list[str] | None
) -> av.VideoStream:
    """The first video stream, its container and header checked (nothing decoded)."""
    _check_container(container, media_type, notes)
    if not container.streams.video:
        raise MediaUnreadable("no_frames", "the file holds no video stream")
    stream = container.streams.video[0]
    _check_video_header(container, stream, settings)
    return stream


def _check_container(container: av.container.InputContainer, media_type: str, notes: list[str] | None) -> None:
    """FFmpeg probes the bytes whatever the declared type: a PNG declared video/mp4 opens as a
    one-frame image sequence (png_pipe), a GIF or an AVI as theirs. Only the containers the
    supported types name are read."""
    found = container.format.name
    if found not in VIDEO_CONTAINERS.values():
        raise MediaUnreadable(
            "unsupported_media_type",
            f"the bytes are {container.format.long_name} ({found}), "
            f"declared {media_type}: not an MP4/QuickTime or "
            "Matroska/WebM video; not decoded",
        )
    if found != VIDEO_CONTAINERS.get(media_type) and notes is not None:
        notes.append(f"declared {media_type}, the bytes are {container.format.long_name} ({found}): read as such")


@contextlib.contextmanager
def _video_errors() -> Iterator[None]:
    """What PyAV raises on hostile bytes, as MediaUnreadable reasons."""
    try:
        yield
    except MediaUnreadable:
        raise
    except av.FFmpegError as err:  # FFmpeg's own words, without its error number and PyAV's '<none>' file name
        raise MediaUnreadable("corrupt_video", f"cannot decode the video: {err.strerror or for_people(err)}") from err
    except ValueError as err:  # PyAV: a container without stream headers (MPEG-TS/PS), where the probe would decode
        raise MediaUnreadable("corrupt_video", f"not a supported video container: {for_people(err)}") from err


def _video_header(source: Path | io.BytesIO, media_type: str, settings: Settings, notes: list[str] | None) -> None:
    with (
        _video_errors(),
        _open_video(str(source) if isinstance(source, Path) else source) as container,
    ):
        _video_stream(container, media_type, settings, notes)


async def check_header(ref: MediaRef, settings: Settings, notes: list[str] | None = None) -> None:
    """An item the jury may never look at, checked as cheaply as it can be: its size, and the
    image's or video's header against the caps (a bomb, a corrupt file), nothing decoded. A file
    under ``media_root`` is opened where it lies; a stored object (inline media moved at intake, at
    most ``max_inline_bytes``) is read from the store. A URL is never fetched for this: it passes
    unchecked. Raises MediaUnreadable as reading the item would, and adds to ``notes`` what it would."""
    if ref.url is not None:
        return
    if ref.path is not None:
        try:
            path = _resolve(ref.path, settings)
            info = path.stat()
        except MediaRejected as err:
            raise MediaUnreadable(err.reason, err.detail) from err
        except OSError as err:
            raise MediaUnreadable("missing_file", f"{ref.path}: {err.strerror}") from err
        if not stat.S_ISREG(info.st_mode):  # Pillow or FFmpeg would wait on a FIFO, read a device without end
            raise MediaUnreadable("not_a_file", f"{ref.path} is not a regular file (a directory, device or pipe)")
        size = info.st_size
        if size > settings.intake_limits.max_media_bytes:
            raise MediaUnreadable(
                "too_large", f"{ref.path}: {size} bytes, limit {settings.intake_limits.max_media_bytes}"
            )
        source: Path | io.BytesIO = path
    else:
        data = await _read(ref, settings)
        size, source = len(data), io.BytesIO(data)
    if ref.media_type in SUPPORTED_IMAGE_TYPES:

        def check() -> None:
            with _image_errors(ref.media_type):
                _image_header(source, ref.media_type, settings, notes)
    elif not size:
        raise MediaUnreadable("no_frames", "the video file is empty")
    else:

        def check() -> None:
            _video_header(source, ref.media_type, settings, notes)

    await _decode(settings, check)


def _picks(
    container: av.container.InputContainer, stream: av.VideoStream, line: Timeline, k: int, settings: Settings
) -> list[int]:
    """Which frames to show: uniformly spaced (the default), or, with ``frames.sampling = events``,
    a uniform skeleton plus the clip's visual events (frame_events.py), found by an event pass that
    decodes at most ``frames.event_max_frames`` frames, in this same decode slot."""
    n = len(line.pts)
    if settings.frames.sampling != "events" or k >= n:
        return frame_events.uniform(n, k)
    cap = settings.frames.event_max_frames
    ranges = frame_events.spans(n, sorted({bisect.bisect_left(line.pts, p) for p, _ in line.keyframes}), cap)
    thumbs = frame_events.thumbnails(
        container,
        stream,
        line.pts,
        line.keyframes,
        ranges,
        cap,
        lambda width, height: _check_video_size(width, height, settings),
    )
    seconds = float((line.pts[-1] - line.pts[0]) * stream.time_base) if stream.time_base else 0.0
    fps = (n - 1) / seconds if seconds > 0 else 25.0
    found = frame_events.events(frame_events.changes(thumbs, fps), n, fps)
    return frame_events.choose(n, k, found, settings.frames.event_share)


def _check_video_size(width: int, height: int, settings: Settings) -> None:
    if (
        max(width, height) > settings.intake_limits.max_video_dimension
        or width * height > settings.intake_limits.max_video_pixels
    ):
        raise MediaUnreadable(
            "video_too_large",
            f"{width}x{height} frames, limits {settings.intake_limits.max_video_dimension} "
            f"a side and {settings.intake_limits.max_video_pixels} pixels",
        )


def _check_video_header(container: av.container.InputContainer, stream: av.VideoStream, settings: Settings) -> None:
    width, height = stream.codec_context.width, stream.codec_context.height
    if not width or not height:
        raise MediaUnreadable("corrupt_video", "the container does not state the video's frame size")
    _check_video_size(width, height, settings)
    if stream.frames > settings.intake_limits.max_video_frames:
        raise MediaUnreadable(
            "video_too_long", f"{stream.frames} frames, limit {settings.intake_limits.max_video_frames}"
        )
    seconds = [
        container.duration / av.time_base if container.duration else 0.0,
        float(stream.duration * stream.time_base) if stream.duration and stream.time_base else 0.0,
    ]
    if max(seconds) > settings.intake_limits.max_video_duration_s:
        raise MediaUnreadable(
            "video_too_long", f"{max(seconds):.1f}s, limit {settings.intake_limits.max_video_duration_s}s"
        )


def _timeline(container: av.container.InputContainer, stream: av.VideoStream, settings: Settings) -> Timeline:
    # Headers often omit or misstate the frame count and duration: the packets are the honest
    # account, and reading them costs no decoding (one compressed packet per frame).
    pts: list[int] = []
    keyframes: list[tuple[int, int]] = []
    for packet in container.demux(stream):
        if not packet.size:
            continue
        if packet.pts is None:
            raise MediaUnreadable("corrupt_video", "the video's packets carry no timestamps")
        pts.append(packet.pts)
        if packet.is_keyframe:
            keyframes.append((packet.pts, packet.dts if packet.dts is not None else packet.pts))
        if len(pts) > settings.intake_limits.max_video_frames:
            raise MediaUnreadable("video_too_long", f"more than {settings.intake_limits.max_video_frames} frames")
    pts.sort()
    if (
        pts
        and stream.time_base
        and float((pts[-1] - pts[0]) * stream.time_base) > settings.intake_limits.max_video_duration_s
    ):
        raise MediaUnreadable(
            "video_too_long",
            f"{float((pts[-1] - pts[0]) * stream.time_base):.1f}s of frames, limit {settings.intake_limits.max_video_duration_s}s",
        )
    return Timeline(pts, sorted(keyframes) or [(pts[0], pts[0])] if pts else [])


def _grab(
    container: av.container.InputContainer,
    stream: av.VideoStream,
    line: Timeline,
    picks: list[int],
    settings: Settings,
    label: str,
) -> list[Frame]:
    """Frame ``n`` of each pick: seek to the last keyframe at or before it and decode forward from
    there; the next pick goes on decoding when no whole group of pictures lies between, so a short
    clip is decoded once rather than once per pick."""
    frames: list[Frame] = []
    decoded: Iterator[av.VideoFrame] = iter(())
    position: int | None = None  # pts of the frame decoded last
    for n in picks:
        target = line.pts[n]
        at = max(0, bisect.bisect_right(line.keyframes, (target, _MAX)) - 1)
        key_pts, key_dts = line.keyframes[at]
        # seek when going on would decode at least one whole group of pictures that is not wanted
        if position is None or position >= target or (at > 0 and line.keyframes[at - 1][0] > position):
            # by dts: an index that is kept by dts (MP4) then lands on this keyframe or one before it
            container.seek(min(key_pts, key_dts), stream=stream, backward=True)
            decoded = container.decode(stream)
        frame = next((f for f in decoded if f.pts is not None and f.pts >= target), None)
        if frame is None or frame.pts is None:  # (it has a pts: the search above skips those without)
            break
        position = frame.pts
        source = bisect.bisect_left(line.pts, frame.pts)
        if frames and source <= frames[-1].source_index:
            continue
        _check_video_size(frame.width, frame.height, settings)  # a bitstream larger than its header said
        time_s = float(frame.time) if frame.time is not None else 0.0
        index = len(frames) + 1
        width, height = _fit((frame.width, frame.height), settings.max_image_side)
        image = frame.to_image(width=width, height=height)  # scaled by swscale, never a full-size RGB copy
        frames.append(
            Frame(
                index,
                source,
                time_s,
                _to_jpeg(image, settings.max_image_side, f"{label} frame {index} at {time_s:.2f}s".lstrip()),
            )
        )
    return frames


_MAX = 2**63
