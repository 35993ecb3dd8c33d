"""`cyberjurors synth`: a seeded synthetic benchmark of multi-round multimodal dispute cases.

Each case is a ``DisputeCase`` with 10-20 evidence items over 2-4 rounds per party: greetings,
shipping chatter, irrelevant photos, and confident claims from both sides that cancel out. One
item holds the decisive clue for the planted side, in text (a courier record, a party's slip),
in an image's pixels, or in 2-4 frames of a short H.264 clip; media captions stay neutral. The
17 ground-truth votes come from a noise model around the planted truth (see ``JURY_ACCURACY``).
This is synthetic data for measuring the pipeline, not a substitute for real jury data: see
docs/synthetic.md.

    manifest = generate(Path("out"), cases=100, seed=0)   # out/cases.jsonl, out/media/, out/manifest.json
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal, TypeVar

import numpy as np
from pydantic import Field

from ..errors import CyberJurorsError
from ..schemas import CATEGORIES, JURY_SIZE, PARTIES, DisputeCase, GroundTruthVotes
from ..schemas.case import Strict
from . import synth_media as media
from .synth_templates import CAPTIONS, LINES, SCENARIOS, Fact, Scenario, case_facts, fill, iso

GENERATOR = "cyberjurors.synth"
VERSION = 2  # 2: long clips (clip_frames, clue_frames), plants record their cuts
Modality = Literal["text", "image", "video"]
Party = Literal["buyer", "seller"]
K = TypeVar("K")
MODALITIES: tuple[Modality, ...] = ("text", "image", "video")
MEDIA_SUFFIX = {"image/png": "png", "image/jpeg": "jpg", "video/mp4": "mp4"}

#: p ~ Beta(a, b): a juror's chance of voting for the planted side (mean 0.78, sd 0.14)
JURY_ACCURACY = (6.24, 1.76)
#: what the pipeline's frame sampler picks by default (Settings().frames.per_video); each clip's
#: clue frames include at least one of the frames it would sample
DEFAULT_FRAMES_PER_VIDEO = 30


class SynthError(CyberJurorsError, ValueError):
    """Bad options, or an output folder that must not be overwritten."""

    kind = "bad_synth_options"


class SynthOptions(Strict):
    cases: int = Field(ge=1)
    seed: int = Field(ge=0)
    seller_share: float = Field(ge=0, le=1)
    modality_mix: dict[Modality, float]
    items: tuple[int, int]
    clip_frames: tuple[int, int] | None = Field(None, description="frames per clip; none: short hand-held clips")
    clue_frames: tuple[int, int] = (2, 4)


class Plant(Strict):
    """Where one case's decisive clue is and what the ground truth made of it."""

    case_id: str
    category: str
    scenario: str
    planted_side: Party
    modality: Modality
    evidence_id: str
    clue_party: Party = Field(description="whose evidence holds the clue")
    against_interest: bool = Field(description="the clue sits in the other party's evidence (an admission)")
    clue: str = Field(description="what the clue shows, for people; the case never says it in a caption")
    clue_words: list[str] = Field(description="strings that carry the clue; a media plant's texts never contain them")
    media_path: str | None = None
    visual: media.Visual | None = Field(None, description="re-render with synth_media.render_still / clip_frames")
    probe: media.Probe | None = Field(None, description="pixel test for the clue (clip coordinates for videos)")
    frames: list[int] | None = Field(None, description="0-based decode-order frames showing the clue")
    frame_count: int | None = None
    fps: int | None = None
    cuts: list[int] | None = Field(None, description="long clips: the frames where a new shot begins")
    juror_accuracy: float
    votes: GroundTruthVotes
    label: Party = Field(description="the majority of the votes: the case's ground-truth label")


class Summary(Strict):
    cases: int
    planted_seller_share: float
    label_seller_share: float
    label_disagrees_share: float = Field(description="labels that went against the planted truth")
    against_interest_share: float
    modalities: dict[str, int]
    categories: dict[str, int]


class SynthManifest(Strict):
    generator: str = GENERATOR
    version: int = VERSION
    complete: bool = True
    options: SynthOptions
    noise_model: dict[str, float | int | str]
    environment: dict[str, str] = Field(
        description="library versions: others may draw text a little differently and encode other bytes"
    )
    cases_sha256: str = Field(
        description="sha256 of cases.jsonl as written; it covers each media file's sha256, "
        "so it identifies this run's encode, not just the seed and options"
    )
    summary: Summary
    plants: list[Plant]


# ----------------------------------------------------------------------------------------------
# the plan: which case gets which category, planted side and modality, and its votes


@dataclass(frozen=True)
class CasePlan:
    index: int
    scenario: Scenario
    planted_side: Party
    modality: Modality
    variant: int  # which of the fact's holders/records for this modality
    juror_accuracy: float
    votes: GroundTruthVotes

    @property
    def fact(self) -> Fact:
        return self.scenario.facts[self.planted_side]

    @property
    def holder(self) -> Party:
        return self.fact.holders(self.modality)[self.variant]


def allocate(shares: Mapping[K, float], n: int) -> list[K]:
    """n labels in the given shares, exactly up to rounding (largest remainder), unshuffled."""
    total = sum(shares.values())
    quotas = {k: n * v / total for k, v in shares.items()}
    counts = {k: int(q) for k, q in quotas.items()}
    for k in sorted(quotas, key=lambda k: (counts[k] - quotas[k], list(quotas).index(k)))[: n - sum(counts.values())]:
        counts[k] += 1
    return [k for k in shares for _ in range(counts[k])]


def plan_cases(
    cases: int, seed: int, *, seller_share: float = 0.626, modality_mix: Mapping[str, float] | None = None
) -> list[CasePlan]:
    """Stratified and shuffled: categories round-robin, exactly round(n * seller_share) seller
    plants and the modality mix up to rounding, each in a random order; then per case a scenario
    of its category, a holder variant (the favoured side's own evidence weighs 2, the other
    side's admission 1), p ~ Beta(JURY_ACCURACY) and Binomial(17, p) votes for the
    planted side. Depends on (cases, seed, seller_share, modality_mix) only; no media drawn."""
    if cases < 1 or seed < 0 or not 0 <= seller_share <= 1:
        raise SynthError(f"need cases >= 1, seed >= 0 and 0 <= seller_share <= 1; got {cases}, {seed}, {seller_share}")
    mix = _modality_mix(modality_mix)
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0]))
    categories = [CATEGORIES[i % len(CATEGORIES)] for i in range(cases)]
    n_seller = round(cases * seller_share)
    sides: list[Party] = ["seller" if i < n_seller else "buyer" for i in range(cases)]
    modalities = allocate(mix, cases)
    for column in (categories, sides, modalities):
        rng.shuffle(column)
    plans = []
    for i in range(cases):
        options = [s for s in SCENARIOS if s.category == categories[i]]
        scenario = options[int(rng.integers(len(options)))]
        fact = scenario.facts[sides[i]]
        weights = np.array([2.0 if holder == sides[i] else 1.0 for holder in fact.holders(modalities[i])])
        variant = int(rng.choice(len(weights), p=weights / weights.sum()))
        p = float(rng.beta(*JURY_ACCURACY))
        planted = int(rng.binomial(JURY_SIZE, p))
        votes = (
            GroundTruthVotes(seller=planted, buyer=JURY_SIZE - planted)
            if sides[i] == "seller"
            else GroundTruthVotes(buyer=planted, seller=JURY_SIZE - planted)
        )
        plans.append(CasePlan(i, scenario, sides[i], modalities[i], variant, round(p, 4), votes))
    return plans


def _modality_mix(mix: Mapping[str, float] | None) -> dict[Modality, float]:
    mix = dict(mix) if mix is not None else {m: 1 / 3 for m in MODALITIES}
    if not set(mix) <= set(MODALITIES) or any(v < 0 for v in mix.values()) or sum(mix.values()) <= 0:
        raise SynthError(f"modality_mix needs non-negative shares of {MODALITIES} with a positive sum, got {mix}")
    total = sum(mix.values())
    return {m: round(mix.get(m, 0.0) / total, 6) for m in MODALITIES}


# ----------------------------------------------------------------------------------------------
# one case: each party's submissions, then ids, media files and the plant's record


@dataclass
class Draft:
    """An evidence item before it has an id: text, or a photo/clip of a Visual."""

    kind: Literal["text", "image", "video"]
    text: str
    visual: media.Visual | None = None
    plant: bool = False
    media_type: str = ""
    role: str = "media"  # greeting, claim, record, chatter, signoff, media (plants: "plant")


@dataclass
class Built:
    case: DisputeCase
    plant: Plant
    files: dict[str, bytes]


@dataclass(frozen=True)
class ClipShape:
    """How clips are drawn: ``frames`` None for short hand-held clips (30-45 frames, the clue on
    the default sampler's grid), else a range of frame counts for long clips of several shots
    (synth_media.shot_clip_frames) with the clue anywhere; ``clue`` the range of its length."""

    frames: tuple[int, int] | None = None
    clue: tuple[int, int] = (2, 4)


def _shape(rng: np.random.Generator, items: tuple[int, int]) -> tuple[dict[str, int], dict[str, int]]:
    """Items and rounds per party: about half the items each (at least 5), 2-4 rounds."""
    total = int(rng.integers(items[0], items[1] + 1))
    n_buyer = min(max((total + int(rng.integers(-1, 2))) // 2, 5), total - 5)
    counts = {"buyer": n_buyer, "seller": total - n_buyer}
    rounds_buyer = int(rng.integers(2, min(4, counts["buyer"] // 2) + 1))
    rounds = {
        "buyer": rounds_buyer,
        "seller": max(2, min(counts["seller"] // 2, rounds_buyer - int(rng.integers(0, 2)))),
    }
    return counts, rounds


def build_case(plan: CasePlan, seed: int, items: tuple[int, int], clips: ClipShape = ClipShape()) -> Built:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1, plan.index]))
    scenario, fact, side = plan.scenario, plan.fact, plan.planted_side
    facts = case_facts(rng, scenario, side)
    pick = _Picker(rng)
    case_id = f"synth-{seed}-{plan.index:04d}-{scenario.category}-{scenario.kind}"

    counts, rounds = _shape(rng, items)
    planted = _planted_draft(plan, facts, pick)
    decoys = _decoy_media(plan, facts, pick)
    submissions = {
        p: _party_rounds(
            p,
            counts[p],
            rounds[p],
            scenario,
            facts,
            pick,
            planted if plan.holder == p else None,
            [d for owner, d in decoys if owner == p],
        )
        for p in ("buyer", "seller")
    }

    files: dict[str, bytes] = {}
    plant_info: dict = {}
    numbers: Counter[str] = Counter()  # photos and clips are numbered through the case: "photo 3"

    def evidence(draft: Draft, eid: str) -> dict:
        item: dict = {"id": eid, "kind": draft.kind, "text": draft.text}
        if draft.plant:
            plant_info["evidence_id"] = eid
        if draft.kind != "text":
            numbers[draft.kind] += 1
            path = f"media/{case_id}/{eid}.{MEDIA_SUFFIX[draft.media_type]}"
            data, info = _render(draft, rng, facts, clips, plant_clip=draft.plant and draft.kind == "video")
            files[path] = data
            item["text"] = draft.text.format(n=numbers[draft.kind])
            item["media"] = {"media_type": draft.media_type, "path": path, "sha256": hashlib.sha256(data).hexdigest()}
            if draft.plant:
                plant_info.update(info, media_path=path)
        return item

    rounds_out = []
    when = datetime.fromisoformat(facts["delivered_iso"]) + timedelta(hours=int(rng.integers(20, 96)))
    for r in range(1, max(rounds.values()) + 1):
        for party in ("buyer", "seller"):
            if r <= rounds[party]:
                items_out = [evidence(d, f"{party[0]}{r}-{k}") for k, d in enumerate(submissions[party][r - 1], 1)]
                rounds_out.append({"party": party, "round": r, "submitted_at": iso(when), "items": items_out})
                when += timedelta(hours=int(rng.integers(3, 40)), minutes=int(rng.integers(0, 60)))

    case = DisputeCase.model_validate(
        {
            "case_id": case_id,
            "metadata": _metadata(scenario, facts, pick),
            "rounds": rounds_out,
            "ground_truth": plan.votes.model_dump(),
        }
    )
    clue_words = [fill(w, facts) for w in fact.clue_words(plan.modality, plan.variant)]
    plant = Plant(
        case_id=case_id,
        category=scenario.category,
        scenario=scenario.kind,
        planted_side=side,
        modality=plan.modality,
        clue_party=plan.holder,
        against_interest=plan.holder != side,
        clue=fill(fact.clue, facts),
        clue_words=clue_words,
        juror_accuracy=plan.juror_accuracy,
        votes=plan.votes,
        label=plan.votes.winner,
        **plant_info,
    )
    _check_clue_isolation(case, plant)
    return Built(case, plant, files)


class _Picker:
    """Seeded choices of wording without repeats within a case."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.used: set[str] = set()

    def one(self, options):
        return options[int(self.rng.integers(len(options)))]

    def fresh(self, options: list[str], facts: dict) -> str | None:
        left = [o for o in options if o not in self.used]
        if not left:
            return None
        choice = self.one(left)
        self.used.add(choice)
        return fill(choice, facts)


def _planted_draft(plan: CasePlan, facts: dict, pick: _Picker) -> Draft:
    fact = plan.fact
    if plan.modality == "text":
        return Draft("text", fill(fact.records[plan.variant][1], facts), plant=True, role="plant")
    visual = fact.visual(facts, seed=int(pick.rng.integers(2**31)))
    if plan.modality == "image":
        return Draft("image", pick.one(CAPTIONS["image"]), visual, True, _photo_type(visual))
    return Draft("video", pick.one(CAPTIONS["video"]), visual, True, "video/mp4")


def _photo_type(visual: media.Visual) -> str:
    return "image/png" if visual.scene in ("phone", "store") else "image/jpeg"


def _decoy_media(plan: CasePlan, facts: dict, pick: _Picker) -> list[tuple[Party, Draft]]:
    """Irrelevant media for both parties: packaging, receipts, and the clue's scene without the clue
    (so the scene being photographed does not give the plant away)."""
    rng, out = pick.rng, []
    scene = plan.fact.visual(facts, seed=0).model_copy(update={"mark": None, "label": ""})
    pool = [media.Visual(scene="parcel"), media.Visual(scene="receipt", title=facts["shop"]), scene, scene]
    for _ in range(int(rng.integers(1, 4))):
        visual = pool[int(rng.integers(len(pool)))].model_copy(update={"seed": int(rng.integers(2**31))})
        out.append(
            (
                pick.one(("buyer", "seller")),
                Draft("image", pick.one(CAPTIONS["image"]), visual, media_type=_photo_type(visual)),
            )
        )
    if plan.modality == "video" or rng.random() < 0.3:  # a neutral clip, so clips are not a tell either
        out.append(
            (
                pick.one(("buyer", "seller")),
                Draft(
                    "video",
                    pick.one(CAPTIONS["video"]),
                    scene.model_copy(update={"seed": int(rng.integers(2**31))}),
                    media_type="video/mp4",
                ),
            )
        )
    return out


def _party_rounds(
    party: Party,
    count: int,
    n_rounds: int,
    scenario: Scenario,
    facts: dict,
    pick: _Picker,
    planted: Draft | None,
    decoys: list[Draft],
) -> list[list[Draft]]:
    """``count`` items in ``n_rounds`` submissions of at least two items: a greeting opens round 1,
    later rounds open with a rebuttal on a claim, a sign-off closes the last; in between, at least
    two claims, the plant if this party holds it, decoy media, a routine record, chatter."""
    lines = LINES[party]
    claims = scenario.buyer_claims if party == "buyer" else scenario.seller_claims

    def text(pool: list[str], role: str) -> Draft | None:
        line = pick.fresh(pool, facts)
        return Draft("text", line, role=role) if line else None

    def sure(pool: list[str], role: str) -> Draft:
        """A line from a pool this party has not drawn from yet: every pool holds one."""
        draft = text(pool, role)
        assert draft is not None, f"the {role} lines of {party} ran out"
        return draft

    sizes = [2 + int(x) for x in np.bincount(pick.rng.integers(0, n_rounds, count - 2 * n_rounds), minlength=n_rounds)]
    greeting, signoff = sure(lines["greetings"], "greeting"), sure(lines["signoffs"], "signoff")
    room = count - 2
    must = [sure(claims, "claim"), sure(claims, "claim")] + ([planted] if planted else [])
    optional = [
        *decoys,
        text(lines["records"], "record"),
        text(claims, "claim"),
        text(lines["chatter"], "chatter"),
        text(claims, "claim"),
        text(lines["chatter"], "chatter"),
        text(lines["confident"], "claim"),
        text(claims, "claim"),
        text(lines["chatter"], "chatter"),
        text(lines["confident"], "claim"),
        text(lines["chatter"], "chatter"),
        text(lines["filler"], "chatter"),
        text(lines["filler"], "chatter"),
    ]
    content = must + [d for d in optional if d is not None][: max(0, room - len(must))]
    while len(content) < room:  # the pools ran dry: ask for news
        content.append(Draft("text", fill(pick.one(lines["nudges"]), facts), role="chatter"))
    content = [content[i] for i in pick.rng.permutation(len(content))]
    out, at = [], 0
    for r, size in enumerate(sizes, start=1):
        take = size - (r == 1) - (r == n_rounds)
        chunk, at = content[at : at + take], at + take
        if r > 1:  # a later round answers the other side: a claim first, after a rebuttal opener
            first = next((i for i, d in enumerate(chunk) if d.role == "claim"), None)
            if first is not None:
                claim = chunk.pop(first)
                chunk.insert(0, Draft("text", f"{pick.one(lines['openers'])} {claim.text}", role="claim"))
        out.append(([greeting] if r == 1 else []) + chunk + ([signoff] if r == n_rounds else []))
    return out


def _metadata(scenario: Scenario, facts: dict, pick: _Picker) -> dict:
    return {
        "category": scenario.category,
        "product": facts["product"],
        "order_amount": facts["amount"],
        "currency": facts["currency"],
        "ordered_at": facts["ordered_iso"],
        "delivered_at": facts["delivered_iso"],
        "dispute_reason": fill(pick.one(scenario.reasons), facts),
        "requested_remedy": fill(pick.one(scenario.remedies), facts),
    }


def _render(
    draft: Draft, rng: np.random.Generator, facts: dict, clips: ClipShape, *, plant_clip: bool
) -> tuple[bytes, dict]:
    visual = draft.visual
    assert visual is not None
    if draft.kind == "image":
        data = media.encode_photo(media.render_still(visual), draft.media_type)
        return data, {"visual": visual, "probe": media.still_probe(visual)}
    fps = int(rng.choice([10, 12, 15]))
    if clips.frames is None:
        frames = int(rng.integers(30, min(45, 3 * fps) + 1))
        clue = _clue_frames(frames, rng, clips.clue) if plant_clip else range(0)
        images = media.clip_frames(visual, frames, fps, clue, facts["clip_stamp"])
        return media.encode_clip(images, fps), _clip_info(visual, clue, frames, fps)
    frames = int(rng.integers(clips.frames[0], clips.frames[1] + 1))
    clue = _clue_anywhere(frames, fps, rng, clips.clue) if plant_clip else range(0)
    info = _clip_info(visual, clue, frames, fps)
    info["cuts"] = [shot.start for shot in media.plan_shots(visual, frames, fps, clue)[1:]]
    shots = media.shot_clip_frames(visual, frames, fps, clue, facts["clip_stamp"])
    # a keyframe at least every 2 s (and at cuts, where x264 puts one itself), like a phone's encoder
    return media.encode_clip(shots, fps, gop=2 * fps), info


def _clip_info(visual: media.Visual, clue: range, frames: int, fps: int) -> dict:
    """What a clip's item records of it: what it shows, where its clue is and how to probe it."""
    return {
        "visual": visual,
        "probe": media.clip_probe(visual),
        "frames": list(clue),
        "frame_count": frames,
        "fps": fps,
    }


def _clue_frames(frames: int, rng: np.random.Generator, lengths: tuple[int, int] = (2, 4)) -> range:
    """A few consecutive frames away from both ends, containing a frame the default sampler reads."""
    k = min(DEFAULT_FRAMES_PER_VIDEO, frames)
    sampled = {round(i * (frames - 1) / (k - 1)) for i in range(k)}
    length = int(rng.integers(lengths[0], lengths[1] + 1))
    starts = [s for s in range(frames // 5, frames - frames // 5 - length) if sampled & set(range(s, s + length))]
    start = starts[int(rng.integers(len(starts)))]
    return range(start, start + length)


def _clue_anywhere(frames: int, fps: int, rng: np.random.Generator, lengths: tuple[int, int]) -> range:
    """A long clip's clue: anywhere, uniformly, but for room at both ends for a shot and a second
    before the cut (or a tenth of the clip, if more), so a cutaway can come before and after it."""
    length = int(rng.integers(lengths[0], lengths[1] + 1))
    margin = max(frames // 10, 2 * max(10, fps))
    start = int(rng.integers(margin, frames - margin - length + 1))
    return range(start, start + length)


def video_plant(index: int, seed: int, clips: ClipShape) -> tuple[bytes, dict]:
    """One planted clip on its own, drawn as ``generate`` draws a video plant (a scenario's clue
    scene, the same renderer and encoder), with its record (``visual``, ``probe``, ``frames``,
    ``frame_count``, ``fps``, ``cuts``): for measuring frame selection on many clips without the
    rest of each case. Scenarios and sides go round-robin over those a clip can hold."""
    kinds = [(scenario, side) for scenario in SCENARIOS for side in PARTIES if scenario.facts[side].clip_holders]
    scenario, side = kinds[index % len(kinds)]
    rng = np.random.default_rng(np.random.SeedSequence([seed, 2, index]))
    facts = case_facts(rng, scenario, side)
    visual = scenario.facts[side].visual(facts, seed=int(rng.integers(2**31)))
    return _render(Draft("video", "", visual, True, "video/mp4"), rng, facts, clips, plant_clip=True)


def _check_clue_isolation(case: DisputeCase, plant: Plant) -> None:
    """A text clue's words are in the planted item only; a media clue's words in no text at all."""
    for item in case.items():
        for word in plant.clue_words:
            if (
                item.text
                and word.lower() in item.text.lower()
                and not (plant.modality == "text" and item.id == plant.evidence_id)
            ):
                raise AssertionError(f"{case.case_id}: clue words {word!r} leak into {item.id}")


# ----------------------------------------------------------------------------------------------
# the output folder


def generate(
    out: Path,
    cases: int = 100,
    seed: int = 0,
    *,
    seller_share: float = 0.626,
    modality_mix: Mapping[str, float] | None = None,
    items: tuple[int, int] = (10, 20),
    clip_frames: tuple[int, int] | None = None,
    clue_frames: tuple[int, int] = (2, 4),
    progress: Callable[[int], None] | None = None,
) -> SynthManifest:
    """Write ``cases`` synthetic cases to out/cases.jsonl, their media under out/media/ and
    out/manifest.json; return the manifest.

    The same arguments give byte-identical cases.jsonl and manifest.json, except for the hashes
    of media bytes: each media item's ``sha256`` hashes the file this run wrote, and
    ``cases_sha256`` covers those. PNG and JPEG bytes repeat with the same Pillow build, but an
    H.264 encode may differ in bytes even between two runs on one machine. The media themselves
    are reproducible as pictures: PNGs decode to the same pixels, JPEGs and clips to the same
    pictures within compression noise, with each plant's clue where ``probe`` and ``frames`` say.

    ``clip_frames`` (min, max) asks for long clips of several shots, with cuts, pans and noise,
    and the clue anywhere in them; ``clue_frames`` (min, max) is how many frames the clue lasts.

    ``out`` must be empty, missing, or a previous synth output (its cases.jsonl, manifest.json
    and media/ are replaced; other files are left alone)."""
    out = Path(out)
    lo, hi = items
    if not 10 <= lo <= hi <= 40:
        raise SynthError(f"items must satisfy 10 <= min <= max <= 40 (at least 5 per party), got {items}")
    clips = _clip_shape(clip_frames, clue_frames)
    plans = plan_cases(cases, seed, seller_share=seller_share, modality_mix=modality_mix)
    options = SynthOptions(
        cases=cases,
        seed=seed,
        seller_share=seller_share,
        modality_mix=_modality_mix(modality_mix),
        items=(lo, hi),
        clip_frames=clips.frames,
        clue_frames=clips.clue,
    )
    _prepare(out)
    (out / "manifest.json").write_text(json.dumps({"generator": GENERATOR, "version": VERSION, "complete": False}))
    lines, plants = [], []
    for plan in plans:
        built = build_case(plan, seed, (lo, hi), clips)
        for path, data in built.files.items():
            (out / path).parent.mkdir(parents=True, exist_ok=True)
            (out / path).write_bytes(data)
        lines.append(built.case.model_dump_json(exclude_none=True))
        plants.append(built.plant)
        if progress is not None:
            progress(plan.index + 1)
    payload = ("\n".join(lines) + "\n").encode()
    (out / "cases.jsonl").write_bytes(payload)
    manifest = SynthManifest(
        options=options,
        cases_sha256=hashlib.sha256(payload).hexdigest(),
        summary=_summary(plants),
        plants=plants,
        environment=_environment(),
        noise_model={
            "jury_size": JURY_SIZE,
            "accuracy": "Beta(a, b) per case",
            "beta_a": JURY_ACCURACY[0],
            "beta_b": JURY_ACCURACY[1],
            "accuracy_mean": round(JURY_ACCURACY[0] / sum(JURY_ACCURACY), 4),
            "votes": "planted side ~ Binomial(jury_size, p); label = majority",
        },
    )
    (out / "manifest.json").write_text(manifest.model_dump_json(indent=2) + "\n")
    return manifest


#: long clips: from 6 s at 15 fps to 10 minutes at 10 fps (the pipeline's max_video_duration_s)
CLIP_FRAMES = (90, 6000)


def _clip_shape(clip_frames: tuple[int, int] | None, clue_frames: tuple[int, int]) -> ClipShape:
    """Checked: long clips of CLIP_FRAMES, a clue of at least a frame and at most a tenth of the
    shortest clip (8 frames in short clips, which hold 30-45)."""
    frames: tuple[int, int] | None = None
    if clip_frames is not None:
        lo, hi = clip_frames
        if not CLIP_FRAMES[0] <= lo <= hi <= CLIP_FRAMES[1]:
            raise SynthError(
                f"clip_frames must satisfy {CLIP_FRAMES[0]} <= min <= max <= {CLIP_FRAMES[1]}, got {clip_frames}"
            )
        frames = (lo, hi)
    first, last = clue_frames
    longest = 8 if frames is None else frames[0] // 10
    if not 1 <= first <= last <= longest:
        raise SynthError(f"clue_frames must satisfy 1 <= min <= max <= {longest} for these clips, got {clue_frames}")
    return ClipShape(frames, (first, last))


def _environment() -> dict[str, str]:
    import av
    import PIL

    return {
        "av": av.__version__,
        "libavcodec": ".".join(map(str, av.library_versions["libavcodec"])),
        "pillow": PIL.__version__,
        "numpy": np.__version__,
        "codec": "libx264" if "libx264" in av.codecs_available else "mpeg4",
    }


def _summary(plants: list[Plant]) -> Summary:
    n = len(plants)

    def share(predicate) -> float:
        return round(sum(1 for p in plants if predicate(p)) / n, 4)

    return Summary(
        cases=n,
        planted_seller_share=share(lambda p: p.planted_side == "seller"),
        label_seller_share=share(lambda p: p.label == "seller"),
        label_disagrees_share=share(lambda p: p.label != p.planted_side),
        against_interest_share=share(lambda p: p.against_interest),
        modalities={m: sum(p.modality == m for p in plants) for m in MODALITIES},
        categories={c: sum(p.category == c for p in plants) for c in CATEGORIES},
    )


def is_synth_output(out: Path) -> bool:
    try:
        return json.loads((out / "manifest.json").read_text()).get("generator") == GENERATOR
    except (OSError, ValueError, AttributeError):
        return False


def _prepare(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise SynthError(f"{out} exists and is not a folder")
    if out.exists() and any(out.iterdir()):
        if not is_synth_output(out):
            raise SynthError(
                f"{out} is not empty and holds no synth manifest.json: refusing to write into it; "
                "pick a new or empty folder"
            )
        for name in ("cases.jsonl", "manifest.json"):
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / "media", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
