"""The documentation's reference pages are generated from the code (docs/hooks/reference.py): each
lists every setting, command, public event, metric and dead-letter reason, found here by another
path than the generator's; and every alert links its runbook in the site."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from prometheus_client import REGISTRY, generate_latest

from cyberjurors import errors
from cyberjurors.cli import app
from cyberjurors.config import Settings
from cyberjurors.observability import metrics as _metrics  # noqa: F401  # registers the metrics
from cyberjurors.schemas.public import PUBLIC, json_schemas

ROOT = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())


def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference", ROOT / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REF = reference()


def entries(page: str) -> set[str]:
    """What a page has an entry for: a table row's first cell, or a heading, in backticks or not."""
    rows = re.findall(r"^\| `([^`]+)` \|", page, re.M)
    headings = re.findall(r"^#{2,3} `?([^`\n]+?)`?$", page, re.M)
    return set(rows) | set(headings)


def commands(typer_app, path: str = "cyberjurors") -> set[str]:
    found = {f"{path} {c.name or c.callback.__name__.replace('_', '-')}" for c in typer_app.registered_commands}
    for group in typer_app.registered_groups:
        found |= commands(group.typer_instance, f"{path} {group.name}")
    return found


def exposed_metrics() -> set[str]:
    text = generate_latest(REGISTRY).decode()
    typed = dict(re.findall(r"^# TYPE (cyberjurors_\S+) (\S+)$", text, re.M))
    # prometheus_client adds a <name>_created gauge beside each counter and histogram
    return {name for name in typed if not name.endswith("_created")}


EXPECTED = {
    "settings_page": lambda: set(Settings.model_fields),
    "cli_page": lambda: commands(app),
    "schemas_page": lambda: set(PUBLIC),
    "metrics_page": exposed_metrics,
    "reasons_page": lambda: {reason.value for reason in errors.Reason},
}


@pytest.mark.parametrize("page", sorted(EXPECTED))
def test_each_reference_page_has_an_entry_for_everything_the_code_has(page):
    expected = EXPECTED[page]()
    assert expected, "nothing found to check against"
    generated = getattr(REF, page)()
    assert expected - entries(generated) == set()


@pytest.mark.parametrize("page", sorted(EXPECTED))
def test_a_page_missing_one_entry_is_caught(page):
    generated = getattr(REF, page)()
    name = sorted(EXPECTED[page]())[0]
    lines = [line for line in generated.splitlines() if f"`{name}`" not in line and line.strip("# ") != name]
    assert name in EXPECTED[page]() - entries("\n".join(lines))


def test_every_setting_has_its_environment_variable_type_default_and_a_description():
    page = REF.settings_page()
    for name, field in Settings.model_fields.items():
        (row,) = [line for line in page.splitlines() if line.startswith(f"| `{name}` |")]
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        assert cells[1].startswith(f"`CYBERJURORS_{name.upper()}`") and cells[2] and cells[3], row
        assert cells[4] == REF.cell(field.description) != "", row


def test_every_reason_says_whether_its_letter_is_replayable():
    rows = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", REF.reasons_page(), re.M))
    assert {r.value for r in errors.Reason} <= set(rows)
    assert rows["stage_failed"].strip() == "yes" and rows["invalid_json"].strip() == "no"
    assert rows["llm_timeout"].strip() == "yes" and rows["llm_refused"].strip() == "no"


class MkdocsLoader(yaml.SafeLoader):
    """mkdocs.yml as mkdocs reads it, its ``!!python/name:`` tags (the mermaid fence's formatter) left unresolved."""


MkdocsLoader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: suffix)


def site_url() -> str:
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=MkdocsLoader)["site_url"]


def alerts() -> list[dict]:
    rules = yaml.safe_load((ROOT / "infra" / "alerts.yml").read_text())
    return [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]


def test_every_alert_links_its_runbook_section_in_the_site():
    site = site_url()
    runbooks = (ROOT / "docs" / "operations" / "alerts.md").read_text()
    headings = set(re.findall(r"^## (\S+)$", runbooks, re.M))
    assert alerts()
    for rule in alerts():
        name = rule["alert"]
        assert rule["annotations"]["runbook_url"] == f"{site}operations/alerts/#{name.lower()}"
        assert name in headings, f"docs/operations/alerts.md has no section for {name}"


def test_every_command_and_each_of_its_arguments_and_options_says_what_it_does():
    silent = [
        f"{name} {param.name}"
        for name, command in REF.commands().items()
        for param in command.params
        if param.name != "help" and not getattr(param, "help", None)
    ]
    assert silent == []
    assert all(command.help for command in REF.commands().values())


def test_every_ce_dataschema_names_a_schema_the_site_publishes():
    """A public message's ce_dataschema (streams/cloudevents.py) under the default schema_base_url
    is a file the documentation build writes into the site."""
    from cyberjurors.streams.cloudevents import PUBLIC_TOPICS, dataschema

    site = site_url()
    settings = Settings(llm_backend="offline")
    published = {site + path for path in REF.schema_files()}
    named = {dataschema(settings, kind.schema) for kind in PUBLIC_TOPICS.values()}
    assert named and named <= published, named - published
    for path, content in REF.schema_files().items():
        name = path.rsplit("/", 1)[1].removesuffix(".schema.json")
        assert json.loads(content) == json_schemas()[name]


def test_the_readme_stage_table_names_every_agent_its_topics_and_modules_that_exist():
    """One hop from the README to each stage: a row per agent the app declares, its topic in as the
    agent reads it, and every module it links present in the package."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("## Stages") :].split("\n## ", 1)[0]
    rows = {m[0]: m for m in re.findall(r"^\| `([a-z_]+)`[^|]*\| ([^|]*) \|[^|]*\|(.*)\|$", table, re.M)}
    app_source = (ROOT / "cyberjurors" / "streams" / "app.py").read_text()
    agents = set(re.findall(r'@app\.agent\([^\n]*name="(\w+)"', app_source))
    # the verdict is a stage of its own (its label, its handler) run by the rounds agent's last round
    assert len(agents) >= 8 and set(rows) == agents | {"verdict"}, set(rows) ^ (agents | {"verdict"})
    for name, (_, topics_in, rest) in rows.items():
        read = re.search(rf'@app\.agent\(topic\("([^"]+)"\), name="{name}"', app_source)
        if read:  # the agents on the model stages read a topic object built beside them
            assert f"`{read.group(1)}`" in topics_in, (name, topics_in)
        linked = re.findall(r"\]\((cyberjurors/[\w/]+\.py)\)", rest)
        assert linked, name
        assert [path for path in linked if not (ROOT / path).is_file()] == [], name


def test_the_settings_page_lists_every_field_of_every_nested_setting_and_every_removed_name():
    from cyberjurors.config.deprecated import RENAMED

    page = REF.settings_page()
    rows = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", page, re.M))
    nested = {name: REF.nested_model(field) for name, field in Settings.model_fields.items()}
    for name, found in nested.items():
        if found is None:
            continue
        model, key = found
        for sub in model.model_fields:
            path = ".".join(p for p in (name, key, sub) if p)
            assert path in rows, path
            assert rows[path].startswith(f"`CYBERJURORS_{path.replace('.', '__').upper()}`"), rows[path]
    assert {"intake_limits", "retention", "kafka_timeouts", "llm_roles", "pipeline_overrides"} <= {
        n for n, f in nested.items() if f
    }
    assert rows["elasticsearch.url"].strip().endswith("or `ELASTICSEARCH_URL`"), "the ecosystem name beside its field"
    removed = page[page.index("## Removed names") :]
    for old, new in RENAMED.items():
        assert re.search(rf"^\| `{re.escape(old)}` \| `{re.escape(new)}`", removed, re.M), old
