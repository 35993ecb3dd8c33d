"""What a worker erases from its tables (dict tables here; the real worker on a broker is
tests/integration/test_erasure.py), where a case still in the pipeline stands, and RocksDB's bytes
out of the files after the deletes (a real RocksDB database)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import rocksdict

from cyberjurors.evidence.media_store import digest_of
from cyberjurors.state import tables
from cyberjurors.state.erasure import erase_case, standing
from cyberjurors.state.intake import IntakeTable
from cyberjurors.state.results import StageResults

PHOTO = digest_of(b"a photo")


def case_file(case_id: str) -> bytes:
    return json.dumps({"case": {"case_id": case_id, "rounds": [{"items": [{"media": {"stored": PHOTO}}]}]}}).encode()


def decided(case_id: str, results: StageResults, intake: IntakeTable) -> None:
    results.put(case_id, "intake", case_file(case_id))
    results.put(case_id, "verdict", b'{"winner": "buyer"}')
    results.put(case_id, "escalation", b"{}")
    intake.admitted(case_id, "digest", 0.0, 0)


def test_every_entry_of_the_case_goes_and_the_other_cases_stay():
    results, intake = StageResults({}, {}), IntakeTable({})
    confirmed = {"clothing/0": ["c-1", "c-2"], "clothing/1": ["c-1"], "food/0": ["c-3"]}
    decided("c-1", results, intake)
    decided("c-10", results, intake)  # an id that starts the same: not the case
    done = erase_case(results, intake, confirmed, "c-1", 0)
    assert done.keys == 5  # intake, verdict, escalation, the stage-times stamp, the intake entry
    assert done.refs == {PHOTO}
    assert [k for k in results.table if k.startswith("c-1/")] == []
    assert "c-1" not in results.times and intake.entry("c-1") == {}
    assert set(results.table) == {"c-10/intake", "c-10/verdict", "c-10/escalation"} and intake.entry("c-10")
    # the re-distil list of this partition loses it; another partition's is another worker's
    assert confirmed == {"clothing/0": ["c-2"], "clothing/1": ["c-1"], "food/0": ["c-3"]} and done.confirmed == 1
    assert erase_case(results, intake, confirmed, "c-1", 0).keys == 0  # twice: nothing left


def test_a_case_stands_in_the_pipeline_until_its_verdict_or_its_dead_letter():
    results, intake = StageResults({}, {}), IntakeTable({})
    assert standing(results, intake, "c-1") is None  # never seen
    intake.hold("c-1", [{"type": "evidence_submitted"}], 0.0, 0)
    assert "not yet opened" in (standing(results, intake, "c-1") or "")
    intake.table["c-1"] = {"draft": {"case_id": "c-1"}, "at": 0.0, "partition": 0}
    assert "being assembled" in (standing(results, intake, "c-1") or "")
    intake.admitted("c-1", "digest", 0.0, 0)
    results.put("c-1", "intake", case_file("c-1"))
    results.put("c-1", "focus", case_file("c-1"))
    results.put("c-1", "round-1", case_file("c-1"))
    assert standing(results, intake, "c-1") == "admitted, its last stage stored: round-1"
    results.put("c-1", "verdict", b"{}")
    assert standing(results, intake, "c-1") is None
    results.put("c-1", "appeal", case_file("c-1"))
    assert "appeal" in (standing(results, intake, "c-1") or "")
    results.put("c-1", "appeal/verdict", b"{}")
    assert standing(results, intake, "c-1") is None

    results.put("c-2", "intake", case_file("c-2"))
    intake.admitted("c-2", "digest", 0.0, 0)
    assert standing(results, intake, "c-2") is not None
    intake.note_dead_letter("c-2", {"stage": "clues", "reason": "llm_timeout"}, None)
    assert standing(results, intake, "c-2") is None  # it left as a dead letter


def test_purge_compacts_the_partition_s_rocksdb_so_the_deleted_bytes_leave_the_disk(tmp_path):
    db = rocksdict.Rdict(str(tmp_path / "table-0"))
    for n in range(200):
        db[f"other/{n}".encode()] = b"filler" * 20
    db[b"c-1/verdict"] = b"Quillfeather-7731 in a flushed file"
    db.flush()
    db[b"c-1/intake"] = b"Quillfeather-7731 in the write-ahead log"
    del db[b"c-1/verdict"], db[b"c-1/intake"]
    on_disk = [p for p in tmp_path.rglob("*") if p.is_file() and b"Quillfeather" in p.read_bytes()]
    assert on_disk  # a delete alone leaves them there
    table = SimpleNamespace(data=SimpleNamespace(_db_for_partition=lambda partition: db))  # Faust's store, its part
    assert tables.purge(table, 0)
    assert [p for p in tmp_path.rglob("*") if p.is_file() and b"Quillfeather" in p.read_bytes()] == []
    assert db[b"other/7"] == b"filler" * 20
    db.close()
    assert not tables.purge(SimpleNamespace(data={}), 0)  # the memory store: nothing on disk
