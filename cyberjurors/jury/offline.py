"""The ``offline`` backend: a deterministic, labelled stand-in for a model. No network.

It answers every stage with schema-valid output computed from lexical cues in the evidence and
the juror's persona, so the pipeline, its plumbing and its costs can be exercised without a
provider. It cannot see pixels and has no judgement: every justification it writes says
"offline stand-in", and verdicts carry ``backend: offline``. Never read its votes as a model's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections import Counter, OrderedDict

from pydantic import BaseModel

from ..evidence.privacy import PLACEHOLDER_BODY
from ..evidence.safety import without_instructions
from ..llm.port import LLMError, LLMRequest, LLMResult, Part, T, TextPart
from ..precedents.distill import (
    DISPUTE_TYPES,
    OTHER,
    DistillTask,
    GuidelineDraft,
    GuidelineDrafts,
    case_dispute_type,
    party_statements,
)
from ..schemas import (
    PARTIES,
    ArgumentDraft,
    Ballot,
    BallotDraft,
    CandidateSentences,
    Clue,
    DisputeCase,
    Focus,
    JustificationDraft,
    Party,
    Perception,
    RoundSummaryDraft,
    Selection,
    SentenceVotes,
    Usage,
    VerificationDraft,
    Votes,
)
from .letters import allowed_sources, template_draft
from .model_inputs import (
    AdvocateTask,
    DraftTask,
    EditTask,
    FocusTask,
    JudgeTask,
    JurorTask,
    LetterTask,
    LetterVerifyTask,
    PerceiveTask,
    QualifyTask,
    ReviseTask,
    SelectTask,
    SentenceVoteTask,
    SummaryTask,
    VerifyTask,
)
from .verify import remove_claims, sentences

LABEL = "[offline stand-in]"
BUYER_CUES = (
    "broken",
    "damaged",
    "damage",
    "defect",
    "faulty",
    "crack",
    "cracked",
    "torn",
    "tear",
    "ripped",
    "missing",
    "not received",
    "never arrived",
    "never received",
    "wrong item",
    "not as described",
    "counterfeit",
    "fake",
    "expired",
    "mould",
    "mold",
    "rotten",
    "leak",
    "leaking",
    "stopped working",
    "dead",
    "2%",
    "dent",
    "shattered",
    "smashed",
    "before shipping",
    "already damaged",
    "different from the listing",
    "doesn't work",
    "does not work",
    # a few of the same cues in the sample cases' other languages (de, fr, es, it), so the stand-in
    # finds clues in a party's messages whatever language they wrote in
    *("kaputt", "beschädigt", "defekt", "kein paket", "nie angekommen", "nicht angekommen", "gesprungen"),
    *("cassé", "abîmé", "défectueux", "périmé", "rassis", "vieux", "jamais reçu", "jamais arrivé"),
    *("roto", "rota", "dañado", "defectuoso", "grieta", "agrietado", "pierde agua", "nunca llegó"),
    *("rotto", "danneggiato", "difettoso", "crepa", "mai arrivato", "non è arrivato"),
)
SELLER_CUES = (
    "delivered",
    "signed",
    "intact",
    "as described",
    "tested",
    "working",
    "worn",
    "used",
    "washed",
    "return window",
    "after the deadline",
    "policy",
    "misuse",
    "customer damage",
    "tag removed",
    "tags removed",
    "opened",
    "within specification",
    "sealed",
    "in good condition",
    "photo at dispatch",
    "proof of delivery",
    "no defect",
    *("zugestellt", "intakt", "verschlossen", "einwandfrei", "geröstet"),
    *("livré", "intact", "scellé", "en bon état"),
    *("entregado", "intacto", "en buen estado", "sellado"),
    *("consegnato", "prova di consegna", "intatto", "integro", "in buono stato"),
)
VISUAL_WEIGHT = {"low": 0.6, "medium": 1.0, "high": 1.5}
SELLER_EXPERIENCE_PRIOR = {"none": 0.15, "some": 0.0, "runs_shop": -0.35}
STRICTNESS_PRIOR = {"lenient": 0.2, "moderate": 0.0, "strict": -0.2}
_WORD = re.compile(r"[a-z0-9%]{3,}")
# a cited id: [b1], [g-12@2]; not "[offline stand-in]", nor a placeholder of personal data ([PHONE_1])
_BRACKETED = re.compile(rf"\[(?!{PLACEHOLDER_BODY}\])([A-Za-z0-9._:@-]+)\]")
_STOP = {"the", "and", "for", "with", "that", "this", "was", "are", "you", "have", "not", "but", "from", "had", "our"}


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _phrases(cues: tuple[str, ...]) -> re.Pattern[str]:
    # whole words only: "deadline" is not "dead", "refused" is not "used", "12%" is not "2%"
    return re.compile("|".join(rf"(?<![\w%]){re.escape(c)}(?![\w%])" for c in cues))


_BUYER, _SELLER = _phrases(BUYER_CUES), _phrases(SELLER_CUES)


def cues(text: str) -> tuple[int, int]:
    low = without_instructions(text).lower()
    return len(set(_BUYER.findall(low))), len(set(_SELLER.findall(low)))


def leaning(text: str) -> str:
    buyer, seller = cues(text)
    return "buyer" if buyer > seller else "seller" if seller > buyer else "neutral"


def jitter(*key: object) -> float:
    """A fixed pseudo-random number in [-1, 1) per (case, juror, round): jurors differ, runs repeat."""
    digest = hashlib.sha256(":".join(map(str, key)).encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**31 - 1


def first_sentence(text: str) -> str:
    clean = without_instructions(text).strip()
    return (re.split(r"(?<=[.!?])\s", clean, maxsplit=1)[0] if clean else "")[:200]


def read_everything(case: DisputeCase) -> list[Clue]:
    """Every item as a pseudo-clue with its lexical leaning: the stand-in's passive reading."""
    return [
        Clue(
            id=item.id,
            party=case.party_of(item.id),
            step=0,
            evidence_id=item.id,
            evidence_kind=item.kind,
            selection_reason="read with everything else",
            clue=(item.text or "")[:200],
            assessment="",
            leaning=leaning(item.text or ""),
        )
        for item in case.items()
    ]


def clue_ids(text: str) -> list[str]:
    return _BRACKETED.findall(text)


def known_ids(clues: list[Clue] | None, case: DisputeCase, guidelines: list) -> set[str]:
    """What a justification may cite: the clues (the evidence items, without stage II) and the
    guidelines the majority cited, by id or id@version."""
    sources = {c.id for c in clues} if clues is not None else {i.id for i in case.items()}
    return sources | {g.id for g in guidelines} | {g.ref for g in guidelines}


def untraceable(text: str, known: set[str]) -> list[str]:
    return [s for s in sentences(text) if not set(clue_ids(s)) <= known]


def unknown_ids(sentence: str, task: VerifyTask) -> list[str]:
    known = known_ids(task.clues, task.case, task.guidelines)
    return [i for i in clue_ids(sentence) if i not in known]


def labelled(text: str) -> str:
    """Every justification the stand-in writes starts with its label."""
    return text if text.startswith(LABEL) else f"{LABEL} {text}"


CACHED_PREFIXES_KEPT = 1024  # a few hundred cases in flight, each with a handful of shared prefixes


def unargued(vote: Party, justification: str) -> BallotDraft:
    """A labelled ballot that names no conflict: the mock case's and the judge's, who weigh no clues."""
    return BallotDraft(
        conflicts=[], buyer_conflicts=[], seller_conflicts=[], vote=vote, justification=f"{LABEL} {justification}"
    )


def _tokens(parts: list[Part]) -> int:
    return sum(len(p.text) // 4 if isinstance(p, TextPart) else 800 for p in parts)


class OfflineLLM:
    backend = "offline"
    model_label = "offline"  # whatever model was asked for, this answered (metrics label)

    def __init__(self, latency_s: float = 0.0, prompt_caching: bool = True):
        self.latency_s = latency_s
        self.prompt_caching = prompt_caching
        # the shared prefixes "in the provider's cache": the last few only, as a provider's cache
        # expires in minutes, so the set does not grow with every case a worker ever judged
        self._cached_prefixes: OrderedDict[str, None] = OrderedDict()

    async def generate(self, request: LLMRequest, output_type: type[T]) -> LLMResult[T]:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        answer = self._answer(request.task)
        if not isinstance(answer, output_type):
            raise LLMError(
                "unsupported_task",
                f"offline backend cannot answer {type(request.task).__name__} as {output_type.__name__}",
            )
        return LLMResult(
            answer, self._usage(request, answer), model="offline", backend=self.backend, finish_reason="stop"
        )  # the stand-in always answers whole

    def _answer(self, task: object) -> BaseModel:
        match task:
            case FocusTask(case=case):
                d = case.metadata
                claims = {
                    p: [s for _, i in case.texts(p) if (s := first_sentence(i.text or ""))][:4]
                    for p in ("buyer", "seller")
                }
                return Focus(
                    focus=f"Should the buyer get '{without_instructions(d.requested_remedy)}' for the "
                    f"{without_instructions(d.product)}? "
                    f"Dispute: {without_instructions(d.dispute_reason)}",
                    buyer_claims=claims["buyer"],
                    seller_claims=claims["seller"],
                )
            case SelectTask():
                return self._select(task)
            case PerceiveTask(item=item, frames=frames):
                text = without_instructions(item.text or "")
                if item.kind == "text":
                    clue = text[:280]
                else:
                    seen = f"{len(frames)} sampled frames" if frames else "the image"
                    clue = f"{LABEL} pixels not inspected ({seen}); the party's caption: {text[:240] or '(none)'}"
                lean = leaning(text)
                return Perception(
                    clue=clue, assessment=f"{LABEL} lexical cues in this item favour: {lean}.", leaning=lean, frames=[]
                )
            case JurorTask():
                return self._ballot(task)
            case QualifyTask():
                return self._mock_ballot(task)
            case AdvocateTask():
                return self._argue(task)
            case JudgeTask():
                return self._judge(task)
            case SummaryTask(round=round_no, ballots=ballots):
                return self._summary(round_no, ballots)
            case DistillTask():
                return self._distil(task)
            case VerifyTask() | ReviseTask() | DraftTask() | SentenceVoteTask() | EditTask():
                return self._justification(task)
            case LetterTask():
                return template_draft(task, LABEL)  # the fixed sentences, labelled: no model wrote them
            case LetterVerifyTask():
                return self._letter_check(task)
        raise LLMError("unsupported_task", f"offline backend has no answer for {type(task).__name__}")

    def _select(self, task: SelectTask) -> Selection:
        topic = words(" ".join([task.focus.focus, *task.focus.buyer_claims, *task.focus.seller_claims]))

        def score(item) -> float:
            text = item.text or ""
            return len(words(text) & topic) + 2 * sum(cues(text)) + (1.5 if item.kind != "text" else 0)

        best = max(task.candidates, key=lambda i: (score(i), i.id), default=None)
        if best is None or score(best) < 1:
            return Selection(evidence_id=None, reason=f"{LABEL} no remaining item shares words with the focus")
        return Selection(evidence_id=best.id, reason=f"{LABEL} highest lexical overlap with the focus and claims")

    def _ballot(self, task: JurorTask) -> BallotDraft:
        p = task.persona
        weight = lambda c: VISUAL_WEIGHT[p.visual_attention] if c.evidence_kind != "text" else 1.0  # noqa: E731
        sign = {"buyer": 1.0, "seller": -1.0, "neutral": 0.0}
        if task.clues is None:  # stage II off: every item read at once, and with less care
            clues = read_everything(task.case)
            evidence = math.tanh(sum(sign[c.leaning] * weight(c) for c in clues) / 4)
        else:
            clues = task.clues
            # squashed so that a pile of clues cannot drown persona and peers: real juries split
            evidence = math.tanh(sum(sign[c.leaning] * weight(c) for c in clues) / 2)
        prior = SELLER_EXPERIENCE_PRIOR[p.seller_experience] + STRICTNESS_PRIOR[p.rule_strictness]
        social = 0.0
        if task.neighbours:
            social += 0.8 * sum(sign[b.vote] for b in task.neighbours) / len(task.neighbours)
        if task.summary is not None:
            v = task.summary.votes
            social += 0.4 * (v.buyer - v.seller) / max(v.total, 1)
        # guidelines in memory that share words with the case pull toward the side they favour
        case_words = words(
            " ".join([task.focus.focus if task.focus else task.case.metadata.dispute_reason, *(c.clue for c in clues)])
        )
        relied = [g for g in task.memory if g.favours and len(words(g.text) & case_words) >= 2]
        # (every guideline relied on has a side: the test repeats the one above, for the type checker)
        precedent = sum(0.3 * (g.confidence or 0.5) * sign[g.favours] for g in relied if g.favours)
        score = evidence + prior + social + precedent + 0.7 * jitter(task.case.case_id, task.juror, task.round)
        vote = "buyer" if score > 0 else "seller"
        support = sorted((c for c in clues if c.leaning == vote), key=weight, reverse=True)[:2]
        against = [c for c in clues if c.leaning not in (vote, "neutral")]
        cite = " ".join(f"[{c.id}]" for c in support) or "no decisive clue"
        return BallotDraft(
            conflicts=[f"[{c.id}] supports the {c.leaning}" for c in against][:3],
            buyer_conflicts=[f"[{c.id}]" for c in clues if c.leaning == "seller"][:3],
            seller_conflicts=[f"[{c.id}]" for c in clues if c.leaning == "buyer"][:3],
            vote=vote,
            justification=f"{LABEL} {p.name} votes {vote}: lexical evidence score {evidence:+.1f}, "
            f"persona prior {prior:+.2f}, peers {social:+.2f}, guidelines {precedent:+.2f}; "
            f"relies on {cite}.",
            cited_clues=[c.id for c in support] if task.clues is not None else [],
            cited_guidelines=[g.id for g in relied if g.favours == vote],
        )

    def _mock_ballot(self, task: QualifyTask) -> BallotDraft:
        """A mock case alone, from its stored summary: each party statement's lexical leaning, the
        persona's prior and a fixed per-(case, persona) jitter, as a first-round ballot weighs them."""
        p = task.persona
        sign = {"buyer": 1.0, "seller": -1.0, "neutral": 0.0}
        said = [*party_statements(task.summary, "buyer"), *party_statements(task.summary, "seller")]
        evidence = math.tanh(sum(sign[leaning(s)] for s in said) / 2)
        prior = SELLER_EXPERIENCE_PRIOR[p.seller_experience] + STRICTNESS_PRIOR[p.rule_strictness]
        score = evidence + prior + 0.7 * jitter(task.case_id, p.name, "qualify")
        vote: Party = "buyer" if score > 0 else "seller"
        return unargued(
            vote,
            f"{p.name} votes {vote} on the mock case: lexical evidence score {evidence:+.1f}, "
            f"persona prior {prior:+.2f}.",
        )

    def _argue(self, task: AdvocateTask) -> ArgumentDraft:
        """Cites the items whose lexical cues favour its party; answers nothing, invents nothing."""
        mine = [c for c in read_everything(task.case) if c.leaning == task.party][:3]
        cited = " ".join(f"[{c.evidence_id}]" for c in mine) or "no item"
        return ArgumentDraft(
            statement=f"{LABEL} for the {task.party}, turn {task.turn}: the items whose wording "
            f"favours the {task.party} are {cited}.",
            cited_evidence=[c.evidence_id for c in mine],
        )

    def _judge(self, task: JudgeTask) -> BallotDraft:
        """Counts the evidence each advocate could cite; ties go by a fixed per-case coin."""
        cited = {
            p: len({e for a in task.debate if a.party == p for e in a.cited_evidence}) for p in ("buyer", "seller")
        }
        score = cited["buyer"] - cited["seller"] + 0.5 * jitter(task.case.case_id, "judge")
        vote: Party = "buyer" if score > 0 else "seller"
        return unargued(
            vote,
            f"the judge rules for the {vote}: the buyer's advocate cited "
            f"{cited['buyer']} items, the seller's {cited['seller']}.",
        )

    def _summary(self, round_no: int, ballots: list[Ballot]) -> RoundSummaryDraft:
        def side(party: str) -> str:
            return " ".join(f"[{c}]" for c in sorted({c for b in ballots if b.vote == party for c in b.cited_clues}))

        votes = Votes.of(ballots)
        return RoundSummaryDraft(
            summary=f"{LABEL} Round {round_no}: {votes.buyer} for the buyer, {votes.seller} for the seller. "
            f"Buyer side cites {side('buyer') or 'no clue'}; seller side cites {side('seller') or 'no clue'}.",
            buyer_arguments=side("buyer").split(),
            seller_arguments=side("seller").split(),
        )

    def _justification(self, task: object) -> BaseModel:
        """The verifier, the summariser's revision and JURIS, by labels alone: a sentence is
        traceable when every id it cites in brackets is a clue (an evidence item, without stage
        II) or a cited guideline of the case. Nothing here reads what a sentence claims."""
        match task:
            case VerifyTask():
                bad = untraceable(task.justification, known_ids(task.clues, task.case, task.guidelines))
                if not bad:
                    return VerificationDraft(decision="pass")
                named = ", ".join(dict.fromkeys(f"[{i}]" for s in bad for i in unknown_ids(s, task)))
                return VerificationDraft(
                    decision="reject",
                    untraceable_claims=bad,
                    feedback=f"{LABEL} the justification cites {named}, which no clue or "
                    "cited guideline of this case is: drop or correct those claims.",
                )
            case ReviseTask():
                kept, _, _ = remove_claims(task.justification, task.untraceable)
                return JustificationDraft(justification=labelled(kept or f"{LABEL} {task.winner} wins."))
            case DraftTask():
                return CandidateSentences(sentences=self._candidates(task)[: task.max_sentences])
            case SentenceVoteTask():
                known = known_ids(task.clues, task.case, [])
                return SentenceVotes(
                    accepted=[
                        sid
                        for sid, text in task.candidates.items()
                        if set(clue_ids(text)) <= known and jitter(task.case.case_id, task.juror, sid) > -0.6
                    ]
                )
            case EditTask():
                return JustificationDraft(
                    justification=labelled(" ".join(s.removeprefix(LABEL).strip() for s in task.selected.values()))
                )
        raise LLMError("unsupported_task", f"offline backend has no answer for {type(task).__name__}")

    @staticmethod
    def _letter_check(task: LetterVerifyTask) -> VerificationDraft:
        """The verifier on a letter, by labels alone, as on a justification: a statement passes when every
        id it cites is a source of the letter. Nothing here reads what a statement claims."""
        known = allowed_sources(task.letter)
        bad = [s.text for s in task.statements if not s.cites or not set(s.cites) <= known]
        if not bad:
            return VerificationDraft(decision="pass")
        return VerificationDraft(
            decision="reject",
            untraceable_claims=bad,
            feedback=f"{LABEL} these statements cite no source of this letter: drop them.",
        )

    @staticmethod
    def _candidates(task: DraftTask) -> list[str]:
        """Drafter A: one sentence per clue the majority cited, most cited first; drafter B: the
        vote, then the guidelines the majority cited and the clues it relied on."""
        cited = Counter(c for b in task.majority for c in b.cited_clues)
        clues = {c.id: c for c in task.clues or []}
        if task.drafter == 0:
            return [
                f"{LABEL} The {clues[c].party}'s {clues[c].evidence_kind} {clues[c].evidence_id} [{c}] supports "
                f"the {task.winner}: {first_sentence(clues[c].clue)[:120]}"
                for c, _ in cited.most_common()
                if c in clues
            ]
        said = [f"{LABEL} {getattr(task.votes, task.winner)} of {task.votes.total} jurors found for the {task.winner}."]
        said += [f"The majority relied on guideline [{g.id}]." for g in task.guidelines]
        if cited:
            said.append(f"The majority's reasons rest on {' '.join(f'[{c}]' for c in sorted(cited))}.")
        return said

    def _usage(self, request: LLMRequest, answer: BaseModel) -> Usage:
        """Token counts a provider would bill, estimated at 4 characters a token (800 an image),
        with the prompt cache as the Messages API keeps it: a breakpoint's prefix is everything up to
        it (system prompt included) under the request's model, output schema, effort and thinking,
        so two roles never read each other's prefix. The longest cached prefix is read, what follows
        it up to the last breakpoint written, the rest is input; a prefix is marked only where it can
        reach the model's minimum (``stage_request``)."""
        pieces: list[tuple[list[Part], bool]] = [
            ([TextPart(request.system)], request.cache_system),
            (request.shared, request.cache_prefix),
            (request.own, request.cache_own),
            (request.prompt, False),
        ]
        chain = hashlib.sha256(
            json.dumps([request.model, type(answer).__name__, request.effort, request.thinking]).encode()
        )
        ends: list[int] = []  # tokens up to the end of each piece
        marks: list[tuple[int, str]] = []  # (piece, key) of each breakpoint
        for index, (parts, marked) in enumerate(pieces):
            for part in parts:  # each part's length first: "ab" + "c" is not "a" + "bc"
                data = part.text.encode() if isinstance(part, TextPart) else part.data
                chain.update(len(data).to_bytes(8, "big") + data)
            ends.append((ends[-1] if ends else 0) + _tokens(parts))
            if marked and self.prompt_caching and parts:
                marks.append((index, chain.hexdigest()))
        hits = [index for index, key in marks if self._cached(key)]
        read = ends[hits[-1]] if hits else 0
        written = max(ends[marks[-1][0]] - read, 0) if marks else 0
        return Usage(
            input_tokens=ends[-1] - read - written,
            cache_read_tokens=read,
            cache_write_tokens=written,
            output_tokens=len(answer.model_dump_json()) // 4,
        )

    def _cached(self, key: str) -> bool:
        """Whether the prefix is "in the provider's cache"; it is from now on."""
        cached = key in self._cached_prefixes
        self._cached_prefixes[key] = None
        self._cached_prefixes.move_to_end(key)
        if len(self._cached_prefixes) > CACHED_PREFIXES_KEPT:
            self._cached_prefixes.popitem(last=False)
        return cached

    def _distil(self, task: DistillTask) -> GuidelineDrafts:
        """Counts, not judgement: the chunk's cases grouped by a lexical dispute type and by who won,
        one rule per group quoting the winning side's first claim; confidence grows with the share
        of similar cases won and with their number."""
        groups: dict[str, list] = {}
        for case in sorted(task.cases, key=lambda c: c.case_id):
            groups.setdefault(case_dispute_type(case), []).append(case)
        drafts = []
        for dtype in (*DISPUTE_TYPES, OTHER):
            similar = groups.get(dtype, [])
            for winner in PARTIES:
                won = [c for c in similar if c.winner == winner]
                if not won:
                    continue
                n, m = len(won), len(similar)
                drafts.append(
                    GuidelineDraft(
                        rule=f"{LABEL} In {task.category} disputes about {dtype.replace('_', ' ')}, the {winner} won "
                        f"{n} of {m} similar cases: {self._claim(won[0].summary, winner)}",
                        dispute_type=dtype,
                        favours=winner,
                        supporting_cases=[c.case_id for c in won],
                        confidence=round(n / m * n / (n + 1), 2),
                    )
                )
        return GuidelineDrafts(guidelines=drafts)

    @staticmethod
    def _claim(summary: str, party: Party) -> str:
        said = party_statements(summary, party)
        side = 0 if party == "buyer" else 1
        pointed = [s for s in said if cues(s)[side]] or said
        claim = first_sentence(pointed[0]).rstrip(" .!?") if pointed else ""
        return (claim[:160] or "no statement recorded") + "."
