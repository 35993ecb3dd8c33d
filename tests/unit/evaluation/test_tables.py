"""One table model, two renderings: the Markdown keeps every cell in its column whatever the text,
and the terminal table has the same header and rows."""

from __future__ import annotations

import io
import re

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from cyberjurors.evaluation.tables import Tabled, tabled

cell = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12)


def columns_of(line: str) -> list[str]:
    """A Markdown table row split on its unescaped pipes, outer ones dropped."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


@given(st.lists(st.lists(cell, min_size=3, max_size=3), min_size=1, max_size=4))
def test_markdown_keeps_every_cell_in_its_column(rows):
    table = Tabled(header=["name", "a", "b"], rows=rows)
    header, rule, *body = table.markdown()
    assert columns_of(header) == ["name", "a", "b"] and rule == "|---|---|---|"
    assert len(body) == len(rows)
    for line, row in zip(body, rows, strict=True):
        cells = columns_of(line)
        assert len(cells) == 3
        assert [c.replace("\\|", "|").replace("&lt;", "<") for c in cells] == [c.strip() for c in row]


def test_labels_that_are_identifiers_are_code_in_markdown_only():
    table = tabled("Model", [("Ballots", str)], [("anthropic:claude-x", 17)], "Seats", "by model", code_labels=True)
    assert table.markdown()[2] == "| `anthropic:claude-x` | 17 |"
    assert table.markdown_section() == ["Seats:", "", *table.markdown(), "", "by model", ""]
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(table.rich())
    drawn = out.getvalue()
    assert "anthropic:claude-x" in drawn and "`" not in drawn and "Seats" in drawn and "by model" in drawn


def test_the_first_column_labels_and_the_rest_are_figures():
    rich = tabled("Court", [("Cases", str), ("Acc", lambda n: f"{n:.0%}")], [("small", 0.5)]).rich()
    assert [c.header for c in rich.columns] == ["Court", "Cases", "Acc"]
    assert [c.justify for c in rich.columns] == ["left", "right", "right"]
    assert [list(c.cells) for c in rich.columns] == [["small"], ["0.5"], ["50%"]]
