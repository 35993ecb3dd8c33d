"""`erase`'s parts without a broker: the workers' erasure handler (dict tables, a list-backed topic,
a real media store), the journal and the log (no personal data; the case id only while something is
left), how a run ends (erased, nothing, refused, incomplete) whatever its steps say, and the topics'
configs that bound how long an erased value stays in a compacted topic. On a broker, with a worker:
tests/integration/test_erasure.py."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from cyberjurors.config import Settings
from cyberjurors.erasure import run as erasure_run
from cyberjurors.erasure.journal import Journal, Step
from cyberjurors.erasure.run import ErasureStep, Refused, Run, erase, resume_all
from cyberjurors.evidence.media_store import LocalMediaStore
from cyberjurors.evidence.scrub import residue
from cyberjurors.kafka.cluster import topic_configs
from cyberjurors.observability import metrics
from cyberjurors.schemas import CaseFile, PrecedentRef, Precedents, now
from cyberjurors.state import expiry
from cyberjurors.state.erasure import refs_of
from cyberjurors.state.intake import IntakeTable
from cyberjurors.state.results import StageResults
from cyberjurors.streams.erasure import CitedRequest, EraseAnswer, EraseRequest, Erasures

from ...factories import case as text_case
from .test_app_handlers import Topic, event

PHOTO = b"\x89PNG Quillfeather-7731 on the label"


@pytest.fixture
def worker(tmp_path):
    store = LocalMediaStore(tmp_path / "media")
    results, intake, confirmed = StageResults({}, {}), {}, {}
    out = Topic()
    handler = Erasures(results, intake, confirmed, store, metrics.CasesInFlight(), out)
    return SimpleNamespace(store=store, results=results, intake=IntakeTable(intake), out=out, handler=handler)


def request(force: bool = False) -> bytes:
    return EraseRequest(request="r1", ref="ref0", force=force).model_dump_json().encode()


def answer(out: Topic) -> EraseAnswer:
    key, value = out.sent[-1]
    assert key == b"c-1" and b"c-1" not in value  # the answer names the request, not the case
    return EraseAnswer.model_validate_json(value)


async def test_the_worker_erases_a_decided_case_s_entries_and_media_and_answers(worker):
    ref = await worker.store.put(PHOTO)
    case_file = json.dumps({"case": {"case_id": "c-1", "rounds": [{"items": [{"media": {"stored": ref}}]}]}})
    worker.results.put("c-1", "intake", case_file.encode())
    worker.results.put("c-1", "verdict", b"{}")
    worker.intake.admitted("c-1", "digest", 0.0, 0)
    await worker.handler(event(request(), b"c-1"))
    got = answer(worker.out)
    assert (got.status, got.keys, got.media, got.refs, got.standing) == ("erased", 4, 1, [ref], None)
    assert worker.results.table == {} and worker.intake.entry("c-1") == {}
    assert not await worker.store.has(ref)
    await worker.handler(event(request(), b"c-1"))
    assert (answer(worker.out).status, answer(worker.out).keys) == ("nothing", 0)


async def test_a_case_in_the_pipeline_is_left_alone_unless_the_request_forces_it(worker):
    worker.results.put("c-1", "intake", b"{}")
    worker.intake.admitted("c-1", "digest", 0.0, 0)
    await worker.handler(event(request(), b"c-1"))
    got = answer(worker.out)
    assert got.status == "in_flight" and "admitted" in (got.standing or "") and got.keys == 0
    assert "c-1/intake" in worker.results.table
    await worker.handler(event(request(force=True), b"c-1"))
    got = answer(worker.out)
    assert got.status == "erased" and got.standing and worker.results.table == {}


async def test_the_worker_s_own_answers_and_tombstones_on_the_topic_are_passed_over(worker):
    worker.results.put("c-1", "verdict", b"{}")
    for value in (EraseAnswer(request="r1", status="nothing").model_dump_json().encode(), b"", b"not json"):
        await worker.handler(event(value, b"c-1"))
    assert worker.out.sent == [] and "c-1/verdict" in worker.results.table


SUMMARY = "Quillfeather-7731 said the kettle leaked"


def citing(case_id: str, *cited: str) -> bytes:
    """A stored case file of ``case_id`` that retrieved ``cited`` as its precedents."""
    refs = [
        PrecedentRef(id=c, kind="case", text=f"{SUMMARY} ({c})", category="appliances", score=1.0, rank=n)
        for n, c in enumerate(cited, 1)
    ]
    case_file = CaseFile(case=text_case(case_id), received_at=now(), precedents=Precedents(cases=refs))
    return case_file.model_dump_json().encode()


def cited_request() -> bytes:
    return CitedRequest(request="r2", ref="ref0").model_dump_json().encode()


async def test_the_case_s_summary_leaves_the_stored_results_of_cases_that_retrieved_it(worker):
    """Issue 37, item 6: on each partition, the worker holding it blanks the erased case's summary in
    the stored results of the cases there that retrieved it, and says which are still in flight."""
    results = worker.results
    results.put("c-2", "intake", citing("c-2", "c-1", "c-10"))
    consistency = {"outcome": "consistent", "compared": ["c-1", "c-10"], "disagreeing": ["c-1"], "min_similarity": 0.5}
    results.put("c-2", "verdict", json.dumps({"case_id": "c-2", "precedent_consistency": consistency}).encode())
    results.put("c-3", "intake", citing("c-3", "c-1"))  # admitted, not yet decided: still in flight
    worker.intake.admitted("c-3", "digest", 0.0, 1)
    results.put("c-4", "intake", citing("c-4", "c-1"))  # on a partition no request was sent to (yet)
    for case_id, partition in (("c-2", 0), ("c-3", 0), ("c-4", 1)):
        results.times[case_id] = expiry.stamp(0.0, partition)
    await worker.handler(event(cited_request(), b"c-1", partition=0))
    got = EraseAnswer.model_validate_json(worker.out.sent[-1][1])
    assert (got.status, got.partition, got.cited, got.cited_in_flight) == ("erased", 0, 3, 1)
    assert worker.out.partitions[-1] == 0  # answered on the partition it was asked on
    for case_id in ("c-2", "c-3"):
        stored = CaseFile.model_validate_json(results.stored(case_id, "intake"))  # still a valid case file
        shown = {p.id: p.text for p in stored.precedents.cases}
        assert shown == {"erased:ref0": "[erased]", **({"c-10": f"{SUMMARY} (c-10)"} if case_id == "c-2" else {})}
    assert b"Quillfeather" in results.stored("c-4", "intake")  # partition 1's worker does that one
    kept = json.loads(results.stored("c-2", "verdict"))["precedent_consistency"]
    assert (kept["compared"], kept["disagreeing"]) == (["erased:ref0", "c-10"], ["erased:ref0"])
    await worker.handler(event(cited_request(), b"c-1", partition=1))
    assert EraseAnswer.model_validate_json(worker.out.sent[-1][1]).cited == 1
    assert not any(b"(c-1)" in v for v in results.table.values())
    await worker.handler(event(cited_request(), b"c-1", partition=0))
    assert EraseAnswer.model_validate_json(worker.out.sent[-1][1]).status == "nothing"  # twice: nothing left


async def test_a_worker_of_an_earlier_release_passes_a_cited_request_over():
    """A CitedRequest is no EraseRequest: an older worker's parse refuses it, and erases nothing."""
    with pytest.raises(ValidationError):
        EraseRequest.model_validate_json(cited_request())


def test_refs_of_reads_stored_json_and_ignores_the_rest():
    assert refs_of(b'{"original_ref": "' + b"a" * 64 + b'"}') == {"a" * 64}
    assert refs_of(b"\xff not json") == set() and refs_of(None) == set()


# --- the journal and the log ---------------------------------------------------------------------


def test_the_journal_holds_the_case_id_only_while_something_is_left(tmp_path):
    journal = Journal(tmp_path / "erasures")
    entry, before = journal.begin("c-1", force=False)
    assert before is None and entry.ref == journal.ref("c-1") and entry.ref != Journal(tmp_path / "other").ref("c-1")
    entry.steps["tables"] = Step("left", note="no worker answered")
    journal.finish(entry, "incomplete")
    assert [e.case_id for e in journal.open_entries()] == ["c-1"]
    entry, before = journal.begin("c-1", force=False)
    assert before is not None and before.steps["tables"].state == "left" and entry.runs == 2
    entry.steps["tables"] = Step("done", 3)
    journal.finish(entry, "erased")
    assert journal.open_entries() == []
    assert journal.entry(entry.ref).case_id is None and journal.entry(entry.ref).closed_at is not None
    for path in (journal.path, journal.path.with_name("journal.sqlite3-wal"), journal.log_path):
        assert not residue(path, ["c-1"]), path
    lines = [json.loads(line) for line in journal.log_path.read_text().splitlines()]
    assert [(line["ref"], line["result"]) for line in lines] == [(entry.ref, "incomplete"), (entry.ref, "erased")]
    assert lines[1]["steps"] == {"tables": {"state": "done", "erased": 3}}


def test_a_refused_run_leaves_the_journal_as_it_found_it(tmp_path):
    journal = Journal(tmp_path / "erasures")
    entry, before = journal.begin("c-1", force=False)
    journal.refused(entry, before)
    assert journal.entry(entry.ref) is None and not residue(journal.path, ["c-1"])
    entry, before = journal.begin("c-2", force=False)
    entry.steps["media"] = Step("left", note="the store was down")
    journal.finish(entry, "incomplete")
    entry, before = journal.begin("c-2", force=False)
    journal.refused(entry, before)  # an erasure still open stays open, as it was
    [kept] = journal.open_entries()
    assert kept.case_id == "c-2" and kept.steps["media"].state == "left"


# --- how a run ends -------------------------------------------------------------------------------


@dataclass
class Scripted:
    """A step that returns (or raises) what it is given."""

    name: str
    found: Step | BaseException

    async def erase(self, run: Run) -> Step:
        if isinstance(self.found, BaseException):
            raise self.found
        return self.found


@dataclass
class Forced:
    """The tables step of a forced run while the case is in the pipeline."""

    name: str = "tables"

    async def erase(self, run: Run) -> Step:
        run.entry.standing = "admitted, its last stage stored: focus"
        return Step("done", 2)


def steps(**results: Step | BaseException) -> list[ErasureStep]:
    """Every step replaced by one that returns (or raises) what is given, else done with nothing."""
    return [Scripted(name, results.get(name.replace(" ", "_"), Step("done"))) for name in erasure_run.STEPS]


def test_every_step_keeps_the_contract_and_the_command_gives_the_ones_left_to_it():
    from cyberjurors.cli.erase import given_steps

    built_in = {name: step for name, step in erasure_run.STEPS.items() if step is not None}
    assert all(isinstance(step, ErasureStep) for step in [*built_in.values(), *given_steps()])
    assert all(step.name == name for name, step in built_in.items())  # the journal's key is the step's name
    assert sorted(step.name for step in given_steps()) == sorted(set(erasure_run.STEPS) - set(built_in))


async def test_a_step_named_for_no_store_is_refused_before_anything_is_erased(tmp_path):
    journal = Journal(tmp_path / "erasures")
    with pytest.raises(ValueError, match="no erasure step is called medias"):
        await erase(Settings(llm_backend="offline"), journal, "c-1", given=[Scripted("medias", Step("done"))])
    assert journal.open_entries() == []  # no entry opened, so none holds the case id


@pytest.mark.parametrize(
    ("given", "result"),
    [
        ({}, "nothing"),
        ({"console": Step("done", 4)}, "erased"),
        ({"media": Step("left", note="down")}, "incomplete"),
        ({"topics": Step("kept", note="until retention")}, "nothing"),
        ({"tables": Refused("admitted, its last stage stored: clues")}, "refused"),
    ],
)
async def test_a_run_ends_erased_nothing_incomplete_or_refused(tmp_path, given, result):
    journal = Journal(tmp_path / "erasures")
    report = await erase(Settings(llm_backend="offline"), journal, "c-1", given=steps(**given))
    assert report.result == result
    assert [e.case_id for e in journal.open_entries()] == (["c-1"] if result == "incomplete" else [])
    if result == "refused":  # stopped at the first step: nothing else ran
        assert report.standing == "admitted, its last stage stored: clues" and report.steps == {}


async def test_a_forced_run_stays_open_until_a_resume_finds_the_case_out_of_the_pipeline(tmp_path):
    journal = Journal(tmp_path / "erasures")
    report = await erase(Settings(llm_backend="offline"), journal, "c-1", force=True, given=[*steps(), Forced()])
    assert report.result == "incomplete" and journal.open_entries()[0].force
    [(case_id, again)] = await resume_all(Settings(llm_backend="offline"), journal, steps())
    assert (case_id, again.result) == ("c-1", "nothing") and journal.open_entries() == []


async def test_a_run_cut_short_leaves_its_entry_open_for_the_resume(tmp_path):
    journal = Journal(tmp_path / "erasures")
    with pytest.raises(KeyboardInterrupt):
        await erase(Settings(llm_backend="offline"), journal, "c-1", given=steps(precedents=KeyboardInterrupt()))
    [entry] = journal.open_entries()
    assert entry.case_id == "c-1" and set(entry.steps) == {"tables", "citations", "keys", "dead letters", "console"}


# --- the topics -----------------------------------------------------------------------------------


def test_compacted_topics_bound_how_long_an_erased_value_stays_and_the_others_their_records():
    settings = Settings(llm_backend="offline", retention={"topics_s": 86400, "compaction_lag_s": 3600})
    for name in ("disputes.erasures", "disputes.dlq-replayed", "disputes.audit"):
        configs = topic_configs(settings, name)
        assert configs["cleanup.policy"] == "compact" and configs["max.compaction.lag.ms"] == "3600000"
        assert configs["segment.ms"] == "3600000" and configs["delete.retention.ms"] == "86400000"
    assert topic_configs(settings, "disputes.verdicts") == {"retention.ms": "86400000"}
    # unset, retention_period (7 days, Kafka's own default) bounds them: state is kept as long
    assert topic_configs(Settings(llm_backend="offline"), "disputes.events") == {"retention.ms": "604800000"}
    assert topic_configs(settings, "disputes.dlq") == {"retention.ms": str(7 * 86400 * 1000)}
    replayed = topic_configs(
        settings.model_copy(update={"retention": settings.retention.model_copy(update={"replayed_s": 60.0})}),
        "disputes.dlq-replayed",
    )
    assert replayed["cleanup.policy"] == "compact,delete" and replayed["retention.ms"] == "60000"


def test_the_command_refuses_what_is_no_case_id_and_wants_a_case_or_resume():
    run = [sys.executable, "-m", "cyberjurors", "erase"]
    bad = subprocess.run([*run, "--case", "c 1; rm"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "is not a case id" in bad.stderr
    none = subprocess.run(run, capture_output=True, text=True, timeout=60)
    assert none.returncode == 2 and "--resume" in none.stderr
