"""A TCP relay in front of the embedded broker for librdkafka 2.0 (Debian 12's, under kcat): every
byte passes as it is, except the tagged fields at the end of an ApiVersions v3+ answer, which are
dropped. Tansu 0.6 sends four there (SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures,
ZkMigrationReady), encoded as the protocol says; librdkafka 2.0.2 misreads them ("Read underflow"
on ApiVersion v3) and gives up on the broker. The fields are optional, so a client that gets none
reads the same versions. Clients reach the broker through the relay when the broker advertises the
relay's address (``start_broker(advertised=...)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
from collections.abc import AsyncIterator, Iterator

API_VERSIONS = 18


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """An unsigned varint at ``at``: its value and where the next field starts."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _skip_tags(data: bytes, at: int) -> int:
    count, at = _varint(data, at)
    for _ in range(count):
        _, at = _varint(data, at)  # the tag
        size, at = _varint(data, at)
        at += size
    return at


def without_tags(response: bytes) -> bytes:
    """An ApiVersions v3+ answer (correlation id first) without its closing tagged fields."""
    at = 4 + 2  # correlation id, error code
    entries, at = _varint(response, at)
    for _ in range(max(0, entries - 1)):  # a compact array's length is stored plus one
        at = _skip_tags(response, at + 6)  # api key, min and max version
    at += 4  # throttle time
    return response[:at] + b"\x00"


async def _frames(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        yield await reader.readexactly(size)


async def _relay(client: asyncio.StreamReader, to_client: asyncio.StreamWriter, upstream: tuple[str, int]) -> None:
    broker, to_broker = await asyncio.open_connection(*upstream)
    asked: set[int] = set()  # correlation ids of ApiVersions v3+ requests on this connection

    async def requests() -> None:
        async for frame in _frames(client):
            key, version, correlation = struct.unpack(">hhi", frame[:8])
            if key == API_VERSIONS and version >= 3:
                asked.add(correlation)
            to_broker.write(struct.pack(">i", len(frame)) + frame)
            await to_broker.drain()

    async def responses() -> None:
        async for frame in _frames(broker):
            (correlation,) = struct.unpack(">i", frame[:4])
            if correlation in asked:
                asked.discard(correlation)
                frame = without_tags(frame)
            to_client.write(struct.pack(">i", len(frame)) + frame)
            await to_client.drain()

    try:
        await asyncio.gather(requests(), responses())
    except (asyncio.IncompleteReadError, ConnectionError):
        pass  # either side closed: close the other
    finally:
        for writer in (to_broker, to_client):
            writer.close()


@contextlib.contextmanager
def relay(port: int, upstream: tuple[str, int]) -> Iterator[str]:
    """The relay on 127.0.0.1:``port``, in a thread of its own (a test blocked on kcat must not stop it)."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    server: list[asyncio.Server] = []

    async def serve() -> None:
        server.append(
            await asyncio.start_server(lambda r, w: _relay(r, w, upstream), "127.0.0.1", port, reuse_address=True)
        )
        started.set()

    thread = threading.Thread(target=loop.run_forever, name="apiversions-shim", daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop).result(10)
    started.wait(10)

    async def stop() -> None:
        server[0].close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    try:
        yield f"127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
