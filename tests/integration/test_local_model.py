"""The local model server itself (cyberjurors/llm/local_server.py): llama-cpp-python's server from
.venv-llm on the pinned SmolLM2 GGUF answers the openai SDK, as the service's openai backend talks
to it. tests/integration/test_real_model.py runs a case through it; the checks that start no server
are in tests/unit/llm/test_local_server.py."""

from __future__ import annotations

import json

import openai

from cyberjurors.llm.local_server import SMOLLM2, LocalServer, sha256_of


async def test_the_server_runs_the_pinned_gguf_and_the_openai_sdk_gets_a_chat_completion(local_model: LocalServer):
    assert local_model.gguf.stat().st_size == SMOLLM2.size and sha256_of(local_model.gguf) == SMOLLM2.sha256
    client = openai.AsyncOpenAI(base_url=local_model.base_url, api_key="local", max_retries=0)
    try:
        listed = await client.models.list()
        assert [m.id for m in listed.data] == [SMOLLM2.name]
        reply = await client.chat.completions.create(
            model=SMOLLM2.name,
            messages=[{"role": "user", "content": "Name one colour."}],
            max_tokens=8,
            temperature=0,
        )
    finally:
        await client.close()
    assert reply.model == SMOLLM2.name and reply.choices[0].finish_reason in ("stop", "length")
    assert reply.usage is not None and reply.usage.prompt_tokens > 0 and 0 < reply.usage.completion_tokens <= 8


async def test_the_server_takes_json_object_with_a_schema_and_refuses_json_schema(local_model: LocalServer):
    """The facts the service's structured-output modes are built on (issue 38): this server constrains
    to a schema given as ``json_object`` + ``schema`` and refuses OpenAI's ``json_schema`` shape with
    a 500 that names it."""
    schema = {
        "type": "object",
        "properties": {"vote": {"enum": ["buyer", "seller"]}, "why": {"type": "string", "maxLength": 40}},
        "required": ["vote", "why"],
    }
    client = openai.AsyncOpenAI(base_url=local_model.base_url, api_key="local", max_retries=0)
    messages = [{"role": "user", "content": "The parcel never came. Who wins, buyer or seller? Answer in JSON."}]
    try:
        constrained = await client.chat.completions.create(
            model=SMOLLM2.name,
            messages=messages,  # type: ignore[arg-type]
            max_tokens=64,
            temperature=0,
            response_format={"type": "json_object", "schema": schema},  # type: ignore[arg-type,typeddict-unknown-key]
        )
        try:
            await client.chat.completions.create(
                model=SMOLLM2.name,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=8,
                response_format={"type": "json_schema", "json_schema": {"name": "ballot", "schema": schema}},
            )
            refused = None
        except openai.APIStatusError as err:
            refused = err
    finally:
        await client.close()
    answer = json.loads(constrained.choices[0].message.content or "")
    assert answer["vote"] in ("buyer", "seller") and len(answer["why"]) <= 40
    # refused as a server error (500), not a 400: its body names the request's shape, which is what
    # `auto` has to read to move on to the next mode
    assert refused is not None, "the server now takes json_schema: auto's first mode would do"
    said = refused.message.replace("\\'", "'")
    assert refused.status_code == 500 and "'response_format', 'type'" in said and "json_object" in said
