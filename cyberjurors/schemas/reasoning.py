"""What the stages produce, in the paper's notation: O_I, O_II, ballots, S_t, the verdict.

Model outputs (``Focus``, ``Selection``, ``Perception``, ``BallotDraft``, ``RoundSummaryDraft``, and
the verifier's and JURIS's drafts) are what an LLM is asked to return; the rest are records the
pipeline assembles around them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, model_validator

from .bounds import Line, Passage, Reasons, Ref, Tag, first
from .case import SCHEMA_VERSION, DisputeCase, Party, Record, Votes
from .court import Court, PrecedentConsistency
from .jury import JuryComposition

Leaning = Literal["buyer", "seller", "neutral"]

# --- model outputs -----------------------------------------------------------------------


class Focus(Record):
    """O_I = {F, F^b, F^s}: stage I, focus extraction."""

    focus: Passage = Field(description="the single question the jury must decide")
    buyer_claims: Annotated[list[Line], first(5), Field(max_length=5)] = Field(
        description="F^b: the buyer's core claims"
    )
    seller_claims: Annotated[list[Line], first(5), Field(max_length=5)] = Field(
        description="F^s: the seller's core claims"
    )


class Selection(Record):
    """F_select: the one unseen evidence item most likely to hold a key clue, or none."""

    evidence_id: Ref | None = Field(description="id of the chosen item; null when nothing left is relevant")
    reason: Line = Field(description="why this item, given the focus")


class Perception(Record):
    """F_perceive on one item: clue K_t and assessment A_t."""

    clue: Passage = Field(description="K_t: what the item shows that bears on the focus, concretely")
    assessment: Passage = Field(description="A_t: what the clue means for the party's claims")
    leaning: Leaning = Field(description="which side the clue supports")
    frames: Annotated[list[int], first(60), Field(max_length=60)] = Field(
        default_factory=list, description="video frame numbers the clue is seen in"
    )


class BallotDraft(Record):
    """Stages III-IV for one juror: conflicts first, then the individual verdict."""

    conflicts: Annotated[list[Line], first(4), Field(max_length=4)] = Field(
        description="Delta: conflicts between the parties' claims and the clues"
    )
    buyer_conflicts: Annotated[list[Line], first(3), Field(max_length=3)] = Field(
        description="Delta^b: where the buyer's claims fail against the clues"
    )
    seller_conflicts: Annotated[list[Line], first(3), Field(max_length=3)] = Field(
        description="Delta^s: where the seller's claims fail against the clues"
    )
    vote: Party
    justification: Reasons = Field(description="J_k: reasons, citing clue ids like [b1] and guideline ids")
    cited_clues: Annotated[list[Tag], first(12), Field(max_length=12)] = Field(default_factory=list)
    cited_guidelines: Annotated[list[Ref], first(8), Field(max_length=8)] = Field(default_factory=list)


class RoundSummaryDraft(Record):
    """F_sum: the collective summary S_t of one round's justifications."""

    summary: Reasons
    buyer_arguments: Annotated[list[Line], first(4), Field(max_length=4)]
    seller_arguments: Annotated[list[Line], first(4), Field(max_length=4)]


class ArgumentDraft(Record):
    """One advocate's turn in a court debate (the AgentsCourt-style reference baseline)."""

    statement: Reasons = Field(description="the argument for your party, answering the other side's last turn")
    cited_evidence: Annotated[list[Ref], first(12), Field(max_length=12)] = Field(
        default_factory=list, description="evidence ids the argument rests on"
    )


class VerificationDraft(Record):
    """The verifier's answer on one draft of the verdict's justification (VERDICT's Pass/Reject)."""

    decision: Literal["pass", "reject"] = Field(
        description="pass when every factual claim of the justification "
        "traces to a clue, a cited guideline, the order record "
        "or a party's stated claim; reject otherwise"
    )
    feedback: Passage = Field("", description="on reject: what is wrong and how to correct it")
    untraceable_claims: Annotated[list[Passage], first(4), Field(max_length=4)] = Field(
        default_factory=list,
        description="on reject: each claim of the "
        "justification that traces to nothing, quoted verbatim as the whole "
        "sentence it stands in",
    )


class JustificationDraft(Record):
    """A revised or consolidated justification (the summariser revising after a Reject, JURIS's editor)."""

    justification: Reasons = Field(description="the justification, citing clue ids like [b1] and guideline ids")


class CandidateSentences(Record):
    """JURIS: one drafter's candidate sentences for the verdict's justification."""

    sentences: Annotated[list[Line], first(12), Field(max_length=12)] = Field(
        description="one claim per sentence, each citing the clue or guideline ids it rests on in brackets"
    )


class SentenceVotes(Record):
    """JURIS: the candidate sentences one juror accepts for the justification."""

    accepted: Annotated[list[Tag], first(24), Field(max_length=24)] = Field(
        description="ids of the candidate sentences you accept, e.g. A1, B3"
    )


# --- records -----------------------------------------------------------------------------


class Argument(ArgumentDraft):
    party: Party
    turn: int


def _by_key(description: str) -> Any:
    """A ``Usage`` tally by key (a price source, a role, a model): empty by default, and what
    ``__add__`` and ``__sub__`` combine key by key rather than as one number."""
    return Field(default_factory=dict, description=description)


class Usage(Record):
    input_tokens: int = Field(0, description="uncached input tokens")
    output_tokens: int = Field(0, description="output tokens, thinking included (as providers bill them)")
    cache_read_tokens: int = 0
    cache_write_tokens: int = Field(0, description="written to the prompt cache, either TTL")
    thinking_tokens: int = Field(0, description="of output_tokens, those spent thinking (reasoning tokens)")
    cache_write_1h_tokens: int = Field(0, description="of cache_write_tokens, those written with the 1-hour TTL")
    calls: int = 0
    latency_s: float = 0.0
    cost_usd: float = Field(
        0.0,
        description="estimated when the call was made, at llm_prices or else genai-prices' list (0 for "
        "stand-ins); it leaves out unpriced calls, so with unpriced_calls above 0 it is a floor",
    )
    cost_sources: dict[str, float] = _by_key(
        "cost_usd by where its prices came from: catalog (config/catalog.py's dated list "
        "prices), llm_prices (set by the operator), genai-prices <version> (the list for models neither has)",
    )
    unpriced_calls: int = Field(
        0, description="calls to a model no price source knows: their tokens are counted, their cost is not"
    )
    caption_calls: dict[str, int] = _by_key(
        "calls by role whose model reads no images: they read each photo and video frame as its "
        "evidence label and the party's caption (what the verdict's captions_only lists)",
    )
    plumbing_calls: dict[str, int] = _by_key(
        "calls by model answered by a plumbing-only tiny model (config/catalog.py): they show the "
        "plumbing works, never judgement (the verdict is labelled a stand-in)",
    )
    fitted_calls: dict[str, int] = _by_key(
        "calls whose prompt was cut to fit the model's context window, by what was cut "
        '("juror on M: dropped precedents g-4; clipped evidence b1"): what the verdict\'s prompt_fitting says',
    )

    def __add__(self, other: Usage) -> Usage:
        summed: dict[str, object] = {}
        for k in Usage.model_fields:
            mine, theirs = getattr(self, k), getattr(other, k)
            if isinstance(mine, dict):  # cost_sources: by source, in a fixed order (the same bytes every time)
                summed[k] = {s: mine.get(s, 0.0) + theirs.get(s, 0.0) for s in sorted(mine.keys() | theirs.keys())}
            else:
                summed[k] = mine + theirs
        return Usage.model_validate(summed)

    def __sub__(self, other: Usage) -> Usage:
        """What ``self`` holds beyond ``other`` (a verdict's totals less its stages'), never below 0."""
        rest: dict[str, object] = {}
        for k in Usage.model_fields:
            mine, theirs = getattr(self, k), getattr(other, k)
            if isinstance(mine, dict):
                left = {s: round(mine.get(s, 0.0) - theirs.get(s, 0.0), 6) for s in mine}
                rest[k] = {s: v for s, v in left.items() if v > 0}
            elif isinstance(mine, int):
                rest[k] = max(mine - theirs, 0)
            else:
                rest[k] = max(round(mine - theirs, 6), 0.0)
        return Usage.model_validate(rest)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


class Clue(Record):
    """One step of the select-perceive chain: focus -> evidence item -> clue."""

    id: str = Field(description="b1, b2, ... for the buyer; s1, ... for the seller")
    party: Party
    step: int
    evidence_id: str
    evidence_kind: str
    selection_reason: str
    clue: str
    assessment: str
    leaning: Leaning
    frames: list[int] = Field(default_factory=list)
    frame_times_s: list[float] = Field(default_factory=list)
    problem: str | None = Field(None, description="why the item could not be perceived, if it could not")


class ClueChain(Record):
    """O_II: the recorded focus -> evidence chain for both parties."""

    buyer: list[Clue] = Field(default_factory=list)
    seller: list[Clue] = Field(default_factory=list)

    def all(self) -> list[Clue]:
        return [*self.buyer, *self.seller]


class Ballot(BallotDraft):
    juror: int
    round: int
    model: str


class RoundSummary(RoundSummaryDraft):
    round: int
    votes: Votes


class Abstention(Record):
    """A juror seated for a round who gave no valid ballot: its answer was cut at the output limit,
    or failed the ballot's schema after its repair, when first asked and when asked once more."""

    juror: int
    round: int
    model: str
    kind: Literal["truncated", "invalid_output"] = Field(description="how the second answer failed")
    detail: str = Field(description="what the backend said of it, for people")


class JuryRound(Record):
    round: int
    ballots: list[Ballot] = Field(description="the valid ballots, in seat order")
    summary: RoundSummary
    abstentions: list[Abstention] = Field(
        default_factory=list, description="the seats that gave no valid ballot this round (summary.votes counts them)"
    )
    problems: list[str] = Field(
        default_factory=list, description="notes for the verdict, e.g. a summary that fell back to the tally"
    )

    @property
    def votes(self) -> Votes:
        return self.summary.votes


class PrecedentRef(Record):
    """A retrieved precedent as the case file carries it: a historical case or a guideline."""

    id: str = Field(description="guideline id (g-...) or historical case id")
    kind: Literal["case", "guideline"]
    version: int | None = Field(None, description="guideline version the jurors saw")
    text: str = Field(description="the guideline's rule, or the case summary")
    category: str
    favours: Party | None = Field(None, description="the guideline's usual side, or the case's real winner")
    confidence: float | None = None
    score: float
    rank: int
    sources: dict[str, int] = Field(default_factory=dict, description="retriever -> rank, e.g. bm25, vector")
    similarity: float | None = Field(
        None,
        description="a historical case's cosine with the case's query, by the embedding model (what the "
        "precedent consistency check reads); None for guidelines and in records from before it",
    )

    @property
    def ref(self) -> str:
        return f"{self.id}@{self.version}" if self.version is not None else self.id


Coverage = Literal["high", "low", "none"]


class Precedents(Record):
    """Retrieved for one case after stage I: top-H cases, the guideline pool, and each juror's
    memory M_k (top-K of the pool by match with the juror's persona)."""

    cases: list[PrecedentRef] = Field(default_factory=list)
    guidelines: list[PrecedentRef] = Field(default_factory=list)
    memory: dict[int, list[str]] = Field(default_factory=dict, description="juror -> guideline ids")
    coverage: Coverage = Field(
        "none",
        description="high; low = too few in the category, cross-category "
        "guidelines added; none = nothing retrieved or retrieval failed",
    )
    problem: str | None = None

    def memory_of(self, juror: int) -> list[PrecedentRef]:
        by_id = {g.id: g for g in self.guidelines}
        return [by_id[i] for i in self.memory.get(juror, []) if i in by_id]


class BudgetStop(Record):
    """Where a case reached its per-case budget (``case_token_budget`` / ``case_cost_budget_usd``) and
    what was skipped because of it."""

    limit: Literal["tokens", "cost"]
    stage: str = Field(
        description="clues: further select steps skipped, the jury judged what was perceived; "
        "round-N: deliberation stopped after round N with its majority; verdict: the "
        "justification's verification (or JURIS) skipped or cut short"
    )
    tokens: int = Field(description="tokens the case had used when the budget was found reached")
    cost_usd: float


class Verification(Record):
    """What the verifier (the Adjudication Supervisor of VERDICT) made of the verdict's justification:
    every factual claim must trace to a perceived clue (O_II) or a cited guideline."""

    status: Literal["passed", "failed"] = Field(
        description="passed: the justification was accepted within "
        "verifier_max_turns; failed: still rejected after them, and the "
        "claims that could not be traced were removed"
    )
    turns: int = Field(description="verifier calls made (1 = accepted as first drafted)")
    removed_claims: list[str] = Field(
        default_factory=list, description="claims dropped from the justification because they could not be traced"
    )
    feedback: list[str] = Field(default_factory=list, description="the verifier's accumulated feedback, in order")


EscalationReason = Literal[
    "narrow_margin",
    "low_precedent_coverage",
    "no_precedent_coverage",
    "verification_failed",
    "injection",
    "decisive_evidence_unreadable",
    "budget_reached",
    "inconsistent_with_precedent",
    "quorum_not_reached",
]
ESCALATION_REASONS: tuple[EscalationReason, ...] = get_args(EscalationReason)


class CaseFile(Record):
    """The case as it moves through the pipeline; each stage fills in its part."""

    schema_version: Literal[1] = SCHEMA_VERSION
    case: DisputeCase
    received_at: datetime
    problems: list[str] = Field(default_factory=list, description="input issues noted on the way")
    focus: Focus | None = None
    clues: ClueChain | None = None
    precedents: Precedents | None = None
    rounds: list[JuryRound] = Field(default_factory=list)
    usage: dict[str, Usage] = Field(default_factory=dict, description="by stage")
    backend: str = ""
    digest: str = Field("", description="the case's content hash (DisputeCase.digest), computed once at intake")
    budget_stop: BudgetStop | None = Field(None, description="stage II stopped early: the per-case budget was reached")
    unread_evidence: list[str] = Field(
        default_factory=list,
        description="evidence the jury was to examine that could "
        "not be read: items stage II selected whose perception failed, or, with stage "
        "II off, every media item that could not be decoded",
    )
    appeal: AppealBrief | None = Field(None, description="the second instance: the appeal it judges")
    jury: JuryComposition | None = Field(None, description="the jury that deliberates, set at round 1")
    court: Court | None = Field(None, description="the court the court policy seated for the case, set at stage I")

    @model_validator(mode="after")
    def _digest_once(self) -> CaseFile:
        # set at intake and carried from hop to hop; computed here only for a case file built
        # without one (the in-process judge, tests, or one written by an older version)
        if not self.digest:
            self.digest = self.case.digest()
        return self

    @property
    def case_id(self) -> str:
        return self.case.case_id


PersonalData = Literal["phone", "email", "card", "iban", "address", "person", "url"]
"""The kinds of personal data ``evidence/privacy.py`` can mask; each is a placeholder's name, e.g. [PHONE_1]."""
PERSONAL_DATA: tuple[PersonalData, ...] = get_args(PersonalData)


class Masked(Record):
    """How much of one kind of personal data a case had replaced: counts, never the values."""

    values: int = Field(description="distinct values (after normalising), each its own placeholder [KIND_N]")
    occurrences: int = Field(description="places replaced in the dispute form, the evidence and an appeal's grounds")


class Minimisation(Record):
    """What was masked in a case before any prompt was built (``privacy_mask``): kinds and counts only."""

    kinds: list[PersonalData] = Field(description="the kinds looked for (privacy_mask)")
    masked: dict[PersonalData, Masked] = Field(
        default_factory=dict, description="kind -> the values and places replaced; only the kinds found"
    )
    escaped: int = Field(
        0, description="placeholder-shaped text a party typed, e.g. [PHONE_1], shown to the jury as (PHONE_1)"
    )
    kept: int = Field(0, description="detected values left as evidence because privacy_keep_patterns matched them")
    withheld: list[str] = Field(
        default_factory=list,
        description="texts whose personal data could not be searched for, shown to the jury as [WITHHELD]: "
        "evidence ids, dispute-form fields, 'extra 1' for an appeal's grounds",
    )


class Verdict(Record):
    schema_version: Literal[1] = SCHEMA_VERSION
    verdict_id: str = Field(
        description="derived from the case (instance 2: from the appeal): the same case always yields the same id"
    )
    case_id: str
    instance: Literal[1, 2] = Field(1, description="1: the jury's decision; 2: the appeal's, final")
    appeal_of: str | None = Field(None, description="instance 2: the verdict_id of the first-instance verdict appealed")
    category: str
    winner: Party
    votes: Votes
    margin: int
    rounds_used: int
    early_stopped: bool
    escalated: bool = Field(
        False, description="too doubtful to stand alone: the case went to disputes.escalations for a human panel"
    )
    escalation_reasons: list[EscalationReason] = Field(default_factory=list, description="why (escalate_on)")
    justification: str
    cited_clues: list[Clue] = Field(
        description="the clues the majority cited, most cited first; empty (with a note in problems) when it cited none"
    )
    mentioned_clues: list[Clue] = Field(
        default_factory=list, description="other clues the justification names, e.g. the minority's"
    )
    cited_precedents: list[str] = Field(default_factory=list, description="guideline id@version the majority cited")
    precedents_seen: list[str] = Field(default_factory=list, description="every guideline id@version jurors saw")
    precedent_coverage: Coverage = "none"
    focus: str
    problems: list[str] = Field(default_factory=list)
    budget_reached: bool = Field(
        False,
        description="the per-case budget cut the work short (select steps skipped "
        "or rounds not held); the problems say what was skipped",
    )
    budget_stops: list[BudgetStop] = Field(default_factory=list, description="where the budget stopped the case")
    votes_by_model: dict[str, Votes] = Field(
        default_factory=dict,
        description="the final round's votes by the model each juror seat was given (juror_models)",
    )
    verification: Verification | None = Field(
        None,
        description="the verifier's check of the justification; absent when the verifier is off, or when "
        "it gave no valid answer twice (a note in problems says so)",
    )
    jury: JuryComposition | None = Field(
        None,
        description="who sat: each seat's persona, model and final vote, "
        "its qualification and weight, the personas replaced",
    )
    minimisation: Minimisation | None = Field(
        None,
        description="the personal data replaced by placeholders before any model saw the case: kinds and "
        "counts, never the values; absent when privacy_mask is empty (and from older versions)",
    )
    court: Court | None = Field(
        None, description="the court that sat (court_policy's tier); absent from verdicts written before courts"
    )
    precedent_consistency: PrecedentConsistency | None = Field(
        None,
        description="the verdict against its nearest decided precedents; absent without a precedent base "
        "(precedent_backend = none)",
    )
    captions_only: list[str] = Field(
        default_factory=list,
        description="the roles (perceive, juror, ...) that read photos and videos as their evidence labels and the "
        "parties' captions only: their model reads no images (llm_capabilities, the catalog or the server said so)",
    )
    prompt_fitting: list[str] = Field(
        default_factory=list,
        description="prompts cut to fit a model's context window, by role and model: the precedents dropped "
        "(lowest-ranked first) and the parties' texts clipped, with the number of calls",
    )
    stand_in: bool = Field(
        False,
        description="decided by a stand-in: the offline backend, or a plumbing-only tiny model (config/catalog.py): "
        "its votes and justification show the plumbing works, never judgement",
    )
    tokens: Usage
    latency_s: float
    backend: str
    models: list[str]
    decided_at: datetime


class AppealBrief(Record):
    """What the second instance judges besides the original record: who appeals, on what grounds,
    with which new evidence (a round of the appellant's in the case), against which verdict."""

    appeal_id: str = Field(description="the appeal's content hash: a resent appeal is the same appeal")
    appellant: Party
    grounds: str = Field(description="the appellant's statement of grounds (party-authored)")
    new_evidence: list[str] = Field(default_factory=list, description="ids of the evidence filed with the appeal")
    filed_at: datetime
    first_instance: Verdict


class Escalation(Record):
    """On ``disputes.escalations``: a verdict too doubtful to stand alone, with everything a human
    panel needs. Keyed by case_id; ``escalation_id`` is derived from the verdict's id, so a
    redelivered verdict re-sends the same escalation. The panel's decision comes back on
    ``disputes.outcomes`` (``source: human_panel``)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["escalation"] = "escalation"
    escalation_id: str
    case_id: str
    verdict_id: str
    instance: Literal[1, 2]
    reasons: list[EscalationReason]
    notes: list[str] = Field(description="what set each reason off, for the panel")
    verdict: Verdict
    case_file: CaseFile = Field(
        description="the record: the case with its media by reference (path under media_root, "
        "url, or stored: a sha256 in the media store), the focus O_I, the clue "
        "chain O_II, the precedents, every round's ballots and summary, and, for "
        "instance 2, the appeal"
    )
    ballots_trimmed: bool = Field(
        False,
        description="earlier rounds' ballots were left out to fit max_event_bytes (their summaries and votes are kept)",
    )
    raised_at: datetime


class DeadLetter(Record):
    schema_version: Literal[1] = SCHEMA_VERSION
    reason: str = Field(description="short machine-readable cause, e.g. invalid_json (errors.Reason)")
    detail: str
    stage: str
    topic: str
    partition: int | None = None
    offset: int | None = None
    key: str | None = None
    original_base64: str = Field(
        "", description="the message value exactly as received, when the letter can carry it within max_event_bytes"
    )
    original_ref: str | None = Field(None, description="else the sha256 of the original in the media store")
    original_bytes: int | None = Field(None, description="the original's size")
    failed_at: datetime
    replayable: bool | None = Field(
        None,
        description="whether resending the original may succeed, decided where "
        "the letter was written; absent from older letters",
    )


CaseFile.model_rebuild()  # AppealBrief names the Verdict, defined after the case file
