"""The console served on a Unix socket (``console_socket``), as the Kubernetes pod runs it behind
oauth2-proxy: the single-sign-on header is believed on the socket, and the console has no TCP port,
so `kubectl port-forward` (which reaches a pod's TCP ports only) cannot name anyone. Before, the
console listened on the pod's loopback and believed the header from 127.0.0.1, where a port-forward
arrives too. Served by uvicorn with the command's own configuration (console/run.py), asked with
httpx over the socket."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from cyberjurors.config import Settings
from cyberjurors.console.app import create_app
from cyberjurors.console.run import Exposed, check_exposure, run_users, server_config
from cyberjurors.console.store import Store
from cyberjurors.tooling.broker import free_port

from .test_auth import audited, settings_for


def socket_settings(tmp_path: Path, **over: object) -> Settings:
    # short: a Unix socket's path has a limit of about 100 bytes, which pytest's tmp_path may pass
    path = Path(f"/tmp/cj-{tmp_path.name[-12:]}-{free_port()}") / "console.sock"
    return settings_for(
        console_socket=path,
        console_port=free_port(),  # what it would have listened on: nothing may
        console_users={},
        console_token=None,
        console_proxy={"behind": True},
        console_group_roles={"cyberjurors-reviewers": ["reviewer"]},
        **over,
    )


@contextlib.asynccontextmanager
async def served(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    server = uvicorn.Server(server_config(settings, create_app(settings, store, follow=False)))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            assert not serving.done(), "the console did not start"
            await asyncio.sleep(0.05)
        transport = httpx.AsyncHTTPTransport(uds=str(settings.console_socket))
        async with httpx.AsyncClient(transport=transport, base_url="http://console.example") as client:
            yield client
    finally:
        server.should_exit = True
        await serving
        with contextlib.suppress(FileNotFoundError):
            settings.console_socket.unlink()  # type: ignore[union-attr]
        with contextlib.suppress(OSError):
            settings.console_socket.parent.rmdir()  # type: ignore[union-attr]


async def probe(settings: Settings) -> int:
    command = [sys.executable, "-m", "cyberjurors.console.probe", str(settings.console_socket)]
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, timeout=30)
    return done.returncode


SSO = {"X-Forwarded-User": "ann", "X-Forwarded-Groups": "cyberjurors-reviewers"}


async def test_on_its_socket_the_console_believes_the_proxy_and_listens_on_no_port(tmp_path):
    settings = socket_settings(tmp_path)
    store = Store(tmp_path / "console.sqlite3")
    async with served(settings, store) as client:
        page = await client.get("/review", headers=SSO)
        assert page.status_code == 200 and "ann" in page.text and "reviewer" in page.text
        nobody = await client.get("/review")  # no header: nobody, sent to sign in
        assert nobody.status_code == 303 and nobody.headers["location"].startswith("/login")
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", settings.console_port), timeout=2):
            pass  # nothing listens where a port-forward would arrive
        assert await probe(settings) == 0  # the pod's exec probe, run as the kubelet runs it
    assert await probe(settings) == 1  # nothing serves the socket now
    assert not [r for r in audited(store) if r[1] == "untrusted_sso_header"]


async def test_over_tcp_the_header_is_refused_unless_its_address_is_a_trusted_proxy(tmp_path):
    """What the socket replaces: on TCP the header is believed by address, and a port-forward's
    connection arrives from 127.0.0.1. With no trusted proxy the header is refused and audited."""
    settings = settings_for(console_proxy={"trusted": []}, console_port=free_port())
    store = Store(tmp_path / "console.sqlite3")
    server = uvicorn.Server(server_config(settings, create_app(settings, store, follow=False)))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.console_port}") as client:
            assert (await client.get("/review", headers=SSO)).status_code == 403
    finally:
        server.should_exit = True
        await serving
    assert [r[1] for r in audited(store)] == ["untrusted_sso_header"]


def test_a_socket_needs_no_bind_check_and_no_run_user_but_not_with_embedded(tmp_path):
    from rich.console import Console

    settings = socket_settings(tmp_path)
    check_exposure(settings, embedded=False)  # no TCP port: nothing reaches it but what reaches the file
    assert run_users(settings, Console(quiet=True)) == (settings, None)  # sign-in is the proxy's
    with pytest.raises(Exposed):
        check_exposure(settings, embedded=True)
    config = server_config(settings, object())
    assert config.uds == str(settings.console_socket) and config.proxy_headers is False
