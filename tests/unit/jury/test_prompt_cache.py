"""The metadata block is built once per case object: every juror of a round asks for it with the
same case, and its placeholder check reads all of the case's text."""

from __future__ import annotations

from cyberjurors.evidence.privacy import PLACEHOLDER_RULE
from cyberjurors.jury import prompts

from ...factories import example_case


def test_the_metadata_block_is_built_once_per_case_and_follows_a_changed_case(monkeypatch) -> None:
    built: list[str] = []
    build = prompts._metadata_block
    monkeypatch.setattr(prompts, "_metadata_block", lambda case, note: built.append(case.case_id) or build(case, note))
    case = example_case("clot-001-shirt-torn-seam")
    first = prompts.metadata_block(case)
    assert all(prompts.metadata_block(case) == first for _ in range(17)) and len(built) == 1
    other = case.model_copy(update={"metadata": case.metadata.model_copy(update={"product": "a linen dress"})})
    assert "a linen dress" in prompts.metadata_block(other) and "a linen dress" not in first
    assert PLACEHOLDER_RULE not in first  # the sample shows no personal data
    for n in range(prompts.BLOCKS_KEPT + 5):  # bounded: the oldest go first
        prompts.metadata_block(case.model_copy(update={"case_id": f"c{n}"}))
    assert len(prompts._BLOCKS) == prompts.BLOCKS_KEPT
