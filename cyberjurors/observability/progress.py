"""The progress bar the long commands show (eval, synth, demo, precedents build): rich's, one look."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


def bar(console: Console, label: str = "[bold]{task.description}") -> Progress:
    """A bar with the task's label, done of total and the time so far, gone from the terminal once done."""
    return Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True
    )
