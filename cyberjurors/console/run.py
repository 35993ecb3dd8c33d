"""Running the console: on a configured Kafka, or with ``--embedded`` beside its own embedded
broker and one worker (as the demo runs), optionally judging sample cases first."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import uuid
from pathlib import Path

import uvicorn
from rich.console import Console

from ..config import Settings
from ..streams.broker import embedded_broker
from ..streams.clients import produce, read_events
from ..streams.demo import seed_precedents
from ..streams.kafka import ensure_topics
from ..streams.worker_process import WorkerProcess
from .app import create_app


def sign_in_token(settings: Settings, out: Console) -> str | None:
    """The configured token; or, with neither a token nor users configured, one made for this run."""
    if settings.console_token or settings.console_users:
        return settings.console_token
    token = secrets.token_urlsafe(18)
    out.print(
        f"no console_token or console_users set: reviewers sign in with any user name and the password "
        f"[bold]{token}[/] (this run only)",
        highlight=False,
    )
    return token


def start_embedded(settings: Settings, stack: contextlib.ExitStack, paths: list[Path], out: Console) -> Settings:
    """The embedded broker, its topics and one worker (stopped with ``stack``), the given cases sent."""
    events = read_events(paths)
    workdir = Path(settings.datadir).parent
    workdir.mkdir(parents=True, exist_ok=True)
    seed_precedents(settings, out)
    bootstrap = stack.enter_context(embedded_broker(log=workdir / "broker.log"))
    settings = settings.model_copy(
        update={"kafka_bootstrap_servers": bootstrap, "app_id": f"{settings.app_id}-console-{uuid.uuid4().hex[:6]}"}
    )
    asyncio.run(ensure_topics(settings))
    # the worker needs no reviewer's credentials
    worker = WorkerProcess(
        settings.model_copy(update={"console_token": None, "console_users": {}}), workdir / "worker.log"
    )
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
    token = sign_in_token(settings, out)
    with contextlib.ExitStack() as stack:
        if embedded:
            settings = start_embedded(settings, stack, paths or [], out)
        app = create_app(settings, token=token, public_pages=True if embedded else None)
        out.print(
            f"console on [bold]http://{settings.console_host}:{settings.console_port}/[/] (reading "
            f"{settings.kafka_bootstrap_servers}; store {settings.console_db}); Ctrl-C stops it",
            highlight=False,
        )
        server = uvicorn.Server(
            uvicorn.Config(
                app, host=settings.console_host, port=settings.console_port, log_level="warning", access_log=False
            )
        )
        asyncio.run(server.serve())
    return 0
