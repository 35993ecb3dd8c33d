"""The schema-driven test model (tests/schema_model.py): every answer it gives is valid under the
schema the backends send, within its bounds, the same for the same request and not one fixed
answer for all."""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cyberjurors.llm.port import LLMRequest, TextPart
from cyberjurors.precedents.distill import GuidelineDrafts
from cyberjurors.schemas import (
    ArgumentDraft,
    BallotDraft,
    CandidateSentences,
    Focus,
    JustificationDraft,
    LetterDraft,
    Perception,
    RoundSummaryDraft,
    Selection,
    SentenceVotes,
    VerificationDraft,
)

from ...schema_model import SchemaModel, answer

# every type a stage asks a model for (config/llm.py sizes each role's room by them)
OUTPUTS = [
    Focus,
    Selection,
    Perception,
    BallotDraft,
    SentenceVotes,
    RoundSummaryDraft,
    JustificationDraft,
    ArgumentDraft,
    VerificationDraft,
    CandidateSentences,
    GuidelineDrafts,
    LetterDraft,
]


@pytest.mark.parametrize("output_type", OUTPUTS, ids=lambda t: t.__name__)
@given(seed=st.text(max_size=40))
def test_every_answer_is_valid_under_the_schema_the_backends_send(output_type, seed):
    made = answer(output_type, seed)
    assert isinstance(made, output_type)
    jsonschema.validate(made.model_dump(mode="json"), output_type.model_json_schema())  # bounds included
    assert answer(output_type, seed) == made  # the same seed, the same answer


@pytest.mark.parametrize("output_type", OUTPUTS, ids=lambda t: t.__name__)
def test_different_requests_get_different_answers(output_type):
    assert len({answer(output_type, str(n)).model_dump_json() for n in range(8)}) > 1


async def test_it_answers_through_the_llm_port_and_counts_what_it_was_asked():
    model = SchemaModel()
    request = LLMRequest(role="focus", model="m", system="s", shared=[TextPart("the case")], prompt=[TextPart("ask")])
    result = await model.generate(request, Focus)
    assert isinstance(result.output, Focus) and result.backend == model.backend and result.finish_reason == "stop"
    assert result.usage.calls == 1 and result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    assert model.calls == [("NoneType", "Focus")]
    assert (await model.generate(request, Focus)).output == result.output
