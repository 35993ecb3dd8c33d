"""One table, two renderings: a report's tables are built once as ``Tabled`` (header, rows of text,
an optional title and footnote) and drawn for the terminal (``rich``) or written as Markdown
(``markdown``), so the two can never disagree on a column or a cell."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from rich.table import Table

T = TypeVar("T")
Columns = Sequence[tuple[str, Callable[[T], str]]]


@dataclass(frozen=True)
class Tabled:
    """The first column labels each row (left-aligned); the others are figures (right-aligned).
    ``code_labels``: the labels are identifiers (model names), set as code in Markdown."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    title: str = ""
    footnote: str = ""
    code_labels: bool = False

    def rich(self) -> Table:
        table = Table(title=self.title, caption=self.footnote or None, caption_justify="left")
        table.add_column(self.header[0])
        for name in self.header[1:]:
            table.add_column(name, justify="right")
        for row in self.rows:
            table.add_row(*row)
        return table

    def markdown(self) -> list[str]:
        """The table's lines, without title or footnote (where they go differs between a report's
        sections); a cell's ``|`` and ``<`` are escaped so that no name can break the table."""
        lines = ["| " + " | ".join(self.header) + " |", "|" + "---|" * len(self.header)]
        for label, *cells in self.rows:
            label = f"`{label}`" if self.code_labels else label
            lines.append("| " + " | ".join(_escaped(cell) for cell in (label, *cells)) + " |")
        return lines

    def markdown_section(self, heading: str | None = None) -> list[str]:
        """``heading`` (the title and a colon unless given), the table and its footnote, blank-line separated."""
        return [heading or f"{self.title}:", "", *self.markdown(), "", self.footnote, ""]


def tabled(
    first: str,
    columns: Columns[T],
    labelled: Iterable[tuple[str, T]],
    title: str = "",
    footnote: str = "",
    code_labels: bool = False,
) -> Tabled:
    """A table of one row per ``(label, item)``, each column's cell computed from the item."""
    return Tabled(
        header=[first, *(name for name, _ in columns)],
        rows=[[label, *(cell(item) for _, cell in columns)] for label, item in labelled],
        title=title,
        footnote=footnote,
        code_labels=code_labels,
    )


def _escaped(cell: str) -> str:
    return cell.replace("|", "\\|").replace("<", "&lt;")
