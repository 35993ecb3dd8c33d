"""Who may act in the console, on the session's embedded broker: decisions carry their author, signed,
and only a supervisor overrides another's; the audit log is on its topic and a new console reads it
back (tests/unit/console/test_auth.py has every other check)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.testclient import TestClient

from cyberjurors.console.app import create_app
from cyberjurors.console.store import Store
from cyberjurors.evidence import signing
from cyberjurors.schemas import OutcomeReported
from cyberjurors.tooling.broker import free_port

from ..conftest import read_topic
from ..unit.console.test_auth import KEY, PASSWORD, PEOPLE, ROLES, audited, csrf_of, decide, settings_for, sign_in
from ..unit.console.test_console import airfryer as airfryer
from ..unit.console.test_console import escalated_store

# --- publishing, on a real broker ---------------------------------------------------------------


@pytest.mark.integration
async def test_decisions_carry_their_author_signed_and_only_a_supervisor_overrides_another(
    settings, tmp_path, airfryer
):
    settings = settings.model_copy(
        update={"console_users": PEOPLE, "console_user_roles": ROLES, "outcome_signing_key": KEY}
    )
    store, escalation_id = escalated_store(tmp_path, settings, *airfryer)

    def run() -> list[int]:
        said = []
        with TestClient(create_app(settings, store, follow=False)) as client:
            sign_in(client, "ann")
            said.append(decide(client, escalation_id, csrf_of(client), buyer="1", seller="4").status_code)
            said.append(decide(client, escalation_id, csrf_of(client), winner="buyer", override="on").status_code)
            client.cookies.clear()
            sign_in(client, "bob")
            said.append(decide(client, escalation_id, csrf_of(client), override="on").status_code)  # ann's
            client.cookies.clear()
            sign_in(client, "sue")
            said.append(decide(client, escalation_id, csrf_of(client), override="on").status_code)
        return said

    assert await asyncio.to_thread(run) == [200, 200, 403, 200]
    sent = await read_topic(settings, "disputes.outcomes", until=3, timeout_s=10)
    outcomes = [OutcomeReported.model_validate_json(v) for _, v in sent]
    assert [(o.decided_by.reviewer, o.decided_by.role) for o in outcomes] == [
        ("ann", "reviewer"),
        ("ann", "reviewer"),  # her own decision replaced: no supervisor needed
        ("sue", "supervisor"),
    ]
    assert all(signing.check(o, settings).ok for o in outcomes)
    assert outcomes[2].decided_by.override_of == outcomes[1].event_id
    actions = [(a, act, r) for a, act, r in audited(store) if act != "sign_in"]
    assert actions == [
        ("ann", "decide", "done"),
        ("ann", "override", "done"),
        ("bob", "refused_override", "refused"),
        ("sue", "override", "done"),
    ]


@pytest.mark.integration
async def test_the_audit_log_is_on_its_topic_and_a_new_console_reads_it_back(settings, tmp_path, airfryer):
    from cyberjurors.console.audit import Audit
    from cyberjurors.console.feed import Feed

    from .test_console import follow_until

    store = Store(tmp_path / "first.sqlite3")
    audit = Audit(settings, store)
    audit.record("ann", "reviewer", "decide", "done", "127.0.0.1", "esc-1", "seller 1:4")
    audit.record("mallory", "", "sign_in", "refused", "203.0.113.9", "", "wrong name or password")
    assert await audit.flush() == 2 and await audit.flush() == 0
    on_topic = await read_topic(settings, "disputes.audit", until=2, timeout_s=10)
    assert sorted(json.loads(v)["actor"] for _, v in on_topic) == ["ann", "mallory"]
    fresh = Store(tmp_path / "second.sqlite3")  # the first database lost
    await follow_until(Feed(settings, fresh), audit=2)
    assert sorted((r["actor"], r["action"], r["address"]) for r in fresh._rows("SELECT * FROM audit")) == [
        ("ann", "decide", "127.0.0.1"),
        ("mallory", "sign_in", "203.0.113.9"),
    ]


# --- the sign-in lockout under concurrent requests -------------------------------------------------


@contextlib.asynccontextmanager
async def served(app: Starlette) -> AsyncIterator[str]:
    """The console app under uvicorn on a loopback port, as `cyberjurors console` serves it: its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", proxy_headers=False))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            assert not serving.done(), "the console did not start"
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving


async def guesses(url: str, names: list[str], password: str = "a wrong guess") -> Counter[int]:
    """Sign-ins for ``names`` all at once, from one browser (one sign-in form's cookie), by status. The
    client opens a connection per request in flight (httpx's pool: up to 100)."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        form = await client.get("/login")
        token = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)  # the double-submit cookie's
        said = await asyncio.gather(
            *(
                client.post("/login", data={"csrf": token, "user": n, "password": password}, follow_redirects=False)
                for n in names
            )
        )
    return Counter(r.status_code for r in said)


@pytest.mark.integration
async def test_concurrent_wrong_passwords_meet_the_lockout_at_its_limits(tmp_path):
    # 5 per name, 20 per address (console_signin.max_failures and four times it)
    settings = settings_for(console_signin={"max_failures": 5})
    store = Store(tmp_path / "console.sqlite3")
    async with served(create_app(settings, store, follow=False)) as url:
        assert await guesses(url, ["ann"] * 40) == {401: 5, 429: 35}  # one name, 40 guesses at once
        # the right password, while locked, waits like the rest
        assert await guesses(url, ["ann"], PASSWORD) == {429: 1}
    refused = [r for r in audited(store) if r[1] == "sign_in"]
    assert len(refused) == 41 and {result for *_, result in refused} == {"refused"}

    store = Store(tmp_path / "other.sqlite3")
    async with served(create_app(settings, store, follow=False)) as url:
        # 40 names, one guess each, from one address at once: the address's limit holds too
        assert await guesses(url, [f"name-{n}" for n in range(40)]) == {401: 20, 429: 20}
        assert await guesses(url, ["bob"], PASSWORD) == {429: 1}  # the address is locked for everyone


@pytest.mark.integration
async def test_a_sign_in_during_a_flood_of_guesses_for_another_name_succeeds_and_clears_only_its_own(tmp_path):
    settings = settings_for(console_signin={"max_failures": 5})
    store = Store(tmp_path / "console.sqlite3")
    async with served(create_app(settings, store, follow=False)) as url:
        flood, right = await asyncio.gather(guesses(url, ["bob"] * 10), guesses(url, ["ann"], PASSWORD))
        assert flood == {401: 5, 429: 5} and right == {303: 1}
        assert await guesses(url, ["bob"], PASSWORD) == {429: 1}  # ann's success took none of bob's back
