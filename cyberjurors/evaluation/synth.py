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
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Callable, Literal, Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ..schemas import JURY_SIZE, DisputeCase, GroundTruthVotes
from . import synth_media as media

GENERATOR = "cyberjurors.synth"
VERSION = 1
Modality = Literal["text", "image", "video"]
Party = Literal["buyer", "seller"]
MODALITIES: tuple[Modality, ...] = ("text", "image", "video")
MEDIA_SUFFIX = {"image/png": "png", "image/jpeg": "jpg", "video/mp4": "mp4"}

#: p ~ Beta(a, b): a juror's chance of voting for the planted side (mean 0.78, sd 0.14)
JURY_ACCURACY = (6.24, 1.76)
#: what the pipeline's frame sampler picks by default (Settings.frames_per_video); each clip's
#: clue frames include at least one of the frames it would sample
DEFAULT_FRAMES_PER_VIDEO = 30


class SynthError(ValueError):
    """Bad options, or an output folder that must not be overwritten."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SynthOptions(Strict):
    cases: int = Field(ge=1)
    seed: int = Field(ge=0)
    seller_share: float = Field(ge=0, le=1)
    modality_mix: dict[Modality, float]
    items: tuple[int, int]


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
    environment: dict[str, str] = Field(description="library versions: other versions may encode other bytes")
    cases_sha256: str
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


def allocate(shares: Mapping[str, float], n: int) -> list[str]:
    """n labels in the given shares, exactly up to rounding (largest remainder), unshuffled."""
    total = sum(shares.values())
    quotas = {k: n * v / total for k, v in shares.items()}
    counts = {k: int(q) for k, q in quotas.items()}
    for k in sorted(quotas, key=lambda k: (counts[k] - quotas[k], list(quotas).index(k)))[: n - sum(counts.values())]:
        counts[k] += 1
    return [k for k in shares for _ in range(counts[k])]


def plan_cases(cases: int, seed: int, *, seller_share: float = 0.626,
               modality_mix: Mapping[str, float] | None = None) -> list[CasePlan]:
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
    sides: list[Party] = ["seller"] * n_seller + ["buyer"] * (cases - n_seller)
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
        votes = GroundTruthVotes(seller=planted, buyer=JURY_SIZE - planted) if sides[i] == "seller" else \
            GroundTruthVotes(buyer=planted, seller=JURY_SIZE - planted)
        plans.append(CasePlan(i, scenario, sides[i], modalities[i], variant, round(p, 4), votes))
    return plans


def _modality_mix(mix: Mapping[str, float] | None) -> dict[str, float]:
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


def build_case(plan: CasePlan, seed: int, items: tuple[int, int]) -> Built:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 1, plan.index]))
    scenario, fact, side = plan.scenario, plan.fact, plan.planted_side
    facts = case_facts(rng, scenario, side)
    pick = _Picker(rng)
    case_id = f"synth-{seed}-{plan.index:04d}-{scenario.category}-{scenario.kind}"

    total = int(rng.integers(items[0], items[1] + 1))
    n_buyer = min(max((total + int(rng.integers(-1, 2))) // 2, 5), total - 5)
    counts = {"buyer": n_buyer, "seller": total - n_buyer}
    rounds_buyer = int(rng.integers(2, min(4, counts["buyer"] // 2) + 1))
    rounds = {"buyer": rounds_buyer,
              "seller": max(2, min(counts["seller"] // 2, rounds_buyer - int(rng.integers(0, 2))))}

    planted = _planted_draft(plan, facts, pick)
    decoys = _decoy_media(plan, facts, pick)
    submissions = {p: _party_rounds(p, counts[p], rounds[p], scenario, facts, pick,
                                    planted if plan.holder == p else None, [d for owner, d in decoys if owner == p])
                   for p in ("buyer", "seller")}

    files: dict[str, bytes] = {}
    plant_info: dict = {}
    numbers = Counter()  # photos and clips are numbered through the case: "photo 3"

    def evidence(draft: Draft, eid: str) -> dict:
        item: dict = {"id": eid, "kind": draft.kind, "text": draft.text}
        if draft.plant:
            plant_info["evidence_id"] = eid
        if draft.kind != "text":
            numbers[draft.kind] += 1
            path = f"media/{case_id}/{eid}.{MEDIA_SUFFIX[draft.media_type]}"
            data, info = _render(draft, rng, facts, plant_clip=draft.plant and draft.kind == "video")
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
                rounds_out.append({"party": party, "round": r, "submitted_at": _iso(when), "items": items_out})
                when += timedelta(hours=int(rng.integers(3, 40)), minutes=int(rng.integers(0, 60)))

    case = DisputeCase.model_validate({
        "case_id": case_id, "metadata": _metadata(scenario, facts, pick), "rounds": rounds_out,
        "ground_truth": plan.votes.model_dump()})
    clue_words = [fill(w, facts) for w in fact.clue_words(plan.modality, plan.variant)]
    plant = Plant(
        case_id=case_id, category=scenario.category, scenario=scenario.kind, planted_side=side,
        modality=plan.modality, clue_party=plan.holder, against_interest=plan.holder != side,
        clue=fill(fact.clue, facts), clue_words=clue_words, juror_accuracy=plan.juror_accuracy,
        votes=plan.votes, label=plan.votes.winner, **plant_info)
    _check_clue_isolation(case, plant)
    return Built(case, plant, files)


class _Picker:
    """Seeded choices of wording without repeats within a case."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.used = rng, set()

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
        out.append((pick.one(("buyer", "seller")), Draft("image", pick.one(CAPTIONS["image"]), visual,
                                                        media_type=_photo_type(visual))))
    if plan.modality == "video" or rng.random() < 0.3:  # a neutral clip, so clips are not a tell either
        out.append((pick.one(("buyer", "seller")), Draft("video", pick.one(CAPTIONS["video"]),
                                                        scene.model_copy(update={"seed": int(rng.integers(2**31))}),
                                                        media_type="video/mp4")))
    return out


def _party_rounds(party: Party, count: int, n_rounds: int, scenario: Scenario, facts: dict, pick: _Picker,
                  planted: Draft | None, decoys: list[Draft]) -> list[list[Draft]]:
    """``count`` items in ``n_rounds`` submissions of at least two items: a greeting opens round 1,
    later rounds open with a rebuttal on a claim, a sign-off closes the last; in between, at least
    two claims, the plant if this party holds it, decoy media, a routine record, chatter."""
    lines = LINES[party]
    claims = scenario.buyer_claims if party == "buyer" else scenario.seller_claims

    def text(pool: list[str], role: str) -> Draft | None:
        line = pick.fresh(pool, facts)
        return Draft("text", line, role=role) if line else None

    sizes = [2 + int(x) for x in np.bincount(pick.rng.integers(0, n_rounds, count - 2 * n_rounds),
                                             minlength=n_rounds)]
    greeting, signoff = text(lines["greetings"], "greeting"), text(lines["signoffs"], "signoff")
    room = count - 2
    must = [text(claims, "claim"), text(claims, "claim")] + ([planted] if planted else [])
    optional = decoys + [text(lines["records"], "record"), text(claims, "claim"), text(lines["chatter"], "chatter"),
                         text(claims, "claim"), text(lines["chatter"], "chatter"), text(lines["confident"], "claim"),
                         text(claims, "claim"), text(lines["chatter"], "chatter"),
                         text(lines["confident"], "claim"), text(lines["chatter"], "chatter"),
                         text(lines["filler"], "chatter"), text(lines["filler"], "chatter")]
    content = must + [d for d in optional if d is not None][: max(0, room - len(must))]
    while len(content) < room:  # the pools ran dry: ask for news
        content.append(Draft("text", fill(pick.one(lines["nudges"]), facts), role="chatter"))
    content = [content[i] for i in pick.rng.permutation(len(content))]
    out, at = [], 0
    for r, size in enumerate(sizes, start=1):
        take = size - (r == 1) - (r == n_rounds)
        chunk, at = content[at:at + take], at + take
        if r > 1:  # a later round answers the other side: a claim first, after a rebuttal opener
            first = next((i for i, d in enumerate(chunk) if d.role == "claim"), None)
            if first is not None:
                claim = chunk.pop(first)
                chunk.insert(0, Draft("text", f"{pick.one(lines['openers'])} {claim.text}", role="claim"))
        out.append(([greeting] if r == 1 else []) + chunk + ([signoff] if r == n_rounds else []))
    return out


def _metadata(scenario: Scenario, facts: dict, pick: _Picker) -> dict:
    return {"category": scenario.category, "product": facts["product"], "order_amount": facts["amount"],
            "currency": facts["currency"], "ordered_at": facts["ordered_iso"],
            "delivered_at": facts["delivered_iso"], "dispute_reason": fill(pick.one(scenario.reasons), facts),
            "requested_remedy": fill(pick.one(scenario.remedies), facts)}


def _render(draft: Draft, rng: np.random.Generator, facts: dict, *, plant_clip: bool) -> tuple[bytes, dict]:
    visual = draft.visual
    assert visual is not None
    if draft.kind == "image":
        data = media.encode_photo(media.render_still(visual), draft.media_type)
        return data, {"visual": visual, "probe": media.still_probe(visual)}
    fps = int(rng.choice([10, 12, 15]))
    frames = int(rng.integers(30, min(45, 3 * fps) + 1))
    clue = _clue_frames(frames, rng) if plant_clip else range(0)
    images = media.clip_frames(visual, frames, fps, clue, facts["clip_stamp"])
    info = {"visual": visual, "probe": media.clip_probe(visual), "frames": list(clue), "frame_count": frames,
            "fps": fps}
    return media.encode_clip(images, fps), info


def _clue_frames(frames: int, rng: np.random.Generator) -> range:
    """2-4 consecutive frames away from both ends, containing a frame the default sampler reads."""
    k = min(DEFAULT_FRAMES_PER_VIDEO, frames)
    sampled = {round(i * (frames - 1) / (k - 1)) for i in range(k)}
    length = int(rng.integers(2, 5))
    starts = [s for s in range(frames // 5, frames - frames // 5 - length) if sampled & set(range(s, s + length))]
    start = starts[int(rng.integers(len(starts)))]
    return range(start, start + length)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _check_clue_isolation(case: DisputeCase, plant: Plant) -> None:
    """A text clue's words are in the planted item only; a media clue's words in no text at all."""
    for item in case.items():
        for word in plant.clue_words:
            if item.text and word.lower() in item.text.lower() and not (
                    plant.modality == "text" and item.id == plant.evidence_id):
                raise AssertionError(f"{case.case_id}: clue words {word!r} leak into {item.id}")


# ----------------------------------------------------------------------------------------------
# the output folder


def generate(out: Path, cases: int = 100, seed: int = 0, *, seller_share: float = 0.626,
             modality_mix: Mapping[str, float] | None = None, items: tuple[int, int] = (10, 20),
             progress: Callable[[int], None] | None = None) -> SynthManifest:
    """Write ``cases`` synthetic cases to out/cases.jsonl, their media under out/media/ and
    out/manifest.json; return the manifest. The same arguments give byte-identical files.

    ``out`` must be empty, missing, or a previous synth output (its cases.jsonl, manifest.json
    and media/ are replaced; other files are left alone)."""
    out = Path(out)
    lo, hi = items
    if not 10 <= lo <= hi <= 40:
        raise SynthError(f"items must satisfy 10 <= min <= max <= 40 (at least 5 per party), got {items}")
    plans = plan_cases(cases, seed, seller_share=seller_share, modality_mix=modality_mix)
    options = SynthOptions(cases=cases, seed=seed, seller_share=seller_share,
                           modality_mix=_modality_mix(modality_mix), items=(lo, hi))
    _prepare(out)
    (out / "manifest.json").write_text(json.dumps({"generator": GENERATOR, "version": VERSION, "complete": False}))
    lines, plants = [], []
    for plan in plans:
        built = build_case(plan, seed, (lo, hi))
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
        options=options, cases_sha256=hashlib.sha256(payload).hexdigest(), summary=_summary(plants),
        plants=plants, environment=_environment(), noise_model={
            "jury_size": JURY_SIZE, "accuracy": "Beta(a, b) per case", "beta_a": JURY_ACCURACY[0],
            "beta_b": JURY_ACCURACY[1], "accuracy_mean": round(JURY_ACCURACY[0] / sum(JURY_ACCURACY), 4),
            "votes": "planted side ~ Binomial(jury_size, p); label = majority"})
    (out / "manifest.json").write_text(manifest.model_dump_json(indent=2) + "\n")
    return manifest


def _environment() -> dict[str, str]:
    import av
    import PIL

    return {"av": av.__version__, "libavcodec": ".".join(map(str, av.library_versions["libavcodec"])),
            "pillow": PIL.__version__, "numpy": np.__version__,
            "codec": "libx264" if "libx264" in av.codecs_available else "mpeg4"}


def _summary(plants: list[Plant]) -> Summary:
    n = len(plants)

    def share(predicate) -> float:
        return round(sum(1 for p in plants if predicate(p)) / n, 4)

    return Summary(
        cases=n, planted_seller_share=share(lambda p: p.planted_side == "seller"),
        label_seller_share=share(lambda p: p.label == "seller"),
        label_disagrees_share=share(lambda p: p.label != p.planted_side),
        against_interest_share=share(lambda p: p.against_interest),
        modalities={m: sum(p.modality == m for p in plants) for m in MODALITIES},
        categories={c: sum(p.category == c for p in plants) for c in CATEGORIES})


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
            raise SynthError(f"{out} is not empty and holds no synth manifest.json: refusing to write into it; "
                             "pick a new or empty folder")
        for name in ("cases.jsonl", "manifest.json"):
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / "media", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)


# ----------------------------------------------------------------------------------------------
# templates: scenarios per category, each with the fact that decides it for either side
#
# In a record, [brackets] mark the clue words (removed from the text). A fact's holders say whose
# evidence may carry the clue: the favoured side's own proof, or the other side's admission (the
# seller's packing video showing the crack, the buyer's slip "it worked fine for weeks").

CATEGORIES = ("appliances", "clothing", "food", "digital", "others")
B, S = "buyer", "seller"
_BRACKETS = re.compile(r"\[([^\]]*)\]")


def fill(template: str, facts: dict) -> str:
    return _BRACKETS.sub(r"\1", template).format(**facts)


@dataclass(frozen=True)
class Fact:
    clue: str
    records: tuple[tuple[Party, str], ...]
    visual_spec: tuple[str, str, str, tuple[int, int, int]]  # scene, mark, label, colour
    photo_holders: tuple[Party, ...]
    clip_holders: tuple[Party, ...]
    label_is_clue: bool = True  # False: the label repeats something the texts already say

    def holders(self, modality: str) -> tuple[Party, ...]:
        if modality == "text":
            return tuple(holder for holder, _ in self.records)
        return self.photo_holders if modality == "image" else self.clip_holders

    def clue_words(self, modality: str, variant: int) -> list[str]:
        if modality == "text":
            return _BRACKETS.findall(self.records[variant][1])
        label = self.visual_spec[2]
        return [label] if label and self.label_is_clue else []

    def visual(self, facts: dict, seed: int) -> media.Visual:
        scene, mark, label, colour = self.visual_spec
        return media.Visual(scene=scene, mark=mark, label=fill(label, facts), colour=colour,
                            title=facts["short"], seed=seed)


@dataclass(frozen=True)
class Product:
    name: str
    short: str
    low: float
    high: float
    part: str
    sizing: str | None = None  # "garment" or "shoe"


@dataclass(frozen=True)
class Scenario:
    category: str
    kind: str
    products: tuple[Product, ...]
    reasons: tuple[str, ...]
    remedies: tuple[str, ...]
    buyer_claims: list[str]
    seller_claims: list[str]
    buyer: Fact
    seller: Fact

    @property
    def facts(self) -> dict[str, Fact]:
        return {"buyer": self.buyer, "seller": self.seller}


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "appliances", "fault",
        (Product("AeroChef 5.5 L air fryer", "air fryer", 69, 129, "basket"),
         Product("Nordhaus 25 L microwave", "microwave", 89, 159, "turntable"),
         Product("BrewMaster bean-to-cup coffee machine", "coffee machine", 199, 449, "brew unit"),
         Product("Kessler 2-zone induction hob", "hob", 79, 149, "control panel")),
        ("The {short} shows an error and does not heat, from the very first use",
         "Faulty on arrival: the {short} stopped heating the first time it was switched on"),
        ("Full refund", "Replacement unit", "Refund on return of the unit"),
        ["It showed an error the very first time I switched it on.",
         "I followed the manual step by step and it simply does not heat.",
         "This is a factory defect, not something I did.", "I have not been able to use it once since it arrived.",
         "It is plugged straight into the wall socket, no extension lead."],
        ["Every unit is powered up and tested before it leaves our warehouse.",
         "Errors like this almost always come from the kitchen wiring or an extension lead.",
         "The {short} was working perfectly when we shipped it.",
         "We believe the unit was used a lot before this complaint.",
         "This model has one of the lowest return rates in our shop."],
        Fact("the display shows the fault '{code}' at first power-on",
             ((S, "Our test bench log for serial {serial}, forwarded by the warehouse: '[{code} on first "
                  "heat-up], reset, passed on second try, shipped'."),
              (B, "Service centre report {ref}, {report_date}: '[heating element open circuit, factory "
                  "defect]', no signs of misuse or wear.")),
             ("appliance", "banner", "{code}", media.RED), (B, S), (B, S)),
        Fact("the unit's own counter shows {hours} operating hours: it was used for weeks",
             ((B, "To be fair, [it worked fine for the first few weeks], the error only started after that."),
              (S, "Service centre report {ref}, {report_date}: no fault found, ran 3 hours without error, "
                  "[operating-hours counter at {hours} h].")),
             ("appliance", "banner", "RUN TIME {hours} h", media.AMBER), (B, S), (B, S))),
    Scenario(
        "appliances", "cracked",
        (Product("Glass electric kettle 1.7 L", "kettle", 29, 59, "glass jug"),
         Product("Blender with 1.5 L glass jar", "blender", 49, 119, "glass jar"),
         Product("Drip coffee maker with glass carafe", "coffee maker", 35, 79, "glass carafe"),
         Product("Glass teapot with warmer", "teapot", 25, 55, "glass pot")),
        ("The {part} was cracked when I opened the parcel", "Arrived broken: a crack in the {part}"),
        ("Full refund", "Replacement {part}", "Refund without return"),
        ["The crack was there when I took it out of the box.", "The box was dented on one side when it arrived.",
         "I have not even filled it with water yet.", "Glass like this should be packed much better.",
         "I opened the parcel carefully on the kitchen table."],
        ["It left our warehouse intact; we check every {part} against the light.",
         "The parcel was padded with foam on all sides.", "Glass does not crack on its own inside a padded box.",
         "We think this happened after delivery.", "We ship hundreds of these a month without breakage."],
        Fact("a crack runs through the {part}",
             ((S, "Our packer's note for order {order}: '[small chip on the rim of the {part}], passed the "
                  "leak test, shipped anyway'."),
              (B, "Courier delivery record {tracking}: '[carton crushed on one corner, contents rattling, "
                  "accepted under reservation]'.")),
             ("glassware", "crack", "", media.DARK), (B, S), (B, S)),
        Fact("the courier's proof of delivery is stamped as received in good condition, signed {initials}",
             ((B, "Since you ask: [it slipped out of my hand while I was rinsing it], but it should not crack "
                  "that easily."),
              (S, "Courier proof of delivery {tracking}: [signed by {initials}, box condition 'good', no "
                  "damage remarks].")),
             ("document", "banner", "RECEIVED IN GOOD CONDITION - {initials}", media.GREEN), (S,), (S,))),
    Scenario(
        "clothing", "size",
        (Product("Merino wool jumper, navy", "jumper", 59, 119, "jumper", "garment"),
         Product("Leather ankle boots, cognac", "boots", 89, 169, "boots", "shoe"),
         Product("Slim-fit chinos, olive", "chinos", 39, 79, "chinos", "garment"),
         Product("Trail running shoes", "running shoes", 79, 149, "shoes", "shoe")),
        ("Wrong size delivered: not the {ordered_size} I ordered",
         "The {short} delivered are not the size on my order ({ordered_size})"),
        ("Exchange for size {ordered_size}", "Full refund", "Refund on return"),
        ["I ordered a {ordered_size} and what arrived is clearly smaller.",
         "I have worn {ordered_size} in this brand for years.",
         "It does not fit at all, this is not the size I paid for.",
         "I compared them with my other {short} and they are a size down.",
         "I tried them on once indoors and put them straight back in the bag."],
        ["We shipped exactly the size on your order, {ordered_size}.",
         "This maker's sizes run slightly small, which the listing mentions.",
         "Our pickers scan every item against the order.", "The size chart in the listing is accurate.",
         "We have had no other complaints about this batch."],
        Fact("the size label reads {shown_size}, not the {ordered_size} ordered",
             ((S, "Checking our stock sheet again: [we shipped the {other_size} instead of the {ordered_size}], "
                  "the bins were mixed up that week."),),
             ("fabric", "label", "EU {shown_size}", media.RED), (B, S), (B, S)),
        Fact("the size label reads {shown_size}, the size ordered",
             ((B, "[The label does say {ordered_size}], they just feel smaller than my other {short}."),),
             ("fabric", "label", "EU {shown_size}", media.RED), (B, S), (B, S))),
    Scenario(
        "clothing", "torn",
        (Product("Linen summer dress", "dress", 49, 99, "side seam"),
         Product("Oxford cotton shirt", "shirt", 29, 59, "side seam"),
         Product("Wool-blend coat", "coat", 119, 249, "sleeve seam"),
         Product("Silk blouse", "blouse", 59, 119, "shoulder seam")),
        ("The {part} was torn when the parcel arrived", "Damaged on arrival: the {part} is split open"),
        ("Full refund", "Refund on return", "Replacement"),
        ["The {part} was split the moment I unfolded it.",
         "I tried it on once, carefully, and never wore it out.", "For this price the stitching should hold.",
         "The tear is exactly along the stitching, that is a sewing fault.", "I sent it back in its original bag."],
        ["Each garment is checked by hand before it is folded.",
         "Seams tear like this when a garment is worn and stretched.", "The item came back to us clearly worn.",
         "Our seamstresses double-stitch every {part}.", "We cannot accept returns of worn clothing."],
        Fact("the {part} is torn open along its stitching",
             ((S, "Our quality log for this batch: '[{part}s loosely stitched on several pieces], sold as "
                  "first quality anyway'."),),
             ("fabric", "tear", "", media.DARK), (B, S), (B, S)),
        Fact("make-up and lipstick marks near the collar: the garment was worn",
             ((B, "[I only wore it for the evening of my friend's birthday], the seam went on the way home."),),
             ("fabric", "stain", "", media.LIPSTICK), (S, B), (S,))),
    Scenario(
        "food", "expired",
        (Product("Organic granola 750 g, pack of 3", "granola", 14, 29, "pack"),
         Product("Specialty coffee beans 1 kg", "coffee beans", 19, 39, "bag"),
         Product("Dark chocolate gift box 500 g", "chocolate", 18, 45, "box"),
         Product("Protein bars, box of 24", "protein bars", 24, 44, "box")),
        ("The {short} was past its best-before date on delivery", "Expired food delivered"),
        ("Full refund", "Refund without return", "Replacement with fresh stock"),
        ["The date on the {part} had already passed when it arrived.", "It tastes stale, this is clearly old stock.",
         "I expect fresh food, not leftovers.", "I checked the date the same evening it arrived.",
         "I cannot give this to my family."],
        ["Our stock rotates every week, nothing old is shipped.",
         "Every {part} was well within date when it left us.", "The taste is as intended for this product.",
         "Our warehouse checks dates on every order.", "We bought this batch fresh from the producer."],
        Fact("the printed best-before date {bb} is before the delivery on {delivered_date}",
             ((S, "Warehouse note on order {order}: '[batch {lot} short-dated, best before {bb}], ship first'."),),
             ("pack", "banner", "BEST BEFORE {bb}", media.RED), (B, S), (B, S)),
        Fact("the printed best-before date {bb} is months after the delivery on {delivered_date}",
             ((B, "[The date on the {part} is {bb}], fine I suppose, but it still tastes old to me."),),
             ("pack", "banner", "BEST BEFORE {bb}", media.RED), (B, S), (B, S))),
    Scenario(
        "food", "cold-chain",
        (Product("Cheese selection 1.2 kg, chilled", "cheese selection", 39, 79, "cheese"),
         Product("Smoked salmon 500 g, chilled", "smoked salmon", 24, 49, "salmon"),
         Product("Butter and cream hamper, chilled", "dairy hamper", 29, 59, "butter")),
        ("The chilled parcel arrived warm and the {part} had spoiled", "Cold chain broken: food delivered warm"),
        ("Full refund", "Refund without return", "Replacement delivery"),
        ["The ice packs were completely melted and the box was warm inside.",
         "The {part} smelled off as soon as I opened it.", "I could not risk eating it.",
         "I put everything in the fridge right after opening the box.",
         "The parcel felt warm when the courier handed it over."],
        ["We ship chilled goods in insulated boxes with a temperature logger.",
         "Our boxes keep below 7 °C for 48 hours.", "The contents were in perfect condition when delivered.",
         "Every box goes out with fresh ice packs.", "Our courier runs refrigerated vans for chilled parcels."],
        Fact("the box's temperature logger shows an alarm: maximum {temp} °C",
             ((S, "Our courier's cold-chain report for {tracking}: '[van cooling failed, parcel at {temp} °C for "
                  "9 hours]'."),),
             ("logger", "banner", "MAX {temp} C ALARM", media.RED), (B,), (B,)),
        Fact("the box's temperature logger stayed at or below {temp} °C for the whole trip",
             ((B, "[I only opened the box the evening after delivery, it stood in the hallway all day]."),
              (S, "Logger download for box {ref}: [maximum {temp} °C over the whole trip], delivered "
                  "{delivered_date}.")),
             ("logger", "banner", "MAX {temp} C OK", media.GREEN), (B, S), (B,))),
    Scenario(
        "digital", "battery",
        (Product("Refurbished ReNew Phone 12, 128 GB", "phone", 249, 349, "battery"),
         Product("Refurbished Pixelon 7 Pro, 256 GB", "phone", 299, 429, "battery"),
         Product("Refurbished TabletOne 10.9, 64 GB", "tablet", 199, 299, "battery")),
        ("Battery drains fast; battery health below the listed minimum of 85%",
         "The {short}'s battery does not meet the listing (at least 85% health)"),
        ("Full refund on return", "Battery replacement at the seller's cost", "Partial refund of 30%"),
        ["The battery goes from full to nearly empty in an afternoon.",
         "The listing promised at least 85% battery health.", "It switched itself off twice this week.",
         "I barely use it, mostly messages and calls.", "My old {short} lasted two days on a charge."],
        ["Every device is tested and the battery checked before shipping.",
         "Fast drain in the first days is apps restoring from a backup.",
         "Our test report for this unit says the battery is within spec.",
         "Battery life depends a lot on screen brightness and apps.", "We grade every device by hand."],
        Fact("the battery settings show a maximum capacity of {capacity}%, below the listed 85%",
             ((S, "Our test sheet for IMEI ending {imei4}: '[battery capacity {capacity}%], graded A by "
                  "mistake'."),),
             ("phone", "banner", "Maximum Capacity {capacity}%", media.RED), (B, S), (B,)),
        Fact("the battery settings show a maximum capacity of {capacity}%, above the listed 85%",
             ((B, "[The settings do say {capacity}%], but it still drains fast when I play games."),
              (S, "Pre-shipment test sheet for IMEI ending {imei4}: [battery capacity {capacity}%, 312 cycles].")),
             ("phone", "banner", "Maximum Capacity {capacity}%", media.GREEN), (B, S), (B, S))),
    Scenario(
        "digital", "used-key",
        (Product("Game key: Starfall Odyssey (PC)", "game key", 29, 59, "key"),
         Product("Software licence: PhotoForge Pro, 1 year", "licence key", 49, 99, "licence"),
         Product("Game key: Rally Kings 2 (PC)", "game key", 19, 39, "key")),
        ("The {part} was already used when I received it", "Code does not work: used before I got it"),
        ("A working {part} or a full refund", "Full refund"),
        ["The store said the code had been used before.", "I never shared the code with anyone.",
         "I entered it on my account {handle} the same day it arrived.",
         "I want a working {part} or my money back.", "I have bought keys from other shops without any problem."],
        ["Every {part} comes fresh from the publisher and is sent once.",
         "The {part} was unused when our system delivered it.", "We have sold thousands of keys without this problem.",
         "Once a code is revealed we cannot take it back.", "Our system logs every code we hand out."],
        Fact("the store's redeem page says the key was redeemed on {early_date}, before it was delivered",
             ((S, "Our supplier has confirmed this batch was resold: [key ending {key4} was first activated on "
                  "{early_date}]."),),
             ("store", "banner", "ALREADY REDEEMED ON {early_date}", media.RED), (B,), (B,)),
        Fact("the publisher's activation log shows the key redeemed by the buyer's own account {handle}",
             ((B, "[I did activate it on my {handle} account first], but then it stopped working."),
              (S, "Publisher activation log for key ending {key4}: [redeemed by account {handle} on "
                  "{delivered_date}].")),
             ("store", "banner", "REDEEMED BY {handle} ON {delivered_date}", media.GREEN), (S, B), (S,))),
    Scenario(
        "others", "not-received",
        (Product("Bluetooth speaker, 20 W", "speaker", 39, 89, "parcel"),
         Product("Board game collection", "board games", 45, 95, "parcel"),
         Product("Cordless drill set", "drill set", 69, 139, "parcel"),
         Product("Houseplant set, 3 pots", "plant set", 29, 59, "parcel")),
        ("Parcel marked as delivered but never received", "Tracking says delivered, nothing arrived"),
        ("Full refund", "Reshipment at the seller's cost"),
        ["Nothing was left at my door, and my neighbours have nothing either.",
         "I was at home all afternoon and nobody rang.", "Tracking says delivered, but I never got it.",
         "My address is {address}, it is clearly marked.", "I have lived here for six years and never lost a parcel."],
        ["The courier confirmed delivery to your address with a photo.",
         "Once the courier has delivered, the parcel is no longer our responsibility.",
         "Tracking shows it as delivered on {delivered_date}.", "We used the address on your order, {address}.",
         "Perhaps a neighbour or housemate took it in."],
        Fact("the courier's delivery photo shows house number {shown_door}, not the buyer's {door}",
             ((S, "The courier has now told us [the driver left it at number {wrong_door}], the next building."),),
             ("door", "plate", "{street} {shown_door}", media.BLUE), (S, B), (S,)),
        Fact("the courier's delivery photo shows the parcel at the buyer's own door, number {door}",
             ((B, "[My flatmate says she took a parcel in on {delivered_date}], I have not seen it yet."),
              (S, "Courier proof of delivery {tracking}: [parcel handed to a resident at the door], "
                  "{delivered_date} 14:17.")),
             ("door", "plate", "{street} {shown_door}", media.BLUE), (S,), (S,), label_is_clue=False)),
    Scenario(
        "others", "missing-part",
        (Product("Remote-control car 1:16 with controller", "RC car", 49, 99, "remote control"),
         Product("Mirrorless camera kit with charger", "camera kit", 399, 699, "charger"),
         Product("Kids' drum kit with stool", "drum kit", 89, 149, "stool")),
        ("The {part} was missing from the box", "Incomplete delivery: no {part} in the box"),
        ("Send the missing {part}", "Partial refund of 25%", "Full refund on return"),
        ["The {part} was not in the box, I checked every layer of foam.", "I unpacked it in front of my family.",
         "The listing clearly shows the {part} included.", "The tape on the box looked untouched.",
         "Without the {part} the set is useless to us."],
        ["Every {part} is packed with the set; we check against a list.",
         "The box was taped and sealed when it left us.", "The weight at dispatch matches a complete set.",
         "We film or photograph every order before it is sealed.", "No other buyer has reported a missing {part}."],
        Fact("the seller's own packing slip is stamped '{PART}: OUT OF STOCK'",
             ((S, "Looking at our packing slip again: [the {part}s were out of stock that week] and should have "
                  "gone out separately."),),
             ("slip", "banner", "{PART}: OUT OF STOCK", media.RED), (B, S), (B, S)),
        Fact("the {part} is placed in its slot before the box is closed",
             ((B, "[My son has now found the {part} in the foam], but it does not seem to work."),),
             ("foam", "part", "", media.WHITE), (S,), (S,))),
)

FIRST = ("Jiwon", "Lena", "Marco", "Aisha", "Tomasz", "Sofia", "Daniel", "Mei", "Olu", "Hanna", "Pierre", "Ines")
LAST = ("Park", "Novak", "Rossi", "Khan", "Berg", "Silva", "Meyer", "Chen", "Adeyemi", "Larsen", "Dubois", "Costa")
SHOPS = {"appliances": ("Nordlicht Home", "KitchenCraft Direct", "Casa Verde"),
         "clothing": ("Linen & Co", "Urban Threads", "Maison Fil"),
         "food": ("Highland Pantry", "Green Larder", "Deli Nord"),
         "digital": ("ByteBay Refurb", "Pixel Point", "KeyVault"),
         "others": ("GadgetHub", "TopToys Outlet", "Casa Verde")}
COURIERS = ("SwiftPost", "ParcelOne", "RapidRoute", "CityCourier")
PLACES = (("Berlin", "Lindenstr."), ("Hamburg", "Speicherstr."), ("Lyon", "Rue des Lilas"), ("Krakow", "ul. Dluga"),
          ("Manchester", "Oak Lane"), ("Utrecht", "Vondelstraat"), ("Gothenburg", "Linnegatan"))
CURRENCIES = (("EUR", 1.0), ("EUR", 1.0), ("EUR", 1.0), ("GBP", 0.86), ("USD", 1.08), ("PLN", 4.3), ("SEK", 11.2))
FAULT_CODES = ("E04 HEATER FAULT", "E07 SENSOR ERROR", "ERR 3 NO HEAT", "E12 TRIAC FAIL")

CAPTIONS = {"image": ["photo {n}", "picture {n}", "photo {n} attached", "see photo {n}", "here is photo {n}",
                      "image {n}"],
            "video": ["video {n}", "clip {n}", "video {n} attached", "short video ({n})", "here is video {n}"]}

LINES: dict[str, dict[str, list[str]]] = {
    "buyer": {
        "greetings": ["Hello,", "Hi there.", "Good morning.", "Hello, I hope you can help me with this.",
                      "Hi, I am writing about order {order}.", "Dear {shop} team,"],
        "chatter": ["The parcel came a day earlier than expected.",
                    "Tracking showed it sitting in {city} for two days.",
                    "The courier was friendly, no complaints there.",
                    "I have bought from {shop} before and was always happy.", "I paid by card on {ordered_date}.",
                    "The box had my name and address printed correctly.", "I am usually at home in the afternoons."],
        "records": ["Order confirmation {order}: {product}, {amount} {currency}, paid {ordered_date}.",
                    "My order history shows order {order} as delivered on {delivered_date}."],
        "confident": ["I am completely sure about what I am telling you.", "I have described exactly what happened.",
                      "Anyone looking at this can see I am right."],
        "filler": ["Please let me know what you need from me.", "I would like this settled quickly.",
                   "I have kept all the packaging."],
        "signoffs": ["Thanks for looking into this.", "Regards, {buyer_first}", "I hope we can sort this out quickly.",
                     "Thank you, {buyer_first}"],
        "openers": ["That is simply not true.", "To answer your question:", "With respect, that is not what happened.",
                    "I have to disagree.", "Thanks for the reply."],
        "nudges": ["Is there any update on this?", "I am still waiting for an answer.",
                   "Please see my earlier messages."],
    },
    "seller": {
        "greetings": ["Hello, thank you for contacting {shop}.", "Hi, this is {agent} from {shop}.", "Good afternoon.",
                      "Dear {buyer_first},", "Hello and thank you for your message."],
        "chatter": ["Your order {order} left our warehouse on {shipped_date}.",
                    "We ship all orders of this size with {courier}.",
                    "We have a 4.8 star rating from over 2,000 buyers.",
                    "Orders placed before 2 pm are packed the same day.",
                    "Our customer service team is available on weekdays from 9 to 5.",
                    "We are a family business and take every complaint seriously.",
                    "As a gesture of goodwill we could offer a {pct}% voucher."],
        "records": ["Dispatch record {order}: 1 x {product}, handed to {courier} on {shipped_date}, "
                    "tracking {tracking}.",
                    "Tracking {tracking}: picked up {shipped_date}, sorted in {city}, delivered {delivered_date}."],
        "confident": ["We are confident the order was correct when it left us.", "Our records are clear on this.",
                      "We stand by our product."],
        "filler": ["We are happy to look into this further.", "Please send any further details you have.",
                   "We will follow the platform's decision."],
        "signoffs": ["Kind regards, the {shop} team.", "Thank you for your patience.", "Best wishes, {agent}",
                     "Kind regards, {agent} ({shop})"],
        "openers": ["We have looked at this again.", "To clarify our position:", "We understand your frustration.",
                    "Thank you for the extra details.", "We checked our records once more."],
        "nudges": ["We have nothing further to add at this point.", "Please refer to our earlier messages."],
    },
}


def case_facts(rng: np.random.Generator, scenario: Scenario, side: Party) -> dict:
    """Every value a template may name, drawn for one case; some depend on the planted side."""
    def one(options):
        return options[int(rng.integers(len(options)))]

    def day(d: datetime) -> str:
        return d.strftime("%d.%m.%Y")

    product = one(scenario.products)
    first, last = one(FIRST), one(LAST)
    city, street = one(PLACES)
    currency, rate = one(CURRENCIES)
    amount = Decimal(f"{float(rng.uniform(product.low, product.high)) * rate:.0f}") - Decimal("0.10")
    ordered = datetime(2026, 1, 5, tzinfo=timezone.utc) + timedelta(
        days=int(rng.integers(0, 300)), hours=int(rng.integers(8, 22)), minutes=15 * int(rng.integers(0, 4)))
    delivered = (ordered + timedelta(days=int(rng.integers(2, 7)))).replace(hour=int(rng.integers(9, 19)), minute=0)
    door_no = int(rng.integers(3, 60))
    door = f"{door_no}{one(('', 'A', 'B'))}"
    wrong_door = f"{door_no + one((-2, 2, 1))}{one(('', 'A', 'B'))}"
    ordered_size = int(one((36, 38, 40, 42, 44)) if product.sizing == "garment" else rng.integers(37, 46))
    other_size = ordered_size - (2 if product.sizing == "garment" else 1)
    buyer_side = side == "buyer"
    facts = {
        "product": product.name, "short": product.short, "part": product.part, "PART": product.part.upper(),
        "buyer_first": first, "street": street, "initials": f"{first[0]}. {last.upper()}",
        "agent": one([name for name in FIRST if name != first]), "shop": one(SHOPS[scenario.category]),
        "courier": one(COURIERS), "city": city, "door": door, "wrong_door": wrong_door,
        "shown_door": wrong_door if buyer_side else door, "address": f"{street} {door}, {city}",
        "order": f"{int(rng.integers(1000, 9999))}-{int(rng.integers(1000, 9999))}",
        "tracking": f"{one(COURIERS)[:2].upper()} {int(rng.integers(1000, 9999))} {int(rng.integers(1000, 9999))}",
        "ordered_date": day(ordered), "shipped_date": day(ordered + timedelta(days=1)),
        "delivered_date": day(delivered), "ordered_iso": _iso(ordered), "delivered_iso": _iso(delivered),
        "report_date": day(delivered + timedelta(days=int(rng.integers(8, 16)))),
        "early_date": day(delivered - timedelta(days=int(rng.integers(3, 31)))),
        "clip_stamp": (delivered + timedelta(minutes=int(rng.integers(30, 2880)))).strftime("%Y-%m-%d %H:%M"),
        "amount": str(amount), "currency": currency, "pct": int(one((10, 15, 20))),
        "serial": f"{int(rng.integers(10, 99))}S-{int(rng.integers(1000, 9999))}-{int(rng.integers(1000, 9999))}",
        "ref": f"SR-{int(rng.integers(10000, 99999))}", "lot": f"L{int(rng.integers(100, 999))}",
        "imei4": f"{int(rng.integers(1000, 9999))}", "key4": f"{int(rng.integers(1000, 9999))}-X",
        "handle": f"{first.lower()}_{last[:3].lower()}{int(rng.integers(10, 99))}",
        "code": one(FAULT_CODES), "hours": int(rng.integers(600, 2400)),
        "ordered_size": ordered_size, "other_size": other_size,
        "shown_size": other_size if buyer_side else ordered_size,
        "bb": day(delivered - timedelta(days=int(rng.integers(3, 41))) if buyer_side
                  else delivered + timedelta(days=int(rng.integers(60, 241)))),
        "capacity": int(rng.integers(62, 80)) if buyer_side else int(rng.integers(88, 98)),
        "temp": f"{float(rng.uniform(14, 25)):.1f}" if buyer_side else f"{float(rng.uniform(2.1, 6)):.1f}",
    }
    return facts
