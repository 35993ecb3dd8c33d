"""Minimisation before the model, through the stream handlers (issue 30's first check): the seeded
cases go from intake through the focus, clues and rounds hops to the verdict, each hop in its span
with its log lines and metrics, as a worker runs them (dict tables, list-backed topics, no broker).

No seeded value is in a model request, a log line, a span, a metric label, a dead letter's detail or
a verdict. A model call that fails with the provider echoing the prompt back (some OpenAI-compatible
servers do) dead-letters its input with that echo as the detail: masked, since the prompt was.
"""

from __future__ import annotations

import base64
import logging

from cyberjurors.jury.rounds import Jury
from cyberjurors.jury.stages import NoPrecedents
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import GuardedLLM, LLMError
from cyberjurors.observability import metrics
from cyberjurors.schemas import DeadLetter, Verdict
from cyberjurors.state.results import StageResults
from cyberjurors.streams.app import Handlers, next_round
from cyberjurors.streams.dead_letters import DeadLetters
from cyberjurors.streams.intake import Intake
from cyberjurors.streams.stage_hop import StageHop, StageWork
from cyberjurors.streams.verdict import Verdicts

from ... import factories
from ..jury.test_minimisation import (  # the seeded set and how its leaks are found
    SEEDED,
    leaked,
    metric_labels,
    recorder,
    request_texts,
    seeded,
    settings,
    span_texts,
)
from .test_app_handlers import Topic, event


def handlers(llm: GuardedLLM, dlq: Topic) -> tuple[Handlers, dict[str, Topic]]:
    """A worker's handlers over list-backed topics, as ``streams.app.create_app`` wires them."""
    s = settings()
    topics = {name: Topic() for name in ("intake", "focus", "clues", "rounds", "verdicts", "escalations")}
    in_flight, results = metrics.CasesInFlight(), StageResults({})
    letters = DeadLetters(dlq, in_flight)
    work = StageWork(s, llm, Jury.from_settings(s), NoPrecedents())  # type: ignore[arg-type]
    verdicts = Verdicts(
        s, results, topics["verdicts"], in_flight, work.verdict, escalations=topics["escalations"], dead_letters=letters
    )
    intake = Intake(s, llm.backend, {}, results, topics["intake"], letters, in_flight)
    hop = StageHop(results, letters, in_flight, verdicts.resend)
    return Handlers(intake, hop, work, verdicts, None, letters), topics  # type: ignore[arg-type]  # no outcomes here


async def judged(h: Handlers, topics: dict[str, Topic], case_id: str, case_json: dict) -> None:
    """One case from disputes.events to its verdict, hop by hop."""
    await h.intake(event(factories.whole(case_json), case_id.encode()))
    key = case_id.encode()
    await h.hop(event(topics["intake"].sent[-1][1], key), "focus", topics["focus"], h.work.focus)
    await h.hop(event(topics["focus"].sent[-1][1], key), "clues", topics["clues"], h.work.clues)
    pending, sent = topics["clues"].sent[-1][1], len(topics["rounds"].sent)
    while True:  # a round goes to disputes.rounds and comes back; a settled case file becomes the verdict
        await next_round(h, settings(), event(pending, key), topics["rounds"])
        if len(topics["rounds"].sent) == sent:
            return
        pending, sent = topics["rounds"].sent[-1][1], len(topics["rounds"].sent)


async def test_through_the_stream_handlers_nothing_personal_reaches_the_model_logs_spans_metrics_or_verdicts(
    spans,
    caplog,
):
    caplog.set_level(logging.DEBUG)
    recording, dlq = recorder(), Topic()
    h, topics = handlers(GuardedLLM(recording), dlq)
    for template in SEEDED:
        case = seeded(template)
        await judged(h, topics, case.case_id, case.model_dump(mode="json"))

    verdicts = [Verdict.model_validate_json(v) for _, v in topics["verdicts"].sent]
    assert [v.case_id for v in verdicts] == [t["case_id"] for t in SEEDED] and dlq.sent == []
    assert leaked(request_texts(recording)) == set()
    assert leaked([r.getMessage() + (r.exc_text or "") for r in caplog.records]) == set()
    names = {s.name for s in spans.get_finished_spans()}
    assert {"focus", "clues", "round-1", "verdict"} <= names and leaked(span_texts(spans)) == set()
    assert leaked(metric_labels()) == set()
    assert leaked([v.model_dump_json() for v in verdicts]) == set()
    assert all(v.minimisation and v.minimisation.masked for v in verdicts)


async def test_a_dead_letter_says_what_failed_in_masked_words_and_keeps_its_input_as_received(
    spans,
    caplog,
):
    caplog.set_level(logging.DEBUG)

    def echoing(request, output_type):  # type: ignore[no-untyped-def]
        raise LLMError("bad_request", f"the server could not parse the prompt's end: {request.text()[-250:]}")

    dlq = Topic()
    h, topics = handlers(GuardedLLM(ScriptedLLM(echoing)), dlq)
    case = seeded(SEEDED[0])
    await h.intake(event(factories.whole(case.model_dump(mode="json")), case.case_id.encode()))
    await h.hop(event(topics["intake"].sent[-1][1], case.case_id.encode()), "focus", topics["focus"], h.work.focus)

    [letter] = [DeadLetter.model_validate_json(v) for _, v in dlq.sent]
    assert (letter.stage, letter.reason, letter.key) == ("focus", "llm_bad_request", case.case_id)
    assert "[PHONE_1] was the buyer's" in letter.detail  # the echo is there, in the words the model was sent
    assert leaked([letter.model_dump_json(exclude={"original_base64"})]) == set()
    assert leaked([r.getMessage() + (r.exc_text or "") for r in caplog.records]) == set()
    assert leaked(span_texts(spans)) == set() and leaked(metric_labels()) == set()
    # the original is the input as received, kept so that a replay can judge it: masking is for what
    # leaves for a model, not for the service's own records (erasing those is issue 30's `erase`)
    assert leaked([base64.b64decode(letter.original_base64).decode()])
