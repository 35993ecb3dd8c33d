"""Clue-frame recall: how often the frames a video's sampler picks include the frames that hold
its clue, uniform against event-aware selection (``frames.sampling = events``) at equal budgets.

Clips are the synthetic generator's video plants (``synth.video_plant``: long clips of several
shots, cutaways panned across, a hand-held main shot, sensor noise, a hand passing, the clue
lasting a set number of frames anywhere in the clip away from its ends), drawn for each clip
length and clue length. Each clip is sampled by the pipeline's own reader (``media._sample_video``,
the function ``sample_frames`` runs in the decode pool) with each budget and each method, all in
one run; for each: the share of the clue's frames among the picks, the share of clips with at
least one clue frame picked, and the wall and CPU time per clip (medians), decoding, scaling and
JPEG encoding of the picked frames included.

Run: .venv/bin/python bench/frame_recall.py [--cases 24] [--lengths 300,900,1800] [--clues 2,4,8]
     [--budgets 8,16,30] [--seed 0] [--cache /tmp/cyberjurors-frame-recall]
The clips are cached under --cache (by seed, length, clue and index), so a rerun only samples.
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import typer
from rich.table import Table

from cyberjurors.config import Settings
from cyberjurors.evaluation.synth import ClipShape, video_plant
from cyberjurors.evaluation.synth_media import decode_clip, encode_clip
from cyberjurors.evidence import media
from harness import EXAMPLES, machine, make_console, med, table

console = make_console(150)
METHODS = ("uniform", "events")


def clip(cache: Path, seed: int, length: int, clue: int, index: int) -> tuple[bytes, dict]:
    """The index-th planted clip of this shape, drawn once and kept under ``cache``."""
    stem = cache / f"s{seed}-n{length}-c{clue}-{index:03d}"
    video, record = stem.with_suffix(".mp4"), stem.with_suffix(".json")
    if video.exists() and record.exists():
        return video.read_bytes(), json.loads(record.read_text())
    data, info = video_plant(index, seed, ClipShape((length, length), (clue, clue)))
    info = {
        "frames": info["frames"],
        "frame_count": info["frame_count"],
        "fps": info["fps"],
        "cuts": info["cuts"],
        "scene": info["visual"].scene,
        "mark": info["visual"].mark,
    }
    stem.parent.mkdir(parents=True, exist_ok=True)
    video.write_bytes(data)
    record.write_text(json.dumps(info))
    return data, info


def sample(data: bytes, budget: int, settings: Settings) -> tuple[float, float, list[int]]:
    """(wall seconds, CPU seconds of the process, source indices of the frames picked). One
    sampling at a time, so the process's CPU time is this call's, whatever else loads the machine."""
    started, cpu = time.perf_counter(), time.process_time()
    frames = media._sample_video(io.BytesIO(data), "video/mp4", budget, settings, "bench", None)
    return time.perf_counter() - started, time.process_time() - cpu, [f.source_index for f in frames]


def main(
    cases: int = typer.Option(24, help="clips per clip length and clue length"),
    lengths: str = typer.Option("300,900,1800", help="clip lengths, in frames"),
    clues: str = typer.Option("2,4,8", help="clue lengths, in frames"),
    budgets: str = typer.Option("8,16,30", help="frames per video"),
    seed: int = 0,
    cache: Path = typer.Option(Path("/tmp/cyberjurors-frame-recall"), help="where the clips are kept"),
    sizes: str = typer.Option("1280x720,1920x1080", help="frame sizes for the cost table ('' for none)"),
    cost_clips: int = typer.Option(3, help="clips of the first length and clue re-encoded per size"),
) -> None:
    settings = {m: Settings(llm_backend="offline", precedent_backend="none", frames={"sampling": m}) for m in METHODS}
    shown = settings["events"]
    console.print(
        f"{machine()}; event share {shown.frames.event_share}, event pass cap "
        f"{shown.frames.event_max_frames} frames; {cases} clips per cell"
    )
    out = table(
        "clue-frame recall, uniform vs events: clue frames picked, clips with a clue frame picked; "
        "median wall and CPU ms per clip",
        [
            "frames",
            "clue",
            "budget",
            "uniform frames",
            "uniform clips",
            "events frames",
            "events clips",
            "wall ms u / e",
            "CPU ms u / e",
            "CPU e/u",
        ],
    )
    for length in (int(x) for x in lengths.split(",")):
        for clue in (int(x) for x in clues.split(",")):
            drawn = time.perf_counter()
            clips = [clip(cache, seed, length, clue, i) for i in range(cases)]
            drawn = time.perf_counter() - drawn
            for budget in (int(x) for x in budgets.split(",")):
                row = measure(clips, budget, settings)
                out.add_row(str(length), str(clue), str(budget), *row)
            console.print(f"  {length} frames, clue {clue}: {cases} clips ready in {drawn:.0f} s")
    console.print(out)
    console.print(examples([int(x) for x in budgets.split(",")], settings))
    first = (int(lengths.split(",")[0]), int(clues.split(",")[0]))
    if sizes:
        console.print(
            cost(
                [clip(cache, seed, *first, i) for i in range(cost_clips)],
                [tuple(map(int, size.split("x"))) for size in sizes.split(",")],
                max(int(x) for x in budgets.split(",")),
                settings,
            )
        )


def cost(
    clips: list[tuple[bytes, dict]], sizes: list[tuple[int, int]], budget: int, settings: dict[str, Settings]
) -> Table:
    """What the event pass costs as frames grow: the same clips scaled up and encoded again (same
    codec settings), sampled by both methods; CPU per clip and the event pass's extra per frame."""
    out = table(
        f"cost by frame size, budget {budget}: median CPU ms per clip",
        ["size", "clips", "frames", "uniform", "events", "extra ms per frame"],
    )
    for width, height in sizes:
        cpu: dict[str, list[float]] = {m: [] for m in METHODS}
        frames = 0
        for data, info in clips:
            decoded = decode_clip(data)
            frames = len(decoded)
            scaled = encode_clip((f.resize((width, height)) for f in decoded), info["fps"], gop=2 * info["fps"])
            for method in METHODS:
                cpu[method].append(sample(scaled, budget, settings[method])[1])
        ms = {m: med(cpu[m]) * 1000 for m in METHODS}
        out.add_row(
            f"{width}x{height}",
            str(len(clips)),
            str(frames),
            f"{ms['uniform']:.0f}",
            f"{ms['events']:.0f}",
            f"{(ms['events'] - ms['uniform']) / frames:.2f}",
        )
    return out


def examples(budgets: list[int], settings: dict[str, Settings]) -> Table:
    """The example videos (examples/media, drawn by hand for the demo, not by the generator):
    whether each method's frames include a frame of the clue named in their MANIFEST.json."""
    manifest = json.loads((EXAMPLES / "media" / "MANIFEST.json").read_text())
    out = table(
        "example videos: clue frame picked (uniform / events)",
        ["video", "frames", "clue frames", *map(str, budgets)],
        left=("video",),
    )
    for name, entry in sorted(manifest.items()):
        if not isinstance(entry, dict) or entry.get("kind") != "video":
            continue
        data, (first, last) = (EXAMPLES / "media" / name).read_bytes(), entry["clue_frames"]
        clue = set(range(first, last + 1))
        cells = [
            " / ".join("yes" if clue & set(sample(data, b, settings[m])[2]) else "no" for m in METHODS) for b in budgets
        ]
        out.add_row(name, str(entry["frames"]), f"{first}-{last}", *cells)
    return out


def measure(clips: list[tuple[bytes, dict]], budget: int, settings: dict[str, Settings]) -> list[str]:
    """Both methods on every clip, interleaved clip by clip so load changes hit both alike."""
    shares: dict[str, list[float]] = {m: [] for m in METHODS}
    seen: dict[str, list[bool]] = {m: [] for m in METHODS}
    wall: dict[str, list[float]] = {m: [] for m in METHODS}
    cpu: dict[str, list[float]] = {m: [] for m in METHODS}
    for data, info in clips:
        clue = set(info["frames"])
        for method in METHODS:
            elapsed, used, picks = sample(data, budget, settings[method])
            hit = clue & set(picks)
            shares[method].append(len(hit) / len(clue))
            seen[method].append(bool(hit))
            wall[method].append(elapsed)
            cpu[method].append(used)
    ms = {m: (med(wall[m]) * 1000, med(cpu[m]) * 1000) for m in METHODS}
    return [
        f"{sum(shares['uniform']) / len(clips):.0%}",
        f"{sum(seen['uniform']) / len(clips):.0%}",
        f"{sum(shares['events']) / len(clips):.0%}",
        f"{sum(seen['events']) / len(clips):.0%}",
        f"{ms['uniform'][0]:.0f} / {ms['events'][0]:.0f}",
        f"{ms['uniform'][1]:.0f} / {ms['events'][1]:.0f}",
        f"{ms['events'][1] / ms['uniform'][1]:.1f}x",
    ]


if __name__ == "__main__":
    typer.run(main)
