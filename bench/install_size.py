"""What each install weighs on disk: a fresh venv of the core lock (requirements/core.txt, what a
worker against an existing Kafka needs), its bytecode share, the embedding model beside it, and the
test venv (.venv, every extra with torch's CPU build) for comparison.

Run: .venv/bin/python bench/install_size.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import typer
from rich.table import Table

from cyberjurors.precedents.embeddings import default_model_dir
from harness import make_console

ROOT = Path(__file__).resolve().parents[1]
console = make_console()


def size_mb(path: Path, only: str = "*") -> float:
    return sum(f.stat().st_size for f in path.rglob(only) if f.is_file() and not f.is_symlink()) / 2**20


def main() -> None:
    venv = Path(tempfile.mkdtemp(prefix="cj-core-")) / "venv"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run(
        [
            venv / "bin/pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--require-hashes",
            "--no-deps",
            "-r",
            ROOT / "requirements/core.txt",
        ],
        check=True,
    )
    installed = time.monotonic() - started
    site = next(venv.glob("lib/python3*/site-packages"))
    heavy = sorted(("torch", "transformers", "sentence_transformers", "scipy", "sympy", "sklearn"))
    table = Table(title="install sizes (MB on disk)")
    table.add_column("what")
    table.add_column("MB", justify="right")
    table.add_row("core venv (requirements/core.txt), total", f"{size_mb(venv):.0f}")
    table.add_row("  of which bytecode pip compiled (__pycache__)", f"{size_mb(venv, '*.pyc'):.0f}")
    table.add_row("  of which pip and setuptools", f"{size_mb(site / 'pip') + size_mb(site / 'setuptools'):.0f}")
    table.add_row("  ML stacks in it (" + ", ".join(heavy) + ")", f"{sum(size_mb(site / h) for h in heavy):.0f}")
    table.add_row("embedding model (embedder fetch)", f"{size_mb(default_model_dir()):.0f}")
    table.add_row("test venv (.venv: every extra, torch's CPU build)", f"{size_mb(ROOT / '.venv'):.0f}")
    table.add_row("core install time, s (pip, wheels cached)", f"{installed:.0f}")
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
