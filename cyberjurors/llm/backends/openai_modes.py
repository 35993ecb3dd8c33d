"""The four ways an OpenAI-compatible server can be asked for a structured answer, and how a reply
is read and checked whatever the way (the same problem instructor's modes and pydantic-ai's model
profiles solve; their lessons, not their client stacks, are taken here).

* ``json_schema``: ``response_format = {type: json_schema, json_schema: {name, strict, schema}}``,
  the strict schema the SDK builds (vLLM, llama-server, Ollama, LM Studio, OpenAI);
* ``json_object_schema``: ``response_format = {type: json_object, schema}``, as llama-cpp-python's
  server takes it (it refuses ``json_schema`` with "Input should be 'text' or 'json_object'");
* ``tool``: one tool whose parameters are the schema, forced by ``tool_choice``; the answer is its
  arguments (pydantic-ai's default ``ToolOutput``, instructor's ``TOOLS``);
* ``prompt``: the schema in the system prompt with the order to answer JSON alone (pydantic-ai's
  ``PromptedOutput``, instructor's ``JSON``), plus ``response_format = {type: json_object}`` where
  the server offers JSON mode.

Every reply is checked against the output type: fenced or prefaced JSON is cut out of the text,
parsed leniently (raw control characters inside strings, which llama.cpp's grammar lets through,
are taken), then validated; what fails is quoted back once in a repair request (instructor's
"reask"), and fails the call after that.
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai
import pydantic
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from ...errors import CyberJurorsError, validation_summary
from .openai_server import Mode

FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)


class Unusable(CyberJurorsError):
    """A reply that holds no valid answer: what is wrong with it, for the repair request and the error."""

    kind = "invalid_output"


def schema_of(output_type: type[BaseModel]) -> dict[str, Any]:
    """The strict JSON schema of the output type (every field required, no extra properties), as
    the SDK builds it for structured output; the bounds of ``schemas/bounds.py`` stay in it."""
    return dict(openai.pydantic_function_tool(output_type)["function"]["parameters"])


def prompt_rule(schema: dict[str, Any]) -> str:
    """What the system prompt says in ``prompt`` mode."""
    return (
        "\n\nAnswer with one JSON object and nothing else: no text before or after it, no Markdown fence. "
        f"It must fit this JSON schema:\n{json.dumps(schema, separators=(',', ':'))}"
    )


def request_shape(mode: Mode, output_type: type[BaseModel], json_mode: bool = True) -> dict[str, Any]:
    """The body fields that ask for a structured answer in ``mode``."""
    schema = schema_of(output_type)
    name = output_type.__name__
    match mode:
        case "json_schema":
            return {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": name, "strict": True, "schema": schema},
                }
            }
        case "json_object_schema":
            return {"response_format": {"type": "json_object", "schema": schema}}
        case "tool":
            tool = {
                "type": "function",
                "function": {"name": name, "description": output_type.__doc__ or name, "parameters": schema},
            }
            return {"tools": [tool], "tool_choice": {"type": "function", "function": {"name": name}}}
        case "prompt":
            return {"response_format": {"type": "json_object"}} if json_mode else {}


def answer_text(completion: ChatCompletion, mode: Mode) -> str | None:
    """The text that should hold the answer: the forced tool call's arguments in ``tool`` mode (or
    the content, where a server answers there instead), else the message's content."""
    message = completion.choices[0].message
    if mode == "tool" and message.tool_calls:
        call = message.tool_calls[0]
        arguments = getattr(getattr(call, "function", None), "arguments", None)
        if arguments:
            return str(arguments)
    return message.content


def parsed(text: str | None, output_type: type[BaseModel]) -> Any:
    """The answer in a reply's text, checked; raises ``Unusable`` saying what is wrong."""
    if text is None or not text.strip():
        raise Unusable("the reply is empty")
    body = text.strip()
    if fenced := FENCE.match(body):
        body = fenced.group(1)
    if not body.startswith("{") and "{" in body:  # prose before or after the object
        body = body[body.index("{") : body.rindex("}") + 1]
    try:
        data = json.loads(body, strict=False)
    except json.JSONDecodeError as e:
        raise Unusable(f"the reply is not JSON ({e.msg} at character {e.pos})") from e
    try:
        return output_type.model_validate(data)
    except pydantic.ValidationError as e:
        raise Unusable(f"the reply is not a valid {output_type.__name__}: {validation_summary(e)}") from e


def repair_messages(mode: Mode, text: str | None, problem: str) -> list[dict[str, Any]]:
    """What follows the first request's messages in the one repair request: the reply as the model
    gave it, and what was wrong with it."""
    ask = "Call the tool again" if mode == "tool" else "Reply again with only the JSON object"
    return [
        {"role": "assistant", "content": text or "(no answer)"},
        {
            "role": "user",
            "content": f"Your answer cannot be used: {problem}. {ask}, complete and fitting the schema, nothing else.",
        },
    ]
