"""What verifying the justification, or having the jury vote it (JURIS), adds to a verdict's cost.

Four configurations judge the same example cases side by side, through the stage functions the
Faust workers run (``jury.stages.judge``), in one process, on the offline stand-in:

* summary: the paper's method, the final round's summary as the justification (the default);
* +verifier: one verifier call on that summary (the stand-in passes every summary it wrote: the
  least the verifier costs);
* +verifier, T_max rejects: a verifier that rejects every draft, so the full loop runs (T_max
  verifier calls, T_max - 1 revisions by the summariser, then the removal): the most it costs;
* JURIS: two drafters, juris.voters jurors voting (on the jurors' cached case prefix), the
  editor, then the verifier.

Token counts are the offline backend's estimates (4 characters a token), billed like a provider's
prompt cache (token_economy.py's ``billable``), USD at claude-sonnet-5-5's dated list prices.

Run: .venv/bin/python bench/justification_cost.py [--cases 13]
"""

from __future__ import annotations

import asyncio
import statistics

import typer
from rich.table import Table

from cyberjurors.config import Settings
from cyberjurors.jury.model_inputs import VerifyTask
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.stages import judge
from cyberjurors.llm.port import GuardedLLM, LLMRequest, LLMResult, T
from cyberjurors.schemas import DisputeCase, Usage, Verdict, VerificationDraft
from harness import EXAMPLES, example_cases, make_console
from token_economy import billable, usd

console = make_console(160)


class Rejecting(OfflineLLM):
    """The stand-in, with a verifier that rejects every draft (naming its first sentence)."""

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        result = await super().generate(request, output_type)
        if isinstance(request.task, VerifyTask):
            first = request.task.justification.split(". ")[0]
            result.output = VerificationDraft(
                decision="reject", feedback="rejected for the benchmark", untraceable_claims=[first]
            )  # type: ignore[assignment]
        return result


async def judge_all(cases: list[DisputeCase], settings: Settings, backend: OfflineLLM) -> list[Verdict]:
    llm = GuardedLLM(backend, concurrency=64)
    return list(await asyncio.gather(*(judge(case, llm, settings) for case in cases)))


def main(cases: int = typer.Option(13, help="example cases to judge (at most 13)")) -> None:
    base = Settings(
        llm_backend="offline", precedent_backend="none", media_root=EXAMPLES, metrics_port=0, case_token_budget=0
    )
    chosen = example_cases(cases)
    runs = {
        "summary (paper)": (base, OfflineLLM()),
        "+verifier": (base.model_copy(update={"pipeline": "verifier"}), OfflineLLM()),
        f"+verifier, {base.verifier_max_turns} rejects": (
            base.model_copy(update={"pipeline": "verifier"}),
            Rejecting(),
        ),
        "JURIS (+verifier)": (base.model_copy(update={"pipeline": "juris"}), OfflineLLM()),
    }
    console.print(
        f"{len(chosen)} example cases, N = {base.jurors}, T = {base.rounds}; offline backend (a labelled "
        "stand-in: token counts are estimates)"
    )
    results = {name: asyncio.run(judge_all(chosen, s, backend)) for name, (s, backend) in runs.items()}
    reference = results["summary (paper)"]
    table = Table(title="Per case (mean); added = over the summary justification")
    for column in (
        "justification",
        "calls",
        "calls added",
        "total tokens",
        "billable",
        "USD",
        "added USD",
        "added (median ratio)",
        "verification",
    ):
        table.add_column(column, justify="left" if column in ("justification", "verification") else "right")
    for name, verdicts in results.items():
        n = len(verdicts)
        total, ref = sum((v.tokens for v in verdicts), Usage()), sum((v.tokens for v in reference), Usage())
        ratios = [billable(v.tokens) / billable(r.tokens) for v, r in zip(verdicts, reference, strict=False)]
        checked = [v.verification for v in verdicts if v.verification]
        said = (
            (
                f"{sum(c.status == 'passed' for c in checked)} passed, {sum(c.status == 'failed' for c in checked)} "
                f"failed, {statistics.mean(c.turns for c in checked):.1f} turns"
            )
            if checked
            else "-"
        )
        table.add_row(
            name,
            f"{total.calls / n:.1f}",
            f"{(total.calls - ref.calls) / n:.1f}",
            f"{total.total_tokens / n:,.0f}",
            f"{billable(total) / n:,.0f}",
            f"{usd(total) / n:.4f}",
            f"{(usd(total) - usd(ref)) / n:.4f}",
            f"{statistics.median(ratios):.3f}x",
            said,
        )
    console.print(table)
    same = all(v.votes == r.votes for name in results for v, r in zip(results[name], reference, strict=False))
    console.print(f"same votes in every configuration: {same} (the justification is made after the vote)")


if __name__ == "__main__":
    typer.run(main)
