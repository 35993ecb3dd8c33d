"""Every dead-letter reason the code can emit, each produced by driving the code that emits it, and
whether ``cyberjurors dlq --replay`` may resend it (the letter's ``replayable`` flag, set by the
handler that writes it, read by ``clients.replayable``).

The table is the contract: rejected input is not replayable (it would be rejected again); what
failed for a reason outside the input (a model call after its retries, the precedent base, a bug,
an outcome that came before its verdict) is. A scan of the source finds every reason the code can
put in a dead letter, with the flag it writes, and must find exactly the table's; the table's
reasons are exactly the closed set ``errors.Reason``. A new reason without a row fails here.
"""

from __future__ import annotations

import ast
import base64
import inspect
import json
from datetime import UTC, datetime

import pytest

from cyberjurors.config import Settings
from cyberjurors.errors import FINAL_LLM_KINDS, FINAL_PRECEDENT_KINDS, Reason
from cyberjurors.errors import LLM_KINDS as LLM_KIND_LIST
from cyberjurors.errors import PRECEDENT_KINDS as PRECEDENT_KIND_LIST
from cyberjurors.evidence import intake, records
from cyberjurors.llm.backends import batch
from cyberjurors.llm.port import LLMError
from cyberjurors.precedents.models import PrecedentError
from cyberjurors.schemas import DeadLetter
from cyberjurors.tooling.clients import replayable

from ...conftest import ROOT
from ...factories import METADATA, whole
from ...factories import case_data as case
from ..jury.test_escalation import SIGNATURE_REASONS
from .test_appeals import APPEAL_REASONS
from .test_cloudevents import CLOUDEVENT_REASONS

PACKAGE = ROOT / "cyberjurors"
NOW = datetime(2026, 11, 1, tzinfo=UTC)

# LLMError kinds (docs/guides/llm-backends.md, plus the offline backend's unsupported_task) and
# PrecedentError kinds (precedents/models.py), as errors.py enumerates them; the outcome path
# dead-letters both as precedents_<kind>. The scan below checks them against the raising code.
LLM_KINDS = set(LLM_KIND_LIST)
PRECEDENT_KINDS = set(PRECEDENT_KIND_LIST)

# (stage family, reason) -> replayable. Families: intake; pipeline (focus, clues, round-N, rounds); outcome.
FAMILIES = ("intake", "pipeline", "outcome", "appeal", "letters")
TABLE: dict[tuple[str, str], bool] = {
    **{
        ("intake", reason): False
        for reason in (
            "invalid_json",
            "invalid_event",
            "unknown_event_type",
            "missing_case_id",
            "unsupported_schema_version",
            "invalid_votes",
            "too_many_media",
            "text_too_long",
            "unsupported_media_type",
            "kind_mismatch",
            "inline_too_large",
            "path_outside_media_root",
            "url_not_allowed",
            "bad_base64",
            "invalid_case",
            "case_already_open",
            "unknown_case",
            "case_closed",
            "duplicate_evidence_id",
            "no_evidence",
            "case_already_submitted",
            "naive_timestamp",
            "delivered_before_ordered",
            "amount_out_of_range",
            "unknown_currency",
            "too_many_rounds",
            "case_text_too_long",
            "round_changed",
            "draft_expired",
            "duplicate_json_key",
            "key_mismatch",
            "too_many_items",
            "ce_invalid",
            "ce_unsupported_specversion",
            "ce_type_mismatch",
            "ce_id_reused",
        )
    },
    ("intake", "case_never_opened"): True,  # held evidence whose case never opened: replay once it is open
    ("intake", "early_evidence_overflow"): True,  # likewise, past the holding caps
    ("intake", "intake_failed"): True,  # a bug, like stage_failed: kept to be replayed once it is fixed
    ("intake", "event_too_large"): False,  # over max_event_bytes: it would be again
    ("intake", "case_too_large"): False,  # the case file over max_case_bytes: likewise
    ("pipeline", "invalid_case_file"): False,
    ("pipeline", "output_too_large"): False,  # the same case grows the same way
    ("pipeline", "stage_failed"): True,
    ("pipeline", "state_expired"): True,  # older than state_retention_s, nothing stored: a replay is sent anew, runs
    # a model failure the same input meets again (errors.FINAL_LLM_KINDS: bad_request, refused, truncated,
    # unsupported_task) is final; the others may pass by themselves
    **{("pipeline", f"llm_{kind}"): kind not in FINAL_LLM_KINDS for kind in LLM_KINDS},
    ("outcome", "invalid_outcome"): False,
    ("outcome", "key_mismatch"): False,  # keyed other than by its case_id: it would land on the wrong partition again
    ("outcome", "unknown_case"): True,  # the outcome came before its verdict
    ("outcome", "case_expired"): False,  # the outcome came after its verdict expired: no replay brings it back
    ("outcome", "outcome_conflict"): False,  # another decision than the counted one's: the first stands
    ("outcome", "outcome_superseded"): False,  # an escalated case's human panel decided: its decision stands
    # a human panel's decision whose signature does not prove the console sent it (evidence/signing.py)
    ("outcome", "unsigned_outcome"): False,  # no signature or no decided_by: only the signer can add them
    ("outcome", "forged_outcome"): False,  # altered after signing, or not a signature: it never verifies
    ("outcome", "outcome_unverifiable"): True,  # by a key this worker lacks: replay once it holds the key
    ("outcome", "stage_failed"): True,
    **{
        ("outcome", f"precedents_{kind}"): kind not in FINAL_LLM_KINDS | FINAL_PRECEDENT_KINDS
        for kind in PRECEDENT_KINDS | LLM_KINDS
    },
    # appeals (stage appeal): a refused appeal would be refused again; the second instance's work as a stage's
    **{
        ("appeal", reason): False
        for reason in APPEAL_REASONS - {"unknown_case", "stage_failed"}
        if not reason.startswith("llm_")
    },
    ("appeal", "unknown_case"): True,  # the appeal came before its verdict
    ("appeal", "stage_failed"): True,
    **{("appeal", f"llm_{kind}"): kind not in FINAL_LLM_KINDS for kind in LLM_KINDS},
    # letters to the parties (stage letters): the verdict is the original; its letters' model calls as a stage's
    ("letters", "invalid_verdict"): False,  # not a verdict: it never will be
    ("letters", "case_expired"): False,  # the case's record is gone: no replay brings it back
    ("letters", "output_too_large"): False,  # the same verdict writes the same letter
    ("letters", "stage_failed"): True,
    ("letters", "case_key_unavailable"): True,  # the case key store failed: nothing sent, a replay starts again
    **{("letters", f"llm_{kind}"): kind not in FINAL_LLM_KINDS for kind in LLM_KINDS},
    # a sealed record nothing opens (payload_encryption), at whichever agent reads it: final
    **{(where, reason): False for where in FAMILIES for reason in records.REASONS},
}


def family(stage: str) -> str:
    return stage if stage in ("intake", "outcome", "appeal", "letters") else "pipeline"


def letter(stage: str, reason: str, original: bytes = b"{}", replayable: bool | None = None) -> DeadLetter:
    """``replayable=None``: a letter as an older version wrote it, without the flag."""
    return DeadLetter(
        reason=reason,
        detail="d",
        stage=stage,
        topic="disputes.events",
        partition=0,
        offset=0,
        key="k",
        original_base64=base64.b64encode(original).decode(),
        failed_at=NOW,
        replayable=replayable,
    )


# --- the source holds exactly the table's reasons -------------------------------------------


def _source(path: str) -> ast.Module:
    return ast.parse((PACKAGE / path).read_text())


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _returns(tree: ast.AST, function: str) -> set[str]:
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    return {n.value.value for n in ast.walk(fn) if isinstance(n, ast.Return) and isinstance(n.value, ast.Constant)}


def _error_kinds(error: str) -> set[str]:
    """Every kind an ``error(kind, ...)`` call in the package can carry; a kind computed in a way
    this scan does not know fails the test, so it cannot be missed silently."""
    kinds: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] + [tree]:
            for call in [n for n in ast.walk(fn) if isinstance(n, ast.Call) and _callee(n) == error and n.args]:
                arg = call.args[0]
                if isinstance(arg, ast.Constant):
                    kinds.add(arg.value)
                elif isinstance(arg, ast.Call) and _callee(arg) == "status_kind":
                    kinds |= _returns(_source("llm/backends/anthropic.py"), "status_kind")
                elif isinstance(arg, ast.Call) and _callee(arg) == "batch_kind":  # an errored Message Batches entry
                    kinds |= {*batch.ERROR_KINDS.values(), batch.batch_kind("an error type not in the table")}
                elif (
                    isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name) and arg.value.id == "STOP_KINDS"
                ):
                    stop = next(
                        n.value
                        for n in ast.walk(tree)
                        if isinstance(n, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == "STOP_KINDS" for t in n.targets)
                    )
                    kinds |= {v.value for v in stop.values}
                elif isinstance(arg, ast.Name) and fn is not tree:  # kind, hint = "x", "..." in the function
                    found = {
                        a.value.elts[0].value
                        for a in ast.walk(fn)
                        if isinstance(a, ast.Assign)
                        and isinstance(a.targets[0], ast.Tuple)
                        and isinstance(a.value, ast.Tuple)
                        and isinstance(a.targets[0].elts[0], ast.Name)
                        and a.targets[0].elts[0].id == arg.id
                        and isinstance(a.value.elts[0], ast.Constant)
                    }
                    assert found or fn is tree, f"{path}:{call.lineno}: {error}({arg.id}) with no known values"
                    kinds |= found
                elif fn is not tree:
                    raise AssertionError(f"{path}:{call.lineno}: {error} with a kind this scan cannot read")
    return kinds


STREAMS = sorted(p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "streams").glob("*.py"))
# the flag a handler writes as ``replayable=err.replayable``: the class attribute of what it caught
CAUGHT = {"Rejected": intake.Rejected, "LLMError": LLMError, "PrecedentError": PrecedentError}


def kind_flag(kind: str, caught: tuple[type, ...]) -> bool:
    """The flag ``err.replayable`` gives for an error of ``kind`` caught as one of ``caught``: a class
    attribute (Rejected), or decided by the kind (LLMError, PrecedentError); the classes that can
    raise the kind must agree."""
    flags = set()
    for cls in caught:
        attr = inspect.getattr_static(cls, "replayable")
        if isinstance(attr, bool):
            flags.add(attr)
        elif (cls is LLMError and kind in LLM_KINDS) or (cls is PrecedentError and kind in PRECEDENT_KINDS):
            flags.add(cls(kind, "x").replayable)
    assert len(flags) == 1, (kind, caught, flags)
    return flags.pop()


def _letters_written(tree: ast.Module) -> list[tuple[ast.Call, ast.AST]]:
    """``letters.write(event, stage, reason, detail, replayable=...)`` calls, each with the function around it."""
    found = []
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for call in ast.walk(fn):
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "write"
                and ast.unparse(call.func.value).endswith("letters")
            ):
                found.append((call, fn))
    return [w for call, fn in found for w in _through_wrapper(tree, call, fn)]


def _through_wrapper(tree: ast.Module, call: ast.Call, fn: ast.AST) -> list[tuple[ast.Call, ast.AST]]:
    """A write inside a helper that passes its own ``reason`` and ``replayable`` on (``Appeals.refuse``)
    stands for each call of the helper: the write as that call makes it, in the function around it."""
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    params = [a.arg for a in fn.args.args]
    reason = call.args[2]
    if not (isinstance(reason, ast.Name) and reason.id in params):
        return [(call, fn)]
    defaults = dict(zip(params[len(params) - len(fn.args.defaults) :], fn.args.defaults, strict=True))
    stage = call.args[1]
    if isinstance(stage, ast.Name):  # a module constant (STAGE = "appeal")
        stage = next(
            n.value
            for n in tree.body
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == stage.id for t in n.targets)
        )
    made = []
    for outer in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for use in [c for c in ast.walk(outer) if isinstance(c, ast.Call) and _callee(c) == fn.name]:
            given = dict(zip(params[1:], use.args, strict=False)) | {k.arg: k.value for k in use.keywords if k.arg}
            flag = given.get("replayable", defaults.get("replayable"))
            assert flag is not None, f"{fn.name} called without a replayable flag"
            written = ast.Call(
                func=call.func,
                args=[given["event"], stage, given[reason.id], given["detail"]],
                keywords=[ast.keyword(arg="replayable", value=flag)],
            )
            made.append((written, outer))
    assert made, f"{fn.name} writes a letter for its callers, and none calls it"
    return made


def _flag(call: ast.Call, fn: ast.AST) -> bool | tuple[type, ...]:
    """The replayable flag a write call passes: a constant, or the classes whose ``err.replayable`` it passes."""
    (flag,) = [k.value for k in call.keywords if k.arg == "replayable"]
    if isinstance(flag, ast.Constant):
        return flag.value
    assert ast.unparse(flag) == "err.replayable", ast.unparse(flag)
    handler = next(h for h in ast.walk(fn) if isinstance(h, ast.ExceptHandler) and call in ast.walk(h))
    names = {ast.unparse(n).split(".")[-1] for n in ast.walk(handler.type) if isinstance(n, (ast.Name, ast.Attribute))}
    caught = tuple(CAUGHT[n] for n in sorted(names) if n in CAUGHT)
    assert caught, ast.unparse(handler.type)
    return caught


def _refusals(path: str = "evidence/signing.py") -> dict[str, bool]:
    """reason -> replayable for each ``Checked(False, reason, ..., replayable=...)`` that ``signing.check``
    can return: a letter written with ``checked.reason`` carries one of them."""
    found = {}
    for call in ast.walk(_source(path)):
        if isinstance(call, ast.Call) and _callee(call) == "Checked" and len(call.args) >= 2:
            flags = [k.value for k in call.keywords if k.arg == "replayable"]
            assert all(isinstance(f, ast.Constant) for f in flags), ast.unparse(call)
            found[call.args[1].value] = flags[0].value if flags else False  # type: ignore[attr-defined]
    return found


def reasons_in_source() -> dict[tuple[str, str], bool]:
    """(family, reason) -> replayable for every dead letter the code can write."""
    rejected: set[str] = set()
    for path in ("evidence/intake.py", "evidence/media.py", *STREAMS):
        for call in ast.walk(_source(path)):
            if isinstance(call, ast.Call) and _callee(call) in ("Rejected", "MediaRejected"):
                arg = call.args[0]
                if isinstance(arg, ast.Constant):
                    rejected.add(arg.value)
                else:  # Rejected(_reason(err)) and Rejected(err.reason) from a MediaRejected
                    assert ast.unparse(arg) in ("_reason(err)", "err.reason"), ast.unparse(arg)
    rejected |= _returns(_source("evidence/intake.py"), "_reason")
    rejected |= set(intake._TYPE_REASONS.values())  # _reason returns these by the pydantic error's type
    found: dict[tuple[str, str], bool] = {}
    writes = [w for path in STREAMS for w in _letters_written(_source(path))]
    assert writes, "no dead letters written in streams/: has the handler's write method been renamed?"
    for call, fn in writes:
        if ast.unparse(call.args[2]) == "checked.reason":  # signing.check's refusals, each with its own flag
            assert [ast.unparse(k.value) for k in call.keywords if k.arg == "replayable"] == ["checked.replayable"]
            found |= {(family(call.args[1].value), r): f for r, f in _refusals().items()}  # type: ignore[attr-defined]
            continue
        stage, reason, flag = call.args[1], call.args[2], _flag(call, fn)
        where = family(stage.value) if isinstance(stage, ast.Constant) else "pipeline"  # a stage hop's stage
        if isinstance(reason, ast.Constant):
            found[(where, reason.value)] = flag
        elif isinstance(reason, ast.JoinedStr):  # f"llm_{err.kind}", f"precedents_{err.kind}"
            prefix = reason.values[0].value
            kinds = (
                _error_kinds("LLMError")
                if prefix == "llm_"
                else _error_kinds("PrecedentError") | _error_kinds("LLMError")
            )
            found |= {(where, prefix + k): flag if isinstance(flag, bool) else kind_flag(k, flag) for k in kinds}
        elif ast.unparse(reason) == "err.kind":  # streams/app.py opened(): an Unreadable's kind, at any agent
            assert fn.name == "opened" and flag is False, fn.name
            found |= {(f, r): False for f in FAMILIES for r in records.REASONS}
        else:
            assert ast.unparse(reason) == "err.reason", ast.unparse(reason)  # the Rejected ones above
            found |= {("intake", r): flag if isinstance(flag, bool) else kind_flag(r, flag) for r in rejected}
        if isinstance(reason, ast.Constant) and not isinstance(flag, bool):
            found[(where, reason.value)] = kind_flag(reason.value, flag)
    return found


def test_the_table_has_a_row_for_every_reason_the_code_can_emit_and_no_other():
    assert _error_kinds("LLMError") == LLM_KINDS
    assert _error_kinds("PrecedentError") == PRECEDENT_KINDS
    found = reasons_in_source()
    assert found.keys() - TABLE.keys() == set(), "reasons the code emits without a row in the table"
    assert TABLE.keys() - found.keys() == set(), "rows for reasons the code no longer emits"
    assert {row: flag for row, flag in found.items() if flag is not TABLE[row]} == {}, "flags the code writes"


def test_the_table_holds_exactly_the_closed_set_of_reasons():
    assert {reason for _, reason in TABLE} == set(Reason)


def test_replayable_reads_the_letters_flag():
    for (where, reason), flag in TABLE.items():
        assert replayable(letter(where, reason, replayable=flag)) is flag
        assert replayable(letter(where, reason, replayable=not flag)) is (not flag)  # the flag, not the reason


# reasons first written after the flag existed: no letter without the flag can carry them
SINCE_THE_FLAG = {
    "case_never_opened",
    "early_evidence_overflow",
    "case_expired",
    "key_mismatch",
    "ce_invalid",
    "ce_unsupported_specversion",
    "ce_type_mismatch",
    "ce_id_reused",
    *SIGNATURE_REASONS,
}


def test_a_letter_from_an_older_version_without_the_flag_falls_back_to_the_old_rule():
    stages = {
        "intake": ["intake", "ingest"],  # and the stage names of an earlier release (docs/renamed.md)
        "pipeline": ["focus", "clues", "round-1", "round-3", "rounds", "round", "jury"],
        "outcome": ["outcome", "outcomes"],
    }
    for (where, reason), flag in TABLE.items():
        if reason in SINCE_THE_FLAG or where in ("appeal", "letters"):  # appeals and letters came after the flag
            continue
        for stage in stages[where]:
            assert replayable(letter(stage, reason)) is flag, (stage, reason)
    assert replayable(letter("ingest", "ingest_failed")) is True  # the reason's name then


# --- intake reasons, by driving intake ------------------------------------------------------


def photo(**media) -> list[dict]:
    return [{"id": "b1", "kind": "image", "text": "the seam", "media": media}]


def opened(case_id: str = "c-1", **extra) -> bytes:
    return json.dumps({"type": "case_opened", "case_id": case_id, "metadata": METADATA, **extra}).encode()


def evidence(case_id: str = "c-1", item: str = "b1", round_: int = 1, **extra) -> bytes:
    return json.dumps(
        {
            "type": "evidence_submitted",
            "case_id": case_id,
            **extra,
            "evidence": {
                "party": "buyer",
                "round": round_,
                "items": [{"id": item, "kind": "text", "text": f"round {round_}"}],
            },
        }
    ).encode()


def closed(case_id: str = "c-1") -> bytes:
    return json.dumps({"type": "evidence_closed", "case_id": case_id}).encode()


def run_intake(settings: Settings, *raws: bytes) -> None:
    """What the intake agent does with a sequence of events for one case, without the stream."""
    draft = None
    for raw in raws:
        event = intake.parse_event(raw)
        if isinstance(event, intake.CaseSubmitted):
            intake.admit(event.case, settings)
            continue
        draft = intake.fold(draft, event)
        if draft.closed:
            intake.admit(draft.to_case(), settings)


INTAKE = {  # reason -> the events that end in it
    "invalid_json": [b'{"type": "case", "case": {"case_id": '],
    "invalid_event": [whole({**case(), "metadata": {**METADATA, "order_amount": "lots"}})],
    "unknown_event_type": [json.dumps({"type": "case_reopened", "case_id": "c-1"}).encode()],
    "missing_case_id": [json.dumps({"type": "evidence_closed"}).encode()],
    "unsupported_schema_version": [whole(case(), schema_version=2)],
    "invalid_votes": [whole(case(ground_truth={"buyer": 8, "seller": 8}))],
    "too_many_media": [
        whole(
            case(
                buyer_items=[
                    {
                        "id": f"b{n}",
                        "kind": "image",
                        "text": "x",
                        "media": {"media_type": "image/png", "data_base64": "eA=="},
                    }
                    for n in range(5)
                ]
            )
        )
    ],
    "text_too_long": [whole(case(buyer_items=[{"id": "b1", "kind": "text", "text": "torn " * 300}]))],
    "unsupported_media_type": [whole(case(buyer_items=photo(media_type="application/pdf", data_base64="eA==")))],
    "kind_mismatch": [whole(case(buyer_items=photo(media_type="video/mp4", data_base64="eA==")))],
    "inline_too_large": [
        whole(case(buyer_items=photo(media_type="image/png", data_base64=base64.b64encode(b"x" * 2000).decode())))
    ],
    "path_outside_media_root": [whole(case(buyer_items=photo(media_type="image/png", path="../../etc/passwd")))],
    "url_not_allowed": [whole(case(buyer_items=photo(media_type="image/png", url="https://evil.example/x.png")))],
    "bad_base64": [whole(case(buyer_items=photo(media_type="image/png", data_base64="not base64!")))],
    "case_already_open": [opened(), opened()],
    "unknown_case": [evidence()],
    "case_closed": [opened(), evidence(), closed(), evidence(item="b2", round_=2)],
    "duplicate_evidence_id": [opened(), evidence(), evidence(round_=2)],
    "no_evidence": [opened(), closed()],
    "naive_timestamp": [whole(case(), sent_at="2026-09-01T10:00:00")],
    "delivered_before_ordered": [
        whole(
            {
                **case(),
                "metadata": {**METADATA, "delivered_at": "2026-08-01T10:00:00Z", "ordered_at": "2026-09-01T10:00:00Z"},
            }
        )
    ],
    "amount_out_of_range": [whole({**case(), "metadata": {**METADATA, "order_amount": 1e308}})],
    "unknown_currency": [whole({**case(), "metadata": {**METADATA, "currency": "XYZ"}})],
    "too_many_rounds": [
        whole(
            {
                **case(),
                "rounds": [
                    {
                        "party": "seller",
                        "round": n,
                        "items": [{"id": f"s{n}", "kind": "text", "text": "It left intact."}],
                    }
                    for n in range(1, 12)
                ],
            }
        )
    ],
    "case_text_too_long": [
        whole(case(buyer_items=[{"id": f"b{n}", "kind": "text", "text": "t" * 1000} for n in range(61)]))
    ],
    "too_many_items": [whole(case(buyer_items=[{"id": f"b{n}", "kind": "text", "text": "t"} for n in range(201)]))],
    "round_changed": [opened(), evidence(), evidence(item="b2")],
    "duplicate_json_key": [b'{"type": "evidence_closed", "case_id": "c-1", "case_id": "c-2"}'],
}
# decided by the intake agent: driven by a running app in tests/integration/test_dead_letters.py, and the held
# and expired ones (HELD) by the real intake handler with a clock the test moves, in
# tests/unit/streams/test_intake_holding.py, flags included
HELD = {"case_never_opened", "early_evidence_overflow", "draft_expired"}
APP_INGEST = {"case_already_submitted", "intake_failed", *HELD}

APP_INGEST |= {"event_too_large", "case_too_large", "key_mismatch"}  # the intake agent's own checks, driven there too
# the CloudEvents headers' rules, by the real intake handler in tests/unit/streams/test_cloudevents.py (and a
# running worker in tests/integration/test_kcat.py)
APP_INGEST |= set(CLOUDEVENT_REASONS)
# a sealed record nothing opens, at any agent intake's included: tests/unit/streams/test_sealed_records.py
APP_INGEST |= set(records.REASONS)


@pytest.mark.parametrize("reason", sorted(INTAKE))
def test_each_intake_reason_is_produced_by_intake_and_is_not_replayable(tmp_path, reason):
    s = Settings(
        llm_backend="offline",
        media_root=tmp_path,
        intake_limits={"max_text_chars": 1000, "max_media_items": 4, "max_inline_bytes": 1000},
    )
    with pytest.raises(intake.Rejected) as err:
        run_intake(s, *INTAKE[reason])
    assert err.value.reason == reason
    assert err.value.replayable is TABLE[("intake", reason)] is False


def test_invalid_case_is_produced_by_a_draft_that_does_not_make_a_case():
    """The intake table's draft is not a case until it validates as one (an id that only the table
    could hold, since events are checked on arrival)."""
    draft = intake.fold(None, intake.parse_event(opened()))
    draft = intake.fold(draft, intake.parse_event(evidence()))
    bad = draft.model_copy(update={"case_id": "not a valid id!"})
    with pytest.raises(intake.Rejected) as err:
        bad.to_case()
    assert err.value.reason == "invalid_case"
    assert err.value.replayable is TABLE[("intake", "invalid_case")] is False


def test_every_ingest_row_is_driven():
    rows = {reason for where, reason in TABLE if where == "intake"}
    assert rows == set(INTAKE) | {"invalid_case"} | APP_INGEST


def test_the_documented_flag_of_each_reason_is_the_one_its_writers_set():
    """errors.OTHER_REASONS feeds docs/reference/dead-letters: its flags are the source's."""
    from cyberjurors.errors import OTHER_REASONS, REJECTIONS

    for reason, (flag, meaning) in OTHER_REASONS.items():
        written = {where: replayable for (where, r), replayable in TABLE.items() if r == reason}
        assert written, f"{reason} is documented but no handler writes it"
        assert set(written.values()) == {flag}, (reason, written)
        assert meaning
    for reason in set(REJECTIONS) - {"unknown_case"}:  # unknown_case: replayable at stage outcome
        assert not any(replayable for (_, r), replayable in TABLE.items() if r == reason), reason
