"""The test suite mirrors the package (tests/README.md): unit tests under tests/unit/<room>/, where
<room> is a room of the package (or ``project`` for the repository as a whole), and the tests that
start a worker, Prometheus or a browser under tests/integration/. The marks follow the folders, so
that the fast lane (``-m "not integration"``) is exactly tests/unit/."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ...collect_marks import PREFIX
from ...conftest import ROOT

TESTS = ROOT / "tests"
PACKAGE = ROOT / "cyberjurors"


def collected(*args: str, keep: str = "") -> list[str]:
    """The node ids pytest collects with these arguments, in a child process (a clean collection of
    the whole suite, whatever this run selected)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode in (0, 5), result.stdout[-3000:] + result.stderr[-3000:]  # 5: none collected
    return [line for line in result.stdout.splitlines() if "::" in line and line.startswith(keep)]


def test_no_unit_test_is_marked_integration_and_every_integration_test_is() -> None:
    # one collection of the whole suite (it imports every test module), each test with its mark
    lines = collected("-p", "tests.collect_marks", "tests", keep=PREFIX)
    marks = {node: flag == "True" for flag, node in (line.removeprefix(PREFIX).split(" ", 1) for line in lines)}
    marked = [n for n, is_marked in marks.items() if is_marked]
    assert marked, "no test is marked integration"
    assert len(marks) > len(marked) > 0, "no unit test collected"
    assert [n for n in marked if not n.startswith("tests/integration/")] == []
    assert [n for n, is_marked in marks.items() if n.startswith("tests/integration/") and not is_marked] == []


def test_every_test_file_sits_in_a_room_of_the_package_or_in_integration() -> None:
    rooms = {p.relative_to(PACKAGE) for p in PACKAGE.rglob("*") if (p / "__init__.py").is_file()}
    misplaced = []
    for f in TESTS.rglob("test_*.py"):
        where = f.parent.relative_to(TESTS)
        if where == Path("integration") or where == Path("unit/project"):
            continue
        if where.parts[:1] != ("unit",) or Path(*where.parts[1:]) not in rooms:
            misplaced.append(str(f.relative_to(TESTS)))
    assert misplaced == []


def test_every_test_folder_is_a_package() -> None:
    """Relative imports between test modules, and test files of the same name in two rooms, need
    each folder to be a package."""
    folders = {f.parent for f in TESTS.rglob("*.py")}
    assert sorted(str(d.relative_to(ROOT)) for d in folders if not (d / "__init__.py").is_file()) == []
