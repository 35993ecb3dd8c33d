"""The package's layering and its single definitions: the rooms keep import-linter's layers
(pyproject.toml), the package root holds only its entry points and core, and the things the package
once defined in several places exist once."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import cyberjurors

PACKAGE = Path(cyberjurors.__file__).parent
ROOT_MODULES = {"__init__.py", "__main__.py", "errors.py", "assembly.py"}


def modules(path: Path) -> list[Path]:
    return [path] if path.is_file() else sorted(path.rglob("*.py"))


def test_the_rooms_keep_their_layers():
    """The layers are import-linter's contract in pyproject.toml (`make lint` runs it too): a room
    imports only the rooms below it, so the reasoning side (jury, precedents, evidence, llm) never
    imports streams, evaluation or the console, and the precedent base never imports the jury."""
    checked = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert "rooms stack in layers KEPT" in checked.stdout


def test_the_package_root_holds_only_the_entry_points_and_the_core():
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose == ROOT_MODULES


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
