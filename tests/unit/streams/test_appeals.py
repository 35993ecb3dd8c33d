"""Appeals: the second instance judged by the appeal handler with dict tables and a scripted jury
(new evidence reversing a verdict, a second appeal refused, the winner's refused, a replay changing
nothing and calling no model again, every refusal with its reason and flag), the panel's personas,
and the prompt's marking. An appeal through a real worker: tests/integration/test_appeals.py."""

from __future__ import annotations

import ast
import base64
import hashlib
import io
import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

from PIL import Image

from cyberjurors.config import Settings
from cyberjurors.errors import FINAL_LLM_KINDS, LLM_KINDS
from cyberjurors.evidence.stores import open_store
from cyberjurors.jury.model_inputs import JurorTask
from cyberjurors.jury.rounds import Jury
from cyberjurors.jury.stages import NoPrecedents, clues_stage, focus_stage, round_stage
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMError
from cyberjurors.observability import metrics
from cyberjurors.schemas import (
    BallotDraft,
    CaseFile,
    DeadLetter,
    Focus,
    Perception,
    RoundSummaryDraft,
    Selection,
    Verdict,
)
from cyberjurors.schemas.personas import load_personas
from cyberjurors.state.results import StageResults
from cyberjurors.streams.appeal import Appeals
from cyberjurors.streams.dead_letters import DeadLetters
from cyberjurors.streams.verdict import Verdicts

from ... import factories
from ...factories import case
from .test_app_handlers import NOW, Topic, event

# every reason an appeal can be dead-lettered with (the "appeal" rows of tests/unit/streams/test_dead_letters.py), each driven here
APPEAL_REASONS = {
    "invalid_appeal",
    "key_mismatch",
    "appeal_already_filed",
    "appeal_by_winner",
    "appeal_window_closed",
    "appeal_before_verdict",
    "appeal_wrong_verdict",
    "appeal_evidence_rejected",
    "case_expired",
    "output_too_large",
    "unknown_case",
    "stage_failed",
    *(f"llm_{k}" for k in LLM_KINDS),
}
CASE = "app-1"


def png() -> str:
    out = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 30, 30)).save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


NEW_EVIDENCE = [
    {"id": "b9", "kind": "text", "text": "The courier's report: parcel received with the seam torn."},
    {"id": "b10", "kind": "image", "text": "courier photo", "media": {"media_type": "image/png", "data_base64": png()}},
]


class Jurors:
    """A scripted jury for the seller, unless the clue chain holds a clue of the buyer's new evidence
    (b9, b10), which the perceiver reads as the buyer's: then, on appeal, for the buyer, all but juror
    0 in round 1 (so the panel deliberates a second round); the selector takes the first unseen item."""

    def __init__(self) -> None:
        self.fail: Exception | None = None
        self.fail_on: str | None = None  # a role whose calls fail while ``fail`` is set (in ``fail_round``, if set)
        self.fail_round: int | None = None

    def __call__(self, request, output_type):  # type: ignore[no-untyped-def]
        if (
            self.fail is not None
            and request.role == self.fail_on
            and self.fail_round in (None, getattr(request.task, "round", None))
        ):
            raise self.fail
        task = request.task
        if output_type is Focus:
            return Focus(focus="Was the seam torn before delivery?", buyer_claims=["torn"], seller_claims=["intact"])
        if output_type is Selection:
            return Selection(evidence_id=task.candidates[0].id, reason="next")
        if output_type is Perception:
            new = task.item.id in ("b9", "b10")
            return Perception(clue=f"what {task.item.id} shows", assessment="a", leaning="buyer" if new else "neutral")
        if output_type is RoundSummaryDraft:
            return RoundSummaryDraft(summary=f"round {task.round}", buyer_arguments=[], seller_arguments=[])
        new = [c.id for c in task.clues or [] if c.evidence_id in ("b9", "b10")]
        vote = "buyer" if new and task.appeal is not None and (task.juror, task.round) != (0, 1) else "seller"
        return BallotDraft(
            conflicts=[],
            buyer_conflicts=[],
            seller_conflicts=[],
            vote=vote,
            justification=f"J{task.juror} relies on " + " ".join(f"[{c}]" for c in new or ["s1"]),
            cited_clues=new or ["s1"],
        )


def conf(tmp_path, **over) -> Settings:
    return factories.settings(
        **(
            {
                "jurors": 5,
                "appeal_jurors": 9,
                "rounds": 2,
                "early_stop": 1.0,
                "warm_cache_first": False,
                "media_root": tmp_path,
                "media_store": str(tmp_path / "store"),
            }
            | over
        )
    )


async def decided(settings: Settings, h: SimpleNamespace, case_id: str = CASE) -> Verdict:
    """The first instance as the pipeline leaves it: ready and clues stored, the verdict published."""
    case_file = CaseFile(case=case(case_id), received_at=NOW)
    h.results.put(case_id, "intake", case_file.model_dump_json().encode())
    case_file = await focus_stage(case_file, h.llm, settings)
    case_file = await clues_stage(case_file, h.llm, settings, NoPrecedents())
    h.results.put(case_id, "clues", case_file.model_dump_json().encode())
    jury = Jury.from_settings(settings)
    while len(case_file.rounds) < settings.rounds:
        case_file = await round_stage(case_file, jury, h.llm, settings)
    return await h.verdicts.publish(case_file)


def handlers(settings: Settings, max_bytes: int | None = None) -> SimpleNamespace:
    table: dict = {}
    out, escalations, dlq = Topic(), Topic(), Topic()
    in_flight = metrics.CasesInFlight()
    results = StageResults(table, keep_for_appeal=True)
    letters = DeadLetters(dlq, in_flight)
    verdicts = Verdicts(settings, results, out, in_flight, escalations=escalations, dead_letters=letters)
    jurors = Jurors()
    llm = ScriptedLLM(jurors)
    bounded = StageResults(table, keep_for_appeal=True, max_bytes=max_bytes) if max_bytes else results
    appeals = Appeals(settings, llm, NoPrecedents(), bounded, verdicts, letters, open_store(settings))
    return SimpleNamespace(
        table=table,
        out=out,
        escalations=escalations,
        dlq=dlq,
        results=results,
        llm=llm,
        jurors=jurors,
        verdicts=verdicts,
        appeals=appeals,
    )


def appeal(first: Verdict, **over) -> dict:
    return {
        "type": "appeal",
        "case_id": first.case_id,
        "appellant": "buyer",
        "verdict_id": first.verdict_id,
        "grounds": "The courier's report shows the seam was torn on delivery.",
        "evidence": NEW_EVIDENCE,
        "filed_at": (first.decided_at + timedelta(days=3)).isoformat(),
    } | over


async def send(h: SimpleNamespace, body: dict | bytes, key: bytes = CASE.encode()) -> None:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    await h.appeals(event(raw, key))


def letters(h: SimpleNamespace) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(v) for _, v in h.dlq.sent]


def verdicts(h: SimpleNamespace) -> list[Verdict]:
    return [Verdict.model_validate_json(v) for _, v in h.out.sent]


# --- the second instance ------------------------------------------------------------------------------


async def test_an_appeal_with_new_evidence_reverses_the_verdict_with_a_larger_panel(tmp_path):
    settings = conf(tmp_path)
    h = handlers(settings)
    first = await decided(settings, h)
    assert (first.winner, first.instance, first.votes.total) == ("seller", 1, 5)
    reversed_before = metrics.APPEAL_VERDICTS.labels("reversed")._value.get()
    first_calls = len(h.llm.calls)

    await send(h, appeal(first))
    assert letters(h) == []
    _, second = verdicts(h)
    assert (second.instance, second.appeal_of, second.winner) == (2, first.verdict_id, "buyer")
    assert second.verdict_id not in (first.verdict_id, "") and second.votes.total == 9  # the appeal's panel
    assert {c.evidence_id for c in second.cited_clues} == {"b9", "b10"}
    assert metrics.APPEAL_VERDICTS.labels("reversed")._value.get() == reversed_before + 1

    calls = h.llm.calls[first_calls:]
    assert Counter(c.role for c in calls) == {"select": 2, "perceive": 2, "juror": 18, "summary": 2}
    # stage II ran on the new evidence only, its clues going on from the buyer's chain
    assert [c.task.item.id for c in calls if c.role == "perceive"] == ["b9", "b10"]
    assert sorted(c.id for c in second.cited_clues) == ["b2", "b3"]  # after the first instance's b1
    stored = CaseFile.model_validate_json(h.table[f"{CASE}/appeal"])
    assert stored.case.rounds[-1].party == "buyer" and stored.case.rounds[-1].round == 2
    assert stored.case.item("b10").media.stored is not None  # inline media went to the media store
    juror = next(c for c in calls if c.role == "juror")
    assert isinstance(juror.task, JurorTask) and juror.task.appeal.first_instance == first
    prefix = juror.shared[0].text
    assert (
        '<evidence field="appeal_grounds" party="buyer">The courier&#x27;s report' in prefix
        or '<evidence field="appeal_grounds" party="buyer">The courier\'s report' in prefix
    )
    assert f'<record of="first-instance verdict">{first.justification}</record>' in prefix
    # the record of the first instance is reused, not redone: no focus call, no select for b1 or s1
    assert "focus" not in {c.role for c in calls}
    # what the second instance kept, and what it dropped once decided
    assert {k.removeprefix(f"{CASE}/") for k in h.table} == {"intake", "verdict", "appeal", "appeal/verdict"}
    assert second.rounds_used == 2 and not second.escalated  # 9 : 0 in the end


async def test_a_replayed_appeal_changes_nothing_and_calls_no_model(tmp_path):
    settings = conf(tmp_path)
    h = handlers(settings)
    first = await decided(settings, h)
    await send(h, appeal(first))
    done = len(h.llm.calls)
    resent = appeal(first) | {"event_id": "resend-1", "sent_at": "2026-12-01T00:00:00Z"}  # the envelope may differ
    await send(h, resent)
    await send(h, appeal(first))
    assert len(h.llm.calls) == done and letters(h) == []
    assert h.out.sent[1] == h.out.sent[2] == h.out.sent[3]  # the stored second-instance verdict, re-sent


async def test_an_appeal_that_failed_midway_resumes_after_its_last_stored_step(tmp_path):
    settings = conf(tmp_path)
    h = handlers(settings)
    first = await decided(settings, h)
    h.jurors.fail, h.jurors.fail_on, h.jurors.fail_round = LLMError("overloaded", "try later"), "summary", 2
    before = len(h.llm.calls)
    await send(h, appeal(first))
    [letter] = letters(h)
    assert (letter.stage, letter.reason, letter.replayable) == ("appeal", "llm_overloaded", True)
    failed = Counter(c.role for c in h.llm.calls[before:])
    assert failed == {"select": 2, "perceive": 2, "juror": 18, "summary": 2}  # round 2's summary failed
    assert f"{CASE}/appeal/round-1" in h.table and f"{CASE}/appeal/round-2" not in h.table

    h.jurors.fail = None
    before = len(h.llm.calls)
    await send(h, appeal(first))  # the letter's replay
    again = Counter(c.role for c in h.llm.calls[before:])
    assert again == {"juror": 9, "summary": 1}  # round 2 only: stage II and round 1 were not repeated
    assert verdicts(h)[-1].winner == "buyer"


# --- refusals ---------------------------------------------------------------------------------------


async def test_a_second_appeal_and_the_winners_are_refused_final(tmp_path):
    settings = conf(tmp_path)
    h = handlers(settings)
    first = await decided(settings, h)
    await send(h, appeal(first, appellant="seller", evidence=[]))  # the winner
    await send(h, appeal(first))
    await send(h, appeal(first, grounds="Another ground, filed later."))  # a second appeal
    await send(h, appeal(first, appellant="seller", evidence=[]))  # the winner, after the appeal: one per case
    assert [(d.stage, d.reason, d.replayable) for d in letters(h)] == [
        ("appeal", "appeal_by_winner", False),
        ("appeal", "appeal_already_filed", False),
        ("appeal", "appeal_already_filed", False),
    ]
    assert "only the losing party may appeal" in letters(h)[0].detail
    assert len(verdicts(h)) == 2


async def test_every_refusal_has_its_reason_and_flag(tmp_path):
    settings = conf(tmp_path, appeal_window_s=10 * 86400, url_allowlist=["media.example"])
    h = handlers(settings)
    first = await decided(settings, h)
    other = await decided(settings, h, "app-2")
    h.table["gone/expired"] = b'{"last_stage_at": 0, "expired_at": 1}'
    late = (first.decided_at + timedelta(days=10, hours=1)).isoformat()
    sends = [
        (b"not json", "invalid_appeal"),
        (appeal(first, grounds=""), "invalid_appeal"),
        (appeal(first, case_id="app-2"), "key_mismatch"),  # keyed by app-1
        (appeal(first, filed_at=late), "appeal_window_closed"),
        (appeal(first, verdict_id=other.verdict_id), "appeal_wrong_verdict"),
        (appeal(first, evidence=[{"id": "b1", "kind": "text", "text": "again"}]), "appeal_evidence_rejected"),
        (
            appeal(
                first,
                evidence=[
                    {
                        "id": "b7",
                        "kind": "image",
                        "media": {"media_type": "image/png", "url": "http://elsewhere.example/x.png"},
                    }
                ],
            ),
            "appeal_evidence_rejected",
        ),
        (appeal(first, evidence=[{"id": "b7", "kind": "text", "text": "t" * 30_000}]), "appeal_evidence_rejected"),
    ]
    for body, _ in sends:
        await send(h, body)
    await send(h, appeal(first, case_id="new"), b"new")
    await send(h, appeal(first, case_id="gone"), b"gone")
    got = [(d.reason, d.replayable) for d in letters(h)]
    assert got == [(r, False) for _, r in sends] + [("unknown_case", True), ("case_expired", False)]
    details = [d.detail for d in letters(h)]
    assert "evidence id 'b1' appears twice" in details[5] and details[6].startswith("url_not_allowed:")
    assert details[7].startswith("text_too_long:") and "window closed" in details[3]
    off = handlers(conf(tmp_path, appeal_window_s=0))
    await send(off, appeal(await decided(conf(tmp_path, appeal_window_s=0), off)))
    assert [(d.reason, d.detail) for d in letters(off)] == [
        ("appeal_window_closed", "appeals are off (appeal_window_s=0)")
    ]
    assert len(verdicts(h)) == 2  # the two first instances; no appeal was judged


async def test_an_appeal_filed_before_its_verdict_is_refused_beyond_the_clock_skew(tmp_path):
    """filed_at is the platform's clock, decided_at ours: an appeal dated in year 0001 (the tester's) or
    ten minutes before the verdict is refused, final, and never reverses it; one dated two minutes
    before, within clock_skew_s (300), is the same appeal filed just after the verdict."""
    settings = conf(tmp_path)
    assert settings.clock_skew_s == 300
    h = handlers(settings)
    first = await decided(settings, h)
    await send(h, appeal(first, filed_at="0001-01-01T00:00:00+01:00"))
    await send(h, appeal(first, filed_at=(first.decided_at - timedelta(minutes=10)).isoformat()))
    assert [(d.stage, d.reason, d.replayable) for d in letters(h)] == [("appeal", "appeal_before_verdict", False)] * 2
    assert letters(h)[0].detail.startswith(f"filed_at 0001-01-01T00:00+01:00 is before verdict {first.verdict_id}")
    assert "clock_skew_s=300" in letters(h)[1].detail
    assert f"{CASE}/appeal" not in h.table and len(verdicts(h)) == 1  # not accepted, nothing judged

    await send(h, appeal(first, filed_at=(first.decided_at - timedelta(minutes=2)).isoformat()))
    assert len(letters(h)) == 2 and verdicts(h)[-1].instance == 2


async def test_new_inline_evidence_is_checked_before_it_is_stored(tmp_path):
    # intake's rules run while the media are still inline, as at intake: base64 that is not base64 was a
    # bug letter (stage_failed, replayable) and inline media over max_inline_bytes went to the store
    settings = conf(tmp_path, intake_limits={"max_inline_bytes": 50})
    h = handlers(settings)
    first = await decided(settings, h)
    photo = {"id": "b7", "kind": "image", "text": "photo", "media": {"media_type": "image/png"}}
    big = png()
    await send(
        h, appeal(first, evidence=[photo | {"media": {"media_type": "image/png", "data_base64": "!!!not base64"}}])
    )
    await send(h, appeal(first, evidence=[photo | {"media": {"media_type": "image/png", "data_base64": big}}]))
    assert [(d.reason, d.replayable, d.detail.split(":")[0]) for d in letters(h)] == [
        ("appeal_evidence_rejected", False, "bad_base64"),
        ("appeal_evidence_rejected", False, "inline_too_large"),
    ]
    assert not await open_store(settings).has(hashlib.sha256(base64.b64decode(big)).hexdigest())
    assert len(verdicts(h)) == 1  # the first instance only


async def test_failures_of_the_second_instance_are_dead_lettered_with_their_flags(tmp_path):
    settings = conf(tmp_path)
    h = handlers(settings)
    first = await decided(settings, h)
    seen = []
    for kind in LLM_KINDS:
        h.jurors.fail, h.jurors.fail_on = LLMError(kind, "failed"), "perceive"
        await send(h, appeal(first))
        seen.append((letters(h)[-1].reason, letters(h)[-1].replayable))
    assert seen == [(f"llm_{k}", k not in FINAL_LLM_KINDS) for k in LLM_KINDS]
    h.jurors.fail = KeyError("a bug")
    await send(h, appeal(first))
    assert (letters(h)[-1].reason, letters(h)[-1].replayable) == ("stage_failed", True)

    small = handlers(settings, max_bytes=2_000)  # the appealed case file cannot be stored
    await send(small, appeal(await decided(settings, small)))
    assert [(d.reason, d.replayable) for d in letters(small)] == [("output_too_large", False)]


def test_every_appeal_reason_is_driven_here():
    """APPEAL_REASONS is what tests/integration/test_dead_letters.py counts as driven: each named
    reason must be expected by a test of this file, and the llm_ reasons by the loop over LLM_KINDS."""
    tree = ast.parse(Path(__file__).read_text())
    expected = {
        node.value
        for test in tree.body
        if isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef)
        and test.name != "test_every_appeal_reason_is_driven_here"
        for node in ast.walk(test)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    named = {r for r in APPEAL_REASONS if not r.startswith("llm_")}
    assert named - expected == set()
    assert {r for r in APPEAL_REASONS if r.startswith("llm_")} == {f"llm_{k}" for k in LLM_KINDS}


# --- the panel --------------------------------------------------------------------------------------


def test_the_appeal_panel_is_31_distinct_personas_the_first_17_the_first_instances():
    panel = load_personas(31)
    assert panel[:17] == load_personas(17)
    assert len({p.name for p in panel}) == 31 and len({p.description for p in panel}) == 31
    profiles = {
        (p.shopping_experience, p.seller_experience, p.rule_strictness, p.visual_attention, p.risk_attitude)
        for p in panel[17:]
    }
    assert len(profiles) == 14 and not any("Generated juror" in p.description for p in panel)
    jury = Jury.from_settings(Settings(llm_backend="offline"), 31)
    assert len(jury) == 31 and len(jury.graph.neighbours(30)) == 4


# --- state kept for the window ------------------------------------------------------------------


async def test_a_decided_case_is_kept_for_the_appeal_window_and_the_appeal_cleans_up_after_itself(tmp_path):
    """Retention 1 day, window 3 days: the decided case (with the clue chain an appeal reuses) stays
    3 days after its verdict; an appeal restamps it, and its verdict drops the steps and the kept clues."""
    day = 86_400
    settings = conf(tmp_path, retention={"state_s": day}, appeal_window_s=3 * day)
    h = handlers(settings)
    clock = SimpleNamespace(now=1_800_000_000.0)
    for results in (h.results, h.appeals.results):
        results.clock, results.retention_s = (lambda: clock.now), day
    first = await decided(settings, h)
    assert {k.removeprefix(f"{CASE}/") for k in h.table} == {"intake", "clues", "verdict"}
    clock.now += 3 * day - 60
    assert await h.results.expire() == 0  # past the retention, inside the window
    await send(h, appeal(first, evidence=[], filed_at=(first.decided_at + timedelta(days=2)).isoformat()))
    assert letters(h) == [] and {k.removeprefix(f"{CASE}/") for k in h.table} == {
        "intake",
        "verdict",
        "appeal",
        "appeal/verdict",
    }
    clock.now += day - 60
    assert await h.results.expire() == 0  # the appeal restamped the case a retention ago, less a minute
    clock.now += 120
    assert await h.results.expire() == 1 and set(h.table) == {f"{CASE}/expired"}
    await send(h, appeal(first))
    assert letters(h)[-1].reason == "case_expired"
