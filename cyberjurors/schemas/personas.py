"""Juror personas P_k: who each simulated juror is, and the attributes that make them differ."""

from __future__ import annotations

import itertools
import json
import random
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter


class Persona(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    shopping_experience: Literal["novice", "regular", "frequent"]
    seller_experience: Literal["none", "some", "runs_shop"]
    rule_strictness: Literal["lenient", "moderate", "strict"]
    visual_attention: Literal["low", "medium", "high"]
    risk_attitude: Literal["averse", "neutral", "tolerant"]

    def card(self) -> str:
        return (
            f"{self.name}: {self.description} Shopping experience: {self.shopping_experience}; "
            f"seller experience: {self.seller_experience.replace('_', ' ')}; strictness about platform rules: "
            f"{self.rule_strictness}; attention to visual evidence: {self.visual_attention}; "
            f"risk attitude: {self.risk_attitude}."
        )


_personas = TypeAdapter(list[Persona])


def load_personas(n: int, path: Path | None = None, seed: int = 7) -> list[Persona]:
    """The first n personas of the file; past its end, seeded combinations of the attributes. The
    packaged file holds the paper's 17 (the first-instance jury) and 14 reserves after them, written
    alike and differing from all in their attributes, so the appeal's panel of 31 is 31 distinct people."""
    raw = path.read_text() if path else resources.files(__package__).joinpath("personas.json").read_text()
    personas = _personas.validate_python(json.loads(raw))
    if n <= len(personas):
        return personas[:n]
    fields = {
        name: f.annotation.__args__
        for name, f in Persona.model_fields.items()
        if f.annotation is not None and hasattr(f.annotation, "__args__")
    }
    combos = list(itertools.product(*fields.values()))
    random.Random(seed).shuffle(combos)
    extra = [
        Persona(
            name=f"Juror {len(personas) + i + 1}",
            description="Generated juror.",
            **dict(zip(fields, combo, strict=True)),
        )
        for i, combo in enumerate(combos[: n - len(personas)])
    ]
    return personas + extra


def reserves(n: int, path: Path | None = None) -> list[Persona]:
    """The file's personas after the first n: who may take the seat of a persona that fails
    qualification (``jury/qualify.py``). Never generated ones: a reserve is someone written."""
    raw = path.read_text() if path else resources.files(__package__).joinpath("personas.json").read_text()
    return _personas.validate_python(json.loads(raw))[n:]
