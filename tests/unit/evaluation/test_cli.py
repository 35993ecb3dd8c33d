"""`cyberjurors eval` as its user meets it: where the cases' media are looked for, an unusable --out,
failures counted with their party-swap twins, and the prices every USD figure was computed with."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cyberjurors.cli import app as cli
from cyberjurors.config import Settings
from cyberjurors.config.catalog import CHECKED, MODELS, TokenPrices
from cyberjurors.evaluation.pricing import UNPRICED, model_prices
from cyberjurors.evaluation.report import render, to_markdown
from cyberjurors.evaluation.scores import summarize

from ...conftest import EXAMPLES
from .test_metrics import result
from .test_report import report, text

KETTLE = "appl-001-kettle-crack"  # a photo at media/kettle-crack.jpg, relative to examples/


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "CYBERJURORS_SETTINGS_FILE",
        "CYBERJURORS_MEDIA_ROOT",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CYBERJURORS_LLM_BACKEND", "offline")
    monkeypatch.setenv("CYBERJURORS_PRECEDENT_BACKEND", "none")


def one_case(folder: Path) -> Path:
    """The kettle case in a folder of its own, as examples/cases holds it: its media path is
    relative to examples/, not to the dataset's folder."""
    folder.mkdir(parents=True)
    (folder / f"{KETTLE}.json").write_text((EXAMPLES / "cases" / f"{KETTLE}.json").read_text())
    return folder


def judged(out: Path) -> list[dict]:
    return [json.loads(line)["verdict"] for line in (out / "results" / "baseline.batch.jsonl").read_text().splitlines()]


def unread(verdict: dict) -> bool:
    return any("missing_file" in p for p in verdict["problems"])


def run(data: Path, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(
        cli, ["eval", str(data), "--batch", "--ablation", "baseline", "--no-party-swap", "--out", str(out), *extra]
    )


def test_eval_warns_once_of_media_it_cannot_find_and_media_root_finds_them(
    offline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = one_case(tmp_path / "cases")
    blind = run(data, tmp_path / "blind")
    said = " ".join(blind.output.split())
    assert blind.exit_code == 0, blind.output
    assert (
        f"1 of 1 cases refer to media not found under {data}, e.g. media/kettle-crack.jpg: they are judged "
        "without it; set --media-root"
    ) in said
    assert said.count("refer to media not found") == 1
    assert all(unread(v) for v in judged(tmp_path / "blind"))  # still judged, the missing file noted

    found = run(data, tmp_path / "found", "--media-root", str(EXAMPLES))
    assert found.exit_code == 0, found.output
    assert "media not found" not in found.output and not any(unread(v) for v in judged(tmp_path / "found"))

    # a media root set in the environment is not overridden by the dataset's folder
    monkeypatch.setenv("CYBERJURORS_MEDIA_ROOT", str(EXAMPLES))
    env = run(data, tmp_path / "env")
    assert env.exit_code == 0, env.output
    assert "media not found" not in env.output and not any(unread(v) for v in judged(tmp_path / "env"))

    missing = run(data, tmp_path / "x", "--media-root", str(tmp_path / "nowhere"))
    assert missing.exit_code == 2 and "is not a folder" in missing.output


def test_an_unusable_out_is_refused_up_front_with_exit_2(offline, tmp_path: Path) -> None:
    data = one_case(tmp_path / "cases")
    (tmp_path / "afile").write_text("")
    (tmp_path / "o" / "batches").parent.mkdir()
    (tmp_path / "o" / "batches").write_text("")
    for out, why in [
        (tmp_path / "afile" / "out", "Not a directory"),
        (tmp_path / "o", "batches is not a folder"),
        (Path("/proc/cyberjurors-out"), "cannot be used"),
    ]:
        refused = run(data, out)
        assert refused.exit_code == 2, refused.output
        assert refused.output.startswith("unusable --out:") and why in refused.output
        assert "Traceback" not in refused.output and len(refused.output.strip().splitlines()) == 1


def test_failures_are_counted_with_their_twins_labelled(tmp_path: Path) -> None:
    """Every case and its twin expired: the report's count is that of failed_cases, twins said apart."""
    results = [
        result(f"c{i}", (9, 8), None, failure="focus:llm_timeout", swapped_failure="focus:llm_timeout")
        for i in range(3)
    ]
    failed = {f"c{i}{suffix}": "focus:llm_timeout" for i in range(3) for suffix in ("", ":swap")}
    r = report("+Jury (batch)", results=results, failed_cases=failed)
    said = "6 without a verdict: 3 of the 3 cases (focus:llm_timeout ×3) and 3 party-swap twins (focus:llm_timeout ×3)"
    assert f"- {said}" in to_markdown([r])
    assert said in " ".join(text(render(r)).split())
    assert sum(r.summary.failed.values()) + sum(r.summary.swap_failed.values()) == len(r.failed_cases)


def test_the_report_names_the_prices_of_every_model_it_used() -> None:
    listed = MODELS["claude-sonnet-5-5"]
    settings = Settings(llm_backend="anthropic", anthropic_api_key="sk-ant-test", metrics_port=0)
    sonnet, unknown = model_prices(
        settings, ["claude-sonnet-5-5-20260928", "claude-unknown-9"], "anthropic", batch=True
    )
    assert (sonnet.input, sonnet.output, sonnet.cache_read, sonnet.cache_write, sonnet.cache_write_1h) == (
        listed.prices.input,
        listed.prices.output,
        listed.prices.cache_read,
        listed.prices.cache_write,
        listed.prices.write_1h,
    )
    assert sonnet.batch_share == 0.5 and sonnet.checked == CHECKED == date(2026, 11, 25)
    assert sonnet.sources == list(listed.sources) and sonnet.source == "catalog"
    assert unknown.input is None and unknown.source == "unpriced"
    assert (
        unknown.note == UNPRICED == "no price in llm_prices or genai-prices: its calls are left out of every USD figure"
    )
    (streamed,) = model_prices(settings, ["claude-sonnet-5-5"], "anthropic", batch=False)
    assert streamed.batch_share is None
    # prices set in llm_prices are what the costs used: shown, with no list date to vouch for them
    own = settings.model_copy(update={"llm_prices": {"claude-sonnet-5-5": TokenPrices(input=1, output=2)}})
    (mine,) = model_prices(own, ["claude-sonnet-5-5"], "anthropic", batch=False)
    assert (mine.input, mine.output, mine.checked, mine.sources, mine.source) == (1, 2, None, [], "llm_prices")

    r = report("+Jury (batch)", results=[result("c1", (9, 8), (9, 8))], prices=[sonnet, unknown])
    markdown = to_markdown([r])
    line = next(line for line in markdown.splitlines() if line.startswith("- USD at these prices"))
    assert "`claude-sonnet-5-5-20260928`: input 2, output 10, cache write 2.5 (5 min) / 4 (1 h), cache read 0.2" in line
    assert "x0.5 at the batch price; from catalog; checked 2026-11-25" in line and listed.sources[0] in line
    assert f"`claude-unknown-9`: {UNPRICED}" in line
    assert summarize([result("c1", (9, 8), (9, 8))]) == r.summary
