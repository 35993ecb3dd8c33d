"""The console on a real broker: a restart that resumes at the stored offsets, a reviewer's decision
published to disputes.outcomes once (a different one only as an override), and ``cyberjurors
console --embedded`` judging, serving and stopping with its broker and worker."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from cyberjurors.console.app import create_app
from cyberjurors.console.feed import Feed
from cyberjurors.console.store import Store
from cyberjurors.schemas import OutcomeReported
from cyberjurors.tooling.clients import Outgoing, produce, reader_seal

from ..conftest import EXAMPLES, read_topic
from ..factories import example_case, sealing
from ..unit.console.test_console import AIRFRYER, decide, escalated_store, judged, offline, signed_in
from ..unit.console.test_console import airfryer as airfryer

KETTLE = "appl-001-kettle-crack"


@pytest.mark.integration
async def test_a_restarted_console_resumes_at_its_stored_offsets(settings, tmp_path, airfryer):
    _after, verdict = airfryer
    kettle = (await judged(example_case(KETTLE), offline()))[2]

    def send(*vs):
        return produce(
            settings,
            [
                Outgoing(v.case_id, v.model_dump_json().encode(), "test", topic=settings.topic("disputes.verdicts"))
                for v in vs
            ],
        )

    await send(verdict)
    path = tmp_path / "console.sqlite3"
    first = await follow_until(Feed(settings, Store(path)), verdicts=1)
    assert first.status.read == 1

    await send(kettle, verdict)  # a new verdict, and the first one redelivered
    second = await follow_until(Feed(settings, Store(path)), verdicts=2)
    assert second.status.read == 2  # only what came after the stop: nothing read twice
    assert second.store.counts()["verdicts"] == 2
    assert {v.case_id for v in second.store.verdicts_of(KETTLE) + second.store.verdicts_of(AIRFRYER)} == {
        KETTLE,
        AIRFRYER,
    }


async def follow_until(feed: Feed, timeout_s: float = 60, **counts: int) -> Feed:
    """Run the feed until the store holds ``counts`` and it has caught up; then stop it."""
    task = asyncio.create_task(feed.run())
    try:
        async with asyncio.timeout(timeout_s):
            while not (feed.status.lag == 0 and all(feed.store.counts()[k] >= n for k, n in counts.items())):
                await asyncio.sleep(0.1)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    return feed


@pytest.mark.integration
async def test_with_payload_encryption_the_feed_files_sealed_verdicts_opened_and_passes_an_erased_case_s(
    settings, tmp_path, airfryer
):
    settings = sealing(settings, tmp_path)
    _after, verdict = airfryer
    kettle = (await judged(example_case(KETTLE), offline()))[2]
    verdicts = settings.topic("disputes.verdicts")
    sent = [Outgoing(v.case_id, v.model_dump_json().encode(), "test", topic=verdicts) for v in (verdict, kettle)]
    await produce(settings, sent, seal=True)  # as the workers seal theirs
    seal = reader_seal(settings)
    assert seal is not None
    await seal.keys.destroy(kettle.case_id)  # erased after its verdict was sent

    feed = await follow_until(Feed(settings, Store(tmp_path / "console.sqlite3")), verdicts=1)
    assert [v.verdict_id for v in feed.store.verdicts_of(verdict.case_id)] == [verdict.verdict_id]
    assert feed.store.verdicts_of(kettle.case_id) == [] and feed.store.counts()["verdicts"] == 1
    assert feed.status.lag == 0  # the erased case's record was passed, not waited on
    assert feed.store.counts()["skipped"] == 0  # and not taken for a malformed record


@pytest.mark.integration
async def test_a_decision_is_published_once_and_a_different_one_only_as_an_override(settings, tmp_path, airfryer):
    from ..unit.console.test_auth import HASHED, KEY

    settings = settings.model_copy(
        update={
            "console_users": {"ann": HASHED},
            "console_user_roles": {"ann": ["reviewer"]},
            "outcome_signing_key": KEY,
        }
    )
    store, escalation_id = escalated_store(tmp_path, settings, *airfryer)

    def run() -> list[tuple[int, str]]:
        with TestClient(create_app(settings, store, follow=False, public_pages=True)) as client:
            token = signed_in(client)
            said = [
                decide(client, escalation_id, token, buyer="2", seller="3", rationale="the seal was intact"),
                decide(client, escalation_id, token, buyer="2", seller="3"),  # the same decision again
                decide(client, escalation_id, token, winner="buyer"),  # a different one
                decide(client, escalation_id, token, buyer="4", seller="4"),  # a tie decides nothing
                decide(client, escalation_id, token, winner="buyer", override="on"),
            ]
            return [(r.status_code, r.text) for r in said]

    said = await asyncio.to_thread(run)
    assert [s for s, _ in said] == [200, 200, 409, 400, 200]
    assert "already recorded" in said[1][1] and "tick override" in said[2][1] and "do not make" in said[3][1]
    sent = await read_topic(settings, "disputes.outcomes", until=3, timeout_s=10)
    outcomes = [OutcomeReported.model_validate_json(v) for _, v in sent]
    assert [(o.votes.buyer, o.votes.seller) for o in outcomes] == [(2, 3), (1, 0)]  # two published, no more
    assert {(o.source, o.escalation_id, o.case_id) for o in outcomes} == {("human_panel", escalation_id, AIRFRYER)}
    assert len({o.event_id for o in outcomes}) == 2
    history = store.decisions(escalation_id)
    assert [(d.winner, d.reviewer, d.role, d.rationale, d.override_of) for d in history] == [
        ("seller", "ann", "reviewer", "the seal was intact", None),
        ("buyer", "ann", "reviewer", None, history[0].seq),
    ]
    assert all(d.published_at for d in history)


@pytest.mark.integration
def test_embedded_it_judges_the_cases_it_is_given_serves_them_and_stops_with_its_broker_and_worker(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    import httpx

    from cyberjurors.tooling.broker import free_port

    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("CYBERJURORS_")
        and k not in ("KAFKA_BOOTSTRAP_SERVERS", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL")
    }
    env |= {
        "CYBERJURORS_PRECEDENT_BACKEND": "none",
        "CYBERJURORS_DATADIR": str(tmp_path / "faust"),
        "CYBERJURORS_CONSOLE_DB": str(tmp_path / "console.sqlite3"),
        "CYBERJURORS_MEDIA_ROOT": str(EXAMPLES),
        "CYBERJURORS_METRICS_PORT": "0",
        "CYBERJURORS_PROBE_PORT": "0",
        "CYBERJURORS_LLM_BACKEND": "offline",
    }
    log = (tmp_path / "console.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cyberjurors",
            "console",
            "--embedded",
            "--port",
            str(port),
            str(EXAMPLES / "cases" / f"{KETTLE}.json"),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline, page = time.monotonic() + 180, None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/cases", timeout=2)  # open: the embedded default
                if KETTLE in page.text:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        assert page is not None and KETTLE in page.text, (tmp_path / "console.log").read_text()[-3000:]
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) == 2  # the broker and the worker
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 143
        assert all(not Path(f"/proc/{pid}").exists() for pid in children)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()
    assert re.search(r"sign in as admin with the password \S{20,}", (tmp_path / "console.log").read_text())
