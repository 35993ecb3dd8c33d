"""Evidence as the console shows it: photos and the video frames the jury saw, read only through
media.py (a ``path`` resolved inside ``media_root`` and refused outside it, a ``stored`` object from
the media store, a ``url`` only on ``url_allowlist``, every cap checked before decoding) and
re-encoded as JPEG, so what reaches the browser is a picture we decoded, never bytes as a party
sent them. A browser names an item by case, instance and evidence id; which file that is comes
from the record, never from the request."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass

from ..config import Settings
from ..errors import CyberJurorsError
from ..evidence.media import Frame, MediaUnreadable, load_image, sample_frames
from ..schemas import CaseFile, Clue, EvidenceItem, Verdict


class NoSuchEvidence(CyberJurorsError, LookupError):
    kind = "no_such_evidence"


def media_item(record: CaseFile, evidence_id: str) -> EvidenceItem:
    """The photo or video ``evidence_id`` of the record; NoSuchEvidence for anything else."""
    try:
        item = record.case.item(evidence_id)
    except KeyError as err:
        raise NoSuchEvidence(f"no evidence {evidence_id!r} in case {record.case_id}") from err
    if item.media is None or item.kind not in ("image", "video"):
        raise NoSuchEvidence(f"evidence {evidence_id!r} is not a photo or a video")
    return item


def frame_count(settings: Settings) -> int:
    """As many frames as the jury was given: stage II's sampling, or the passive one without it."""
    return settings.frames.per_video if settings.clues_stage else settings.frames.passive_per_video


class FrameCache:
    """Sampled frames of the last few videos looked at (bounded: ``size`` videos), so a page and its
    frame images decode a video once."""

    def __init__(self, size: int = 8):
        self.size = size
        self._frames: OrderedDict[tuple[str, int, str], list[Frame]] = OrderedDict()
        self._lock = asyncio.Lock()

    async def frames(self, record: CaseFile, instance: int, item: EvidenceItem, settings: Settings) -> list[Frame]:
        key = (record.case_id, instance, item.id)
        async with self._lock:
            if key in self._frames:
                self._frames.move_to_end(key)
                return self._frames[key]
            # item comes from media_item(), which returns only items with media
            found = await sample_frames(item.media, settings, frame_count(settings))  # type: ignore[arg-type]
            self._frames[key] = found
            while len(self._frames) > self.size:
                self._frames.popitem(last=False)
            return found


async def photo(item: EvidenceItem, settings: Settings) -> bytes:
    part = await load_image(item.media, settings, label=item.id)  # type: ignore[arg-type]  # from media_item()
    return part.data


@dataclass(frozen=True)
class StripFrame:
    index: int
    time_s: float
    clues: tuple[str, ...]  # the clues that cite this frame
    verdict_cites: bool  # one of them is among the verdict's cited clues


@dataclass(frozen=True)
class Strip:
    frames: list[StripFrame]
    problem: str | None = None


def cited_frames(clues: list[Clue], evidence_id: str) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for clue in clues:
        if clue.evidence_id == evidence_id:
            for n in clue.frames:
                out.setdefault(n, []).append(clue.id)
    return out


async def strip(
    cache: FrameCache, record: CaseFile, instance: int, item: EvidenceItem, verdict: Verdict | None, settings: Settings
) -> Strip:
    """The video's sampled frames with the clues citing each; a problem instead when it cannot be read."""
    try:
        frames = await cache.frames(record, instance, item, settings)
    except MediaUnreadable as err:
        return Strip([], f"{err.reason}: {err.detail}")
    cites = cited_frames(record.clues.all() if record.clues else [], item.id)
    by_verdict = {c.id for c in verdict.cited_clues} if verdict else set()
    return Strip(
        [
            StripFrame(f.index, f.time_s, tuple(cites.get(f.index, ())), bool(set(cites.get(f.index, ())) & by_verdict))
            for f in frames
        ]
    )
