"""`cyberjurors erase` on the real parts: the embedded broker, a worker process, the embedded precedent
base, the console's store, the media store. A case seeded with distinctive strings runs through
(verdict, a dead letter with its original in the media store, a replay, a confirmed outcome the
precedent base learns from, the console's feed); after `erase`, no byte of any of those strings is
left in the data folder (worker data, media store, console database, precedent base, the erasure
journal and log), the compacted topics end the case's keys with tombstones, and a second erase
finds nothing left. Beside it: a case still in the pipeline is refused, then forced and finished by
a resume; an erase while the worker is down leaves its tables to a resume; an interrupted erase is
finished by a resume. (tests/unit/streams/test_erasure.py has the parts one by one; with the case
keys on, media_encryption and payload_encryption: test_erasure_keys.py.)"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from cyberjurors.config import Settings
from cyberjurors.console import erasure as console_erasure
from cyberjurors.console.feed import Feed
from cyberjurors.console.store import Store
from cyberjurors.erasure.journal import Journal, Step
from cyberjurors.erasure.run import Run, erase
from cyberjurors.evidence.media_store import digest_of, owned
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.kafka.cluster import client_options
from cyberjurors.precedents.build import build_precedents
from cyberjurors.precedents.embedded import EmbeddedIndex
from cyberjurors.precedents.embeddings import load_embedder
from cyberjurors.schemas import OutcomeReported, Verdict
from cyberjurors.tooling.clients import Outgoing, placed_letters, produce, replay

from ..conftest import EXAMPLES, cli, read_topic, worker_process
from ..factories import case_data, whole
from .test_console import follow_until
from .test_sizes import send_raw

pytestmark = pytest.mark.integration

# what the seeded case says, each where a store keeps it: party text, the product, a photo's own
# text chunk (the media store), an oversize event's text (a dead letter's original in the media store)
ADDRESS_SAYS = "12 Wisteria Lane"  # the buyer's address: masked for the jury, kept in the placeholder map
BUYER_SAYS = f"Quillfeather-7731 at {ADDRESS_SAYS} sent it back"
SELLER_SAYS = "zebra-ochre-4420 was never opened"
PRODUCT = "Marigold Velour Pouf MVP-88231"
PHOTO_SAYS = "PHOTOMARK-5521-label"
OVERSIZE_SAYS = "OVERSIZE-9017-original"
BROKEN_SAYS = "Brokenfeather-6642"  # in an event that is not JSON: a letter carrying it as base64
SEEDED = (BUYER_SAYS, SELLER_SAYS, PRODUCT, PHOTO_SAYS, OVERSIZE_SAYS, BROKEN_SAYS)
KEPT_SAYS = "Tamarind-Kestrel-3306"  # the case that is not erased: proof the search sees the stores


def data_settings(settings: Settings, tmp_path: Path, **over: object) -> Settings:
    """Every store under one folder, the byte search's."""
    data = tmp_path / "data"
    return settings.model_copy(
        update={
            "datadir": data / "faust",
            "media_store": str(data / "media"),
            "console_db": data / "console.sqlite3",
            "precedent_dir": data / "precedents",
            "erasure": {"dir": data / "erasures"},
            "llm_call_log": data / "llm-calls.jsonl",
            "jurors": 3,
            "rounds": 1,
            **over,
        }
    )


def labelled_png(text: str) -> bytes:
    info = PngInfo()
    info.add_text("Comment", text)  # a tEXt chunk: the bytes as written, uncompressed
    out = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 30, 30)).save(out, "PNG", pnginfo=info)
    return out.getvalue()


def seeded_case(case_id: str) -> dict:
    photo = {
        "id": "b2",
        "kind": "image",
        "text": "the label",
        "media": {"media_type": "image/png", "data_base64": base64.b64encode(labelled_png(PHOTO_SAYS)).decode()},
    }
    metadata = {**case_data()["metadata"], "product": PRODUCT}
    return case_data(
        case_id, [{"id": "b1", "kind": "text", "text": BUYER_SAYS}, photo], seller=SELLER_SAYS, metadata=metadata
    )


def forms(needle: str) -> list[bytes]:
    """The needle's bytes, and what stays of it in base64 whatever bytes come before it (a dead
    letter carries its original as base64)."""
    found = [needle.encode()]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + needle.encode())
        found.append(encoded[4:-4])  # the characters no neighbouring byte changes
    return found


def found_in(folder: Path, needles: tuple[str, ...]) -> dict[str, list[str]]:
    """needle -> the files under ``folder`` whose bytes hold it, plain or as base64."""
    hits: dict[str, list[str]] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for needle in needles:
            if any(form in data for form in forms(needle)):
                hits.setdefault(needle, []).append(str(path.relative_to(folder)))
    return hits


async def last_values(settings: Settings, topic: str) -> dict[bytes, bytes | None]:
    """A compacted topic (its full name) as compaction would leave it: each key's last value (None: a
    tombstone)."""
    consumer = AIOKafkaConsumer(**client_options(settings), group_id=None, enable_auto_commit=False)
    await consumer.start()
    latest: dict[bytes, bytes | None] = {}
    try:
        if topic not in await consumer.topics():  # not made yet: asking for it would auto-create it, wrongly
            return latest
        partitions = [TopicPartition(topic, p) for p in range(settings.partitions)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        while batch := await consumer.getmany(timeout_ms=1000):
            for found in batch.values():
                latest.update((r.key or b"", r.value) for r in found)
    finally:
        await consumer.stop()
    return latest


async def judged_and_learned(settings: Settings, seeded: str, kept: str) -> Verdict:
    """Both cases through the worker, a dead letter of the seeded case's (its original in the media
    store) replayed once, and the real outcome agreeing with our verdict, learned by the precedent base."""
    cases = [Outgoing(c["case_id"], whole(c), "test") for c in (seeded_case(seeded), case_data(kept, buyer=KEPT_SAYS))]
    await produce(settings, cases)
    found = await read_topic(settings, "disputes.verdicts", until=2, keys={seeded, kept}, timeout_s=180)
    verdict = {Verdict.model_validate_json(v).case_id: Verdict.model_validate_json(v) for _, v in found}[seeded]
    oversize = whole(case_data(seeded, buyer=OVERSIZE_SAYS + " " + "x" * 1_100_000))
    broken = b'{"type": "case", "case": {"case_id": "%s", "note": "%s"' % (seeded.encode(), BROKEN_SAYS.encode())
    await send_raw(settings, [(seeded, oversize), (seeded, broken)])
    await read_topic(settings, "disputes.dlq", until=2, keys={seeded}, timeout_s=60)
    letters = [p for p in await placed_letters(settings) if p.letter.reason == "invalid_json"]
    sent = await replay(settings, letters, final=True)  # a note on disputes.dlq-replayed, naming the case
    assert len(sent.sent) == 1
    await read_topic(settings, "disputes.dlq", until=3, keys={seeded}, timeout_s=60)  # it failed again
    votes = {"buyer": 3, "seller": 14} if verdict.winner == "seller" else {"buyer": 14, "seller": 3}
    outcome = OutcomeReported(case_id=seeded, votes=votes)
    await produce(settings, [Outgoing(seeded, outcome.model_dump_json().encode(), "test")], topic="disputes.outcomes")
    embedder = load_embedder(settings.embedding.model)
    for _ in range(120):  # the worker learns it: the case joins the base, cited guidelines name it
        index = await EmbeddedIndex.open(settings.precedent_dir, embedder)
        learned = await index.get([f"case:{seeded}"])
        await index.close()
        if learned:
            return verdict
        await asyncio.sleep(0.5)
    raise AssertionError("the precedent base never learned the seeded case")


async def test_an_erased_case_leaves_no_byte_behind_and_a_second_erase_finds_nothing_left(settings, tmp_path):
    settings = data_settings(settings, tmp_path, precedent_backend="embedded")
    seeded, kept = f"erase-{uuid.uuid4().hex[:6]}", f"keep-{uuid.uuid4().hex[:6]}"
    embedder = load_embedder(settings.embedding.model)
    index = await EmbeddedIndex.open(settings.precedent_dir, embedder)
    clothing = sorted((EXAMPLES / "precedents").glob("hist-clot-*.json"))  # the seeded case's category: enough
    await build_precedents(clothing, settings, OfflineLLM(), index, embedder)
    await index.close()
    data = tmp_path / "data"
    async with worker_process(settings, tmp_path / "worker.log") as worker:
        verdict = await judged_and_learned(settings, seeded, kept)
        await follow_until(Feed(settings, Store(settings.console_db)), verdicts=2, records=2, letters=3, outcomes=1)
        before = found_in(data, (*SEEDED, seeded))
        assert set(before) == {*SEEDED, seeded}, before  # every string is somewhere: the search can see it
        assert verdict.cited_precedents, "no guideline cited: its provenance would not name the case"

        first = await asyncio.to_thread(cli, settings, "erase", "--case", seeded)
        assert first.returncode == 0, first.stdout + first.stderr
        assert "erased" in first.stdout and "disputes.dlq until its retention" in first.stdout
        assert worker.alive()

        assert found_in(data, (*SEEDED, seeded)) == {}
        assert KEPT_SAYS in json.dumps(found_in(data, (KEPT_SAYS,)))  # the other case is all there
        await tombstoned(settings, seeded)

        second = await asyncio.to_thread(cli, settings, "erase", "--case", seeded)
        assert second.returncode == 0 and "nothing left" in second.stdout, second.stdout + second.stderr
        unknown = await asyncio.to_thread(cli, settings, "erase", "--case", "never-seen-case")
        assert unknown.returncode == 0 and "nothing left" in unknown.stdout, unknown.stdout
    log = [json.loads(line) for line in (settings.erasure.dir / "erasures.jsonl").read_text().splitlines()]
    assert [entry["result"] for entry in log] == ["erased", "nothing", "nothing"]
    erased = {name: step["erased"] for name, step in log[0]["steps"].items()}
    # the worker's entries: intake, verdict, the stage-times stamp, the intake digest; the case and the
    # guidelines its outcome moved; every letter of the case marked erased on disputes.dlq-replayed
    assert erased["tables"] >= 4 and erased["precedents"] >= 2 and erased["console"] >= 5, erased
    assert erased["dead letters"] == 3 and erased["call log"] > 0, erased
    assert all(s["erased"] == 0 for s in log[1]["steps"].values())
    assert found_in(data, (seeded, "never-seen-case")) == {}  # the log and the journal name references only


async def tombstoned(settings: Settings, case_id: str) -> None:
    """Every key of the case on the compacted topics ends with a tombstone (the table changelogs,
    disputes.erasures), and its replay note says erased, without the case."""
    seen = 0
    for table in ("stage-results", "stage-times", "intake"):
        latest = await last_values(settings, f"{settings.app_id}-{table}-changelog")
        ours = {k: v for k, v in latest.items() if case_id.encode() in k}
        assert ours and all(v is None for v in ours.values()), (table, ours)
        seen += len(ours)
    assert seen >= 4  # intake, verdict, the stage-times stamp, the intake entry at least
    erasures = await last_values(settings, settings.topic("disputes.erasures"))
    assert erasures[case_id.encode()] is None
    notes = await last_values(settings, settings.topic("disputes.dlq-replayed"))
    assert len(notes) == 3 and all(case_id.encode() not in (v or b"") for v in notes.values())
    assert all(json.loads(v or b"{}").get("erased") for v in notes.values()), notes  # never replayed again


async def keys_on(settings: Settings, table: str, case_id: str) -> dict[bytes, bytes | None]:
    latest = await last_values(settings, f"{settings.app_id}-{table}-changelog")
    return {k: v for k, v in latest.items() if case_id.encode() in k}


async def test_a_case_in_the_pipeline_is_refused_then_forced_and_the_forced_erasure_finished_by_a_resume(
    settings, tmp_path
):
    settings = data_settings(settings, tmp_path)
    case_id = f"open-{uuid.uuid4().hex[:6]}"
    opened = {"type": "case_opened", "case_id": case_id, "metadata": case_data()["metadata"]}
    evidence = {"type": "evidence_submitted", "case_id": case_id, "evidence": case_data(buyer=BUYER_SAYS)["rounds"][0]}
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, [Outgoing(case_id, json.dumps(e).encode(), "test") for e in (opened, evidence)])
        for _ in range(120):  # its evidence not closed: a draft, still being assembled
            if any(v is not None for v in (await keys_on(settings, "intake", case_id)).values()):
                break
            await asyncio.sleep(0.5)

        refused = await asyncio.to_thread(cli, settings, "erase", "--case", case_id)
        assert refused.returncode == 3, refused.stdout + refused.stderr
        assert "refused" in refused.stdout and "being assembled" in refused.stdout
        assert any(v is not None for v in (await keys_on(settings, "intake", case_id)).values())  # untouched
        requests = await last_values(settings, settings.topic("disputes.erasures"))
        assert requests[case_id.encode()] is None  # even a refused request leaves no case id behind
        journal = Journal(settings.erasure.dir)
        assert journal.open_entries() == []  # nothing erased, nothing held

        forced = await asyncio.to_thread(cli, settings, "erase", "--case", case_id, "--force")
        assert forced.returncode == 4 and "forced while" in forced.stdout, forced.stdout + forced.stderr
        assert [e.case_id for e in journal.open_entries()] == [case_id]  # open until a resume finds it out
        assert all(v is None for v in (await keys_on(settings, "intake", case_id)).values())

        resumed = await asyncio.to_thread(cli, settings, "erase", "--resume")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert journal.open_entries() == []
        journal.close()
    results = [
        json.loads(line)["result"] for line in (settings.erasure.dir / "erasures.jsonl").read_text().splitlines()
    ]
    assert results == ["refused", "incomplete", "nothing"]
    assert found_in(tmp_path / "data", (case_id, BUYER_SAYS)) == {}


class Interrupt:
    name = "media"

    async def erase(self, run: Run) -> Step:
        raise KeyboardInterrupt  # a kill between two steps


async def test_an_erase_without_its_worker_and_cut_short_is_finished_by_a_resume(settings, tmp_path):
    """The worker down: the stores the command reaches are erased (the console's, whose record names
    the case's photo), what is left (the worker's tables, the photo itself, the run cut short before
    the media step) is in the journal, and `--resume` with the worker back finishes it."""
    settings = data_settings(settings, tmp_path)
    case_id = f"down-{uuid.uuid4().hex[:6]}"
    photo = labelled_png(PHOTO_SAYS)
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, [Outgoing(case_id, whole(seeded_case(case_id)), "test")])
        await read_topic(settings, "disputes.verdicts", until=1, keys={case_id}, timeout_s=180)
        await follow_until(Feed(settings, Store(settings.console_db)), verdicts=1, records=1)
    stored = found_in(Path(settings.media_store), (PHOTO_SAYS,))
    assert stored, "the photo is not in the media store"

    journal = Journal(settings.erasure.dir)
    with pytest.raises(KeyboardInterrupt):
        given = (console_erasure.ConsoleStep(), Interrupt())
        await erase(settings, journal, case_id, wait_s=3, given=given)
    [entry] = journal.open_entries()
    assert entry.case_id == case_id and entry.steps["tables"].state == "left"
    assert "no worker answered" in entry.steps["tables"].note
    assert entry.steps["console"].state == "done" and "media" not in entry.steps
    assert digest_of(owned(photo, case_id)) in entry.refs  # found in the console's record, kept for the resume
    assert found_in(Path(settings.media_store), (PHOTO_SAYS,)) == stored  # not deleted yet
    assert any(v is not None for v in (await keys_on(settings, "stage-results", case_id)).values())
    journal.close()

    async with worker_process(settings, tmp_path / "worker-2.log"):
        resumed = await asyncio.to_thread(cli, settings, "erase", "--resume")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        ours = await keys_on(settings, "stage-results", case_id)
        assert ours and all(v is None for v in ours.values())
    assert found_in(tmp_path / "data", (*SEEDED, case_id)) == {}
    assert Journal(settings.erasure.dir).open_entries() == []


async def test_a_case_that_retrieved_the_erased_one_as_a_precedent_keeps_it_only_as_a_reference(settings, tmp_path):
    """Issue 37, item 6: case A is decided and learned by the precedent base; case B, judged after,
    retrieves A as a precedent and stores its summary in the worker's tables; erasing A blanks that
    summary in B's stored results too (each rewrite on the changelog partition B's entries are on)."""
    settings = data_settings(settings, tmp_path, precedent_backend="embedded")
    first, then = f"cited-{uuid.uuid4().hex[:6]}", f"citing-{uuid.uuid4().hex[:6]}"
    embedder = load_embedder(settings.embedding.model)
    index = await EmbeddedIndex.open(settings.precedent_dir, embedder)
    clothing = sorted((EXAMPLES / "precedents").glob("hist-clot-*.json"))
    await build_precedents(clothing, settings, OfflineLLM(), index, embedder)
    await index.close()
    async with worker_process(settings, tmp_path / "worker.log") as worker:
        await produce(settings, [Outgoing(first, whole(seeded_case(first)), "test")])
        [(_, value)] = await read_topic(settings, "disputes.verdicts", until=1, keys={first}, timeout_s=180)
        winner = Verdict.model_validate_json(value).winner
        votes = {"buyer": 3, "seller": 14} if winner == "seller" else {"buyer": 14, "seller": 3}
        outcome = OutcomeReported(case_id=first, votes=votes).model_dump_json().encode()
        await produce(settings, [Outgoing(first, outcome, "test")], topic="disputes.outcomes")
        for _ in range(120):  # learned: the case joins the base
            index = await EmbeddedIndex.open(settings.precedent_dir, embedder)
            learned = await index.get([f"case:{first}"])
            await index.close()
            if learned:
                break
            await asyncio.sleep(0.5)
        assert learned, "the precedent base never learned the first case"
        await produce(settings, [Outgoing(then, whole(seeded_case(then)), "test")])  # the same dispute again
        await read_topic(settings, "disputes.verdicts", until=1, keys={then}, timeout_s=180)
        named = json.dumps(first).encode()
        before = {k: v for k, v in (await keys_on(settings, "stage-results", then)).items() if v and named in v}
        assert before, "the second case did not retrieve the first as a precedent"

        erased = await asyncio.to_thread(cli, settings, "erase", "--case", first)
        assert erased.returncode == 0, erased.stdout + erased.stderr
        assert worker.alive()
        after = await keys_on(settings, "stage-results", then)
    assert set(before) <= set(after) and all(after[k] is not None for k in before)  # rewritten, not deleted
    assert not any(named in (v or b"") for v in after.values())
    assert all(b'"erased:' in (after[k] or b"") for k in before)  # named by the erasure's reference
    assert any(b'"text":"[erased]"' in (after[k] or b"") for k in before)  # and its summary blanked
    [entry] = [json.loads(line) for line in (settings.erasure.dir / "erasures.jsonl").read_text().splitlines()]
    assert entry["steps"]["citations"]["erased"] >= len(before), entry
    assert (await last_values(settings, settings.topic("disputes.erasures"))).get(first.encode()) is None
