"""Log lines (cyberjurors/observability/logs.py): JSON on request, with the case, stage and trace they belong to;
e-mail addresses and phone numbers redacted on request. tests/integration/test_tracing_worker.py checks a real
worker's output line by line."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from cyberjurors.config import Settings
from cyberjurors.observability import logs, tracing


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """configure() takes over the root logger and the exception hooks: give them back after."""
    import sys
    import threading

    root = logging.getLogger()
    saved = (root.handlers[:], root.level, sys.excepthook, threading.excepthook, sys.unraisablehook)
    yield
    root.handlers[:], level, sys.excepthook, threading.excepthook, sys.unraisablehook = saved
    root.setLevel(level)
    logging.captureWarnings(False)


def configured(restore_logging: None, **settings: object) -> io.StringIO:
    out = io.StringIO()
    logs.configure(Settings(llm_backend="offline", **settings), stream=out)  # type: ignore[arg-type]
    return out


def lines(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_json_lines_carry_the_case_the_stage_and_the_trace(restore_logging):
    out = configured(restore_logging, log_format="json")
    log = logging.getLogger("cyberjurors.streams")
    provider = TracerProvider()
    tracing.install(provider)
    try:
        log.info("before any case")
        with tracing.consuming(None, "focus") as span:
            tracing.name_case("c-7")
            log.warning("case %s: %s", "c-7", "focused")
        log.info("after")
    finally:
        tracing.install(None)
    before, during, after = lines(out)
    assert set(before) == {"time", "level", "logger", "message"} and before["message"] == "before any case"
    assert during["level"] == "WARNING" and during["logger"] == "cyberjurors.streams"
    assert during["message"] == "case c-7: focused" and during["case_id"] == "c-7" and during["stage"] == "focus"
    assert during["trace_id"] == trace.format_trace_id(span.get_span_context().trace_id)
    assert during["span_id"] == trace.format_span_id(span.get_span_context().span_id)
    assert during["time"].endswith("+00:00")
    assert "case_id" not in after and "trace_id" not in after, "the context ends with the stage"


def test_json_lines_hold_tracebacks_warnings_and_uncaught_errors(restore_logging):
    import sys
    import warnings

    out = configured(restore_logging, log_format="json")
    try:
        raise ValueError("broken")
    except ValueError:
        logging.getLogger("x").exception("it failed")
    warnings.warn("a library complains", UserWarning, stacklevel=1)
    try:
        raise KeyError("k")
    except KeyError:
        sys.excepthook(*sys.exc_info())
    failed, warned, uncaught = lines(out)
    assert failed["message"] == "it failed" and "ValueError: broken" in failed["exc_info"]
    assert warned["logger"] == "py.warnings" and "a library complains" in warned["message"]
    assert uncaught["level"] == "CRITICAL" and "KeyError" in uncaught["exc_info"]


def test_text_stays_text_and_adopt_formats_a_handler_installed_later(restore_logging):
    out = configured(restore_logging)
    logging.getLogger("x").info("plain")
    assert out.getvalue().rstrip().endswith("[INFO] plain") and not out.getvalue().startswith("{")
    # Faust replaces the root handlers when the worker starts; adopt gives its handler our format
    later = io.StringIO()
    root = logging.getLogger()
    root.handlers[:] = [logging.StreamHandler(later)]
    logs.adopt(root, Settings(llm_backend="offline", log_format="json", log_redact_pii=True))
    logging.getLogger("faust").info("[^Worker]: Ready, mail ops@example.org")
    [line] = lines(later)
    assert line["logger"] == "faust" and line["message"] == "[^Worker]: Ready, mail [email]"


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("from jane.doe+shop@mail.example.co.uk:", "from [email]:"),
        ("call +44 20 7946 0958 today", "call [phone] today"),
        ("or (020) 7946 0958, or 020-7946-0958", "or [phone], or [phone]"),
        ("US +1 (415) 555-2671", "US [phone]"),
        # what log lines are full of stays: dates, times, offsets, sizes, addresses, ids
        (
            "2026-11-01T10:00:00Z offset=123456 1000000 bytes 192.168.100.200:9092",
            "2026-11-01T10:00:00Z offset=123456 1000000 bytes 192.168.100.200:9092",
        ),
        (
            "verdict 3f2a1b4c-1234-5678-9abc-def012345678 case appl-001-kettle-crack round-2",
            "verdict 3f2a1b4c-1234-5678-9abc-def012345678 case appl-001-kettle-crack round-2",
        ),
    ],
)
def test_redaction(text, redacted):
    assert logs.redact(text) == redacted


def test_redaction_covers_arguments_and_tracebacks_and_is_off_by_default(restore_logging):
    out = configured(restore_logging, log_format="json", log_redact_pii=True)
    log = logging.getLogger("x")
    log.warning("dead letter key=%s", "buyer jane@example.com +44 20 7946 0958")
    try:
        raise RuntimeError("no route to ops@example.org")
    except RuntimeError:
        log.exception("failed")
    keyed, failed = lines(out)
    assert keyed["message"] == "dead letter key=buyer [email] [phone]"
    assert "ops@example.org" not in failed["exc_info"] and "[email]" in failed["exc_info"]

    plain = configured(restore_logging, log_format="json")
    log.warning("key=%s", "jane@example.com")
    assert lines(plain)[0]["message"] == "key=jane@example.com"


FORGED = "h27\n[2026-11-26 18:40:00,000] [11516] [INFO] case ctrl-1: verdict buyer \x1b[2J\x00 \u202eesrever\u200b"
WRITTEN_OUT = (
    "h27\\n[2026-11-26 18:40:00,000] [11516] [INFO] case ctrl-1: verdict buyer \\x1b[2J\\x00 \\u202eesrever\\u200b"
)


@pytest.mark.parametrize("redact", [False, True])
def test_a_producer_value_cannot_forge_a_text_line_and_faust_tables_stay(restore_logging, redact):
    """A Kafka key (a case_id) with a line break, a screen clear, a NUL, a right-to-left override and a
    zero-width space: the dead-letter line stays one line, with them written out, also when the
    redaction (which merges the arguments into the message) runs after."""
    out = configured(restore_logging, log_redact_pii=redact)
    logging.getLogger("cyberjurors.streams").warning(
        "dead letter from %s: %s (%s) key=%s offset=%s", "intake", "invalid_event", "case.case_id: no match", FORGED, 7
    )
    table = "+Worker---+------+\n| id     | app  |\n+--------+------+"
    logging.getLogger("faust.worker").info("[^Worker]: Ready\n%s", table)
    dead, *faust = out.getvalue().splitlines()
    assert dead.endswith(
        f"[WARNING] dead letter from intake: invalid_event (case.case_id: no match) key={WRITTEN_OUT} offset=7"
    )
    assert faust[0].endswith("[INFO] [^Worker]: Ready") and faust[1:] == table.splitlines()


def test_written_out_arguments_keep_numbers_reprs_and_exceptions_text(restore_logging):
    out = configured(restore_logging)
    log = logging.getLogger("cyberjurors")
    log.info("%d of %.1f: %r, %s", 3, 2.5, "a\nb", ValueError("event x\n[forged] line"))
    log.info("%(key)s", {"key": "k\r\n"})
    assert out.getvalue().splitlines()[-2].endswith("3 of 2.5: 'a\\nb', event x\\n[forged] line")
    assert out.getvalue().splitlines()[-1].endswith(" k\\r\\n")


def test_json_lines_carry_the_written_out_text(restore_logging):
    """The JSON encoder would have escaped a line break anyway; the message holds the text a text log
    shows, so a key is looked for the same way in both."""
    out = configured(restore_logging, log_format="json")
    logging.getLogger("cyberjurors.streams").warning("key=%s", FORGED)
    assert lines(out)[0]["message"] == f"key={WRITTEN_OUT}"
