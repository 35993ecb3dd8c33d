"""The reference pages, generated from the code each time the site is built, so they cannot drift:
every setting, every CLI command, the public events' JSON Schemas, every metric and every dead-letter
reason. An mkdocs hook (``hooks:`` in mkdocs.yml); ``tests/.../test_docs.py`` imports it too."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

PAGES = {
    "reference/settings.md": "settings_page",
    "reference/cli.md": "cli_page",
    "reference/schemas.md": "schemas_page",
    "reference/metrics.md": "metrics_page",
    "reference/dead-letters.md": "reasons_page",
}
GENERATED = "<!-- generated from the code by docs/hooks/reference.py: edit the code, not this page -->\n\n"


def cell(text: object) -> str:
    """Text for one table cell: one line, pipes escaped."""
    return re.sub(r"\s+", " ", str(text)).replace("|", "\\|").strip()


def code(text: object) -> str:
    shown = cell(text)
    return f"`{shown}`" if shown else ""


# --- settings ---------------------------------------------------------------------------------


def _default(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "(required)"
    else:
        value = field.default
    if isinstance(value, dict) and len(json.dumps(value, default=str)) > 80:
        return f"{len(value)} entries"
    return json.dumps(value, default=str)


def _type(field: Any) -> str:
    shown = str(field.annotation).replace("typing.", "").replace("pathlib.", "")
    return re.sub(r"<class '([\w.]+)'>", r"\1", shown).replace("NoneType", "None")


def setting_names() -> set[str]:
    from cyberjurors.config import Settings

    return set(Settings.model_fields)


def nested_model(field: Any) -> tuple[Any, str] | None:
    """The model of a nested setting's fields, and the key between for a table of entries
    (``<role>`` in ``llm_roles``, ``<model>`` in ``llm_prices``); None for a setting of one value."""
    from typing import get_args, get_origin

    from pydantic import BaseModel

    annotation = field.annotation
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    args = get_args(annotation)
    if get_origin(annotation) is dict and isinstance(args[1], type) and issubclass(args[1], BaseModel):
        return args[1], "<model>" if args[0] is str else "<role>"
    return None


def _row(name: str, env: str, field: Any) -> str:
    return (
        f"| {code(name)} | {env} | {code(_type(field))} | {code(_default(field))} | {cell(field.description or '')} |\n"
    )


def settings_page() -> str:
    from cyberjurors.config import ECOSYSTEM_ENV, ENV_PREFIX, SECTIONS

    also = {setting: env for env, setting in ECOSYSTEM_ENV.items()}
    header = "| setting | environment variable | type | default | description |\n|---|---|---|---|---|\n"

    def env_of(path: str) -> str:
        env = code(ENV_PREFIX + path.replace(".", "__").upper())
        return env + (f" or {code(also[path])}" if path in also else "")

    out = [
        "# Settings\n\n",
        GENERATED,
        "Every setting, by section ([settings in sections](../settings.md)). Each is read from the "
        f"environment variable shown (prefix `{ENV_PREFIX}`), from the settings file named by "
        "`CYBERJURORS_SETTINGS_FILE` (TOML, the same names in lower case), or passed by a command's "
        "options; first found wins: options, variables, the file, the ecosystem names, the defaults. "
        "A nested setting (a table below its section) is given whole (`intake_limits = {max_event_bytes = "
        "900000}`, a JSON object in its variable) or one field by itself (`CYBERJURORS_INTAKE_LIMITS__MAX_EVENT_BYTES`); "
        "the fields not given keep their defaults. [Removed names](#removed-names) are still read, for one release.\n",
    ]
    for name, section in SECTIONS.items():
        out.append(f"\n## {name}\n\n{cell(section.__doc__ or '')}\n\n")
        out.append(header)
        nested = []
        for field_name, field in section.model_fields.items():
            out.append(_row(field_name, env_of(field_name), field))
            if (found := nested_model(field)) is not None:
                nested.append((field_name, *found))
        for field_name, model, key in nested:
            out.append(f"\n### `{field_name}`\n\n{cell(model.__doc__ or '')}\n\n{header}")
            for sub, field in model.model_fields.items():
                path = ".".join(p for p in (field_name, key, sub) if p)
                out.append(_row(path, env_of(path), field))
    out.append(removed_names())
    return "".join(out)


def removed_names() -> str:
    """The settings this release removed, each with what replaces it (config/deprecated.py)."""
    from cyberjurors.config import ENV_PREFIX, Settings
    from cyberjurors.config.deprecated import CONVERTED, RENAMED

    assert Settings.model_fields  # the table is filled as the settings module is imported
    out = [
        "\n## Removed names\n\n",
        "Settings removed in this release, still read for one more under their old names (keyword, "
        f"`{ENV_PREFIX}*` variable, settings file, `model_copy`), each moved to its replacement with a "
        "deprecation warning that names it, logged again at worker start; where both are given, the "
        "replacement wins.\n\n",
        "| removed | replacement | its environment variable |\n|---|---|---|\n",
    ]
    for old, new in RENAMED.items():
        how = f": {cell(CONVERTED[old].__doc__ or '')}" if old in CONVERTED else ""
        env = code(ENV_PREFIX + new.replace(".", "__").upper())
        out.append(f"| {code(old)} | {code(new)}{how} | {env} |\n")
    return "".join(out)


# --- CLI --------------------------------------------------------------------------------------


def _commands(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
    if hasattr(command, "commands"):  # a group
        for name, sub in command.commands.items():
            yield from _commands(sub, [*path, name])
    else:
        yield " ".join(path), command


def commands() -> dict[str, Any]:
    import typer.main

    from cyberjurors.cli import app

    return dict(_commands(typer.main.get_command(app), ["cyberjurors"]))


def cli_page() -> str:
    out = [
        "# Command line\n\n",
        GENERATED,
        "Every command of `cyberjurors`, with its options (`--help` shows the same).\n",
    ]
    for name, command in commands().items():
        doc = (command.help or "").strip()
        out.append(f"\n## `{name}`\n\n{doc}\n\n")
        rows = []
        for param in command.params:
            if getattr(param, "hidden", False) or param.name == "help":
                continue
            if param.param_type_name == "option":
                flags = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
            else:
                flags = f"`{param.name.upper()}`"
            default = "" if param.default is None or callable(param.default) else code(param.default)
            rows.append(f"| {flags} | {cell(getattr(param, 'help', '') or '')} | {default} |\n")
        if rows:
            out.append("| argument or option | meaning | default |\n|---|---|---|\n" + "".join(rows))
    return "".join(out)


# --- schemas ----------------------------------------------------------------------------------


def schema_files() -> dict[str, str]:
    """Site path -> content of each public event's JSON Schema: what a message's ``ce_dataschema``
    names under ``schema_base_url`` (the site's ``schemas/``), one folder per schema version."""
    from cyberjurors.schemas import SCHEMA_VERSION
    from cyberjurors.schemas.public import json_schemas

    return {
        f"schemas/v{SCHEMA_VERSION}/{name}.schema.json": json.dumps(schema, indent=2) + "\n"
        for name, schema in json_schemas().items()
    }


def schemas_page() -> str:
    from cyberjurors.schemas import SCHEMA_VERSION
    from cyberjurors.schemas.public import PUBLIC, SEALED_KEYWORD, json_schemas

    out = [
        "# Event schemas\n\n",
        GENERATED,
        "The public events, each keyed by `case_id` on its topic. `cyberjurors schemas export DIR` writes "
        "these JSON Schemas as files, for producers and consumers in any language; this site publishes "
        f"each at `schemas/v{SCHEMA_VERSION}/<name>.schema.json`, the URL a message's `ce_dataschema` header "
        "names ([Message headers](../concepts/messages.md)).\n",
    ]
    for name, schema in json_schemas().items():
        topic = PUBLIC[name][1]
        published = f"../schemas/v{SCHEMA_VERSION}/{name}.schema.json"
        out.append(
            f"\n## {name}\n\nOn `{topic}`, published as [{name}.schema.json]({published}). "
            f"{cell(schema.get('description', ''))}\n\n"
            f"With `payload_encryption`: {cell(schema.get(SEALED_KEYWORD, ''))} (`{SEALED_KEYWORD}`).\n\n"
        )
        properties = schema.get("properties", {})
        if properties:
            required = set(schema.get("required", []))
            out.append("| field | required | description |\n|---|---|---|\n")
            for field, spec in properties.items():
                out.append(
                    f"| `{field}` | {'yes' if field in required else ''} | {cell(spec.get('description', ''))} |\n"
                )
        body = json.dumps(schema, indent=2)
        out.append(f'\n??? note "The whole schema"\n\n    ```json\n{_indent(body)}\n    ```\n')
    return "".join(out)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


# --- metrics ----------------------------------------------------------------------------------


def metrics() -> dict[str, tuple[str, tuple[str, ...], str]]:
    """Exposed name -> (type, label names, help) for every metric the package defines, and Faust's
    sensor's under its fixed prefix."""
    from faust.sensors.prometheus import FaustMetrics
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics import MetricWrapperBase

    from cyberjurors.observability import metrics as ours

    found = {}
    wrappers = [m for m in vars(ours).values() if isinstance(m, MetricWrapperBase)]
    faust = FaustMetrics.create(CollectorRegistry(), ours.FAUST_PREFIX)
    wrappers += [m for m in faust if isinstance(m, MetricWrapperBase)]  # a NamedTuple
    for metric in wrappers:
        kind = metric._type  # the wrapper's own record of what it is
        name = metric._name + ("_total" if kind == "counter" else "")
        found[name] = (kind, tuple(metric._labelnames), metric._documentation)
    return dict(sorted(found.items()))


def metrics_page() -> str:
    out = [
        "# Metrics\n\n",
        GENERATED,
        "Every metric a worker serves on `/metrics` (`metrics_port`). A histogram `X` is exposed as "
        "`X_bucket`, `X_sum` and `X_count`. `cyberjurors_faust_*` are Faust's own sensor's.\n\n",
        "| metric | type | labels | meaning |\n|---|---|---|---|\n",
    ]
    for name, (kind, labels, help_) in metrics().items():
        out.append(f"| `{name}` | {kind} | {', '.join(f'`{x}`' for x in labels)} | {cell(help_)} |\n")
    return "".join(out)


# --- dead-letter reasons ----------------------------------------------------------------------


def reasons() -> dict[str, tuple[str, str]]:
    """Reason -> (replayable, meaning) for every reason a dead letter can carry."""
    from cyberjurors import errors

    out = {reason: ("no", meaning) for reason, meaning in errors.REJECTIONS.items()}
    out["unknown_case"] = (
        "no at intake; yes at stage outcome (it came before its verdict)",
        errors.REJECTIONS["unknown_case"] + "; or an outcome for a case not decided yet",
    )
    for reason, (replayable, meaning) in errors.OTHER_REASONS.items():
        out[reason] = ("yes" if replayable else "no", meaning)
    for kind in errors.LLM_KINDS:
        final = kind in errors.FINAL_LLM_KINDS
        out[f"llm_{kind}"] = ("no" if final else "yes", f"a model call failed after the retries: {kind}")
    for kind in dict.fromkeys((*errors.PRECEDENT_KINDS, *errors.LLM_KINDS)):
        final = kind in errors.FINAL_PRECEDENT_KINDS | errors.FINAL_LLM_KINDS
        out[f"precedents_{kind}"] = ("no" if final else "yes", f"the precedent base failed: {kind}")
    return out


def reasons_page() -> str:
    out = [
        "# Dead-letter reasons\n\n",
        GENERATED,
        "Every reason a message on `disputes.dlq` can carry (`errors.Reason`, a closed set). A replayable "
        "letter may succeed when sent again (`cyberjurors dlq --replay`); a final one would fail the same "
        "way under the same settings and code (`--replay --final` sends it once they changed). The flag "
        "is set by the handler that writes the letter and carried on it.\n\n",
        "| reason | replayable | meaning |\n|---|---|---|\n",
    ]
    for reason, (replayable, meaning) in reasons().items():
        out.append(f"| `{reason}` | {cell(replayable)} | {cell(meaning)} |\n")
    return "".join(out)


# --- the hook ---------------------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, maker in PAGES.items():
        files.append(File.generated(config, path, content=globals()[maker]()))
    for path, content in schema_files().items():
        files.append(File.generated(config, path, content=content))
    return files
