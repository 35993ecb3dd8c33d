"""The package's layering and its single definitions: the reasoning side never imports the
streaming or evaluation side, the precedent base never imports the jury, and the things the
package once defined in several places exist once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cyberjurors

PACKAGE = Path(cyberjurors.__file__).parent
REASONING = [
    "jury",
    "precedents",
    "llm.py",
    "backends",
    "intake.py",
    "media.py",
    "frame_events.py",
    "safety.py",
    "personas.py",
    "schemas",
]


def modules(path: Path) -> list[Path]:
    return [path] if path.is_file() else sorted(path.rglob("*.py"))


def imported(file: Path) -> set[str]:
    """Every module a file imports, relative imports resolved (``from .x import y`` also yields ``...x.y``)."""
    package = ".".join(file.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]).split(".")
    names: set[str] = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = (
                ".".join([*package[: len(package) - node.level + 1], node.module or ""]).strip(".")
                if node.level
                else node.module or ""
            )
            names |= {base} | {f"{base}.{a.name}" for a in node.names}
    return names


@pytest.mark.parametrize("part", REASONING)
def test_the_reasoning_side_does_not_import_streams_or_evaluation(part):
    # the console (cyberjurors/console/) is on the streaming side: it reads topics
    for file in modules(PACKAGE / part):
        wrong = {
            m
            for m in imported(file)
            if m.startswith(("cyberjurors.streams", "cyberjurors.evaluation", "cyberjurors.console"))
        }
        assert not wrong, f"{file.relative_to(PACKAGE)} imports {sorted(wrong)}"


def test_the_precedent_base_does_not_import_the_jury():
    for file in modules(PACKAGE / "precedents"):
        wrong = {m for m in imported(file) if m.startswith("cyberjurors.jury")}
        assert not wrong, f"{file.relative_to(PACKAGE)} imports {sorted(wrong)}"


@pytest.mark.parametrize("name", ["Record", "Strict", "CATEGORIES", "KINDS", "now", "written_out"])
def test_defined_once(name):
    where = []
    for file in modules(PACKAGE):
        for node in ast.parse(file.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
                where.append(file)
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AnnAssign)
                else []
            )
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                where.append(file)
    # verdictbench's CATEGORIES maps the benchmark's names to ours: another thing with the same name
    where = [w for w in where if not (name == "CATEGORIES" and w.name == "verdictbench.py")]
    assert len(where) == 1, f"{name} defined in {[str(w.relative_to(PACKAGE)) for w in where]}"
