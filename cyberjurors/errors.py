"""Errors as people read them: what a verdict note or a dead letter's ``detail`` says.

Library exceptions often carry Python internals ("cannot identify image file <_io.BytesIO object
at 0x7f…>", pydantic's ``input_value=…`` and documentation links); an operator reading a dead
letter, or a party reading a verdict note, needs the cause, not the process's memory layout.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

_OBJECT_REPR = re.compile(r"<[^<>]{1,200}? at 0x[0-9A-Fa-f]+>")
_ADDRESS = re.compile(r"\s*\bat 0x[0-9A-Fa-f]+\b|\b0x[0-9A-Fa-f]{6,}\b")
_SPACES = re.compile(r"\s+")
MAX_DETAIL = 4000


def plain(text: str, limit: int = MAX_DETAIL) -> str:
    """Text with object reprs and memory addresses taken out, on one line, at most ``limit`` characters."""
    text = _OBJECT_REPR.sub("", text)
    text = _ADDRESS.sub("", text)
    text = _SPACES.sub(" ", text).strip().replace(" :", ":")
    return text[:limit]


def validation_summary(err: ValidationError, most: int = 5) -> str:
    """``field.path: message`` for the first few problems; never the offending input itself."""
    parts = [f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in err.errors()[:most]]
    more = err.error_count() - most
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def for_people(err: BaseException, limit: int = MAX_DETAIL) -> str:
    """One line saying what went wrong, without Python internals."""
    if isinstance(err, ValidationError):
        return plain(validation_summary(err), limit)
    message = plain(str(err), limit)
    if not message:  # str() of many exceptions is empty or was nothing but a repr
        return type(err).__name__
    return message
