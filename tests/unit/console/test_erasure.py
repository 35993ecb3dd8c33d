"""A case erased from the console's store: its rows go, a record that a human decision was made
stays without personal data, the audit trail names the erasure instead of the case, other cases'
records that show it as a precedent have it blanked, no byte of it is left in the file, the feed
does not file it again from the topics (a record sent after the erasure is a new case and is), and
`console_retention_s` forgets old cases. The whole command on a broker: tests/integration/test_erasure.py."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cyberjurors.console.audit import Audit
from cyberjurors.console.erasure import collect, erase_case
from cyberjurors.console.store import Store
from cyberjurors.evidence.scrub import residue
from cyberjurors.jury.letters import write_letters
from cyberjurors.schemas import DeadLetter, OutcomeReported, PrecedentRef, Precedents, now

from ...factories import case as text_case
from ...schema_model import SchemaModel
from .test_console import AIRFRYER, Msg, escalated_store, offline
from .test_console import airfryer as airfryer

SUMMARY = "Quillfeather-7731 said the heater failed"


@dataclass
class Sent(Msg):
    timestamp: int = 0  # when the record was sent, ms (aiokafka's ConsumerRecord.timestamp)


def filled(tmp_path, airfryer) -> tuple[Store, str]:
    """The air fryer escalated, decided by ann with a rationale, in the audit trail, with a dead letter
    and its replay note, an outcome; and another case whose record shows it as a precedent."""
    after, verdict = airfryer
    store, escalation_id = escalated_store(tmp_path, offline(), after, verdict)
    for offset, record in enumerate(after):
        store.apply("record", Msg("disputes.rounds", 0, offset, record.model_dump_json().encode()))
    store.add_decision(escalation_id, AIRFRYER, "buyer", 9, 8, f"the buyer {SUMMARY}", "ann", None, "reviewer")
    audit = Audit(offline(), store)
    audit.record("ann", "reviewer", "decide", "done", "10.0.0.1", escalation_id, "upheld")
    audit.record("bob", "viewer", "refused", "refused", "10.0.0.2", f"/cases/{AIRFRYER}/1", "no role")
    audit.record("cy", "viewer", "refused", "refused", "10.0.0.3", f"/cases/{AIRFRYER}-2/1", "another case")
    with store.transaction() as db:
        db.execute("UPDATE audit SET published = 1")  # as the console's flush leaves them
    letter = DeadLetter(reason="invalid_json", detail="x", stage="intake", topic="disputes.events", key=AIRFRYER,
                        original_base64="e30=", failed_at=now(), replayable=False)  # fmt: skip
    store.apply("letter", Msg("disputes.dlq", 0, 0, letter.model_dump_json().encode()))
    store.note_replay("disputes.dlq/0/0", json.dumps({"case": AIRFRYER}).encode())
    store.note_replay("disputes.dlq/1/9", json.dumps({"case": AIRFRYER}).encode())  # its letter no longer here
    for offset, party_letter in enumerate(asyncio.run(write_letters(after[-1], verdict, SchemaModel(), offline()))):
        store.apply("party_letter", Msg("disputes.letters", 0, offset, party_letter.model_dump_json().encode()))
    outcome = OutcomeReported(case_id=AIRFRYER, votes={"buyer": 14, "seller": 3})
    store.apply("outcome", Msg("disputes.outcomes", 0, 0, outcome.model_dump_json().encode()))
    cited = PrecedentRef(id=AIRFRYER, kind="case", text=SUMMARY, category="appliances", score=1.0, rank=1)
    other = after[-1].model_copy(update={"case": text_case("other-1"), "precedents": Precedents(cases=[cited])})
    store.apply("record", Msg("disputes.rounds", 0, 9, other.model_dump_json().encode()))
    return store, escalation_id


def test_the_case_goes_and_a_record_that_it_was_decided_stays_without_personal_data(tmp_path, airfryer):
    store, escalation_id = filled(tmp_path, airfryer)
    found = collect(store, AIRFRYER)
    assert escalation_id in found.ids and airfryer[1].verdict_id in found.ids
    done = erase_case(store, AIRFRYER, "ref0", found.ids)
    counts = store.counts()
    assert (counts["verdicts"], counts["escalations"], counts["letters"], counts["replayed"]) == (0, 0, 0, 0)
    assert counts["party_letters"] == 0
    assert (counts["records"], counts["outcomes"], counts["decisions"]) == (1, 0, 1)
    [decision] = store.decisions("erased:ref0")
    assert (decision.case_id, decision.rationale, decision.reviewer, decision.winner) == (
        "erased:ref0", None, "ann", "buyer"
    )  # fmt: skip
    audit = {row["actor"]: row for row in store._rows("SELECT * FROM audit")}
    assert audit["ann"]["target"] == "erased:ref0" and audit["bob"]["target"] == "/cases/erased:ref0/1"
    assert audit["cy"]["target"] == f"/cases/{AIRFRYER}-2/1"  # an id that only starts the same: another case
    assert (audit["ann"]["published"], audit["bob"]["published"], audit["cy"]["published"]) == (0, 0, 1)
    [(other, _)] = [store.record("other-1", 1)]
    assert other.precedents.cases[0].text == "[erased]" and other.precedents.cases[0].id == "erased:ref0"
    assert (done.decisions, done.audit, done.cited) == (1, 2, 1) and done.notes == []
    for needle in (f"/{AIRFRYER}/", f'"{AIRFRYER}"', escalation_id, SUMMARY):
        assert not residue(store.path, [needle]), needle
        assert not residue(store.path.with_name(store.path.name + "-wal"), [needle]), needle
    again = erase_case(store, AIRFRYER, "ref0", found.ids)
    assert (again.rows, again.decisions, again.audit, again.cited) == (0, 0, 0, 0)


def test_the_feed_does_not_file_the_erased_case_again_unless_sent_after_the_erasure(tmp_path, airfryer):
    store, escalation_id = filled(tmp_path, airfryer)
    erase_case(store, AIRFRYER, "ref0", collect(store, AIRFRYER).ids)
    verdict = airfryer[1].model_dump_json().encode()
    before, after = int((time.time() - 60) * 1000), int((time.time() + 60) * 1000)
    assert store.apply("verdict", Sent("disputes.verdicts", 0, 50, verdict, timestamp=before))
    assert store.counts()["verdicts"] == 0 and store.position("disputes.verdicts", 0) == 51  # passed, not filed
    old = {"id": "a1", "actor": "ann", "target": escalation_id, "detail": f"about {AIRFRYER}", "action": "decide"}
    store.apply("audit", Msg("disputes.audit", 0, 0, json.dumps(old).encode()))  # read before its rewrite
    [row] = store._rows("SELECT target, detail FROM audit WHERE id = 'a1'")
    assert (row["target"], row["detail"]) == ("erased:ref0", "about erased:ref0")
    store.apply("verdict", Sent("disputes.verdicts", 0, 51, verdict, timestamp=after))  # the id used again, later
    assert store.counts()["verdicts"] == 1


def test_an_audit_entry_read_after_the_erasure_loses_the_id_beside_punctuation_and_keeps_lookalikes(tmp_path, airfryer):
    store, _ = filled(tmp_path, airfryer)
    erase_case(store, AIRFRYER, "ref0", collect(store, AIRFRYER).ids)
    detail = f"decided {AIRFRYER}. {AIRFRYER}: upheld; {AIRFRYER}-2 and {AIRFRYER}0 are others"
    old = {"id": "a2", "actor": "ann", "target": f"{AIRFRYER}:", "detail": detail, "action": "decide"}
    store.apply("audit", Msg("disputes.audit", 0, 1, json.dumps(old).encode()))
    [row] = store._rows("SELECT target, detail FROM audit WHERE id = 'a2'")
    assert row["target"] == "erased:ref0:"
    assert row["detail"] == f"decided erased:ref0. erased:ref0: upheld; {AIRFRYER}-2 and {AIRFRYER}0 are others"


def test_console_retention_forgets_old_cases_and_blanks_old_rationales(tmp_path, airfryer):
    store, escalation_id = filled(tmp_path, airfryer)
    decided = datetime.fromisoformat(store._rows("SELECT decided_at FROM verdicts")[0]["decided_at"])
    assert store.prune(decided - timedelta(days=1)) == 0
    assert store.prune(datetime.now(UTC) + timedelta(days=1)) >= 4  # verdict, escalation, record, outcome, letter
    counts = store.counts()
    assert (counts["verdicts"], counts["escalations"], counts["letters"], counts["decisions"]) == (0, 0, 0, 1)
    assert store.record(AIRFRYER, 1) is None
    assert store.decisions(escalation_id)[0].rationale is None and store.decisions(escalation_id)[0].reviewer == "ann"
