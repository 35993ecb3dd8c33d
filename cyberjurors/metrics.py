"""Prometheus metrics, defined in one place (the full set and the endpoint come with issue 4)."""

from __future__ import annotations

from prometheus_client import Counter

PRECEDENT_FALLBACKS = Counter(
    "cyberjurors_precedent_fallbacks_total",
    "Cases that went on without precedents because retrieval failed, by error kind",
    ["reason"],
)
PRECEDENT_COLD_STARTS = Counter(
    "cyberjurors_precedent_cold_starts_total",
    "Cases whose category had too few guidelines, so cross-category ones were added",
    ["category"],
)
