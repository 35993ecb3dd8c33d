"""`cyberjurors eval` end to end: real broker, real worker, the report checked against the verdict
topic; resuming; and the party-swap test judged by a biased and a symmetric scripted jury."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from cyberjurors.cli import app as cli
from cyberjurors.config import Settings
from cyberjurors.evaluation.dataset import load_dataset
from cyberjurors.evaluation.ladder import ABLATIONS, CONFIGURED
from cyberjurors.evaluation.results import CaseResult
from cyberjurors.evaluation.runner import run_eval
from cyberjurors.evaluation.runs import EvalError, Options, RunState
from cyberjurors.evaluation.scores import summarize
from cyberjurors.evaluation.swap import swap_parties, twin_id
from cyberjurors.evaluation.synth import generate
from cyberjurors.jury.model_inputs import JurorTask
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.stages import judge
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import GuardedLLM
from cyberjurors.schemas import BallotDraft, Verdict
from cyberjurors.tooling.clients import follow

from ..conftest import EXAMPLES

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory):
    """Six synthetic cases (media included), loaded from the generator's folder."""
    out = tmp_path_factory.mktemp("synth")
    generate(out, cases=6, seed=11)
    return load_dataset(out)


async def topic_verdicts(settings: Settings, prefix: str) -> dict[str, Verdict]:
    scoped = settings.model_copy(update={"topic_prefix": prefix})
    found: dict[str, Verdict] = {}
    async for key, value in follow(scoped, "disputes.verdicts", follow=False, idle_timeout_s=1.0):
        found[key] = Verdict.model_validate_json(value)
    return found


async def test_eval_report_matches_the_verdict_topic_and_resumes(
    dataset, settings: Settings, broker: str, tmp_path: Path
):
    out = tmp_path / "eval"
    options = Options(out=out, concurrency=4, timeout_s=120)
    (report,) = await asyncio.to_thread(
        run_eval, dataset, [ABLATIONS["jury"]], settings, options, Console(quiet=True), broker
    )
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    verdicts = await topic_verdicts(settings, f"{settings.topic_prefix}eval-{run_id}-jury.")
    originals = {c.case_id: c for c in dataset.cases}
    assert set(verdicts) == set(originals) | {twin_id(i) for i in originals}  # every case and its twin

    # the report's numbers, recomputed by hand from what is on the topic
    mine = [verdicts[i] for i in originals]
    right = sum(v.winner == originals[v.case_id].ground_truth.winner for v in mine)
    s = report.summary
    assert s.cases == s.verdicts == 6 and not s.failed
    assert s.accuracy == pytest.approx(right / 6)
    assert s.seller_share_predicted == pytest.approx(sum(v.winner == "seller" for v in mine) / 6)
    assert s.vote_mae == pytest.approx(
        sum(abs(v.votes.seller - originals[v.case_id].ground_truth.seller) for v in mine) / 6
    )
    assert s.tokens_per_case["total"] == pytest.approx(sum(v.tokens.total_tokens for v in mine) / 6)
    assert s.calls_per_case == pytest.approx(sum(v.tokens.calls for v in mine) / 6)
    flipped = sum(verdicts[twin_id(i)].winner != verdicts[i].winner for i in originals)
    assert s.swap_pairs == 6 and s.swap_consistency == pytest.approx(flipped / 6)
    assert report.backend == "offline" and report.stand_in and report.settings["jurors"] == 17
    assert "anthropic_api_key" not in report.settings
    # the jury never saw the real votes: they were stripped before the case was produced
    scoped = settings.model_copy(update={"topic_prefix": f"{settings.topic_prefix}eval-{run_id}-jury."})
    async for _, value in follow(scoped, "disputes.events", follow=False, idle_timeout_s=1.0):
        assert json.loads(value)["case"]["ground_truth"] is None

    # resume: drop two results; only those two are sent again, and as their verdicts are still on
    # the topic (the same run's topics on the same broker), nothing is judged twice
    results = out / "results" / "jury.jsonl"
    lines = results.read_text().splitlines()
    results.write_text("\n".join(lines[2:]) + "\n")
    log = settings.llm_call_log
    log.unlink(missing_ok=True)
    (again,) = await asyncio.to_thread(
        run_eval, dataset, [ABLATIONS["jury"]], settings, options, Console(quiet=True), broker
    )
    sent = Counter([key async for key, _ in follow(scoped, "disputes.events", follow=False, idle_timeout_s=1.0)])
    dropped = {json.loads(line)["case_id"] for line in lines[:2]}
    assert {k for k, n in sent.items() if n == 2} == dropped and set(sent.values()) == {1, 2}
    assert not log.exists()
    assert len(results.read_text().splitlines()) == len(lines)
    assert again.summary.accuracy == s.accuracy and again.summary.swap_consistency == s.swap_consistency

    # a changed configuration is refused, not mixed into these results
    changed = settings.model_copy(update={"early_stop": 0.9})
    with pytest.raises(EvalError, match="different settings"):
        run_eval(dataset, [ABLATIONS["jury"]], changed, options, Console(quiet=True), broker)


def sample_dataset(folder: Path, names: list[str], edit=None) -> Path:  # type: ignore[no-untyped-def]
    """Sample cases (they carry ground truth) as ``folder/test.jsonl``, each passed through ``edit``
    if given; the media root is examples/, recorded in split.json as `cyberjurors dataset split` does."""
    folder.mkdir(parents=True, exist_ok=True)
    cases = [json.loads((EXAMPLES / "cases" / f"{name}.json").read_text()) for name in names]
    (folder / "test.jsonl").write_text("".join(json.dumps(edit(c) if edit else c) + "\n" for c in cases))
    (folder / "split.json").write_text(json.dumps({"media_root": str(EXAMPLES)}))
    return folder / "test.jsonl"


def eval_env(monkeypatch: pytest.MonkeyPatch, settings: Settings, **extra: str) -> None:
    for name, value in {
        "LLM_BACKEND": "offline",
        "PRECEDENT_BACKEND": "none",
        "METRICS_PORT": "0",
        "APP_ID": settings.app_id,
        "KAFKA_PROFILE": "local",
        **extra,
    }.items():
        monkeypatch.setenv(f"CYBERJURORS_{name}", value)


def test_eval_command_writes_json_and_markdown(
    dataset, settings: Settings, broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    eval_env(monkeypatch, settings)
    out = tmp_path / "cli-eval"
    args = [
        "eval",
        str(dataset.source),
        "--ablation",
        "baseline,agentscourt",
        "--out",
        str(out),
        "--bootstrap",
        broker,
        "--no-party-swap",
        "--timeout",
        "120",
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    reports = json.loads((out / "report.json").read_text())
    assert [r["name"] for r in reports] == ["Baseline", "AgentsCourt-style"]
    assert all(r["summary"]["verdicts"] == 6 and r["summary"]["swap_pairs"] == 0 for r in reports)
    assert all(r["failed_cases"] == {} for r in reports)
    assert reports[0]["summary"]["calls_per_case"] == 1.0 and reports[1]["summary"]["calls_per_case"] == 5.0
    markdown = (out / "report.md").read_text()
    assert "| Baseline" in markdown and "| AgentsCourt-style" in markdown and "stand-in" in markdown
    assert "offline stand-in" in result.output

    # a second run (everything decided: it only reports) writes report-2.*, leaving the first as it was
    first = {name: (out / name).read_bytes() for name in ("report.json", "report.md")}
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0, again.output
    assert {name: (out / name).read_bytes() for name in first} == first
    assert [r["name"] for r in json.loads((out / "report-2.json").read_text())] == ["Baseline", "AgentsCourt-style"]
    assert (out / "report-2.md").exists() and "report-2.json" in again.output.replace("\n", "")


def test_eval_exits_1_naming_the_failed_cases_unless_tolerated(
    settings: Settings, broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """One case is rejected at intake (a text over max_text_chars); with the party swap, its twin too."""
    too_long = "clot-001-shirt-torn-seam"

    def pad(case: dict) -> dict:
        if case["case_id"] == too_long:
            case["rounds"][0]["items"][0]["text"] = "x" * 20_001
        return case

    data = sample_dataset(tmp_path / "data", ["appl-001-kettle-crack", too_long], pad)
    eval_env(monkeypatch, settings)
    out = tmp_path / "eval"
    args = ["eval", str(data), "--ablation", "baseline", "--out", str(out), "--bootstrap", broker, "--timeout", "120"]
    failed = {too_long: "intake:text_too_long", twin_id(too_long): "intake:text_too_long"}

    strict = CliRunner().invoke(cli, args)
    said = " ".join(strict.output.split())
    assert strict.exit_code == 1, strict.output
    assert (
        "Baseline: 2 cases without a verdict (1 of the dataset's, 1 party-swap twins; more than --max-failures 0)"
        in said
    )
    assert all(f"{case_id} ({reason})" in said for case_id, reason in failed.items()), said
    (report,) = json.loads((out / "report.json").read_text())  # written all the same
    assert report["failed_cases"] == failed and report["summary"]["verdicts"] == 1
    assert f"`{too_long}` (intake:text_too_long)" in (out / "report.md").read_text()

    first = (out / "report.json").read_bytes()
    tolerant = CliRunner().invoke(cli, [*args, "--max-failures", "2"])  # resumes: sends the two again
    assert tolerant.exit_code == 0, tolerant.output
    assert "tolerated by --max-failures 2" in " ".join(tolerant.output.split())
    assert json.loads((out / "report-2.json").read_text())[0]["failed_cases"] == failed
    assert (out / "report.json").read_bytes() == first


def test_eval_exits_1_when_cases_time_out(
    settings: Settings, broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    data = sample_dataset(tmp_path / "data", ["appl-001-kettle-crack"])
    eval_env(monkeypatch, settings, OFFLINE_LATENCY_S="15")  # no verdict can come within --timeout 2
    out = tmp_path / "eval"
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(data),
            "--ablation",
            "baseline",
            "--out",
            str(out),
            "--bootstrap",
            broker,
            "--timeout",
            "2",
            "--no-party-swap",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "appl-001-kettle-crack (timeout)" in " ".join(result.output.split())
    assert json.loads((out / "report.json").read_text())[0]["failed_cases"] == {"appl-001-kettle-crack": "timeout"}


def test_eval_refuses_a_dataset_without_ground_truth(tmp_path: Path):
    case = json.loads((EXAMPLES / "cases" / "appl-001-kettle-crack.json").read_text())
    case.pop("ground_truth", None)
    (tmp_path / "unlabelled.jsonl").write_text(json.dumps(case) + "\n")
    result = CliRunner().invoke(cli, ["eval", str(tmp_path / "unlabelled.jsonl"), "--out", str(tmp_path / "o")])
    said = result.output.replace("\n", "")  # rich wraps long lines
    assert result.exit_code == 2 and "has no ground_truth" in said and "unlabelled.jsonl:1" in said


def test_an_out_folder_of_another_dataset_is_refused(dataset, tmp_path: Path):
    RunState(tmp_path / "o", dataset, fresh=False)
    other = type(dataset)(dataset.cases[:3], dataset.media_root, dataset.source, "0" * 64)
    assert dataset.sha256 != other.sha256
    with pytest.raises(EvalError, match="another dataset"):
        RunState(tmp_path / "o", other, fresh=False)
    RunState(tmp_path / "o", other, fresh=True)  # --fresh starts over


# --- the party-swap test, tested ------------------------------------------------------------


def jury_of(vote_for) -> GuardedLLM:  # type: ignore[no-untyped-def]
    """Offline answers for stages I-II and summaries; ballots from ``vote_for(task)``."""
    offline = OfflineLLM()

    def answer(request, output_type):  # type: ignore[no-untyped-def]
        if isinstance(request.task, JurorTask):
            vote = vote_for(request.task)
            return BallotDraft(
                conflicts=[], buyer_conflicts=[], seller_conflicts=[], vote=vote, justification=f"scripted: {vote}"
            )
        return offline._answer(request.task)

    return GuardedLLM(ScriptedLLM(answer))


def more_evidence(task: JurorTask) -> str:
    """Symmetric: the side that submitted more evidence wins, whatever it is called."""
    sizes = {p: sum(len(i.text or "") + 500 for i in task.case.items(p)) for p in ("buyer", "seller")}
    return "buyer" if sizes["buyer"] > sizes["seller"] else "seller"


async def swap_consistency(dataset, vote_for) -> float | None:  # type: ignore[no-untyped-def]
    settings = CONFIGURED.settings(
        Settings(
            llm_backend="offline", precedent_backend="none", jurors=5, media_root=dataset.media_root, metrics_port=0
        )
    )
    llm = jury_of(vote_for)
    results = []
    for case in dataset.cases:
        verdict = await judge(case, llm, settings)
        twin = await judge(swap_parties(case), llm, settings)
        results.append(
            CaseResult(
                case_id=case.case_id,
                category=case.metadata.category,
                truth=case.ground_truth,
                verdict=verdict,
                swapped=twin,
            )
        )
    return summarize(results).swap_consistency


async def test_party_swap_flags_a_biased_jury_and_clears_a_symmetric_one(dataset):
    assert await swap_consistency(dataset, lambda task: "seller") == 0.0
    assert await swap_consistency(dataset, more_evidence) == 1.0


def test_synth_then_split_from_the_command_line(tmp_path: Path):
    runner = CliRunner()
    made = runner.invoke(cli, ["synth", str(tmp_path / "s"), "--cases", "12", "--seed", "2"])
    assert made.exit_code == 0, made.output
    assert "SYNTHETIC" in made.output and len((tmp_path / "s" / "cases.jsonl").read_text().splitlines()) == 12
    split = runner.invoke(cli, ["dataset", "split", str(tmp_path / "s"), "--out", str(tmp_path / "split")])
    assert split.exit_code == 0, split.output
    sizes = {
        name: len((tmp_path / "split" / f"{name}.jsonl").read_text().splitlines()) for name in ("train", "val", "test")
    }
    assert sum(sizes.values()) == 12 and sizes["train"] >= sizes["test"] >= sizes["val"]
    train = load_dataset(tmp_path / "split" / "train.jsonl")
    assert train.media_root == (tmp_path / "s").resolve()  # the split still finds the generator's media
    bad = runner.invoke(cli, ["dataset", "split", str(tmp_path / "s"), "--out", str(tmp_path / "x"), "--ratios", "3:1"])
    assert bad.exit_code == 2 and "three non-negative integers" in bad.output
    refused = runner.invoke(cli, ["synth", str(tmp_path / "split"), "--cases", "10"])  # not a synth folder
    assert refused.exit_code == 2 and "not generated" in refused.output


def test_precedent_rung_builds_its_base_from_the_train_split(
    settings: Settings, broker: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    generate(tmp_path / "s", cases=16, seed=5)
    runner = CliRunner()
    assert (
        runner.invoke(cli, ["dataset", "split", str(tmp_path / "s"), "--out", str(tmp_path / "split")]).exit_code == 0
    )
    for name, value in {
        "LLM_BACKEND": "offline",
        "METRICS_PORT": "0",
        "APP_ID": settings.app_id,
        "KAFKA_PROFILE": "local",
    }.items():
        monkeypatch.setenv(f"CYBERJURORS_{name}", value)
    out = tmp_path / "eval"
    result = runner.invoke(
        cli,
        [
            "eval",
            str(tmp_path / "split" / "test.jsonl"),
            "--ablation",
            "precedent",
            "--out",
            str(out),
            "--bootstrap",
            broker,
            "--no-party-swap",
            "--timeout",
            "120",
            "--precedents-from",
            str(tmp_path / "split" / "train.jsonl"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (out / "precedents" / "build-state.json").exists()
    verdicts = [json.loads(line)["verdict"] for line in (out / "results" / "precedent.jsonl").read_text().splitlines()]
    assert verdicts and all(v["precedent_coverage"] != "none" and v["precedents_seen"] for v in verdicts)
