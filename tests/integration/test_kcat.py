"""A client that is not the project's Python: kcat (librdkafka, from Debian) produces a case as a
CloudEvent to the embedded broker, a real worker judges it, and kcat reads the verdict back with
its headers, which are the CloudEvents binary-mode ones (docs/concepts/messages.md). An event whose
ce_type is not its body's comes back as a dead letter, read the same way. The worker's producer,
refused idempotence by the embedded broker, said so once.

`make test` installs kcat (Debian's package); without it these tests skip, saying so. Debian 12's
kcat runs on librdkafka 2.0.2, which misreads the embedded broker's ApiVersions answer, so it (and
the worker) reach a broker of this module's own through a relay that drops the optional fields it
trips on (tests/apiversions_shim.py); everything else passes byte for byte.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cyberjurors.config import Settings
from cyberjurors.schemas import DeadLetter, Verdict
from cyberjurors.tooling.broker import free_port, start_broker, stop_process
from cyberjurors.tooling.clients import read_events

from ..apiversions_shim import relay
from ..conftest import EXAMPLES

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(
    KCAT is None, reason="kcat is not installed (Debian package kcat; `make test` installs it as root)"
)

TRACE_ID = uuid.uuid4().hex  # the platform's trace: the verdict's traceparent must continue it
CASE = EXAMPLES / "cases" / "clot-001-shirt-torn-seam.json"


@pytest.fixture(scope="module")
def relayed_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An embedded broker that tells its clients the relay's address, and the relay before it."""
    port = free_port()
    process, bootstrap = start_broker(
        log=tmp_path_factory.mktemp("broker") / "tansu.log", advertised=f"127.0.0.1:{port}"
    )
    host, upstream = bootstrap.rsplit(":", 1)
    try:
        with relay(port, (host, int(upstream))) as address:
            yield address
    finally:
        stop_process(process)


@pytest.fixture
def settings(settings: Settings, relayed_broker: str) -> Settings:
    return settings.model_copy(update={"kafka_bootstrap_servers": relayed_broker})


def kcat(settings: Settings, *args: str, data: bytes | None = None) -> str:
    done = subprocess.run(
        [KCAT, "-b", settings.kafka_bootstrap_servers, "-q", *args],  # type: ignore[list-item]
        input=data,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode()


def kcat_produce(settings: Settings, key: str, value: bytes, headers: dict[str, str]) -> None:
    """One message, as a platform's librdkafka producer sends it (-H each header, the value on stdin)."""
    flags = [f for name, text in headers.items() for f in ("-H", f"{name}={text}")]
    kcat(settings, "-P", "-t", settings.topic("disputes.events"), "-k", key, *flags, data=value)


async def kcat_read(settings: Settings, topic: str, key: str, timeout_s: float = 120) -> dict:
    """The first message keyed ``key`` on ``topic``, as kcat's JSON envelope (-J: key, payload,
    headers as a flat [name, value, ...] list), polled until it is there."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        out = await asyncio.to_thread(kcat, settings, "-C", "-t", settings.topic(topic), "-o", "beginning", "-e", "-J")
        for line in out.splitlines():
            message = json.loads(line)
            if message.get("key") == key:
                return message
        assert asyncio.get_running_loop().time() < deadline, f"no message keyed {key} on {topic}"
        await asyncio.sleep(0.5)


def headers_of(message: dict) -> dict[str, str]:
    flat = message.get("headers") or []
    return dict(zip(flat[::2], flat[1::2], strict=True))


def ce_headers(case_id: str, value: bytes, **changed: str) -> dict[str, str]:
    """A platform's CloudEvent for a whole case, with its own id and source and a trace context."""
    return {
        "ce_specversion": "1.0",
        "ce_id": f"shop-{hashlib.sha256(value).hexdigest()[:12]}",
        "ce_source": "//shop.example/disputes",
        "ce_type": "com.cyberjurors.case.v1",
        "ce_time": "2026-11-27T10:00:00Z",
        "content-type": "application/json",
        "traceparent": f"00-{TRACE_ID}-{uuid.uuid4().hex[:16]}-01",
        **changed,
    }


async def test_kcat_produces_a_case_and_reads_its_verdict_with_the_cloudevents_headers(
    settings: Settings, worker, tmp_path: Path
):
    [event] = read_events([CASE])
    case_id = f"kc-{uuid.uuid4().hex[:8]}"
    value = event.value.replace(event.case_id.encode(), case_id.encode())
    kcat_produce(settings, case_id, value, ce_headers(case_id, value))

    message = await kcat_read(settings, "disputes.verdicts", case_id)
    verdict = Verdict.model_validate_json(message["payload"])
    assert verdict.case_id == case_id
    headers = headers_of(message)
    assert headers["ce_specversion"] == "1.0"
    assert headers["ce_type"] == "com.cyberjurors.verdict.v1"
    assert headers["ce_source"] == f"/cyberjurors/{settings.topic('disputes.verdicts')}"
    assert re.fullmatch(r"[0-9a-f]{32}", headers["ce_id"]), headers["ce_id"]
    assert headers["ce_time"] == verdict.decided_at.isoformat().replace("+00:00", "Z")
    assert headers["ce_dataschema"] == "https://docs.cyberjurors.example/schemas/v1/verdict.schema.json"
    assert headers["content-type"] == "application/json"
    # the platform's trace goes on: tracing is off in the worker, so its context passes through unchanged
    assert headers["traceparent"].split("-")[1] == TRACE_ID

    # the worker's producer (Faust's) was refused idempotence by the embedded broker: one warning
    log = (tmp_path / "worker.log").read_text()
    assert len(re.findall(r"producing without idempotence", log)) == 1, log[-3000:]


async def test_an_event_whose_ce_type_is_not_its_body_is_a_dead_letter_kcat_reads(settings: Settings, worker):
    [event] = read_events([CASE])
    case_id = f"kt-{uuid.uuid4().hex[:8]}"
    value = event.value.replace(event.case_id.encode(), case_id.encode())
    kcat_produce(settings, case_id, value, ce_headers(case_id, value, ce_type="com.cyberjurors.evidence_closed.v1"))

    message = await kcat_read(settings, "disputes.dlq", case_id)
    letter = DeadLetter.model_validate_json(message["payload"])
    assert (letter.reason, letter.stage, letter.replayable) == ("ce_type_mismatch", "intake", False)
    assert "com.cyberjurors.case.v1" in letter.detail  # what the body's type asks for
    headers = headers_of(message)
    assert headers["ce_type"] == "com.cyberjurors.dead_letter.v1"
    assert headers["ce_source"] == f"/cyberjurors/{settings.topic('disputes.dlq')}"
    assert headers["ce_time"] == letter.failed_at.isoformat().replace("+00:00", "Z")
    assert headers["ce_dataschema"].endswith("/v1/dead-letter.schema.json")
