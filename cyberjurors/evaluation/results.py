"""What one evaluated case produced: the contract between the eval driver and the metrics.

A ``CaseResult`` pairs a case's 17 real votes with the verdict the pipeline published for it (or
why there is none), and, when the party-swap test ran, the verdict on the case's swapped twin.
"""

from __future__ import annotations

from pydantic import Field

from ..schemas import GroundTruthVotes, Verdict
from ..schemas.case import Strict


class CaseResult(Strict):
    case_id: str
    category: str
    truth: GroundTruthVotes = Field(description="the 17 real jurors' votes")
    verdict: Verdict | None = Field(None, description="None: the case produced no verdict (see failure)")
    failure: str | None = Field(None, description="dead-letter reason, or 'timeout', when there is no verdict")
    swapped: Verdict | None = Field(None, description="the verdict on the party-swapped twin, if that test ran")
    swapped_failure: str | None = None
