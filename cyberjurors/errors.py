"""The project's errors: one root exception, the closed set of dead-letter reasons, and error
text as people read it (what a verdict note or a dead letter's ``detail`` says).

Every exception the package defines derives from ``CyberJurorsError``: a short bounded ``kind``
(for logs, metrics and dead letters) and a ``detail`` written for people. ``replayable`` says
whether the operation that raised it may succeed when tried again with the same input: rejected
input would fail the same way, a model call or the precedent base may work next time.

Library exceptions often carry Python internals ("cannot identify image file <_io.BytesIO object
at 0x7f…>", pydantic's ``input_value=…`` and documentation links); an operator reading a dead
letter, or a party reading a verdict note, needs the cause, not the process's memory layout.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from enum import StrEnum

from pydantic import ValidationError

_OBJECT_REPR = re.compile(r"<[^<>]{1,200}? at 0x[0-9A-Fa-f]+>")
_ADDRESS = re.compile(r"\s*\bat 0x[0-9A-Fa-f]+\b|\b0x[0-9A-Fa-f]{6,}\b")
_SPACES = re.compile(r"\s+")
MAX_DETAIL = 4000


class CyberJurorsError(Exception):
    """The root of every exception the package defines: ``kind`` (a short bounded label) and
    ``detail`` (for people). ``str(err)`` is the detail unless a subclass passes ``message``."""

    kind: str = "error"
    replayable: bool = False

    def __init__(self, detail: str = "", *, kind: str | None = None, message: str | None = None):
        super().__init__(detail if message is None else message)
        self.detail = detail
        if kind is not None:
            self.kind = kind


class StoreError(CyberJurorsError, RuntimeError):
    """A store cannot give or take what it keeps; ``kind`` says how. The media store: ``missing``,
    ``corrupt``, ``too_large``, ``bad_ref``, ``unavailable`` (it failed or cannot be reached),
    ``unsupported`` (no store for that URL). The batch store: ``batch_store_damaged`` (a line that is
    neither valid nor a torn last one). The console's store: ``console_store``."""


class OutputTooLarge(CyberJurorsError):
    """A message over ``max_event_bytes``, or one the broker refused as too large."""

    kind = "output_too_large"


def install_extra(extra: str) -> str:
    """How to add an extra. The project is installed from its source and locks (it is not on PyPI
    under its name), so the hint names the checkout, never a bare package name."""
    first = ", torch's CPU build first" if extra == "torch" else ""
    return f"pip install '.[{extra}]' in a checkout of cyberjurors{first} (docs/dependencies.md)"


# --- dead-letter reasons: a closed set -------------------------------------------------------

# LLMError.kind: what a model call can fail with after the backend's own retries (README "LLM
# backends"), plus the offline backend's unsupported_task
LLM_KINDS = (
    "rate_limited",
    "overloaded",
    "server_error",
    "timeout",
    "connection",
    "auth",
    "bad_request",
    "refused",
    "truncated",
    "invalid_output",
    "unsupported_task",
)
# PrecedentError.kind: retrieval, indexing and learning in the precedent base
PRECEDENT_KINDS = (
    "bad_query",
    "unknown_category",
    "index_missing",
    "model_missing",
    "model_tampered",  # a model file whose sha256 is not the pinned one
    "model_unpinned",  # a model other than the default with no embedding_model_sha256
    "model_unreadable",  # files in place and as pinned, but not a model the numpy runtime can run
    "extra_missing",  # embedding_runtime=sentence-transformers without the torch extra
    "model_mismatch",
    "corrupt",
    "unreachable",
    "auth",
    "rate_limited",
    "timeout",
    "server_error",
    "bulk_failed",
    "bad_case",
)
# intake.Rejected.reason (media.MediaRejected's included): input refused at intake, never replayable
REJECTIONS = (
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
    "event_too_large",
    "case_too_large",
    "naive_timestamp",
    "delivered_before_ordered",
    "amount_out_of_range",
    "unknown_currency",
    "too_many_rounds",
    "case_text_too_long",
    "round_changed",
    "duplicate_json_key",
    "key_mismatch",
    "too_many_items",
)
OTHER_REASONS = (
    "invalid_case_file",  # a pipeline topic held something that is not a case file: not replayable
    "invalid_outcome",  # an outcome event that does not parse: not replayable
    "output_too_large",  # a stage's output over max_event_bytes or refused by the broker: the same case grows alike
    "intake_failed",  # an exception inside intake (a bug): replayable once it is fixed
    "stage_failed",  # an exception inside a stage or learning (a bug): likewise
    "state_expired",  # a stage input older than state_retention_s whose case has nothing stored: replayable
    "case_never_opened",  # evidence held early_evidence_wait_s for a case_opened that never came: replayable
    "early_evidence_overflow",  # evidence for an unopened case past the holding caps: replayable once it opens
    "draft_expired",  # an incremental case never closed within intake_draft_ttl_s: not replayable
    "case_expired",  # an outcome for a case whose verdict expired (state_retention_s): not replayable
    "outcome_conflict",  # a second outcome for a counted case with other votes, source or escalation: final
    # human-panel outcomes (streams/signing.py): refused before anything is counted or learned
    "unsigned_outcome",  # source human_panel without a signature or decided_by: final, only the signer can fix it
    "forged_outcome",  # a signature that does not verify (altered after signing, or a bad signature): final
    "outcome_unverifiable",  # signed with a key id this worker does not hold: replayable once it holds the key
    # appeals (disputes.appeals, stage appeal), all final: the same appeal would be refused the same way
    "invalid_appeal",  # an appeal event that does not parse, or over max_event_bytes
    "appeal_evidence_rejected",  # evidence filed with an appeal that intake's rules refuse (the reason in the detail)
    "appeal_already_filed",  # a second, different appeal for a case: one appeal per case, the second instance final
    "appeal_by_winner",  # the appellant won the first instance: only the losing party may appeal
    "appeal_window_closed",  # filed more than appeal_window_s after the first-instance verdict, or appeals off
    "appeal_before_verdict",  # filed (filed_at) before the verdict it names was decided, beyond clock_skew_s
    "appeal_wrong_verdict",  # the verdict_id named is not the case's first-instance verdict
)
# Kinds whose failure the same input under the same settings would meet again, so a letter carrying
# them is not replayable; every other kind may pass by itself (a fault that clears, a sampled answer
# that parses next time, a key or a precedent base an operator restores).
FINAL_LLM_KINDS = frozenset(
    {
        "bad_request",  # the provider refuses the request this input builds (too long, an image it rejects)
        "refused",  # the model declines this content
        "truncated",  # the answer for this input outgrows max_output_tokens
        "unsupported_task",  # the backend cannot do this task at all
    }
)
FINAL_PRECEDENT_KINDS = frozenset(
    {
        "bad_query",  # the case gives no usable query
        "unknown_category",  # the case's category is not in the base
        "bad_case",  # the case cannot be added to the base
        "model_mismatch",  # the base was built with another embedding model: fails alike until rebuilt
    }
)
# unknown_case is also an outcome's reason when it came before its verdict: replayable there, so
# the flag is decided where the letter is built (streams/dead_letters.py), not from the reason alone;
# an outcome after its verdict expired is case_expired instead, final
# the functional API, its members computed from the lists above (which mypy cannot enumerate)
Reason = StrEnum(  # type: ignore[misc]
    "Reason",
    [
        (r, r)
        for r in dict.fromkeys(
            (
                *REJECTIONS,
                *OTHER_REASONS,
                *(f"llm_{k}" for k in LLM_KINDS),
                *(f"precedents_{k}" for k in dict.fromkeys((*PRECEDENT_KINDS, *LLM_KINDS))),
            )
        )
    ],
)
Reason.__doc__ = "Why a message went to disputes.dlq: every reason the code can put on a DeadLetter."


def plain(text: str, limit: int = MAX_DETAIL) -> str:
    """Text with object reprs and memory addresses taken out, on one line, at most ``limit`` characters."""
    text = _OBJECT_REPR.sub("", text)
    text = _ADDRESS.sub("", text)
    text = _SPACES.sub(" ", text).strip().replace(" :", ":")
    return text[:limit]


def validation_summary(err: ValidationError, most: int = 5, tags: Collection[str] = ()) -> str:
    """``field.path: message`` for the first few problems; never the offending input itself. A
    path's first element in ``tags`` (a tagged union's tag, which pydantic puts first) is left out:
    ``case.metadata.currency``, not ``case.case.metadata.currency``."""
    parts = [f"{'.'.join(map(str, _path(e['loc'], tags))) or '(root)'}: {e['msg']}" for e in err.errors()[:most]]
    more = err.error_count() - most
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _path(loc: tuple, tags: Collection[str]) -> tuple:
    return loc[1:] if len(loc) > 1 and loc[0] in tags else loc


def for_people(err: BaseException, limit: int = MAX_DETAIL) -> str:
    """One line saying what went wrong, without Python internals."""
    if isinstance(err, ValidationError):
        return plain(validation_summary(err), limit)
    message = plain(str(err), limit)
    if not message:  # str() of many exceptions is empty or was nothing but a repr
        return type(err).__name__
    return message
