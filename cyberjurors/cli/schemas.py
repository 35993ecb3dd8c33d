"""`cyberjurors schemas`: the JSON Schemas of the public events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    pass


from .base import app, console

schemas_app = typer.Typer(no_args_is_help=True, help="JSON Schema of the public events.")
app.add_typer(schemas_app, name="schemas")


@schemas_app.command("export")
def schemas_export(
    out: Annotated[Path, typer.Argument(help="folder for the .schema.json files")] = Path("schemas"),
) -> None:
    """Write a JSON Schema for every public event, so producers in any language can validate."""
    from pydantic import TypeAdapter

    from ..schemas import AppealFiled, DeadLetter, DisputeCase, Escalation, OutcomeReported, Verdict
    from ..schemas.events import DisputeEvent

    out.mkdir(parents=True, exist_ok=True)
    models: dict[str, TypeAdapter[Any]] = {
        "dispute-event": TypeAdapter(DisputeEvent),
        "dispute-case": TypeAdapter(DisputeCase),
        "outcome": TypeAdapter(OutcomeReported),
        "verdict": TypeAdapter(Verdict),
        "dead-letter": TypeAdapter(DeadLetter),
        "appeal": TypeAdapter(AppealFiled),
        "escalation": TypeAdapter(Escalation),
    }
    for name, adapter in models.items():
        path = out / f"{name}.schema.json"
        path.write_text(json.dumps(adapter.json_schema(), indent=2) + "\n")
        console.print(f"wrote {path}")


# --- precedents ------------------------------------------------------------------------------------
