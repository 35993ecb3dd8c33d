"""``cyberjurors eval --batch`` (issue 13, item 4): stage-synchronous waves through the same stage
functions as the stream, each wave one Message Batch through the real anthropic SDK.

The provider is the local server of tests/messages_server.py with its batch endpoints
(``MessageBatches``: create, retrieve with processing_status and request_counts, results as JSONL in
reverse order, cancel) answering entries with ``StrictModel`` (the Messages API's request checks and
prompt-cache accounting); chosen entries come back errored or expired on their first attempt. The
offline stand-in runs the same waves in process, so the wave logic is also tested without a server.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.progress import Progress
from typer.testing import CliRunner

from cyberjurors.assembly import build_llm
from cyberjurors.cli import app as cli
from cyberjurors.config import Settings
from cyberjurors.errors import StoreError
from cyberjurors.evaluation.batch import judge_in_waves
from cyberjurors.evaluation.dataset import load_dataset
from cyberjurors.evaluation.ladder import ABLATIONS
from cyberjurors.evaluation.runner import run_eval
from cyberjurors.evaluation.runs import EvalError, Options
from cyberjurors.evaluation.synth import generate
from cyberjurors.jury import prompts
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.stages import judge
from cyberjurors.llm.backends.anthropic import AnthropicLLM
from cyberjurors.llm.backends.batch import BatchStop, BatchStore, InProcess, Pending, custom_id
from cyberjurors.llm.backends.batch import MessageBatches as Batches
from cyberjurors.llm.port import GuardedLLM, gather_all, stage_request
from cyberjurors.llm.prices import PriceTable
from cyberjurors.llm.waves import Waves
from cyberjurors.schemas import DisputeCase, Focus, Usage, Verdict

from ... import factories
from ...conftest import ROOT
from ...messages_server import MessageBatches, ScriptedServer, StrictModel, serving

EXAMPLES = ROOT / "examples"
CASES = [DisputeCase.model_validate_json(p.read_text()) for p in sorted((EXAMPLES / "cases").glob("*.json"))]
VOTE = ("buyer", "seller")


pytestmark = pytest.mark.usefixtures("no_provider_env")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory):
    """Four synthetic cases with ground truth (photos and videos included)."""
    out = tmp_path_factory.mktemp("synth")
    generate(out, cases=4, seed=5)
    return load_dataset(out)


def juror_votes(body: dict[str, Any]) -> dict[str, Any] | None:
    """The server's juror answers: each juror votes by a digest of its persona and round, so an
    answer handed to the wrong request would show as a different verdict."""
    title = body["output_config"]["format"]["schema"].get("title")
    if title != "BallotDraft":
        return None
    said = body["messages"][0]["content"][-1]["text"]
    vote = VOTE[hashlib.sha256(said.encode()).digest()[0] % 2]
    return {
        "conflicts": [],
        "buyer_conflicts": [],
        "seller_conflicts": [],
        "vote": vote,
        "justification": f"I vote {vote}.",
        "cited_clues": [],
        "cited_guidelines": [],
    }


# the shared anthropic settings, the batches polled without a pause
anthropic_settings = functools.partial(factories.anthropic_settings, llm_batch={"poll_s": 0.01})


# --- the waves, in process -------------------------------------------------------------------


class Recording(InProcess):
    """The offline stand-in answering each wave, noting the roles the wave held."""

    def __init__(self) -> None:
        super().__init__(OfflineLLM())
        self.waves: list[list[str]] = []

    async def answer(self, calls: list[Pending]):  # type: ignore[no-untyped-def]
        self.waves.append([c.request.role for c in calls])
        return await super().answer(calls)


async def in_waves(settings: Settings, cases: list[DisputeCase], executor) -> dict[str, Verdict]:  # type: ignore[no-untyped-def]
    progress = Progress(disable=True)
    recorded: dict[str, Verdict] = {}
    judged = await judge_in_waves(
        settings,
        cases,
        executor,
        lambda i, v, f: recorded.update({i: v}) if v else None,
        progress,
        progress.add_task("t", total=len(cases)),
    )
    assert not judged.failures and judged.verdicts == recorded
    return judged.verdicts


async def test_waves_go_stage_by_stage_and_judge_as_the_stream_does() -> None:
    settings = Settings(llm_backend="offline", precedent_backend="none", media_root=EXAMPLES, metrics_port=0)
    cases = CASES[:5]
    executor = Recording()
    verdicts = await in_waves(settings, cases, executor)

    # one at a time, through one provider cache as the waves (the jurors' system prompt is cached across cases)
    streamed = GuardedLLM(OfflineLLM())
    stream = {c.case_id: await judge(c, streamed, settings) for c in cases}
    for case_id, v in verdicts.items():
        s = stream[case_id]
        assert (v.winner, v.votes, v.rounds_used, [c.id for c in v.cited_clues]) == (
            s.winner,
            s.votes,
            s.rounds_used,
            [c.id for c in s.cited_clues],
        )
        # which case writes the shared system prompt first depends on the order calls are answered in
        cache = {"latency_s", "cache_read_tokens", "cache_write_tokens", "cost_usd"}
        assert v.tokens.model_dump(exclude=cache) == s.tokens.model_dump(exclude=cache)
        assert (
            v.tokens.cache_read_tokens + v.tokens.cache_write_tokens
            == s.tokens.cache_read_tokens + s.tokens.cache_write_tokens
        )
    waved, streamed_total = (sum((x.tokens for x in run.values()), Usage()) for run in (verdicts, stream))
    assert waved.model_dump(exclude={"latency_s"}) == streamed_total.model_dump(exclude={"latency_s"})
    # every wave holds one stage: focus, then select and perceive steps, then each round's warm-up
    # jurors, the other jurors, the summaries
    kinds = [set(w) for w in executor.waves]
    assert executor.waves[0] == ["focus"] * len(cases)
    first_juror = next(i for i, k in enumerate(kinds) if "juror" in k)
    assert all(k <= {"select", "perceive"} for k in kinds[1:first_juror])
    assert all(len(k) == 1 for k in kinds[first_juror:])
    assert executor.waves[first_juror] == ["juror"] * len(cases)  # round 1: one juror per case first
    assert executor.waves[first_juror + 1] == ["juror"] * (16 * len(cases))
    assert executor.waves[first_juror + 2] == ["summary"] * len(cases)
    assert sum(map(len, executor.waves)) == sum(v.tokens.calls for v in verdicts.values())


async def test_a_fork_torn_down_by_its_failing_child_leaves_the_count_right() -> None:
    """A juror that fails cancels its siblings waiting in the wave (gather_all): they are taken out of
    the wave, the flow count comes back, and the other cases' calls are still answered."""
    answered: list[list[int]] = []

    async def answer(payloads: list[int]) -> list[int]:
        answered.append(sorted(payloads))
        return [p * 10 for p in payloads]

    waves: Waves[int] = Waves(answer)

    async def fails() -> int:
        await asyncio.sleep(0)  # after its siblings have joined the wave
        raise ValueError("refused")

    async def case_a() -> int:
        with pytest.raises(ValueError):
            await gather_all(waves.wait(1), fails(), waves.wait(2))
        return await waves.wait(5)

    async def case_b() -> list[int]:
        return [await waves.wait(3), await waves.wait(4)]

    assert await waves.gather(case_a(), case_b()) == [50, [30, 40]]
    sent = [p for wave in answered for p in wave]
    assert sorted(sent) == [3, 4, 5]  # 1 and 2 left with their flow: never sent
    assert waves.active == 0 and not waves.waiting


# --- Message Batches through the SDK ---------------------------------------------------------


def faulty(custom_id: str, attempt: int, params: dict[str, Any]) -> str | None:
    """About one entry in five errored and one in seven expired on its first attempt."""
    n = int(custom_id[1:9], 16)
    if attempt == 1 and n % 5 == 0:
        return "errored"
    if attempt == 1 and n % 7 == 0:
        return "expired"
    return None


async def test_eval_batch_answers_every_case_as_the_streaming_calls_do(dataset, tmp_path: Path) -> None:
    model, batches = StrictModel(answers=juror_votes), MessageBatches(polls_to_end=2, fault=faulty)
    server = ScriptedServer(respond=model, batches=batches)
    with serving(server) as url:
        settings = anthropic_settings(url, media_root=dataset.media_root)  # set, it would win over the dataset's
        (report,) = await asyncio.to_thread(
            run_eval,
            dataset,
            [ABLATIONS["jury"]],
            settings,
            Options(out=tmp_path / "out", batch=True, party_swap=False),
            Console(quiet=True),
        )
    verdicts = {
        json.loads(line)["case_id"]: Verdict.model_validate(json.loads(line)["verdict"])
        for line in (tmp_path / "out" / "results" / "jury.batch.jsonl").read_text().splitlines()
    }
    assert report.summary.verdicts == len(dataset.cases) == len(verdicts) and not report.failed_cases

    # the same cases, streaming (one call at a time to /v1/messages) against a fresh server: the same
    # verdicts, so every batch answer went back to the request that asked it
    stream_server = ScriptedServer(respond=StrictModel(answers=juror_votes))
    await stream_server.start()
    try:
        s = ABLATIONS["jury"].settings(
            anthropic_settings(stream_server.url, prompt_cache_ttl="1h", media_root=dataset.media_root)
        )
        llm = build_llm(s)
        for case in dataset.cases:
            alone = await judge(case.model_copy(update={"ground_truth": None}), llm, s)
            assert (alone.votes, alone.rounds_used) == (
                verdicts[case.case_id].votes,
                verdicts[case.case_id].rounds_used,
            )
    finally:
        await stream_server.stop()

    # retried: exactly the entries faulted on their first attempt, each sent once more; nothing else twice
    faulted = {i for i in batches.attempts if faulty(i, 1, {})}
    assert faulted and report.batch is not None and report.batch.retried == len(faulted)
    assert {i for i, n in batches.attempts.items() if n == 2} == faulted and set(batches.attempts.values()) == {1, 2}
    # one batch per wave, then one more for each wave that had a faulted entry
    seen: set[str] = set()
    first, again = [], []
    for b in batches.batches.values():  # in creation order
        ids = {r["custom_id"] for r in b.requests}
        (again if ids <= seen else first).append(ids)
        seen |= ids
    assert len(first) == report.batch.waves and len(again) == sum(bool(ids & faulted) for ids in first)
    assert report.batch.batches == batches.creates == len(first) + len(again)
    # priced at the batch share from the server's own accounting, and at standard prices beside it
    prices = PriceTable(settings.llm_prices)
    billed = sum(prices.cost("anthropic", "claude-sonnet-5-5", usage_of(b.usage), batch=True) for b in model.billed)
    assert report.summary.cost_per_case_usd == pytest.approx(billed / len(dataset.cases))
    assert report.batch.cost_per_case_standard_usd == pytest.approx(2 * report.summary.cost_per_case_usd)
    assert report.batch.executor == "message-batches" and report.mode == "batch"


def usage_of(usage: dict[str, Any]):  # type: ignore[no-untyped-def]
    from cyberjurors.schemas import Usage

    return Usage(
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cache_read_tokens=usage["cache_read_input_tokens"],
        cache_write_tokens=usage["cache_creation_input_tokens"],
        cache_write_1h_tokens=usage["cache_creation"]["ephemeral_1h_input_tokens"],
    )


def case_of(params: dict[str, Any]) -> str:
    """The case a request is about (every stage's prompt starts its metadata with "Case <id>")."""
    text = json.dumps(params["messages"])
    return text.split("Case ", 1)[1].split("\\n", 1)[0]


async def test_a_refused_entry_is_not_sent_again_and_one_that_keeps_expiring_fails_as_a_timeout(
    dataset, tmp_path: Path
) -> None:
    refused, expiring = dataset.cases[0].case_id, dataset.cases[1].case_id

    def fault(custom_id: str, attempt: int, params: dict[str, Any]) -> str | None:
        if params["system"][0]["text"].startswith(prompts.FOCUS_SYSTEM[:40]):
            return {refused: "invalid", expiring: "expired"}.get(case_of(params))
        return None

    batches = MessageBatches(fault=fault)
    with serving(ScriptedServer(respond=StrictModel(), batches=batches)) as url:
        (report,) = await asyncio.to_thread(
            run_eval,
            dataset,
            [ABLATIONS["iv-cot"]],
            anthropic_settings(url, llm_batch={"poll_s": 0.01, "max_attempts": 2}),
            Options(out=tmp_path / "out", batch=True, party_swap=False),
            Console(quiet=True),
        )
    assert report.failed_cases == {refused: "focus:llm_bad_request", expiring: "focus:llm_timeout"}
    assert report.summary.verdicts == len(dataset.cases) - 2
    sent = Counter(
        case_of(r["params"])
        for b in batches.batches.values()
        for r in b.requests
        if r["params"]["system"][0]["text"].startswith(prompts.FOCUS_SYSTEM[:40])
    )
    assert sent[refused] == 1 and sent[expiring] == 2  # llm_batch.max_attempts
    assert all(sent[c.case_id] == 1 for c in dataset.cases[2:])


def eval_command(data: Path, out: Path, url: str) -> tuple[list[str], dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CYBERJURORS_", "ANTHROPIC_", "OPENAI_"))}
    env.update(
        ANTHROPIC_API_KEY="sk-ant-test",
        ANTHROPIC_BASE_URL=url,
        CYBERJURORS_LLM_BACKEND="anthropic",
        CYBERJURORS_PRECEDENT_BACKEND="none",
        CYBERJURORS_LLM_BATCH__POLL_S="0.05",
        CYBERJURORS_LLM_MAX_RETRIES="0",
        PYTHONPATH=str(ROOT),
    )
    return [
        sys.executable,
        "-m",
        "cyberjurors",
        "eval",
        str(data),
        "--batch",
        "--ablation",
        "jury",
        "--no-party-swap",
        "--out",
        str(out),
    ], env


async def test_a_run_killed_after_submitting_collects_its_batch_when_run_again(dataset, tmp_path: Path) -> None:
    batches = MessageBatches(polls_to_end=10**9)  # the first batch stays in progress
    out = tmp_path / "out"
    with serving(ScriptedServer(respond=StrictModel(), batches=batches)) as url:
        args, env = eval_command(dataset.source, out, url)
        first = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while batches.creates == 0 and first.poll() is None:
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.5)  # it is polling now
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        assert batches.creates == 1, "the first run should have submitted exactly one batch"
        (submitted,) = batches.batches
        assert submitted in (out / "batches" / "jury" / "batches.jsonl").read_text()

        batches.polls_to_end = 1
        again = await asyncio.to_thread(subprocess.run, args, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads((out / "report.json").read_text())[0]
    assert report["summary"]["verdicts"] == len(dataset.cases) and report["batch"]["collected"] == 1
    # the batch was fetched, not sent again: no request was ever paid for twice
    assert set(batches.attempts.values()) == {1}
    assert batches.batches[submitted].status == "ended"
    assert report["batch"]["batches"] == batches.creates - 1


async def test_a_canceled_batch_stops_the_run_and_the_next_run_sends_its_requests_again(
    dataset, tmp_path: Path
) -> None:
    batches = MessageBatches(canceled=lambda n: n == 2)  # an operator cancels the second batch
    options = Options(out=tmp_path / "out", batch=True, party_swap=False)
    with serving(ScriptedServer(respond=StrictModel(), batches=batches)) as url:
        settings = anthropic_settings(url)
        with pytest.raises(EvalError, match="canceled"):
            await asyncio.to_thread(run_eval, dataset, [ABLATIONS["iv-cot"]], settings, options, Console(quiet=True))
        canceled = {r["custom_id"] for r in list(batches.batches.values())[1].requests}
        batches.canceled = lambda n: False
        (report,) = await asyncio.to_thread(
            run_eval, dataset, [ABLATIONS["iv-cot"]], settings, options, Console(quiet=True)
        )
    assert report.summary.verdicts == len(dataset.cases) and not report.failed_cases
    assert {i for i, n in batches.attempts.items() if n == 2} == canceled  # sent again once, the rest never
    assert set(batches.attempts.values()) == {1, 2}


async def test_identical_requests_of_a_wave_are_one_entry_and_the_store_survives_a_torn_line(tmp_path: Path) -> None:
    batches = MessageBatches()
    server = ScriptedServer(respond=StrictModel(), batches=batches)
    await server.start()
    try:
        settings = anthropic_settings(server.url)
        store = BatchStore(tmp_path / "store")
        executor = Batches(AnthropicLLM.from_settings(settings), store, poll_s=0.01)
        request = stage_request(
            "focus",
            settings,
            system=prompts.FOCUS_SYSTEM,
            prompt=[prompts.focus_prompt(CASES[0])],
            task=None,
            case_id=CASES[0].case_id,
        )
        same = Pending(request, Focus)
        first, second = await executor.answer([same, same])
        assert first.output == second.output and executor.stats.requests == 1
        (entry,) = next(iter(batches.batches.values())).requests
        assert entry["custom_id"] == custom_id(executor.llm.params(request, Focus))

        with store.results_path.open("a") as results:
            results.write('{"custom_id": "r0", "batch_id": "msgbatch_cut", "ty')  # killed mid-line
        reopened = BatchStore(tmp_path / "store")
        assert reopened.message(entry["custom_id"]) is not None and not reopened.outstanding({entry["custom_id"]})
        again = Batches(AnthropicLLM.from_settings(settings), reopened, poll_s=0.01)
        (answer,) = await again.answer([same])
        assert answer.output == first.output and again.stats.resumed == 1 and batches.creates == 1
        await executor.llm.aclose()
        await again.llm.aclose()
    finally:
        await server.stop()


def focus_call(case: DisputeCase, settings: Settings) -> Pending:
    return Pending(
        stage_request(
            "focus",
            settings,
            system=prompts.FOCUS_SYSTEM,
            prompt=[prompts.focus_prompt(case)],
            task=None,
            case_id=case.case_id,
        ),
        Focus,
    )


async def test_a_torn_last_line_is_cut_off_so_that_the_next_append_starts_a_line(tmp_path: Path, caplog) -> None:
    store = BatchStore(tmp_path / "store")
    store.submit("msgbatch_a", ["r1"])
    with store.batches_path.open("a") as batches:
        batches.write('{"batch_id": "msgbatch_b", "custom_')  # killed mid-append
    with caplog.at_level("WARNING", "cyberjurors.llm.backends.batch"):
        reopened = BatchStore(tmp_path / "store")
    assert f"{store.batches_path}: line 2 is an unfinished append" in caplog.text
    assert reopened.submitted == {"msgbatch_a": ["r1"]}
    reopened.submit("msgbatch_c", ["r2"])  # the next run appends: a line of its own, not glued to the fragment
    assert BatchStore(tmp_path / "store").submitted == {"msgbatch_a": ["r1"], "msgbatch_c": ["r2"]}


@pytest.mark.parametrize(
    "file, line",
    [
        ("batches.jsonl", '{"batch_id": "msgbatch_x"}'),  # valid JSON, not a record
        ("batches.jsonl", '{"batch_id": "msgbatch_x", "collected": false}'),
        ("results.jsonl", '{"custom_id": "r1", "batch_id": "msgbatch_a", "type": "succeeded"}'),  # no message
        ("results.jsonl", "\udcff\udcfe\x00garbage"),  # binary garbage
    ],
)
def test_a_damaged_line_before_the_last_stops_the_run_naming_it(tmp_path: Path, file: str, line: str) -> None:
    store = BatchStore(tmp_path / "store")
    store.submit("msgbatch_a", ["r1"])
    store.results("msgbatch_a", [{"custom_id": "r1", "batch_id": "msgbatch_a", "type": "expired"}])
    path = tmp_path / "store" / file
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(1, line.encode("utf-8", "surrogateescape") + b"\n")
    path.write_bytes(b"".join(lines))
    with pytest.raises(StoreError, match=rf"{file}, line 2: not a valid record .*--fresh") as damaged:
        BatchStore(tmp_path / "store")
    assert damaged.value.kind == "batch_store_damaged"


async def test_eval_batch_on_a_damaged_store_exits_2_and_submits_nothing(dataset, tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "batches" / "jury").mkdir(parents=True)
    (out / "batches" / "jury" / "batches.jsonl").write_bytes(b'\xff\xfe\x00garbage\n{"batch_id": "msgbatch_x"}\n')
    batches = MessageBatches()
    with serving(ScriptedServer(respond=StrictModel(), batches=batches)) as url:
        args, env = eval_command(dataset.source, out, url)
        run = await asyncio.to_thread(subprocess.run, args, env=env, capture_output=True, text=True)
    said = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 2, said
    assert "unusable batch store" in said and "batches.jsonl, line 1: not a valid record" in said
    assert "Traceback" not in said and batches.creates == 0


async def test_a_stored_batch_the_provider_does_not_know_is_forgotten_and_its_entries_sent_again(
    tmp_path: Path, caplog
) -> None:
    batches = MessageBatches()
    server = ScriptedServer(respond=StrictModel(), batches=batches)
    await server.start()
    try:
        settings = anthropic_settings(server.url)
        store = BatchStore(tmp_path / "store")
        executor = Batches(AnthropicLLM.from_settings(settings), store, poll_s=0.01)
        paid, lost = focus_call(CASES[0], settings), focus_call(CASES[1], settings)
        (first,) = await executor.answer([paid])
        lost_id = custom_id(executor.llm.params(lost.request, Focus))
        store.submit("msgbatch_gone", [lost_id])  # another workspace's, or deleted after 29 days
        with caplog.at_level("WARNING", "cyberjurors.llm.backends.batch"):
            kept, again = await executor.answer([paid, lost])
        assert (
            "message batch msgbatch_gone is unknown to the provider" in caplog.text and "its 1 entries" in caplog.text
        )
        assert kept.output == first.output and again.output is not None
        assert batches.creates == 2 and batches.attempts == {
            custom_id(executor.llm.params(paid.request, Focus)): 1,
            lost_id: 1,
        }
        assert not BatchStore(tmp_path / "store").outstanding({lost_id})  # the next run does not ask again
        await executor.llm.aclose()
    finally:
        await server.stop()


async def test_status_checks_and_downloads_are_tried_again_on_connection_errors_and_5xx(tmp_path: Path) -> None:
    down = {("retrieve", 1): 503, ("retrieve", 2): "drop", ("results", 1): "drop", ("results", 2): 500}
    batches = MessageBatches(polls_to_end=2, unavailable=lambda call, n: down.get((call, n)))  # type: ignore[arg-type]
    server = ScriptedServer(respond=StrictModel(), batches=batches)
    await server.start()
    try:
        settings = anthropic_settings(server.url)  # llm_max_retries 0: no retry by the SDK
        executor = Batches(AnthropicLLM.from_settings(settings), BatchStore(tmp_path / "store"), poll_s=0.01)
        (answer,) = await executor.answer([focus_call(CASES[0], settings)])
        assert answer.output is not None and batches.creates == 1
        # 4 polls (2 failed), 3 downloads (2 failed); the SDK retrieves the batch before each download
        assert batches.calls == {"retrieve": 4 + 3, "results": 3}

        # still down after retry_s: the run stops, saying the same command resumes
        batches.unavailable = lambda call, n: 503
        before = batches.calls["retrieve"]
        stopping = Batches(
            AnthropicLLM.from_settings(settings), BatchStore(tmp_path / "other"), poll_s=0.01, retry_s=0.05
        )
        with pytest.raises(BatchStop, match=r"checking message batch .* 503 .*the same command resumes"):
            await stopping.answer([focus_call(CASES[1], settings)])
        assert batches.calls["retrieve"] - before >= 2  # tried again, however short retry_s is
        await executor.llm.aclose()
        await stopping.llm.aclose()
    finally:
        await server.stop()


async def test_a_batch_that_does_not_end_stops_the_run_after_batch_max_wait_s_and_logs_its_progress(
    dataset, tmp_path: Path
) -> None:
    batches = MessageBatches(polls_to_end=10**9)
    out = tmp_path / "out"
    with serving(ScriptedServer(respond=StrictModel(), batches=batches)) as url:
        args, env = eval_command(dataset.source, out, url)
        env["CYBERJURORS_LLM_BATCH__MAX_WAIT_S"] = "0.5"
        stopped = await asyncio.to_thread(subprocess.run, args, env=env, capture_output=True, text=True)
        said = " ".join((stopped.stdout + stopped.stderr).split())
        assert stopped.returncode == 1, said
        (batch_id,) = batches.batches
        assert f"message batch {batch_id} has not ended after 0.5 s of polling (llm_batch.max_wait_s" in said
        assert "the same command resumes and collects it" in said
        # output to a pipe: no progress display, a log line per batch created and per change of its counts
        requests = len(batches.batches[batch_id].requests)
        assert f"message batch {batch_id} created: {requests} requests" in stopped.stderr

        # the rerun polls it three times (no time limit now): in progress twice, then ended; the
        # unchanged counts are logged once, not once per poll
        batches.polls_to_end = batches.batches[batch_id].polls + 3
        del env["CYBERJURORS_LLM_BATCH__MAX_WAIT_S"]
        again = await asyncio.to_thread(subprocess.run, args, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stderr.count(f"message batch {batch_id} in_progress: {requests} processing, 0 succeeded") == 1
    assert f"message batch {batch_id} ended: 0 processing, {requests} succeeded" in again.stderr
    report = json.loads((out / "report.json").read_text())[0]
    assert report["batch"]["collected"] == 1 and set(batches.attempts.values()) == {1}


def test_eval_batch_offline_runs_the_waves_in_process_and_says_so(
    dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CYBERJURORS_LLM_BACKEND", "offline")
    monkeypatch.setenv("CYBERJURORS_PRECEDENT_BACKEND", "none")
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["eval", str(dataset.source), "--batch", "--ablation", "sr-cot,jury", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    reports = json.loads((out / "report.json").read_text())
    assert [r["name"] for r in reports] == ["SR-CoT (batch)", "+Jury (batch)"]
    assert all(r["batch"]["executor"] == "in-process" and r["batch"]["batches"] == 0 and r["stand_in"] for r in reports)
    assert all(
        r["summary"]["verdicts"] == len(dataset.cases) and r["summary"]["swap_pairs"] == len(dataset.cases)
        for r in reports
    )
    markdown = (out / "report.md").read_text()
    assert "## Batch and streaming cost" in markdown and "in-process" in markdown
    assert not (out / "batches").exists()  # nothing to resume: no batch was submitted

    # a rerun finds every case decided and judges none again
    again = CliRunner().invoke(cli, ["eval", str(dataset.source), "--batch", "--ablation", "jury", "--out", str(out)])
    assert again.exit_code == 0 and "8 of 8 cases already decided, 0 to judge" in " ".join(again.output.split())
