"""Who may act in the console, proven (issue 25): sign-in by password into a session, single sign-on
through a trusted proxy's header, the service token acting as itself; roles bounding every action;
the session's own CSRF token; the sign-in lockout; the request body cap; ids that stay inside their
URL segment; the refusal to serve other machines unprotected; and an audit entry for every action
and refusal. Each attack the issue lists is refused, audited, and changes nothing.

Publishing (a decision, an override, the audit log on its topic) needs a broker: those tests are in
tests/integration/test_console_auth.py, on the session's embedded broker."""

from __future__ import annotations

import json
import re

import pytest
from starlette.testclient import TestClient

from cyberjurors.config import Settings
from cyberjurors.console.app import create_app
from cyberjurors.console.auth import hash_password, password_ok
from cyberjurors.console.run import Exposed, check_exposure
from cyberjurors.console.sessions import Sessions
from cyberjurors.console.store import Store
from cyberjurors.evidence import signing
from cyberjurors.schemas import DecidedBy, OutcomeReported
from cyberjurors.tooling.broker import broker_env

from .test_console import AIRFRYER, Msg, escalated_store, offline
from .test_console import airfryer as airfryer  # the fixture, requested by name

PASSWORD = "correct horse battery"
HASHED = hash_password(PASSWORD)
KEY = "k" * 40
PEOPLE = {name: HASHED for name in ("vera", "ann", "bob", "sue", "otto")}
ROLES = {"vera": ["viewer"], "ann": ["reviewer"], "bob": ["reviewer"], "sue": ["supervisor"], "otto": ["operator"]}


def settings_for(**over: object) -> Settings:
    return offline(
        **{
            "console_users": PEOPLE,
            "console_user_roles": ROLES,
            "console_token": "service-token-0123456789",
            "outcome_signing_key": KEY,
            **over,
        }
    )


def sign_in(client: TestClient, user: str, password: str = PASSWORD):
    form = client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
    return client.post(
        "/login", data={"csrf": token, "user": user, "password": password, "next": "/review"}, follow_redirects=False
    )


def csrf_of(client: TestClient, path: str = "/review") -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    return re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)


def decide(client: TestClient, escalation_id: str, token: str, headers: dict | None = None, **form: str):
    return client.post(
        "/review/decide",
        data={"csrf": token, "escalation": escalation_id, "winner": "seller", **form},
        headers={"HX-Request": "true", **(headers or {})},
    )


def audited(store: Store) -> list[tuple[str, str, str]]:
    rows = store._rows("SELECT actor, action, result FROM audit ORDER BY at, rowid")
    return [(r["actor"], r["action"], r["result"]) for r in rows]


@pytest.fixture
def console(tmp_path, airfryer):
    settings = settings_for()
    store, escalation_id = escalated_store(tmp_path, settings, *airfryer)
    with TestClient(create_app(settings, store, follow=False)) as client:
        yield client, store, escalation_id


# --- identity ------------------------------------------------------------------------------------


def test_the_token_as_a_password_signs_no_one_in_and_as_a_bearer_acts_as_the_service(console):
    import base64

    client, store, escalation_id = console
    forged = base64.b64encode(b"alice:service-token-0123456789").decode()
    assert (
        client.get("/review", headers={"Authorization": f"Basic {forged}"}, follow_redirects=False).status_code == 303
    )
    refused = decide(client, escalation_id, "x", headers={"Authorization": f"Basic {forged}"})
    assert refused.status_code == 401 and refused.headers["hx-redirect"].startswith("/login?next=")
    service = decide(client, escalation_id, "", headers={"Authorization": "Bearer service-token-0123456789"})
    assert service.status_code == 403 and "service (viewer) may not publish a decision" in service.text
    assert store.decisions(escalation_id) == []
    assert ("anonymous", "refused_unauthenticated", "refused") in audited(store)
    assert ("service", "refused_decide", "refused") in audited(store)
    assert not any(actor == "alice" for actor, _, _ in audited(store))


def test_a_password_opens_a_session_kept_only_as_a_digest_and_sign_out_ends_it(console):
    client, store, _ = console
    assert sign_in(client, "ann", "wrong password").status_code == 401
    assert "cj_session" not in client.cookies
    signed = sign_in(client, "ann")
    assert signed.status_code == 303 and signed.headers["location"] == "/review"
    cookie = client.cookies["cj_session"]
    assert "ann <small>(reviewer)</small>" in client.get("/review").text
    [row] = store._rows("SELECT id, user FROM sessions")
    assert (
        row["user"] == "ann"
        and row["id"] != cookie
        and cookie not in json.dumps([dict(r) for r in store._rows("SELECT * FROM sessions")])
    )
    assert client.post("/logout", data={"csrf": csrf_of(client)}, follow_redirects=False).status_code == 303
    client.cookies.set("cj_session", cookie)  # the old id, kept by a thief
    assert client.get("/review", follow_redirects=False).headers["location"].startswith("/login")
    assert [a for _, a, r in audited(store)] == ["sign_in", "sign_in", "sign_out"]
    assert [r for _, _, r in audited(store)] == ["refused", "done", "done"]


def test_a_session_ends_at_its_age_or_when_idle_and_sign_in_replaces_a_planted_id(tmp_path):
    now = [1000.0]
    settings = settings_for(console_signin={"session_ttl_s": 100, "session_idle_s": 30})
    sessions = Sessions(Store(tmp_path / "s.sqlite3"), settings, clock=lambda: now[0])
    first = sessions.start("ann", "password")
    now[0] += 29
    assert sessions.get(first.id).user == "ann"  # used: idle time starts again
    now[0] += 29
    assert sessions.get(first.id) is not None
    now[0] += 31
    assert sessions.get(first.id) is None  # idle too long
    second = sessions.start("ann", "password")
    for _ in range(4):
        now[0] += 25
        assert sessions.get(second.id) is not None
    now[0] += 1
    assert sessions.get(second.id) is None  # 101 s after sign-in, however busy
    planted = sessions.start("ann", "password")
    fresh = sessions.start("ann", "password", replacing=planted.id)
    assert fresh.id != planted.id and fresh.csrf != planted.csrf
    assert sessions.get(planted.id) is None and sessions.get(fresh.id) is not None


def test_passwords_are_configured_as_argon2_hashes_only():
    with pytest.raises(ValueError, match="ann has a plain password"):
        Settings(console_users={"ann": "pw"})
    assert HASHED.startswith("$argon2id$") and password_ok(HASHED, PASSWORD)
    assert not password_ok(HASHED, PASSWORD + " ") and not password_ok(None, PASSWORD)


# --- single sign-on --------------------------------------------------------------------------------


def test_the_sso_header_is_believed_from_a_trusted_proxy_only(tmp_path, airfryer):
    settings = settings_for(
        console_users={}, console_proxy={"trusted": ["10.0.0.0/8"]}, console_group_roles={"jurors": ["reviewer"]}
    )
    store, escalation_id = escalated_store(tmp_path, settings, *airfryer)
    sso = {"X-Forwarded-User": "carol@platform", "X-Forwarded-Groups": "staff, jurors"}
    with TestClient(create_app(settings, store, follow=False), client=("203.0.113.9", 5000)) as outsider:
        refused = outsider.get("/review", headers=sso)
        assert refused.status_code == 403 and "not a trusted proxy" in refused.text
    with TestClient(create_app(settings, store, follow=False), client=("10.1.2.3", 5000)) as proxied:
        page = proxied.get("/review", headers=sso)
        assert "carol@platform <small>(reviewer)</small>" in page.text
        token = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        dan = {"X-Forwarded-User": "dan@platform", "X-Forwarded-Groups": "jurors"}
        assert decide(proxied, escalation_id, token, headers=dan).status_code == 403  # carol's token, dan's name
    assert ("anonymous", "untrusted_sso_header", "refused") in audited(store)
    assert ("dan@platform", "refused_csrf", "refused") in audited(store)
    assert store.decisions(escalation_id) == []


# --- roles and forms -----------------------------------------------------------------------------


def test_a_viewer_cannot_decide_and_a_reviewer_cannot_replay_or_read_the_audit_log(console):
    client, store, escalation_id = console
    sign_in(client, "vera")
    page = client.get("/review").text
    assert "vera <small>(viewer)</small>" in page and 'name="winner"' not in page  # no form to fill
    refused = decide(client, escalation_id, csrf_of(client))
    assert refused.status_code == 403 and "needs reviewer or supervisor" in refused.text
    client.cookies.clear()
    sign_in(client, "ann")
    assert 'name="winner"' in client.get("/review").text
    replayed = client.post("/dlq/replay", data={"csrf": csrf_of(client), "letter": "disputes.dlq/0/0"})
    assert replayed.status_code == 403 and "needs operator" in replayed.text
    assert client.get("/audit").status_code == 403
    assert store.decisions(escalation_id) == []
    assert [(a, act) for a, act, r in audited(store) if r == "refused"] == [
        ("vera", "refused_decide"),
        ("ann", "refused_replay"),
        ("ann", "refused_audit"),
    ]


def test_a_csrf_token_works_only_with_its_own_session_and_only_from_this_site(console):
    client, store, escalation_id = console
    sign_in(client, "ann")
    stolen = csrf_of(client)
    client.cookies.clear()
    sign_in(client, "bob")
    assert decide(client, escalation_id, stolen).status_code == 403  # ann's token in bob's session
    own = csrf_of(client)
    assert decide(client, escalation_id, own, headers={"Origin": "http://evil.example"}).status_code == 403
    assert store.decisions(escalation_id) == []
    assert [act for a, act, r in audited(store) if r == "refused"] == ["refused_csrf", "refused_foreign_form"]


def test_a_final_letter_is_replayed_only_with_a_reason(tmp_path, airfryer):
    from cyberjurors.schemas import DeadLetter, now

    settings = settings_for()
    store, _ = escalated_store(tmp_path, settings, *airfryer)
    letter = DeadLetter(
        reason="invalid_json",
        detail="not JSON",
        stage="intake",
        topic="disputes.events",
        original_base64="ew==",
        failed_at=now(),
        replayable=False,
    )
    store.apply("letter", Msg("disputes.dlq", 0, 0, letter.model_dump_json().encode()))
    with TestClient(create_app(settings, store, follow=False)) as client:
        sign_in(client, "otto")
        page = client.get("/dlq").text
        assert "Replay final letter" in page
        refused = client.post("/dlq/replay", data={"csrf": csrf_of(client, "/dlq"), "letter": "disputes.dlq/0/0"})
        assert refused.status_code == 400 and "only with a reason" in refused.text
    assert ("otto", "refused_replay_final", "refused") in audited(store)
    assert store.replay_notes() == {}


# --- brute force, bodies, ids ----------------------------------------------------------------------


def test_a_hundred_wrong_passwords_lock_the_name_and_the_right_one_waits(console):
    client, store, _ = console
    said = [sign_in(client, "ann", f"guess {n}").status_code for n in range(100)]
    assert said[:5] == [401] * 5 and set(said[5:]) == {429}
    assert sign_in(client, "ann").status_code == 429  # the right password, while locked
    assert "cj_session" not in client.cookies
    failed = [r for r in audited(store) if r[1] == "sign_in"]
    assert len(failed) == 101 and {r for _, _, r in failed} == {"refused"}
    assert sign_in(client, "bob").status_code == 303  # another name from the same address: under its own count


def test_the_lockout_counts_per_address_too_and_ends_with_its_window(tmp_path):
    now = [0.0]
    settings = settings_for(console_signin={"max_failures": 2, "lockout_s": 60})
    sessions = Sessions(Store(tmp_path / "s.sqlite3"), settings, clock=lambda: now[0])
    for name in ("a", "b", "c", "d", "e", "f", "g", "h"):  # 8 names, 1 failure each: 4 x 2 from the address
        assert not sessions.locked(name, "198.51.100.7")
        attempt = sessions.attempt(name, "198.51.100.7")
        assert attempt is not None
        sessions.failed(attempt)
    assert sessions.locked("z", "198.51.100.7") and not sessions.locked("z", "198.51.100.8")
    now[0] += 61
    assert not sessions.locked("z", "198.51.100.7")


def test_a_large_body_without_credentials_is_refused_before_it_is_read(console):
    client, store, escalation_id = console
    big = client.post(
        "/review/decide", content=b"x" * (50 << 20), headers={"content-type": "application/x-www-form-urlencoded"}
    )
    assert big.status_code == 413

    def chunks():
        for _ in range(64):
            yield b"y" * 4096

    streamed = client.post("/login", content=chunks(), headers={"content-type": "application/x-www-form-urlencoded"})
    assert streamed.status_code == 413
    assert store.decisions(escalation_id) == []
    assert [act for _, act, _ in audited(store)] == ["refused_body_too_large", "refused_body_too_large"]


def test_an_escalation_id_that_is_a_path_stays_a_value(tmp_path, airfryer):
    settings = settings_for()
    after, verdict = airfryer
    store = Store(tmp_path / "console.sqlite3")
    from cyberjurors.jury.escalation import escalation_event
    from cyberjurors.schemas import now

    raised = escalation_event(
        after[-1],
        verdict.model_copy(update={"escalated": True, "escalation_reasons": ["narrow_margin"]}),
        settings,
        now(),
    ).model_copy(update={"escalation_id": "../../dlq/replay"})
    store.apply("verdict", Msg("disputes.verdicts", 0, 0, raised.verdict.model_dump_json().encode()))
    store.apply("escalation", Msg("disputes.escalations", 0, 0, raised.model_dump_json().encode()))
    with TestClient(create_app(settings, store, follow=False)) as client:
        sign_in(client, "ann")
        page = client.get("/review").text
        assert 'action="/review/decide"' in page and 'value="../../dlq/replay"' in page
        assert "/review/../../dlq/replay" not in page and 'action="/review/../' not in page


# --- exposure ------------------------------------------------------------------------------------


def test_a_bind_off_loopback_needs_someone_to_sign_in_and_https():
    check_exposure(offline(console_host="127.0.0.1"), embedded=True)
    check_exposure(offline(console_host="::1"), embedded=False)
    with pytest.raises(Exposed, match="binds loopback only"):
        check_exposure(settings_for(console_host="0.0.0.0", console_proxy={"behind": True}), embedded=True)
    with pytest.raises(Exposed, match="no one could sign in"):
        check_exposure(offline(console_host="0.0.0.0", console_proxy={"behind": True}), embedded=False)
    with pytest.raises(Exposed, match="plain HTTP"):
        check_exposure(settings_for(console_host="0.0.0.0"), embedded=False)
    check_exposure(settings_for(console_host="0.0.0.0", console_proxy={"behind": True}), embedded=False)


def test_the_command_refuses_to_serve_other_machines_unprotected():
    from typer.testing import CliRunner

    from cyberjurors.cli import app

    result = CliRunner().invoke(app, ["console", "--host", "0.0.0.0"], env={"CYBERJURORS_CONSOLE_USERS": "{}"})
    assert result.exit_code == 2 and "no one could sign in" in result.output


def test_behind_a_tls_proxy_the_session_cookie_is_secure_and_host_only(tmp_path, airfryer):
    settings = settings_for(console_proxy={"behind": True})
    store, _ = escalated_store(tmp_path, settings, *airfryer)
    with TestClient(create_app(settings, store, follow=False), base_url="https://testserver") as client:
        signed = sign_in(client, "ann")
        cookie = signed.headers["set-cookie"]
        assert cookie.startswith("__Host-cj_session=") and "Secure" in cookie and "HttpOnly" in cookie
        assert "samesite=strict" in cookie.lower() and "Domain" not in cookie and "Path=/" in cookie


def test_the_embedded_broker_inherits_no_secret():
    parent = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "CYBERJURORS_CONSOLE_TOKEN": "t",
        "CYBERJURORS_OUTCOME_SIGNING_KEY": KEY,
        "ANTHROPIC_API_KEY": "sk",
        "STORAGE_ENGINE": "postgres://x",
    }
    assert broker_env(parent) == {"PATH": "/usr/bin", "HOME": "/root"}


def test_console_password_prints_a_hash_that_verifies():
    from typer.testing import CliRunner

    from cyberjurors.cli import app

    result = CliRunner().invoke(app, ["console-password", "ann"], input=PASSWORD + "\n")
    assert result.exit_code == 0, result.output
    hashed = json.loads(result.output)["ann"]
    assert password_ok(hashed, PASSWORD) and PASSWORD not in result.output
    assert CliRunner().invoke(app, ["console-password"], input="short\n").exit_code == 2


# --- what the topic says ----------------------------------------------------------------------------


def test_an_unsigned_human_panel_outcome_read_from_the_topic_decides_nothing(tmp_path, airfryer):
    settings = settings_for()
    store, escalation_id = escalated_store(tmp_path, settings, *airfryer)
    create_app(settings, store, follow=False)  # gives the store the console's keys
    panel = OutcomeReported(
        case_id=AIRFRYER,
        votes={"buyer": 0, "seller": 5},
        source="human_panel",
        escalation_id=escalation_id,
        event_id="panel-1",
        decided_by=DecidedBy(reviewer="mallory", role="supervisor"),
    )
    forged = signing.sign(panel, "another key, 32 characters long..")
    for offset, outcome in enumerate((panel, forged)):
        store.apply("outcome", Msg("disputes.outcomes", 0, offset, outcome.model_dump_json().encode()))
    assert store.decisions(escalation_id) == [] and store.escalation_ids(reviewed=False) == [escalation_id]
    store.apply("outcome", Msg("disputes.outcomes", 0, 2, signing.sign(panel, KEY).model_dump_json().encode()))
    [decision] = store.decisions(escalation_id)
    assert (decision.reviewer, decision.role, decision.origin) == ("mallory", "supervisor", "topic")


def test_an_audit_entry_is_bounded_whatever_it_is_given(tmp_path):
    from cyberjurors.console.audit import MAX_DETAIL_CHARS, Audit

    store = Store(tmp_path / "a.sqlite3")
    entry = Audit(offline(), store).record("a" * 999, "reviewer", "replay_final", "done", "::1", "t" * 999, "z" * 5000)
    [row] = store._rows("SELECT * FROM audit")
    assert (len(row["actor"]), len(row["target"]), len(row["detail"])) == (128, 200, MAX_DETAIL_CHARS)
    assert row["id"] == entry["id"] and row["published"] == 0


def test_a_worker_child_gets_the_signing_key_and_no_one_s_sign_in(tmp_path):
    from cyberjurors.tooling.worker_process import WorkerProcess

    shows_env = tmp_path / "env.sh"  # in place of python: prints the environment it was given
    shows_env.write_text("#!/bin/sh\nenv\n")
    shows_env.chmod(0o755)
    worker = WorkerProcess(settings_for(), tmp_path / "worker.log", python=str(shows_env)).start()
    assert worker.process.wait(30) == 0
    given = dict(line.split("=", 1) for line in (tmp_path / "worker.log").read_text().splitlines() if "=" in line)
    assert given["CYBERJURORS_OUTCOME_SIGNING_KEY"] == KEY
    assert json.loads(given.get("CYBERJURORS_CONSOLE_USERS", "{}")) == {}
    assert "CYBERJURORS_CONSOLE_TOKEN" not in given
    assert not any(HASHED in value for value in given.values())


def test_behind_a_tls_proxy_a_form_from_the_https_origin_is_this_site(tmp_path, airfryer):
    settings = settings_for(console_proxy={"behind": True})
    store, _ = escalated_store(tmp_path, settings, *airfryer)
    # the proxy serves https://console.example; the console itself is reached over plain HTTP
    with TestClient(create_app(settings, store, follow=False), base_url="http://console.example") as client:
        form = client.get("/login")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
        client.cookies.set("cj_signin", token)
        signed = client.post(
            "/login",
            data={"csrf": token, "user": "vera", "password": PASSWORD, "next": "/review"},
            headers={"Origin": "https://console.example"},
            follow_redirects=False,
        )
        assert signed.status_code == 303
        session = signed.cookies.get("__Host-cj_session") or re.search(
            r"__Host-cj_session=([^;]+)", signed.headers["set-cookie"]
        ).group(1)
        client.cookies.set("__Host-cj_session", session)  # httpx sends no Secure cookie over http: by hand
        assert "vera <small>(viewer)</small>" in client.get("/review").text
        other = client.post("/logout", data={"csrf": csrf_of(client)}, headers={"Origin": "https://evil.example"})
        assert other.status_code == 403
    assert ("vera", "refused_foreign_form", "refused") in audited(store)


def test_the_audit_log_page_shows_supervisors_who_did_what(console):
    client, _, escalation_id = console
    sign_in(client, "vera", "not her password")
    sign_in(client, "vera")
    decide(client, escalation_id, csrf_of(client))
    client.cookies.clear()
    sign_in(client, "sue")
    page = client.get("/audit")
    assert page.status_code == 200
    rows = re.findall(r'<tr class="entry (\w+)" data-action="(\w+)" data-actor="([^"]+)">', page.text)
    assert rows == [  # newest first
        ("done", "sign_in", "sue"),
        ("refused", "refused_decide", "vera"),
        ("done", "sign_in", "vera"),
        ("refused", "sign_in", "vera"),
    ]
    assert "testclient" in page.text  # from where
