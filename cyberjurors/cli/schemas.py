"""`cyberjurors schemas`: the JSON Schemas of the public events."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .base import app, console

schemas_app = typer.Typer(no_args_is_help=True, help="JSON Schema of the public events.")
app.add_typer(schemas_app, name="schemas")


@schemas_app.command("export")
def schemas_export(
    out: Annotated[Path, typer.Argument(help="folder for the .schema.json files")] = Path("schemas"),
) -> None:
    """Write a JSON Schema for every public event, so producers in any language can validate."""
    from ..schemas.public import json_schemas

    out.mkdir(parents=True, exist_ok=True)
    for name, schema in json_schemas().items():
        path = out / f"{name}.schema.json"
        path.write_text(json.dumps(schema, indent=2) + "\n")
        console.print(f"wrote {path}")
