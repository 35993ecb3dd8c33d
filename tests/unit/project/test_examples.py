"""The sample cases and their synthetic media: valid, consistent, reproducible, and the video clues
sit where the manifest says (and where uniform frame sampling finds them). No broker needed."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import io
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import av
import pytest
from PIL import Image

from cyberjurors.evaluation.synth_media import decode_clip, difference, encode_clip
from cyberjurors.evidence.intake import Draft, Duplicate, admit, fold
from cyberjurors.evidence.media import sample_frames
from cyberjurors.schemas import (
    JURY_SIZE,
    CaseOpened,
    DisputeCase,
    EvidenceClosed,
    EvidenceSubmitted,
    MediaRef,
    dispute_event,
)

from ...conftest import EXAMPLES
from ...factories import settings

MEDIA = EXAMPLES / "media"
MANIFEST = json.loads((MEDIA / "MANIFEST.json").read_text())
CASE_FILES = sorted((EXAMPLES / "cases").glob("*.json"))
INCREMENTAL_FILES = sorted((EXAMPLES / "incremental").glob("*.jsonl"))
VIDEOS = sorted(name for name, entry in MANIFEST.items() if entry["kind"] == "video")
IMAGES = sorted(name for name, entry in MANIFEST.items() if entry["kind"] == "image")
EVIDENCE_ID = re.compile(r"^(?P<party>[bs])(?P<round>\d+)-(?P<n>\d+)$")


def load_cases() -> list[DisputeCase]:
    return [DisputeCase.model_validate_json(p.read_text()) for p in CASE_FILES]


def incremental_events(path: Path) -> list:
    return [dispute_event.validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def folded(path: Path) -> Draft:
    draft = None
    for event in incremental_events(path):
        draft = fold(draft, event)
    assert draft is not None
    return draft


def all_cases() -> list[DisputeCase]:
    return load_cases() + [folded(p).to_case() for p in INCREMENTAL_FILES]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def probe(image: Image.Image, spec: dict) -> float:
    """The statistic each video's clue was designed to drive over spec["min"] (see make_media.py),
    recomputed here independently of the generator."""
    region = image.convert("RGB").crop(tuple(spec["box"]))
    n = region.width * region.height
    r, g, b = (sum(i * c for i, c in enumerate(band.histogram())) / n for band in region.split())
    if spec["stat"] == "red_minus_green":
        return r - g
    assert spec["stat"] == "luma", spec
    return 0.299 * r + 0.587 * g + 0.114 * b


# ----------------------------------------------------------------------------------------------
# cases


def test_every_case_file_is_a_valid_case_named_after_its_id():
    assert len(CASE_FILES) >= 12
    ids = []
    for path in CASE_FILES:
        case = DisputeCase.model_validate_json(path.read_text())  # strict: unknown fields are errors
        assert case.case_id == path.stem
        ids.append(case.case_id)
    assert len(set(ids)) == len(ids)


def test_all_five_categories_appear_at_least_twice():
    counts = Counter(c.metadata.category for c in load_cases())
    assert set(counts) == {"appliances", "clothing", "food", "digital", "others"}
    assert min(counts.values()) >= 2, counts


def test_ground_truth_mixes_winners_and_margins():
    cases = all_cases()
    assert all(c.ground_truth is not None and c.ground_truth.total == JURY_SIZE for c in cases)
    winners = Counter(c.ground_truth.winner for c in cases)
    assert 0.3 <= winners["buyer"] / len(cases) <= 0.5, winners  # roughly 40 / 60
    margins = {abs(c.ground_truth.buyer - c.ground_truth.seller) for c in cases}
    assert 1 in margins and max(margins) >= 13, margins  # close 9:8 splits and clear ones


@pytest.mark.parametrize("case", all_cases(), ids=lambda c: c.case_id)
def test_case_is_multi_round_with_consistent_evidence_ids(case: DisputeCase):
    for party in ("buyer", "seller"):
        rounds = sorted(r.round for r in case.rounds if r.party == party)
        assert rounds == list(range(1, len(rounds) + 1)) and len(rounds) >= 2, (party, rounds)
    for r in case.rounds:
        for item in r.items:
            m = EVIDENCE_ID.match(item.id)
            assert m, item.id
            assert m["party"] == r.party[0] and int(m["round"]) == r.round, item.id
            assert item.text and len(item.text) >= 10, item.id  # media carry the party's caption
    assert any(i.media is not None for i in case.items()), "every case has photo or video evidence"
    assert len(case.items()) >= 6, "redundant items too, so that selection matters"
    d = case.metadata
    assert d.delivered_at is None or d.ordered_at <= d.delivered_at
    assert all(
        r.submitted_at is None or d.delivered_at is None or r.submitted_at >= d.delivered_at for r in case.rounds
    )


@pytest.mark.parametrize("case", all_cases(), ids=lambda c: c.case_id)
def test_media_paths_exist_and_hashes_match(case: DisputeCase):
    admit(case, settings(media_root=EXAMPLES))  # supported type, path inside the media root
    for item in case.items():
        if item.media is None:
            continue
        ref = item.media
        assert ref.path is not None and ref.path.startswith("media/") and ref.sha256, item.id
        path = EXAMPLES / ref.path
        assert path.is_file(), ref.path
        assert sha256(path) == ref.sha256, f"{item.id}: {ref.path} changed; rerun make_media.py and update"
        entry = MANIFEST[path.name]
        assert entry["kind"] == item.kind and entry["media_type"] == ref.media_type, item.id


def test_every_video_is_evidence_in_some_case():
    used = {Path(i.media.path).name for c in all_cases() for i in c.items() if i.media is not None}
    assert set(VIDEOS) <= used
    assert len(used & set(IMAGES)) >= 8


def test_incremental_cases_fold_into_complete_cases():
    assert INCREMENTAL_FILES
    whole = {c.case_id for c in load_cases()}
    for path in INCREMENTAL_FILES:
        events = incremental_events(path)
        assert isinstance(events[0], CaseOpened) and isinstance(events[-1], EvidenceClosed)
        assert all(isinstance(e, EvidenceSubmitted) for e in events[1:-1]) and len(events) >= 4
        ids = [e.event_id for e in events]
        assert all(ids) and len(set(ids)) == len(ids)
        assert len({e.case_id for e in events}) == 1 and events[0].case_id not in whole
        draft = folded(path)
        assert draft.closed and draft.event_ids == ids
        case = draft.to_case()
        assert len(case.rounds) == len(events) - 2 and case.ground_truth is not None
        # replaying the file is harmless: the first repeated event is recognised as a duplicate
        with pytest.raises(Duplicate):
            fold(draft, events[1])


# ----------------------------------------------------------------------------------------------
# media


def test_manifest_covers_the_media_folder_and_sizes_are_small():
    files = {p.name for p in MEDIA.iterdir() if p.name != "MANIFEST.json"}
    assert files == set(MANIFEST)
    assert len(IMAGES) >= 8 and len(VIDEOS) >= 2
    for name, entry in MANIFEST.items():
        data = (MEDIA / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"] and len(data) == entry["bytes"], name
        assert entry["clue"], name
        if entry["kind"] == "image":
            assert len(data) <= 100_000, name
            with Image.open(io.BytesIO(data)) as image:
                assert image.format in ("PNG", "JPEG") and max(image.size) <= 640, name
                assert image.size == (entry["width"], entry["height"])
        else:
            assert len(data) <= 300_000 and entry["width"] <= 320 and entry["height"] <= 240, name


def decode(path: str | Path) -> tuple[list[Image.Image], list[float], av.video.stream.VideoStream]:
    with av.open(str(MEDIA / path)) as container:
        stream = container.streams.video[0]
        frames = list(container.decode(stream))
        return [f.to_image() for f in frames], [float(f.time) for f in frames], stream


@pytest.mark.parametrize("name", VIDEOS)
def test_video_shows_the_clue_only_in_the_stated_frames(name: str):
    entry = MANIFEST[name]
    images, times, stream = decode(name)
    assert stream.codec_context.name in ("h264", "mpeg4") and stream.codec_context.pix_fmt == "yuv420p"
    assert len(images) == entry["frames"] and images[0].size == (entry["width"], entry["height"])
    assert 5 <= entry["fps"] <= 10 and 8 <= len(images) / entry["fps"] <= 12
    first, last = entry["clue_frames"]
    assert 2 <= last - first + 1 <= 5, "the clue is in a few consecutive frames only"
    assert times[first] == pytest.approx(entry["clue_times_s"][0]) and times[last] == pytest.approx(
        entry["clue_times_s"][1]
    )
    values = [probe(image, entry["probe"]) for image in images]
    shows = [n for n, v in enumerate(values) if v >= entry["probe"]["min"]]
    assert shows == list(range(first, last + 1)), [round(v) for v in values]
    # and by a margin, so that codec noise cannot flip the answer
    assert min(values[first : last + 1]) - entry["probe"]["min"] >= 20
    assert entry["probe"]["min"] - max(v for n, v in enumerate(values) if n not in shows) >= 20


@pytest.mark.parametrize("name", VIDEOS)
async def test_uniform_sampling_catches_the_clue(name: str):
    entry = MANIFEST[name]
    s = settings(media_root=EXAMPLES)
    first, last = entry["clue_frames"]
    assert last - first + 1 > entry["frames"] / s.frames.per_video, "the window must outlast the sampling step"
    ref = MediaRef(media_type="video/mp4", path=f"media/{name}", sha256=entry["sha256"])
    frames = await sample_frames(ref, s)
    assert len(frames) == s.frames.per_video == 30
    assert [f.index for f in frames] == list(range(1, 31))
    showing = [
        f.source_index
        for f in frames
        if probe(Image.open(io.BytesIO(f.image.data)), entry["probe"]) >= entry["probe"]["min"]
    ]
    assert showing, "no sampled frame shows the clue"
    assert all(first <= n <= last for n in showing)
    assert showing == [f.source_index for f in frames if first <= f.source_index <= last]


# make_media.py again: the same pictures, not the same bytes. PNG's zlib stream, JPEG and
# libx264 are allowed to change between library builds and CPUs (libx264 even between two runs),
# and another FreeType anti-aliases text a little differently, so a rerun is compared with the
# committed files by decoded pixels (synth_media.difference: mean absolute difference over the
# picture and over its worst 16x16 tile, in 0-255 levels). Measured between Pillow 10.4 / PyAV
# 13.1 and Pillow 13 / PyAV 18: <= 0.7 mean and <= 7 per tile; a clue that is missing or in
# another frame moves a tile by 60 or more.
ALIKE = (1.5, 24.0)


def alike(a: Image.Image, b: Image.Image) -> bool:
    mean, tile = difference(a, b)
    return mean <= ALIKE[0] and tile <= ALIKE[1]


@functools.cache
def make_media_module():
    """examples/make_media.py as a module (it is a script, not part of the package)."""
    name = "examples_make_media"
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / "make_media.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def remade(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("media")
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "make_media.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    assert all(name in result.stdout for name in MANIFEST)
    return out


def test_make_media_rewrites_the_committed_manifest_but_for_the_bytes(remade: Path):
    """Everything MANIFEST.json says about a file but its sha256 and size: those identify one
    particular encode (the committed one, which the cases' sha256 also name)."""
    made = json.loads((remade / "MANIFEST.json").read_text())

    def described(manifest: dict) -> dict:
        return {
            name: {k: v for k, v in entry.items() if k not in ("sha256", "bytes")} for name, entry in manifest.items()
        }

    assert described(made) == described(MANIFEST)
    assert {p.name for p in remade.iterdir()} == set(made) | {"MANIFEST.json"}
    for name, entry in made.items():  # a rerun's manifest does describe the rerun's own bytes
        assert sha256(remade / name) == entry["sha256"] and (remade / name).stat().st_size == entry["bytes"]


@pytest.mark.parametrize("name", IMAGES)
def test_make_media_redraws_the_committed_image(remade: Path, name: str):
    with Image.open(MEDIA / name) as committed, Image.open(remade / name) as fresh:
        assert fresh.format == committed.format and fresh.size == committed.size
        assert alike(fresh, committed), difference(fresh, committed)


@pytest.mark.parametrize("name", VIDEOS)
def test_make_media_reencodes_the_committed_video(remade: Path, name: str):
    entry = MANIFEST[name]
    committed, _, _ = decode(MEDIA / name)
    fresh, times, _ = decode(remade / name)
    assert len(fresh) == len(committed) == entry["frames"] and fresh[0].size == committed[0].size
    assert times == pytest.approx([n / entry["fps"] for n in range(entry["frames"])])
    worst = [difference(a, b) for a, b in zip(fresh, committed, strict=True)]
    assert all(alike(a, b) for a, b in zip(fresh, committed, strict=True)), max(worst, key=lambda w: w[1])
    # the fresh encode shows the clue in the frames the manifest names, and in no other
    first, last = entry["clue_frames"]
    values = [probe(image, entry["probe"]) for image in fresh]
    assert [n for n, v in enumerate(values) if v >= entry["probe"]["min"]] == list(range(first, last + 1))


@pytest.mark.parametrize("name", VIDEOS)
def test_the_rerun_checks_catch_a_misplaced_or_missing_clue(name: str):
    """Drawn and encoded with the clue 6 frames late, or not at all, a video fails both checks
    above: the probe's frames and the frame-by-frame comparison with the committed file."""
    entry, make_media = MANIFEST[name], make_media_module()
    spec = next(v for v in make_media.VIDEOS if v.name == name)
    committed, _, _ = decode(MEDIA / name)
    first, last = entry["clue_frames"]
    assert spec.clue == range(first, last + 1)
    for clue in (range(first + 6, last + 7), range(0)):
        wrong = dataclasses.replace(spec, clue=clue)
        frames = decode_clip(
            encode_clip([wrong.draw(i, wrong) for i in range(wrong.frames)], wrong.fps, crf="26", preset="medium")
        )
        shows = [n for n, image in enumerate(frames) if probe(image, entry["probe"]) >= entry["probe"]["min"]]
        assert shows == list(clue), (clue, shows)
        assert not all(alike(a, b) for a, b in zip(frames, committed, strict=False)), clue
    # and in a still, a 24 x 16 px patch (a date, a percentage) fails the tile figure
    with Image.open(MEDIA / "phone-battery.png") as image:
        patched = image.convert("RGB")
        patched.paste((220, 30, 30), (240, 360, 264, 376))
        assert difference(image, patched)[0] < ALIKE[0] and not alike(image, patched)


def test_readme_lists_every_case():
    readme = (EXAMPLES / "README.md").read_text()
    for case in all_cases():
        assert f"`{case.case_id}`" in readme, case.case_id
