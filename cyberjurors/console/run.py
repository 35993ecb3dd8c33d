"""Running the console: on a configured Kafka, or with ``--embedded`` beside its own embedded
broker and one worker (as the demo runs), optionally judging sample cases first.

It refuses to be reached from other machines unprotected: a bind to a non-loopback address needs
someone who can sign in (console_users, console_token or a trusted SSO proxy) and HTTPS, its own
(console_tls.cert) or a proxy's (console_proxy.behind); ``--embedded``, whose pages are open,
serves on loopback only."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import secrets
import uuid
from pathlib import Path
from typing import Any

import uvicorn
from rich.console import Console

from ..config import Settings
from ..errors import CyberJurorsError
from ..kafka.cluster import ensure_topics
from ..kafka.producers import on_embedded
from ..tooling.broker import embedded_broker
from ..tooling.clients import produce, read_events
from ..tooling.demo import seed_precedents
from ..tooling.worker_process import WorkerProcess
from .app import create_app
from .auth import hash_password

RUN_USER = "admin"


class Exposed(CyberJurorsError, ValueError):
    kind = "console_exposed"


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(settings: Settings, embedded: bool) -> None:
    """Refuse a start that would serve the console to other machines without sign-in or HTTPS."""
    host = settings.console_host
    if settings.console_socket is not None:  # no TCP port: who reaches the socket's file reaches it
        if embedded:
            raise Exposed("--embedded serves its pages on loopback: console_socket is for a proxy beside the console")
        return
    if loopback(host):
        return
    if embedded:
        raise Exposed(
            f"--embedded serves its pages to anyone who can reach them: it binds loopback only, not {host} "
            "(run `cyberjurors console` on your Kafka to serve other machines)"
        )
    if not (settings.console_users or settings.console_token or settings.console_proxy.trusted):
        raise Exposed(
            f"console_host={host} reaches other machines, and no one could sign in: set console_users, "
            "console_token or console_proxy.trusted (docs/console-deployment.md)"
        )
    if not (settings.console_tls.cert or settings.console_proxy.behind):
        raise Exposed(
            f"console_host={host} would send passwords and sessions in plain HTTP: set console_tls.cert and "
            "console_tls.key, or console_proxy.behind=true when a proxy in front serves HTTPS"
        )
    if bool(settings.console_tls.cert) != bool(settings.console_tls.key):
        raise Exposed("console_tls.cert and console_tls.key go together")


def run_users(settings: Settings, out: Console) -> tuple[Settings, dict[str, str] | None]:
    """With no one configured to sign in (on loopback), a user for this run with every role, its
    password printed; else the configured ones."""
    if settings.console_users or settings.console_token or settings.console_proxy.trusted:
        return settings, None
    if settings.console_socket is not None:  # people sign in at the proxy in front
        return settings, None
    password = secrets.token_urlsafe(18)
    out.print(
        f"no console_users set: sign in as [bold]{RUN_USER}[/] with the password [bold]{password}[/] "
        "(this run only; reviewer, supervisor and operator)",
        highlight=False,
    )
    roles = settings.console_user_roles | {RUN_USER: ["reviewer", "supervisor", "operator"]}
    return settings.model_copy(update={"console_user_roles": roles}), {RUN_USER: hash_password(password)}


def start_embedded(settings: Settings, stack: contextlib.ExitStack, paths: list[Path], out: Console) -> Settings:
    """The embedded broker, its topics and one worker (stopped with ``stack``), the given cases sent."""
    events = read_events(paths)
    workdir = Path(settings.datadir).parent
    workdir.mkdir(parents=True, exist_ok=True)
    seed_precedents(settings, out)
    bootstrap = stack.enter_context(embedded_broker(log=workdir / "broker.log"))
    update: dict[str, object] = {
        "kafka_bootstrap_servers": bootstrap,
        "app_id": f"{settings.app_id}-console-{uuid.uuid4().hex[:6]}",
        **on_embedded(settings),  # no idempotence there: set, not probed
    }
    if not settings.outcome_signing_key:  # this run's console signs, this run's worker verifies
        update["outcome_signing_key"] = secrets.token_urlsafe(32)
    settings = settings.model_copy(update=update)
    asyncio.run(ensure_topics(settings))
    # the worker verifies the console's decisions: it needs the signing key, and no one's sign-in
    worker = WorkerProcess(settings.for_worker(), workdir / "worker.log")
    stack.push(worker)
    worker.start()
    out.print(
        f"embedded broker (Tansu) on {bootstrap}; worker started (backend: {settings.backend}; log: {worker.log_path})",
        highlight=False,
    )
    if events:
        asyncio.run(produce(settings, events))
        out.print(f"produced {len(events)} events for {len({e.case_id for e in events})} cases", highlight=False)
    return settings


def run_console(settings: Settings, out: Console, embedded: bool = False, paths: list[Path] | None = None) -> int:
    check_exposure(settings, embedded)
    settings, users = run_users(settings, out)
    if not settings.outcome_signing_key and not embedded:
        out.print(
            "[yellow]no outcome_signing_key set:[/] decisions cannot be published (the workers refuse unsigned "
            "ones); set the workers' key here too",
            highlight=False,
        )
    with contextlib.ExitStack() as stack:
        if embedded:
            settings = start_embedded(settings, stack, paths or [], out)
        app = create_app(settings, users=users, public_pages=True if embedded else None)
        out.print(
            f"console on [bold]{served_at(settings)}[/] (reading "
            f"{settings.kafka_bootstrap_servers}; store {settings.console_db}); Ctrl-C stops it",
            highlight=False,
        )
        asyncio.run(uvicorn.Server(server_config(settings, app)).serve())
    return 0


def served_at(settings: Settings) -> str:
    if settings.console_socket is not None:
        return f"unix:{settings.console_socket}"
    scheme = "https" if settings.console_tls.cert else "http"
    return f"{scheme}://{settings.console_host}:{settings.console_port}/"


def server_config(settings: Settings, app: Any) -> uvicorn.Config:
    """How uvicorn serves the console: on console_socket when set (no TCP port at all), else on
    console_host:console_port."""
    where: dict[str, Any] = (
        {"uds": str(settings.console_socket)}
        if settings.console_socket is not None
        else {"host": settings.console_host, "port": settings.console_port}
    )
    if settings.console_socket is not None:
        settings.console_socket.parent.mkdir(parents=True, exist_ok=True)
    return uvicorn.Config(
        app,
        **where,
        log_level="warning",
        access_log=False,
        ssl_certfile=settings.console_tls.cert,
        ssl_keyfile=settings.console_tls.key,
        # the client address the sign-in lockout and the SSO check go by is the socket's, never a header's
        proxy_headers=False,
        h11_max_incomplete_event_size=16 * 1024,
    )
