"""A relay in front of a real model server that keeps what passed through it: every request as sent
and every reply as the server gave it. The real-model tests read the server's own usage and the
request shapes from here, not from the service's call log, so a miscount on either side shows."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web


@dataclass
class Exchange:
    method: str
    path: str
    request: dict[str, Any]
    status: int
    reply: dict[str, Any]


@dataclass
class Relay:
    target: str
    """the server's root, e.g. http://127.0.0.1:8000"""
    exchanges: list[Exchange] = field(default_factory=list)
    url: str = ""
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None

    async def start(self) -> str:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._relay)
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _relay(self, request: web.Request) -> web.Response:
        assert self._session is not None
        raw = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("content-type", "authorization")}
        async with self._session.request(
            request.method, self.target + request.path_qs, data=raw, headers=headers
        ) as answer:
            body = await answer.read()
            status, kind = answer.status, answer.headers.get("Content-Type", "application/json")
        try:
            reply = json.loads(body) if body else {}
        except ValueError:
            reply = {"text": body.decode(errors="replace")}
        self.exchanges.append(Exchange(request.method, request.path, json.loads(raw) if raw else {}, status, reply))
        return web.Response(body=body, status=status, content_type=kind.split(";")[0])

    def completions(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.path.endswith("/chat/completions")]

    def usage(self) -> tuple[int, int]:
        """(prompt_tokens, completion_tokens) summed over every reply that carried usage."""
        used = [e.reply.get("usage") or {} for e in self.completions()]
        return sum(u.get("prompt_tokens", 0) for u in used), sum(u.get("completion_tokens", 0) for u in used)
