"""Per-case budget: what normal cases spend, what an outsized one spends, and what the default
``case_token_budget`` does to each, side by side.

The 13 sample cases are judged with the budget off, once with early stopping (the default) and
once without it (every case deliberates all T rounds: the most a normal case can spend), and an
outsized case is built from the first sample: 500 rounds of evidence (250 messages per party,
each a short restatement of the dispute; intake caps rounds at ``max_rounds_per_party`` = 10, so
a platform that raised it could send one). All are then judged again with the default budget.
Offline backend, through the same stage functions the workers run (``jury.stages.judge``): token
counts are its estimates (4 characters a token); USD is priced as claude-sonnet-5-5 at the default
``llm_prices`` (the offline backend itself bills nothing), so it is an estimate too.

Run: .venv/bin/python bench/case_budget.py [--heavy-rounds 500]
"""

from __future__ import annotations

import asyncio
import statistics

import typer
from rich.table import Table

from cyberjurors.config import DEFAULT_LLM_PRICES, Settings
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.stages import judge
from cyberjurors.llm.port import GuardedLLM
from cyberjurors.llm.prices import PriceTable
from cyberjurors.schemas import DisputeCase, Verdict
from harness import EXAMPLES, example_cases, make_console

console = make_console(160)
PRICES = PriceTable(DEFAULT_LLM_PRICES)
DEFAULT_BUDGET = Settings.model_fields["case_token_budget"].default


def usd(verdict: Verdict) -> float:
    return PRICES.cost("anthropic", "claude-sonnet-5-5", verdict.tokens) or 0.0


def outsized(rounds: int) -> DisputeCase:
    """The first sample case with ``rounds`` rounds of evidence, alternating buyer and seller."""
    case = example_cases(1)[0].model_dump(mode="json")
    case["case_id"], case["rounds"] = f"outsized-{rounds}", []
    for n in range(rounds):
        party = ("buyer", "seller")[n % 2]
        text = (
            f"Message {n}: the kettle arrived with a crack in its base, I insist it was broken in the box."
            if party == "buyer"
            else f"Message {n}: it left our warehouse intact and tested, the courier's record shows it signed for."
        )
        case["rounds"].append(
            {"party": party, "round": n // 2 + 1, "items": [{"id": f"{party[0]}m{n}", "kind": "text", "text": text}]}
        )
    return DisputeCase.model_validate(case)


async def judge_all(cases: list[DisputeCase], settings: Settings) -> list[Verdict]:
    llm = GuardedLLM(OfflineLLM(), concurrency=64)
    return list(await asyncio.gather(*(judge(case, llm, settings) for case in cases)))


def main(heavy_rounds: int = typer.Option(500, help="rounds of evidence in the outsized case")) -> None:
    base = Settings(llm_backend="offline", precedent_backend="none", media_root=EXAMPLES, metrics_port=0)
    samples, heavy = example_cases(), outsized(heavy_rounds)
    runs = {
        "off, early stop": base.model_copy(update={"case_token_budget": 0}),
        "off, all T rounds": base.model_copy(update={"case_token_budget": 0, "early_stop": 0}),
        f"{DEFAULT_BUDGET:,}, early stop": base,
        f"{DEFAULT_BUDGET:,}, all T rounds": base.model_copy(update={"early_stop": 0}),
    }
    console.print(
        f"{len(samples)} sample cases and one of {heavy_rounds} rounds of evidence; N = {base.jurors}, "
        f"T = {base.rounds}; offline backend (token counts are estimates), USD at claude-sonnet-5-5's "
        f"default price"
    )
    table = Table(title="Tokens per case against the per-case budget")
    for column in (
        "budget, deliberation",
        "samples: median tokens",
        "max",
        "max USD",
        "budget stops",
        "outsized: tokens",
        "USD",
        "rounds",
        "budget reached",
        "x sample median",
    ):
        table.add_column(column, justify="left" if column.startswith("budget,") else "right")
    for name, settings in runs.items():
        verdicts = asyncio.run(judge_all([*samples, heavy], settings))
        normal, big = verdicts[:-1], verdicts[-1]
        tokens = [v.tokens.total_tokens for v in normal]
        median = statistics.median(tokens)
        table.add_row(
            name,
            f"{median:,.0f}",
            f"{max(tokens):,}",
            f"{max(usd(v) for v in normal):.3f}",
            f"{sum(v.budget_reached for v in normal)} of {len(normal)}",
            f"{big.tokens.total_tokens:,}",
            f"{usd(big):.3f}",
            f"{big.rounds_used}",
            "yes" if big.budget_reached else "no",
            f"{big.tokens.total_tokens / median:.1f}x",
        )
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
