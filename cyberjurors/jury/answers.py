"""Asking a model again, and what a stage does when it still has no answer.

Every call the jury makes goes through ``ask``: an answer cut at its output limit (``truncated``)
or still invalid after the backend's own repair (``invalid_output``) is asked for once more, the
same request again (a sampled model often answers it; a provider may have cut it for load). What
the failed try was billed is added to what the call cost, so a case's tokens are what the provider
counted. Other failures are the backend's to retry (rate limits, timeouts) or final as they are.

When the second answer fails too, ``ask_or_none`` gives the caller no answer instead of an error:
a juror abstains for the round (``rounds.py``), a round summary falls back to the tally, the
verifier leaves the verdict unverified, each with a note on the verdict. Stages whose answer the
case cannot go on without (the focus, the select-perceive steps, the court's advocates and judge)
call ``ask``, and its second failure ends the case as a dead letter, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from ..errors import plain
from ..llm.port import LLM, LLMError, LLMRequest, LLMResult, T
from ..schemas import Usage

ASKED_AGAIN = frozenset({"truncated", "invalid_output"})
"""The failures of an answer (not of a call) that the same question may not meet twice."""
TRIES = 2


def _again(error: BaseException) -> bool:
    return isinstance(error, LLMError) and error.kind in ASKED_AGAIN


async def ask(llm: LLM, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
    """``llm.generate``, asked once more after an answer that was cut off or invalid. The result's
    usage (or the last error's) includes what the failed try was billed."""
    spent = Usage()
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(TRIES), retry=retry_if_exception(_again), reraise=True
        ):
            with attempt:
                try:
                    result = await llm.generate(request, output_type)
                except LLMError as err:
                    spent += err.usage or Usage()
                    raise
    except LLMError as err:
        err.usage = spent if spent != Usage() or err.usage is not None else None
        raise
    result.usage = spent + result.usage
    return result


@dataclass(frozen=True)
class NoAnswer:
    """A call whose answer failed twice: how (``ASKED_AGAIN``), what was said of it, what it cost."""

    kind: str
    detail: str
    usage: Usage

    def said(self) -> str:
        """How the answers failed, for a note on the verdict."""
        how = "was cut at the output limit" if self.kind == "truncated" else "did not fit the answer's schema"
        return f"its answer {how} when asked and when asked again ({plain(self.detail, 300)})"


async def ask_or_none(llm: LLM, request: LLMRequest, output_type: type[T]) -> LLMResult[T] | NoAnswer:
    """``ask``, with an answer that failed twice given back as ``NoAnswer``; any other failure raises."""
    try:
        return await ask(llm, request, output_type)
    except LLMError as err:
        if err.kind not in ASKED_AGAIN:
            raise
        return NoAnswer(err.kind, err.detail or str(err), err.usage or Usage())


async def output_or_none(llm: LLM, request: LLMRequest, output_type: type[T]) -> tuple[T | NoAnswer, Usage]:
    """``ask_or_none``'s answer (its output, or the ``NoAnswer``) and what the call cost."""
    result = await ask_or_none(llm, request, output_type)
    return result if isinstance(result, NoAnswer) else result.output, result.usage
