"""An erased case's id leaves the LLM call log in every form the log writes it (issue 37, item 5), and
the audit text wherever it stands as a whole id, punctuation around it or not, while ids that only
look like it (c-10 beside c-1) stay: the forms written through the real writers, then ids and their
surroundings generated (Hypothesis)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cyberjurors.config import Settings
from cyberjurors.console.erasure import without
from cyberjurors.erasure.journal import Entry
from cyberjurors.erasure.run import CallLogStep, Run, call_log_forms
from cyberjurors.evaluation.erasure import names_of
from cyberjurors.evaluation.swap import twin_id
from cyberjurors.evidence.scrub import token_pattern
from cyberjurors.jury.qualify import mock_ballot
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import GuardedLLM, stage_request
from cyberjurors.precedents.models import PrecedentCase
from cyberjurors.schemas import BallotDraft, Votes
from cyberjurors.schemas.personas import load_personas

ERASED = "erased:ref0"
# a case id (schemas.case.CaseId) that starts and ends with a letter or digit, as platforms' ids do
CASE_IDS = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._:-]{0,14}[A-Za-z0-9])?", fullmatch=True)
# what stands beside an id in text without making it another id
BEFORE = st.sampled_from(["", " ", "case ", "(", "/cases/", '"', "'", "[", "decided ", "\n", ", "])
AFTER = st.sampled_from(["", " ", ".", ":", ":\n", ")", "/2", '"', ",", ". Next", ": decided", "-", "...", "?"])
# what, beside an id, makes it another id
EXTENDED = st.sampled_from(["{}0", "x{}", "{}-b", "{}.2", "{}:x", "shop:{}", "{}_9", "0.{}", "A{}"])


def ballot(request, output_type):  # type: ignore[no-untyped-def]
    return BallotDraft(conflicts=[], buyer_conflicts=[], seller_conflicts=[], vote="buyer", justification="j")


def run_on(log: Path, case_id: str) -> Run:
    settings = Settings(llm_backend="offline", llm_call_log=log)
    return Run(settings, case_id, Entry(ref="ref0", case_id=case_id), journal=None, wait_s=1)  # type: ignore[arg-type]


def lines_of(log: Path) -> list[str | None]:
    return [json.loads(line)["case_id"] for line in log.read_text().splitlines()]


async def test_the_call_log_loses_every_line_its_writers_wrote_about_the_case_and_no_other(tmp_path):
    log = tmp_path / "llm-calls.jsonl"
    settings = Settings(llm_backend="offline")
    llm = GuardedLLM(ScriptedLLM(ballot), call_log=log)
    for case_id in ("c-1", "c-10"):
        # a stage's call, an evaluation's party-swapped twin's, a qualification ballot on it as a mock case
        for named in (case_id, twin_id(case_id)):
            request = stage_request("juror", settings, system="s", prompt=["p"], task=None, case_id=named)
            await llm.generate(request, BallotDraft)
        mock = PrecedentCase(case_id=case_id, category="appliances", summary="A kettle", winner="buyer",
                             votes=Votes(buyer=12, seller=5))  # fmt: skip
        await mock_ballot(load_personas(1)[0], 0, mock, llm, settings)
    written = lines_of(log)
    assert set(written) == {"c-1", "c-1:swap", "qualify:c-1", "c-10", "c-10:swap", "qualify:c-10"}
    step = await CallLogStep().erase(run_on(log, "c-1"))
    assert step.erased == 3
    assert lines_of(log) == ["c-10", "c-10:swap", "qualify:c-10"]
    assert not token_pattern(*call_log_forms("c-1")).search(log.read_text())


@settings(max_examples=60, deadline=None)
@given(case_id=CASE_IDS, other=EXTENDED)
def test_the_call_log_erasure_takes_each_form_of_the_id_and_leaves_ids_that_only_contain_it(case_id, other):
    neighbour = other.format(case_id)
    assume(not call_log_forms(case_id) & call_log_forms(neighbour))
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "llm-calls.jsonl"
        named = sorted(call_log_forms(case_id)) + sorted(call_log_forms(neighbour)) + [None]
        log.write_text("".join(json.dumps({"case_id": n, "role": "juror"}) + "\n" for n in named))
        step = asyncio.run(CallLogStep().erase(run_on(log, case_id)))
        assert step.erased == len(call_log_forms(case_id))
        assert lines_of(log) == [*sorted(call_log_forms(neighbour)), None]


@settings(max_examples=200, deadline=None)
@given(case_id=CASE_IDS, before=BEFORE, after=AFTER, again=AFTER)
def test_audit_text_loses_the_id_wherever_it_stands_as_a_whole_id(case_id, before, after, again):
    assume(case_id not in before + after + again)
    text = f"{before}{case_id}{after} and {case_id}{again}"
    assert without(text, [case_id], ERASED) == f"{before}{ERASED}{after} and {ERASED}{again}"


@settings(max_examples=200, deadline=None)
@given(case_id=CASE_IDS, other=EXTENDED, before=BEFORE, after=AFTER)
def test_audit_text_keeps_an_id_that_only_contains_the_erased_one(case_id, other, before, after):
    neighbour = other.format(case_id)
    assume(case_id not in before + after)  # the surroundings do not name it themselves ("/2" beside 2)
    text = f"{before}{neighbour}{after}"
    assert without(text, [case_id], ERASED) == text
    assert without(f"{text} {case_id}.", [case_id], ERASED) == f"{text} {ERASED}."


def test_the_forms_the_review_found_in_audit_text():
    assert without("decided c-1.", ["c-1"], ERASED) == f"decided {ERASED}."
    assert without("c-1: overridden", ["c-1"], ERASED) == f"{ERASED}: overridden"
    assert without("c-10 and c-1, not c-1-b", ["c-1"], ERASED) == f"c-10 and {ERASED}, not c-1-b"


@settings(max_examples=60, deadline=None)
@given(case_id=CASE_IDS, other=EXTENDED)
def test_an_evaluation_output_loses_the_lines_naming_the_case_in_any_form(case_id, other):
    neighbour = other.format(case_id)
    assume(not call_log_forms(case_id) & call_log_forms(neighbour))
    named = names_of(case_id)
    for form in call_log_forms(case_id):
        assert named.search(json.dumps({"case_id": form}).encode())
    for form in call_log_forms(neighbour):
        assert not named.search(json.dumps({"case_id": form}).encode())
