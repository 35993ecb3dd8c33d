"""Token economy: what sharing stages I-II and caching the case prefix save per verdict.

Two configurations judge the same cases side by side, through the same stage functions the
Faust workers run (``jury.stages.judge``), in one process:

* configured: the defaults. Stages I-II run once per case and are shared by the 17 jurors; the
  case prefix (metadata, focus, clue chain, transcript) is marked cacheable, and round 1 warms
  the cache with one juror first;
* naive: every juror re-runs stages I-II itself in every round (``per_juror_stages``), and
  nothing is cached (``prompt_caching`` off).

Tokens are the offline backend's estimates (4 characters a token, 800 per image), the same
estimator on both sides, and it bills a shared prefix the way a provider's prompt cache does:
written once at 1.25x, read afterwards at 0.1x. "Billable" tokens weight each kind by its list
price relative to uncached input (default price table: input 1, cache write 1.25, cache read
0.1, output 5), so their ratio is the ratio of the bills; USD at claude-sonnet-5-5's dated list
prices (model_catalog.py). A prefix is marked cacheable only where it can reach the model's
minimum cacheable length (llm.can_cache), as on the provider. Cacheable-prefix share = the part of
all input-side tokens that sits in a cached prefix; cache read = the part read from the cache.

Run: .venv/bin/python bench/token_economy.py [--cases 13] [--jurors 17] [--rounds 3]
"""

from __future__ import annotations

import asyncio
import statistics
from collections import defaultdict

import typer
from harness import EXAMPLES, example_cases, make_console
from rich.table import Table

from cyberjurors.backends.offline import OfflineLLM
from cyberjurors.config import DEFAULT_LLM_PRICES, Settings
from cyberjurors.jury.stages import judge
from cyberjurors.llm import GuardedLLM, LLMRequest, LLMResult, T, prefix_tokens
from cyberjurors.model_catalog import facts
from cyberjurors.schemas import DisputeCase, Usage, Verdict

console = make_console(160)
PRICE = DEFAULT_LLM_PRICES["claude-sonnet-5-5"]


def billable(u: Usage) -> float:
    """Input-token equivalents at list prices: what the bill is proportional to."""
    return (u.input_tokens * PRICE.input + u.cache_write_tokens * PRICE.cache_write
            + u.cache_read_tokens * PRICE.cache_read + u.output_tokens * PRICE.output) / PRICE.input


def usd(u: Usage) -> float:
    return billable(u) * PRICE.input / 1e6


def cacheable_share(u: Usage) -> float:
    inputs = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    return (u.cache_read_tokens + u.cache_write_tokens) / inputs if inputs else 0.0


def cache_read_share(u: Usage) -> float:
    """The cache-hit ratio of the dashboards: cache read / input-side tokens."""
    inputs = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
    return u.cache_read_tokens / inputs if inputs else 0.0


class PrefixLog(OfflineLLM):
    """The offline backend, noting per role each request's estimated prefix and whether it was marked
    as a cache breakpoint."""

    def __init__(self, prompt_caching: bool):
        super().__init__(prompt_caching=prompt_caching)
        self.prefixes: dict[str, list[tuple[int, bool]]] = defaultdict(list)

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        size = prefix_tokens(request.system, request.shared) if request.shared else 0  # no shared part: no prefix
        self.prefixes[request.role].append((size, request.cache_prefix))
        return await super().generate(request, output_type)


async def judge_all(cases: list[DisputeCase], settings: Settings, backend: OfflineLLM) -> list[Verdict]:
    llm = GuardedLLM(backend, concurrency=64)
    return list(await asyncio.gather(*(judge(case, llm, settings) for case in cases)))


def prefix_table(log: PrefixLog, model: str) -> Table:
    table = Table(title=f"Cached prefixes by role, configured (estimate: system + shared parts, erring high; "
                        f"{model} caches from {facts(model).min_cacheable_tokens if facts(model) else '?'} tokens)")
    for column in ("role", "calls", "prefix tokens (min-max)", "marked cacheable"):
        table.add_column(column, justify="left" if column == "role" else "right")
    for role, seen in log.prefixes.items():
        sizes = [size for size, _ in seen if size]
        table.add_row(role, str(len(seen)), f"{min(sizes):,}-{max(sizes):,}" if sizes else "no shared prefix",
                      f"{sum(marked for _, marked in seen)} of {len(seen)}")
    return table


def main(cases: int = typer.Option(13, help="example cases to judge (at most 13)"),
         jurors: int = typer.Option(17, help="N"), rounds: int = typer.Option(3, help="T")) -> None:
    # no per-case budget: the naive side would reach it (it measures what nothing stops)
    base = Settings(llm_backend="offline", precedent_backend="none", media_root=EXAMPLES, metrics_port=0,
                    jurors=jurors, rounds=rounds, case_token_budget=0)
    configured_settings = base
    naive_settings = base.model_copy(update={"per_juror_stages": True, "prompt_caching": False})
    chosen = example_cases(cases)
    console.print(f"{len(chosen)} example cases, N = {jurors}, T = {rounds}, early stop at delta = "
                  f"{base.early_stop}; offline backend (a labelled stand-in: token counts are estimates)")
    log = PrefixLog(prompt_caching=True)
    configured = asyncio.run(judge_all(chosen, configured_settings, log))
    naive = asyncio.run(judge_all(chosen, naive_settings, OfflineLLM(prompt_caching=False)))

    table = Table(title="Tokens per case (mean)")
    for column in ("configuration", "calls", "input", "cache write", "cache read", "output", "total",
                   "billable", "USD", "cacheable prefix", "cache read"):
        table.add_column(column, justify="right" if column != "configuration" else "left")
    summary = {}
    for name, verdicts in (("configured", configured), ("naive", naive)):
        total = sum((v.tokens for v in verdicts), Usage())
        n = len(verdicts)
        summary[name] = (total, n)
        table.add_row(name, f"{total.calls / n:.1f}", f"{total.input_tokens / n:,.0f}",
                      f"{total.cache_write_tokens / n:,.0f}", f"{total.cache_read_tokens / n:,.0f}",
                      f"{total.output_tokens / n:,.0f}", f"{total.total_tokens / n:,.0f}",
                      f"{billable(total) / n:,.0f}", f"{usd(total) / n:.4f}", f"{cacheable_share(total):.1%}",
                      f"{cache_read_share(total):.1%}")
    console.print(table)
    console.print(prefix_table(log, base.model))

    per_case = [billable(c.tokens) / billable(v.tokens) for c, v in zip(configured, naive)]
    (conf, n), (nav, _) = summary["configured"], summary["naive"]
    same = sum(c.votes == v.votes for c, v in zip(configured, naive))
    console.print(f"billable tokens, configured / naive: [bold]{billable(conf) / billable(nav):.3f}x[/] overall, "
                  f"median per case {statistics.median(per_case):.3f}x (min {min(per_case):.3f}, max "
                  f"{max(per_case):.3f}); target <= 0.5x")
    console.print(f"total tokens processed: {conf.total_tokens / nav.total_tokens:.3f}x; calls: "
                  f"{conf.calls / nav.calls:.3f}x")
    console.print(f"same votes in {same} of {n} cases (the stand-in is deterministic, so sharing changes the cost, "
                  "not the judgement; a real model's per-juror stages would vary)")


if __name__ == "__main__":
    typer.run(main)
