"""Settings removed in this release, still accepted for one more: each old name is mapped onto its
replacement with a ``DeprecationWarning`` (and a log warning at worker start) that names it.

An old name may come from anywhere a setting does: a keyword in code, a ``CYBERJURORS_*`` variable
(an ``.env`` file loaded into the environment counts), the settings file, or ``model_copy(update=...)``.
Where both the old name and its replacement are given the replacement wins, and the warning says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter

# old name -> the replacement's path, dotted through nested settings
RENAMED: dict[str, str] = {}

# old name -> how its value reads in the new place; None = nothing to set (the old default)
CONVERTED: dict[str, Callable[[Any], Any]] = {}


def rename(table: Mapping[str, str], convert: Mapping[str, Callable[[Any], Any]] | None = None) -> None:
    RENAMED.update(table)
    CONVERTED.update(convert or {})


def replacement(old: str) -> str:
    """The replacement as an operator writes it: ``llm_roles.focus.model``, ``intake_limits.max_event_bytes``."""
    return RENAMED[old]


def note(old: str, ignored: bool = False) -> str:
    why = f"; {replacement(old)} is set too and wins, so {old} is ignored" if ignored else ""
    return f"setting {old} is deprecated and will be removed in the next release: use {replacement(old)}{why}"


def _as_bool(value: Any) -> bool:
    return TypeAdapter(bool).validate_python(value)


def early_stopping(value: Any) -> Any:
    """false is early_stop = 0, every round deliberated; true, the default, sets nothing."""
    return None if _as_bool(value) else 0.0


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _has(data: Mapping[str, Any], parts: list[str]) -> bool:
    here: Any = data
    for part in parts:
        here = _plain(here)
        if not isinstance(here, Mapping) or part not in here:
            return False
        here = here[part]
    return True


def _put(data: dict[str, Any], parts: list[str], value: Any) -> None:
    here = data
    for part in parts[:-1]:
        here[part] = _plain(here.get(part)) or {}
        if isinstance(here[part], Mapping) and not isinstance(here[part], dict):
            here[part] = dict(here[part])
        here = here[part]
    here[parts[-1]] = value


def fill(data: dict[str, Any], path: str, value: Any) -> None:
    """``value`` at ``path`` (dotted) unless something is there already."""
    if not _has(data, path.split(".")):
        _put(data, path.split("."), value)


def translate(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The settings with every old name moved to its replacement, and a note for each old name found."""
    out = dict(data)
    notes = []
    for old in [k for k in out if k in RENAMED]:
        value = out.pop(old)
        if old in CONVERTED:
            value = CONVERTED[old](value)
        target = RENAMED[old].split(".")
        ignored = _has(out, target)
        notes.append(note(old, ignored))
        if value is not None and not ignored:
            _put(out, target, value)
    return out, notes


def merged(current: Any, given: Any) -> Any:
    """``given`` (plain values) laid over ``current`` (a setting's value), nested mappings merged."""
    base = current.model_dump() if isinstance(current, BaseModel) else current
    if isinstance(base, Mapping) and isinstance(given, Mapping):
        out = {k: _plain(v) if isinstance(v, BaseModel) else v for k, v in base.items()}
        for key, value in given.items():
            out[key] = merged(out[key], value) if key in out else value
        return out
    return given


def from_env(prefix: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Old names given as ``<prefix><OLD>`` variables (case-insensitive, as every setting's)."""
    environ = os.environ if environ is None else environ
    upper = {k.upper(): v for k, v in environ.items()}
    return {old: upper[f"{prefix}{old}".upper()] for old in RENAMED if f"{prefix}{old}".upper() in upper}
