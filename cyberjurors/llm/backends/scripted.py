"""A scripted backend for tests: a function answers each call (pydantic-ai's FunctionModel idea)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pydantic import BaseModel

from ...schemas import Usage
from ..port import LLMRequest, LLMResult, T

Answer = Callable[[LLMRequest, type[BaseModel]], BaseModel | Awaitable[BaseModel]]


@dataclass
class ScriptedLLM:
    answer: Answer
    backend: str = "scripted"
    model_label: str = "scripted"
    calls: list[LLMRequest] = field(default_factory=list)

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        self.calls.append(request)
        output = self.answer(request, output_type)
        if inspect.isawaitable(output):
            output = await output
        if not isinstance(output, output_type):
            output = output_type.model_validate(output)
        return LLMResult(
            output,
            Usage(input_tokens=len(request.text()) // 4, output_tokens=10),
            model="scripted",
            backend=self.backend,
        )

    def roles(self) -> list[str]:
        return [c.role for c in self.calls]
