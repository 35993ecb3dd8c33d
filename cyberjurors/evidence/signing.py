"""Human-panel decisions carry their author, proven: the console signs each outcome it publishes
with ``outcome_signing_key`` (HMAC-SHA256 over the event's canonical JSON, the signature left out),
and a worker counts or learns from a ``source: human_panel`` outcome only when that signature
verifies under a key it holds. Anyone who can write to disputes.outcomes can still report the
platform's own jury (17 votes); only the console, or whoever holds the key, speaks for a human panel.

The key id in the signature (the first 8 hex digits of the key's sha256) lets a worker holding
several keys (``outcome_previous_keys`` during a rotation) say which one signed, and say so in the
dead letter when it holds none of them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from typing import Literal

from ..config import Settings
from ..schemas import OutcomeReported

SCHEME = "hmac-sha256"
# the signed bytes start with this, so a signature over an outcome can never be replayed as one over anything else
DOMAIN = b"cyberjurors/outcome/v1\n"
# the key id and the MAC as sign() writes them: anything else is refused before any of it is echoed in a
# dead letter's detail or a log line (a key id with a line break would forge a line of the worker's log)
_KEY_ID = re.compile(r"[0-9a-f]{8}")
_MAC = re.compile(r"[0-9a-f]{64}")


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def signed_bytes(outcome: OutcomeReported) -> bytes:
    body = outcome.model_dump(mode="json", exclude={"signature"}, exclude_none=True)
    return DOMAIN + json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sign(outcome: OutcomeReported, key: str) -> OutcomeReported:
    """The outcome with its signature by ``key``."""
    mac = hmac.new(key.encode(), signed_bytes(outcome), hashlib.sha256).hexdigest()
    return outcome.model_copy(update={"signature": f"{SCHEME}:{key_id(key)}:{mac}"})


@dataclass(frozen=True)
class Checked:
    """What checking a human-panel outcome's signature found: ``ok``, or why not (``reason`` is the
    dead letter's; ``replayable`` when a worker given the right key would accept it)."""

    ok: bool
    reason: Literal["", "unsigned_outcome", "forged_outcome", "outcome_unverifiable"] = ""
    detail: str = ""
    replayable: bool = False


def keys_of(settings: Settings) -> list[str]:
    return [k for k in (settings.outcome_signing_key, *settings.outcome_previous_keys) if k]


def check(outcome: OutcomeReported, settings: Settings) -> Checked:
    """Whether a ``human_panel`` outcome is signed by a key this process holds (any other source passes)."""
    if outcome.source != "human_panel":
        return Checked(True)
    if not outcome.signature or outcome.decided_by is None:
        missing = "signature" if not outcome.signature else "decided_by (who decided)"
        return Checked(
            False,
            "unsigned_outcome",
            f"a human panel's decision without its {missing}: only the console (or whoever holds "
            "outcome_signing_key) speaks for a human panel; neither counted nor learned from",
        )
    scheme, _, rest = outcome.signature.partition(":")
    kid, _, mac = rest.partition(":")
    keys = {key_id(k): k for k in keys_of(settings)}
    if scheme != SCHEME or not _KEY_ID.fullmatch(kid) or not _MAC.fullmatch(mac):
        return Checked(False, "forged_outcome", f"the signature is not {SCHEME}:<key id>:<hex>")
    if kid not in keys:
        return Checked(
            False,
            "outcome_unverifiable",
            f"signed with key {kid}, which this worker does not hold"
            + ("" if keys else " (no outcome_signing_key is set)")
            + ": set the console's key as outcome_signing_key (or in outcome_previous_keys), then replay",
            replayable=True,
        )
    expected = hmac.new(keys[kid].encode(), signed_bytes(outcome), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, mac):
        return Checked(
            False,
            "forged_outcome",
            f"the signature does not match the outcome under key {kid}: it was altered after "
            "signing, or signed by someone else; neither counted nor learned from",
        )
    return Checked(True)
