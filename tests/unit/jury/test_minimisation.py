"""Minimisation before the model, through the jury's stages (issue 30's first check).

A set of cases seeded with personal data of every kind is judged by the offline stand-in behind the
scripted backend, which records every request: no seeded value is in any request (its text, its
system prompt or the task the stand-in reads), the logs, the call log, the spans, the metric labels
or the verdict. The stand-in quotes the evidence it reads into clues and justifications, so a value
that reached it would reach the verdict too. The same cases with the values replaced by hand and
minimisation off get the same requests, byte for byte, and the same verdicts.

Each case is written once, its values as ``{{value|PLACEHOLDER}}``: ``seeded`` fills in the values,
``by_hand`` the placeholders a reader would write. The values are fictional (Ofcom's drama numbers,
the card schemes' test numbers, the IBAN registries' examples, example domains).
"""

from __future__ import annotations

import copy
import json
import logging
import re
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import REGISTRY

from cyberjurors.config import Settings
from cyberjurors.evidence.privacy import PLACEHOLDER_RULE
from cyberjurors.jury import offline, prompts
from cyberjurors.jury.appeal import appeal_clues, appeal_file, with_evidence
from cyberjurors.jury.letters import write_letters
from cyberjurors.jury.offline import OfflineLLM
from cyberjurors.jury.rounds import Jury, is_settled
from cyberjurors.jury.stages import NoPrecedents, clues_stage, focus_stage, judge, round_stage, seen, verdict_stage
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import GuardedLLM
from cyberjurors.schemas import AppealFiled, CaseFile, DisputeCase, Verdict, now

from ... import factories

# --- the seeded set --------------------------------------------------------------------------------

DELIVERY: dict[str, Any] = {
    "case_id": "seed-delivery",
    "metadata": {
        **factories.WOOL_COAT,
        "product": "Down jacket, size M",
        "dispute_reason": "Never received; the courier says it was signed by {{J. PARK|PERSON_1}}",
        "requested_remedy": "Refund to {{DE89 3704 0044 0532 0130 00|IBAN_1}}",
    },
    "rounds": [
        {
            "party": "buyer",
            "round": 1,
            "items": [
                {
                    "id": "b1",
                    "kind": "text",
                    "text": "My name is {{Jiwon Park|PERSON_1}} and I was at work, the parcel never arrived. "
                    "Call me on {{+44 20 7946 0958|PHONE_1}} or {{020 7946 0958|PHONE_1}}.",
                },
                {"id": "b2", "kind": "text", "text": "{{jiwon.park@mail.example|EMAIL_1}}"},
                {
                    "id": "b3",
                    "kind": "text",
                    "text": "I live at {{221B Baker Street, London NW1 6XE|ADDRESS_1}}. I typed "
                    "{{[PHONE_1]|(PHONE_1)}} in the form by mistake.",
                },
            ],
        },
        {
            "party": "seller",
            "round": 1,
            "items": [
                {
                    "id": "s1",
                    "kind": "text",
                    "text": "Courier proof of delivery: tracking SP 4471 9023 3186 DE delivered to "
                    "{{221B Baker Street, London NW1 6XE|ADDRESS_1}}, signed by {{J. PARK|PERSON_1}}. "
                    "We rang {{(020) 7946-0958|PHONE_1}} and {{+44 (0)20 7946 0958|PHONE_1}}.",
                },
                {
                    "id": "s2",
                    "kind": "text",
                    "text": "Write to {{returns@shop.example|EMAIL_2}} or ring {{0161 496 0000|PHONE_2}}, "
                    "or {{0044 20 7946 0958|PHONE_1}} was the buyer's.",
                },
            ],
        },
    ],
}
PAYMENT: dict[str, Any] = {
    "case_id": "seed-payment",
    "metadata": {
        **factories.METADATA,
        "category": "digital",
        "product": "Annual software licence",
        "dispute_reason": "Charged twice on card {{5500-0000-0000-0004|CARD_1}}",
        "requested_remedy": "Refund the second charge",
    },
    "rounds": [
        {
            "party": "buyer",
            "round": 1,
            "items": [
                {
                    "id": "b1",
                    "kind": "text",
                    "text": "Both charges hit {{5500 0000 0000 0004|CARD_1}}; my other card "
                    "{{4111 1111 1111 1111|CARD_2}} was not used. The receipt's reference 4111 1111 1111 1112 "
                    "is no card. The charge was duplicated and I want a refund.",
                },
                {"id": "b2", "kind": "text", "text": "{{GB82 WEST 1234 5698 7654 32|IBAN_1}}"},
            ],
        },
        {
            "party": "seller",
            "round": 1,
            "items": [
                {
                    "id": "s1",
                    "kind": "text",
                    "text": "The second charge is a pre-authorisation, released after 7 days as our policy "
                    "says. Regards, {{Anna Weber|PERSON_1}}, licensing at {{licensing@vendor.example|EMAIL_1}}",
                },
                {"id": "s2", "kind": "text", "text": "Mrs {{Weber|PERSON_1}} confirms it was tested and working."},
            ],
        },
    ],
}
SEEDED = [DELIVERY, PAYMENT]

_MARKER = re.compile(r"\{\{(.+?)\|(.+?)\}\}")


def _filled(template: dict[str, Any], value: Any) -> DisputeCase:
    data = copy.deepcopy(template)

    def fill(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: fill(v) for k, v in node.items()}
        if isinstance(node, list):
            return [fill(v) for v in node]
        return _MARKER.sub(value, node) if isinstance(node, str) else node

    return DisputeCase.model_validate(fill(data))


def seeded(template: dict[str, Any]) -> DisputeCase:
    return _filled(template, lambda m: m.group(1))


def by_hand(template: dict[str, Any]) -> DisputeCase:
    """The case with each value replaced as a reader would: ``[KIND_N]``, or as written when it is in brackets already."""
    return _filled(template, lambda m: m.group(2) if m.group(2).startswith("(") else f"[{m.group(2)}]")


# every value as written, and the normalised forms a careless fix could leak (long enough to be no accident)
VALUES = [
    *{m.group(1) for t in SEEDED for m in _MARKER.finditer(json.dumps(t)) if not m.group(1).startswith("[")},
    *("2079460958", "7946 0958", "1614960000", "496 0000", "370400440532013000", "5500000000000004"),
    *("4111111111111111", "WEST12345698765432", "Jiwon", "PARK", "Baker Street", "NW1 6XE", "Weber"),
]


def leaked(texts: list[str]) -> set[str]:
    return {v for v in VALUES for t in texts if v.casefold() in t.casefold()}


# --- the pipeline, recorded ------------------------------------------------------------------------


def recorder() -> ScriptedLLM:
    """The offline stand-in behind the scripted backend, which records every request."""
    stand_in = OfflineLLM()

    async def answer(request, output_type):  # type: ignore[no-untyped-def]
        return (await stand_in.generate(request, output_type)).output

    return ScriptedLLM(answer)


def settings(**over: Any) -> Settings:
    return factories.settings(jurors=5, rounds=2, metrics_port=0, pipeline="verifier", **over)


def request_texts(llm: ScriptedLLM) -> list[str]:
    return [f"{c.system}\n{c.text()}\n{c.task!r}" for c in llm.calls]


def span_texts(exporter: InMemorySpanExporter) -> list[str]:
    """Every string a span carries: its name, its and its events' attributes, its status."""
    out = []
    for span in exporter.get_finished_spans():
        out += [span.name, span.status.description or ""]
        for attributes in [span.attributes, *(e.attributes for e in span.events)]:
            out += [str(v) for v in (attributes or {}).values() if isinstance(v, str | tuple)]
    return out


def metric_labels() -> list[str]:
    return [f"{s.name} {s.labels}" for metric in REGISTRY.collect() for s in metric.samples]


async def test_no_seeded_value_reaches_the_model_the_logs_the_spans_the_metrics_or_the_verdict(
    spans, caplog, tmp_path: Path
):
    caplog.set_level(logging.DEBUG)
    recording = recorder()
    llm = GuardedLLM(recording, call_log=tmp_path / "calls.jsonl")
    verdicts = [await judge(seeded(t), llm, settings()) for t in SEEDED]

    requests = request_texts(recording)
    assert len(requests) >= 30 and leaked(requests) == set()
    assert leaked([r.getMessage() + (r.exc_text or "") for r in caplog.records]) == set()
    assert leaked([(tmp_path / "calls.jsonl").read_text()]) == set()
    assert len(spans.get_finished_spans()) == len(requests) and leaked(span_texts(spans)) == set()
    assert leaked(metric_labels()) == set()
    assert leaked([v.model_dump_json() for v in verdicts]) == set()
    # not vacuous: the jury read placeholders, and the number the dispute turns on as evidence
    juror = next(c for c in recording.calls if c.role == "juror" and c.case_id == "seed-delivery").text()
    assert "[PHONE_1]" in juror and "(PHONE_1)" in juror and "tracking SP 4471 9023 3186 DE" in juror
    assert PLACEHOLDER_RULE in juror


async def test_verdicts_on_masked_cases_equal_those_on_the_cases_masked_by_hand():
    """Byte-identical requests, then the same verdict but for what depends on the case's own bytes
    (its id, from the content hash) and on the clock; the hand-masked case records no minimisation."""
    for template in SEEDED:
        masked, hand = recorder(), recorder()
        verdict = await judge(seeded(template), masked, settings())
        reference = await judge(by_hand(template), hand, settings(privacy={"mask": []}))
        assert [(c.role, c.system, c.text()) for c in masked.calls] == [
            (c.role, c.system, c.text()) for c in hand.calls
        ]
        skip: Any = dict.fromkeys(["verdict_id", "decided_at", "latency_s", "minimisation"], True) | {
            "tokens": {"latency_s"}
        }
        assert verdict.model_dump(exclude=skip) == reference.model_dump(exclude=skip)
        assert reference.minimisation is None and verdict.minimisation is not None


async def test_the_verdict_records_the_kinds_masked_and_how_many_never_the_values():
    verdict = await judge(seeded(DELIVERY), recorder(), settings())
    assert verdict.minimisation is not None
    assert verdict.minimisation.model_dump() == {
        "kinds": ["email", "iban", "card", "phone", "address", "person"],
        "masked": {
            "person": {"values": 1, "occurrences": 3},
            "iban": {"values": 1, "occurrences": 1},
            "phone": {"values": 2, "occurrences": 6},
            "email": {"values": 2, "occurrences": 2},
            "address": {"values": 1, "occurrences": 2},
        },
        "escaped": 1,
        "kept": 1,
        "withheld": [],
    }
    assert Verdict.model_validate_json(verdict.model_dump_json()) == verdict
    # a verdict of an earlier version, without the field, still reads
    older = json.loads(verdict.model_dump_json(exclude={"minimisation"}))
    assert Verdict.model_validate(older).minimisation is None


async def test_the_case_file_keeps_the_case_as_submitted_so_every_stage_masks_it_alike():
    """A stage's output carries the case it was given, not the jury's view: the next stage (on any
    worker) masks the same text again, and a view masked twice would escape its own placeholders."""
    s, llm = settings(), recorder()
    case = seeded(DELIVERY)
    case_file = await focus_stage(CaseFile(case=case, received_at=now()), llm, s)
    case_file = await clues_stage(case_file, llm, s, NoPrecedents())
    case_file = await round_stage(case_file, Jury.from_settings(s), llm, s)
    assert case_file.case == case
    assert seen(seen(case_file, s), s).case != seen(case_file, s).case  # why: masking twice is not masking
    written = case_file.model_dump_json(include={"focus", "clues", "rounds"})
    assert "[PERSON_1]" in written and leaked([written]) == set()  # what the stages wrote, they wrote from the view


async def test_an_appeal_keeps_the_first_instance_placeholders_and_masks_its_grounds_and_evidence():
    s, llm = settings(appeal_jurors=7), recorder()
    first_file = await clues_stage(
        await focus_stage(CaseFile(case=seeded(DELIVERY), received_at=now()), llm, s), llm, s, NoPrecedents()
    )
    jury = Jury.from_settings(s)
    decided = await verdict_stage(await round_stage(first_file, jury, llm, s), llm, s, jury)
    loser = "buyer" if decided.winner == "seller" else "seller"
    appeal = AppealFiled(
        case_id="seed-delivery",
        appellant=loser,
        verdict_id=decided.verdict_id,
        grounds="Ring 020 7946 0958 or 0161 496 0000; my neighbour 0161 496 0999 saw Mr Okafor take it.",
        evidence=[{"id": "n1", "kind": "text", "text": "Note from Mr Okafor, 0161 496 0999: it was not J. PARK."}],
        filed_at=now(),
    )
    case_file = appeal_file(first_file, decided, appeal, with_evidence(first_file.case, appeal), [])
    appealed, panel = recorder(), Jury.from_settings(s, s.appeal_jurors)
    case_file = await appeal_clues(case_file, panel, appealed, s, NoPrecedents())
    while not is_settled(case_file, s):
        case_file = await round_stage(case_file, panel, appealed, s)
    second = await verdict_stage(case_file, appealed, s, panel)

    juror = next(c for c in appealed.calls if c.role == "juror").text()
    grounds = re.search(r'field="appeal_grounds"[^>]*>(.*?)</evidence>', juror)
    assert (
        grounds and grounds.group(1) == "Ring [PHONE_1] or [PHONE_2]; my neighbour [PHONE_3] saw Mr [PERSON_2] take it."
    )
    assert '<evidence id="n1"' in juror and "Note from Mr [PERSON_2], [PHONE_3]: it was not [PERSON_1]." in juror
    assert leaked([*request_texts(appealed), second.model_dump_json()]) == set()
    assert not any("Okafor" in t or "496 0999" in t for t in request_texts(appealed))
    assert second.minimisation and second.minimisation.masked["phone"].values == 3  # one new in the grounds


def test_the_offline_verifier_does_not_take_a_placeholder_for_a_cited_id():
    assert offline.untraceable("The buyer's [PHONE_1] was rung, as [b1] shows.", {"b1"}) == []
    assert offline.untraceable("Rung, as [b9] shows.", {"b1"}) == ["Rung, as [b9] shows."]


def test_prompts_explain_placeholders_only_for_a_case_that_shows_them():
    s = settings()
    plain = factories.case("plain")
    assert PLACEHOLDER_RULE not in prompts.metadata_block(seen(CaseFile(case=plain, received_at=now()), s).case)
    masked = seen(CaseFile(case=seeded(PAYMENT), received_at=now()), s).case
    assert PLACEHOLDER_RULE in prompts.metadata_block(masked)
    assert PLACEHOLDER_RULE not in prompts.JUROR_SYSTEM  # system prompts stay the same for every case: cached


async def test_no_seeded_value_reaches_the_model_through_the_letters():
    """The letters stage reads the case file as stored (unmasked), so it must mask it as the jury does."""
    recording = recorder()
    for template in SEEDED:
        case_file = CaseFile(case=seeded(template), received_at=now(), backend="offline")
        verdict = await judge(case_file.case, OfflineLLM(), settings())
        await write_letters(case_file, verdict, recording, settings())
    letters = [c for c in recording.calls if c.role == "letter"]
    assert len(letters) == 2 * len(SEEDED) and leaked(request_texts(recording)) == set()
    assert any("[PHONE_1]" in c.text() for c in letters)  # not vacuous: the letters quote the masked evidence


async def test_a_text_that_cannot_be_checked_is_withheld_and_the_case_still_judged(monkeypatch):
    """Issue 37 item 0: masking never fails a case. A detector that fails on one item's text (here made
    to) withholds that text from the jury, and the verdict says which and why."""
    from cyberjurors.evidence import privacy

    real = privacy.detect

    def failing(text, kinds, regions):  # type: ignore[no-untyped-def]
        if "courier" in text:
            raise ValueError("a detector failed")
        return real(text, kinds, regions)

    monkeypatch.setattr(privacy, "detect", failing)
    case = factories.case("withheld-1", buyer="Call me on +44 20 7946 0958.", seller="The courier left it.")
    llm = recorder()
    verdict = await judge(case, llm, settings())
    assert verdict.minimisation is not None and verdict.minimisation.withheld == ["s1"]
    assert any(p.startswith("s1: could not be checked for personal data") for p in verdict.problems)
    sent = "\n".join(request_texts(llm))
    assert "[WITHHELD]" in sent and "courier left" not in sent and "7946" not in sent
