"""The console without a browser: its store (idempotent upserts, the fullest record kept, a restart
that resumes at the stored offsets on a real broker), pages behind sign-in unless open, a
reviewer's decision published to disputes.outcomes once, media refused outside media_root, and party
text escaped in the HTML. tests/test_console_auth.py tries every way around who may act;
tests/test_console_browser.py drives the console in Chromium."""

from __future__ import annotations

import asyncio
import base64
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image
from starlette.testclient import TestClient

from cyberjurors.config import Settings
from cyberjurors.console.app import create_app
from cyberjurors.console.feed import Feed
from cyberjurors.console.store import Store
from cyberjurors.jury import stages
from cyberjurors.jury.escalation import escalation_event
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.rounds import Jury, is_settled
from cyberjurors.schemas import CaseFile, DeadLetter, DisputeCase, MediaRef, OutcomeReported, Verdict, now
from cyberjurors.streams.clients import Outgoing, produce

from .conftest import EXAMPLES, read_topic

KETTLE = "appl-001-kettle-crack"
AIRFRYER = "appl-002-airfryer-heater-fault"


@dataclass
class Msg:
    topic: str
    partition: int
    offset: int
    value: bytes | None
    key: bytes | None = None
    headers: tuple = ()


def offline(**over: object) -> Settings:
    return Settings(
        **{
            "llm_backend": "offline",
            "precedent_backend": "none",
            "media_root": EXAMPLES,
            "early_stopping": False,
            "metrics_port": 0,
            "probe_port": 0,
            **over,
        }
    )


async def judged(case: DisputeCase, settings: Settings) -> tuple[CaseFile, list[CaseFile], Verdict]:
    """The case through every stage in this process: its case file after stage II and after each round
    (what disputes.rounds carries), and its verdict."""
    llm, jury = OfflineLLM(), Jury.from_settings(settings)
    record = CaseFile(case=case, received_at=now(), backend="offline")
    record = await stages.clues_stage(
        await stages.focus_stage(record, llm, settings), llm, settings, stages.NoPrecedents()
    )
    after = []
    while not is_settled(record, settings):
        record = await stages.round_stage(record, jury, llm, settings)
        after.append(record)
    return record, after, await stages.verdict_stage(record, llm, settings, jury)


def sample(name: str) -> DisputeCase:
    return DisputeCase.model_validate_json((EXAMPLES / "cases" / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def airfryer() -> tuple[list[CaseFile], Verdict]:
    _, after, verdict = asyncio.run(judged(sample(AIRFRYER), offline()))
    return after, verdict


def test_the_ballots_name_the_personas_the_record_seated(airfryer):
    from cyberjurors.console.views import juror_names, round_views

    record = airfryer[0][-1]
    assert record.jury is not None and juror_names(record, offline())[:2] == ["Mei", "Arjun"]
    # the qualification gate gave seat 1 to a reserve: the case file's jury says so, not the settings
    seats = [s.model_copy(update={"persona": "Oscar"}) if s.seat == 1 else s for s in record.jury.seats]
    seated = record.model_copy(update={"jury": record.jury.model_copy(update={"seats": seats})})
    rows = round_views(seated, offline())[0].rows
    assert [r.persona for r in rows][:3] == ["Mei", "Oscar", "Lucia"]
    older = record.model_copy(update={"jury": None})  # a record from before juries were recorded
    assert [r.persona for r in round_views(older, offline())[0].rows][:2] == ["Mei", "Arjun"]


# --- the store ----------------------------------------------------------------------------------


def test_a_record_applied_twice_is_stored_once_and_the_offset_moves_past_it(tmp_path, airfryer):
    _after, verdict = airfryer
    store = Store(tmp_path / "console.sqlite3")
    for _ in range(2):
        store.apply("verdict", Msg("disputes.verdicts", 1, 7, verdict.model_dump_json().encode()))
    letter = DeadLetter(
        reason="invalid_json",
        detail="not JSON",
        stage="intake",
        topic="disputes.events",
        original_base64=base64.b64encode(b"{").decode(),
        failed_at=now(),
        replayable=False,
    )
    for offset in (3, 3, 4):  # the same letter redelivered, then another letter with the same content
        store.apply("letter", Msg("disputes.dlq", 0, offset, letter.model_dump_json().encode()))
    counts = store.counts()
    assert (counts["verdicts"], counts["letters"]) == (1, 2)
    assert [x.id for x in store.letters()] == ["disputes.dlq/0/3", "disputes.dlq/0/4"]
    assert store.position("disputes.verdicts", 1) == 8 and store.position("disputes.dlq", 0) == 5
    store.apply("verdict", Msg("disputes.verdicts", 1, 2, verdict.model_dump_json().encode()))  # an older one again
    assert store.position("disputes.verdicts", 1) == 8


def test_the_fullest_record_of_a_case_is_kept_whatever_order_it_comes_in(tmp_path, airfryer):
    after, verdict = airfryer
    assert len(after) == 3
    store = Store(tmp_path / "console.sqlite3")
    for offset, i in enumerate([1, 2, 0]):
        store.apply("record", Msg("disputes.rounds", 0, offset, after[i].model_dump_json().encode()))
    record, source = store.record(AIRFRYER, 1)
    assert [r.round for r in record.rounds] == [1, 2, 3] and source == "rounds"
    # an escalation sent without its earlier rounds' ballots does not replace the whole record ...
    trimmed = escalation_event(after[-1], verdict.model_copy(update={"escalated": True}), offline(), now(), trim=True)
    store.apply("escalation", Msg("disputes.escalations", 0, 0, trimmed.model_dump_json().encode()))
    record, source = store.record(AIRFRYER, 1)
    assert source == "rounds" and all(len(r.ballots) == 17 for r in record.rounds)
    # ... but is the record where it is all the console has
    other = Store(tmp_path / "other.sqlite3")
    other.apply("escalation", Msg("disputes.escalations", 0, 0, trimmed.model_dump_json().encode()))
    record, source = other.record(AIRFRYER, 1)
    assert source == "escalation" and [len(r.ballots) for r in record.rounds] == [0, 0, 17]
    assert other.escalation(trimmed.escalation_id).verdict.verdict_id == verdict.verdict_id


def test_a_record_that_cannot_be_read_is_counted_and_passed(tmp_path):
    store = Store(tmp_path / "console.sqlite3")
    assert not store.apply("verdict", Msg("disputes.verdicts", 0, 0, b"not json"))
    assert store.counts()["skipped"] == 1 and store.counts()["verdicts"] == 0
    assert store.position("disputes.verdicts", 0) == 1


def test_on_another_cluster_what_belongs_to_the_broker_goes_and_the_history_stays(tmp_path, airfryer):
    _after, verdict = airfryer
    store = Store(tmp_path / "console.sqlite3")
    assert not store.on_cluster("cluster-a")
    store.apply("verdict", Msg("disputes.verdicts", 0, 0, verdict.model_dump_json().encode()))
    store.apply("replayed", Msg("disputes.dlq-replayed", 0, 0, b"{}", key=b"disputes.dlq/0/0"))
    assert not store.on_cluster("cluster-a")
    assert store.on_cluster("cluster-b")
    counts = store.counts()
    assert (counts["verdicts"], counts["replayed"]) == (1, 0) and store.position("disputes.verdicts", 0) is None


@pytest.mark.integration
async def test_a_restarted_console_resumes_at_its_stored_offsets(settings, tmp_path, airfryer):
    _after, verdict = airfryer
    kettle = (await judged(sample(KETTLE), offline()))[2]

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


# --- who may act --------------------------------------------------------------------------------


def escalated_store(tmp_path: Path, settings: Settings, after: list[CaseFile], verdict: Verdict) -> tuple[Store, str]:
    store = Store(tmp_path / "console.sqlite3")
    raised = escalation_event(
        after[-1],
        verdict.model_copy(update={"escalated": True, "escalation_reasons": ["narrow_margin"]}),
        settings,
        now(),
    )
    store.apply("verdict", Msg("disputes.verdicts", 0, 0, raised.verdict.model_dump_json().encode()))
    store.apply("escalation", Msg("disputes.escalations", 0, 0, raised.model_dump_json().encode()))
    return store, raised.escalation_id


def signed_in(client: TestClient, user: str = "ann") -> str:
    """Sign in on the sign-in page; the CSRF token of the session it opened."""
    from .test_console_auth import PASSWORD, csrf_of, sign_in

    assert sign_in(client, user, PASSWORD).status_code == 303
    return csrf_of(client)


def decide(client: TestClient, escalation_id: str, token: str, **form: str):
    return client.post(
        "/review/decide",
        data={"csrf": token, "escalation": escalation_id, "winner": "seller", **form},
        headers={"HX-Request": "true"},
    )


def test_pages_need_someone_signed_in_unless_open_and_nothing_is_decided_without_credentials(tmp_path, airfryer):
    from .test_console_auth import HASHED

    settings = offline(console_users={"ann": HASHED}, console_user_roles={"ann": ["reviewer"]})
    store, escalation_id = escalated_store(tmp_path, settings, *airfryer)
    paths = ("/cases", f"/cases/{AIRFRYER}", "/review", "/dlq", f"/media/{AIRFRYER}/1/b2-1/frames/1")
    with TestClient(create_app(settings, store, follow=False)) as client:
        for path in paths:
            to = client.get(path, follow_redirects=False)
            assert to.status_code == 303 and to.headers["location"].startswith("/login?next=/"), path
        assert client.get("/healthz").status_code == 200
        signed_in(client)
        for path in paths:
            assert client.get(path).status_code == 200, path
    with TestClient(create_app(offline(), store, follow=False, public_pages=True)) as client:
        assert client.get("/cases").status_code == 200
        refused = decide(client, escalation_id, "")
        assert refused.status_code == 403 and "read-only" in refused.text  # no one configured to sign in
    assert store.decisions(escalation_id) == []


@pytest.mark.integration
async def test_a_decision_is_published_once_and_a_different_one_only_as_an_override(settings, tmp_path, airfryer):
    from .test_console_auth import HASHED, KEY

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


def test_a_human_panels_signed_decision_read_from_the_topic_marks_the_case_reviewed(tmp_path, airfryer):
    from cyberjurors.schemas import DecidedBy
    from cyberjurors.streams import signing

    from .test_console_auth import KEY

    settings = offline(outcome_signing_key=KEY)
    store, escalation_id = escalated_store(tmp_path, settings, *airfryer)
    store.verified = lambda outcome: signing.check(outcome, settings).ok
    assert store.escalation_ids(reviewed=False) == [escalation_id]
    outcome = signing.sign(
        OutcomeReported(
            case_id=AIRFRYER,
            votes={"buyer": 0, "seller": 5},
            source="human_panel",
            escalation_id=escalation_id,
            event_id="panel-7",
            decided_by=DecidedBy(reviewer="pat", role="reviewer"),
        ),
        KEY,
    )
    for offset in (0, 0):
        store.apply("outcome", Msg("disputes.outcomes", 0, offset, outcome.model_dump_json().encode()))
    [decision] = store.decisions(escalation_id)
    assert (decision.origin, decision.winner, decision.seller, decision.event_id) == ("topic", "seller", 5, "panel-7")
    assert store.escalation_ids(reviewed=False) == [] and store.escalation_ids(reviewed=True) == [escalation_id]


# --- media ----------------------------------------------------------------------------------------


def png(colour: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), colour).save(out, "PNG")
    return out.getvalue()


def test_media_is_served_only_from_inside_media_root(tmp_path, airfryer):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir(), outside.mkdir()
    (root / "ok.png").write_bytes(png((0, 200, 0)))
    (outside / "secret.png").write_bytes(png((200, 0, 0)))
    (root / "link.png").symlink_to(outside / "secret.png")
    settings = offline(media_root=root, media_store=str(tmp_path / "store"))
    after, _verdict = airfryer
    record = after[-1]
    refs = {
        "b1-1": MediaRef(media_type="image/png", path="ok.png"),
        "b1-2": MediaRef(media_type="image/png", path="../outside/secret.png"),
        "s1-1": MediaRef(media_type="image/png", path=str(outside / "secret.png")),
        "s1-2": MediaRef(media_type="image/png", path="link.png"),
        "s2-1": MediaRef(media_type="image/png", stored="0" * 64),
        "s2-2": MediaRef(media_type="image/png", url="http://127.0.0.1:9/x.png"),
    }
    rounds = [
        r.model_copy(
            update={
                "items": [
                    i.model_copy(update={"kind": "image", "media": refs[i.id]}) if i.id in refs else i for i in r.items
                ]
            }
        )
        for r in record.case.rounds
    ]
    crafted = record.model_copy(update={"case": record.case.model_copy(update={"rounds": rounds})})
    store = Store(tmp_path / "console.sqlite3")
    store.apply("record", Msg("disputes.rounds", 0, 0, crafted.model_dump_json().encode()))
    with TestClient(create_app(settings, store, follow=False, public_pages=True)) as client:
        shown = client.get(f"/media/{AIRFRYER}/1/b1-1")
        assert shown.status_code == 200 and shown.headers["content-type"] == "image/jpeg"
        assert Image.open(io.BytesIO(shown.content)).getpixel((20, 15))[1] > 150  # the green one, re-encoded
        for evidence in ("b1-2", "s1-1", "s1-2", "s2-1", "s2-2"):
            refused = client.get(f"/media/{AIRFRYER}/1/{evidence}")
            assert refused.status_code == 404 and b"PNG" not in refused.content, evidence
            assert "secret" not in refused.text and str(outside) not in refused.text
        assert "path_outside_media_root" in client.get(f"/media/{AIRFRYER}/1/b1-2").text
        for path in (
            f"/media/{AIRFRYER}/1/..%2F..%2Foutside%2Fsecret.png",
            f"/media/{AIRFRYER}/1/b2-2",  # text
            f"/media/{AIRFRYER}/1/nope",
            f"/media/{AIRFRYER}/2/b1-1",
            "/media/other/1/b1-1",
            f"/media/{AIRFRYER}/1/b2-1/frames/999",
            f"/media/{AIRFRYER}/1/b1-1/frames/1",
        ):
            assert client.get(path).status_code == 404, path


# --- party text is text ---------------------------------------------------------------------------


def test_party_text_is_escaped_in_every_page(tmp_path, airfryer):
    after, verdict = airfryer
    hostile = "<script>window.__pwned=1</script><img src=x onerror=alert(1)>"
    record = after[-1]
    rounds = [
        r.model_copy(
            update={"items": [i.model_copy(update={"text": hostile}) if i.kind == "text" else i for i in r.items]}
        )
        for r in record.case.rounds
    ]
    case = record.case.model_copy(
        update={"rounds": rounds, "metadata": record.case.metadata.model_copy(update={"product": hostile})}
    )
    crafted = record.model_copy(update={"case": case})
    settings = offline()
    store, _escalation_id = escalated_store(
        tmp_path, settings, [crafted], verdict.model_copy(update={"justification": hostile})
    )
    with TestClient(create_app(settings, store, follow=False, public_pages=True)) as client:
        for path in (f"/cases/{AIRFRYER}", "/review", "/cases"):
            html = client.get(path).text
            assert "<script>window" not in html and "<img src=x" not in html, path
            if path != "/cases":
                assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html, path
            assert client.get(path).headers["content-security-policy"].startswith("default-src 'self'")


# --- the command ----------------------------------------------------------------------------------


def test_the_command_refuses_cases_without_its_own_broker_and_two_brokers_at_once():
    from typer.testing import CliRunner

    from cyberjurors.cli import app

    runner = CliRunner()
    alone = runner.invoke(app, ["console", str(EXAMPLES / "cases")])
    assert alone.exit_code == 2 and "--embedded" in alone.output
    both = runner.invoke(app, ["console", "--embedded", "--bootstrap", "127.0.0.1:1"])
    assert both.exit_code == 2 and "not both" in both.output


@pytest.mark.integration
def test_embedded_it_judges_the_cases_it_is_given_serves_them_and_stops_with_its_broker_and_worker(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    import httpx

    from cyberjurors.streams.broker import free_port

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
