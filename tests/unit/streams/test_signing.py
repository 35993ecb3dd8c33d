"""What a human panel's signature covers (evidence/signing.py): every field of the outcome, found by
walking the model, so a field added to OutcomeReported (or to DecidedBy, Votes) is covered by the
same test without anyone listing it; and that a signed decision naming no one who decided is
refused. Each alteration goes through the worker's own path too: the bytes a producer sends, read
by the outcomes handler, end as a ``forged_outcome`` dead letter."""

from __future__ import annotations

import json
import types
from datetime import datetime, timedelta
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError

from cyberjurors.evidence import signing
from cyberjurors.observability import metrics
from cyberjurors.schemas import DeadLetter, DecidedBy, OutcomeReported, Votes
from cyberjurors.state.results import StageResults
from cyberjurors.streams.dead_letters import DeadLetters
from cyberjurors.streams.outcome import Outcomes

from ...factories import settings
from .test_app_handlers import Topic, event

KEY = "the console's outcome signing key, 32+ chars"
conf = settings(outcome_signing_key=KEY)
AT = datetime.fromisoformat("2026-12-01T10:00:00+00:00")
Path = tuple[str, ...]

# a decision with every field set, nested ones too: a field left None would drop out of the signed
# bytes (exclude_none) and could be added after signing without this test noticing
FULL = OutcomeReported(
    schema_version=1,
    event_id="console:e:2",
    sent_at=AT,
    case_id="esc-1",
    votes=Votes(buyer=2, seller=1),
    decided_at=AT - timedelta(minutes=5),
    source="human_panel",
    escalation_id="esc-0123456789abcdef",
    decided_by=DecidedBy(reviewer="sue", role="supervisor", override_of="console:e:1"),
)
SIGNED = signing.sign(FULL, KEY)


def field_paths(model: BaseModel, prefix: Path = ()) -> list[Path]:
    """Every field of ``model`` as a path of names, nested models walked (the whole sub-model and
    each of its fields), the signature left out."""
    paths: list[Path] = []
    for name in type(model).model_fields:
        if not prefix and name == "signature":
            continue
        path, value = (*prefix, name), getattr(model, name)
        paths.append(path)
        if isinstance(value, BaseModel):
            paths += field_paths(value, path)
    return paths


def annotation_of(model: BaseModel, name: str) -> Any:
    found = type(model).model_fields[name].annotation
    if get_origin(found) in (Union, types.UnionType):  # X | None: the X
        found = next(a for a in get_args(found) if a is not type(None))
    return found


def other_value(model: BaseModel, name: str) -> Any:
    """A value for ``model.name`` other than the one it has: another choice of a Literal where there
    is one (so the altered event still parses), else a changed value of the same type."""
    value, annotation = getattr(model, name), annotation_of(model, name)
    if get_origin(annotation) is Literal:
        others = [a for a in get_args(annotation) if a != value]
        if others:
            return others[0]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, datetime):
        return value + timedelta(seconds=1)
    if isinstance(value, BaseModel):  # another sub-model: each of its fields changed
        return value.model_copy(update={n: other_value(value, n) for n in type(value).model_fields})
    raise AssertionError(f"no alteration for {type(model).__name__}.{name} ({annotation!r}): add one here")


def replaced(model: BaseModel, path: Path, value: Any) -> Any:
    """``model`` with the field at ``path`` set to ``value``, without validation (what a forger's bytes say)."""
    head, *rest = path
    if rest:
        value = replaced(getattr(model, head), tuple(rest), value)
    return model.model_copy(update={head: value})


def at(model: BaseModel, path: Path) -> BaseModel:
    for name in path[:-1]:
        model = getattr(model, name)
    return model


def alterations() -> list[tuple[str, OutcomeReported]]:
    """The signed decision with one field changed after signing, for every field: given another
    value, and (an optional one) taken out."""
    found = []
    for path in field_paths(SIGNED):
        parent, name = at(SIGNED, path), path[-1]
        found.append((".".join(path), replaced(SIGNED, path, other_value(parent, name))))
        if type(parent).model_fields[name].default is None and not type(parent).model_fields[name].is_required():
            found.append((".".join(path) + " removed", replaced(SIGNED, path, None)))
    return found


def test_the_signed_decision_sets_every_field_so_each_is_in_the_signed_bytes():
    def unset(model: BaseModel, prefix: str = "") -> list[str]:
        missing = []
        for name in type(model).model_fields:
            value = getattr(model, name)
            if value is None:
                missing.append(prefix + name)
            elif isinstance(value, BaseModel):
                missing += unset(value, f"{prefix}{name}.")
        return missing

    assert unset(SIGNED) == [], "set the new field in FULL, so the tests below alter it"
    body = json.loads(signing.signed_bytes(SIGNED).removeprefix(signing.DOMAIN))
    assert set(body) == set(OutcomeReported.model_fields) - {"signature"}
    assert signing.check(SIGNED, conf).ok


def test_the_walk_reaches_every_nested_field():
    # the walk itself is checked, or a broken one would cover nothing and pass
    paths = {".".join(p) for p in field_paths(SIGNED)}
    assert {"case_id", "votes", "votes.buyer", "votes.seller", "decided_by.reviewer", "decided_by.role"} <= paths
    assert {"decided_by.override_of", "event_id", "sent_at", "schema_version", "type"} <= paths
    assert "signature" not in paths
    assert len(alterations()) > len(paths)  # the optional ones taken out as well


@pytest.mark.parametrize(("changed", "outcome"), alterations(), ids=[name for name, _ in alterations()])
def test_any_field_changed_after_signing_makes_a_forgery(changed, outcome):
    assert signing.signed_bytes(outcome) != signing.signed_bytes(SIGNED), f"the signature does not cover {changed}"
    checked = signing.check(outcome, conf)
    if outcome.source == "human_panel":
        # taking out who decided is refused before the MAC is looked at; anything else does not verify
        refused = "unsigned_outcome" if changed == "decided_by removed" else "forged_outcome"
        assert (checked.ok, checked.reason) == (False, refused), changed
    else:  # no longer a panel's claim: it needs no signature, and speaks only as the platform's jury
        assert checked.ok and changed.startswith("source")


async def test_each_forgery_sent_to_the_worker_is_a_dead_letter_and_changes_nothing():
    dlq, table = Topic(), {}
    outcomes = Outcomes(
        conf,
        None,  # type: ignore[arg-type]  # a forgery is refused before any model or precedent is used
        types.SimpleNamespace(enabled=False),  # type: ignore[arg-type]
        StageResults(table),
        {},
        DeadLetters(dlq, metrics.CasesInFlight()),
    )
    sent = 0
    for changed, outcome in alterations():
        try:
            value = OutcomeReported.model_validate_json(outcome.model_dump_json()).model_dump_json().encode()
        except ValidationError:
            continue  # a value the schema refuses (type, schema_version): invalid_outcome, tested elsewhere
        if outcome.source != "human_panel":
            continue
        await outcomes(event(value, outcome.case_id.encode()))  # keyed as a producer must: by its case_id
        sent += 1
        letter = DeadLetter.model_validate_json(dlq.sent[-1][1])
        refused = "unsigned_outcome" if changed == "decided_by removed" else "forged_outcome"
        assert (letter.stage, letter.reason, letter.replayable) == ("outcome", refused, False), changed
    assert sent == len(dlq.sent) >= len(field_paths(SIGNED)) - 3  # all but source, type and schema_version
    assert table == {}  # nothing counted, held or learned


def test_a_signed_decision_naming_no_one_who_decided_is_refused():
    nobody = signing.sign(FULL.model_copy(update={"decided_by": None}), KEY)  # a valid MAC over it
    checked = signing.check(nobody, conf)
    assert (checked.ok, checked.reason, checked.replayable) == (False, "unsigned_outcome", False)
    assert "decided_by" in checked.detail
    assert signing.check(signing.sign(FULL, KEY), conf).ok  # the same decision naming its author passes
