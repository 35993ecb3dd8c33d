"""A case decided end to end on a real model: llama-cpp-python's server with SmolLM2-135M-Instruct
(the ``local_model`` fixture), one real worker on the embedded broker, ``llm_backend = openai`` with
``openai_structured_output = auto``, a small court (3 jurors, 1 round, stage II off so the jurors
read the evidence at once), a case with a photo.

A 135M model cannot judge, so nothing here is about who wins: the test asserts the plumbing. The
verdict is one of valid structure; ``auto`` found the mode this server takes (``json_object`` with a
``schema``, after its refusal of ``json_schema``); the verdict's tokens are the server's own usage, as
a relay in front of it recorded the replies (tests/llm_relay.py); the text-only model read the photo
as its caption, and the verdict says so. Its own file, so xdist gives it a process of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cyberjurors.config import Settings
from cyberjurors.llm.local_server import LocalServer
from cyberjurors.tooling.clients import await_outcomes, produce, read_events

from ..conftest import EXAMPLES, worker_process
from ..llm_relay import Relay

CASE = EXAMPLES / "cases" / "food-001-granola-past-best-before.json"  # 7 items, a photo among them


@pytest.mark.timeout(600)  # a few minutes of real model calls on two cores (bench/local_model.py measures them)
async def test_a_case_with_a_photo_reaches_a_verdict_on_a_real_model(
    settings: Settings, local_model: LocalServer, tmp_path: Path
):
    relay = Relay(local_model.url)
    await relay.start()
    s = settings.model_copy(
        update={
            "llm_backend": "openai",
            "openai_base_url": f"{relay.url}/v1",
            "openai_api_key": "local",  # the server takes any key; the SDK wants one
            "openai_structured_output": "auto",
            "model": local_model.model.name,
            "jurors": 3,
            "rounds": 1,
            "max_select_steps": 0,  # stage II off: the jurors read every item at once, the photo as its caption
            # no round summary, and a shorter juror prompt: the platform's rules are not what is tested here
            "pipeline_overrides": {"round_summary": False, "verdict_rules": False},
            "llm_roles": {"default": {"max_output_tokens": 512}},
            "llm_concurrency": 1,  # the server answers one request at a time; a queued one would time out
            "llm_timeout_s": 600,
            "llm_max_retries": 0,
        }
    )
    (event,) = read_events([CASE])
    try:
        async with worker_process(s, tmp_path / "worker.log"):
            await produce(s, [event])
            outcome = (await await_outcomes(s, {event.case_id}, timeout_s=480)).get(event.case_id)
    finally:
        await relay.stop()
    assert outcome is not None, "no verdict and no dead letter: see the worker's log"
    letter = outcome.dead_letter
    assert letter is None, (letter.stage, letter.reason, letter.detail)
    verdict = outcome.verdict
    assert verdict is not None
    assert verdict.case_id == event.case_id and verdict.backend == "openai" and verdict.rounds_used == 1
    assert verdict.votes.seats == 3 and local_model.model.name in verdict.models
    # labelled as the offline stand-in's are, never passed off as judgement (the catalog's plumbing_only)
    assert verdict.justification.startswith("[tiny model: plumbing"), verdict.justification[:80]

    # the mode auto chose: json_schema refused by this server (a 500 naming response_format), then
    # json_object with the schema, remembered for every later call
    asked = relay.completions()
    first = asked[0].request["response_format"]
    assert first["type"] == "json_schema" and asked[0].status == 500, asked[0].reply
    answered = [e for e in asked if e.status == 200]
    assert answered and all(
        e.request["response_format"]["type"] == "json_object" and "schema" in e.request["response_format"]
        for e in answered
    )
    assert sum(e.request["response_format"]["type"] == "json_schema" for e in asked) == 1  # learnt once
    # every message the text-only model got is one string, and no image reached it
    assert all(isinstance(m["content"], str) for e in asked for m in e.request["messages"])

    # the verdict's tokens are what the server counted, the replies that failed our checks included
    prompt, completion = relay.usage()
    assert (verdict.tokens.input_tokens + verdict.tokens.cache_read_tokens, verdict.tokens.output_tokens) == (
        prompt,
        completion,
    )
    assert verdict.tokens.calls >= 1 + 3  # the focus and three ballots at least

    # the photo was read as its caption, and the verdict says which roles read captions only
    assert any("caption" in p for p in verdict.problems), verdict.problems
