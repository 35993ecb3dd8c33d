"""The `cyberjurors` command as an operator runs it: real subprocesses against the embedded broker."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from cyberjurors.kafka.cluster import TOPICS, client_options
from cyberjurors.schemas import PartyLetter, Verdict

from ..conftest import EXAMPLES, cli, read_topic, worker_process
from ..factories import case_data

pytestmark = pytest.mark.integration


async def test_topics_are_created_with_the_configured_partitions(settings):
    settings = settings.model_copy(update={"partitions": 3})
    first = cli(settings, "topics")
    assert first.returncode == 0, first.stderr
    assert "created" in first.stdout
    again = cli(settings, "topics")
    assert again.returncode == 0 and "all topics exist" in again.stdout

    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        described = await admin.describe_topics([settings.topic(t) for t in TOPICS])
    finally:
        await admin.close()
    assert {d["topic"]: len(d["partitions"]) for d in described} == {settings.topic(t): 3 for t in TOPICS}


async def test_produce_then_read_verdicts_from_the_command_line(settings, worker):
    case_file = sorted((EXAMPLES / "cases").glob("*.json"))[0]
    case_id = json.loads(case_file.read_text())["case_id"]
    sent = cli(settings, "produce", str(case_file))
    assert sent.returncode == 0, sent.stderr
    assert "sent 1 events for 1 cases" in " ".join(sent.stdout.split())

    lines: list[str] = []
    for _ in range(60):  # the verdict takes a few seconds; --no-follow returns once caught up
        read = cli(settings, "verdicts", "--raw", "--no-follow")
        assert read.returncode == 0, read.stderr
        lines = [line for line in read.stdout.splitlines() if line.strip()]
        if lines:
            break
    assert len(lines) == 1, lines
    verdict = Verdict.model_validate_json(lines[0])
    assert verdict.case_id == case_id and verdict.votes.total == settings.jurors


async def test_read_the_letters_from_the_command_line_each_with_its_party_s_own_words(settings, tmp_path):
    """`cyberjurors letters` reads disputes.letters as `verdicts` reads the verdicts: --raw gives the
    letters as JSON lines, the default prints each as the party reads it, their own values back."""
    settings = settings.model_copy(update={"letters": True})
    address, phone = "221B Baker Street, London NW1 6XE", "+44 7911 123456"
    case = case_data(
        "cli-letters-1",
        buyer=f"The kettle leaked; it was delivered to {address} and the puddle is in my photo.",
        seller=f"Call me on {phone}, the kettle left our warehouse intact.",
    )
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    async with worker_process(settings, tmp_path / "worker.log"):
        assert cli(settings, "produce", str(path)).returncode == 0
        assert len(await read_topic(settings, "disputes.letters", until=2, timeout_s=180)) == 2
    read = cli(settings, "letters", "--raw", "--no-follow")  # the worker stopped: the topic stays
    assert read.returncode == 0, read.stderr
    lines = [line for line in read.stdout.splitlines() if line.strip()]
    letters = {x.party: x for x in (PartyLetter.model_validate_json(line) for line in lines)}
    assert len(lines) == 2 and set(letters) == {"buyer", "seller"}, lines
    assert {x.case_id for x in letters.values()} == {"cli-letters-1"}
    assert address in letters["buyer"].body and phone not in letters["buyer"].body
    assert phone in letters["seller"].body and address not in letters["seller"].body

    shown = cli(settings, "letters", "--no-follow", COLUMNS="400")
    assert shown.returncode == 0, shown.stderr
    said = shown.stdout
    assert "letter to the buyer: cli-letters-1" in said and "letter to the seller: cli-letters-1" in said
    buyer_part, seller_part = said.split("letter to the seller")
    if said.index("letter to the buyer") > said.index("letter to the seller"):
        seller_part, buyer_part = said.split("letter to the buyer")
    assert address in buyer_part and phone not in buyer_part and "[PHONE_1]" in buyer_part
    assert phone in seller_part and address not in seller_part


def test_cyberjurors_settings_beat_an_exported_kafka_bootstrap_servers(settings):
    """A command run by a parent that hands it CYBERJURORS_KAFKA_BOOTSTRAP_SERVERS (here: the test)
    ignores the KAFKA_BOOTSTRAP_SERVERS the shell exports (a dead port)."""
    result = cli(settings, "topics", KAFKA_BOOTSTRAP_SERVERS="127.0.0.1:1", timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "created" in result.stdout


def test_produce_refuses_an_invalid_file_before_sending(settings, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"case_id": "x", "metadata": {"category": "toys"}, "rounds": []}))
    result = cli(settings, "produce", str(bad))
    assert result.returncode == 2
    assert "not sent" in result.stdout and "bad.json" in result.stdout and "category" in result.stdout
    assert "errors.pydantic.dev" not in result.stdout and "Traceback" not in result.stdout + result.stderr


def test_produce_refuses_a_file_that_is_not_text_in_one_line_for_people(settings, tmp_path):
    binary = tmp_path / "photo.json"
    binary.write_bytes(b"\xff\xd8\xff\xe0 not json, not utf-8")
    result = cli(settings, "produce", str(binary))
    assert result.returncode == 2
    assert "not sent" in result.stdout and "photo.json" in result.stdout and "UTF-8" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_invalid_settings_are_reported_not_raised(settings):
    result = cli(settings, "topics", CYBERJURORS_JURORS="0", CYBERJURORS_LLM_BACKEND="anthropic")
    assert result.returncode == 2 and "Traceback" not in result.stdout + result.stderr
    assert "invalid settings" in result.stdout and "jurors" in result.stdout


def test_schemas_export_writes_json_schema_for_the_public_events(tmp_path: Path, settings):
    result = cli(settings, "schemas", "export", str(tmp_path))
    assert result.returncode == 0, result.stderr
    event = json.loads((tmp_path / "dispute-event.schema.json").read_text())
    assert set(event["discriminator"]["mapping"]) == {"case", "case_opened", "evidence_submitted", "evidence_closed"}
    verdict = json.loads((tmp_path / "verdict.schema.json").read_text())
    assert {"verdict_id", "winner", "votes", "cited_clues", "backend"} <= set(verdict["required"])
    assert {"instance", "appeal_of", "escalated", "escalation_reasons"} <= set(verdict["properties"])
    appeal = json.loads((tmp_path / "appeal.schema.json").read_text())
    assert {"case_id", "appellant", "verdict_id", "grounds", "filed_at"} <= set(appeal["required"])
    assert appeal["properties"]["type"]["const"] == "appeal" and "evidence" in appeal["properties"]
    escalation = json.loads((tmp_path / "escalation.schema.json").read_text())
    assert {"escalation_id", "case_id", "verdict_id", "reasons", "verdict", "case_file"} <= set(escalation["required"])
    reasons = escalation["$defs"]["Verdict"]["properties"]["escalation_reasons"]["items"]["enum"]
    assert set(reasons) == {
        "narrow_margin",
        "low_precedent_coverage",
        "no_precedent_coverage",
        "verification_failed",
        "injection",
        "decisive_evidence_unreadable",
        "budget_reached",
        "inconsistent_with_precedent",
        "quorum_not_reached",
    }
    outcome = json.loads((tmp_path / "outcome.schema.json").read_text())
    assert "human_panel" in json.dumps(outcome["properties"]["source"])


def test_produce_refuses_what_a_worker_would_dead_letter_and_sends_nothing_of_the_folder(settings, tmp_path):
    folder = tmp_path / "cases"
    folder.mkdir()
    good = json.loads(next((EXAMPLES / "cases").glob("*.json")).read_text())
    (folder / "a-good.json").write_text(json.dumps(good))
    big = {**good, "case_id": "too-big"}
    big["rounds"] = [{**good["rounds"][0], "items": [{"id": "b1", "kind": "text", "text": "t" * 30_000}]}]
    (folder / "b-big.json").write_text(json.dumps(big))
    result = cli(
        settings,
        "produce",
        str(folder),
        CYBERJURORS_INTAKE_LIMITS__MAX_EVENT_BYTES="20000",
        CYBERJURORS_INTAKE_LIMITS__MAX_CASE_BYTES="10000",
        CYBERJURORS_INTAKE_LIMITS__MAX_TEXT_CHARS="50000",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "not sent" in result.stdout and "b-big.json" in result.stdout and "max_event_bytes" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr


def test_produce_says_what_is_wrong_with_deep_json_an_empty_file_and_accepts_a_byte_order_mark(settings, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 10_000 + "]" * 10_000)
    result = cli(settings, "produce", str(deep))
    assert result.returncode == 2 and "nested too deeply" in result.stdout, result.stdout + result.stderr
    empty = tmp_path / "empty.json"
    empty.write_text("")
    result = cli(settings, "produce", str(empty))
    assert result.returncode == 2 and "no case or event found" in result.stdout, result.stdout + result.stderr
    from cyberjurors.tooling.clients import read_events

    case = next((EXAMPLES / "cases").glob("*.json"))
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + case.read_bytes())
    assert [e.case_id for e in read_events([bom])] == [json.loads(case.read_text())["case_id"]]


def test_dlq_shows_producer_chosen_keys_without_their_control_characters():
    from cyberjurors.cli.base import shown

    assert shown("\x1b[2J\x1b[31mcase") == "\\x1b[2J\\x1b[31mcase"
    assert "\x1b" not in shown("\x1b]0;title\x07") and len(shown("k" * 5000)) == 80


def test_invalid_settings_are_reported_in_one_line_for_people(settings):
    result = cli(
        settings,
        "topics",
        CYBERJURORS_INTAKE_LIMITS__MAX_EVENT_BYTES="20000",
        CYBERJURORS_INTAKE_LIMITS__MAX_CASE_BYTES="30000",
    )
    assert result.returncode == 2 and "invalid settings" in result.stdout and "max_case_bytes" in result.stdout
    assert "errors.pydantic.dev" not in result.stdout and "Traceback" not in result.stdout + result.stderr


async def test_produce_sends_an_outcome_to_disputes_outcomes_and_refuses_a_key_given_twice(settings, tmp_path):
    from cyberjurors.kafka.cluster import ensure_topics

    from ..conftest import read_topic

    await ensure_topics(settings)
    outcome = tmp_path / "outcome.json"
    outcome.write_text(json.dumps({"type": "outcome", "case_id": "c-7", "votes": {"buyer": 12, "seller": 5}}))
    twice = tmp_path / "twice.json"
    twice.write_text('{"type": "outcome", "case_id": "c-7", "case_id": "c-8", "votes": {"buyer": 12, "seller": 5}}')
    refused = cli(settings, "produce", str(twice))
    assert refused.returncode == 2 and "appears twice" in refused.stdout, refused.stdout + refused.stderr
    strings = tmp_path / "strings.json"  # votes as strings: the worker parses outcomes strictly, so does produce
    strings.write_text(json.dumps({"type": "outcome", "case_id": "c-7", "votes": {"buyer": "12", "seller": "5"}}))
    assert cli(settings, "produce", str(strings)).returncode == 2
    sent = cli(settings, "produce", str(outcome), str(next((EXAMPLES / "cases").glob("*.json"))))
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert "1 outcomes to" in " ".join(sent.stdout.split())
    assert await read_topic(settings, "disputes.outcomes", until=1, timeout_s=20) == [("c-7", outcome.read_bytes())]
    assert len(await read_topic(settings, "disputes.events", until=2, timeout_s=5)) == 1


def test_the_broker_refuses_a_port_already_in_use() -> None:
    """Something already listening there would pass for the broker being up."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "cyberjurors", "broker", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1, lines
    assert f"127.0.0.1:{port} is in use" in lines[0]


@pytest.mark.parametrize(
    "command",
    [
        ["worker"],
        ["topics"],
        ["produce", str(EXAMPLES / "cases")],
        ["verdicts", "--no-follow"],
        ["letters", "--no-follow"],
        ["dlq"],
    ],
    ids=lambda command: command[0],
)
def test_a_kafka_that_cannot_be_reached_is_one_line_and_exit_75(settings, command):
    from cyberjurors.tooling.broker import free_port

    closed = f"127.0.0.1:{free_port()}"  # nothing listens there
    result = cli(settings, *command, CYBERJURORS_KAFKA_BOOTSTRAP_SERVERS=closed, timeout=120)
    assert result.returncode == 75, result.stderr[-3000:]  # EX_TEMPFAIL, as a worker that loses its broker
    said = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert "Traceback" not in result.stderr and not any(line.lstrip().startswith("│") for line in said)
    [line] = [line for line in said if "Kafka unreachable" in line]
    assert closed.split(":")[1] in line and "KAFKA_BOOTSTRAP_SERVERS" in line
    # at most the worker's own log line of the failed connection beside it (the worker configures logging)
    assert len(said) <= (2 if command == ["worker"] else 1), said
