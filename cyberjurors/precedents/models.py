"""What the precedent base stores and what a search returns.

Both index backends (embedded, Elasticsearch) store ``Document``s and return ``Hit``s, so the
rest of the pipeline never knows which one answered.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, get_args

from pydantic import Field

from ..errors import FINAL_PRECEDENT_KINDS, CyberJurorsError
from ..schemas import CATEGORIES as CATEGORIES  # re-exported for the index backends and the build
from ..schemas import Party, Votes
from ..schemas.case import Category, Record

Kind = Literal["case", "guideline"]
KINDS: tuple[Kind, ...] = get_args(Kind)
SearchMode = Literal["hybrid", "bm25", "vector"]
ANY_CATEGORY = "all"  # a guideline that applies across categories


class PrecedentCase(Record):
    """One historical case of H: what was disputed and how the real jury decided."""

    case_id: str
    category: Category
    summary: str = Field(description="product, dispute reason, both parties' key claims and evidence, as text")
    winner: Party
    votes: Votes
    tags: list[str] = Field(default_factory=list)
    decided_at: datetime | None = None

    @property
    def doc_id(self) -> str:
        return f"case:{self.case_id}"


class GuidelineChange(Record):
    """One entry of a guideline's history: what made version ``version``."""

    version: int
    reason: Literal["created", "merged", "outcome_agreed", "outcome_disagreed", "retired"]
    confidence: float
    case_id: str | None = None
    at: datetime | None = None


class Guideline(Record):
    """One verdict guideline of N: a short, testable rule distilled from cases.

    Guidelines are versioned: any change (confidence, text, supporting cases) makes a new
    version, and a verdict records the ``id@version`` of each guideline its jurors saw.
    """

    id: str = Field(description="stable across versions, e.g. g-3fa2c1")
    version: int = Field(1, ge=1)
    rule: str = Field(min_length=1, max_length=600)
    category: str = Field(description="a category, or 'all' for a cross-category rule")
    dispute_type: str = Field(description="short tag, e.g. not_received, damaged_in_transit, return_window")
    tags: list[str] = Field(default_factory=list)
    favours: Party | None = Field(None, description="the side the rule usually decides for, if any")
    supporting_cases: list[str] = Field(default_factory=list)
    confidence: float = Field(ge=0.0, le=1.0)
    active: bool = True
    updated_at: datetime | None = None
    history: list[GuidelineChange] = Field(default_factory=list, description="oldest first")

    @property
    def doc_id(self) -> str:
        return f"guideline:{self.id}"

    @property
    def ref(self) -> str:
        return f"{self.id}@{self.version}"

    def cites(self, case_id: str) -> bool:
        """Whether the guideline's provenance names the case: among its supporting cases, or in its
        history (an outcome's ``case_id``, or an override's ``case_id@event``)."""
        return case_id in self.supporting_cases or any(
            change.case_id is not None and (change.case_id == case_id or change.case_id.startswith(f"{case_id}@"))
            for change in self.history
        )


class Document(Record):
    """The unit both indexes store: one text field for BM25 and the embedding, keyword fields
    for filters, and the case or guideline itself."""

    id: str
    kind: Kind
    category: str
    text: str
    keywords: dict[str, list[str]] = Field(default_factory=dict, description="outcome, dispute_type, tags, ...")
    case: PrecedentCase | None = None
    guideline: Guideline | None = None

    @classmethod
    def of_case(cls, case: PrecedentCase) -> Document:
        return cls(
            id=case.doc_id,
            kind="case",
            category=case.category,
            text=case.summary,
            keywords={"outcome": [case.winner], "tags": case.tags},
            case=case,
        )

    @classmethod
    def of_guideline(cls, guideline: Guideline) -> Document:
        return cls(
            id=guideline.doc_id,
            kind="guideline",
            category=guideline.category,
            text=guideline.rule,
            keywords={
                "dispute_type": [guideline.dispute_type],
                "tags": guideline.tags,
                "outcome": [guideline.favours] if guideline.favours else [],
                "active": ["true" if guideline.active else "false"],
            },
            guideline=guideline,
        )


class Hit(Record):
    """One search result: the fused RRF score and rank, and where each retriever ranked it."""

    id: str
    kind: Kind
    score: float
    rank: int = Field(ge=1, description="1-based rank after fusion")
    sources: dict[str, int] = Field(description="retriever -> 1-based rank in its list, e.g. {'bm25': 2, 'vector': 1}")
    document: Document
    vector: bytes | None = Field(
        None,
        exclude=True,
        repr=False,
        description="the document's text as the store embedded it (float32, little-endian), where the "
        "store hands it back: retrieval matches with it instead of embedding the text again",
    )


class UpsertReport(Record):
    indexed: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict, description="document id -> reason")


class PrecedentError(CyberJurorsError, RuntimeError):
    """Retrieval or indexing failed; ``kind`` is a short bounded label for logs and metrics:
    bad_query, unknown_category, index_missing, model_missing, model_tampered, model_unpinned, model_unreadable,
    extra_missing,
    model_mismatch, corrupt, unreachable, auth,
    rate_limited, timeout, server_error, bulk_failed. Replayable unless the kind is one the same
    input meets again (``errors.FINAL_PRECEDENT_KINDS``)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message, kind=kind)

    @property
    def replayable(self) -> bool:  # type: ignore[override]  # a class attribute on CyberJurorsError, read only here
        return self.kind not in FINAL_PRECEDENT_KINDS


def decided_before(at: str | None, before: datetime) -> bool:
    """Whether a stored ``decided_at`` (ISO 8601; without a zone, UTC) is before ``before``."""
    if not at:
        return False
    try:
        when = datetime.fromisoformat(at)
    except ValueError:
        return False
    return (when if when.tzinfo else when.replace(tzinfo=UTC)) < before
