"""Test data made in one place: dispute cases and the settings tests build without a broker.

A test that needs a case or settings takes them from here, with what matters to it given as
arguments (``case("esc-1", buyer="...")``, ``settings(jurors=5)``); a module whose tests all share
the same arguments binds them once (``functools.partial(settings, jurors=5)``). A case or settings
whose content a test depends on beyond that (a hostile case, a coat with three buyer items) stays
in its module, named for what is special about it. The broker's own ``settings`` fixture (fresh
topics and a fresh group per test) is in conftest.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cyberjurors.config import Settings
from cyberjurors.schemas import DisputeCase

from .conftest import EXAMPLES

# the dispute form of the plain sample case: a linen shirt whose seam tore
METADATA: dict[str, str] = {
    "category": "clothing",
    "product": "Linen shirt",
    "order_amount": "45.00",
    "currency": "EUR",
    "ordered_at": "2026-09-01T10:00:00Z",
    "dispute_reason": "Seam torn",
    "requested_remedy": "Refund",
}
# a wool coat with a torn lining: the case whose buyer sends several items
WOOL_COAT: dict[str, str] = {
    "category": "clothing",
    "product": "Wool coat",
    "order_amount": "120",
    "currency": "EUR",
    "ordered_at": "2026-10-01T00:00:00Z",
    "dispute_reason": "Torn lining",
    "requested_remedy": "Refund",
}
BUYER = "The seam was torn."
SELLER = "It left intact."


def case_data(
    case_id: str = "c-1",
    buyer_items: list[dict] | None = None,
    *,
    buyer: str = BUYER,
    seller: str = SELLER,
    metadata: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A case as a platform sends it (JSON): one round each, the buyer's text as item b1 (or
    ``buyer_items``), the seller's as s1; ``extra`` adds or replaces top-level fields."""
    return {
        "case_id": case_id,
        "metadata": METADATA if metadata is None else metadata,
        "rounds": [
            {"party": "buyer", "round": 1, "items": buyer_items or [{"id": "b1", "kind": "text", "text": buyer}]},
            {"party": "seller", "round": 1, "items": [{"id": "s1", "kind": "text", "text": seller}]},
        ],
        **extra,
    }


def case(case_id: str = "c-1", buyer_items: list[dict] | None = None, **kw: Any) -> DisputeCase:
    """The same case, validated (``case_data``'s arguments)."""
    return DisputeCase.model_validate(case_data(case_id, buyer_items, **kw))


def whole(c: dict[str, Any], **event: Any) -> bytes:
    """A whole case as one event on disputes.events."""
    return json.dumps({"type": "case", "case": c, **event}).encode()


def example_case(name: str) -> DisputeCase:
    """A sample case of examples/cases, by file name (``.json`` optional)."""
    return DisputeCase.model_validate_json((EXAMPLES / "cases" / Path(name).with_suffix(".json")).read_text())


def settings(*, precedents: Path | None = None, **over: Any) -> Settings:
    """Settings for a test without a broker: the offline backend, and no precedent base unless
    ``precedents`` names the folder of an embedded one; ``over`` sets any other field (or these)."""
    base: dict[str, Any] = {"llm_backend": "offline", "precedent_backend": "none"}
    if precedents is not None:
        base |= {"precedent_backend": "embedded", "precedent_dir": precedents}
    return Settings(**(base | over))


def anthropic_settings(url: str, **over: Any) -> Settings:
    """Settings for the anthropic backend against a local server (tests/messages_server.py): no retry
    by the SDK, no precedent base, the sample media."""
    return Settings(
        **{
            "llm_backend": "anthropic",
            "anthropic_api_key": "sk-ant-test",
            "anthropic_base_url": url,
            "llm_max_retries": 0,
            "precedent_backend": "none",
            "media_root": EXAMPLES,
            "metrics_port": 0,
            **over,
        }
    )


def sealing(settings: Settings, folder: Path) -> Settings:
    """``settings`` with every record sealed (payload_encryption) under case keys kept in ``folder``."""
    return settings.model_copy(
        update={
            "media_store": str(folder / "store"),
            "media_encryption": True,
            "payload_encryption": True,
            "case_key_secret": "s" * 32,
            "case_key_store": str(folder / "keys"),
        }
    )
