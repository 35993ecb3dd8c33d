"""The ablation ladder as named configurations: each is the user's settings with ``pipeline`` set to
the rung's key (its stages and method, config/jury.py) and the sizes it runs them at.

The ladder follows the paper's ablation (each rung keeps the ones before it): Baseline -> +Rules ->
SR-CoT -> IV-CoT -> +Jury -> +Precedent, then beyond the paper +Verifier (the justification checked
claim by claim against the clues and cited guidelines, revised on Reject) -> +JURIS (the
justification voted sentence by sentence by the jurors instead of the round summary, then verified:
the two differ only in how the justification is made). +MixedJury branches off +Precedent: the
jurors spread over the configured ``juror_models`` (the other rungs seat one model, so the mix is
the only change; it runs only when two or more models are configured). Every rung but +Verifier
and +JURIS keeps the paper's unverified round summary, whatever the base settings say. Two
reference baselines from the literature run on the same inputs as Baseline (the raw case, media
attached, no rules, no precedents): an AgentsCourt-style court debate and a ChatEval-style
multi-agent debate. Every rung runs through
the same Faust topology; a stage an ablation switches off passes the case on without a model call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from ..config import CourtTier, Pipeline, PipelineOverrides, Settings
from ..jury.stakes import PAPER_ROUNDS, court_for, is_paper_court
from ..schemas import JURY_SIZE

SINGLE_JUDGE = dict(jurors=1, rounds=1)
NO_PRECEDENTS = dict(precedent_backend="none")
RAW_CASE = dict(max_select_steps=0)  # with the pipeline's focus stage off: every item at once, media attached
ONE_MODEL: dict[str, list[str]] = dict(juror_models=[])  # every juror on the juror role's model: only +MixedJury mixes
FULL_SIZE = dict(max_select_steps=3, jurors=17, rounds=3)


def two_models(base: Settings) -> str | None:
    if len(set(base.juror_models)) < 2:
        return "+MixedJury needs two or more juror_models (e.g. anthropic:NAME and openai:NAME)"
    return None


@dataclass(frozen=True)
class Ablation:
    key: str
    name: str
    description: str
    overrides: dict[str, Any] = field(default_factory=dict)
    requires: Callable[[Settings], str | None] | None = None
    """why the rung cannot run on these settings, or None when it can"""

    def settings(self, base: Settings) -> Settings:
        return base.model_copy(update=self.overrides)

    def unavailable(self, base: Settings) -> str | None:
        return self.requires(base) if self.requires else None


def rung(
    key: Pipeline,
    name: str,
    description: str,
    sizes: dict[str, Any],
    requires: Callable[[Settings], str | None] | None = None,
) -> Ablation:
    """A rung: the pipeline of its name (config/jury.py's PIPELINES: its stages and method, the base's
    pipeline_overrides dropped, so no rung inherits a switch) and the sizes it runs them at."""
    return Ablation(
        key, name, description, {"pipeline": key, "pipeline_overrides": PipelineOverrides(), **sizes}, requires
    )


LADDER = [
    rung(
        "baseline",
        "Baseline",
        "one direct verdict: one call on the raw case with every photo and frames of every video attached, no rules",
        {**SINGLE_JUDGE, **RAW_CASE, **NO_PRECEDENTS, **ONE_MODEL},
    ),
    rung(
        "rules",
        "+Rules",
        "Baseline with the platform's verdict rules in the prompt",
        {**SINGLE_JUDGE, **RAW_CASE, **NO_PRECEDENTS, **ONE_MODEL},
    ),
    rung(
        "sr-cot",
        "SR-CoT",
        "four stages by one juror, single-step selection (T_max = 1)",
        {**SINGLE_JUDGE, **NO_PRECEDENTS, **ONE_MODEL, "max_select_steps": 1},
    ),
    rung(
        "iv-cot",
        "IV-CoT",
        "four stages by one juror with the select-perceive iteration (T_max = 3)",
        {**SINGLE_JUDGE, **NO_PRECEDENTS, **ONE_MODEL, "max_select_steps": 3},
    ),
    rung(
        "jury",
        "+Jury",
        "IV-CoT by 17 jurors deliberating up to 3 rounds on the social graph (JCV)",
        {**NO_PRECEDENTS, **ONE_MODEL, **FULL_SIZE},
    ),
    rung(
        "precedent",
        "+Precedent",
        "+Jury with the precedent base: retrieved cases and per-juror guidelines "
        "(the full CyberJurors method; the configured precedent backend)",
        {**ONE_MODEL, **FULL_SIZE},
    ),
    rung(
        "verifier",
        "+Verifier",
        "+Precedent with the verifier: every claim of the round summary traced to a "
        "perceived clue or a cited guideline, revised with the accumulated feedback on Reject (up to "
        "verifier_max_turns), untraceable sentences removed if it still fails",
        {**ONE_MODEL, **FULL_SIZE},
    ),
    rung(
        "juris",
        "+JURIS",
        "+Verifier with a jury-voted justification (JURIS) instead of the round summary: "
        "two drafters propose sentences, juris.voters jurors vote on each, an editor consolidates, the "
        "verifier checks",
        {**ONE_MODEL, **FULL_SIZE},
    ),
    rung(
        "mixed-jury",
        "+MixedJury",
        "+Precedent with the jurors spread over juror_models, round robin, each on "
        "its provider; the report shows each model's vote share and agreement",
        FULL_SIZE,
        two_models,
    ),
]
REFERENCES = [
    rung(
        "agentscourt",
        "AgentsCourt-style",
        "two advocates debate two turns each, then one judge rules; raw case, media attached, no rules",
        {**SINGLE_JUDGE, **RAW_CASE, **NO_PRECEDENTS, **ONE_MODEL, "court_rounds": 2},
    ),
    rung(
        "chateval",
        "ChatEval-style",
        "three agents with different personas debate two rounds, each reading "
        "all the others (simultaneous talk, no summariser), then vote; raw case, media attached, no rules",
        {**RAW_CASE, **NO_PRECEDENTS, **ONE_MODEL, "jurors": 3, "rounds": 2, "early_stop": 0},
    ),
]
ABLATIONS = {a.key: a for a in [*LADDER, *REFERENCES]}
GROUPS = {"all": [*LADDER, *REFERENCES], "ladder": LADDER, "references": REFERENCES}
CONFIGURED = Ablation("configured", "Configured", "the settings as given, no overrides")
COURTS = "courts"
PAPER_COURT = CourtTier(name="paper", jurors=JURY_SIZE, rounds=PAPER_ROUNDS, verifier=False)


def court_rungs(base: Settings) -> list[Ablation]:
    """``--ablation courts``: one configuration per court of the base settings' policy, that court
    sitting on every case (its tier widened to every amount and category), so the courts are compared
    on the same cases; led by the paper's court when no tier is it, as the reference of the cost ratios."""
    rungs = [
        Ablation(
            f"court-{tier.name}",
            f"Court {tier.name}",
            f"the {tier.name} court of court_policy on every case",
            {
                "court_policy": [
                    tier.model_copy(update={"min_amount": Decimal(0), "max_amount": None, "categories": []})
                ]
            },
        )
        for tier in base.court_policy
    ]
    if not any(is_paper_court(court_for(tier, base)) for tier in base.court_policy):
        rungs.insert(
            0,
            Ablation(
                "paper-court",
                "Paper's court",
                "17 jurors, up to 3 rounds, the round summary unverified, the configured model, on every case",
                {"court_policy": [PAPER_COURT]},
            ),
        )
    return rungs


def select(spec: str | None, base: Settings | None = None) -> list[Ablation]:
    """``None`` -> the settings as they are; "all", "ladder", "references" or comma-separated keys.
    Given the ``base`` settings, a rung they cannot run (+MixedJury without juror_models) is left
    out of a group, and refused when named."""
    if not spec:
        return [CONFIGURED]
    chosen: list[Ablation] = []
    for key in (k.strip().lower() for k in spec.split(",") if k.strip()):
        if key == COURTS:  # the policy's courts: known only from the settings
            chosen += [a for a in (court_rungs(base) if base is not None else []) if a not in chosen]
            continue
        found = GROUPS.get(key) or ([ABLATIONS[key]] if key in ABLATIONS else None)
        if found is None:
            known = ", ".join([*GROUPS, COURTS, *ABLATIONS])
            raise ValueError(f"unknown ablation {key!r}; choose from {known}")
        if base is not None and key in ABLATIONS and (why := ABLATIONS[key].unavailable(base)):
            raise ValueError(why)
        runnable = [a for a in found if base is None or not a.unavailable(base)]
        chosen += [a for a in runnable if a not in chosen]
    return chosen
