"""Token economy as a strict Messages API server bills it: what sharing stages I-II and caching the
case prefix save per verdict, the cache-read share of each case's input, and what the Message
Batches API saves on an evaluation of the ablation ladder.

Every call goes through the real anthropic SDK (``llm/backends/anthropic.py``, and ``llm/backends/batch.py``
for batches) to a local server that checks requests the way the Messages API documents them and
accounts for the prompt cache by prefix (``tests/messages_server.py``, ``StrictModel``): cache
breakpoints (at most 4, 1-hour ones first), each model's minimum cacheable prefix, TTLs refreshed by
reads, the system prompt inside the cached prefix, a 20-block lookback, writes readable only once
the response that wrote them is out (so calls sent together do not read each other's writes; within
a batch, not before the batch ends), images at width x height / 750. Its tokenizer is a stand-in
(word pieces of up to 5 letters, digits in threes, one per other visible character): counts are
close to, not equal to, Claude's. What the model answers comes from the offline stand-in (so votes,
early stops and clue chains are those of the offline runs), serialised as the server's reply: the
server bills its tokens, the client reads them from the reply's usage, as with the real API.

* configured: the defaults (stages I-II once per case, shared by the 17 jurors; the case prefix
  cached; round 1 warms the cache with one juror first; the 5-minute TTL);
* naive: every juror re-runs stages I-II itself in every round (``per_juror_stages``) and nothing is
  marked cacheable (``prompt_caching`` off).

"Billable" tokens weight each kind by its list price relative to uncached input (claude-sonnet-5-5:
output 5, 5-minute write 1.25, 1-hour write 2, read 0.1), so their ratio is the ratio of the bills.

What no request layout could do better, for the same calls: the answers (output) cost what they
cost, and a prompt cache serves only what was sent before. The bench notes every line of text (and
every image) the configured run sends; a line sent for the first time cannot be read from any
cache, every other input token is read at best. That gives a floor for the bill and a ceiling for
the cache-read share, for any cache, and for one kept per answer schema and effort as the API keeps
it (another ``output_config.format`` invalidates the prompt cache; another effort or thinking setting
the cached message blocks), so a layout in which every role shares one prefix reads nothing across
roles on the API. A third bound keeps the jury's information flow (DESIGN.md's JCV: a juror sees
its own persona and memory and the ballots of the jurors it follows): in any layout in which the
17 jurors share the case prefix, a juror's persona and memory come after that prefix and in round 1
nothing has sent them there before, and the ballots it follows are its own selection, so no cache
serves them (``private_lines``); everything else is read at best, as above.
The ladder part runs each rung (``evaluation/ladder.py``) over the same cases twice against fresh
servers, as ``cyberjurors eval`` does (one-hour TTL): streaming, each case's calls sent as they
come, priced at standard rates; and in waves through the server's batch endpoints, priced at the
batch share; each from its own measured usage.

Run: .venv/bin/python bench/token_economy.py [--cases 13] [--jurors 17] [--rounds 3] [--precedents]
     [--ladder] [--thinking 0]
"""

from __future__ import annotations

import asyncio
import hashlib
import statistics
import sys
import tempfile
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import typer
from rich.table import Table

from harness import EXAMPLES, example_cases, make_console

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the local server lives with the tests
from cyberjurors.assembly import build_llm
from cyberjurors.config import DEFAULT_LLM_PRICES, Settings
from cyberjurors.evaluation.batch import judge_case, opened_precedents, wave_llm
from cyberjurors.evaluation.ladder import LADDER
from cyberjurors.jury import prompts
from cyberjurors.jury.model_inputs import JurorTask
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.rounds import Jury
from cyberjurors.jury.stages import judge
from cyberjurors.llm.backends.anthropic import AnthropicLLM, user_content
from cyberjurors.llm.backends.batch import BatchStore, Pending
from cyberjurors.llm.backends.batch import MessageBatches as BatchExecutor
from cyberjurors.llm.port import LLM, LLMRequest, LLMResult, T, TextPart, gather_all
from cyberjurors.llm.waves import Waves
from cyberjurors.precedents.base import opened_base
from cyberjurors.precedents.build import build_precedents
from cyberjurors.schemas import DisputeCase, Usage, Verdict
from tests.messages_server import (
    MessageBatches,
    ScriptedServer,
    StrictModel,
    count_tokens,
    image_tokens,
    prompt_blocks,
    request_text,
)

console = make_console(170)
PRICE = DEFAULT_LLM_PRICES["claude-sonnet-5-5"]
LATENCY_S = 0.02  # the server's answer time: what calls sent together cannot read of each other's writes
ROLES = {
    "Focus": "focus",
    "Selection": "select",
    "Perception": "perceive",
    "BallotDraft": "juror",
    "RoundSummaryDraft": "summary",
}


class BenchError(RuntimeError):
    """The bench could not measure (a case failed)."""


def billable(u: Usage) -> float:
    """Input-token equivalents at list prices: what the bill is proportional to."""
    write_5m = u.cache_write_tokens - u.cache_write_1h_tokens
    return (
        u.input_tokens * PRICE.input
        + write_5m * PRICE.cache_write
        + u.cache_write_1h_tokens * PRICE.write_1h
        + u.cache_read_tokens * PRICE.cache_read
        + u.output_tokens * PRICE.output
    ) / PRICE.input


def output_billable(u: Usage) -> float:
    return u.output_tokens * PRICE.output / PRICE.input


def read_share(u: Usage) -> float:
    """The cache-hit ratio of the dashboards: cache read / input-side tokens."""
    inputs = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    return u.cache_read_tokens / inputs if inputs else 0.0


def digest(body: dict) -> str:
    return hashlib.sha256(request_text(body).encode()).hexdigest()


@dataclass
class Novelty:
    """What no request layout could read from a cache: each line of text (and each image) the first
    time the run sends it. A prompt cache serves only what was sent before, so whatever the order,
    split or breakpoints of the same calls, those tokens are never read; every other input token is
    read at best. Lines, not blocks, so that content repeated inside different blocks still counts as
    sent before. The server's tokenizer counts nothing across a line break, so lines add up to blocks."""

    seen: set[bytes] = field(default_factory=set)
    new: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """per case: tokens sent for the first time in the run"""
    by_role: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, case_id: str, body: dict, role: str, scope: str = "", private: frozenset[str] = frozenset()) -> None:
        """``scope``: sent before only if sent in the same scope (a role's answer schema and settings).
        ``private``: lines never read, sent before or not (``private_lines``)."""
        for block in prompt_blocks(body):
            pieces = (
                [(line.encode(), count_tokens(line)) for line in block["text"].split("\n")]
                if block["type"] == "text"
                else [(block["source"]["data"].encode(), image_tokens(block))]
            )
            for content, tokens in pieces:
                key = hashlib.sha256(scope.encode() + b"\0" + content).digest()
                if key not in self.seen or content.decode(errors="replace") in private:
                    self.seen.add(key)
                    self.new[case_id] += tokens
                    self.by_role[role] += tokens


def private_lines(request: LLMRequest) -> frozenset[str]:
    """What a juror reads that no cache can serve it in any layout in which the jury shares one case
    prefix (the point of stage sharing): its persona and memory in round 1 (they come after the case,
    and nothing sent them after this case before), and the ballots of the jurors it follows (each
    juror follows its own). Only the round's header and the summary are the same for every juror."""
    task = request.task
    if request.role != "juror" or not isinstance(task, JurorTask):
        return frozenset()
    lines = set(part_lines(request.prompt)) - set(
        prompts.juror_round(task.round, [], task.summary.summary if task.summary else None).split("\n")
    )
    if task.round == 1:  # the lines every juror's part has (the guidelines' heading) could be shared
        lines |= set(part_lines(request.own)) - set(prompts.juror_own("", [], precedents=True).split("\n"))
    return frozenset(lines) - {""}


def part_lines(parts: list) -> list[str]:
    return [line for p in parts if isinstance(p, TextPart) for line in p.text.split("\n")]


class Oracle:
    """The offline stand-in decides what the model answers; the server bills it. Each answer is kept
    under a digest of the request's text, as the anthropic backend sends it, for the server to find."""

    def __init__(self, inner: LLM):
        self.inner, self.mind = inner, OfflineLLM(prompt_caching=False)
        self.backend = inner.backend
        self.said: dict[str, dict] = {}
        self.novelty, self.per_role, self.flow = Novelty(), Novelty(), Novelty()

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        answer = await self.mind.generate(request, output_type)
        body = {
            "system": [{"type": "text", "text": request.system}],
            "messages": [{"role": "user", "content": user_content(request)}],
        }
        self.said[digest(body)] = answer.output.model_dump(mode="json")
        self.novelty.add(request.case_id, body, request.role)
        # the API keeps apart what was sent under another answer schema, effort or thinking setting
        scope = f"{request.model} {output_type.__name__} {request.effort} {request.thinking}"
        self.per_role.add(request.case_id, body, request.role, scope)
        self.flow.add(request.case_id, body, request.role, scope, private_lines(request))
        return await self.inner.generate(request, output_type)

    def __call__(self, body: dict) -> dict | None:
        return self.said.get(digest(body))


@dataclass
class Run:
    verdicts: list[Verdict]
    model: StrictModel
    batches: int = 0
    waves: int = 0
    novelty: Novelty = field(default_factory=Novelty)
    per_role: Novelty = field(default_factory=Novelty)
    flow: Novelty = field(default_factory=Novelty)

    @property
    def total(self) -> Usage:
        return sum((v.tokens for v in self.verdicts), Usage())

    def usd_per_case(self) -> float:
        return sum(v.tokens.cost_usd for v in self.verdicts) / len(self.verdicts)


@asynccontextmanager
async def strict_server(thinking: int) -> AsyncIterator[tuple[ScriptedServer, StrictModel, MessageBatches]]:
    model, batches = StrictModel(thinking_tokens=thinking, latency_s=LATENCY_S), MessageBatches()
    server = ScriptedServer(respond=model, batches=batches)
    await server.start()
    try:
        yield server, model, batches
    finally:
        await server.stop()


def checked(results: list[tuple[Verdict | None, str | None]], cases: list[DisputeCase]) -> list[Verdict]:
    failed = {c.case_id: f for c, (v, f) in zip(cases, results, strict=False) if v is None}
    if failed:
        raise BenchError(f"cases without a verdict: {failed}")
    return [v for v, _ in results if v is not None]


async def streaming(cases: list[DisputeCase], settings: Settings, thinking: int) -> Run:
    """Each case's calls sent as they come (the stage functions back to back, as the topology runs them)."""
    async with strict_server(thinking) as (server, model, _):
        settings = settings.model_copy(update={"anthropic_base_url": server.url})
        llm = Oracle(build_llm(settings))
        model.answers = llm
        jury = Jury.from_settings(settings)
        try:
            async with opened_precedents(settings, jury) as precedents:
                verdicts = await gather_all(*(judge(c, llm, settings, jury, precedents) for c in cases))
        finally:
            await llm.inner.inner.aclose()  # type: ignore[attr-defined]
        return Run(list(verdicts), model, novelty=llm.novelty, per_role=llm.per_role, flow=llm.flow)


async def in_waves(cases: list[DisputeCase], settings: Settings, thinking: int, folder: Path) -> Run:
    """``eval --batch``: the cases in waves, each wave one Message Batch through the SDK."""
    async with strict_server(thinking) as (server, model, batches):
        settings = settings.model_copy(update={"anthropic_base_url": server.url})
        executor = BatchExecutor(AnthropicLLM.from_settings(settings), BatchStore(folder), poll_s=0.01)
        waves: Waves[Pending] = Waves(executor.answer)
        llm = Oracle(wave_llm(settings, waves, executor))
        model.answers = llm
        jury = Jury.from_settings(settings)
        try:
            async with opened_precedents(settings, jury) as precedents:
                results = await waves.gather(*(judge_case(c, llm, settings, jury, precedents) for c in cases))
        finally:
            await executor.llm.aclose()
        return Run(checked(list(results), cases), model, batches.creates, len(waves.sizes))


def usage_row(name: str, run: Run) -> list[str]:
    t, n = run.total, len(run.verdicts)
    shares = [read_share(v.tokens) for v in run.verdicts]
    return [
        name,
        f"{t.calls / n:.1f}",
        f"{t.input_tokens / n:,.0f}",
        f"{t.cache_write_tokens / n:,.0f}",
        f"{t.cache_read_tokens / n:,.0f}",
        f"{t.output_tokens / n:,.0f}",
        f"{billable(t) / n:,.0f}",
        f"{t.cost_usd / n:.4f}",
        f"{read_share(t):.1%}",
        f"{statistics.median(shares):.1%} ({min(shares):.1%}-{max(shares):.1%})",
    ]


def usage_table(configured: Run, naive: Run) -> Table:
    table = Table(title="Per case (mean), as the strict server billed it")
    for column in (
        "configuration",
        "calls",
        "input",
        "cache write",
        "cache read",
        "output",
        "billable",
        "USD",
        "cache read share",
        "per case: median (min-max)",
    ):
        table.add_column(column, justify="left" if column == "configuration" else "right")
    table.add_row(*usage_row("configured", configured))
    table.add_row(*usage_row("naive", naive))
    return table


@dataclass
class RoleBill:
    calls: int = 0
    kinds: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    prefixes: list[int] = field(default_factory=list)
    cached: int = 0
    output: int = 0

    @property
    def side(self) -> int:
        return sum(self.kinds.values())

    @property
    def read(self) -> int:
        return self.kinds["cache_read_input_tokens"]


def stage_bills(model: StrictModel) -> dict[str, RoleBill]:
    """The server's bills by stage (the answer schema a request asked for)."""
    roles: dict[str, RoleBill] = defaultdict(RoleBill)
    for bill in model.billed:
        r = roles[ROLES.get(bill.answers, bill.answers)]
        r.calls += 1
        for kind in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            r.kinds[kind] += bill.usage[kind]
        r.prefixes += bill.prefix_tokens
        r.output += bill.usage["output_tokens"]
        r.cached += bool(bill.usage["cache_read_input_tokens"] or bill.usage["cache_creation_input_tokens"])
    return roles


def ceiling(r: RoleBill, novelty: Novelty, name: str) -> float:
    return 1 - novelty.by_role[name] / r.side


def role_table(run: Run) -> Table:
    """Where the input side goes, by stage: the answer to 'why is the share what it is'; the ceilings
    are each stage's read share with every token read but the lines it sends for the first time
    (``Novelty``): under the API's keying (one cache per answer schema and effort), and for any cache."""
    roles = stage_bills(run.model)
    table = Table(
        title="Configured, by stage: input side per call (mean) and the cached prefix as the server counted it; "
        "the read share's ceiling for any layout, one cache per answer schema (as the API) / any cache"
    )
    for column in (
        "stage",
        "calls",
        "uncached input",
        "cache read",
        "cache write",
        "read share",
        "prefix at breakpoint (min-max)",
        "calls reading or writing",
        "ceiling",
    ):
        table.add_column(column, justify="left" if column == "stage" else "right")
    total = sum(r.side for r in roles.values())
    for name, r in roles.items():
        table.add_row(
            name,
            str(r.calls),
            f"{r.kinds['input_tokens'] / r.calls:,.0f}",
            f"{r.read / r.calls:,.0f}",
            f"{r.kinds['cache_creation_input_tokens'] / r.calls:,.0f}",
            f"{r.read / r.side:.1%} of {r.side / total:.0%} of all",
            f"{min(r.prefixes):,}-{max(r.prefixes):,}" if r.prefixes else "no breakpoint",
            f"{r.cached} of {r.calls}",
            f"{ceiling(r, run.per_role, name):.1%} / {ceiling(r, run.novelty, name):.1%}",
        )
    return table


def jurors_as_billed(run: Run, novelty: Novelty) -> float:
    """The run's read share with the jurors as billed and every other stage at its ceiling: what a
    layout serving stages I-II and the summaries better could reach at most."""
    roles = stage_bills(run.model)
    read = sum(r.read if name == "juror" else ceiling(r, novelty, name) * r.side for name, r in roles.items())
    return read / sum(r.side for r in roles.values())


def input_side(u: Usage) -> int:
    return u.input_tokens + u.cache_read_tokens + u.cache_write_tokens


def best_layout(u: Usage, new: int) -> Usage:
    """The same calls as cheaply as any layout could send them: every input token read from the cache
    but the ``new`` ones, sent for the first time (uncached input: a write would cost more)."""
    return Usage(input_tokens=new, cache_read_tokens=input_side(u) - new, output_tokens=u.output_tokens)


def bounds(run: Run, novelty: Novelty) -> tuple[Usage, list[float]]:
    """The run's calls at their best (``best_layout``), and each case's read share then."""
    new = novelty.new
    return (
        best_layout(run.total, sum(new.values())),
        [read_share(best_layout(v.tokens, new[v.case_id])) for v in run.verdicts],
    )


def headline(configured: Run, naive: Run) -> None:
    conf, nav = configured.total, naive.total
    per_case = [
        billable(c.tokens) / billable(v.tokens) for c, v in zip(configured.verdicts, naive.verdicts, strict=False)
    ]
    shares = [read_share(v.tokens) for v in configured.verdicts]
    same = sum(c.votes == v.votes for c, v in zip(configured.verdicts, naive.verdicts, strict=False))
    (best, best_shares), (role_best, role_shares), (flow_best, flow_shares) = (
        bounds(configured, configured.novelty),
        bounds(configured, configured.per_role),
        bounds(configured, configured.flow),
    )
    all_read = Usage(cache_read_tokens=input_side(conf), output_tokens=conf.output_tokens)
    console.print(
        f"billable tokens, configured / naive: [bold]{billable(conf) / billable(nav):.3f}x[/] overall, "
        f"median per case {statistics.median(per_case):.3f}x ({min(per_case):.3f}-{max(per_case):.3f}); "
        "goal <= 0.05x"
    )
    console.print(
        f"  of which the configured answers alone (output, thinking included): "
        f"{output_billable(conf) / billable(nav):.3f}x, the floor no request layout can go below "
        f"(output is {output_billable(conf) / billable(conf):.0%} of the configured bill)"
    )
    console.print(
        f"  the same calls with every input-side token read from the cache: "
        f"{billable(all_read) / billable(nav):.3f}x; with every one read but the lines the run sends for "
        f"the first time: [bold]{billable(best) / billable(nav):.3f}x[/] (any cache), "
        f"{billable(role_best) / billable(nav):.3f}x (one cache per answer schema and effort, as the API keeps "
        "it): the floors for any layout of these calls; keeping the jury's information flow as well "
        f"(below): [bold]{billable(flow_best) / billable(nav):.3f}x[/]"
    )
    jurors = stage_bills(configured.model)["juror"]
    answers = Usage(output_tokens=jurors.output)
    console.print(
        f"  the ballots alone ({jurors.calls / len(per_case):.1f} a case, {jurors.output / jurors.calls:.0f} "
        f"tokens each), every input-side token of theirs read from the cache: "
        f"{billable(answers.model_copy(update={'cache_read_tokens': jurors.side})) / billable(nav):.3f}x "
        f"(their answers {billable(answers) / billable(nav):.3f}x)"
    )
    console.print(
        f"cache-read share of input-side tokens per case: median [bold]{statistics.median(shares):.3f}[/] "
        f"(min {min(shares):.3f}, max {max(shares):.3f}), overall {read_share(conf):.3f}; goal >= 0.85"
    )
    for name, usage, top, novelty in (
        ("one cache per answer schema and effort, as the API keeps it", role_best, role_shares, configured.per_role),
        ("any cache", best, best_shares, configured.novelty),
    ):
        console.print(
            f"  ceiling for any layout of these calls, {name}: median per case "
            f"[bold]{statistics.median(top):.3f}[/] (min {min(top):.3f}, max {max(top):.3f}), "
            f"overall {read_share(usage):.3f}; with the jurors as billed and every other stage at its "
            f"ceiling: [bold]{jurors_as_billed(configured, novelty):.3f}[/] overall"
        )
    console.print(
        f"  ceiling keeping the jury's information flow (one cache per answer schema, and no cache serves a juror "
        f"its persona and memory in round 1 or the ballots it follows, in any layout in which the jury shares "
        f"the case prefix): median per case [bold]{statistics.median(flow_shares):.3f}[/] "
        f"(min {min(flow_shares):.3f}, max {max(flow_shares):.3f}), overall {read_share(flow_best):.3f}"
    )
    console.print(f"same votes in {same} of {len(per_case)} cases (the stand-in decides, deterministically)")


def ladder_rungs(precedents: bool) -> list:
    return [a for a in LADDER if a.key != "mixed-jury" and (precedents or a.key != "precedent")]


async def ladder(cases: list[DisputeCase], base: Settings, thinking: int, work: Path, precedents: bool) -> Table:
    table = Table(title="The ablation ladder evaluated streaming and in batches (one-hour TTL, as eval runs it)")
    for column in (
        "rung",
        "calls/case",
        "USD/case streaming",
        "USD/case batch",
        "batch / streaming",
        "waves",
        "batches",
    ):
        table.add_column(column, justify="left" if column == "rung" else "right")
    spent = {"stream": 0.0, "batch": 0.0}
    for rung in ladder_rungs(precedents):
        settings = rung.settings(base).model_copy(update={"prompt_cache_ttl": "1h"})
        stream = await streaming(cases, settings, thinking)
        batch = await in_waves(cases, settings, thinking, work / "batches" / rung.key)
        spent["stream"] += stream.usd_per_case()
        spent["batch"] += batch.usd_per_case()
        table.add_row(
            rung.name,
            f"{stream.total.calls / len(cases):.1f}",
            f"{stream.usd_per_case():.4f}",
            f"{batch.usd_per_case():.4f}",
            f"{batch.usd_per_case() / stream.usd_per_case():.3f}x",
            str(batch.waves),
            str(batch.batches),
        )
    table.add_row(
        "whole ladder",
        "",
        f"{spent['stream']:.4f}",
        f"{spent['batch']:.4f}",
        f"[bold]{spent['batch'] / spent['stream']:.3f}x[/] (goal <= 0.55x)",
        "",
        "",
    )
    return table


async def seed(settings: Settings) -> None:
    async with opened_base(settings) as (index, embedder):
        await build_precedents([EXAMPLES / "precedents"], settings, OfflineLLM(), index, embedder)


def main(
    cases: int = typer.Option(13, help="example cases to judge (at most 13)"),
    jurors: int = typer.Option(17, help="N"),
    rounds: int = typer.Option(3, help="T"),
    precedents: bool = typer.Option(True, help="the precedent base (examples/precedents) on, as by default"),
    run_ladder: bool = typer.Option(True, "--ladder/--no-ladder", help="also the ladder, streaming and batch"),
    thinking: int = typer.Option(0, help="thinking tokens the server spends before every answer"),
) -> None:
    work = Path(tempfile.mkdtemp(prefix="cj-token-economy-"))
    # no per-case budget: the naive side would reach it (this measures what nothing stops)
    base = Settings(
        llm_backend="anthropic",
        anthropic_api_key="bench",
        llm_max_retries=0,
        media_root=EXAMPLES,
        metrics_port=0,
        jurors=jurors,
        rounds=rounds,
        case_token_budget=0,
        precedent_backend="embedded" if precedents else "none",
        precedent_dir=work / "precedents",
    )
    if precedents:
        asyncio.run(seed(base))
    chosen = example_cases(cases)
    console.print(
        f"{len(chosen)} example cases, N = {jurors}, T = {rounds}, early stop at delta = {base.early_stop}, "
        f"precedents {'on' if precedents else 'off'}; {base.model} on a strict local Messages server "
        f"(answers by the offline stand-in, {thinking} thinking tokens each)"
    )
    configured = asyncio.run(streaming(chosen, base, thinking))
    naive = asyncio.run(
        streaming(
            chosen,
            base.model_copy(update={"pipeline_overrides": {"per_juror_stages": True}, "prompt_caching": False}),
            thinking,
        )
    )
    console.print(usage_table(configured, naive))
    console.print(role_table(configured))
    headline(configured, naive)
    if run_ladder:
        console.print(asyncio.run(ladder(chosen, base, thinking, work, precedents)))


if __name__ == "__main__":
    typer.run(main)
