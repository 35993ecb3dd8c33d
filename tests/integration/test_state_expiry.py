"""State that expires: a verdict deletes its case's intermediate stage results (tombstones in the
changelog), the rest goes ``state_retention_s`` after the case's last stage result (the worker's
timer, driven by a clock the test moves), a redelivered input older than the retention is
dead-lettered with its original instead of re-running the jury, changelogs are compacted,
per-process caches stay at their bound, and a worker on the RocksDB store keeps its state on disk
across a restart."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections import Counter

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from cyberjurors.config import RetentionOverrides
from cyberjurors.jury import clues
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.kafka.cluster import client_options, ensure_topics
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.schemas import CaseFile, DeadLetter, Verdict
from cyberjurors.state.results import StageResults
from cyberjurors.streams.app import create_app
from cyberjurors.streams.dead_letters import hand_on
from cyberjurors.tooling.clients import Outgoing, produce, read_events
from cyberjurors.tooling.worker_process import WorkerProcess

from ..conftest import EXAMPLES, calls, read_topic, running_app

pytestmark = pytest.mark.integration

FIRST_CASE = sorted((EXAMPLES / "cases").glob("*.json"))[0]


class Clock:
    """Unix seconds that move only when the test says so (it starts at the real time: messages carry it)."""

    def __init__(self) -> None:
        import time

        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def case_keys(table, case_id: str) -> set[str]:
    return {key.split("/", 1)[1] for key in list(table.keys()) if key.startswith(f"{case_id}/")}


async def until(condition, timeout_s: float = 30) -> bool:
    """Poll ``condition`` (the app works in this loop) until it holds; False if it never does."""
    for _ in range(int(timeout_s / 0.1)):
        if condition():
            return True
        await asyncio.sleep(0.1)
    return condition()


async def changelog(settings, app, table: str) -> list[tuple[str, bytes | None]]:
    """Every record of a table's changelog topic, tombstones (value None) included."""
    consumer = AIOKafkaConsumer(
        app.tables[table].changelog_topic.get_topic_name(),
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **client_options(settings),
    )
    await consumer.start()
    try:
        records = await consumer.getmany(timeout_ms=3000)
        for _ in range(5):  # until a fetch comes back empty
            more = await consumer.getmany(timeout_ms=1000)
            if not more:
                break
            for tp, batch in more.items():
                records.setdefault(tp, []).extend(batch)
    finally:
        await consumer.stop()
    return [(json.loads(r.key), r.value) for batch in records.values() for r in batch]  # keys are JSON


async def test_a_verdict_deletes_the_intermediate_results_and_retention_expires_the_rest(settings):
    # appeals off: a decided case keeps no clue chain for a second instance, and no hold past the retention
    settings = settings.model_copy(
        update={
            "jurors": 5,
            "rounds": 2,
            "early_stop": 1.0,
            "retention": RetentionOverrides(state_s=3600),
            "state_sweep_interval_s": 0.2,
            "appeal_window_s": 0,
        }
    )
    clock = Clock()
    [event] = read_events([FIRST_CASE])
    case_id = event.case_id
    await ensure_topics(settings)
    app = create_app(settings, llm=OfflineLLM(), clock=clock)
    results, times = app.tables["stage-results"], app.tables["stage-times"]
    async with running_app(app):
        await produce(settings, [event])
        [(_, verdict)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=120)
        # what outcomes and a redelivery read stays; focus, clues and both rounds are gone
        assert case_keys(results, case_id) == {"intake", "verdict"}
        assert results[f"{case_id}/verdict"] == verdict
        assert case_id in times

        clock.now += settings.state_retention_s - 1  # not yet: nothing more goes
        await asyncio.sleep(4 * settings.state_sweep_interval_s)
        assert case_keys(results, case_id) == {"intake", "verdict"}

        clock.now += 2  # past the retention: the worker's timer deletes the rest, leaving a marker
        assert await until(lambda: case_keys(results, case_id) == {"expired"} and case_id in times), (
            f"left: {case_keys(results, case_id)}"
        )
        clock.now += settings.state_retention_s + 1  # the marker goes one retention later
        assert await until(lambda: not case_keys(results, case_id) and case_id not in times), (
            f"left: {case_keys(results, case_id)}"
        )
        await asyncio.sleep(2 * settings.commit_interval_s)
        tombstones = {
            k.split("/", 1)[1]
            for k, v in await changelog(settings, app, "stage-results")
            if v is None and k.startswith(f"{case_id}/")
        }
    rounds = Verdict.model_validate_json(verdict).rounds_used
    assert tombstones == {
        "intake",
        "focus",
        "clues",
        "verdict",
        "expired",
        *(f"round-{n}" for n in range(1, rounds + 1)),
    }


async def test_a_redelivered_input_past_the_retention_is_dead_lettered_with_its_original(settings):
    settings = settings.model_copy(
        update={
            "jurors": 3,
            "rounds": 1,
            "retention": RetentionOverrides(state_s=3600),
            "state_sweep_interval_s": 0.2,
            "appeal_window_s": 0,
        }
    )
    clock = Clock()
    offline = OfflineLLM()
    llm = ScriptedLLM(lambda request, output_type: _answer(offline, request, output_type))
    [event] = read_events([FIRST_CASE])
    case_id = event.case_id
    await ensure_topics(settings)
    app = create_app(settings, llm=llm, clock=clock)
    async with running_app(app):
        await produce(settings, [event])
        assert await read_topic(settings, "disputes.verdicts", until=1, timeout_s=120)
        [(_, ready)] = await read_topic(settings, "disputes.intake", until=1, keys={case_id}, timeout_s=30)
        before = Counter(c.role for c in llm.calls)

        # within the retention the decided case's verdict is re-sent, no model called
        await produce(settings, [Outgoing(case_id, ready, "redelivery", topic=settings.topic("disputes.intake"))])
        assert len(await read_topic(settings, "disputes.verdicts", until=2, timeout_s=60)) == 2

        clock.now += settings.state_retention_s + 1  # the case's state expires; the ready message is old
        assert await until(lambda: case_keys(app.tables["stage-results"], case_id) == {"expired"})  # a marker only
        # the same message read again (an offset reset): it carries the time it was first sent
        await send_at(settings, "disputes.intake", case_id, ready, clock.now - settings.state_retention_s - 60)
        [(_, raw)] = await read_topic(settings, "disputes.dlq", until=1, timeout_s=60)
    letter = DeadLetter.model_validate_json(raw)
    assert (letter.reason, letter.stage, letter.key, letter.replayable) == ("state_expired", "focus", case_id, True)
    assert base64.b64decode(letter.original_base64) == ready
    assert Counter(c.role for c in llm.calls) == before, "the jury ran again"


async def send_at(settings, topic: str, key: str, value: bytes, at: float) -> None:
    """Produce one message stamped ``at`` (unix seconds), as the broker would hand back an old one."""
    producer = AIOKafkaProducer(**client_options(settings))
    await producer.start()
    try:
        await producer.send_and_wait(settings.topic(topic), value, key=key.encode(), timestamp_ms=int(at * 1000))
    finally:
        await producer.stop()


async def _answer(offline, request, output_type):
    return (await offline.generate(request, output_type)).output


async def test_changelog_topics_are_declared_compacted_on_the_broker(settings):
    await ensure_topics(settings)
    app = create_app(settings, llm=OfflineLLM())
    names = [
        app.tables[t].changelog_topic.get_topic_name()
        for t in ("stage-results", "stage-times", "intake", "confirmed-outcomes")
    ]
    assert all(app.tables[t].changelog_topic.compacting for t in app.tables)
    async with running_app(app):
        await asyncio.sleep(1)
        admin = AIOKafkaAdminClient(**client_options(settings))
        await admin.start()
        try:
            described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, n) for n in names])
        finally:
            await admin.close()
    policies = {}
    for response in described:
        for _, _, _, name, entries in response.resources:
            policies[name] = {e[0]: e[1] for e in entries}.get("cleanup.policy")
    assert policies == {name: "compact" for name in names}


async def test_the_passive_evidence_cache_stays_at_its_bound():
    from cyberjurors.config import Settings

    settings = Settings(llm_backend="offline", media_root=EXAMPLES)
    base = CaseFile.model_validate({"case": json.loads(FIRST_CASE.read_text()), "received_at": "2026-11-01T00:00:00Z"})
    clues._passive.clear()
    for n in range(clues.PASSIVE_CASES_KEPT + 5):
        case = base.case.model_copy(update={"case_id": f"cache-{n}"})
        await clues.passive_evidence(CaseFile(case=case, received_at=base.received_at), settings)
        assert len(clues._passive) == min(n + 1, clues.PASSIVE_CASES_KEPT)


async def test_stage_results_expire_only_on_the_given_partitions_and_keep_fresh_cases():
    clock = Clock()
    table, times = {}, {}
    results = StageResults(table, times, retention_s=100, clock=clock)

    class Out:
        async def send(self, *, key, value, headers=None):
            pass

    for case_id, partition in (("old-0", 0), ("old-1", 1)):
        for stage in ("intake", "focus", "clues", "round-1", "round-2", "verdict"):
            await hand_on(results, case_id, stage, b"{}", Out())
        times[case_id]["partition"] = partition
    assert results.finish("old-0") == 4 and case_keys(table, "old-0") == {"intake", "verdict"}
    clock.now += 101
    await hand_on(results, "fresh", "intake", b"{}", Out())
    assert await results.expire(partitions={0}) == 1
    assert case_keys(table, "old-0") == {"expired"} and times["old-0"]["partition"] == 0  # a decided case's marker
    assert case_keys(table, "old-1") == {"intake", "focus", "clues", "round-1", "round-2", "verdict"}
    assert await results.expire() == 1 and set(table) == {"fresh/intake", "old-0/expired", "old-1/expired"}
    assert set(times) == {"fresh", "old-0", "old-1"}


@contextlib.asynccontextmanager
async def rocksdb_worker(settings, log):
    """A RocksDB worker on the embedded broker, started as an operator would: it sends one record per
    batch by itself (streams/worker.py; tests/integration/test_rebalance.py has why)."""
    await ensure_topics(settings)
    worker = WorkerProcess(settings, log).start()
    try:
        yield worker
    finally:
        await asyncio.to_thread(worker.stop)


async def test_a_worker_on_the_rocksdb_store_judges_and_keeps_its_state_on_disk_across_a_restart(settings, tmp_path):
    import rocksdict

    settings = settings.model_copy(update={"table_store": "rocksdb", "jurors": 3, "rounds": 1})
    [event] = read_events([FIRST_CASE])
    case_id = event.case_id
    async with rocksdb_worker(settings, tmp_path / "worker-1.log"):
        await produce(settings, [event])
        [(_, verdict)] = await read_topic(settings, "disputes.verdicts", until=1, timeout_s=180)
        await asyncio.sleep(4 * settings.commit_interval_s)
    stored = {}
    for path in sorted(settings.datadir.rglob("stage-results-*.db")):
        db = rocksdict.Rdict(str(path), access_type=rocksdict.AccessType.read_only())
        try:
            stored |= {bytes(k).decode(errors="replace"): v for k, v in db.items()}
        finally:
            db.close()
    assert json.loads(stored[f'"{case_id}/verdict"']) == json.loads(verdict), list(stored)
    assert not any(k.startswith(f'"{case_id}/round') for k in stored)
    model_calls = len(calls(settings.llm_call_log))

    [(_, ready)] = await read_topic(settings, "disputes.intake", until=1, keys={case_id}, timeout_s=30)
    async with rocksdb_worker(settings, tmp_path / "worker-2.log"):
        await produce(settings, [Outgoing(case_id, ready, "redelivery", topic=settings.topic("disputes.intake"))])
        verdicts = await read_topic(settings, "disputes.verdicts", until=2, timeout_s=180)
    assert [v for _, v in verdicts] == [verdict, verdict]  # re-sent from the restored store
    assert len(calls(settings.llm_call_log)) == model_calls


def test_the_offline_backends_prompt_cache_keeps_the_last_prefixes_only():
    from cyberjurors.jury import offline
    from cyberjurors.llm.port import LLMRequest, TextPart
    from cyberjurors.schemas import Focus

    llm = offline.OfflineLLM()
    answer = Focus(focus="f", buyer_claims=[], seller_claims=[])

    def usage(prefix: str):
        request = LLMRequest(role="juror", model="m", system="s", shared=[TextPart(prefix)], prompt=[TextPart("p")])
        return llm._usage(request, answer)

    for n in range(offline.CACHED_PREFIXES_KEPT + 10):
        usage(f"case {n}")
    assert len(llm._cached_prefixes) == offline.CACHED_PREFIXES_KEPT
    assert usage(f"case {offline.CACHED_PREFIXES_KEPT + 9}").cache_read_tokens > 0  # a recent one: still cached
    assert usage("case 0").cache_read_tokens == 0  # the oldest went first


async def test_cases_left_without_a_stage_times_entry_are_adopted_and_expire():
    from cyberjurors.state import expiry

    clock = Clock()
    table = {"lost/ready": b"{}", "lost/verdict": b"{}", "kept/ready": b"{}", "other/ready": b"{}"}
    times = {"kept": expiry.stamp(clock.now - 50, 0)}
    results = StageResults(table, times, retention_s=100, clock=clock)
    partitions = 4
    active = {expiry.key_partition("lost", partitions)}
    assert expiry.key_partition("other", partitions) not in active  # another worker's: left to it
    assert results.adopt(partitions, active) == 1
    assert times["lost"] == expiry.stamp(clock.now, expiry.key_partition("lost", partitions))
    assert times["kept"]["at"] == clock.now - 50  # its own stamp stays
    clock.now += 101
    assert await results.expire() == 2
    assert set(table) == {"other/ready", "lost/expired"}  # lost was decided: its marker stays a retention


async def test_a_round_left_without_the_rounds_before_it_expires_with_its_case():
    """A recovery that skipped part of a verdict's batch of tombstones (the embedded broker's high
    watermark) leaves round-2 with round-1 gone: it must still be found, or it never expires."""
    clock = Clock()
    table = {"gap/ready": b"{}", "gap/verdict": b"{}", "gap/round-2": b"{}", "gap/round-3": b"{}"}
    results = StageResults(table, {}, retention_s=100, clock=clock, max_rounds=3)
    assert results.keys("gap") == ["gap/ready", "gap/verdict", "gap/round-2", "gap/round-3"]
    assert results.adopt(partitions=4) == 1
    clock.now += 101
    assert await results.expire() == 1 and set(table) == {"gap/expired"}  # no round left behind
    clock.now += 101
    assert await results.expire() == 1 and table == {}
    # an appeal's keys name the case before their first slash, not "gap/appeal"
    table |= {"gap/appeal/round-1": b"{}", "gap/appeal/verdict": b"{}"}
    assert results.adopt(partitions=4) == 1 and set(results.times) == {"gap"}
    # past T only what follows on without a gap is the case's (T lowered since it was judged)
    table |= {
        "old/round-1": b"{}",
        "old/round-2": b"{}",
        "old/round-3": b"{}",
        "old/round-4": b"{}",
        "old/round-6": b"{}",
    }
    assert StageResults(table, {}, max_rounds=2).keys("old") == [f"old/round-{n}" for n in (1, 2, 3, 4)]


def test_a_rocksdb_table_partition_keeps_to_rocksdb_partition_mb(tmp_path):
    """Faust's defaults per database (three 64 MB memtables and a 2 GB block cache, one database per
    table and partition) would let a RocksDB worker hold gigabytes before anything is flushed."""
    from cyberjurors.config import Settings

    settings = Settings(
        llm_backend="offline", precedent_backend="none", table_store="rocksdb", rocksdb_partition_mb=8, datadir=tmp_path
    )
    app = create_app(settings)
    for name in ("stage-results", "stage-times", "intake", "confirmed-outcomes"):
        options = app.tables[name].data.rocksdb_options  # the store Faust opens each partition's database with
        assert (options.write_buffer_size, options.max_write_buffer_number, options.block_cache_size) == (
            2 * 2**20,
            2,
            4 * 2**20,
        ), name
        assert options.write_buffer_size * options.max_write_buffer_number + options.block_cache_size == 8 * 2**20


async def test_state_written_outside_an_event_goes_to_its_partition_on_the_rocksdb_store(settings):
    """The sweep runs in a timer, with no event: Faust's RocksDB store takes a write's partition from
    the current event (and asserts there is one), so the expired marker and an adopted case's stamp
    failed there and every sweep stopped at the first decided case: nothing expired on RocksDB."""
    from cyberjurors.state import expiry

    settings = settings.model_copy(update={"table_store": "rocksdb", "state_sweep_interval_s": 3600})
    clock = Clock()
    await ensure_topics(settings)
    app = create_app(settings, llm=OfflineLLM(), clock=clock)
    results = StageResults(app.tables["stage-results"], app.tables["stage-times"], retention_s=100, clock=clock)
    partition = expiry.key_partition("old", settings.partitions)
    async with running_app(app):
        assert await until(lambda: app.tables.recovery.completed.is_set(), timeout_s=120)
        expiry.put(results.table, "old/verdict", b"{}", partition)
        expiry.put(results.times, "old", expiry.stamp(clock.now - 101, partition), partition)
        assert case_keys(results.table, "old") == {"verdict"}
        assert results.table.data._key_index[results.table.data._encode_key("old/verdict")] == partition
        assert await results.expire() == 1
        assert case_keys(results.table, "old") == {"expired"}  # the marker, in partition's database
        assert results.times["old"]["at"] == clock.now


async def test_a_case_stored_under_an_earlier_releases_intake_key_is_read_and_expires_with_the_case():
    clock = Clock()
    table, times = {}, {}
    results = StageResults(table, times, retention_s=100, clock=clock)

    class Out:
        async def send(self, *, key, value, headers=None):
            pass

    await hand_on(results, "old", "ready", b'{"case": 1}', Out())  # what the release before the renaming wrote
    await hand_on(results, "old", "verdict", b"{}", Out())
    assert results.stored("old", "intake") == b'{"case": 1}' and results.stored("new", "intake") is None
    clock.now += 101
    assert await results.expire() == 1 and set(table) == {"old/expired"}
