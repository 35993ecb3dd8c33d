"""The jury section: the method (the paper's defaults), trust, qualification, budgets and recourse."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, field_validator

from ..schemas.reasoning import ESCALATION_REASONS, EscalationReason
from .fields import ConfigModel, Resolved, nested, unset

# reasons a platform switches on in escalate_on: off by default, so a verdict escalates as before
OPT_IN_REASONS: tuple[EscalationReason, ...] = ("low_precedent_coverage", "inconsistent_with_precedent")


Justification = Literal["summary", "juris"]
Deliberation = Literal["jury", "court"]
SocialGraph = Literal["small_world", "complete"]


class PipelineOverrides(ConfigModel):
    """The pipeline's switches set apart from ``pipeline`` (the setting ``pipeline_overrides``); each
    unset one is the named pipeline's."""

    focus_stage: bool | None = unset("stage I, focus extraction; off = jurors read the raw case")
    verdict_rules: bool | None = unset("the platform's verdict rules in the juror prompt (+Rules)")
    round_summary: bool | None = unset(
        "F_sum: a summary call after each round; off = jurors see only the jurors they follow, "
        "and the verdict's justification is the majority's first ballot"
    )
    verifier: bool | None = unset(
        "after the final round a verifier checks that every factual claim of the verdict's "
        "justification traces to a perceived clue or a cited guideline (Pass / Reject with feedback; the "
        "summariser revises, up to verifier_max_turns); off: no verify calls (the paper's method has none)"
    )
    justification: Justification | None = unset(
        "summary = the final round's summary S_T (the paper); juris = two drafters propose "
        "sentences, juris.voters jurors vote on each, an editor consolidates the accepted ones, and the "
        "verifier checks the result (JURIS: always verified)"
    )
    deliberation: Deliberation | None = unset(
        "jury = JCV; court = an AgentsCourt-style debate of two advocates, then one judge"
    )
    social_graph: SocialGraph | None = unset(
        "who follows whom; complete = everyone reads everyone (ChatEval's simultaneous talk)"
    )
    per_juror_stages: bool | None = unset(
        "naive baseline for cost benchmarks: every juror re-runs stages I-II itself in every round"
    )


def _switches(**given: Any) -> PipelineOverrides:
    full: dict[str, Any] = dict(
        focus_stage=True,
        verdict_rules=True,
        round_summary=True,
        verifier=False,
        justification="summary",
        deliberation="jury",
        social_graph="small_world",
        per_juror_stages=False,
    )
    return PipelineOverrides(**{**full, **given})


Pipeline = Literal[
    "full",
    "baseline",
    "rules",
    "sr-cot",
    "iv-cot",
    "jury",
    "precedent",
    "verifier",
    "juris",
    "mixed-jury",
    "agentscourt",
    "chateval",
]
# Each rung of the ablation ladder (evaluation/ladder.py) by its key: the stages and the method it runs.
# The jury's size, the rounds, T_max and the precedent base are settings of their own, which the ladder
# sets beside the pipeline (sr-cot, iv-cot, jury and precedent differ only in those).
_RAW: dict[str, Any] = dict(focus_stage=False, verdict_rules=False)
PIPELINES: dict[str, PipelineOverrides] = {
    "full": _switches(),
    "baseline": _switches(**_RAW),
    "rules": _switches(focus_stage=False),
    "sr-cot": _switches(),
    "iv-cot": _switches(),
    "jury": _switches(),
    "precedent": _switches(),
    "verifier": _switches(verifier=True),
    "juris": _switches(verifier=True, justification="juris"),
    "mixed-jury": _switches(),
    "agentscourt": _switches(**_RAW, deliberation="court"),
    "chateval": _switches(**_RAW, social_graph="complete", round_summary=False),
}


# one name per idea: early_stopping=false is early_stop=0 (config/deprecated.py's early_stopping)
DEPRECATED_EARLY_STOPPING = {"early_stopping": "early_stop"}


class GraphSettings(ConfigModel):
    """The jurors' social graph (the setting ``graph``; its kind is ``pipeline_overrides.social_graph``)."""

    out_degree: int = Field(4, ge=0, description="accounts each juror follows")
    rewire_p: float = Field(0.2, ge=0, le=1, description="the small-world graph's rewiring probability")
    seed: int = Field(
        7, description="the social graph's random seed: the same seed seats the same graph on every worker"
    )


class QualificationGate(ConfigModel):
    """What a persona must show on its mock cases to serve (the setting ``qualification_gate``; the gate itself is ``qualification``)."""

    cases: int = Field(12, ge=2, le=200, description="K mock cases per persona, half won by each side")
    min_accuracy: float = Field(
        0.6, ge=0, le=1, description="below this share of mock cases decided as the real jury did, a persona fails"
    )
    max_bias: float = Field(
        0.25,
        ge=0,
        le=1,
        description="a persona whose seller-vote share on the mock cases differs from their "
        "labelled seller share by more than this fails",
    )


class ConsistencySettings(ConfigModel):
    """When a verdict is compared with its near precedents (the setting ``consistency``, jury/consistency.py)."""

    min_similarity: float = Field(
        0.6,
        ge=-1,
        le=1,
        description="after the vote, the verdict is compared with the retrieved historical cases of its "
        "category whose cosine similarity to the case reaches this; where most of them went the other way "
        "the verdict says so (and escalates, with inconsistent_with_precedent in escalate_on)",
    )
    min_precedents: int = Field(
        2,
        ge=1,
        description="near precedents needed for the comparison: with fewer, the verdict's consistency is "
        "no_precedent (one precedent alone never makes a verdict inconsistent)",
    )


class JurisSettings(ConfigModel):
    """How the jury votes the justification with ``pipeline = juris`` (the setting ``juris``, jury/juris.py)."""

    voters: int = Field(
        5,
        ge=1,
        description="jurors (seats 0..K-1) who vote on JURIS's candidate sentences: "
        "the JURIS paper's K = 5; capped at the jury's size",
    )
    max_sentences: int = Field(6, ge=1, description="candidate sentences kept per JURIS drafter")


def _pipeline(settings: Any, name: str) -> Any:
    return getattr(PIPELINES[settings.pipeline], name)


class JurySettings(BaseModel):
    """What ``jury/`` needs besides the models (``LLMSettings``): N, T, delta, K's use, the graph,
    the verifier and JURIS, qualification, the per-case budget, escalation and appeals."""

    # The stages and the method as one name (issue 41): a rung of the ablation ladder, or full.
    pipeline: Pipeline = Field(
        "full",
        description="the stages and the method by the name of the ablation ladder's rung that runs them: "
        "full (= precedent: stages I-IV, the verdict rules, the round summary, the social graph, unverified), "
        "baseline, rules, sr-cot, iv-cot, jury, precedent, verifier, juris, mixed-jury, agentscourt, chateval "
        "(docs/evaluation.md); jurors, rounds, max_select_steps and precedent_backend are set apart",
    )
    pipeline_overrides: PipelineOverrides = nested(
        PipelineOverrides,
        'any of the pipeline\'s switches set apart (pipeline_overrides={"verifier": true}, '
        "CYBERJURORS_PIPELINE_OVERRIDES__VERIFIER)",
        then=" (their meanings: reference/settings.md#pipeline_overrides)",
    )
    jurors: int = Field(17, ge=1, description="N")
    rounds: int = Field(3, ge=1, description="T, discussion rounds")
    max_select_steps: int = Field(
        3,
        ge=0,
        description="T_max, select-perceive steps per party; 1 = SR-CoT's single-step selection; "
        "0 = stage II off: jurors get every item at once, media attached (passive perception)",
    )
    early_stop: float = Field(
        0.8,
        ge=0,
        le=1.0,
        description="delta, the majority share that ends deliberation before the last round (above 0.5); "
        "0 = off, always deliberate all T rounds",
    )
    ballot_quorum: int = Field(
        0,
        ge=0,
        description="valid ballots a round needs; a juror whose answer is cut off or invalid twice abstains "
        "for the round. A round short of the quorum ends deliberation and its verdict is escalated "
        "(quorum_not_reached). 0 = more than half the seats (9 of 17); capped at the jury's size",
    )
    graph: GraphSettings = nested(
        GraphSettings,
        'the small-world social graph, any of these by itself (graph={"out_degree": 6}, CYBERJURORS_GRAPH__SEED)',
    )
    personas_file: Path | None = Field(
        None, description="the jurors' personas (JSON); unset = the packaged ones (schemas/personas.json)"
    )
    verdict_rules_file: Path | None = Field(None, description="your platform's rules; default: the packaged ones")
    court_rounds: int = Field(2, ge=1, description="debate turns per advocate (deliberation=court)")
    warm_cache_first: bool = Field(
        True,
        description="in round 1, one juror runs before the others so they read the cached case prefix; in "
        "stage II, the buyer's first selection runs before the seller's chain so the seller's "
        "selector reads the prefix it wrote (only where that prefix is marked cacheable)",
    )
    verifier_max_turns: int = Field(
        3,
        ge=1,
        description="T_max: verifier calls per verdict; a justification still rejected after them has "
        "its untraceable claims removed (verification failed)",
    )
    juris: JurisSettings = nested(
        JurisSettings, 'JURIS\'s vote, either by itself (juris={"voters": 7}, CYBERJURORS_JURIS__MAX_SENTENCES)'
    )
    qualification: Literal["off", "report", "replace", "reweight"] = Field(
        "off",
        description="off = the paper's unvetted jury; report = qualify every persona at worker start and say "
        "so, change nothing; replace = a failing persona's seat goes to the first qualified reserve "
        "of personas_file; reweight = a failing persona's ballot counts less in the verdict's "
        "majority (docs/guides/qualification.md)",
    )
    qualification_gate: QualificationGate = nested(
        QualificationGate,
        'the qualification gate\'s bar (K mock cases), any of these by itself (qualification_gate={"cases": 20}, '
        "CYBERJURORS_QUALIFICATION_GATE__MIN_ACCURACY)",
    )
    # 0 = off (not None: a child worker gets its settings as env vars, where None would be left out
    # and the default come back)
    case_token_budget: int = Field(
        400_000,
        ge=0,
        description="tokens of every kind (input, output, cache read and write) one case may use; "
        "once reached, no further select step or jury round starts: the verdict is the "
        "last round's majority, marked budget_reached. 0 = off",
    )
    case_cost_budget_usd: float = Field(
        0.0, ge=0, description="the same ceiling in estimated USD (llm_prices); 0 = off"
    )
    escalation_margin: float = Field(
        5,
        ge=0,
        description="escalate a verdict whose vote margin, on the 17-vote scale, is below this (5: 9:8 and "
        "10:7); 0 = never for the margin",
    )
    escalate_on: list[EscalationReason] = Field(
        default_factory=lambda: list[EscalationReason](r for r in ESCALATION_REASONS if r not in OPT_IN_REASONS),
        description="which reasons escalate a verdict to disputes.escalations: narrow_margin, low_precedent_coverage, "
        "no_precedent_coverage (both only with a precedent base configured), verification_failed, "
        "injection, decisive_evidence_unreadable, budget_reached, inconsistent_with_precedent, "
        "quorum_not_reached; "
        "default: all but low_precedent_coverage and inconsistent_with_precedent; [] = never",
    )
    escalation_outcome_wait_s: float = Field(
        3 * 86400,
        gt=0,
        description="an outcome that is not a signed human panel's (the platform's own jury) reported "
        "for an escalated case is held this long after it arrives, neither counted nor learned from, "
        "waiting for the panel's decision, which then stands in its place (the held one becomes a "
        "dead letter, outcome_superseded); none by then, the held one is counted and learned from. "
        "A state_retention_s below it shortens it; checked every state_sweep_interval_s",
    )
    consistency: ConsistencySettings = nested(
        ConsistencySettings,
        'the comparison with precedent, either by itself (consistency={"min_similarity": 0.7}, '
        "CYBERJURORS_CONSISTENCY__MIN_PRECEDENTS)",
    )
    appeal_window_s: float = Field(
        30 * 86400,
        ge=0,
        description="how long after a first-instance verdict its loser may appeal (eBay: 30 days); "
        "a decided case's state is kept at least this long; 0 = appeals off",
    )
    appeal_jurors: int = Field(31, ge=1, description="the second instance's panel (Taobao's appeal panels: 31)")
    clock_skew_s: float = Field(
        300,
        ge=0,
        description="how far the platform's clocks may be from ours: an appeal filed (filed_at, the "
        "platform's clock) up to this long before its verdict was decided (decided_at, ours) "
        "is taken as filed after it; earlier, it is refused (appeal_before_verdict)",
    )

    @field_validator("early_stop")
    @classmethod
    def _a_majority(cls, value: float) -> float:
        if 0 < value <= 0.5:
            raise ValueError("early_stop must be a majority share above 0.5, or 0 (off: every round deliberated)")
        return value

    @field_validator("case_token_budget", "case_cost_budget_usd", mode="before")
    @classmethod
    def _budget_off(cls, value: object) -> object:
        return 0 if value is None or value == "" else value

    # What every reader uses: each switch as resolved, under the name the setting had.
    focus_stage: ClassVar[Resolved[bool]] = Resolved("pipeline_overrides", _pipeline)
    verdict_rules: ClassVar[Resolved[bool]] = Resolved("pipeline_overrides", _pipeline)
    round_summary: ClassVar[Resolved[bool]] = Resolved("pipeline_overrides", _pipeline)
    verifier: ClassVar[Resolved[bool]] = Resolved("pipeline_overrides", _pipeline)
    justification: ClassVar[Resolved[Justification]] = Resolved("pipeline_overrides", _pipeline)
    deliberation: ClassVar[Resolved[Deliberation]] = Resolved("pipeline_overrides", _pipeline)
    social_graph: ClassVar[Resolved[SocialGraph]] = Resolved("pipeline_overrides", _pipeline)
    per_juror_stages: ClassVar[Resolved[bool]] = Resolved("pipeline_overrides", _pipeline)

    @property
    def verifies(self) -> bool:
        """Whether the verdict's justification is verified: the verifier is on, or JURIS asks for it."""
        return self.verifier or self.justification == "juris"

    @property
    def clues_stage(self) -> bool:
        """Stage II runs (it needs stage I's focus); off, jurors get every item at once, media attached."""
        return self.focus_stage and self.max_select_steps > 0
