"""The synthetic benchmark generator: valid, reproducible cases whose decisive clue is where the
manifest says it is, and only there (in the pixels for image and video plants). No broker needed."""

from __future__ import annotations

import asyncio
import hashlib
import io
import itertools
import json
import re
from collections import Counter
from pathlib import Path

import av
import pytest
from PIL import Image

from cyberjurors.config import Settings
from cyberjurors.evaluation import synth_media
from cyberjurors.evaluation.dataset import load_dataset
from cyberjurors.evaluation.synth import CATEGORIES, JURY_ACCURACY, SynthError, SynthManifest, generate, plan_cases
from cyberjurors.evidence.intake import admit
from cyberjurors.evidence.media import sample_frames
from cyberjurors.schemas import JURY_SIZE, DisputeCase

N = 30
NEUTRAL_CAPTION = re.compile(
    r"^(photo|picture|image|see photo|here is photo|video|clip|short video|here is video)"
    r" \(?\d+\)?( attached)?$"
)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    seen: list[int] = []
    out = tmp_path_factory.mktemp("synth")
    generate(out, cases=N, seed=11, progress=seen.append)
    assert seen == list(range(1, N + 1))
    return out


@pytest.fixture(scope="module")
def manifest(out: Path) -> SynthManifest:
    return SynthManifest.model_validate_json((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def cases(out: Path) -> dict[str, DisputeCase]:
    lines = (out / "cases.jsonl").read_text().splitlines()
    assert len(lines) == N
    return {c.case_id: c for c in (DisputeCase.model_validate_json(line) for line in lines)}


LOSSY = {"image/jpeg", "video/mp4"}
# How close two decoded pictures must be (synth_media.difference: mean absolute difference over
# the picture, and the worst 16x16 tile, in 0-255 levels). Two encodes of the same frames differ
# by compression noise only (measured: <= 0.7 mean, <= 7 per tile, PyAV 13 vs 18); one
# encode differs from the frames it was made from by one round of that noise (<= 3, <= 19). A
# mark that is missing or in the wrong frame moves some tile by 70 or more.
TWO_ENCODES = (1.5, 24.0)
ENCODE_VS_RENDER = (5.0, 40.0)
OVERLAY = 16  # rows of a clip's REC overlay; its timestamp text is not in the manifest


def alike(a: Image.Image, b: Image.Image, limits: tuple[float, float]) -> bool:
    mean, tile = synth_media.difference(a, b)
    return mean <= limits[0] and tile <= limits[1]


def below_overlay(image: Image.Image) -> Image.Image:
    return image.crop((0, OVERLAY, image.width, image.height))


def showing(frames: list[Image.Image], probe: synth_media.Probe) -> list[int]:
    return [i for i, frame in enumerate(frames) if probe.sees(frame)]


def media_files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted((root / "media").rglob("*")) if p.is_file()}


def json_without_lossy_hashes(out: Path) -> tuple[str, str]:
    """cases.jsonl and manifest.json exactly as written, except the hashes of lossy media bytes:
    each JPEG or MP4 item's sha256, and cases_sha256, which covers them, read "<lossy>"."""
    cases_text = (out / "cases.jsonl").read_text()
    lossy = [
        item.media.sha256
        for line in cases_text.splitlines()
        for item in DisputeCase.model_validate_json(line).items()
        if item.media is not None and item.media.media_type in LOSSY
    ]
    for digest in lossy:
        cases_text = cases_text.replace(f'"sha256":"{digest}"', '"sha256":"<lossy>"')
    assert lossy and cases_text.count('"sha256":"<lossy>"') == len(lossy)
    manifest_text = (out / "manifest.json").read_text()
    digest = json.loads(manifest_text)["cases_sha256"]
    assert manifest_text.count(digest) == 1
    return cases_text, manifest_text.replace(digest, "<lossy>")


def test_same_arguments_give_the_same_case_json_and_equivalent_media(tmp_path: Path) -> None:
    """The promise: byte-identical case JSON (but for the hashes of lossy bytes) and media that
    decode to the same pictures: PNG pixel for pixel, JPEG and H.264 within compression noise,
    with every clue in the same frames. Not the same MP4 bytes: libx264 does not promise them."""
    first, second, other = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    options = {"cases": 6, "seed": 4, "modality_mix": {"video": 2, "image": 1}}
    manifest = generate(first, **options)
    generate(second, **options)
    assert json_without_lossy_hashes(first) == json_without_lossy_hashes(second)
    a, b = media_files(first), media_files(second)
    assert sorted(a) == sorted(b)
    assert {Path(name).suffix for name in a} == {".png", ".jpg", ".mp4"}
    for name in a:
        if name.endswith(".mp4"):
            clip_a, clip_b = (synth_media.decode_clip(files[name].read_bytes()) for files in (a, b))
            assert len(clip_a) == len(clip_b) and clip_a[0].size == clip_b[0].size, name
            assert all(alike(x, y, TWO_ENCODES) for x, y in zip(clip_a, clip_b, strict=True)), name
            continue
        with Image.open(a[name]) as image_a, Image.open(b[name]) as image_b:
            assert image_a.format == image_b.format and image_a.size == image_b.size, name
            if image_a.format == "PNG":  # lossless: the same pixels (not the same zlib stream)
                assert image_a.convert("RGB").tobytes() == image_b.convert("RGB").tobytes(), name
            else:
                assert alike(image_a, image_b, TWO_ENCODES), name
    videos = [p for p in manifest.plants if p.modality == "video"]
    assert len(videos) == 4
    for plant in videos:
        for root in (first, second):
            frames = synth_media.decode_clip((root / plant.media_path).read_bytes())
            assert showing(frames, plant.probe) == plant.frames, (root.name, plant.case_id)
    generate(other, **{**options, "seed": 5})
    assert (other / "cases.jsonl").read_text() != (first / "cases.jsonl").read_text()


def test_the_equivalence_checks_catch_a_misplaced_or_missing_clue(manifest: SynthManifest, out: Path) -> None:
    """A clip of the same scene with the clue a few frames later, or not at all, fails both the
    probe and the comparison with the real clip: the checks above can fail."""
    plants = [p for p in manifest.plants if p.modality == "video"]
    assert plants
    for plant in plants[:3]:
        real = synth_media.decode_clip((out / plant.media_path).read_bytes())
        later = range(plant.frames[0] + 5, plant.frames[-1] + 6)
        for clue in (later, range(0)):
            images = synth_media.clip_frames(plant.visual, plant.frame_count, plant.fps, clue, "x")
            wrong = synth_media.decode_clip(synth_media.encode_clip(images, plant.fps))
            assert showing(wrong, plant.probe) == list(clue) != plant.frames, plant.case_id
            assert not all(alike(x, y, TWO_ENCODES) for x, y in zip(wrong, real, strict=False)), plant.case_id
            assert not all(
                alike(below_overlay(x), below_overlay(y), ENCODE_VS_RENDER) for x, y in zip(real, images, strict=False)
            ), plant.case_id
    # and a small patch (a 24 x 16 px label, 0.5 % of the picture) is caught by the tile figure
    frame = real[plant.frames[0]]
    patched = frame.copy()
    patched.paste((40, 40, 200), (100, 100, 124, 116))
    assert synth_media.difference(frame, patched)[0] < TWO_ENCODES[0] and not alike(frame, patched, TWO_ENCODES)


def test_cases_are_valid_and_shaped_like_real_disputes(
    cases: dict[str, DisputeCase], manifest: SynthManifest, out: Path
) -> None:
    settings = Settings(llm_backend="offline", media_root=out)
    for case in cases.values():
        assert 10 <= len(case.items()) <= 20, case.case_id
        for party in ("buyer", "seller"):
            numbers = [r.round for r in case.rounds if r.party == party]
            assert numbers == list(range(1, len(numbers) + 1)) and 2 <= len(numbers) <= 4
        assert [r.party for r in case.rounds][:2] == ["buyer", "seller"]
        assert case.metadata.delivered_at > case.metadata.ordered_at
        assert all(r.submitted_at > case.metadata.delivered_at for r in case.rounds)
        admit(case, settings)  # the pipeline's intake accepts the case and its media references
    assert Counter(c.metadata.category for c in cases.values()).keys() == set(CATEGORIES)
    assert len({c.metadata.product for c in cases.values()}) >= 15
    texts = [i.text for c in cases.values() for i in c.items() if i.kind == "text"]
    assert len(set(texts)) > 0.6 * len(texts)  # wording varies: not copies of one case


def test_the_evaluation_loads_cases_jsonl_with_out_as_media_root(out: Path) -> None:
    dataset = load_dataset(out / "cases.jsonl")
    assert len(dataset.cases) == N and dataset.media_root == out


def test_every_media_file_decodes_and_matches_its_hash(cases: dict[str, DisputeCase], out: Path) -> None:
    referenced = set()
    for case in cases.values():
        for item in case.items():
            if item.media is None:
                continue
            assert item.media.path and item.media.path.startswith(f"media/{case.case_id}/")
            data = (out / item.media.path).read_bytes()
            assert hashlib.sha256(data).hexdigest() == item.media.sha256
            referenced.add(item.media.path)
            if item.kind == "image":
                with Image.open(io.BytesIO(data)) as image:
                    image.load()
                    assert image.size == (synth_media.W, synth_media.H)
                    assert image.format == {"image/png": "PNG", "image/jpeg": "JPEG"}[item.media.media_type]
            else:
                with av.open(io.BytesIO(data)) as container:
                    stream = container.streams.video[0]
                    assert stream.codec_context.name in ("h264", "mpeg4")
                    frames = sum(1 for _ in container.decode(stream))
                assert 30 <= frames <= 45 and frames / float(stream.average_rate) <= 3.0
    assert referenced == {str(p.relative_to(out)) for p in (out / "media").rglob("*") if p.is_file()}


def test_manifest_agrees_with_the_cases_and_the_plan(
    cases: dict[str, DisputeCase], manifest: SynthManifest, out: Path
) -> None:
    assert manifest.complete and manifest.options.seed == 11 and manifest.options.cases == N
    assert manifest.cases_sha256 == hashlib.sha256((out / "cases.jsonl").read_bytes()).hexdigest()
    plans = plan_cases(N, 11)
    assert [p.planted_side for p in plans] == [p.planted_side for p in manifest.plants]
    assert [p.modality for p in plans] == [p.modality for p in manifest.plants]
    for plant in manifest.plants:
        case = cases[plant.case_id]
        assert case.ground_truth == plant.votes and plant.votes.total == JURY_SIZE
        assert plant.label == case.ground_truth.winner
        assert case.metadata.category == plant.category
    assert manifest.summary.modalities == {"text": 10, "image": 10, "video": 10}


def test_the_clue_sits_in_the_evidence_of_the_party_the_manifest_names(
    cases: dict[str, DisputeCase], manifest: SynthManifest
) -> None:
    for plant in manifest.plants:
        case = cases[plant.case_id]
        item = case.item(plant.evidence_id)  # KeyError if missing
        assert item.kind == plant.modality
        assert case.party_of(plant.evidence_id) == plant.clue_party
        assert plant.against_interest == (plant.clue_party != plant.planted_side)
    # both arrangements occur: own proof, and the other side's admission
    plans = plan_cases(200, 0)
    against = sum(p.holder != p.planted_side for p in plans)
    assert 30 < against < 130


def test_text_clue_is_in_the_planted_item_only(cases: dict[str, DisputeCase], manifest: SynthManifest) -> None:
    plants = [p for p in manifest.plants if p.modality == "text"]
    assert plants
    for plant in plants:
        case = cases[plant.case_id]
        assert plant.clue_words and plant.media_path is None
        for item in case.items():
            holds = any(w.lower() in (item.text or "").lower() for w in plant.clue_words)
            assert holds == (item.id == plant.evidence_id), (plant.case_id, item.id)


def test_image_clue_is_in_the_pixels_not_the_words(
    cases: dict[str, DisputeCase], manifest: SynthManifest, out: Path
) -> None:
    plants = [p for p in manifest.plants if p.modality == "image"]
    assert plants
    for plant in plants:
        case, visual, probe = cases[plant.case_id], plant.visual, plant.probe
        assert visual is not None and visual.mark is not None and probe is not None
        with Image.open(out / plant.media_path) as stored:
            stored.load()
            assert probe.share(stored) >= 1.5 * probe.min_share, plant.case_id  # by a margin: JPEG noise
            neutral = synth_media.render_still(visual, clue=False)
            assert probe.share(neutral) < 0.01  # the clue colour is not in the neutral picture's box
            marked = synth_media.render_still(visual)
            assert marked.tobytes() != neutral.tobytes()
            if stored.format == "PNG":  # lossless: the file is exactly the re-rendered picture
                assert stored.convert("RGB").tobytes() == marked.tobytes()
            else:  # lossy: the re-rendered picture, within compression noise, and not the neutral one
                assert alike(stored, marked, ENCODE_VS_RENDER) and not alike(stored, neutral, ENCODE_VS_RENDER)
        item = case.item(plant.evidence_id)
        assert NEUTRAL_CAPTION.match(item.text), item.text
        texts = " ".join(i.text or "" for i in case.items()).lower()
        assert not any(w.lower() in texts for w in plant.clue_words)


def assert_clue_only_in_its_frames(frames: list[Image.Image], plant, draw) -> None:  # type: ignore[no-untyped-def]
    """The clue shows in the plant's consecutive frames and no other, by a margin (so that another
    encoder's noise cannot flip a frame either way), and the clip re-drawn by ``draw`` from the
    plant's record matches what was decoded within compression noise."""
    assert plant.frames == list(range(plant.frames[0], plant.frames[-1] + 1)), plant.case_id
    assert showing(frames, plant.probe) == plant.frames, plant.case_id
    shares = [plant.probe.share(frame) for frame in frames]
    assert min(shares[i] for i in plant.frames) >= 1.5 * plant.probe.min_share, plant.case_id
    assert max(v for i, v in enumerate(shares) if i not in plant.frames) <= 0.5 * plant.probe.min_share
    redrawn = draw(plant.visual, plant.frame_count, plant.fps, range(plant.frames[0], plant.frames[-1] + 1), "")
    assert all(
        alike(below_overlay(x), below_overlay(y), ENCODE_VS_RENDER) for x, y in zip(frames, redrawn, strict=False)
    )


def test_video_clue_is_in_the_listed_frames_only(
    cases: dict[str, DisputeCase], manifest: SynthManifest, out: Path
) -> None:
    plants = [p for p in manifest.plants if p.modality == "video"]
    assert plants
    settings = Settings(llm_backend="offline", media_root=out)
    for plant in plants:
        frames = synth_media.decode_clip((out / plant.media_path).read_bytes())
        assert len(frames) == plant.frame_count
        assert 2 <= len(plant.frames) <= 4
        # the manifest describes the clip: re-rendered from visual, frame_count, fps and frames
        # (all but the overlay's timestamp)
        assert_clue_only_in_its_frames(frames, plant, synth_media.clip_frames)
        case = cases[plant.case_id]
        item = case.item(plant.evidence_id)
        assert NEUTRAL_CAPTION.match(item.text), item.text
        texts = " ".join(i.text or "" for i in case.items()).lower()
        assert not any(w.lower() in texts for w in plant.clue_words)
        # the pipeline's default frame sampling reads at least one of the clue frames
        sampled = asyncio.run(sample_frames(item.media, settings))
        assert {f.source_index for f in sampled} & set(plant.frames)


def test_neutral_clips_never_show_a_clue(cases: dict[str, DisputeCase], manifest: SynthManifest, out: Path) -> None:
    planted = {(p.case_id, p.evidence_id) for p in manifest.plants}
    probes = {p.case_id: p.probe for p in manifest.plants if p.modality == "video"}
    checked = 0
    for plant in manifest.plants:
        if plant.case_id not in probes:
            continue
        for item in cases[plant.case_id].items():
            if item.kind == "video" and (plant.case_id, item.id) not in planted:
                frames = synth_media.decode_clip((out / item.media.path).read_bytes())
                # a decoy of the same scene: same layout, but the probe box never lights up
                assert not any(probes[plant.case_id].sees(f) for f in frames)
                checked += 1
    assert checked > 0


def test_votes_follow_the_noise_model() -> None:
    plans = plan_cases(200, 0)
    assert all(p.votes.total == JURY_SIZE for p in plans)
    assert sum(p.planted_side == "seller" for p in plans) == round(200 * 0.626)
    label_seller = sum(p.votes.winner == "seller" for p in plans) / 200
    assert 0.54 < label_seller < 0.70  # 0.626 planted, pulled towards 0.5 by the few flipped labels
    flipped = sum(p.votes.winner != p.planted_side for p in plans) / 200
    assert 0 < flipped < 0.2
    mean_p = sum(p.juror_accuracy for p in plans) / 200
    assert abs(mean_p - JURY_ACCURACY[0] / sum(JURY_ACCURACY)) < 0.04
    shares = [p.votes.seller if p.planted_side == "seller" else p.votes.buyer for p in plans]
    assert len(set(shares)) > 8  # not all unanimous: the split varies from case to case


def test_options_shape_the_plan() -> None:
    assert Counter(p.modality for p in plan_cases(90, 1)) == {"text": 30, "image": 30, "video": 30}
    assert Counter(p.modality for p in plan_cases(40, 1, modality_mix={"image": 3, "video": 1})) == {
        "image": 30,
        "video": 10,
    }
    assert all(p.planted_side == "buyer" for p in plan_cases(20, 1, seller_share=0))
    assert Counter(p.scenario.category for p in plan_cases(25, 2)) == {c: 5 for c in CATEGORIES}
    with pytest.raises(SynthError):
        plan_cases(5, 1, modality_mix={"audio": 1})


def test_output_folder_rules(tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(SynthError, match="not empty"):
        generate(foreign, cases=2)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]

    previous = tmp_path / "bench"
    generate(previous, cases=4, seed=1, modality_mix={"text": 1})
    (previous / "results.jsonl").write_text("{}\n")  # e.g. an evaluation run beside it
    old_media = {p.name for p in (previous / "media").iterdir()}
    manifest = generate(previous, cases=2, seed=2, modality_mix={"text": 1})
    assert {p.name for p in (previous / "media").iterdir()} == {p.case_id for p in manifest.plants}
    assert not old_media & {p.case_id for p in manifest.plants}
    assert len((previous / "cases.jsonl").read_text().splitlines()) == 2
    assert (previous / "results.jsonl").exists()
    assert json.loads((previous / "manifest.json").read_text())["options"]["seed"] == 2
    with pytest.raises(SynthError):
        generate(tmp_path / "x", cases=2, items=(4, 6))


# --- long clips (issue 15): clip length and clue length as options --------------------------------

LONG = {"cases": 3, "seed": 5, "modality_mix": {"video": 1}, "clip_frames": (120, 160), "clue_frames": (3, 5)}


@pytest.fixture(scope="module")
def long_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SynthManifest]:
    out = tmp_path_factory.mktemp("synth-long")
    return out, generate(out, **LONG)


def cut_sizes(frames: list[Image.Image]) -> list[float]:
    """Mean difference from each frame to the next, below the overlay."""
    return [synth_media.difference(below_overlay(a), below_overlay(b))[0] for a, b in itertools.pairwise(frames)]


def test_long_clips_have_the_asked_length_and_the_clue_in_the_recorded_frames(long_out) -> None:
    out, manifest = long_out
    assert manifest.options.clip_frames == (120, 160) and manifest.options.clue_frames == (3, 5)
    assert len(manifest.plants) == 3
    for plant in manifest.plants:
        frames = synth_media.decode_clip((out / plant.media_path).read_bytes())
        assert len(frames) == plant.frame_count and 120 <= plant.frame_count <= 160, plant.case_id
        assert 3 <= len(plant.frames) <= 5
        assert_clue_only_in_its_frames(frames, plant, synth_media.shot_clip_frames)


def test_long_clips_cut_away_before_and_after_the_clue(long_out) -> None:
    """The recorded cuts are in the pixels (the picture jumps there, far more than it moves
    anywhere else), at least one on each side of the clue and none within a second of it."""
    out, manifest = long_out
    for plant in manifest.plants:
        cuts, clue = plant.cuts, plant.frames
        assert len(cuts) >= 2 and min(cuts) < clue[0] and max(cuts) > clue[-1], plant.case_id
        assert all(c <= clue[0] - plant.fps or c > clue[-1] + plant.fps for c in cuts), plant.case_id
        sizes = cut_sizes(synth_media.decode_clip((out / plant.media_path).read_bytes()))
        at_cuts = [sizes[c - 1] for c in cuts]
        elsewhere = [s for i, s in enumerate(sizes) if i + 1 not in cuts]
        assert min(at_cuts) > 1.5 * max(elsewhere), (plant.case_id, at_cuts, max(elsewhere))
        assert sorted(elsewhere)[len(elsewhere) // 2] > 2  # and between cuts the camera moves


def test_long_neutral_clips_never_show_the_clue(long_out) -> None:
    out, manifest = long_out
    cases = {
        c.case_id: c
        for c in (DisputeCase.model_validate_json(line) for line in (out / "cases.jsonl").read_text().splitlines())
    }
    checked = 0
    for plant in manifest.plants:
        for item in cases[plant.case_id].items():
            if item.kind == "video" and item.id != plant.evidence_id:
                frames = synth_media.decode_clip((out / item.media.path).read_bytes())
                assert 120 <= len(frames) <= 160 and not any(plant.probe.sees(f) for f in frames)
                checked += 1
    assert checked > 0


@pytest.mark.parametrize(
    "options",
    [
        {"clip_frames": (60, 100)},
        {"clip_frames": (200, 150)},
        {"clip_frames": (90, 7000)},
        {"clue_frames": (0, 2)},
        {"clue_frames": (2, 9)},
        {"clip_frames": (120, 200), "clue_frames": (4, 13)},
    ],
)
def test_clip_options_are_checked(tmp_path: Path, options: dict) -> None:
    with pytest.raises(SynthError):
        generate(tmp_path / "x", cases=1, **options)
    assert not (tmp_path / "x").exists()


def test_short_clips_take_a_longer_clue_too(tmp_path: Path) -> None:
    manifest = generate(tmp_path, cases=2, seed=3, modality_mix={"video": 1}, clue_frames=(7, 8))
    for plant in manifest.plants:
        frames = synth_media.decode_clip((tmp_path / plant.media_path).read_bytes())
        assert 30 <= len(frames) <= 45 and len(plant.frames) in (7, 8) and plant.cuts is None
        assert showing(frames, plant.probe) == plant.frames


def test_the_command_line_asks_for_long_clips(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cyberjurors.cli import app as cli

    out = tmp_path / "long"
    made = CliRunner().invoke(
        cli, ["synth", str(out), "--cases", "3", "--clip-frames", "90", "110", "--clue-frames", "3", "3"]
    )
    assert made.exit_code == 0, made.output
    manifest = SynthManifest.model_validate_json((out / "manifest.json").read_text())
    assert manifest.options.clip_frames == (90, 110) and manifest.options.clue_frames == (3, 3)
    [plant] = [p for p in manifest.plants if p.modality == "video"]
    frames = synth_media.decode_clip((out / plant.media_path).read_bytes())
    assert 90 <= len(frames) == plant.frame_count <= 110 and showing(frames, plant.probe) == plant.frames
    assert len(plant.frames) == 3 and plant.cuts
    refused = CliRunner().invoke(
        cli, ["synth", str(tmp_path / "bad"), "--cases", "3", "--clip-frames", "90", "110", "--clue-frames", "3", "12"]
    )
    assert refused.exit_code == 2 and "clue_frames" in refused.output
