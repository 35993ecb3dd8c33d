"""The public events' JSON Schemas as `cyberjurors schemas export` writes them: the letter's among
them, and what the letters stage sends validates against it; the dispute form's new optional fields
(locales, private evidence) are in the case's schema and leave a case without them as it was."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from cyberjurors.cli import app
from cyberjurors.jury.letters import write_letters
from cyberjurors.jury.stages import judge
from cyberjurors.schemas import CaseFile, DisputeCase, now
from cyberjurors.schemas.public import PUBLIC

from ... import factories
from ...conftest import EXAMPLES
from ...schema_model import SchemaModel

# appl-001's digest as the release before the new fields computed it: a case that does not use them
# must hash (and so get its verdict id, and match its precedent base entry) as it always did
KETTLE_DIGEST = "01ffb3cdd23a1abf9b0240b74adf79bcdbb5f021cf7f6a76f1db7ee2f1607912"


def exported(tmp_path: Path) -> dict[str, dict]:
    result = CliRunner().invoke(app, ["schemas", "export", str(tmp_path)])
    assert result.exit_code == 0, result.output
    return {p.name.removesuffix(".schema.json"): json.loads(p.read_text()) for p in tmp_path.glob("*.schema.json")}


async def test_the_letter_schema_is_exported_with_the_others_and_a_letter_validates(tmp_path):
    schemas = exported(tmp_path)
    assert set(schemas) == set(PUBLIC) and PUBLIC["letter"][1] == "disputes.letters"
    case = factories.example_case("food-003-coffee-roast-date-fr-de")
    settings = factories.settings(media_root=EXAMPLES)
    verdict = await judge(case, SchemaModel(), settings)
    for letter in await write_letters(CaseFile(case=case, received_at=now()), verdict, SchemaModel(), settings):
        jsonschema.validate(json.loads(letter.model_dump_json()), schemas["letter"])
    jsonschema.validate(json.loads((EXAMPLES / "cases" / f"{case.case_id}.json").read_text()), schemas["dispute-case"])
    broken = json.loads(letter.model_dump_json()) | {"locale_source": "guessed"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schemas["letter"])


def test_the_new_case_fields_are_optional_and_left_out_of_the_json_at_their_defaults():
    kettle = factories.example_case("appl-001-kettle-crack")
    assert kettle.digest() == KETTLE_DIGEST
    assert '"locale"' not in kettle.model_dump_json() and '"private"' not in kettle.model_dump_json()
    food = factories.example_case("food-003-coffee-roast-date-fr-de")
    dumped = json.loads(food.model_dump_json())
    assert dumped["metadata"]["locale"] == "de" and dumped["metadata"]["buyer_locale"] == "fr-FR"
    assert [i["id"] for r in dumped["rounds"] for i in r["items"] if i.get("private")] == ["s2-2"]
    assert DisputeCase.model_validate(dumped) == food  # and back


@pytest.mark.parametrize("bad", ["", "e", "en GB", "<script>", "x" * 40])
def test_a_locale_that_is_no_language_tag_is_refused_at_the_schema(bad):
    with pytest.raises(ValidationError):
        DisputeCase.model_validate(factories.case_data(metadata={**factories.METADATA, "locale": bad}))


def test_each_exported_schema_says_whether_its_records_are_sealed_and_validators_ignore_it(tmp_path):
    from cyberjurors.schemas.public import SEALED_BY_SERVICE, SEALED_KEYWORD

    schemas = exported(tmp_path)
    by_service = {name for name, schema in schemas.items() if schema[SEALED_KEYWORD].startswith(SEALED_BY_SERVICE)}
    # what the workers write (streams/app.py's public topics) is sealed by them; the platform's own, by choice
    assert by_service == {"verdict", "escalation", "letter", "dead-letter"}
    assert all("platform" in schemas[name][SEALED_KEYWORD] for name in set(PUBLIC) - by_service)
    case = json.loads((EXAMPLES / "cases" / "appl-001-kettle-crack.json").read_text())
    jsonschema.validate(case, schemas["dispute-case"])  # an annotation, not a constraint
