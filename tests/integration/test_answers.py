"""One juror's failure does not end the case, through a real worker on the embedded broker and the
anthropic backend against a local Messages API server: the juror whose replies stop at max_tokens is
asked once more, then abstains; the case still ends in a verdict that says so, nothing is
dead-lettered, and the case's tokens are what the server billed, the failed replies included.
tests/unit/jury/test_answers.py has the rest."""

from __future__ import annotations

from pathlib import Path

from cyberjurors.config import Settings
from cyberjurors.jury.rounds import Jury
from cyberjurors.schemas import Verdict
from cyberjurors.tooling.clients import produce, read_events

from ..conftest import EXAMPLES, calls, read_topic, worker_process
from ..messages_server import Received, Reply, ScriptedServer, ThinkingModel, anthropic_message, request_text, serving


class OneJurorCutOff:
    """Answers every call with a schema-valid answer, except the ballots of the juror named ``persona``:
    their replies run to max_tokens, as a small model's rambling answer does."""

    def __init__(self, persona: str):
        self.persona, self.model, self.cut = persona, ThinkingModel(thinking_tokens=0), 0

    def __call__(self, received: Received) -> Reply:
        body = received.body
        schema = body["output_config"]["format"]["schema"]
        if "vote" in schema.get("properties", {}) and self.persona in request_text(body):
            self.cut += 1
            return anthropic_message(
                '{"conflicts": ["the seam', stop_reason="max_tokens", output_tokens=body["max_tokens"]
            )
        return self.model.message(body)


async def test_a_juror_cut_off_twice_abstains_and_the_case_still_gets_its_verdict(settings: Settings, tmp_path: Path):
    (event,) = read_events([EXAMPLES / "cases" / "clot-001-shirt-torn-seam.json"])
    base = settings.model_copy(update={"jurors": 3, "rounds": 1})
    respond = OneJurorCutOff(Jury.from_settings(base).personas[1].name)
    with serving(ScriptedServer(respond=respond)) as url:
        s = base.model_copy(
            update={
                "llm_backend": "anthropic",
                "anthropic_api_key": "sk-ant-test",
                "anthropic_base_url": url,
                "llm_max_retries": 0,
            }
        )
        async with worker_process(s, tmp_path / "worker.log"):
            await produce(s, [event])
            [(_, value)] = await read_topic(s, "disputes.verdicts", until=1, timeout_s=120)
            assert await read_topic(s, "disputes.dlq", until=1, timeout_s=2) == []
    verdict = Verdict.model_validate_json(value)
    assert (verdict.votes.total, verdict.votes.abstained) == (2, 1) and respond.cut == 2
    assert any("juror 1" in p and "abstained" in p for p in verdict.problems), verdict.problems
    assert [seat.vote is None for seat in verdict.jury.seats] == [False, True, False]
    made = [c for c in calls(s.llm_call_log) if c["case_id"] == event.case_id]
    assert [c["error"] for c in made if c["role"] == "juror" and c["error"]] == ["truncated", "truncated"]
    # the case's tokens are every reply's, the two that were cut off included
    assert verdict.tokens.output_tokens == sum(c["output_tokens"] for c in made)
    assert verdict.tokens.input_tokens == sum(c["input_tokens"] for c in made)
    assert verdict.tokens.calls == len(made)
