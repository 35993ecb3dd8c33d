"""Letters on a real worker: a case's verdict on disputes.verdicts gets one letter per party on
disputes.letters, keyed by the case, in each party's language; the verdict sent to the topic again
(a redelivery, a re-sent verdict) re-sends the same letters and calls no model. The handler alone:
tests/unit/streams/test_letters.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter

import pytest

from cyberjurors.evidence.sealing import MAGIC
from cyberjurors.schemas import PartyLetter, Verdict
from cyberjurors.tooling.clients import Outgoing, produce, read_events

from ..conftest import EXAMPLES, calls, cli, read_topic, worker_process
from ..factories import case_data, whole
from .test_erasure import keys_on

pytestmark = pytest.mark.integration

CASE = "appl-004-kettle-leak-es-en"


async def test_a_verdict_gets_a_letter_to_each_party_and_a_resent_verdict_calls_no_model(settings, tmp_path):
    settings = settings.model_copy(update={"letters": True})
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, read_events([EXAMPLES / "cases" / f"{CASE}.json"]))
        [(key, verdict)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=120)
        first = await read_topic(settings, "disputes.letters", until=2, timeout_s=60)
        before = Counter(c["role"] for c in calls(settings.llm_call_log) if c["case_id"] == CASE)
        await produce(settings, [Outgoing(CASE, verdict, "redelivery", route="disputes.verdicts")])
        again = await read_topic(settings, "disputes.letters", until=4, timeout_s=60)
        await asyncio.sleep(1)
        after = Counter(c["role"] for c in calls(settings.llm_call_log) if c["case_id"] == CASE)
    assert key == CASE and {k for k, _ in again} == {CASE}
    letters = [PartyLetter.model_validate_json(v) for _, v in first]
    decided = Verdict.model_validate_json(verdict)
    assert sorted((x.party, x.locale, x.verdict_id) for x in letters) == [
        ("buyer", "es", decided.verdict_id),
        ("seller", "en", decided.verdict_id),
    ]
    assert before["letter"] == 2 and after == before, f"model calls repeated: {before} -> {after}"
    assert sorted(v for _, v in again[2:]) == sorted(v for _, v in first)  # the stored bytes re-sent


ADDRESS = "221B Baker Street, London NW1 6XE"
PHONE = "+44 7911 123456"


async def test_each_party_s_letter_gives_back_their_own_words_and_keeps_the_other_s_masked(settings, tmp_path):
    """Issue 39 item 5 on a real worker and broker: the buyer wrote their address, the seller their
    phone; the buyer's letter carries the buyer's address and not the seller's phone, the seller's the
    other way round; the letters the worker keeps are as the model wrote them, with placeholders only,
    and the map they were given back from is in its table, sealed under the case's key."""
    settings = settings.model_copy(
        update={
            "letters": True,
            "media_encryption": True,
            "case_key_secret": "k" * 32,
            "case_key_store": str(tmp_path / "keys"),
            "media_store": str(tmp_path / "media"),
        }
    )
    case_id = "own-words-1"
    case = case_data(
        case_id,
        buyer=f"The kettle leaked; it was delivered to {ADDRESS} and the puddle is in my photo.",
        seller=f"Call me on {PHONE}, the kettle left our warehouse intact.",
    )
    async with worker_process(settings, tmp_path / "worker.log"):
        await produce(settings, [Outgoing(case_id, whole(case), "test")])
        found = await read_topic(settings, "disputes.letters", until=2, keys={case_id}, timeout_s=180)
        table = await keys_on(settings, "stage-results", case_id)
    letters = {x.party: x for x in (PartyLetter.model_validate_json(v) for _, v in found)}
    assert set(letters) == {"buyer", "seller"}, found
    assert ADDRESS in letters["buyer"].body and PHONE not in letters["buyer"].model_dump_json()
    assert PHONE in letters["seller"].body and ADDRESS not in letters["seller"].model_dump_json()
    assert "[PHONE_1]" in letters["buyer"].body and "[ADDRESS_1]" in letters["seller"].body
    assert sum(c["role"] == "letter" for c in calls(settings.llm_call_log) if c["case_id"] == case_id) == 2
    stored = table[json.dumps(f"{case_id}/letters/placeholders").encode()]  # a table's keys: JSON
    assert stored is not None and stored.startswith(MAGIC)  # sealed under the case's key
    assert ADDRESS.encode() not in stored and PHONE.encode() not in stored
    for party in ("buyer", "seller"):  # the letters kept in the table: as the model wrote them, masked
        kept = table[json.dumps(f"{case_id}/letters/{party}").encode()] or b""
        assert ADDRESS.encode() not in kept and PHONE.encode() not in kept


async def test_the_demo_prints_each_party_s_letter_after_its_verdict(settings, tmp_path):
    """`cyberjurors demo` (on the test's broker): the case's verdict, then the letter to each party,
    the buyer's with the buyer's address and the seller's phone masked."""
    settings = settings.model_copy(update={"letters": True, "jurors": 3, "rounds": 1})
    case_id = "demo-own-words"
    case = case_data(
        case_id,
        buyer=f"The kettle leaked; it was delivered to {ADDRESS} and the puddle is in my photo.",
        seller=f"Call me on {PHONE}, the kettle left our warehouse intact.",
    )
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    run = await asyncio.to_thread(
        cli, settings, "demo", str(path), "--bootstrap", settings.kafka_bootstrap_servers, COLUMNS="400", timeout=300
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    said = run.stdout
    title = re.search(rf"^{case_id} \(", said, re.MULTILINE)  # the verdict's title line
    assert title is not None, said
    verdict_at = title.start()
    buyer_at, seller_at = said.index(f"letter to the buyer: {case_id}"), said.index(f"letter to the seller: {case_id}")
    assert verdict_at < buyer_at and verdict_at < seller_at
    to_buyer = said[buyer_at:seller_at] if buyer_at < seller_at else said[buyer_at:]
    to_seller = said[seller_at:buyer_at] if seller_at < buyer_at else said[seller_at:]
    assert ADDRESS in to_buyer and PHONE not in to_buyer and "[PHONE_1]" in to_buyer
    assert PHONE in to_seller and ADDRESS not in to_seller and "[ADDRESS_1]" in to_seller
    assert "1 verdicts, 0 dead letters, 0 missing" in said
