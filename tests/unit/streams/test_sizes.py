"""Size discipline: an event over ``max_event_bytes`` is a dead letter before anything is recorded;
inline media leaves the stream for the media store (claim check); a case file over
``max_case_bytes`` is refused at admission; a stage output over the limit, or refused by the
producer, is a dead letter (``output_too_large``), never a crash; a dead letter always fits, its
original in the media store when too large to carry; a failed hand-off leaves the case unrecorded.

These tests drive the real handlers with dict tables and list topics; the real app on the embedded
broker with messages over Kafka's default 1 MiB is tests/integration/test_sizes.py.
"""

from __future__ import annotations

import base64
import io
import json
import random
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from aiokafka.errors import MessageSizeTooLargeError
from PIL import Image

from cyberjurors.config import Settings
from cyberjurors.evidence import media
from cyberjurors.evidence.media_store import LocalMediaStore, day_of, digest_of, owned
from cyberjurors.evidence.stores import open_store
from cyberjurors.observability import metrics
from cyberjurors.schemas import CaseFile, MediaRef
from cyberjurors.state.results import StageResults
from cyberjurors.streams.dead_letters import DeadLetters
from cyberjurors.streams.intake import Intake
from cyberjurors.streams.stage_hop import StageHop

from ... import factories
from ...factories import METADATA, whole
from ...factories import case_data as case
from .test_app_handlers import NOW, Topic, dead, event, text_case


def noise_png(side: int, seed: int) -> bytes:
    """A PNG that does not compress: about side*side*3 bytes."""
    rng = random.Random(seed)
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3)).save(out, "PNG")
    return out.getvalue()


def photo(item_id: str, data: bytes) -> dict:
    return {
        "id": item_id,
        "kind": "image",
        "text": "the seam",
        "media": {"media_type": "image/png", "data_base64": base64.b64encode(data).decode()},
    }


class FailOnce(Topic):
    """A topic whose first send raises, as a broker hiccup would."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error: Exception | None = error

    async def send(self, *, key: bytes, value: bytes, headers: dict | None = None) -> None:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        await super().send(key=key, value=value, headers=headers)


@pytest.fixture
def small(tmp_path) -> Settings:
    return factories.settings(
        media_store=str(tmp_path / "store"),
        intake_limits={"max_event_bytes": 40_000, "max_case_bytes": 20_000, "max_inline_bytes": 30_000},
    )


def parts(settings: Settings, ready: Topic | None = None, dlq: Topic | None = None) -> SimpleNamespace:
    in_flight = metrics.CasesInFlight()
    dlq = dlq or Topic()
    store = LocalMediaStore(Path(settings.media_store))
    letters = DeadLetters(dlq, in_flight, store, settings.intake_limits.max_event_bytes)
    table: dict = {}
    state: dict = {}
    ready = ready or Topic()
    results = StageResults(table, max_bytes=settings.intake_limits.max_event_bytes)
    intake = Intake(settings, "offline", state, results, ready, letters, in_flight)
    return SimpleNamespace(
        dlq=dlq,
        store=store,
        letters=letters,
        table=table,
        state=state,
        ready=ready,
        results=results,
        intake=intake,
        in_flight=in_flight,
    )


# --- handlers -------------------------------------------------------------------------------


async def test_an_event_over_max_event_bytes_is_a_dead_letter_with_its_original_in_the_store(small):
    p = parts(small)
    big = whole(case("big", [{"id": f"b{n}", "kind": "text", "text": "torn " * 2000} for n in range(5)]))
    assert len(big) > small.intake_limits.max_event_bytes
    await p.intake(event(big, b"big"))
    [letter] = dead(p.dlq)
    assert (letter.reason, letter.stage, letter.replayable) == ("event_too_large", "intake", False)
    assert p.ready.sent == [] and p.state == {} and p.table == {}  # nothing recorded as submitted
    # the letter fits; the original is kept whole in the media store
    assert len(p.dlq.sent[0][1]) <= small.intake_limits.max_event_bytes and letter.original_base64 == ""
    assert letter.original_bytes == len(big)
    assert await p.store.get(letter.original_ref, len(big)) == big


async def test_a_rejected_input_under_the_limit_whose_letter_would_not_fit_keeps_its_original_in_the_store(small):
    p = parts(small)
    junk = b"{" + b"x" * 35_000  # under max_event_bytes, but as base64 the letter would be over it
    await p.intake(event(junk, b"junk"))
    [letter] = dead(p.dlq)
    assert letter.reason == "invalid_json" and letter.original_ref == digest_of(owned(junk, "junk"))
    assert await p.store.get(letter.original_ref, len(junk)) == junk

    await p.intake(event(b"{", b"small"))  # a small one is carried in the letter as before
    assert base64.b64decode(dead(p.dlq)[1].original_base64) == b"{" and dead(p.dlq)[1].original_ref is None


async def test_inline_media_is_moved_to_the_store_and_read_back_from_it(small):
    p = parts(small)
    first, second = noise_png(60, 1), noise_png(60, 2)
    submitted = whole(case("media", [photo("b1", first), photo("b2", second)]))
    await p.intake(event(submitted, b"media"))
    assert dead(p.dlq) == []
    [(_key, value)] = p.ready.sent
    case_file = CaseFile.model_validate_json(value)
    refs = [i.media for i in case_file.case.items() if i.media is not None]
    ours = [digest_of(owned(first, "media")), digest_of(owned(second, "media"))]  # the case's own objects
    assert [r.stored for r in refs] == ours
    assert all(r.data_base64 is None for r in refs) and b'"data_base64":"' not in value
    assert len(value) < len(submitted) // 4  # the media left the stream
    # the same digest as the case as submitted: verdict ids do not change with the claim check
    assert (
        case_file.digest == CaseFile.model_validate({"case": json.loads(submitted)["case"], "received_at": NOW}).digest
    )
    assert await media.read_bytes(refs[0], small) == first
    stored = sorted(f.name for f in p.store.root.rglob("*") if f.is_file())
    assert stored == sorted(ours)  # two objects, nothing else left behind


async def test_a_stored_reference_must_name_an_object_in_the_store(small):
    p = parts(small)
    absent = {"id": "b1", "kind": "image", "text": "x", "media": {"media_type": "image/png", "stored": "ab" * 32}}
    await p.intake(event(whole(case("absent", [absent])), b"absent"))
    [letter] = dead(p.dlq)
    assert (letter.reason, letter.replayable) == ("invalid_case", False) and p.ready.sent == []


async def test_a_case_naming_a_stored_object_gets_its_own_copy_kept_another_retention(small):
    root = Path(small.media_store)
    days_ago = time.time() - 5 * 86400
    photo = noise_png(20, 3)
    ref = await LocalMediaStore(root, small.media_retention, lambda: days_ago).put(photo)  # no case's
    named = {"id": "b1", "kind": "image", "text": "x", "media": {"media_type": "image/png", "stored": ref}}
    p = parts(small)
    await p.intake(event(whole(case("named", [named])), b"named"))
    assert dead(p.dlq) == [] and len(p.ready.sent) == 1
    [item] = [i for i in CaseFile.model_validate_json(p.ready.sent[0][1]).case.items() if i.media is not None]
    own = digest_of(owned(photo, "named"))
    # the case's own object, in today's folder: no other case's erasure, nor the older day's sweep, takes it
    assert item.media.stored == own and (root / day_of(time.time()) / own[:2] / own).exists()
    assert (root / day_of(days_ago) / ref[:2] / ref).exists()  # the one it named is left to its retention
    assert await media.read_bytes(item.media, small) == photo


async def test_a_case_naming_its_own_stored_object_keeps_the_reference_and_refreshes_it(small):
    root = Path(small.media_store)
    days_ago = time.time() - 5 * 86400
    ref = await LocalMediaStore(root, small.media_retention, lambda: days_ago).put(noise_png(20, 4), "again")
    named = {"id": "b1", "kind": "image", "text": "x", "media": {"media_type": "image/png", "stored": ref}}
    p = parts(small)
    await p.intake(event(whole(case("again", [named])), b"again"))
    [item] = [i for i in CaseFile.model_validate_json(p.ready.sent[0][1]).case.items() if i.media is not None]
    assert item.media.stored == ref  # already the case's: no copy, the same reference
    assert (root / day_of(time.time()) / ref[:2] / ref).exists() and (root / day_of(days_ago) / ref[:2] / ref).exists()


async def test_reading_a_stored_reference_that_went_missing_or_changed_is_a_note_not_a_crash(small):
    store = LocalMediaStore(Path(small.media_store))
    ref = await store.put(b"not much of a photo")
    with pytest.raises(media.MediaUnreadable) as err:
        await media.read_bytes(MediaRef(media_type="image/png", stored="cd" * 32), small)
    assert err.value.reason == "missing_file"
    store.path(ref).write_bytes(b"tampered")
    with pytest.raises(media.MediaUnreadable) as err:
        await media.read_bytes(MediaRef(media_type="image/png", stored=ref), small)
    assert err.value.reason == "hash_mismatch"


async def test_a_case_file_over_max_case_bytes_is_refused_at_admission(small):
    p = parts(small)
    texts = [{"id": f"b{n}", "kind": "text", "text": "torn " * 1400} for n in range(4)]  # 28 kB: under the event limit
    await p.intake(event(whole(case("long", texts)), b"long"))
    [letter] = dead(p.dlq)
    assert (letter.reason, letter.replayable) == ("case_too_large", False)
    assert p.state == {} and p.ready.sent == []


async def test_a_failed_hand_off_leaves_the_case_unrecorded_so_a_resubmission_is_admitted(small):
    p = parts(small, ready=FailOnce(ConnectionError("broker went away")))
    submitted = whole(case("c-1", [{"id": "b1", "kind": "text", "text": "Torn seam."}]))
    await p.intake(event(submitted, b"c-1"))
    [letter] = dead(p.dlq)
    assert (letter.reason, letter.replayable) == ("intake_failed", True)
    assert p.state.get("c-1") is None and "c-1" not in p.in_flight.cases
    await p.intake(event(submitted, b"c-1"))  # the producer's retry, or the letter's replay
    assert len(p.ready.sent) == 1 and p.state["c-1"]["digest"]
    await p.intake(event(submitted, b"c-1"))  # now it is submitted: the same again is ignored
    assert len(p.ready.sent) == 1 and len(dead(p.dlq)) == 1


async def test_a_failed_hand_off_of_an_incremental_case_leaves_its_draft_open(small):
    p = parts(small, ready=FailOnce(ConnectionError("broker went away")))
    opened = json.dumps({"type": "case_opened", "case_id": "c-2", "metadata": METADATA}).encode()
    evidence = json.dumps(
        {
            "type": "evidence_submitted",
            "case_id": "c-2",
            "evidence": {"party": "buyer", "round": 1, "items": [{"id": "b1", "kind": "text", "text": "Torn."}]},
        }
    ).encode()
    closed = json.dumps({"type": "evidence_closed", "case_id": "c-2", "event_id": "close-1"}).encode()
    for raw in (opened, evidence, closed):
        await p.intake(event(raw, b"c-2"))
    assert [x.reason for x in dead(p.dlq)] == ["intake_failed"] and p.ready.sent == []
    await p.intake(event(closed, b"c-2"))  # the letter's replay closes it again
    [(key, value)] = p.ready.sent
    assert key == b"c-2" and CaseFile.model_validate_json(value).case.items()[0].id == "b1"


async def test_a_stage_output_over_the_limit_is_dead_lettered_before_it_is_stored(small):
    p = parts(small)
    hop = StageHop(p.results, p.letters, p.in_flight)
    case_file = CaseFile(case=text_case(), received_at=NOW)

    async def grows(cf: CaseFile) -> CaseFile:
        return cf.model_copy(update={"problems": ["x" * small.intake_limits.max_event_bytes]})

    out = Topic()
    await hop(event(case_file.model_dump_json().encode(), b"c-1"), "focus", out, grows)
    [letter] = dead(p.dlq)
    assert (letter.stage, letter.reason, letter.replayable) == ("focus", "output_too_large", False)
    assert out.sent == [] and "c-1/focus" not in p.table  # never reached the table's changelog


async def test_a_message_the_producer_refuses_as_too_large_is_dead_lettered_not_a_crash(small):
    p = parts(small)
    hop = StageHop(p.results, p.letters, p.in_flight)
    case_file = CaseFile(case=text_case(), received_at=NOW)

    async def same(cf: CaseFile) -> CaseFile:
        return cf

    await hop(event(case_file.model_dump_json().encode(), b"c-1"), "clues", FailOnce(MessageSizeTooLargeError()), same)
    [letter] = dead(p.dlq)
    assert (letter.stage, letter.reason, letter.replayable) == ("clues", "output_too_large", False)


async def test_a_letter_the_broker_refuses_is_sent_again_with_its_original_in_the_store(small):
    p = parts(small, dlq=FailOnce(MessageSizeTooLargeError()))
    await p.intake(event(b"not json", b"k"))
    [letter] = dead(p.dlq)
    assert letter.reason == "invalid_json" and letter.original_base64 == ""
    assert await p.store.get(letter.original_ref, 100) == b"not json"


def test_max_case_bytes_must_leave_room_below_max_event_bytes():
    with pytest.raises(ValueError):
        Settings(llm_backend="offline", intake_limits={"max_event_bytes": 100_000, "max_case_bytes": 100_000})


async def test_with_media_encryption_a_keyless_original_too_large_to_carry_is_never_stored_in_the_clear(
    small, tmp_path
):
    sealed = small.model_copy(
        update={"media_encryption": True, "case_key_secret": "k" * 32, "case_key_store": str(tmp_path / "keys")}
    )
    p = parts(sealed)
    p.letters.store = open_store(sealed)
    junk = b"{ Quillfeather-7731 " + b"x" * 35_000  # no Kafka key: no case to seal it under
    await p.intake(event(junk, None))
    [letter] = dead(p.dlq)
    assert letter.original_ref is None and letter.original_base64 == ""
    assert "could not be stored" in letter.detail and "names no case" in letter.detail
    assert [f for f in tmp_path.rglob("*") if f.is_file() and b"Quillfeather" in f.read_bytes()] == []
