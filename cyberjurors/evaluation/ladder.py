"""The ablation ladder as named configurations: each is the user's settings with a few overrides.

The ladder follows the paper's ablation (each rung keeps the ones before it): Baseline -> +Rules ->
SR-CoT -> IV-CoT -> +Jury -> +Precedent. Two reference baselines from the literature run on the
same inputs as Baseline (the raw case, media attached, no rules, no precedents): an
AgentsCourt-style court debate and a ChatEval-style multi-agent debate. Every rung runs through
the same Faust topology; a stage an ablation switches off passes the case on without a model call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import Settings

SINGLE_JUDGE = dict(jurors=1, rounds=1)
NO_PRECEDENTS = dict(precedent_backend="none")
RAW_CASE = dict(focus_stage=False, max_select_steps=0)


@dataclass(frozen=True)
class Ablation:
    key: str
    name: str
    description: str
    overrides: dict[str, Any] = field(default_factory=dict)

    def settings(self, base: Settings) -> Settings:
        return base.model_copy(update=self.overrides)


LADDER = [
    Ablation("baseline", "Baseline", "one direct verdict: one call on the raw case with every photo and frames of "
             "every video attached, no rules", {**SINGLE_JUDGE, **RAW_CASE, **NO_PRECEDENTS, "verdict_rules": False}),
    Ablation("rules", "+Rules", "Baseline with the platform's verdict rules in the prompt",
             {**SINGLE_JUDGE, **RAW_CASE, **NO_PRECEDENTS, "verdict_rules": True}),
    Ablation("sr-cot", "SR-CoT", "four stages by one juror, single-step selection (T_max = 1)",
             {**SINGLE_JUDGE, **NO_PRECEDENTS, "verdict_rules": True, "focus_stage": True, "max_select_steps": 1}),
    Ablation("iv-cot", "IV-CoT", "four stages by one juror with the select-perceive iteration (T_max = 3)",
             {**SINGLE_JUDGE, **NO_PRECEDENTS, "verdict_rules": True, "focus_stage": True, "max_select_steps": 3}),
    Ablation("jury", "+Jury", "IV-CoT by 17 jurors deliberating up to 3 rounds on the social graph (JCV)",
             {**NO_PRECEDENTS, "verdict_rules": True, "focus_stage": True, "max_select_steps": 3, "jurors": 17,
              "rounds": 3}),
    Ablation("precedent", "+Precedent", "+Jury with the precedent base: retrieved cases and per-juror guidelines "
             "(the full CyberJurors method; the configured precedent backend)",
             {"verdict_rules": True, "focus_stage": True, "max_select_steps": 3, "jurors": 17, "rounds": 3}),
]
REFERENCES = [
    Ablation("agentscourt", "AgentsCourt-style", "two advocates debate two turns each, then one judge rules; "
             "raw case, media attached, no rules",
             {**SINGLE_JUDGE, **RAW_CASE, **NO_PRECEDENTS, "verdict_rules": False, "deliberation": "court",
              "court_rounds": 2}),
    Ablation("chateval", "ChatEval-style", "three agents with different personas debate two rounds, each reading "
             "all the others (simultaneous talk, no summariser), then vote; raw case, media attached, no rules",
             {**RAW_CASE, **NO_PRECEDENTS, "verdict_rules": False, "jurors": 3, "rounds": 2,
              "social_graph": "complete", "round_summary": False, "early_stopping": False}),
]
ABLATIONS = {a.key: a for a in [*LADDER, *REFERENCES]}
GROUPS = {"all": [*LADDER, *REFERENCES], "ladder": LADDER, "references": REFERENCES}
CONFIGURED = Ablation("configured", "Configured", "the settings as given, no overrides")


def select(spec: str | None) -> list[Ablation]:
    """``None`` -> the settings as they are; "all", "ladder", "references" or comma-separated keys."""
    if not spec:
        return [CONFIGURED]
    chosen: list[Ablation] = []
    for key in (k.strip().lower() for k in spec.split(",") if k.strip()):
        found = GROUPS.get(key) or ([ABLATIONS[key]] if key in ABLATIONS else None)
        if found is None:
            known = ", ".join([*GROUPS, *ABLATIONS])
            raise ValueError(f"unknown ablation {key!r}; choose from {known}")
        chosen += [a for a in found if a not in chosen]
    return chosen
