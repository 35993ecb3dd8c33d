"""Log lines: Faust's text, or one JSON object a line, with the case, stage and trace they belong to.

Everything goes through the standard ``logging`` module; this module only chooses the formatter
and adds its filters to the handlers that write:

* ``CaseContext`` puts ``case_id`` and ``stage`` (context variables the stage handlers set with
  ``about``) and the current OpenTelemetry span's ``trace_id`` and ``span_id`` on each record, where
  known, so a JSON line can be found by case or opened as a trace;
* ``WriteOut`` writes out (as Python escapes: ``\\n``, ``\\x1b``, ``\\u202e``) the characters that are
  not printable in the arguments of our own loggers' lines (``cyberjurors*``): case ids, Kafka keys,
  event ids and details are chosen by producers, and a newline in one would otherwise forge a whole
  log line in the text format, an ESC drive the terminal that shows it, a NUL make grep call the log
  binary. Our format strings are left as they are, and so are other loggers' lines (Faust's
  multi-line tables). It runs in the JSON format too, where the encoder would have escaped them
  anyway: a JSON reader gets the written-out text (``\\n`` as two characters), the same text a
  text log shows, so a key is searched for the same way in both;
* ``Redact`` (``log_redact_pii``) replaces e-mail addresses and phone numbers in the message and
  any traceback with ``[email]`` and ``[phone]``.

A worker calls ``configure`` first thing, so lines logged (or warnings issued) while it imports and
starts are formatted too; Faust then installs its own handler (``mode``'s ``setup_logging``), and
the worker hands that one to ``adopt``. Secrets are never logged: settings are not logged whole,
and the API keys are only ever given to the SDK clients.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import IO, Any

from opentelemetry import trace
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from ..config import ObservabilitySettings

case_id: ContextVar[str | None] = ContextVar("cyberjurors_case_id", default=None)
stage: ContextVar[str | None] = ContextVar("cyberjurors_stage", default=None)

# best effort, for the shapes people type: name@host.tld; +44 20 7946 0958, (020) 7946 0958, 020-7946-0958.
# Dates (2026-11-01), times, offsets, sizes and ids (digits without separators, hex, UUIDs) are left alone.
EMAIL = re.compile(r"[\w.%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
PHONE = re.compile(
    r"(?<![\w+.-])(?:\+\d{1,3}[\s.-]?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]?\d{2,4}){1,4}"
    r"|\(\d{2,5}\)[\s.-]?\d{3,4}[\s.-]?\d{3,4}|\d{3,5}[\s.-]\d{3,4}[\s.-]\d{3,4})(?![\w-]|\.\d)"
)


def redact(text: str) -> str:
    return PHONE.sub("[phone]", EMAIL.sub("[email]", text))


def written_out(text: str) -> str:
    """``text`` with every character ``str.isprintable`` refuses (controls, line breaks, ESC, NUL,
    format characters such as U+202E and U+200B) written out as its Python escape; a printable
    text is returned as it is, so writing out twice changes nothing."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


@contextlib.contextmanager
def about(case: str | None = None, stage_name: str | None = None) -> Iterator[None]:
    """Lines logged inside carry this case and stage (none when None). Both are restored on leaving,
    also when set again inside (a stage learns its case once it has read the message)."""
    tokens = [(var, var.set(value)) for var, value in ((case_id, case), (stage, stage_name))]
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class CaseContext(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in (("case_id", case_id.get()), ("stage", stage.get())):
            if value is not None and not hasattr(record, name):
                setattr(record, name, value)
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            record.trace_id = trace.format_trace_id(span.trace_id)
            record.span_id = trace.format_span_id(span.span_id)
        return True


class _WrittenOut(str):
    """An argument written out for ``%s``; ``%r`` gets its repr, written out too."""

    value: object

    def __new__(cls, value: object, text: str) -> _WrittenOut:
        self = super().__new__(cls, written_out(text))
        self.value = value
        return self

    def __repr__(self) -> str:
        return written_out(repr(self.value))


def _write_out(arg: object) -> object:
    # numbers keep their type for %d and %.1f; an exception or a model carries the producer's values
    # in its str() as much as a str does
    if arg is None or isinstance(arg, (bool, int, float, _WrittenOut)):
        return arg
    try:
        text = arg if isinstance(arg, str) else str(arg)
    except Exception:  # getMessage fails the same way, and logging reports it there
        return arg
    return arg if text.isprintable() else _WrittenOut(arg, text)


class WriteOut(logging.Filter):
    """Before ``Redact``, which merges the arguments into the message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.args or not (record.name == "cyberjurors" or record.name.startswith("cyberjurors.")):
            return True
        if isinstance(record.args, Mapping):  # log.info("%(key)s", {"key": ...})
            record.args = {k: _write_out(v) for k, v in record.args.items()}
        else:
            record.args = tuple(_write_out(a) for a in record.args)
        return True


class Redact(logging.Filter):
    """The message (arguments merged in) and the traceback, redacted once for every handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "_redacted", False):
            return True
        record.msg, record.args = redact(record.getMessage()), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text, record.exc_info = redact(record.exc_text), None
        record._redacted = True
        return True


class JsonLines(JsonFormatter):
    """time (ISO 8601, UTC), level, logger, message, then what the filters and ``extra=`` added."""

    def __init__(self) -> None:
        super().__init__(
            ["levelname", "name", "message"],
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
            reserved_attrs=[*RESERVED_ATTRS, "_redacted"],
        )


def filters(settings: ObservabilitySettings) -> list[logging.Filter]:
    # WriteOut before Redact: Redact merges the arguments into the message, so they must be written out first
    return [CaseContext(), WriteOut(), *([Redact()] if settings.log_redact_pii else [])]


def adopt(root: logging.Logger, settings: ObservabilitySettings) -> None:
    """Give the handlers someone else installed on ``root`` (Faust's) our filters, and our JSON
    formatter when ``log_format`` is json."""
    for handler in root.handlers:
        for f in filters(settings):
            if not any(type(existing) is type(f) for existing in handler.filters):
                handler.addFilter(f)
        if settings.log_format == "json":
            handler.setFormatter(JsonLines())


def our_handler(settings: ObservabilitySettings, stream: IO[str] | None, text: str) -> logging.Handler:
    """A handler to ``stream`` (stderr) with our filters, in JSON or in the ``text`` format."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLines() if settings.log_format == "json" else logging.Formatter(text))
    for f in filters(settings):
        handler.addFilter(f)
    return handler


def configure(settings: ObservabilitySettings, level: int | str = logging.INFO, stream: IO[str] | None = None) -> None:
    """One handler on the root logger, to ``stream`` (stderr); warnings and uncaught exceptions
    logged through it, so with JSON on nothing the process reports is left as plain text."""
    handler = our_handler(settings, stream, "[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s")
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level if isinstance(level, int) else level.upper())
    adopt(root, settings)
    logging.captureWarnings(True)
    if settings.log_format == "json":
        _log_uncaught()


@contextlib.contextmanager
def shown(
    settings: ObservabilitySettings, name: str, level: int = logging.INFO, stream: IO[str] | None = None
) -> Iterator[None]:
    """Within it, ``name``'s lines from ``level`` up are written to ``stream`` (stderr) as
    ``configure`` writes them, when nothing has configured logging (a command that shows progress
    in a terminal, and has only these lines to show when its output goes to a file or a CI log)."""
    if logging.getLogger().handlers:  # configured: the lines go where the rest go
        yield
        return
    logger = logging.getLogger(name)
    handler = our_handler(settings, stream, "[%(asctime)s] [%(levelname)s] %(message)s")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def _log_uncaught() -> None:
    failed = logging.getLogger("cyberjurors.uncaught")

    def on_exception(kind: type[BaseException], error: BaseException, tb: Any) -> None:
        failed.critical("uncaught %s", kind.__name__, exc_info=(kind, error, tb))

    def on_thread_exception(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not SystemExit:
            failed.critical(
                "uncaught %s in thread %s",
                args.exc_type.__name__,
                getattr(args.thread, "name", "?"),
                # threading types exc_value as optional, logging wants it set; it prints the tuple either way
                exc_info=(args.exc_type, args.exc_value, args.exc_traceback),  # type: ignore[arg-type]
            )

    def on_unraisable(info: Any) -> None:
        failed.error(
            "%s: %s",
            info.err_msg or "exception ignored",
            info.object,
            exc_info=(info.exc_type, info.exc_value, info.exc_traceback),
        )

    sys.excepthook = on_exception
    threading.excepthook = on_thread_exception
    sys.unraisablehook = on_unraisable
