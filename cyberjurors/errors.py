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

# LLMError.kind: what a model call can fail with after the backend's own retries
# (docs/guides/llm-backends.md), plus the offline backend's unsupported_task
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
    "needs_migration",  # a folder holding only the previous embedded store: `precedents migrate` converts it
    "model_missing",
    "model_tampered",  # a model file whose sha256 is not the pinned one
    "model_unpinned",  # a model other than the default with no embedding.model_sha256
    "model_unreadable",  # files in place and as pinned, but not a model the numpy runtime can run
    "extra_missing",  # embedding.runtime=sentence-transformers without the torch extra
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
# (the same input would be refused again). Reason -> what it means, for docs/reference/dead-letters.
REJECTIONS: dict[str, str] = {
    "invalid_json": "not JSON, a record without a value, or a UTF-16/32 byte-order mark",
    "invalid_event": "JSON of the wrong shape or types, or control characters in an id",
    "unknown_event_type": "a `type` that is not a dispute event",
    "missing_case_id": "no `case_id`",
    "unsupported_schema_version": "a `schema_version` this version does not read",
    "invalid_votes": "real-jury votes not summing to 17, or given as strings",
    "too_many_media": "more than `max_media_items` media items",
    "text_too_long": "an item's text over `max_text_chars`",
    "unsupported_media_type": "a media type the jury cannot read",
    "kind_mismatch": "a media type that is not the item's kind",
    "inline_too_large": "inline media over `max_inline_bytes`",
    "path_outside_media_root": "a media path escaping `media_root`",
    "url_not_allowed": "a media URL whose origin is not on `url_allowlist`, or with user info",
    "bad_base64": "inline media that does not decode",
    "invalid_case": "a case breaking the case rules (ids, evidence shape), or a stored media reference not in the store",
    "case_already_open": "`case_opened` twice, or a whole case for a case open for incremental events",
    "unknown_case": "an event for a case intake does not know",
    "case_closed": "evidence after the case went to the jury, or held evidence for a case that then came whole",
    "duplicate_evidence_id": "an evidence id used twice in a case",
    "no_evidence": "evidence closed with none submitted",
    "case_already_submitted": "the same `case_id` resubmitted with other content",
    "event_too_large": "an event over `max_event_bytes` (its original goes to the media store)",
    "case_too_large": "the case file over `max_case_bytes` after inline media moved out",
    "naive_timestamp": "a timestamp without a time zone",
    "delivered_before_ordered": "a delivery date before the order date",
    "amount_out_of_range": "an amount not finite, negative or over 10^12",
    "unknown_currency": "a currency not in ISO 4217",
    "too_many_rounds": "more than `max_rounds_per_party` evidence rounds for a party",
    "case_text_too_long": "more than `max_case_text_chars` of evidence text in a case",
    "round_changed": "a round resent with other items (the first version stands)",
    "duplicate_json_key": "the same key twice in one JSON object",
    "key_mismatch": "a Kafka key other than the event's `case_id` (also for outcomes and appeals)",
    "too_many_items": "more than `max_case_items` evidence items in a case",
    # CloudEvents headers on disputes.events (streams/cloudevents.py; a message without any is taken)
    "ce_invalid": "`ce_` headers that are no valid CloudEvent (no `ce_specversion`, `ce_id`, `ce_source` or "
    "`ce_type`, a `ce_time` not in RFC 3339, a header not UTF-8, a `content-type` other than JSON), "
    "or a CloudEvent in structured mode",
    "ce_unsupported_specversion": "a `ce_specversion` other than 1.0",
    "ce_type_mismatch": "a `ce_type` other than the body's, `com.cyberjurors.<type>.v1`",
    "ce_id_reused": "a `ce_id` (from the same `ce_source`) intake already took for another event of the case",
}
# reason -> (replayable, what it means): whether the letter can succeed when sent again is decided
# where it is written (streams/dead_letters.py) and carried on it; these are the flags written
OTHER_REASONS: dict[str, tuple[bool, str]] = {
    "invalid_case_file": (False, "a pipeline topic held something that is not a case file"),
    "invalid_outcome": (False, "an outcome event that does not parse"),
    "output_too_large": (
        False,
        "a stage's output over `max_event_bytes` or refused by the broker: the case grows alike",
    ),
    "intake_failed": (True, "an exception inside intake (a bug): replay once it is fixed"),
    "stage_failed": (True, "an exception inside a stage or learning (a bug): replay once it is fixed"),
    "state_expired": (True, "a stage input older than `state_retention_s` whose case has nothing stored"),
    "case_never_opened": (True, "evidence held `early_evidence.wait_s` for a `case_opened` that never came"),
    "early_evidence_overflow": (True, "evidence for an unopened case past the holding caps: replay once it opens"),
    "draft_expired": (False, "an incremental case not closed within `intake_draft_ttl_s`; the letter holds the draft"),
    "case_expired": (
        False,
        "an outcome, appeal or verdict to write letters for, of a case whose record expired (`state_retention_s`)",
    ),
    "invalid_verdict": (False, "a message on disputes.verdicts that is not a verdict (stage letters)"),
    "case_key_unavailable": (
        True,
        "the case key store failed as a case's placeholder map was sealed or opened (stage letters, "
        "`media_encryption`): replay once it is back",
    ),
    # sealed records (payload_encryption, evidence/records.py): the letter keeps the sealed original
    "case_erased": (False, "a sealed record of a case erased since (its key destroyed): dropped on purpose"),
    "sealed_unknown_key": (
        False,
        "a sealed record whose key id is not its case's (another case's, another `case_key_secret`'s)",
    ),
    "sealed_tampered": (False, "a sealed record that does not open under its case's key: altered after sealing"),
    "outcome_conflict": (False, "a second outcome for a counted case with other votes, source or escalation"),
    "outcome_superseded": (
        False,
        "an outcome other than the human panel's for an escalated case the panel decided: the panel's stands",
    ),
    # human-panel outcomes (evidence/signing.py): refused before anything is counted or learned
    "unsigned_outcome": (
        False,
        "a human-panel outcome without a signature or `decided_by`: only the signer can fix it",
    ),
    "forged_outcome": (False, "a signature that does not verify (altered after signing, or not a signature)"),
    "outcome_unverifiable": (True, "signed with a key id this worker does not hold: replay once it holds the key"),
    # appeals (disputes.appeals, stage appeal), all final: the same appeal would be refused the same way
    "invalid_appeal": (False, "an appeal event that does not parse, or over `max_event_bytes`"),
    "appeal_evidence_rejected": (
        False,
        "evidence filed with an appeal that intake's rules refuse (the reason in the detail)",
    ),
    "appeal_already_filed": (False, "a second, different appeal for a case: the second instance is final"),
    "appeal_by_winner": (False, "the appellant won the first instance: only the losing party may appeal"),
    "appeal_window_closed": (False, "filed more than `appeal_window_s` after the verdict, or appeals off"),
    "appeal_before_verdict": (False, "filed before the verdict it names was decided, beyond `clock_skew_s`"),
    "appeal_wrong_verdict": (False, "the verdict id named is not the case's first-instance verdict"),
}
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
