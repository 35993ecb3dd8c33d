"""Each rung of the ablation ladder makes the calls its definition says, through the same stages
the Faust app runs (``jury.stages``), and the naive cost configuration shares nothing."""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path

import pytest

from cyberjurors.evaluation.ladder import ABLATIONS, LADDER, REFERENCES, select
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.prompts import verdict_rules
from cyberjurors.jury.stages import judge
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import GuardedLLM, ImagePart
from cyberjurors.schemas import DisputeCase

from ... import factories
from ...conftest import EXAMPLES
from ...factories import example_case

RULES_MARK = verdict_rules().splitlines()[1][:60]


# the shared settings with the sample media (each rung then sets its own)
base = functools.partial(factories.settings, media_root=EXAMPLES, metrics_port=0)


def recording(prompt_caching: bool = True) -> ScriptedLLM:
    offline = OfflineLLM(prompt_caching=prompt_caching)
    return ScriptedLLM(lambda request, output_type: offline._answer(request.task))


async def run(key: str, dispute: DisputeCase, **overrides):
    settings = ABLATIONS[key].settings(base(**overrides))
    llm = recording()
    verdict = await judge(dispute, llm, settings)
    return verdict, llm, Counter(llm.roles())


VIDEO_CASE = "digi-002-phone-cracked-screen.json"


async def test_baseline_is_one_call_on_the_raw_case_with_the_media_attached():
    dispute = example_case(VIDEO_CASE)
    verdict, llm, roles = await run("baseline", dispute)
    assert roles == {"juror": 1}
    (call,) = llm.calls
    images = [p for p in call.shared if isinstance(p, ImagePart)]
    media = [i for i in dispute.items() if i.kind != "text"]
    videos = sum(i.kind == "video" for i in media)
    assert len(images) == len(media) - videos + 8 * videos  # every photo, 8 frames per video
    assert all(p.label.startswith("evidence ") for p in images)
    assert RULES_MARK not in call.system and "Dispute focus" not in call.shared[0].text
    assert verdict.votes.total == 1 and verdict.rounds_used == 1 and not verdict.early_stopped


async def test_rules_rung_adds_only_the_rules():
    dispute = example_case(VIDEO_CASE)
    _, baseline, _ = await run("baseline", dispute)
    _, ruled, roles = await run("rules", dispute)
    assert roles == {"juror": 1}
    assert RULES_MARK in ruled.calls[0].system and RULES_MARK not in baseline.calls[0].system
    assert ruled.calls[0].shared[0].text == baseline.calls[0].shared[0].text


async def test_sr_cot_selects_once_per_party_and_iv_cot_iterates():
    dispute = example_case("appl-002-airfryer-heater-fault.json")
    sr, _sr_llm, sr_roles = await run("sr-cot", dispute)
    iv, iv_llm, iv_roles = await run("iv-cot", dispute)
    assert sr_roles["focus"] == 1 and sr_roles["select"] == 2 and sr_roles["perceive"] == 2 and sr_roles["juror"] == 1
    assert iv_roles["select"] > sr_roles["select"] and iv_roles["perceive"] > 2 and iv_roles["juror"] == 1
    steps = Counter(c.party for c in iv.cited_clues)
    assert max(c.step for c in iv.cited_clues) <= 3
    # with stage II on, jurors read clues, not attached media
    assert not [p for c in iv_llm.calls for p in c.shared if isinstance(p, ImagePart)] and steps
    assert sr.votes.total == iv.votes.total == 1


async def test_jury_rung_runs_seventeen_jurors_per_round_with_summaries():
    verdict, _llm, roles = await run("jury", example_case("appl-001-kettle-crack.json"))
    assert verdict.votes.total == 17
    assert roles["juror"] == 17 * verdict.rounds_used and roles["summary"] == verdict.rounds_used
    assert verdict.early_stopped == (verdict.rounds_used < 3)


async def test_agentscourt_two_advocates_then_one_judge():
    verdict, llm, roles = await run("agentscourt", example_case(VIDEO_CASE))
    assert roles == {"advocate": 4, "judge": 1}
    parties = [c.task.party for c in llm.calls if c.role == "advocate"]
    assert parties == ["buyer", "seller", "buyer", "seller"]
    # each advocate answers the debate so far; the judge reads all four turns
    assert [len(c.task.debate) for c in llm.calls] == [0, 1, 2, 3, 4]
    assert verdict.votes.total == 1 and verdict.rounds_used == 1 and not verdict.early_stopped


async def test_chateval_three_agents_two_rounds_everyone_reads_everyone_no_summariser():
    verdict, llm, roles = await run("chateval", example_case("appl-001-kettle-crack.json"))
    assert roles == {"juror": 6}  # no summary calls, no early stop
    second = [c for c in llm.calls if c.task.round == 2]
    assert len(second) == 3 and all(len(c.task.neighbours) == 2 and c.task.summary is None for c in second)
    assert all("Summary of the whole jury" not in c.prompt[0].text for c in second)
    assert verdict.votes.total == 3 and verdict.rounds_used == 2


def test_precedent_rung_keeps_the_configured_precedent_backend_and_the_others_turn_it_off():
    configured = base(precedent_backend="embedded")
    assert ABLATIONS["precedent"].settings(configured).precedent_backend == "embedded"
    assert ABLATIONS["mixed-jury"].settings(configured).precedent_backend == "embedded"  # +Precedent, mixed
    assert all(a.settings(configured).precedent_backend == "none" for a in [*LADDER[:5], *REFERENCES])
    assert all(ABLATIONS[k].settings(configured).precedent_backend == "embedded" for k in ("verifier", "juris"))


def test_select_names_groups_and_rejects_unknown_keys():
    assert [a.key for a in select("ladder")] == [
        "baseline",
        "rules",
        "sr-cot",
        "iv-cot",
        "jury",
        "precedent",
        "verifier",
        "juris",
        "mixed-jury",
    ]
    assert [a.key for a in select("ladder", base())][-1] == "juris"  # no juror_models: nothing to mix
    assert len(select("all")) == 11 and [a.key for a in select("jury, baseline,jury")] == ["jury", "baseline"]
    assert select(None)[0].key == "configured"
    with pytest.raises(ValueError, match="unknown ablation 'judy'"):
        select("judy")


async def test_naive_configuration_reruns_stages_per_juror_and_pays_full_price():
    dispute = example_case("appl-001-kettle-crack.json")
    shared_settings = base(jurors=5, rounds=2, early_stop=0)
    naive_settings = base(
        jurors=5, rounds=2, early_stop=0, pipeline_overrides={"per_juror_stages": True}, prompt_caching=False
    )
    # GuardedLLM counts the calls, as in the worker
    shared_llm, naive_llm = GuardedLLM(OfflineLLM()), GuardedLLM(OfflineLLM(prompt_caching=False))
    shared = await judge(dispute, shared_llm, shared_settings)
    naive = await judge(dispute, naive_llm, naive_settings)
    assert shared.winner == naive.winner and shared.votes == naive.votes  # the same judgement...
    assert shared.tokens.calls and naive.tokens.cache_read_tokens == naive.tokens.cache_write_tokens == 0
    focus_calls = shared.tokens.calls - 5 * 2 - 2  # minus ballots and summaries
    assert naive.tokens.calls == 5 * 2 * (focus_calls + 1) + 2  # ...every juror, every round, does stages I-II
    assert shared.tokens.cache_read_tokens > 0


def test_prompt_caching_off_marks_nothing_cacheable_for_the_provider():
    from cyberjurors.llm.backends.anthropic import user_content
    from cyberjurors.llm.port import LLMRequest, TextPart

    request = LLMRequest(role="juror", model="m", system="s", shared=[TextPart("the case")], prompt=[TextPart("p")])
    assert user_content(request)[0]["cache_control"] == {"type": "ephemeral", "ttl": "5m"}
    assert all("cache_control" not in block for block in user_content(request, cache=False))


async def test_passive_media_are_decoded_once_per_case_not_once_per_round(monkeypatch: pytest.MonkeyPatch):
    from cyberjurors.jury import clues as perception

    decoded = Counter()
    load_image, sample_frames = perception.load_image, perception.sample_frames

    async def counting_image(ref, settings, **kw):
        decoded[ref.path] += 1
        return await load_image(ref, settings, **kw)

    async def counting_frames(ref, settings, count=None, **kw):
        decoded[ref.path] += 1
        return await sample_frames(ref, settings, count, **kw)

    perception._passive.clear()  # earlier tests may have decoded this case already
    monkeypatch.setattr(perception, "load_image", counting_image)
    monkeypatch.setattr(perception, "sample_frames", counting_frames)
    dispute = example_case(VIDEO_CASE)
    verdict, _, roles = await run("chateval", dispute)  # the clue stage, then two rounds
    assert verdict.rounds_used == 2 and roles == {"juror": 6}
    assert decoded and set(decoded.values()) == {1}
    assert set(decoded) == {i.media.path for i in dispute.items() if i.media}


async def test_verifier_rung_adds_only_the_verifier_to_the_full_method():
    dispute = example_case("appl-001-kettle-crack.json")
    plain, _, plain_roles = await run("precedent", dispute)
    verified, llm, roles = await run("verifier", dispute)
    assert roles - plain_roles == {"verify": 1} and plain_roles - roles == Counter()  # one check: it passed
    assert plain.verification is None and verified.verification is not None
    assert verified.verification.status == "passed" and verified.votes == plain.votes
    (check,) = [c for c in llm.calls if c.role == "verify"]
    assert check.task.justification == plain.justification  # the round summary, checked as it was


async def test_juris_rung_votes_the_justification_and_verifies_it():
    dispute = example_case("appl-001-kettle-crack.json")
    verified, _, verified_roles = await run("verifier", dispute)
    voted, _llm, roles = await run("juris", dispute)
    # two drafts, five jurors voting, one editor's call: the only difference from +Verifier
    assert roles - verified_roles == {"draft": 2, "juror": 5, "summary": 1} and verified_roles - roles == Counter()
    assert voted.votes == verified.votes and voted.justification != verified.justification
    assert voted.verification is not None and voted.verification.status == "passed"


def test_every_rung_but_verifier_and_juris_keeps_the_unverified_round_summary():
    configured = base(pipeline_overrides={"verifier": True, "justification": "juris"})  # whatever the base says
    for ablation in [*LADDER, *REFERENCES]:
        s = ablation.settings(configured)
        assert s.verifies == (ablation.key in ("verifier", "juris")), ablation.key
        assert (s.justification == "juris") == (ablation.key == "juris"), ablation.key


async def test_the_offline_estimate_keeps_one_cache_entry_per_role_and_prefix_as_the_api_does(tmp_path: Path):
    """Stage II's selector and perceiver send the same case prefix, but ask for different answers
    (schema, effort): on the API they cannot read each other's entry, and the estimate agrees; each
    role's later calls read its own. A system prompt marked on its own is read by the next case."""
    from cyberjurors.jury.focus import extract_focus
    from cyberjurors.jury.model_inputs import FocusTask
    from cyberjurors.llm.port import stage_request
    from cyberjurors.schemas import Focus

    log = tmp_path / "calls.jsonl"
    llm, dispute = GuardedLLM(OfflineLLM(), call_log=log), example_case("appl-001-kettle-crack.json")
    await judge(dispute, llm, base(jurors=3, rounds=1, early_stop=0))
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    for role in ("select", "perceive", "juror"):
        first, *later = [c for c in calls if c["role"] == role]
        assert first["cache_read_tokens"] == 0 and first["cache_write_tokens"] > 0, role
        assert later and all(c["cache_read_tokens"] > 0 for c in later), role
    assert all(c["cache_read_tokens"] == c["cache_write_tokens"] == 0 for c in calls if c["role"] == "focus")

    offline, settings, system = OfflineLLM(), base(), "The rules. " * 400  # ~1,100 tokens: cacheable alone
    assert (await extract_focus(dispute, offline, settings))[1].cache_read_tokens == 0
    usages = [
        (
            await offline.generate(
                stage_request(
                    "focus", settings, system=system, prompt=[f"case {c.case_id}"], task=FocusTask(c), case_id=c.case_id
                ),
                Focus,
            )
        ).usage
        for c in (dispute, example_case("clot-001-shirt-torn-seam.json"))
    ]
    assert (usages[0].cache_write_tokens, usages[0].cache_read_tokens) == (len(system) // 4, 0)
    assert (usages[1].cache_write_tokens, usages[1].cache_read_tokens) == (0, len(system) // 4)


# --- the courts of a court policy (--ablation courts) ----------------------------------------------

COURT_POLICY = [
    {"name": "small-claims", "max_amount": "60", "jurors": 5, "rounds": 1, "model": "claude-haiku-4-5"},
    {"name": "standard", "min_amount": "60", "max_amount": "300"},
    {"name": "high-value", "min_amount": "300", "verifier": True},
]


def test_courts_runs_each_court_of_the_policy_on_every_case_with_the_papers_as_reference():
    rungs = select("courts", base(court_policy=COURT_POLICY))
    assert [a.key for a in rungs] == ["court-small-claims", "court-standard", "court-high-value"]  # standard: paper's
    (small,) = rungs[0].settings(base(court_policy=COURT_POLICY)).court_policy
    assert (small.name, small.min_amount, small.max_amount, small.categories, small.jurors) == (
        "small-claims",
        0,
        None,
        [],
        5,
    )
    # no tier is the paper's court: it leads, as the reference of the cost ratios
    unpapered = select(
        "courts, jury", base(court_policy=[COURT_POLICY[0], {**COURT_POLICY[1], "jurors": 9, "max_amount": None}])
    )
    assert [a.key for a in unpapered] == ["paper-court", "court-small-claims", "court-standard", "jury"]
    assert [t.jurors for t in unpapered[0].settings(base()).court_policy] == [17]
    assert [a.key for a in select("courts", base())] == ["paper-court"]  # no policy: the paper's court alone
    assert select("courts") == []  # the policy is known only from settings


def test_eval_on_synthetic_cases_reports_each_court_and_the_small_claims_court_costs_under_half_the_papers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from typer.testing import CliRunner

    from cyberjurors.cli import app as cli
    from cyberjurors.config import SETTINGS_FILE_ENV
    from cyberjurors.evaluation.report import court_rows
    from cyberjurors.evaluation.report_files import load
    from cyberjurors.evaluation.synth import generate

    generate(tmp_path / "synth", cases=3, seed=5)
    toml = tmp_path / "courts.toml"
    toml.write_text(
        "\n".join(
            "[[court_policy]]\n" + "\n".join(f"{k} = {json.dumps(v)}" for k, v in tier.items()) for tier in COURT_POLICY
        )
    )
    monkeypatch.setenv("CYBERJURORS_LLM_BACKEND", "offline")
    monkeypatch.setenv("CYBERJURORS_PRECEDENT_BACKEND", "none")
    # --settings sets this variable for the process: recorded here so that it is gone after the test
    monkeypatch.setenv(SETTINGS_FILE_ENV, str(toml))
    out = tmp_path / "out"
    args = ["eval", str(tmp_path / "synth"), "--batch", "--ablation", "courts", "--no-party-swap"]
    result = CliRunner().invoke(cli, [*args, "--settings", str(toml), "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = {row.court: row for row in court_rows(load(out / "report.json"))}
    assert list(rows) == ["small-claims", "standard", "high-value"]
    small, paper = rows["small-claims"], rows["standard"]
    assert paper.scores.paper and (small.scores.jurors, small.scores.rounds) == (5, 1)
    assert all(r.scores.summary.verdicts == 3 for r in rows.values())  # every court on every case
    # computed from the measured tokens and the dated list prices (haiku for small claims, sonnet for the paper's)
    tokens = small.scores.summary.tokens_per_case["total"] / paper.scores.summary.tokens_per_case["total"]
    usd = small.scores.usd_per_case_listed / paper.scores.usd_per_case_listed
    assert (small.tokens_ratio, small.usd_ratio) == pytest.approx((tokens, usd))
    # haiku's prices are half sonnet's, but it caches no prefix under 4,096 tokens: less is read from the cache
    assert tokens <= 0.45 and usd <= 0.45
    assert paper.tokens_ratio == pytest.approx(1.0)
    markdown = (out / "report.md").read_text()
    assert "## Courts" in markdown and "| Court | Configuration | Jurors × rounds |" in markdown
    assert f"| {small.tokens_ratio:.3f}× |" in markdown.split("## Courts", 1)[1].split("\n\n")[1]
