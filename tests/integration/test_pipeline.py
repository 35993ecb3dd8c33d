"""The real Faust worker on the embedded broker: every sample case yields exactly one verdict."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import av
import numpy as np
import pytest
from PIL import Image

from cyberjurors.kafka.cluster import ensure_topics
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMRequest
from cyberjurors.schemas import (
    BallotDraft,
    CaseFile,
    DisputeCase,
    Focus,
    Perception,
    RoundSummaryDraft,
    Selection,
    Verdict,
)
from cyberjurors.streams.app import create_app
from cyberjurors.tooling.clients import produce, read_events

from ..conftest import EXAMPLES, calls, read_topic, running_app

pytestmark = pytest.mark.integration


async def test_every_sample_case_gets_one_verdict(settings, worker):
    events = read_events([EXAMPLES / "cases", EXAMPLES / "incremental"])
    cases = {}
    for path in sorted((EXAMPLES / "cases").glob("*.json")):
        case = DisputeCase.model_validate_json(path.read_text())
        cases[case.case_id] = case
    expected = {e.case_id for e in events}
    assert len(cases) >= 12 and set(cases) <= expected

    await produce(settings, events)
    seen = await read_topic(settings, "disputes.verdicts", until=len(expected), timeout_s=240)
    await asyncio.sleep(2)  # anything extra would be a duplicate verdict
    seen = await read_topic(settings, "disputes.verdicts", until=len(expected) + 1, timeout_s=3)

    verdicts = [Verdict.model_validate_json(v) for _, v in seen]
    assert sorted(v.case_id for v in verdicts) == sorted(expected)
    for verdict in verdicts:
        assert verdict.votes.total == settings.jurors
        assert verdict.winner == ("seller" if verdict.votes.seller > verdict.votes.buyer else "buyer")
        assert 1 <= verdict.rounds_used <= settings.rounds
        assert verdict.backend == "offline" and "[offline stand-in]" in verdict.justification
        assert verdict.tokens.calls > settings.jurors and verdict.tokens.input_tokens > 0
        case = cases.get(verdict.case_id)
        if case is not None:
            ids = {i.id for i in case.items()}
            assert verdict.cited_clues and all(c.evidence_id in ids for c in verdict.cited_clues)
            assert all(case.party_of(c.evidence_id) == c.party for c in verdict.cited_clues)

    # the LLM call log agrees with the usage the verdicts report
    logged = calls(settings.llm_call_log)
    assert len(logged) == sum(v.tokens.calls for v in verdicts)
    assert sum(c["input_tokens"] for c in logged) == sum(v.tokens.input_tokens for v in verdicts)


def write_video(path: Path, frames: int = 60, red: range = range(40, 43), fps: int = 10) -> None:
    """A blue clip in which only a few frames are red: the clue a passive reader would miss."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for i in range(frames):
            colour = (220, 20, 20) if i in red else (20, 20, 220)
            frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), colour, dtype=np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def is_red(jpeg: bytes) -> bool:
    r, _g, b = Image.open(io.BytesIO(jpeg)).convert("RGB").resize((1, 1)).getpixel((0, 0))
    return r > 150 and b < 100


def video_case(case_id: str) -> dict:
    return {
        "case_id": case_id,
        "metadata": {
            "category": "digital",
            "product": "Phone",
            "order_amount": "399.00",
            "currency": "EUR",
            "ordered_at": "2026-10-01T10:00:00Z",
            "delivered_at": "2026-10-04T10:00:00Z",
            "dispute_reason": "Battery defective",
            "requested_remedy": "Full refund",
        },
        "rounds": [
            {
                "party": "buyer",
                "round": 1,
                "items": [
                    {"id": "b1-1", "kind": "text", "text": "The battery drains to nothing within an hour."},
                    {
                        "id": "b1-2",
                        "kind": "video",
                        "text": "Unboxing video",
                        "media": {"media_type": "video/mp4", "path": "unboxing.mp4"},
                    },
                ],
            },
            {
                "party": "seller",
                "round": 1,
                "items": [
                    {"id": "s1-1", "kind": "text", "text": "The phone was tested and fully charged at dispatch."}
                ],
            },
        ],
    }


async def test_clue_only_in_video_frames_is_perceived_through_those_frames(settings, tmp_path):
    """Scripted backend: it can only find the clue by looking at the frames the pipeline sampled."""
    write_video(tmp_path / "unboxing.mp4")
    settings = settings.model_copy(update={"media_root": tmp_path, "jurors": 5})

    def answer(request: LLMRequest, output_type):
        task = request.task
        if output_type is Focus:
            return Focus(
                focus="Was the battery defective on arrival?", buyer_claims=["defective"], seller_claims=["tested"]
            )
        if output_type is Selection:
            videos = [i for i in task.candidates if i.kind == "video"]
            pick = videos[0].id if videos else None
            return Selection(evidence_id=pick, reason="video may show the battery")
        if output_type is Perception:
            red = [f.index for f in task.frames if is_red(f.image.data)]
            # the frames reach the model as images, in order, labelled with their number
            assert [p.data for p in request.images()] == [f.image.data for f in task.frames]
            return Perception(
                clue="red warning screen" if red else "nothing",
                assessment="a",
                leaning="buyer" if red else "neutral",
                frames=red,
            )
        if output_type is BallotDraft:
            return BallotDraft(
                conflicts=[],
                buyer_conflicts=[],
                seller_conflicts=[],
                vote="buyer",
                justification="[b1] shows it",
                cited_clues=["b1"],
            )
        return RoundSummaryDraft(summary="all buyer", buyer_arguments=["[b1]"], seller_arguments=[])

    scripted = ScriptedLLM(answer)
    await ensure_topics(settings)
    async with running_app(create_app(settings, llm=scripted)):
        case = video_case("video-1")
        await produce(settings, read_events_from(case, tmp_path))
        clue_files = await read_topic(settings, "disputes.clues", until=1, timeout_s=90)
        verdicts = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=90)

    assert verdicts, "no verdict"
    chain = CaseFile.model_validate_json(clue_files[0][1]).clues
    video_clue = next(c for c in chain.buyer if c.evidence_id == "b1-2")
    assert video_clue.frames, "the red frames were not identified"
    # uniform sampling of 30 out of 60 frames at 10 fps: red frames 40-42 sit at 4.0-4.2 s
    assert all(4.0 <= t <= 4.25 for t in video_clue.frame_times_s)
    perceive_calls = [c for c in scripted.calls if c.role == "perceive" and c.task.item.id == "b1-2"]
    assert len(perceive_calls) == 1 and len(perceive_calls[0].task.frames) == settings.frames.per_video
    verdict = Verdict.model_validate_json(verdicts[0][1])
    assert verdict.winner == "buyer" and verdict.cited_clues[0].frames == video_clue.frames
    assert verdict.rounds_used == 1 and verdict.early_stopped  # 5 of 5 for the buyer >= delta


def read_events_from(case: dict, folder: Path):
    path = folder / f"{case['case_id']}.json"
    path.write_text(json.dumps(case))
    return read_events([path])
