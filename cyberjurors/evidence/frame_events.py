"""Event-aware frame selection (``frames.sampling = events``): the video's frame budget spent partly
on a uniform skeleton over the whole clip and partly on its visual events, scene cuts and brief
local changes (a display that lights up for a few frames, a label the camera passes), which a
uniform grid can step over.

The event pass decodes the video's frames in order with a decoder of its own (no in-loop
deblocking: the pictures are only compared, never shown) and keeps each one as a tiny thumbnail:
``THUMB_WIDTH`` pixels wide, each pixel the mean colour of its block of the frame. Motion and
sensor noise move block means little; something appearing moves them a lot. Per block, a
frame's change from the previous frame is measured against what that block usually does around
then, so a blinking overlay or a steady pan are not events and a flash is. It decodes at most
``frames.event_max_frames`` frames; a longer video is analysed in evenly spread stretches that
start at keyframes, the rest is left to the skeleton.

Pure numpy on the thumbnails; the decoding runs inside media.py's bounded decode pool, after the
header and timestamp checks.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import av
import numpy as np
from av.video.reformatter import VideoReformatter

THUMB_WIDTH = 32  # blocks across a frame: 32 x 24 for 4:3, 32 x 18 for 16:9
FLOOR = 2.0  # levels (0-255, mean of RGB): changes smaller than about this are noise however calm the block
Z_EVENT = 5.0  # a frame is a change point when some block moved this many spreads above its usual
BUSY_SHARE = 10  # percentile complement: a block's spread is its 90th percentile of change (blinks, tickers)
SPANS = 8  # stretches analysed when a video holds more frames than the cap
MOTION_GAP = 2  # change points this close belong to one burst of motion ...
SPIKE = 2.0  # ... unless one is this many times stronger than the frames either side of it
CLEAR = 20.0  # a change this strong is clear: a stronger one does not rank higher


@dataclass(frozen=True)
class Event:
    """A candidate frame: ``pick`` shows what changed at frame ``start``; any frame in ``covers``
    would show it as well; ``score`` is how strong the change was."""

    start: int
    pick: int
    covers: range
    score: float


def uniform(n: int, k: int) -> list[int]:
    """The uniform sampler's frames (the same formula as media.py's default)."""
    k = min(k, n)
    return sorted({round(i * (n - 1) / (k - 1)) for i in range(k)} if k > 1 else {0})


def spans(n: int, keyframe_indices: list[int], cap: int) -> list[tuple[int, int]]:
    """The frame ranges [start, end) the event pass decodes: the whole clip when it fits the cap,
    else ``SPANS`` evenly spread stretches of cap / SPANS frames, each from a keyframe (so no frame
    is decoded only to reach the stretch)."""
    if n <= cap:
        return [(0, n)]
    count = max(1, min(SPANS, len(keyframe_indices), cap // 2))
    length = cap // count
    out: list[tuple[int, int]] = []
    for i in range(count):
        want = round(i * (n - length) / max(1, count - 1))
        start = keyframe_indices[max(0, bisect.bisect_right(keyframe_indices, want) - 1)]
        if out and start < out[-1][1]:
            start = out[-1][1]  # may then begin between keyframes: the decode still starts at one
        end = min(n, start + length)
        if start < end:
            out.append((start, end))
    return out


def thumbnails(
    container: av.container.InputContainer,
    stream: av.VideoStream,
    pts: list[int],
    keyframes: list[tuple[int, int]],
    ranges: list[tuple[int, int]],
    cap: int,
    check_size: Callable[[int, int], None],
) -> dict[int, np.ndarray]:
    """Frame index -> thumbnail (float32, h x THUMB_WIDTH x 3) for the frames in ``ranges``,
    decoding at most ``cap`` frames in all. ``check_size`` sees every decoded frame's size first
    (a bitstream may hold larger frames than its header says)."""
    # a video stream's codec: PyAV makes it a VideoCodecContext (the name is a str, so its type hints cannot tell)
    decoder = cast(av.VideoCodecContext, av.CodecContext.create(stream.codec_context.name, "r"))
    decoder.extradata = stream.codec_context.extradata
    decoder.options = {"skip_loop_filter": "all"}  # compared, never shown: deblocking is wasted work here
    decoder.thread_count = 1  # one decode is one slot of media_decode_concurrency
    shrink = VideoReformatter()  # reused: its scaler is set up once, not per frame
    out: dict[int, np.ndarray] = {}
    decoded = 0
    for start, end in ranges:
        key = keyframes[max(0, bisect.bisect_right(keyframes, (pts[start], 2**63)) - 1)]
        for frame in _from_keyframe(container, stream, decoder, key, pts, start):
            decoded += 1
            index = bisect.bisect_left(pts, frame.pts) if frame.pts is not None else -1
            check_size(frame.width, frame.height)
            if index >= end:
                break
            if start <= index and index not in out:
                height = max(1, round(THUMB_WIDTH * frame.height / frame.width))
                small = shrink.reformat(frame, width=THUMB_WIDTH, height=height, format="rgb24", interpolation="AREA")
                out[index] = small.to_ndarray().astype(np.float32)
            if decoded >= cap:
                return out
    return out


def _from_keyframe(
    container: av.container.InputContainer,
    stream: av.VideoStream,
    decoder: av.VideoCodecContext,
    key: tuple[int, int],
    pts: list[int],
    start: int,
) -> Iterator[av.VideoFrame]:
    """Decoded frames from the keyframe ``key`` (pts, dts) on. Seeking by its pts lands on it where
    the container's index is kept by presentation time (MP4, in FFmpeg), and a whole group of
    pictures early when seeking by dts; other containers may overshoot by pts, so a seek that
    came out past ``start`` is made again by the earlier of the two."""
    for target in dict.fromkeys((key[0], min(key))):
        container.seek(target, stream=stream, backward=True)
        decoder.flush_buffers()
        frames = _decode(container, stream, decoder)
        first = next(frames, None)
        if first is None:
            return
        if first.pts is None or bisect.bisect_left(pts, first.pts) <= start or target == min(key):
            yield first
            yield from frames
            return


def _decode(
    container: av.container.InputContainer, stream: av.VideoStream, decoder: av.VideoCodecContext
) -> Iterator[av.VideoFrame]:
    for packet in container.demux(stream):
        yield from decoder.decode(packet if packet.size else None)


def changes(thumbs: dict[int, np.ndarray], fps: float) -> dict[int, float]:
    """Frame index -> how far the picture jumped from the previous frame, in spreads: per block,
    the change less the block's usual change just then (the calmer of the half second before and
    the half second after), over the block's 90th percentile of that (so a block that is always
    busy, a ticking clock, a blinking light, must move far more to count); the largest block's
    figure. Only frames whose previous frame was analysed too."""
    indices = [i for i in sorted(thumbs) if i - 1 in thumbs]
    if len(indices) < 3:
        return {}
    diff = np.stack([np.abs(thumbs[i] - thumbs[i - 1]).mean(axis=-1).ravel() for i in indices])
    excess = diff - _calm_side(diff, max(2, round(fps / 2)))
    spread = np.maximum(np.percentile(np.abs(excess), 100 - BUSY_SHARE, axis=0), FLOOR)
    score = (excess / spread).max(axis=1)
    return {i: float(s) for i, s in zip(indices, score, strict=True)}


def _calm_side(values: np.ndarray, half: int) -> np.ndarray:
    """Per row, the calmer of the mean of the ``half`` rows before it and of the ``half`` rows after
    it (the row itself left out), in O(rows). A flash's own onset and end, a cut, never raise the
    baseline they are measured against: one side of them is always clear of them."""
    total = np.vstack([np.zeros((1, values.shape[1]), values.dtype), np.cumsum(values, axis=0)])
    rows = np.arange(len(values))
    before_lo, after_hi = np.maximum(rows - half, 0), np.minimum(rows + 1 + half, len(values))
    with np.errstate(invalid="ignore", divide="ignore"):
        before = (total[rows] - total[before_lo]) / (rows - before_lo)[:, None]
        after = (total[after_hi] - total[rows + 1]) / (after_hi - rows - 1)[:, None]
    return np.fmin(before, after)  # a missing side (the first or last row) is NaN: the other one counts


def events(score: dict[int, float], n: int, fps: float) -> list[Event]:
    """Change points (score >= Z_EVENT) split the clip into looks. Change points at most
    ``MOTION_GAP`` frames apart are one burst of motion (a hand passing, a swing of the camera),
    unless one stands out of its neighbours by ``SPIKE`` times (a cut, a display lighting up
    while a hand moves): that one is a boundary of its own.
    Each look after a change point or a burst is a candidate, shown by a frame a little after it
    (at most half a second); a burst is a candidate too, shown by its middle frame, but it spreads
    its change over many frames, so its score is shared among them. A flash of a few frames is
    a look of its own between two change points."""
    points = sorted(i for i, s in score.items() if s >= Z_EVENT)
    bursts: list[list[int]] = []
    spiked = False  # the last burst is a lone spike, which nothing joins
    for i in points:
        spike = score[i] >= SPIKE * max(score.get(i - 1, 0.0), score.get(i + 1, 0.0))
        if bursts and not spike and not spiked and i - bursts[-1][-1] <= MOTION_GAP:
            bursts[-1].append(i)
        else:
            bursts.append([i])
            spiked = spike
    settle = max(1, round(fps / 2))
    out = []
    for k, burst in enumerate(bursts):
        first, last = burst[0], burst[-1]
        strength = max(score[i] for i in burst)
        if last > first:
            out.append(Event(first, (first + last - 1) // 2, range(first, last), strength / len(burst)))
        following = bursts[k + 1][0] if k + 1 < len(bursts) else n
        out.append(Event(last, last + min((following - last - 1) // 2, settle), range(last, following), strength))
    return out


def choose(n: int, wanted: int, found: list[Event], event_share: float) -> list[int]:
    """``wanted`` frame indices: a uniform skeleton, plus the strongest events that no chosen
    frame shows yet (``event_share`` of the budget at most). Slots no event needs go back to the
    skeleton, which is then drawn anew and the events weighed against it again, so every event
    taken is one the final skeleton misses, and a clip without events is sampled exactly as the
    uniform sampler would."""
    if wanted >= n:
        return list(range(n))
    slots = min(int(wanted * event_share), wanted - 1)
    while True:
        skeleton = uniform(n, wanted - slots)
        extra = _uncovered(n, skeleton, found, slots)
        if len(extra) == slots:  # slots only shrink, so this ends
            return sorted(skeleton + extra)
        slots = len(extra)


def _uncovered(n: int, skeleton: list[int], found: list[Event], slots: int) -> list[int]:
    """Up to ``slots`` event picks, best first, each showing an event no frame chosen so far shows.
    A look longer than the skeleton's spacing holds a skeleton frame anyway; the shorter it is,
    the likelier the skeleton steps over it, so a short look outranks a long one of equal score,
    and any score beyond ``CLEAR`` counts as CLEAR: once a change is clear, how much more the
    picture changed (a cut changes all of it) says nothing about how much it matters."""
    spacing = (n - 1) / max(1, len(skeleton) - 1)
    ranked = sorted(
        ((min(e.score, CLEAR) * max(0.0, 1 - len(e.covers) / spacing), e) for e in found),
        key=lambda pair: (-pair[0], pair[1].start),
    )
    taken = set(skeleton)
    extra: list[int] = []
    for priority, event in ranked:
        if len(extra) >= slots or priority <= 0:
            break
        if 0 <= event.pick < n and not any(i in event.covers for i in taken):
            taken.add(event.pick)
            extra.append(event.pick)
    return extra
