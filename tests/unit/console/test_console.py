"""The console without a browser: its store (idempotent upserts, the fullest record kept), pages
behind sign-in unless open, media refused outside media_root, and party text escaped in the HTML.
tests/unit/console/test_auth.py tries every way around who may act; on a real broker,
tests/integration/test_console.py (a restart resuming at the stored offsets, a decision published
once, ``console --embedded``) and tests/integration/test_console_browser.py (Chromium)."""

from __future__ import annotations

import asyncio
import base64
import functools
import io
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image
from starlette.testclient import TestClient

from cyberjurors.config import Settings
from cyberjurors.console.app import create_app
from cyberjurors.console.store import Store
from cyberjurors.jury import stages
from cyberjurors.jury.escalation import escalation_event
from cyberjurors.jury.letters import write_letters
from cyberjurors.jury.rounds import Jury, is_settled
from cyberjurors.schemas import (
    CaseFile,
    DeadLetter,
    DisputeCase,
    MediaRef,
    OutcomeReported,
    RemovedStatement,
    Usage,
    Verdict,
    now,
)

from ... import factories
from ...conftest import EXAMPLES
from ...factories import example_case
from ...schema_model import SchemaModel

AIRFRYER = "appl-002-airfryer-heater-fault"


@dataclass
class Msg:
    topic: str
    partition: int
    offset: int
    value: bytes | None
    key: bytes | None = None
    headers: tuple = ()


# the shared settings with the sample media; every case deliberates all its rounds
offline = functools.partial(factories.settings, media_root=EXAMPLES, early_stop=0, metrics_port=0, probe_port=0)


async def judged(case: DisputeCase, settings: Settings) -> tuple[CaseFile, list[CaseFile], Verdict]:
    """The case through every stage in this process: its case file after stage II and after each round
    (what disputes.rounds carries), and its verdict."""
    llm, jury = SchemaModel(), Jury.from_settings(settings)
    record = CaseFile(case=case, received_at=now(), backend="offline")
    record = await stages.clues_stage(
        await stages.focus_stage(record, llm, settings), llm, settings, stages.NoPrecedents()
    )
    after = []
    while not is_settled(record, settings):
        record = await stages.round_stage(record, jury, llm, settings)
        after.append(record)
    return record, after, await stages.verdict_stage(record, llm, settings, jury)


@pytest.fixture(scope="module")
def airfryer() -> tuple[list[CaseFile], Verdict]:
    _, after, verdict = asyncio.run(judged(example_case(AIRFRYER), offline()))
    return after, verdict


def test_the_cost_table_shows_what_the_verdict_step_spent_and_at_whose_prices(airfryer):
    """The case page's tokens-and-cost table: the stages' usage from the record, then what the verdict
    step spent beyond them (a verifier's calls), its cost by price source included, then the total."""
    from cyberjurors.console.views import usage_by_stage

    record, verdict = airfryer[0][-1], airfryer[1]
    staged = sum(record.usage.values(), Usage())
    verifier = Usage(input_tokens=900, output_tokens=80, calls=1, cost_usd=0.0026, cost_sources={"catalog": 0.0026})
    rows = usage_by_stage(record, verdict.model_copy(update={"tokens": staged + verifier}))
    assert [stage for stage, _ in rows] == [*record.usage, "verdict", "total"]
    assert rows[-2][1] == verifier
    assert rows[-1][1].cost_sources == {"catalog": 0.0026}
    exact = usage_by_stage(record, verdict.model_copy(update={"tokens": staged}))
    assert [stage for stage, _ in exact] == [*record.usage, "total"]  # nothing beyond the stages: no row


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
    from .test_auth import PASSWORD, csrf_of, sign_in

    assert sign_in(client, user, PASSWORD).status_code == 303
    return csrf_of(client)


def decide(client: TestClient, escalation_id: str, token: str, **form: str):
    return client.post(
        "/review/decide",
        data={"csrf": token, "escalation": escalation_id, "winner": "seller", **form},
        headers={"HX-Request": "true"},
    )


def test_pages_need_someone_signed_in_unless_open_and_nothing_is_decided_without_credentials(tmp_path, airfryer):
    from .test_auth import HASHED

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


def test_a_human_panels_signed_decision_read_from_the_topic_marks_the_case_reviewed(tmp_path, airfryer):
    from cyberjurors.evidence import signing
    from cyberjurors.schemas import DecidedBy

    from .test_auth import KEY

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


def test_a_case_page_shows_the_letters_the_parties_were_sent_each_stored_once(tmp_path, airfryer):
    after, verdict = airfryer
    settings = offline()
    letters = asyncio.run(write_letters(after[-1], verdict, SchemaModel(), settings))
    hostile = "<script>window.__pwned=1</script>"
    removed = RemovedStatement(text=f"The seller lied {hostile}", cites=[], reason="uncited")
    letters[1] = letters[1].model_copy(
        update={"check": letters[1].check.model_copy(update={"status": "corrected", "removed": [removed]})}
    )
    store = Store(tmp_path / "console.sqlite3")
    store.apply("verdict", Msg("disputes.verdicts", 0, 0, verdict.model_dump_json().encode()))
    for offset, letter in enumerate([*letters, *letters]):  # a re-sent letter is the same letter
        store.apply("party_letter", Msg("disputes.letters", 0, offset, letter.model_dump_json().encode()))
    assert store.counts()["party_letters"] == 2
    assert [x.party for x in store.party_letters_of(AIRFRYER)] == ["buyer", "seller"]
    with TestClient(create_app(settings, store, follow=False, public_pages=True)) as client:
        html = client.get(f"/cases/{AIRFRYER}").text
    assert 'id="letter-1-buyer"' in html and 'id="letter-1-seller"' in html
    assert "The jury has decided this dispute" in html and "corrected" in html and "The seller lied" in html
    assert "<script>window" not in html and "&lt;script&gt;window" in html


# --- the command ----------------------------------------------------------------------------------


def test_the_command_refuses_cases_without_its_own_broker_and_two_brokers_at_once():
    from typer.testing import CliRunner

    from cyberjurors.cli import app

    runner = CliRunner()
    alone = runner.invoke(app, ["console", str(EXAMPLES / "cases")])
    assert alone.exit_code == 2 and "--embedded" in alone.output
    both = runner.invoke(app, ["console", "--embedded", "--bootstrap", "127.0.0.1:1"])
    assert both.exit_code == 2 and "not both" in both.output
