"""Evaluation reports: JSON round-trip, the ladder, and the stand-in warning."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from cyberjurors.evaluation.report import (
    STAND_IN_WARNING,
    DatasetInfo,
    EvalReport,
    render,
    render_ladder,
    to_markdown,
)
from cyberjurors.evaluation.report_files import load, write
from cyberjurors.evaluation.scores import summarize

from .test_metrics import result, worked_example


def report(name: str, backend: str = "anthropic", results=None, **over) -> EvalReport:
    return EvalReport(
        name=name,
        description=f"{name} configuration",
        backend=backend,
        models=["claude-x"],
        dataset=DatasetInfo(source="data/test.jsonl", sha256="ab" * 32, cases=6),
        settings={"jurors": 17, "rounds": 3, "delta": 0.8, "stage_ii": name != "CoT"},
        started_at=datetime(2026, 5, 1, 12, 0, tzinfo=UTC),
        finished_at=datetime(2026, 5, 1, 12, 5, tzinfo=UTC),
        wall_s=300.0,
        summary=summarize(worked_example() if results is None else results),
        **over,
    )


def text(renderable) -> str:
    console = Console(width=250, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_json_round_trip(tmp_path: Path) -> None:
    reports = [report("IV-CoT"), report("CoT", backend="offline")]
    json_path, md_path = write(reports, tmp_path / "out")
    assert (json_path.name, md_path.name) == ("report.json", "report.md")
    raw = json.loads(json_path.read_text())
    assert [r["name"] for r in raw] == ["IV-CoT", "CoT"] and raw[1]["stand_in"] is True
    assert raw[0]["summary"]["by_band"]["hard"]["accuracy"] == 0.5
    assert load(json_path) == reports
    assert md_path.read_text() == to_markdown(reports)


def test_a_later_run_never_overwrites_an_earlier_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = write([report("IV-CoT")], out)
    kept = {path: path.read_bytes() for path in first}
    second = write([report("CoT")], out)
    third = write([report("CyberJurors")], out)
    assert [p.name for p in (*second, *third)] == ["report-2.json", "report-2.md", "report-3.json", "report-3.md"]
    assert {path: path.read_bytes() for path in first} == kept
    assert [r.name for r in load(second[0])] == ["CoT"] and [r.name for r in load(third[0])] == ["CyberJurors"]
    # the newest has the highest number, even after an older one is deleted
    second[0].unlink()
    second[1].unlink()
    (out / "report-notes.md").write_text("mine")  # not a report
    assert write([report("a")], out)[0].name == "report-4.json"
    assert (out / "report-notes.md").read_text() == "mine"


def test_failed_cases_are_listed_and_old_reports_still_load(tmp_path: Path) -> None:
    failed = {f"c{i:02}": "timeout" for i in range(60)} | {"x~swapped": "intake:text_too_long"}
    md = to_markdown([report("IV-CoT", failed_cases=failed)])
    line = next(line for line in md.splitlines() if line.startswith("- cases without a verdict"))
    assert line.startswith("- cases without a verdict: `c00` (timeout), `c01` (timeout)")
    assert line.endswith("and 11 more (all in the JSON report)")
    json_path, _ = write([report("IV-CoT", failed_cases=failed)], tmp_path)
    assert load(json_path)[0].failed_cases == failed
    older = json.loads(json_path.read_text())  # a report.json from before failed_cases existed
    del older[0]["failed_cases"]
    (tmp_path / "old.json").write_text(json.dumps(older))
    assert load(tmp_path / "old.json")[0].failed_cases == {}


def test_stand_in_follows_the_backend() -> None:
    assert report("a", backend="offline").stand_in is True
    assert report("a", backend="anthropic").stand_in is False
    # a report.json edited to hide it does not hide it
    assert EvalReport.model_validate(report("a", backend="offline").model_dump() | {"stand_in": False}).stand_in


def test_a_run_on_a_real_server_is_a_stand_in_when_any_verdict_was_decided_by_one(tmp_path: Path) -> None:
    """A plumbing-only tiny model (SmolLM2 behind llama.cpp) runs on the openai backend: the report
    takes its verdicts' word for it, not the backend's name."""
    import time

    from cyberjurors.config import Settings
    from cyberjurors.evaluation.dataset import load_dataset
    from cyberjurors.evaluation.runs import Options, case_results, run_report

    from ...conftest import EXAMPLES
    from .test_metrics import verdict

    dataset = load_dataset(EXAMPLES / "cases")
    s = Settings(llm_backend="openai", openai_base_url="http://127.0.0.1:9/v1")

    def made(stand_in: list[bool]) -> EvalReport:
        verdicts = {
            c.case_id: verdict(c.case_id, 9, 8).model_copy(update={"stand_in": flag})
            for c, flag in zip(dataset.cases, stand_in, strict=False)
        }
        results = case_results(dataset, verdicts, {}, party_swap=False)
        options = Options(out=tmp_path, party_swap=False)
        return run_report("r", "d", dataset, s, results, verdicts, datetime.now(UTC), time.monotonic(), options)

    assert made([False, False, False]).stand_in is False
    one = made([False, True, False])
    assert one.stand_in is True and STAND_IN_WARNING in to_markdown([one])


def test_markdown_has_the_ladder_and_the_configuration() -> None:
    md = to_markdown([report("CoT"), report("IV-CoT"), report("CyberJurors")])
    assert STAND_IN_WARNING not in md
    ladder = md.split("## Ladder", 1)[1].split("## CoT", 1)[0]
    rows = [line for line in ladder.splitlines() if line.startswith("| ") and "Configuration" not in line]
    assert [r.split("|")[1].strip() for r in rows] == ["CoT", "IV-CoT", "CyberJurors"]
    assert "| 60.0% | 60.0% | 58.3% | 4.40 | 5.18 |" in rows[0]  # acc, wF1, mF1, MAE, RMSE
    assert "| band: easy | 1/2 | 0.0% |" in md  # c4 wrong, c6 failed
    header = next(line for line in md.splitlines() if line.startswith("| Configuration"))
    cost_column = [c.strip() for c in header.split("|")].index("USD/case")
    assert rows[0].split("|")[cost_column].strip() == "0.1500"  # ($0.25 + $0.50) over 5 verdicts
    assert md.count('"jurors": 17') == 3 and '"stage_ii": false' in md
    assert "- 2 without a verdict: 1 of the 6 cases (timeout ×1) and 1 party-swap twins (llm_timeout ×1)" in md


def test_single_report_has_no_ladder_and_offline_is_flagged() -> None:
    md = to_markdown([report("IV-CoT", backend="offline")])
    assert "## Ladder" not in md
    assert md.index(STAND_IN_WARNING) < md.index("## IV-CoT")  # at the top
    mixed = to_markdown([report("a"), report("b", backend="offline")])
    assert "Stand-in configurations: b." in mixed
    assert "\n| b (stand-in) | 5/6 |" in mixed and "\n| a | 5/6 |" in mixed


def test_rendered_tables() -> None:
    offline = text(render(report("IV-CoT", backend="offline")))
    assert STAND_IN_WARNING in offline
    assert "category: appliances" in offline and "band: medium" in offline and "60.0%" in offline
    real = text(render(report("IV-CoT")))
    assert STAND_IN_WARNING not in real
    ladder = text(render_ladder([report("CoT"), report("IV-CoT", backend="offline")]))
    assert "IV-CoT (stand-in)" in ladder and "CoT (stand-in)" not in ladder.replace("IV-CoT (stand-in)", "")
    assert STAND_IN_WARNING in ladder
    assert STAND_IN_WARNING not in text(render_ladder([report("CoT"), report("IV-CoT")]))


def test_none_renders_as_a_dash() -> None:
    failed_only = report("empty", results=[result("a", (14, 3), None, failure="timeout")])
    md = to_markdown([failed_only])
    overall = next(line for line in md.splitlines() if line.startswith("| overall"))
    assert overall.split("|")[2:5] == [" 0/1 ", " – ", " – "]
    assert "nan" not in md.lower()
    assert "–" in text(render(failed_only))


def test_the_risk_coverage_table_is_in_the_terminal_and_markdown_reports() -> None:
    # the worked example's five verdicts: 12:5, 6:11, 4:13, 9:8, 17:0 (margins 7, 5, 9, 1, 17), right on 1, 3, 5
    md = to_markdown([report("CyberJurors", backend="offline")])
    section = md.split("Risk–coverage", 1)[1]
    assert section.startswith(f" ({STAND_IN_WARNING}):")
    assert "| nothing escalated | 0.0% | 5 | 60.0% | 4.40 |" in section
    assert "| margin &lt; 3 | 20.0% | 4 | 75.0% | 3.75 |" in section  # 9:8 (wrong, error 7) escalated
    assert "| margin &lt; 7 | 40.0% | 3 | 100.0% | 3.67 |" in section  # 6:11 (wrong) and 9:8 escalated
    assert "| margin &lt; 9 | 60.0% | 2 | 100.0% | 4.50 |" in section
    assert (
        "For 95.0% accuracy on what is decided automatically, the most cases stay automatic at margin < 7 "
        "(60.0% of them)"
    ) in md
    shown = text(render(report("CyberJurors")))
    assert "Risk–coverage" in shown and "margin < 17" in shown and "other reasons only" in shown


def test_batch_and_streaming_cost_side_by_side(tmp_path: Path) -> None:
    from cyberjurors.evaluation.report import BatchRun

    streamed = report("+Jury")
    batch = report(
        "+Jury (batch)",
        mode="batch",
        batch=BatchRun(
            executor="message-batches",
            waves=15,
            batches=17,
            requests=900,
            retried=12,
            resumed=0,
            collected=0,
            cost_per_case_standard_usd=0.2,
            streaming_cost_per_case_usd=0.25,
            streaming_verdicts=6,
        ),
    )
    batch.summary.cost_per_case_usd = 0.1
    alone = report("IV-CoT (batch)", mode="batch", batch=BatchRun(executor="in-process", waves=9))
    shown = text(render_ladder([streamed, batch, alone]))
    assert "Batch and streaming cost" in shown
    costs = shown.split("Batch and streaming cost")[1]
    row = next(line for line in costs.splitlines() if line.startswith("│ +Jury (batch)"))
    assert "0.1000" in row and "0.2000" in row and "0.2500 (n=6)" in row and "0.400x" in row
    in_process = next(line for line in costs.splitlines() if line.startswith("│ IV-CoT (batch)"))
    assert "in-process" in in_process and in_process.rstrip(" │").endswith("–")  # nothing measured to compare
    assert "+Jury │" not in costs  # the streaming run has no row of its own
    markdown = to_markdown([streamed, batch])
    assert "## Batch and streaming cost" in markdown and "| 0.400x |" in markdown
    assert "12 sent again" in markdown
    json_path, _ = write([batch], tmp_path)
    assert load(json_path)[0].batch == batch.batch


def with_jury(r, votes: dict[str, str]):  # type: ignore[no-untyped-def]
    from cyberjurors.schemas import JuryComposition, JurySeat

    seats = [JurySeat(seat=k, persona=p, model="m", vote=v) for k, (p, v) in enumerate(votes.items())]
    jury = JuryComposition(qualification="off", status="unvetted", seats=seats)
    return r.model_copy(update={"verdict": r.verdict.model_copy(update={"jury": jury})}) if r.verdict else r


def test_the_jury_balance_shows_a_tilted_persona() -> None:
    # the worked example's verdicts: real winners buyer, buyer, seller, seller, buyer; ours buyer, seller,
    # seller, buyer, buyer. Tilda always votes seller, Bo as the real jury, Cy as the verdict.
    results = [
        with_jury(r, {"Tilda": "seller", "Bo": r.truth.winner, "Cy": r.verdict.winner}) if r.verdict else r
        for r in worked_example()
    ]
    rep = report("CyberJurors", backend="offline", results=results)
    tilda, bo = rep.summary.by_persona["Tilda"], rep.summary.by_persona["Bo"]
    assert (tilda.ballots, tilda.seller_share, tilda.real_seller_share) == (5, 1.0, 0.4)
    assert (round(tilda.tilt, 4), tilda.majority_agreement, tilda.truth_agreement) == (0.6, 0.4, 0.4)
    assert (bo.tilt, bo.majority_agreement, bo.truth_agreement) == (0.0, 0.6, 1.0)
    assert list(rep.summary.by_persona) == ["Tilda", "Bo", "Cy"]  # in seat order

    md = to_markdown([rep])
    section = md.split("Jury balance by persona", 1)[1]
    assert section.startswith(f" ({STAND_IN_WARNING}):")
    assert "| Tilda | 5 | 100.0% | 40.0% | +0.60 ⚠ tilted | 40.0% | 40.0% |" in section
    assert "| Bo | 5 | 40.0% | 40.0% | +0.00 | 60.0% | 100.0% |" in section
    assert "| Cy | 5 | 40.0% | 40.0% | +0.00 | 100.0% | 60.0% |" in section
    shown = text(render(rep))
    assert "Jury balance by persona" in shown and "⚠ tilted" in shown
    # verdicts that name no jury (a court, an older verdict): no balance table
    assert "Jury balance" not in to_markdown([report("CyberJurors")])
