"""The letters stage's handler alone, without Kafka: dict tables, list-backed topics and fake events.
A verdict's letters are stored and sent, a redelivered verdict re-sends them with no model call, a
draft stored before a failure is not written again, and every failure is a dead letter at stage
letters with its reason. The letters themselves: tests/unit/jury/test_letters.py."""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest

from cyberjurors.errors import FINAL_LLM_KINDS, LLM_KINDS
from cyberjurors.evidence.key_service import AwsKms
from cyberjurors.evidence.media_store import LocalMediaStore
from cyberjurors.evidence.sealing import MAGIC, KeyRing
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.own_words import PlaceholderMap, Written
from cyberjurors.jury.stages import judge
from cyberjurors.llm.port import LLMError, LLMRequest, LLMResult, T
from cyberjurors.observability import metrics
from cyberjurors.schemas import CaseFile, DeadLetter, PartyLetter, now
from cyberjurors.state.erasure import erase_case
from cyberjurors.state.intake import IntakeTable
from cyberjurors.state.results import StageResults
from cyberjurors.streams.dead_letters import DeadLetters
from cyberjurors.streams.letters import SHREDDED_NOTE, PartyLetters
from cyberjurors.tooling.broker import free_port

from ... import factories
from ...conftest import EXAMPLES
from .test_app_handlers import Topic, event

settings = functools.partial(factories.settings, media_root=EXAMPLES)
CASE = "appl-004-kettle-leak-es-en"
CLOCK = 1_800_000_000.0


class Counted:
    """The offline stand-in, counting calls by role; ``fail`` makes calls of that role raise."""

    backend = "offline"
    model_label = "offline"

    def __init__(self, fail: str | None = None, kind: str = "overloaded"):
        self.inner = OfflineLLM()
        self.roles: list[str] = []
        self.fail, self.kind = fail, kind

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        self.roles.append(request.role)
        if request.role == self.fail:
            raise LLMError(self.kind, "the provider is overloaded")
        return await self.inner.generate(request, output_type)


class Broken(Counted):
    """A backend with a bug: what it raises is no LLMError."""

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        raise RuntimeError("a bug")


@pytest.fixture
async def parts():
    case = factories.example_case(CASE)
    verdict = await judge(case, OfflineLLM(), settings())
    table: dict[str, bytes] = {}
    results = StageResults(table, retention_s=7 * 86400, clock=lambda: CLOCK)
    results.put(case.case_id, "intake", CaseFile(case=case, received_at=now()).model_dump_json().encode())
    dlq, out = Topic(), Topic()
    return SimpleNamespace(
        case=case,
        verdict=verdict,
        table=table,
        results=results,
        dlq=dlq,
        out=out,
        dead=DeadLetters(dlq, metrics.CasesInFlight()),
        delivered=event(verdict.model_dump_json().encode(), case.case_id.encode()),
    )


def stage(parts: SimpleNamespace, llm: Counted, **over: object) -> PartyLetters:
    return PartyLetters(settings(**over), llm, parts.results, parts.out, parts.dead)


def dead(parts: SimpleNamespace) -> list[DeadLetter]:
    return [DeadLetter.model_validate_json(v) for _, v in parts.dlq.sent]


def sent(parts: SimpleNamespace) -> list[PartyLetter]:
    return [PartyLetter.model_validate_json(v) for _, v in parts.out.sent]


async def test_a_verdict_gets_two_letters_stored_then_sent_keyed_by_case(parts):
    llm = Counted()
    await stage(parts, llm)(parts.delivered)
    letters = sent(parts)
    assert [(x.party, x.locale) for x in letters] == [("buyer", "es"), ("seller", "en")]
    assert {k for k, _ in parts.out.sent} == {CASE.encode()}
    assert parts.table[f"{CASE}/letters/buyer"] is parts.out.sent[0][1]
    assert f"{CASE}/letters/buyer/draft" not in parts.table  # the letter stands for its draft
    assert llm.roles == ["letter", "letter"] and dead(parts) == []


async def test_a_redelivered_verdict_resends_the_stored_letters_and_calls_no_model(parts):
    llm = Counted()
    letters = stage(parts, llm)
    await letters(parts.delivered)
    await letters(parts.delivered)
    assert llm.roles == ["letter", "letter"]
    assert parts.out.sent[2:] == parts.out.sent[:2]  # the same bytes, the same letter ids


async def test_a_draft_stored_before_a_failure_is_checked_on_the_replay_not_written_again(parts):
    failing = Counted(fail="verify")
    await stage(parts, failing, pipeline="verifier")(parts.delivered)
    [letter] = dead(parts)
    assert (letter.stage, letter.reason, letter.replayable) == ("letters", "llm_overloaded", True)
    assert failing.roles == ["letter", "verify"] and parts.out.sent == []
    assert f"{CASE}/letters/buyer/draft" in parts.table

    working = Counted()
    await stage(parts, working, pipeline="verifier")(parts.delivered)  # the letter replayed
    assert working.roles == ["verify", "letter", "verify"]  # the buyer's draft is not written again
    assert [x.party for x in sent(parts)] == ["buyer", "seller"]
    assert all(x.check.checked_by == "verifier" for x in sent(parts))


@pytest.mark.parametrize("kind", LLM_KINDS)
async def test_a_model_failure_is_a_dead_letter_of_its_kind_final_when_the_same_input_meets_it_again(parts, kind):
    await stage(parts, Counted(fail="letter", kind=kind))(parts.delivered)
    [letter] = dead(parts)
    assert (letter.stage, letter.reason, letter.replayable) == ("letters", f"llm_{kind}", kind not in FINAL_LLM_KINDS)


async def test_a_letter_over_the_size_limit_and_a_bug_are_dead_letters(parts):
    parts.results.max_bytes = 200  # every letter is larger
    await stage(parts, Counted())(parts.delivered)
    parts.results.max_bytes = None
    await stage(parts, Broken())(parts.delivered)
    assert [(x.stage, x.reason, x.replayable) for x in dead(parts)] == [
        ("letters", "output_too_large", False),
        ("letters", "stage_failed", True),
    ]


# the reasons of stage letters the tests above produce: tests/integration/test_dead_letters.py counts them
# as driven (an integration worker runs with letters off)
LETTER_REASONS = {
    "invalid_verdict",
    "case_expired",
    "output_too_large",
    "stage_failed",
    "case_key_unavailable",  # test_a_key_store_that_fails_is_a_replayable_dead_letter_and_nothing_is_sent
    *(f"llm_{k}" for k in LLM_KINDS),
}


async def test_what_is_no_verdict_and_a_verdict_whose_case_expired_are_dead_letters(parts):
    llm = Counted()
    letters = stage(parts, llm)
    await letters(event(b'{"not": "a verdict"}', CASE.encode()))
    del parts.table[f"{CASE}/intake"]
    await letters(parts.delivered)
    assert [(x.stage, x.reason, x.replayable) for x in dead(parts)] == [
        ("letters", "invalid_verdict", False),
        ("letters", "case_expired", False),
    ]
    assert llm.roles == [] and parts.out.sent == []


async def test_with_letters_off_a_verdict_passes_by(parts):
    llm = Counted()
    await stage(parts, llm, letters=False)(parts.delivered)
    assert llm.roles == [] and parts.out.sent == [] and dead(parts) == []


async def test_storing_a_letter_keeps_the_case_for_the_appeal_window(parts):
    """A first-instance verdict is stored with a hold so its case outlives the appeal window; the letters
    stored after it must not bring the case's expiry forward."""
    await stage(parts, Counted())(parts.delivered)
    assert parts.results.times[CASE]["at"] == CLOCK + 30 * 86400 - 7 * 86400


async def test_an_appeals_verdict_gets_letters_of_its_own_from_the_appeals_case_file(parts):
    second = parts.verdict.model_copy(
        update={"instance": 2, "verdict_id": "v-2", "appeal_of": parts.verdict.verdict_id}
    )
    parts.results.put(CASE, "appeal", parts.table[f"{CASE}/intake"])
    await stage(parts, Counted())(event(second.model_dump_json().encode(), CASE.encode()))
    assert [(x.instance, x.final, x.verdict_id) for x in sent(parts)] == [(2, True, "v-2")] * 2
    assert f"{CASE}/appeal/letters/seller" in parts.table and f"{CASE}/letters/seller" not in parts.table
    assert {f"{CASE}/appeal/letters/buyer", f"{CASE}/appeal/letters/seller"} <= set(parts.results.keys(CASE))


# --- each party's own words back (issue 39 item 5) ------------------------------------------------------

ADDRESS = "221B Baker Street, London NW1 6XE"
PHONE = "+44 7911 123456"


async def own_words_parts(sealing: KeyRing | None = None) -> SimpleNamespace:
    case = factories.case(
        "c-own",
        buyer=f"The kettle leaked; it was delivered to {ADDRESS} and the puddle is in my photo.",
        seller=f"Call me on {PHONE}, the kettle left our warehouse intact.",
    )
    verdict = await judge(case, OfflineLLM(), settings())
    table: dict[str, bytes] = {}
    results = StageResults(table, retention_s=7 * 86400, clock=lambda: CLOCK)
    results.put(case.case_id, "intake", CaseFile(case=case, received_at=now()).model_dump_json().encode())
    dlq, out = Topic(), Topic()
    dead = DeadLetters(dlq, metrics.CasesInFlight())
    handler = PartyLetters(settings(), Counted(), results, out, dead, sealing)
    delivered = event(verdict.model_dump_json().encode(), case.case_id.encode())
    return SimpleNamespace(table=table, results=results, out=out, dlq=dlq, handler=handler, delivered=delivered)


def ring(tmp_path) -> KeyRing:
    return KeyRing(LocalMediaStore(tmp_path / "keys", 30 * 86400, lambda: CLOCK), "s" * 32)


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "media_encryption"])
async def test_each_party_s_letter_carries_their_own_values_and_the_other_s_stay_masked(tmp_path, sealed):
    keys = ring(tmp_path) if sealed else None
    p = await own_words_parts(keys)
    await p.handler(p.delivered)
    buyer, seller = sent(p)
    assert ADDRESS in buyer.body and PHONE not in buyer.body and "[PHONE_1]" in buyer.body
    assert PHONE in seller.body and ADDRESS not in seller.body and "[ADDRESS_1]" in seller.body
    assert "[ADDRESS_1]" not in buyer.model_dump_json() and "[PHONE_1]" not in seller.model_dump_json()
    # the table keeps the letters as the models wrote them, masked, and the map beside them
    for party in ("buyer", "seller"):
        kept = p.table[f"c-own/letters/{party}"]
        assert ADDRESS.encode() not in kept and PHONE.encode() not in kept
    stored = p.table["c-own/letters/placeholders"]
    assert "c-own/letters/placeholders" in p.results.keys("c-own")  # it expires and is erased with the case
    if sealed:
        assert stored.startswith(MAGIC) and ADDRESS.encode() not in stored and PHONE.encode() not in stored
        assert ADDRESS.encode() in await keys.open(stored, "the map")
    else:
        assert PlaceholderMap.model_validate_json(stored).own("buyer")["[ADDRESS_1]"] == ADDRESS
    await p.handler(p.delivered)  # redelivered: the stored letters, given back again alike
    assert p.out.sent[2:] == p.out.sent[:2] and dead(p) == []


async def test_a_stored_map_is_what_the_letters_are_given_back_from(tmp_path):
    """The map stored before the drafts is the one read after them (masking that changed since cannot
    mismatch a draft's placeholders): a map stored saying otherwise is the one used."""
    p = await own_words_parts()
    other = PlaceholderMap(
        values={"[ADDRESS_1]": Written(kind="address", written={"buyer": ["the house by the mill"]})}
    )
    p.table["c-own/letters/placeholders"] = other.model_dump_json().encode()
    await p.handler(p.delivered)
    buyer, seller = sent(p)
    assert "the house by the mill" in buyer.body and ADDRESS not in buyer.body
    assert PHONE not in seller.body  # the stored map has no phone of the seller's to give back


async def test_a_map_whose_case_key_is_gone_leaves_the_letters_masked_and_says_so(tmp_path):
    keys = ring(tmp_path)
    p = await own_words_parts(keys)
    await p.handler(p.delivered)
    assert await keys.destroy("c-own") >= 1
    await p.handler(p.delivered)  # re-sent: the map cannot be opened
    buyer, seller = sent(p)[2:]
    assert ADDRESS not in buyer.body and "[ADDRESS_1]" in buyer.body and SHREDDED_NOTE in buyer.notes
    assert PHONE not in seller.body and SHREDDED_NOTE in seller.notes


async def test_a_key_service_that_fails_is_a_replayable_dead_letter_and_nothing_is_sent(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    closed = f"http://127.0.0.1:{free_port()}"  # a KMS that cannot be reached: nothing listens there
    unreachable = AwsKms("alias/cj", "eu-west-1", endpoint_url=closed, timeout_s=0.5)
    p = await own_words_parts(
        KeyRing(LocalMediaStore(tmp_path / "keys", 86400, lambda: CLOCK), "s" * 32, wrap=unreachable)
    )
    await p.handler(p.delivered)
    [letter] = dead(p)
    assert (letter.stage, letter.reason, letter.replayable) == ("letters", "case_key_unavailable", True)
    assert p.out.sent == [] and "c-own/letters/placeholders" not in p.table


async def test_erasing_the_case_deletes_its_placeholder_map_with_its_letters():
    p = await own_words_parts()
    await p.handler(p.delivered)
    assert "c-own/letters/placeholders" in p.table
    done = erase_case(p.results, IntakeTable({}), None, "c-own", None)
    assert done.keys >= 4 and not [k for k in p.table if k.startswith("c-own/")]
    assert not any(ADDRESS.encode() in v or PHONE.encode() in v for v in p.table.values())
