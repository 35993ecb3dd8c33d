"""Event-aware frame selection (issue 15, item 1): with ``frames.sampling = events`` a clue that
lasts a few frames between two uniform picks is caught at the same budget, the frames keep their
index, time and label, and the event pass stays within the media bounds (the frames it may
decode, the decode pool, the header caps checked before it). Clips are real H.264 encodes,
checked by their decoded pixels, never by bytes."""

from __future__ import annotations

import asyncio
import io
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from cyberjurors.evaluation import synth_media
from cyberjurors.evidence import frame_events
from cyberjurors.evidence.media import MediaUnreadable, sample_frames
from cyberjurors.jury.clues import find_clues, passive_evidence
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.schemas import CaseFile, DisputeCase, MediaRef

from ...concurrency import Peak
from ...factories import settings
from .test_media_safety import FOCUS, one_photo_case, select_first_then_perceive

FPS = 15


def video(path: Path, data: bytes) -> MediaRef:
    path.write_bytes(data)
    return MediaRef(media_type="video/mp4", path=path.name)


def shown(jpeg: bytes, probe: synth_media.Probe) -> float:
    with Image.open(io.BytesIO(jpeg)) as image:
        return probe.share(image)


def uniform_grid(n: int, k: int) -> set[int]:
    """The uniform sampler's frames, written out here rather than taken from the code under test."""
    return {round(i * (n - 1) / (k - 1)) for i in range(k)}


# --- a clue between two uniform picks -------------------------------------------------------------

N, BUDGETS, CLUE = 300, (16, 30), 3


def between_picks(n: int, length: int, budgets: tuple[int, ...], seed: int) -> range:
    """A clue of ``length`` frames in the middle half of the clip that no budget's grid touches."""
    grids = set().union(*(uniform_grid(n, k) for k in budgets))
    starts = [s for s in range(n // 4, 3 * n // 4) if not grids & set(range(s - 1, s + length + 1))]
    start = random.Random(seed).choice(starts)
    return range(start, start + length)


@pytest.fixture(
    scope="module",
    params=[("appliance", "banner", synth_media.RED), ("fabric", "label", synth_media.RED)],
    ids=["banner", "label"],
)
def planted(request, tmp_path_factory) -> tuple[Path, MediaRef, synth_media.Probe, range]:
    """A 300-frame clip of the generator's long kind (shots, cutaways, pans, noise, a hand) whose
    clue lasts 3 frames and falls between the uniform picks of every budget tested."""
    scene, mark, colour = request.param
    visual = synth_media.Visual(scene=scene, mark=mark, label="E4 FAULT", colour=colour, title="Brio", seed=4242)
    clue = between_picks(N, CLUE, BUDGETS, seed=len(scene))
    root = tmp_path_factory.mktemp(scene)
    data = synth_media.encode_clip(
        synth_media.shot_clip_frames(visual, N, FPS, clue, "2026-03-02 10:00"), FPS, gop=2 * FPS
    )
    decoded = synth_media.decode_clip(data)
    probe = synth_media.clip_probe(visual)
    assert [i for i, f in enumerate(decoded) if probe.sees(f)] == list(clue)  # the clue is where it was put
    return root, video(root / "clip.mp4", data), probe, clue


@pytest.mark.parametrize("budget", BUDGETS)
async def test_a_three_frame_clue_between_uniform_picks_is_caught_by_events_and_missed_by_uniform(planted, budget):
    root, ref, probe, clue = planted
    uniform = await sample_frames(ref, settings(media_root=root), budget)
    events = await sample_frames(ref, settings(media_root=root, frames={"sampling": "events"}), budget)
    assert len(uniform) == len(events) == budget  # the same budget
    assert not {f.source_index for f in uniform} & set(clue)
    assert max(shown(f.image.data, probe) for f in uniform) < 0.5 * probe.min_share
    caught = [f for f in events if f.source_index in clue]
    assert caught and all(shown(f.image.data, probe) >= probe.min_share for f in caught)  # in the pixels sent
    assert {0, N - 1} <= {f.source_index for f in events}  # the skeleton still spans the clip


async def test_the_setting_reaches_the_perceiver_and_the_jurors_passive_read(planted):
    """Stage II's perceiver gets frames.per_video frames, the jurors (stage II off)
    frames.passive_per_video: the clue is among them with events, not with uniform sampling.
    One case file for both settings: the passive read's cache tells them apart."""
    root, _, probe, clue = planted
    raw = one_photo_case("clip.mp4", None).model_dump(mode="json")
    raw["rounds"][0]["items"][0].update(kind="video", media={"media_type": "video/mp4", "path": "clip.mp4"})
    case_file = CaseFile(case=DisputeCase.model_validate(raw), received_at="2026-09-02T10:00:00Z")
    for sampling, sees in (("uniform", False), ("events", True)):
        s = settings(media_root=root, max_select_steps=2, frames={"sampling": sampling, "per_video": 16})
        llm = ScriptedLLM(select_first_then_perceive)
        await find_clues(case_file.case, FOCUS, llm, s)
        [perceived] = [c.task for c in llm.calls if c.role == "perceive" and c.task.item.id == "b-photo"]
        assert len(perceived.frames) == 16
        assert bool({f.source_index for f in perceived.frames} & set(clue)) == sees, sampling

        s = settings(media_root=root, max_select_steps=0, frames={"sampling": sampling, "passive_per_video": 16})
        parts, problems = await passive_evidence(case_file, s)
        assert not problems and len(parts) == 16
        assert (max(shown(p.data, probe) for p in parts) >= probe.min_share) == sees, sampling


# --- labels, times and bounds on a clip whose every frame carries its own number ------------------

BITS, CELL = 9, 12


def numbered_clip(
    frames: int = 240, flash: range = range(0), cuts: tuple[int, ...] = (60, 150), gop: int = 24, fps: int = 12
) -> bytes:
    """160 x 120, frame i showing i in binary (BITS cells along the bottom edge), a new
    background at each cut, a square drifting across and a bright patch in the ``flash`` frames."""
    backgrounds = [(60, 90, 130), (150, 120, 80), (70, 130, 80), (120, 60, 110)]

    def draw(i: int) -> Image.Image:
        shot = sum(i >= c for c in cuts)
        image = Image.new("RGB", (160, 120), backgrounds[shot % len(backgrounds)])
        d = ImageDraw.Draw(image)
        x = 10 + (i * 2) % 100
        d.rectangle((x, 20, x + 16, 36), fill=(20, 20, 20))
        if i in flash:
            d.rectangle((100, 50, 140, 80), fill=(250, 250, 60))
        for bit in range(BITS):
            on = (i >> bit) & 1
            d.rectangle((bit * CELL, 120 - CELL, bit * CELL + CELL - 1, 119), fill=(255, 255, 255) if on else (0, 0, 0))
        return image

    return synth_media.encode_clip((draw(i) for i in range(frames)), fps, gop=gop)


def number_of(jpeg: bytes) -> int:
    with Image.open(io.BytesIO(jpeg)) as image:
        pixels = np.asarray(image.convert("L"), dtype=np.float32)
    cells = [pixels[120 - CELL + 3 : 120 - 3, bit * CELL + 3 : bit * CELL + CELL - 3].mean() for bit in range(BITS)]
    assert all(c < 60 or c > 190 for c in cells), cells  # every cell clearly black or white
    return sum(1 << bit for bit, c in enumerate(cells) if c > 128)


@pytest.fixture(scope="module")
def numbered(tmp_path_factory) -> tuple[Path, MediaRef, range]:
    root = tmp_path_factory.mktemp("numbered")
    flash = between_picks(240, 3, (12,), seed=3)
    return root, video(root / "numbered.mp4", numbered_clip(flash=flash)), flash


@pytest.mark.parametrize("budget", [5, 12, 40])
async def test_every_frame_event_selection_picks_keeps_its_index_time_and_label(numbered, budget):
    root, ref, flash = numbered
    frames = await sample_frames(
        ref, settings(media_root=root, frames={"sampling": "events"}), budget, label="evidence s2"
    )
    sources = [f.source_index for f in frames]
    assert len(frames) == budget and sources == sorted(set(sources))
    assert [number_of(f.image.data) for f in frames] == sources  # each picture is the frame it is said to be
    assert [f.index for f in frames] == list(range(1, budget + 1))
    assert [f.time_s for f in frames] == [pytest.approx(s / 12) for s in sources]
    assert [f.image.label for f in frames] == [f"evidence s2 frame {f.index} at {f.time_s:.2f}s" for f in frames]
    if budget >= 12:
        assert set(sources) & set(flash)


async def test_the_event_pass_decodes_no_more_frames_than_its_cap(numbered, monkeypatch):
    root, ref, _ = numbered
    decoded: list[int] = []
    analysed: list[set[int]] = []
    real_decode, real_thumbnails = frame_events._decode, frame_events.thumbnails

    def counting_decode(*args):
        decoded.append(0)
        for frame in real_decode(*args):
            decoded[-1] += 1
            yield frame

    def recording_thumbnails(*args):
        out = real_thumbnails(*args)
        analysed.append(set(out))
        return out

    monkeypatch.setattr(frame_events, "_decode", counting_decode)
    monkeypatch.setattr(frame_events, "thumbnails", recording_thumbnails)
    frames = await sample_frames(
        ref, settings(media_root=root, frames={"sampling": "events", "event_max_frames": 60}), 12
    )
    assert 0 < sum(decoded) <= 60 and len(analysed[0]) <= 60
    assert min(analysed[0]) < 30 and max(analysed[0]) > 200  # spread over the clip, not its first 60 frames
    assert [number_of(f.image.data) for f in frames] == [f.source_index for f in frames]
    assert len(frames) == 12

    decoded.clear(), analysed.clear()  # the control: a cap above the length analyses every frame
    await sample_frames(ref, settings(media_root=root, frames={"sampling": "events", "event_max_frames": 1000}), 12)
    assert sum(decoded) == 240 and analysed[0] == set(range(240))


async def test_uniform_sampling_runs_no_event_pass(numbered, monkeypatch):
    root, ref, _ = numbered
    calls: list[int] = []
    monkeypatch.setattr(frame_events, "thumbnails", lambda *a: calls.append(1) or {})
    await sample_frames(ref, settings(media_root=root), 12)
    assert calls == []
    await sample_frames(ref, settings(media_root=root, frames={"sampling": "events"}), 12)
    assert calls == [1]


async def test_the_header_caps_refuse_a_video_before_its_event_pass(numbered, monkeypatch):
    root, ref, _ = numbered
    calls: list[int] = []
    real = frame_events.thumbnails
    monkeypatch.setattr(frame_events, "thumbnails", lambda *a: calls.append(1) or real(*a))
    with pytest.raises(MediaUnreadable) as err:
        await sample_frames(
            ref, settings(media_root=root, intake_limits={"max_video_frames": 200}, frames={"sampling": "events"}), 12
        )
    assert err.value.reason == "video_too_long" and calls == []
    assert (
        len(
            await sample_frames(
                ref,
                settings(media_root=root, intake_limits={"max_video_frames": 240}, frames={"sampling": "events"}),
                12,
            )
        )
        == 12
    )
    assert calls == [1]


async def test_event_passes_run_inside_the_bounded_decode_pool(numbered, monkeypatch):
    root, ref, _ = numbered
    spy = Peak(frame_events.thumbnails, bound=1)
    monkeypatch.setattr(frame_events, "thumbnails", spy)
    s = settings(media_root=root, media_decode_concurrency=1, frames={"sampling": "events"})
    results = await asyncio.gather(*(sample_frames(ref, s, 8) for _ in range(3)))
    assert [len(r) for r in results] == [8, 8, 8] and spy.most == 1


async def test_a_clip_without_events_is_sampled_exactly_as_uniformly(tmp_path):
    """A still scene under sensor noise: the event budget goes back to the skeleton."""
    rng = np.random.default_rng(5)
    scene = np.asarray(
        synth_media.compose(synth_media.Visual(scene="document", seed=3))[0].resize((160, 120)), dtype=np.int16
    )
    frames = (
        Image.fromarray((scene + rng.normal(0, 3, scene.shape)).clip(0, 255).astype(np.uint8)) for _ in range(150)
    )
    ref = video(tmp_path / "still.mp4", synth_media.encode_clip(frames, FPS, gop=30))
    uniform = await sample_frames(ref, settings(media_root=tmp_path), 10)
    events = await sample_frames(ref, settings(media_root=tmp_path, frames={"sampling": "events"}), 10)
    assert [f.source_index for f in events] == [f.source_index for f in uniform] == sorted(uniform_grid(150, 10))


# --- the selection itself -------------------------------------------------------------------------


def test_a_flash_is_one_look_between_two_spikes_and_a_passing_hand_one_burst():
    score = {i: 1.0 for i in range(1, 200)}
    score.update({50: 40.0, 53: 38.0})  # a display lights up for frames 50-52
    score.update({i: 8.0 for i in range(120, 131)})  # something moving through frames 120-130
    score[150] = 90.0  # a cut
    found = frame_events.events(score, 200, fps=12)
    flash = next(e for e in found if e.start == 50)
    assert flash.pick in range(50, 53) and flash.covers == range(50, 53) and flash.score == 40.0
    motion = [e for e in found if e.start == 120]
    assert len(motion) == 1 and motion[0].covers == range(120, 130) and motion[0].score < 8.0
    cut = next(e for e in found if e.start == 150)
    assert cut.covers == range(150, 200) and 150 <= cut.pick <= 156
    assert not [e for e in found if 124 <= e.start <= 129]  # the burst is not split into many looks
    picks = frame_events.choose(200, 8, found, 0.5)
    assert len(picks) == 8 and set(picks) & set(range(50, 53))


@hypothesis_settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 3000),
    wanted=st.integers(1, 64),
    share=st.floats(0, 1),
    raw=st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 400), st.floats(0, 100)), max_size=40),
)
def test_choose_spends_exactly_the_budget_on_distinct_frames_of_the_clip(n, wanted, share, raw):
    found = [frame_events.Event(s, s + min(d // 2, 6), range(s, s + d), score) for s, d, score in raw if s < n]
    picks = frame_events.choose(n, wanted, found, share)
    assert len(picks) == min(wanted, n) and picks == sorted(set(picks)) and all(0 <= p < n for p in picks)
    assert picks[0] == 0


def test_spans_stay_within_the_cap_and_start_at_keyframes():
    keys = list(range(0, 10_000, 48))
    ranges = frame_events.spans(10_000, keys, 1800)
    assert sum(end - start for start, end in ranges) <= 1800 and len(ranges) == frame_events.SPANS
    assert all(start in keys for start, _ in ranges)
    assert ranges[0][0] == 0 and ranges[-1][1] > 9000  # from the start to the end of the clip
    assert frame_events.spans(1000, keys, 1800) == [(0, 1000)]
