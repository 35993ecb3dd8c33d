"""Prompts that fit the model's window, and images a text-only model reads as captions.

The jury renders its prompts as ``Marked`` text: each precedent line (a past case, a guideline)
is a span that may be dropped, each party's text (a message, a caption) a span that may be clipped.
Every backend sends the text as it is; a backend that knows the model's context window
(``llm/capabilities.py``) and finds the request too long calls ``fit`` with how many characters to
cut, and the rule is:

1. drop precedents, the lowest-ranked first (the highest ``rank`` number), until enough is cut;
2. then clip the longest texts of the parties, all down to one common length (the longest first,
   never below ``MIN_CLIPPED`` characters), each ending in a marker that says it was clipped.

What was dropped and clipped is returned, for the note on the verdict. A request that cannot be
cut enough is not sent (the backend says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .port import ImagePart, Marked, Part, Span, TextPart

MIN_CLIPPED = 160  # a clipped text keeps at least its first lines


def clip_marker(shown: int, total: int) -> str:
    return f" … [clipped to fit the model's context window: {shown} of {total} characters]"


MARKER_ROOM = len(clip_marker(10**6, 10**6))


def mark(text: str, kind: str, name: str, rank: int = 0, start: int = 0, end: int | None = None) -> Marked:
    """``text`` with one span over ``text[start:end]`` (all of it by default)."""
    stop = len(text) if end is None else end
    return Marked(text, (Span(start, stop, kind, name, rank),))  # type: ignore[arg-type]  # kind is "drop" or "clip"


def cat(*items: str) -> Marked:
    """The items joined end to end, their spans moved along."""
    return join("", items)


def join(sep: str, items: Sequence[str]) -> Marked:
    """``sep.join(items)`` keeping each item's spans; a span that drops a whole item takes one
    separator with it, so a dropped line leaves no blank line behind."""
    text, spans, at = [], [], 0
    for n, item in enumerate(items):
        for span in getattr(item, "spans", ()):
            start, end = at + span.start, at + span.end
            if span.kind == "drop" and span.start == 0 and span.end == len(item):
                if n < len(items) - 1:
                    end += len(sep)
                elif n > 0:
                    start -= len(sep)
            spans.append(Span(start, end, span.kind, span.name, span.rank))
        text.append(item)
        at += len(item) + (len(sep) if n < len(items) - 1 else 0)
    return Marked(sep.join(items), spans)


@dataclass
class Fitted:
    parts: list[Part]
    dropped: list[str] = field(default_factory=list)
    clipped: list[str] = field(default_factory=list)
    cut: int = 0
    """characters taken out (markers added back)"""

    def note(self) -> str:
        said = []
        if self.dropped:
            said.append("dropped " + ", ".join(self.dropped))
        if self.clipped:
            said.append("clipped " + ", ".join(self.clipped))
        return "; ".join(said)


def fit(parts: Sequence[Part], cut: int) -> Fitted | None:
    """``parts`` with at least ``cut`` characters taken out by the rule above, or None when even
    every precedent dropped and every text clipped to ``MIN_CLIPPED`` would not take out that many."""
    spans = [(n, s) for n, p in enumerate(parts) if isinstance(p, TextPart) for s in p.spans]
    drops = sorted((x for x in spans if x[1].kind == "drop"), key=lambda x: (-x[1].rank, -x[0], -x[1].start))
    chosen: list[tuple[int, Span]] = []
    removed = 0
    for candidate in drops:
        if removed >= cut:
            break
        chosen.append(candidate)
        removed += candidate[1].end - candidate[1].start
    clips = [x for x in spans if x[1].kind == "clip" and not _inside(x, chosen)]
    cap = _common_length(sorted((s.end - s.start for _, s in clips), reverse=True), cut - removed)
    if cap is None:
        return None
    clipped = [(n, s, cap) for n, s in clips if s.end - s.start - cap > MARKER_ROOM] if removed < cut else []
    fitted = Fitted(list(parts), [s.name for _, s in chosen], [f"{s.name} to {c} characters" for _, s, c in clipped])
    for n, part in enumerate(parts):
        if isinstance(part, TextPart):
            cuts: list[tuple[Span, int | None]] = [(s, None) for m, s in chosen if m == n]
            cuts += [(s, c) for m, s, c in clipped if m == n]
            fitted.parts[n] = _cut(part, cuts)
    fitted.cut = sum(len(p.text) for p in parts if isinstance(p, TextPart)) - sum(
        len(p.text) for p in fitted.parts if isinstance(p, TextPart)
    )
    return fitted


def _inside(clip: tuple[int, Span], dropped: list[tuple[int, Span]]) -> bool:
    n, s = clip
    return any(m == n and d.start <= s.start and s.end <= d.end for m, d in dropped)


def _common_length(lengths: list[int], need: int) -> int | None:
    """The largest length L (>= MIN_CLIPPED) such that cutting every longer text down to L (and
    adding its marker) takes out at least ``need`` characters; None if none does."""
    if need <= 0:
        return max(lengths, default=0)

    def taken(cap: int) -> int:
        return sum(length - cap - MARKER_ROOM for length in lengths if length - cap > MARKER_ROOM)

    if taken(MIN_CLIPPED) < need:
        return None
    low, high = MIN_CLIPPED, max(lengths)
    while low < high:  # taken() falls as the cap grows: the largest cap that still takes enough
        mid = (low + high + 1) // 2
        low, high = (mid, high) if taken(mid) >= need else (low, mid - 1)
    return low


def _cut(part: TextPart, cuts: list[tuple[Span, int | None]]) -> TextPart:
    """The part with each span dropped (None) or clipped to its length, from the end backwards."""
    text = part.text
    for span, keep in sorted(cuts, key=lambda c: c[0].start, reverse=True):
        if keep is None:
            text = text[: span.start] + text[span.end :]
        elif span.end - span.start - keep > MARKER_ROOM:
            body = text[span.start : span.end]
            text = text[: span.start] + body[:keep] + clip_marker(keep, len(body)) + text[span.end :]
    return TextPart(text)


def captioned(parts: Sequence[Part]) -> list[Part]:
    """The parts as a model that reads no images gets them: each image becomes its label and
    caption as text, once per captioned item (a video's frames share their item's caption)."""
    out: list[Part] = []
    seen: set[str] = set()
    for part in parts:
        if not isinstance(part, ImagePart):
            out.append(part)
            continue
        item = part.caption or part.label.split(" frame ")[0]  # a video's frames: one line for the video
        if item in seen:
            continue
        seen.add(item)
        said = f"the party's caption: {part.caption}" if part.caption else "no caption"
        read = f"; the text read in it (OCR, personal data masked): {part.text}" if part.text else ""
        out.append(TextPart(f"[{part.label}: not shown, this model reads no images; {said}{read}]"))
    return out


def has_images(parts: Sequence[Part]) -> bool:
    return any(isinstance(p, ImagePart) for p in parts)
