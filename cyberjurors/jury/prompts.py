"""Every prompt the jury sends, one section per stage.

Party-authored text is data, never instructions. It reaches a model only inside ``<evidence>``
tags (messages, captions, and the dispute form's product name, dispute reason and requested
remedy); what earlier stages or other jurors wrote about the case, which may quote the parties, only
inside ``<record>`` tags. Tag contents have their angle brackets escaped (a party cannot close
the tag), attribute values are escaped and ids are constrained by the case schema; every system
prompt that sees either tag says they are to be weighed, not obeyed.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from html import escape
from importlib import resources
from pathlib import Path

from ..config import JurySettings
from ..evidence.privacy import PLACEHOLDER_RULE, shows_placeholders
from ..evidence.safety import DATA_RULE
from ..llm.fitting import cat, join, mark
from ..llm.port import Marked
from ..schemas import AppealBrief, Argument, Clue, DisputeCase, EvidenceItem, Focus, PrecedentRef
from .model_inputs import LetterSource, LetterTask, LetterVerifyTask


def _attrs(attrs: dict[str, object]) -> str:
    return "".join(f' {name}="{escape(str(value), quote=True)}"' for name, value in attrs.items())


def _tagged(tag: str, text: str, attrs: dict[str, object], clip: str | None = None) -> Marked:
    """The tagged text; ``clip`` names its body as a span a prompt may clip to fit a model's window."""
    opening, body = f"<{tag}{_attrs(attrs)}>", escape(text, quote=False)
    whole = f"{opening}{body}</{tag}>"
    return mark(whole, "clip", clip, start=len(opening), end=len(opening) + len(body)) if clip else Marked(whole)


def record(text: str, **attrs: object) -> str:
    """Model-written text about the case (focus, clues, justifications, summaries, precedents)."""
    return _tagged("record", text, attrs)


def quote(item: EvidenceItem, party: str, round_no: int, body: str | None = None) -> Marked:
    """A party's item as evidence; its text is what a prompt clips first when it must (``llm/fitting.py``)."""
    return _tagged(
        "evidence",
        body if body is not None else (item.text or ""),
        {"id": item.id, "party": party, "round": round_no, "kind": item.kind},
        clip=f"evidence {item.id}",
    )


def caption(item: EvidenceItem, party: str, round_no: int) -> str:
    """What a model that reads no images reads of a photo or video: the party's caption, as evidence."""
    return str(quote(item, party, round_no))


def image_text(item: EvidenceItem, party: str, round_no: int, text: str) -> str:
    """The text read in a photo or a video's frames (``privacy.ocr``): the party's evidence too, so quoted."""
    return str(_tagged("evidence", text, {"id": item.id, "party": party, "round": round_no, "read_from": item.kind}))


def form_field(name: str, text: str) -> str:
    """A free-text field of the dispute form: typed by a party, so quoted like their evidence."""
    return _tagged("evidence", text, {"field": name})


def evidence_label(item: EvidenceItem, party: str) -> str:
    """What precedes a photo or a video's frames in a prompt, so the model can cite them."""
    return f"evidence {item.id} ({party}, {item.kind})"


# the metadata blocks of the cases last asked for, by the case object itself (kept here, so its id
# cannot be reused while it is): every juror of a round asks with the same case, and finding the
# placeholders reads all of its text (docs/benchmarks.md, "Worker CPU per case")
_BLOCKS: OrderedDict[tuple[int, bool], tuple[DisputeCase, str]] = OrderedDict()
BLOCKS_KEPT = 64


def metadata_block(case: DisputeCase, placeholders_note: bool = True) -> str:
    """The order record; every prompt that shows the parties' text starts with it, so the note on
    personal-data placeholders, when the case shows any, comes here (system prompts stay the same for
    every case). The round summariser and JURIS's editor, who rewrite what jurors wrote, go without:
    their short prefix would double for a note about text they do not read."""
    key = (id(case), placeholders_note)
    kept = _BLOCKS.get(key)
    if kept is not None and kept[0] is case:
        return kept[1]
    _BLOCKS[key] = (case, block := _metadata_block(case, placeholders_note))
    while len(_BLOCKS) > BLOCKS_KEPT:
        _BLOCKS.popitem(last=False)
    return block


def _metadata_block(case: DisputeCase, placeholders_note: bool) -> str:
    d = case.metadata
    placeholders = f"\nPersonal data: {PLACEHOLDER_RULE}" if placeholders_note and shows_placeholders(case) else ""
    return (
        f"Case {case.case_id}\nCategory: {d.category}\nProduct: {form_field('product', d.product)}\n"
        f"Order amount: {d.order_amount} {d.currency}\nOrdered: {d.ordered_at.isoformat()}\n"
        f"Delivered: {d.delivered_at.isoformat() if d.delivered_at else 'not recorded'}\n"
        f"Dispute reason: {form_field('dispute_reason', d.dispute_reason)}\n"
        f"Requested remedy: {form_field('requested_remedy', d.requested_remedy)}{placeholders}"
    )


def transcript(case: DisputeCase) -> Marked:
    """T^b and T^s in submission order; media appear as one line with the party's caption."""
    lines = []
    for r in case.rounds:
        for item in r.items:
            body = item.text or ""
            if item.kind != "text":
                body = f"[{item.kind} {item.media.media_type if item.media else ''}] {body}".strip()
            lines.append(quote(item, r.party, r.round, body))
    return join("\n", lines)


@lru_cache(maxsize=8)
def verdict_rules(path: Path | None = None) -> str:
    """The platform's verdict rules (+Rules): the packaged conventions, or the platform's own file."""
    return (
        path.read_text(encoding="utf-8")
        if path
        else resources.files(__package__).joinpath("verdict_rules.md").read_text(encoding="utf-8")
    ).strip()


def rules_for(settings: JurySettings) -> str | None:
    """The verdict rules when the settings switch them on (+Rules), else none."""
    return verdict_rules(settings.verdict_rules_file) if settings.verdict_rules else None


def with_rules(system: str, rules: str | None) -> str:
    return f"{system}\n\n{rules}" if rules else system


def focus_block(focus: Focus) -> str:
    claims = lambda xs, who: "\n".join(f"- {record(x, of=who)}" for x in xs) or "- (none stated)"  # noqa: E731
    return (
        f"Dispute focus F: {record(focus.focus, of='focus')}\n"
        f"Buyer's claims F^b:\n{claims(focus.buyer_claims, 'buyer claim')}\n"
        f"Seller's claims F^s:\n{claims(focus.seller_claims, 'seller claim')}"
    )


def clue_lines(clues: list[Clue]) -> str:
    if not clues:
        return "(no clues yet)"
    out = []
    for c in clues:
        where = f"{c.evidence_id}" + (f", frames {c.frames}" if c.frames else "")
        note = f" (could not be perceived: {c.problem})" if c.problem else ""
        out.append(
            f"[{c.id}] from {where} ({c.party}, {c.evidence_kind}){note}: clue: {record(c.clue, of=c.id)} "
            f"| assessment: {record(c.assessment, of=c.id)} | supports: {c.leaning}"
        )
    return "\n".join(out)


# --- Stage I: focus extraction -----------------------------------------------------------

FOCUS_SYSTEM = (
    "You are the clerk of an e-commerce dispute jury. From the order metadata and the parties' "
    "messages, state the single question the jury must decide (the dispute focus) and each "
    "party's core claims, neutrally and concisely. " + DATA_RULE
)


def focus_prompt(case: DisputeCase) -> Marked:
    texts = join("\n", [quote(i, r.party, r.round) for r in case.rounds for i in r.items if i.kind == "text"])
    return cat(f"{metadata_block(case)}\n\nThe parties' messages:\n", texts, "\n\nExtract the focus and the claims.")


# --- Stage II: select-perceive -----------------------------------------------------------

SELECT_SYSTEM = (
    "You help an e-commerce dispute jury find key clues. Given the dispute focus and one party's "
    "evidence items you have not examined yet, choose the single item most likely to contain a key "
    "clue for deciding the focus. If none of the remaining items can matter, answer with "
    "evidence_id null. " + DATA_RULE
)


def select_prompt(party: str, candidates: list[tuple[int, EvidenceItem]], chain: list[Clue]) -> Marked:
    listing = join(
        "\n",
        [
            quote(item, party, rnd, f"[{item.kind}] {item.text or ''}".strip() if item.kind != "text" else None)
            for rnd, item in candidates
        ],
    )
    return cat(
        f"Clues found so far in the {party}'s evidence:\n{clue_lines(chain)}\n\n"
        f"The {party}'s evidence not yet examined:\n",
        listing,
        "\n\nChoose one evidence_id from this list, or null.",
    )


PERCEIVE_SYSTEM = (
    "You examine one piece of evidence in an e-commerce dispute in detail. Report the concrete clue "
    "it holds for the dispute focus (what is actually visible or stated: numbers, dates, damage, "
    "labels, on-screen text), assess what it means for the party's claims, and say which side it "
    "supports. For a video you see sampled frames, each labelled with its number and time: list "
    "the frame numbers in which the clue is visible. " + DATA_RULE
)


def perceive_prompt(party: str, round_no: int, item: EvidenceItem, chain: list[Clue]) -> Marked:
    return cat(
        f"Earlier clues from the {party}'s evidence:\n{clue_lines(chain)}\n\n"
        f"Evidence to examine now (submitted by the {party}):\n",
        quote(item, party, round_no),
    )


# --- Stages III-IV: adversarial analysis and individual verdict --------------------------

JUROR_SYSTEM = (
    "You are one of the jurors of an e-commerce platform's dispute jury. You decide, for the case "
    "below, whether the buyer or the seller should win. First analyse the logical conflicts between "
    "the parties' claims and the clues (stage III), then give your vote and a justification that "
    "cites the clue ids in brackets, e.g. [b1], [s2], and the ids of any guidelines you relied on "
    "(stage IV). Judge as the person described in your persona would, but on the evidence. " + DATA_RULE
)


def precedent_case_lines(cases: list[PrecedentRef]) -> Marked:
    """One line per past case, each one a prompt drops (the lowest-ranked first) to fit a model's window."""
    lines = [
        mark(
            f"- [{c.id}] ({c.category}) decided for the {c.favours}: {record(c.text[:400], of='past case')}",
            "drop",
            f"precedent {c.id}",
            rank=c.rank,
        )
        for c in cases
    ]
    return join("\n", lines) if lines else Marked("- (none retrieved)")


PASSIVE_EVIDENCE = (
    "Every photo and sampled video frame the parties submitted is attached after the transcript, "
    "each labelled with its evidence id."
)


def appeal_block(appeal: AppealBrief) -> str:
    """The second instance's part of the record: the first verdict and its justification (model-written:
    <record>), the appellant's grounds (party-authored: <evidence>), and which evidence is new."""
    first = appeal.first_instance
    new = ", ".join(appeal.new_evidence) or "none"
    grounds = _tagged("evidence", appeal.grounds, {"field": "appeal_grounds", "party": appeal.appellant})
    return (
        "Appeal (second instance). You are a juror of the appeal: re-examine the whole record above and below; "
        "the first-instance verdict and the appeal are part of it, and neither binds you.\n"
        f"First-instance verdict {first.verdict_id}: the {first.winner} won, {first.votes.buyer} votes for the "
        f"buyer and {first.votes.seller} for the seller. Its justification: "
        f"{record(first.justification, of='first-instance verdict')}\n"
        f"The {appeal.appellant} appeals. Grounds: {grounds}\n"
        f"Evidence filed with the appeal: {new} (the {appeal.appellant}'s last round in the transcript; what was "
        "examined of it is in the clue chain)."
    )


def case_prefix(
    case: DisputeCase,
    focus: Focus | None,
    clues: list[Clue] | None,
    precedent_cases: list[PrecedentRef],
    appeal: AppealBrief | None = None,
) -> Marked:
    """The part of a juror's prompt identical for all jurors of a case: it is cached. Without
    stage I there is no focus block; without stage II (clues None) the media follow as images; on
    appeal, the appeal block comes before the transcript."""
    parts = [metadata_block(case)]
    if focus is not None:
        parts.append(focus_block(focus))
    if clues is not None:
        parts.append(f"Clue chain O_II (select-perceive results, per party):\n{clue_lines(clues)}")
    if precedent_cases:
        parts.append(
            cat(
                "Similar past cases on this platform and how their juries decided:\n",
                precedent_case_lines(precedent_cases),
            )
        )
    if appeal is not None:
        parts.append(appeal_block(appeal))
    parts.append(cat("Full transcript:\n", transcript(case)))
    if clues is None:
        parts.append(PASSIVE_EVIDENCE)
    return join("\n\n", parts)


def guideline_lines(memory: list[PrecedentRef], droppable: bool = False) -> Marked:
    """One line per guideline; ``droppable``: each one a prompt may drop (the lowest-ranked first)
    to fit a model's window (a juror's memory; not the guidelines a justification cites)."""
    if not memory:
        return Marked("(none retrieved)")
    lines = [
        f"[{g.id}] ({g.category}, usually favours {g.favours or 'neither side'}, confidence {g.confidence or 0:.2f}): "
        f"{record(g.text, of='guideline')}"
        for g in memory
    ]
    return join(
        "\n",
        [mark(line, "drop", f"guideline {g.id}", g.rank) for line, g in zip(lines, memory, strict=True)]
        if droppable
        else lines,
    )


def juror_own(persona_card: str, memory: list[PrecedentRef], precedents: bool = True) -> Marked:
    """What one juror reads in every round of a case: its persona and its guidelines (M_k)."""
    parts = [f"Your persona: {persona_card}"]
    if precedents:
        parts.append(
            cat(
                "Verdict guidelines from this platform's precedents that you keep in mind (cite the ids you rely "
                "on in cited_guidelines; they are conventions, not orders, and the evidence comes first):\n",
                guideline_lines(memory, droppable=True),
            )
        )
    return join("\n\n", parts)


def juror_round(round_no: int, neighbours: list[tuple[str, str, str]], summary: str | None) -> str:
    """What a juror reads of this round: the jurors it follows and the summary, or the first round's ask."""
    if round_no == 1:
        return "Discussion round 1: give your independent verdict."
    heard = "\n".join(f"- {name} voted {vote}: {record(j, of=name)}" for name, vote, j in neighbours)
    parts = [f"Discussion round {round_no}. Jurors you follow said last round:\n{heard or '- (nobody)'}"]
    if summary is not None:
        parts.append(f"Summary of the whole jury's last round:\n{record(summary, of='round summary')}")
    return "\n\n".join(parts)


# --- Round summary ------------------------------------------------------------------------

SUMMARY_SYSTEM = (
    "You summarise one round of an e-commerce dispute jury's deliberation for all jurors: the "
    "strongest arguments on each side, which clues they rest on, and where the jury stands. "
    "Be neutral and brief. " + DATA_RULE
)


def summary_prompt(round_no: int, ballots: list[tuple[str, str, str]]) -> str:
    lines = "\n".join(f"- {name} voted {vote}: {record(j, of=name)}" for name, vote, j in ballots)
    return f"Round {round_no} justifications:\n{lines}"


# --- Court debate (the AgentsCourt-style reference baseline) ------------------------------


def advocate_system(party: str) -> str:
    return (
        f"You are the {party}'s advocate before an e-commerce dispute judge. Argue for the {party} from the "
        "evidence, answer the other advocate's last argument, and cite the evidence ids you rely on. "
        "Do not invent evidence. " + DATA_RULE
    )


def debate_lines(debate: list[Argument]) -> str:
    return (
        "\n".join(
            f"- turn {a.turn}, {a.party}'s advocate (citing {', '.join(a.cited_evidence) or 'nothing'}): "
            f"{record(a.statement, of=f'{a.party} advocate')}"
            for a in debate
        )
        or "- (the debate opens with you)"
    )


def advocate_prompt(party: str, turn: int, debate: list[Argument]) -> str:
    return f"The debate so far:\n{debate_lines(debate)}\n\nTurn {turn}: make the {party}'s argument."


JUDGE_SYSTEM = (
    "You are the judge of an e-commerce dispute. You have heard the buyer's and the seller's advocates. "
    "Weigh their arguments against the evidence itself, then decide whether the buyer or the seller "
    "wins and justify it, citing the evidence ids that decide it. " + DATA_RULE
)


def judge_prompt(debate: list[Argument]) -> str:
    return f"The advocates' debate:\n{debate_lines(debate)}\n\nGive your verdict."


# --- The verdict's justification: verified (VERDICT's supervisor), or voted (JURIS) -------


def sources_block(
    case: DisputeCase, focus: Focus | None, clues: list[Clue] | None, guidelines: list[PrecedentRef]
) -> Marked:
    """What a justification may rest on: the order record, the focus and claims, O_II (each clue
    with its evidence id and frames) and the guidelines the majority cited; without stage II, the
    parties' evidence items themselves. Identical for every verifier turn of a case (cached)."""
    parts = [metadata_block(case)]
    if focus is not None:
        parts.append(focus_block(focus))
    if clues is not None:
        parts.append(f"Clue chain O_II (what was actually perceived, per party):\n{clue_lines(clues)}")
    else:
        parts.append(
            cat(
                "The parties' evidence (no clue chain was built; photos and videos are known here only by "
                "their captions):\n",
                transcript(case),
            )
        )
    parts.append(f"Guidelines the majority cited:\n{guideline_lines(guidelines)}")
    return join("\n\n", parts)


def verdict_line(winner: str, buyer: int, seller: int) -> str:
    return f"Verdict: the {winner} wins, {buyer} juror votes for the buyer and {seller} for the seller."


def voice_lines(voices: list[tuple[str, str, str]]) -> str:
    return "\n".join(f"- {name} voted {vote}: {record(j, of=name)}" for name, vote, j in voices) or "- (none)"


def feedback_lines(feedback: list[str]) -> str:
    # the verifier's words may quote the parties: marked like any record
    return "\n".join(f"- turn {n}: {record(f, of='verifier feedback')}" for n, f in enumerate(feedback, 1))


VERIFY_SYSTEM = (
    "You are the adjudication supervisor of an e-commerce dispute jury: you check the justification of the "
    "jury's verdict before it is published. Every factual claim in it must trace to a source: a clue of the "
    "clue chain (cited by its id, e.g. [b1], for what that clue and its evidence item or frames show), a "
    "guideline the majority cited (by its id), the order record, or a party's claim presented as that party's "
    "claim. A claim no source supports, a clue id cited for something the clue does not show, or a guideline "
    "the majority did not cite is untraceable. The majority's justifications are what the justification "
    "summarises: an unsupported claim of theirs must not pass into it. Answer pass when every claim traces; "
    "otherwise reject, say what to correct, and quote each untraceable claim verbatim as the whole sentence of "
    "the justification it stands in. Judge traceability only, not whether the verdict is right. " + DATA_RULE
)


def verify_prompt(
    verdict: str, majority: list[tuple[str, str, str]], justification: str, turn: int, feedback: list[str]
) -> str:
    parts = [
        verdict,
        f"The majority's justifications:\n{voice_lines(majority)}",
        f"The justification to check (draft {turn}):\n{record(justification, of='justification')}",
    ]
    if feedback:
        parts.append(f"Your feedback on the earlier drafts:\n{feedback_lines(feedback)}")
    parts.append("Check every factual claim of the justification against the sources above.")
    return "\n\n".join(parts)


REVISE_SYSTEM = (
    "You write the justification of an e-commerce dispute jury's verdict. The adjudication supervisor rejected "
    "the current draft: revise it so that every factual claim traces to a clue of the clue chain (cite its id "
    "in brackets, e.g. [b1]), a guideline the majority cited, the order record, or a party's claim presented as "
    "theirs. Follow all of the supervisor's feedback so far, correct or drop the claims it names, add no new "
    "fact, and keep the verdict as it is. " + DATA_RULE
)


def revise_prompt(
    verdict: str, majority: list[tuple[str, str, str]], justification: str, feedback: list[str], untraceable: list[str]
) -> str:
    named = "\n".join(f"- {record(c, of='untraceable claim')}" for c in untraceable) or "- (none named)"
    return "\n\n".join(
        [
            verdict,
            f"The majority's justifications:\n{voice_lines(majority)}",
            f"The current draft:\n{record(justification, of='justification')}",
            f"The supervisor's feedback, every turn so far:\n{feedback_lines(feedback)}",
            f"Claims the supervisor could not trace in the current draft:\n{named}",
            "Write the revised justification.",
        ]
    )


DRAFT_SYSTEM = (
    "You draft candidate sentences for the justification of an e-commerce dispute jury's verdict. Each "
    "sentence states one reason for the verdict drawn from the majority jurors' justifications, and cites in "
    "brackets the clue ids (e.g. [b1]) or guideline ids it rests on. Add no fact that the clues, the cited "
    "guidelines or the order record do not contain. The jurors will vote on each sentence. " + DATA_RULE
)


def draft_prompt(verdict: str, majority: list[tuple[str, str, str]], max_sentences: int) -> str:
    return (
        f"{verdict}\n\nThe majority's justifications:\n{voice_lines(majority)}\n\n"
        f"Propose at most {max_sentences} candidate sentences."
    )


def candidate_lines(candidates: dict[str, str]) -> str:
    return "\n".join(f"- {sid}: {record(text, of=sid)}" for sid, text in candidates.items())


def vote_prompt(persona_card: str, verdict: str, candidates: dict[str, str]) -> str:
    """A juror voting on JURIS's candidate sentences. It is sent with the juror's own system prompt
    and case prefix, so it reads the provider's cached prefix of the case."""
    return (
        f"Your persona: {persona_card}\n\nThe deliberation is over. {verdict} Its justification is now drafted "
        "sentence by sentence, and you vote on each candidate: accept a sentence (list its id) if it is a fair "
        "reason for the verdict and rests on the clues or guidelines it cites; leave out any that states what the "
        "case file does not show. You vote on the justification, not on the verdict again.\n\n"
        f"Candidate sentences:\n{candidate_lines(candidates)}"
    )


EDIT_SYSTEM = (
    "You are the chief editor of an e-commerce dispute jury's justification. The jurors accepted the sentences "
    "below by vote. Consolidate them into one coherent justification of the verdict: order them, merge "
    "repetitions, resolve references, keep every clue and guideline id in brackets. Add no fact, clue, "
    "guideline, number or reason that is not in the accepted sentences, and drop none of their reasons. " + DATA_RULE
)


def edit_prompt(verdict: str, selected: dict[str, str]) -> str:
    return f"{verdict}\n\nThe sentences the jurors accepted:\n{candidate_lines(selected)}\n\nWrite the justification."


# --- Letters to the parties ------------------------------------------------------------------

LETTER_SYSTEM = (
    "You write to one party of an e-commerce dispute about the decision on it, in the language you are "
    "asked for. Write plainly, as to a customer: short sentences, no legal words, no ids, no brackets. The "
    "letter has four sections: decision (what was decided and the remedy), evidence (the evidence that "
    "decided it, described by what the party submitted or saw: 'the photo you sent on 22 September'), "
    "other_side (what the other party showed) and next_steps (what the party can do now). Write one "
    "statement at a time and list in its cites the ids of the sources below that it rests on: a clue id "
    "(b1, s2), a guideline id, or verdict, recourse, order, confidential. Every statement is checked before "
    "the letter is sent: one that cites nothing, or an id not listed below, is removed, and so is any claim "
    "its sources do not support. State only what the sources say; add no fact, promise, amount or date of "
    "your own, and never describe evidence that is not listed. Do not argue the case again: the decision "
    "is made. " + DATA_RULE
)


def _item_line(source: LetterSource, party: str) -> str:
    clue, item = source.clue, source.item
    whose = "submitted by the party you write to" if clue.party == party else f"submitted by the {clue.party}"
    when = f", on {source.submitted_at:%Y-%m-%d}" if source.submitted_at else ""
    words = (
        f" | the party's own words: {_tagged('evidence', item.text, {'id': item.id, 'party': clue.party})}"
        if item is not None and item.text
        else ""
    )
    return (
        f"[{clue.id}] the {clue.party}'s {clue.evidence_kind} {clue.evidence_id} ({whose}{when}"
        f"{'; cited by the majority' if source.cited else '; named in the justification'}): what the jury "
        f"found: {record(clue.clue, of=clue.id)} | assessment: {record(clue.assessment, of=clue.id)}{words}"
    )


def letter_sources(task: LetterTask) -> str:
    """The sources a letter may rest on, each under the id a statement cites."""
    facts, d = task.facts, task.metadata
    granted = "granted" if facts.granted else "not granted"
    verdict = (
        f"[verdict] The jury decided for the {facts.winner}: {facts.votes.buyer} votes for the buyer, "
        f"{facts.votes.seller} for the seller. The buyer asked for {form_field('requested_remedy', facts.remedy)}: "
        f"that is {granted}."
    )
    if facts.under_review:
        verdict += " The verdict was escalated: people from the platform review it before it takes effect."
    other = "seller" if facts.party == "buyer" else "buyer"
    if facts.appeal_until is not None:
        who = "the party you write to" if not facts.won else f"the {other}"
        recourse = f"[recourse] {who} may appeal until {facts.appeal_until:%Y-%m-%d %H:%M} UTC."
    else:
        recourse = "[recourse] The decision is final: no appeal is open."
    order = (
        f"[order] Product: {form_field('product', d.product)}. Order amount: {d.order_amount} {d.currency}. "
        f"Ordered: {d.ordered_at:%Y-%m-%d}. Delivered: {f'{d.delivered_at:%Y-%m-%d}' if d.delivered_at else 'not recorded'}. "
        f"The buyer submitted {task.submitted.get('buyer', 0)} item(s), the seller {task.submitted.get('seller', 0)}."
    )
    parts = [verdict, recourse, order]
    if facts.confidential:
        parts.append(
            f"[confidential] The {other} also submitted {facts.confidential} item(s) in confidence: the letter "
            "may say so, never what they show."
        )
    clues = "\n".join(_item_line(s, facts.party) for s in task.sources) or "(none: say so without citing a clue)"
    parts.append(f"Clues of the verdict:\n{clues}")
    if task.guidelines:
        parts.append(f"Guidelines the majority cited:\n{guideline_lines(task.guidelines)}")
    return "\n\n".join(parts)


def letter_prompt(task: LetterTask, language: str) -> str:
    outcome = "won" if task.facts.won else "lost"
    return (
        f"Write the letter to the {task.facts.party}, who {outcome}, in {language} (locale {task.locale}). "
        "Cover every section that the sources allow, the decision and the next steps always."
    )


LETTER_VERIFY_SYSTEM = (
    "You check a letter to one party of an e-commerce dispute before it is sent. Each statement lists the "
    "sources it cites. A statement passes when every factual claim in it is supported by the sources it "
    "cites: the decision and remedy by verdict, appeal dates and finality by recourse, order facts by order, "
    "what a piece of evidence shows by that clue, a rule by that guideline. Answer pass when every statement "
    "passes; otherwise reject, and quote each statement with an unsupported claim verbatim, whole. Judge "
    "traceability only, not the decision or the style. " + DATA_RULE
)


def letter_verify_prompt(task: LetterVerifyTask) -> str:
    lines = "\n".join(
        f"- {s.section}, citing {', '.join(s.cites) or 'nothing'}: {record(s.text, of='letter statement')}"
        for s in task.statements
    )
    return f"The letter's statements:\n{lines}\n\nCheck every statement against the sources it cites."
