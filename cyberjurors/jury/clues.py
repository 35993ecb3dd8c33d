"""Stage II: clue localisation by select-perceive iteration, O_II.

For each party independently (so one side's evidence never colours the other's selection):
select the single unseen item most likely to hold a key clue given O_I, perceive it in detail
(text as text, photos as images, videos as sampled frames), and repeat up to T_max times or
until the selector says nothing left is relevant.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field, replace

from ..config import Settings
from ..evidence import ocr
from ..evidence.media import Frame, MediaUnreadable, check_header, load_image, sample_frames
from ..llm.port import LLM, ImagePart, LLMRequest, LLMResult, Part, gather_all, stage_request
from ..schemas import (
    CaseFile,
    Clue,
    ClueChain,
    DisputeCase,
    EvidenceItem,
    Focus,
    MediaRef,
    Party,
    Perception,
    Selection,
    Usage,
)
from . import prompts
from .answers import ask
from .budget import CaseBudget, clues_note
from .model_inputs import PerceiveTask, SelectTask


@dataclass
class PartyChain:
    clues: list[Clue] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    problems: list[str] = field(default_factory=list)
    budget: CaseBudget = field(default_factory=lambda: CaseBudget(0, 0.0))

    def spend(self, usage: Usage) -> None:
        self.usage += usage
        self.budget.add(usage)


async def find_clues(
    case: DisputeCase, focus: Focus, llm: LLM, settings: Settings, budget: CaseBudget | None = None
) -> tuple[ClueChain, Usage, list[str]]:
    """O_II for both parties. With a ``budget`` (shared by the two parties, which run side by
    side), no select step starts once it is reached; what was skipped is noted and kept in it."""
    budget = budget or CaseBudget(0, 0.0)
    warm = await _warm_selection(case, focus, llm, settings, budget)
    buyer, seller = await gather_all(
        _party_clues(case, focus, "buyer", llm, settings, budget, warm=warm),
        _party_clues(case, focus, "seller", llm, settings, budget),
    )
    examined = {c.evidence_id for c in buyer.clues + seller.clues}
    problems = buyer.problems + seller.problems + await screen_media(case, examined, settings)
    if budget.stopped is not None:
        problems.append(clues_note(budget.stopped, budget.skipped, settings))
    return ClueChain(buyer=buyer.clues, seller=seller.clues), buyer.usage + seller.usage, problems


async def screen_media(
    case: DisputeCase, examined: set[str], settings: Settings, among: set[str] | None = None
) -> list[str]:
    """A note for each media item the selector passed over (of ``among``, when given) whose header
    already shows it cannot be read (over a cap, a bomb, corrupt, missing): a reader of the verdict
    learns of it although no juror looked. Header only, nothing decoded, no URL fetched
    (``media.check_header``)."""
    items = [
        i for i in case.items() if i.media is not None and i.id not in examined and (among is None or i.id in among)
    ]

    async def note(item: EvidenceItem) -> list[str]:
        notes: list[str] = []
        try:
            await check_header(item.media, settings, notes)  # type: ignore[arg-type]  # filtered above
        except MediaUnreadable as err:
            return [
                f"evidence {item.id} ({case.party_of(item.id)}, not selected for examination) could not be "
                f"read ({err.reason}): {err.detail}"
            ]
        return [f"evidence {item.id} ({case.party_of(item.id)}, not selected for examination): {n}" for n in notes]

    return [n for found in await gather_all(*(note(i) for i in items)) for n in found]


async def more_clues(
    case: DisputeCase,
    focus: Focus,
    party: Party,
    items: list[EvidenceItem],
    chain: ClueChain,
    llm: LLM,
    settings: Settings,
    budget: CaseBudget,
) -> tuple[ClueChain, Usage, list[str]]:
    """Stage II on ``items`` only (evidence filed with an appeal), after the party's clues so far:
    up to T_max select-perceive steps among them, the chain's clue ids and steps going on from the
    party's last (b4 after b3), and a header check of the items passed over."""
    found = await _party_clues(case, focus, party, llm, settings, budget, items, getattr(chain, party))
    examined = {c.evidence_id for c in found.clues}
    problems = found.problems + await screen_media(case, examined, settings, {i.id for i in items})
    if budget.stopped is not None:
        problems.append(clues_note(budget.stopped, budget.skipped, settings))
    return chain.model_copy(update={party: [*getattr(chain, party), *found.clues]}), found.usage, problems


async def _warm_selection(
    case: DisputeCase, focus: Focus, llm: LLM, settings: Settings, budget: CaseBudget
) -> LLMResult[Selection] | None:
    """The buyer's first selection, made before either party's chain runs on (``warm_cache_first``):
    both parties' selectors and perceivers send the same prefix (the case metadata and O_I), and a
    provider serves a cache entry only once the call that wrote it has answered, so two first calls
    side by side would each pay to write it. None when nothing would be cached or read."""
    buyer = list(case.items("buyer"))
    if not (settings.warm_cache_first and buyer and case.items("seller")) or budget.reached():
        return None
    rounds = {i.id: r.round for r in case.rounds if r.party == "buyer" for i in r.items}
    request = _select_request(case, focus, "buyer", buyer, rounds, [], settings)
    return await ask(llm, request, Selection) if request.cache_prefix else None


async def _party_clues(
    case: DisputeCase,
    focus: Focus,
    party: Party,
    llm: LLM,
    settings: Settings,
    budget: CaseBudget,
    items: list[EvidenceItem] | None = None,
    before: list[Clue] | None = None,
    warm: LLMResult[Selection] | None = None,
) -> PartyChain:
    """The party's chain over ``items`` (default: all its evidence), after the clues ``before`` it;
    ``warm`` is its first selection, already made (``_warm_selection``)."""
    chain = PartyChain(budget=budget)
    before = before or []
    rounds = {i.id: r.round for r in case.rounds if r.party == party for i in r.items}
    unseen = list(case.items(party) if items is None else items)
    for step in range(len(before) + 1, len(before) + settings.max_select_steps + 1):
        if not unseen:
            break
        if budget.reached():
            budget.skip("clues", min(len(before) + settings.max_select_steps - step + 1, len(unseen)))
            break
        if warm is not None:
            selection, warm = warm, None
        else:
            selection = await ask(
                llm, _select_request(case, focus, party, unseen, rounds, before + chain.clues, settings), Selection
            )
        chain.spend(selection.usage)
        chosen = next((i for i in unseen if i.id == selection.output.evidence_id), None)
        if chosen is None:
            if selection.output.evidence_id is not None:
                chain.problems.append(
                    f"selector named {selection.output.evidence_id!r}, not an unseen {party} item; selection stopped"
                )
            break
        unseen.remove(chosen)
        clue = await _perceive(
            case, focus, party, step, chosen, rounds[chosen.id], selection.output, chain, llm, settings, before
        )
        chain.clues.append(clue)
    return chain


def _select_request(
    case: DisputeCase,
    focus: Focus,
    party: Party,
    unseen: list[EvidenceItem],
    rounds: dict[str, int],
    chain: list[Clue],
    settings: Settings,
) -> LLMRequest:
    return stage_request(
        "select",
        settings,
        system=prompts.SELECT_SYSTEM,
        shared=[_clue_prefix(case, focus)],
        prompt=[prompts.select_prompt(party, [(rounds[i.id], i) for i in unseen], chain)],
        task=SelectTask(case, focus, party, list(unseen), list(chain)),
        case_id=case.case_id,
    )


def _clue_prefix(case: DisputeCase, focus: Focus) -> str:
    """What both the selector and the perceiver of a case share: its metadata and O_I."""
    return f"{prompts.metadata_block(case)}\n\n{prompts.focus_block(focus)}"


async def _perceive(
    case: DisputeCase,
    focus: Focus,
    party: Party,
    step: int,
    item: EvidenceItem,
    round_no: int,
    selection: Selection,
    chain: PartyChain,
    llm: LLM,
    settings: Settings,
    before: list[Clue] | None = None,
) -> Clue:
    clue_id = f"{party[0]}{step}"
    base = dict(
        id=clue_id,
        party=party,
        step=step,
        evidence_id=item.id,
        evidence_kind=item.kind,
        selection_reason=selection.reason,
    )
    notes: list[str] = []
    try:
        media, frames = await _media_parts(case, item, party, round_no, settings, notes)
    except MediaUnreadable as err:
        chain.problems.append(f"evidence {item.id} could not be read ({err.reason}): {err.detail}")
        return Clue(
            **base,
            clue="(unreadable)",
            assessment=f"The {item.kind} could not be read: {err.reason}.",
            leaning="neutral",
            problem=err.reason,
        )
    chain.problems += [f"evidence {item.id}: {n}" for n in notes]
    earlier = [*(before or []), *chain.clues]
    request = stage_request(
        "perceive",
        settings,
        system=prompts.PERCEIVE_SYSTEM,
        shared=[_clue_prefix(case, focus)],
        prompt=[prompts.perceive_prompt(party, round_no, item, earlier), *media],
        task=PerceiveTask(case, focus, party, item, earlier, frames),
        case_id=case.case_id,
    )
    result = await ask(llm, request, Perception)
    chain.spend(result.usage)
    seen = {f.index: f for f in frames}
    cited = [n for n in result.output.frames if n in seen]
    return Clue(
        **base,
        clue=result.output.clue,
        assessment=result.output.assessment,
        leaning=result.output.leaning,
        frames=cited,
        frame_times_s=[round(seen[n].time_s, 3) for n in cited],
    )


async def _media_parts(
    case: DisputeCase, item: EvidenceItem, party: Party, round_no: int, settings: Settings, notes: list[str]
) -> tuple[list[Part], list[Frame]]:
    label, caption = prompts.evidence_label(item, party), prompts.caption(item, party, round_no)
    if item.kind == "image" and item.media:
        image = captioned(await load_image(item.media, settings, label=label, notes=notes), caption)
        return list(await _read_text(case, item, party, round_no, [image], settings)), []
    if item.kind == "video" and item.media:
        frames = await sample_frames(item.media, settings, label=label, notes=notes)
        shown = await _read_text(case, item, party, round_no, [captioned(f.image, caption) for f in frames], settings)
        return list(shown), [replace(f, image=p) for f, p in zip(frames, shown, strict=True)]
    return [], []


def captioned(image: ImagePart, caption: str) -> ImagePart:
    """The image with what a model that reads no images reads instead (``llm/fitting.captioned``)."""
    return replace(image, caption=caption)


async def _read_text(
    case: DisputeCase, item: EvidenceItem, party: Party, round_no: int, parts: list[ImagePart], settings: Settings
) -> list[ImagePart]:
    """With ``privacy.ocr`` on, the item's images boxed out where their text holds personal data, and
    that text, masked, with them (``evidence/ocr.py``); ``case`` is the case as the jury sees it.
    Raises MediaUnreadable (the item withheld, noted) when the text cannot be read."""
    if not settings.privacy.ocr or not settings.privacy.mask:
        return parts
    shown, text = await ocr.read_item(parts, case, settings)
    said = prompts.image_text(item, party, round_no, text) if text else ""
    return [replace(p, text=said) for p in shown]


PASSIVE_CASES_KEPT = 16
_passive: OrderedDict[tuple, tuple[list[Part], list[str], list[str]]] = OrderedDict()


async def passive_evidence(case_file: CaseFile, settings: Settings) -> tuple[list[Part], list[str]]:
    """Stage II switched off: every photo and a few frames of every video, labelled with their
    evidence ids, for the jurors to read all at once (one-time passive perception, as a
    multimodal model given the whole case would). Returns the parts and the items that could
    not be read. The clue stage and every jury round ask for the same case's media: the last
    few cases' are kept decoded."""
    parts, problems, _ = await _passive_entry(case_file, settings)
    return parts, problems


async def unread_passive(case_file: CaseFile, settings: Settings) -> list[str]:
    """Stage II switched off: the ids of the media items the jurors were to see that could not be decoded."""
    return (await _passive_entry(case_file, settings))[2]


async def _passive_entry(case_file: CaseFile, settings: Settings) -> tuple[list[Part], list[str], list[str]]:
    # keyed by the digest computed once at intake, not by re-hashing the case on every lookup
    key = (
        case_file.digest,
        str(settings.media_root),
        settings.frames.passive_per_video,
        settings.max_image_side,
        settings.frames.sampling,
        settings.frames.event_share,
        settings.frames.event_max_frames,
        settings.privacy.ocr,
        settings.privacy.ocr_timeout_s,
    )
    if key not in _passive:
        _passive[key] = await _decode_all(case_file.case, settings)
        if len(_passive) > PASSIVE_CASES_KEPT:
            _passive.popitem(last=False)
    _passive.move_to_end(key)
    return _passive[key]


async def attached_media(case_file: CaseFile, settings: Settings) -> list[Part]:
    """The media a juror (or the court) reads itself: none when stage II read it for them."""
    return [] if settings.clues_stage else (await passive_evidence(case_file, settings))[0]


async def _decode_all(case: DisputeCase, settings: Settings) -> tuple[list[Part], list[str], list[str]]:

    rounds = {i.id: r.round for r in case.rounds for i in r.items}

    async def one(item: EvidenceItem, media: MediaRef, party: Party, notes: list[str]) -> list[Part]:
        label, caption = prompts.evidence_label(item, party), prompts.caption(item, party, rounds[item.id])
        if item.kind == "image":
            images = [captioned(await load_image(media, settings, label=label, notes=notes), caption)]
        else:
            frames = await sample_frames(media, settings, settings.frames.passive_per_video, label=label, notes=notes)
            images = [captioned(f.image, caption) for f in frames]
        return list(await _read_text(case, item, party, rounds[item.id], images, settings))

    parts: list[Part] = []
    problems: list[str] = []
    unread: list[str] = []
    for item in case.items():
        if item.kind == "text" or item.media is None:
            continue
        notes: list[str] = []
        try:
            parts += await one(item, item.media, case.party_of(item.id), notes)
            problems += [f"evidence {item.id}: {n}" for n in notes]
        except MediaUnreadable as err:
            problems.append(f"evidence {item.id} could not be read ({err.reason}): {err.detail}")
            unread.append(item.id)
    return parts, problems, unread
