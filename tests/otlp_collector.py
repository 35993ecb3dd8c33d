"""A small OTLP/HTTP trace receiver for tests: what a collector would get from a worker.

It answers ``POST /v1/traces`` as the OpenTelemetry protocol says (a protobuf
``ExportTraceServiceRequest`` in, an empty ``ExportTraceServiceResponse`` out), decodes each request
with ``opentelemetry-proto`` and keeps the spans as ``Received`` records. Only the receiving end is
ours; the worker exports through the real SDK and its real OTLP exporter.
"""

from __future__ import annotations

import asyncio
import gzip
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def value_of(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(value_of(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


@dataclass
class Received:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: str
    attributes: dict[str, Any]
    status: int
    service: str
    start_ns: int = 0


@dataclass
class Collector:
    spans: list[Received] = field(default_factory=list)
    requests: int = 0
    url: str = ""
    _runner: web.AppRunner | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        encoding = request.headers.get("Content-Encoding", "")
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        self.requests += 1
        for resource_spans in export.resource_spans:
            resource = {kv.key: value_of(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    self.spans.append(
                        Received(
                            span.name,
                            span.trace_id.hex(),
                            span.span_id.hex(),
                            span.parent_span_id.hex(),
                            KINDS.get(span.kind, str(span.kind)),
                            {kv.key: value_of(kv.value) for kv in span.attributes},
                            span.status.code,
                            str(resource.get("service.name", "")),
                            span.start_time_unix_nano,
                        )
                    )
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )

    async def wait_for(self, done: Any, timeout_s: float = 60) -> bool:
        """Until ``done(spans)`` is true (the exporter sends in batches, every few seconds)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if done(self.spans):
                return True
            await asyncio.sleep(0.2)
        return done(self.spans)
