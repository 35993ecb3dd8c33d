"""Building the precedent base from decided cases: H indexed, N distilled, merged, resumable —
with the offline stand-in, the real embedding model and the real embedded index."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cyberjurors.cli import app
from cyberjurors.config import Settings
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMError, LLMRequest, LLMResult
from cyberjurors.precedents.build import BuildFailed, BuildReport, build_precedents, read_cases
from cyberjurors.precedents.distill import (
    DistillTask,
    GuidelineDrafts,
    guideline_id,
    merge_near_duplicates,
    summarize_case,
)
from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.models import CATEGORIES, Guideline, PrecedentError
from cyberjurors.schemas import DisputeCase

from ...conftest import EXAMPLES
from ...factories import settings

SAMPLES = EXAMPLES / "precedents"
SAMPLE_IDS = {
    json.loads(p.read_text())["case_id"]: json.loads(p.read_text())["metadata"]["category"]
    for p in SAMPLES.glob("*.json")
}


async def build(folder: Path, llm, embedder, paths=(SAMPLES,)) -> BuildReport:
    index = await EmbeddedIndex.open(folder, embedder)
    try:
        return await build_precedents(list(paths), settings(precedents=folder), llm, index, embedder)
    finally:
        await index.close()


async def guidelines_in(folder: Path, embedder, ids) -> dict[str, Guideline]:
    index = await EmbeddedIndex.open(folder, embedder, create=False)
    try:
        return {d.guideline.id: d.guideline for d in await index.get([f"guideline:{g}" for g in ids])}
    finally:
        await index.close()


async def counts(folder: Path, embedder) -> dict[str, int]:
    index = await EmbeddedIndex.open(folder, embedder, create=False)
    try:
        out = {"case": await index.count("case"), "guideline": await index.count("guideline")}
        out |= {c: await index.count("guideline", c) for c in CATEGORIES}
        return out
    finally:
        await index.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder) -> tuple[Path, BuildReport]:
    """One uninterrupted build of the sample set, shared by the tests that only read it."""
    folder = tmp_path_factory.mktemp("built") / "precedents"
    report = asyncio.run(build(folder, OfflineLLM(), embedder))
    return folder, report


def test_the_sample_set_is_decided_varied_and_covers_every_category():
    cases = [DisputeCase.model_validate_json(p.read_text()) for p in sorted(SAMPLES.glob("*.json"))]
    assert 40 <= len(cases) <= 60
    assert not set(SAMPLE_IDS) & {json.loads(p.read_text())["case_id"] for p in (EXAMPLES / "cases").glob("*.json")}
    for category in CATEGORIES:
        mine = [c for c in cases if c.metadata.category == category]
        assert len(mine) >= 6, category
        assert {c.ground_truth.winner for c in mine} == {"buyer", "seller"}, category
    assert all(c.ground_truth is not None and c.ground_truth.total == 17 for c in cases)


def test_build_indexes_every_case_and_distils_guidelines_in_every_category(built, embedder):
    folder, report = built
    assert report.cases_read == report.cases_indexed == len(SAMPLE_IDS) and not report.skipped
    assert report.chunks_distilled == report.chunks_total == sum(-(-n // 8) for n in report.categories.values())
    assert report.guidelines_created > 0 and report.usage.calls == report.chunks_total
    have = asyncio.run(counts(folder, embedder))
    assert have["case"] == len(SAMPLE_IDS)
    assert all(have[c] > 0 for c in CATEGORIES), have
    guidelines = asyncio.run(guidelines_in(folder, embedder, report.guideline_ids))
    assert set(guidelines) == set(report.guideline_ids) and len(guidelines) == have["guideline"]
    for g in guidelines.values():
        assert g.rule.startswith("[offline stand-in]")
        assert 0.0 <= g.confidence <= 1.0
        assert g.supporting_cases and all(SAMPLE_IDS.get(c) == g.category for c in g.supporting_cases), g
        assert g.id == guideline_id(g.category, g.dispute_type, g.rule)
        assert g.history and g.history[0].reason == "created"


async def test_rerunning_the_build_is_idempotent(built, embedder, tmp_path):
    folder, first = built
    before = await guidelines_in(folder, embedder, first.guideline_ids)
    counted = await counts(folder, embedder)
    again = await build(folder, OfflineLLM(), embedder)
    assert again.chunks_skipped == again.chunks_total == first.chunks_total and again.chunks_distilled == 0
    assert again.cases_indexed == 0 and again.cases_unchanged == len(SAMPLE_IDS)
    assert (again.guidelines_created, again.guidelines_merged, again.usage.calls) == (0, 0, 0)
    assert again.guideline_ids == first.guideline_ids
    assert await counts(folder, embedder) == counted
    after = await guidelines_in(folder, embedder, again.guideline_ids)
    assert after == before


class FailsOnDistilCall:
    """The offline stand-in, except that distil call number ``fail_at`` raises (a provider outage)."""

    backend = "offline"

    def __init__(self, fail_at: int):
        self.inner, self.fail_at, self.calls = OfflineLLM(), fail_at, 0

    async def generate(self, request: LLMRequest, output_type) -> LLMResult:
        if isinstance(request.task, DistillTask):
            self.calls += 1
            if self.calls == self.fail_at:
                raise LLMError("server_error", "simulated outage")
        return await self.inner.generate(request, output_type)


async def test_an_interrupted_build_resumes_and_ends_like_an_uninterrupted_one(built, embedder, tmp_path):
    folder = tmp_path / "precedents"
    with pytest.raises(BuildFailed) as failed:
        await build(folder, FailsOnDistilCall(fail_at=2), embedder)
    assert failed.value.report.chunks_distilled == 1
    assert failed.value.report.cases_indexed == len(SAMPLE_IDS)
    assert "run the build again to resume" in str(failed.value)

    resumed = await build(folder, OfflineLLM(), embedder)
    assert resumed.chunks_skipped == 1 and resumed.chunks_distilled == resumed.chunks_total - 1
    assert resumed.cases_unchanged == len(SAMPLE_IDS)

    reference_folder, reference = built
    assert resumed.guideline_ids == reference.guideline_ids
    assert await counts(folder, embedder) == await counts(reference_folder, embedder)
    strip = lambda gs: {k: g.model_dump(exclude={"updated_at", "history"}) for k, g in gs.items()}  # noqa: E731
    assert strip(await guidelines_in(folder, embedder, resumed.guideline_ids)) == strip(
        await guidelines_in(reference_folder, embedder, reference.guideline_ids)
    )


def guideline(
    n: int,
    rule: str,
    favours: str = "buyer",
    category: str = "clothing",
    confidence: float = 0.6,
    cases: tuple[str, ...] = (),
) -> Guideline:
    return Guideline(
        id=f"g-{n}",
        rule=rule,
        category=category,
        dispute_type="damaged",
        favours=favours,
        confidence=confidence,
        supporting_cases=list(cases or (f"hist-{n}",)),
    )


def test_near_duplicates_merge_and_unrelated_rules_do_not(embedder):
    a = guideline(
        1,
        "When the seller's own video shows the defect before shipping, the buyer wins regardless of the return window.",
        confidence=0.8,
    )
    b = guideline(
        2,
        "If the seller's own video shows the defect before shipping, the buyer wins even after the return window.",
        confidence=0.9,
    )
    other_topic = guideline(
        3, "Signed proof of delivery at the buyer's address decides a non-delivery claim.", favours="seller"
    )
    other_side = guideline(
        4,
        "When the seller's own video shows no defect before shipping, the seller wins regardless of the return window.",
        favours="seller",
    )
    other_category = guideline(5, b.rule, category="appliances")
    merged = merge_near_duplicates([a, b, other_topic, other_side, other_category], embedder)
    by_id = {g.id: g for g in merged}
    assert set(by_id) == {"g-2", "g-3", "g-4", "g-5"}  # a folded into b, the stronger of the two
    assert by_id["g-2"].supporting_cases == ["hist-1", "hist-2"]
    assert by_id["g-2"].confidence == 0.9 and by_id["g-2"].version == 2
    assert by_id["g-2"].history[-1].reason == "merged"
    assert all(by_id[g].version == 1 for g in ("g-3", "g-4", "g-5"))
    # nothing new: no merge, no new version
    assert merge_near_duplicates([a], embedder) == [a]
    assert merge_near_duplicates([a, a.model_copy()], embedder) == [a]


def write_cases(folder: Path, n: int = 3, category: str = "food") -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    ids = []
    template = json.loads((SAMPLES / "hist-food-001.json").read_text())
    for i in range(n):
        case = json.loads(json.dumps(template))
        case["case_id"] = f"t-{category}-{i}"
        case["metadata"]["category"] = category
        case["rounds"][0]["items"][0]["text"] += " </evidence> <b>bold</b>"
        (folder / f"t-{i}.json").write_text(json.dumps(case))
        ids.append(case["case_id"])
    return ids


async def test_a_supporting_case_the_chunk_does_not_hold_is_dropped(tmp_path, embedder):
    ids = write_cases(tmp_path / "in")

    def answer(request: LLMRequest, output_type):
        assert request.role == "distil" and isinstance(request.task, DistillTask)
        prompt = request.prompt[0].text
        assert prompt.count("<evidence ") == prompt.count("</evidence>") == len(request.task.cases)
        assert "&lt;/evidence&gt; &lt;b&gt;bold&lt;/b&gt;" in prompt  # party text cannot close the tag
        return GuidelineDrafts.model_validate(
            {
                "guidelines": [
                    {
                        "rule": "Food delivered past its best-before date is refunded.",
                        "dispute_type": "Expired food",
                        "favours": "buyer",
                        "supporting_cases": [ids[0], "case:" + ids[1], "hist-made-up-99"],
                        "confidence": 1.7,
                    },
                    {
                        "rule": "A rule resting on nothing real.",
                        "dispute_type": "other",
                        "favours": None,
                        "supporting_cases": ["hist-made-up-1"],
                        "confidence": 0.5,
                    },
                ]
            }
        )

    folder = tmp_path / "precedents"
    report = await build(folder, ScriptedLLM(answer), embedder, paths=(tmp_path / "in",))
    assert report.guidelines_created == 1 and len(report.guideline_ids) == 1
    assert any("hist-made-up-99" in note for note in report.notes)
    assert any("no supporting case" in note for note in report.notes)
    (g,) = (await guidelines_in(folder, embedder, report.guideline_ids)).values()
    assert g.supporting_cases == sorted(ids[:2]) and g.confidence == 1.0 and g.dispute_type == "expired_food"


async def test_cases_without_ground_truth_and_broken_files_are_reported_as_skipped(tmp_path, embedder):
    ids = write_cases(tmp_path / "in", n=1)
    undecided = json.loads((SAMPLES / "hist-food-002.json").read_text())
    undecided["case_id"] = "t-undecided"
    del undecided["ground_truth"]
    (tmp_path / "in" / "undecided.json").write_text(json.dumps(undecided))
    (tmp_path / "in" / "broken.json").write_text("{not json")
    (tmp_path / "in" / "more.jsonl").write_text(json.dumps(undecided) + "\n\n" + json.dumps({"case_id": "x"}) + "\n")

    with pytest.raises(PrecedentError, match="no ground truth"):
        summarize_case(DisputeCase.model_validate(undecided))
    report = await build(tmp_path / "precedents", OfflineLLM(), embedder, paths=(tmp_path / "in",))
    reasons = dict(report.skipped)
    assert report.cases_indexed == 1 and report.files == 4
    assert "no ground truth" in reasons[str(tmp_path / "in" / "undecided.json")]
    assert "no ground truth" in reasons[f"{tmp_path / 'in' / 'more.jsonl'}:1"]
    assert "invalid" in reasons[f"{tmp_path / 'in' / 'more.jsonl'}:3"]
    assert "invalid" in reasons[str(tmp_path / "in" / "broken.json")]
    assert ids[0] not in reasons


def test_read_cases_refuses_a_missing_path(tmp_path):
    from cyberjurors.precedents.build import BuildInputError

    with pytest.raises(BuildInputError, match="no such file"):
        read_cases([tmp_path / "nope"])


# --- the command line ---------------------------------------------------------------------------------


def invoke(*args: str, folder: Path, columns: int = 200):
    env = {
        "CYBERJURORS_PRECEDENT_DIR": str(folder),
        "CYBERJURORS_LLM_BACKEND": "offline",
        "CYBERJURORS_PRECEDENT_BACKEND": "embedded",
        "COLUMNS": str(columns),
    }
    return CliRunner().invoke(app, list(args), env=env)


def test_cli_search_prints_a_table_of_hits(built):
    folder, _report = built
    result = invoke(
        "precedents",
        "search",
        "signed proof of delivery but the parcel never arrived",
        "--category",
        "clothing",
        "-k",
        "3",
        folder=folder,
    )
    assert result.exit_code == 0, result.output
    assert "guidelines for" in result.output and "cases for" in result.output
    assert "id@version" in result.output and "sources" in result.output
    assert "hist-clot-004" in result.output  # the signed-delivery coat case
    assert "@1" in result.output and "vector#" in result.output

    narrow = invoke(
        "precedents", "search", "mould in dried fruit", "--kind", "case", "--mode", "bm25", folder=folder, columns=80
    )
    assert narrow.exit_code == 0, narrow.output
    assert "hist-food-009" in narrow.output and "bm25#1" in narrow.output and "guidelines for" not in narrow.output


def test_cli_search_errors_exit_2_with_what_to_do(built, tmp_path):
    missing = invoke("precedents", "search", "anything", folder=tmp_path / "none")
    assert missing.exit_code == 2
    assert "index_missing" in missing.output and "precedents build" in missing.output
    bad_kind = invoke("precedents", "search", "anything", "--kind", "rule", folder=built[0])
    assert bad_kind.exit_code == 2 and "--kind" in bad_kind.output
    bad_category = invoke("precedents", "search", "anything", "--category", "toys", folder=built[0])
    assert bad_category.exit_code == 2 and "unknown_category" in bad_category.output


def test_cli_build_reports_and_exits_2_on_bad_input(built, tmp_path):
    folder, first = built
    again = invoke("precedents", "build", str(SAMPLES), folder=folder)
    assert again.exit_code == 0, again.output
    assert f"0 distilled, {first.chunks_total} done before" in again.output
    assert f"{len(SAMPLE_IDS)} decided cases" in again.output

    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "x.json").write_text("[]")
    nothing = invoke("precedents", "build", str(empty), folder=tmp_path / "p")
    assert nothing.exit_code == 2 and "no decided cases" in nothing.output and "x.json" in nothing.output

    env = {k: v for k, v in os.environ.items() if not k.startswith("CYBERJURORS_")}
    env |= {"CYBERJURORS_PRECEDENT_DIR": str(tmp_path / "p"), "CYBERJURORS_LLM_BACKEND": "offline"}
    proc = subprocess.run(
        [sys.executable, "-m", "cyberjurors", "precedents", "build", str(tmp_path / "missing")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "no such file or folder" in " ".join(proc.stdout.split())
    assert not (tmp_path / "p").exists()  # nothing was created


def test_the_generator_reproduces_the_committed_cases(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SAMPLES / "make_precedents.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    made = sorted(p.name for p in tmp_path.glob("*.json"))
    assert made == sorted(p.name for p in SAMPLES.glob("*.json"))
    assert all((tmp_path / name).read_text() == (SAMPLES / name).read_text() for name in made)


def test_seeding_on_a_provider_closes_its_client_in_its_own_event_loop(tmp_path, caplog):
    """The demo seeds the precedent base in one event loop, then runs in another: the SDK's HTTP
    client, left to the garbage collector, scheduled its close on the second loop, which failed with
    "Task exception was never retrieved ... Event loop is closed" and a traceback."""
    import gc

    from rich.console import Console

    from cyberjurors.tooling.demo import seed_precedents

    from ...messages_server import ScriptedServer, StrictModel, serving

    async def later() -> None:  # what the demo does next, in an event loop of its own
        gc.collect()
        await asyncio.sleep(0.1)

    # a client another test of this process left behind is collected now, outside any event loop,
    # and not during this test's, where its close would be logged as if this test had leaked it
    gc.collect()
    few = tmp_path / "few"  # a handful of the samples: the client's close is the point, not the base
    few.mkdir()
    for path in sorted(SAMPLES.glob("*.json"))[:4]:
        shutil.copy(path, few / path.name)
    with serving(ScriptedServer(respond=StrictModel())) as url:
        settings = Settings(
            llm_backend="anthropic",
            anthropic_api_key="test",
            anthropic_base_url=url,
            llm_max_retries=0,
            precedent_backend="embedded",
            precedent_dir=tmp_path / "p",
            metrics_port=0,
        )
        console = Console(record=True, width=300)
        with caplog.at_level("ERROR", logger="asyncio"):
            seed_precedents(settings, console, few)
            asyncio.run(later())
            gc.collect()
    assert "precedent base: built" in console.export_text()
    assert not [r for r in caplog.records if r.name == "asyncio"], [r.getMessage() for r in caplog.records]
