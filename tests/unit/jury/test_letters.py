"""Letters to the parties, in one process: every sample case's verdict gets a letter to each party in
that party's language (the offline stand-in's template and a scripted model's), the check removes an
uncited, dangling or withheld claim (and, with the verifier on, an untraceable one), a language letters
cannot be written in falls back to the default with a note, a party with no messages still gets a
letter, and the other party's private evidence is not disclosed beyond letter_private_evidence. The
letters stage on the streams: tests/unit/streams/test_letters.py."""

from __future__ import annotations

import functools
from datetime import timedelta
from pathlib import Path

import pytest

from cyberjurors.jury.letters import letter_id, prepare, write_letter, write_letters
from cyberjurors.jury.locales import detect
from cyberjurors.jury.model_inputs import LetterTask, LetterVerifyTask
from cyberjurors.jury.offline import LABEL, OfflineLLM
from cyberjurors.jury.stages import judge
from cyberjurors.llm.backends.scripted import ScriptedLLM
from cyberjurors.llm.port import LLMRequest
from cyberjurors.schemas import (
    CaseFile,
    Clue,
    DisputeCase,
    LetterDraft,
    LetterStatement,
    PartyLetter,
    Verdict,
    VerificationDraft,
    now,
)

from ... import factories
from ...conftest import EXAMPLES

settings = functools.partial(factories.settings, media_root=EXAMPLES)
SAMPLES = sorted((EXAMPLES / "cases").glob("*.json"))
# each sample case's parties' languages, as the case file says or (othr-003's buyer) as they write
LANGUAGES = {
    "appl-004-kettle-leak-es-en": ("es", "en"),
    "food-003-coffee-roast-date-fr-de": ("fr", "de"),
    "othr-003-lamp-not-received-de-it": ("de", "it"),
}
# a word each language's fixed decision sentence has and no other's
JURY_WORD = {"en": "jurors", "de": "Geschworenen", "fr": "jurés", "es": "miembros del jurado", "it": "giurati"}
PRIVATE_WORDS = ("Röstprotokoll", "0928-B", "Einkaufspreisen")  # food-003's seller's private item s2-2


def load(path: Path) -> DisputeCase:
    return DisputeCase.model_validate_json(path.read_text())


def record(case: DisputeCase) -> CaseFile:
    return CaseFile(case=case, received_at=now(), backend="offline")


async def decided(case: DisputeCase) -> Verdict:
    return await judge(case, OfflineLLM(), settings())


def with_private_clue(verdict: Verdict) -> Verdict:
    """food-003's verdict with its majority citing the seller's private batch record (s2-2)."""
    clue = Clue(
        id="s9",
        party="seller",
        step=9,
        evidence_id="s2-2",
        evidence_kind="text",
        selection_reason="the batch record",
        clue="The roaster's batch record 0928-B: 412 bags roasted, no other complaint.",
        assessment="the beans were fresh",
        leaning="seller",
    )
    return verdict.model_copy(update={"cited_clues": [*verdict.cited_clues, clue]})


def letter_text(letter: PartyLetter) -> str:
    return f"{letter.subject}\n{letter.body}\n{letter.model_dump_json()}"


# --- every sample case, both parties, both backends --------------------------------------------


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
async def test_every_sample_case_gets_a_letter_to_each_party_in_their_language(path: Path):
    case = load(path)
    verdict = await decided(case)
    buyer, seller = await write_letters(record(case), verdict, OfflineLLM(), settings())
    languages = LANGUAGES.get(path.stem, ("en", "en"))
    for letter, party, language in zip((buyer, seller), ("buyer", "seller"), languages, strict=True):
        assert (letter.party, letter.locale, letter.case_id, letter.verdict_id) == (
            party,
            language,
            case.case_id,
            verdict.verdict_id,
        )
        decision = [s for s in letter.statements if s.section == "decision"]
        assert JURY_WORD[language] in decision[0].text
        assert detect(s.text for s in decision) == language
        assert letter.outcome == ("won" if verdict.winner == party else "lost")
        assert letter.subject.startswith(LABEL) and LABEL in letter.body  # the stand-in says what it is
        assert (letter.backend, letter.check.status, letter.check.removed) == ("offline", "passed", [])
        assert {s.section for s in letter.statements} >= {"decision", "next_steps"}
        assert letter.letter_id == letter_id(verdict.verdict_id, party)
    assert buyer.letter_id != seller.letter_id


def scripted_letter(request: LLMRequest, output_type: type) -> LetterDraft:
    """A model that writes each letter in the language it is asked for, citing what it may."""
    task = request.task
    assert isinstance(task, LetterTask)
    clue = [s.clue.id for s in task.sources][:1]
    return LetterDraft(
        subject=f"({task.locale}) decision",
        statements=[
            LetterStatement(
                section="decision", text=f"({task.locale}) decided for the {task.facts.winner}", cites=["verdict"]
            ),
            *[LetterStatement(section="evidence", text=f"({task.locale}) the evidence [{c}]") for c in clue],
            LetterStatement(section="next_steps", text=f"({task.locale}) what comes next", cites=["recourse"]),
        ],
    )


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
async def test_a_scripted_model_is_asked_for_each_partys_language_and_its_letter_sent_checked(path: Path):
    case = load(path)
    verdict = await decided(case)
    llm = ScriptedLLM(scripted_letter)
    letters = await write_letters(record(case), verdict, llm, settings())
    languages = LANGUAGES.get(path.stem, ("en", "en"))
    names = {"en": "English", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian"}
    assert llm.roles() == ["letter", "letter"]
    for request, letter, language in zip(llm.calls, letters, languages, strict=True):
        assert f"in {names[language]} (locale {language})" in request.text()
        assert letter.locale == language and letter.backend == "scripted" and letter.check.status == "passed"
        assert letter.body.startswith(f"({language}) decided for the {verdict.winner}")
        # a clue id the model wrote in brackets counts as cited, and is taken out of the text the party reads
        assert "[" not in letter.body and all(s.cites for s in letter.statements)


# --- the check ------------------------------------------------------------------------------------


def injected(*extra: LetterStatement):
    """A model that writes the stand-in's letter plus ``extra`` statements."""

    def answer(request: LLMRequest, output_type: type) -> LetterDraft | VerificationDraft:
        if isinstance(request.task, LetterVerifyTask):
            return VerificationDraft(decision="pass")
        draft = OfflineLLM()._answer(request.task)
        assert isinstance(draft, LetterDraft)
        return draft.model_copy(update={"statements": [*draft.statements, *extra]})

    return answer


UNCITED = LetterStatement(section="evidence", text="The seller admitted the kettle broke in the warehouse.", cites=[])
DANGLING = LetterStatement(section="other_side", text="The seller's courier confirmed the damage.", cites=["s77"])


async def test_an_uncited_or_dangling_claim_injected_into_a_draft_is_removed_and_listed():
    case = factories.example_case("appl-001-kettle-crack")
    verdict = await decided(case)
    letter = await write_letter(record(case), verdict, "buyer", ScriptedLLM(injected(UNCITED, DANGLING)), settings())
    assert UNCITED.text not in letter.body and DANGLING.text not in letter.body
    assert [(r.text, r.reason) for r in letter.check.removed] == [
        (UNCITED.text, "uncited"),
        (DANGLING.text, "dangling"),
    ]
    assert (letter.check.status, letter.check.checked_by) == ("corrected", "ids")
    assert all(s.cites for s in letter.statements)


async def test_a_claim_written_with_a_bracketed_id_counts_as_cited_and_is_checked_too():
    bracketed = LetterStatement(section="evidence", text="Your photo shows the crack [b77].", cites=[])
    case = factories.example_case("appl-001-kettle-crack")
    letter = await write_letter(
        record(case), await decided(case), "buyer", ScriptedLLM(injected(bracketed)), settings()
    )
    assert [(r.text, r.cites, r.reason) for r in letter.check.removed] == [
        ("Your photo shows the crack.", ["b77"], "dangling")
    ]


async def test_with_the_verifier_on_a_cited_but_unsupported_claim_is_removed():
    case = factories.example_case("appl-001-kettle-crack")
    verdict = await decided(case)
    clue = verdict.cited_clues[0].id
    unsupported = LetterStatement(section="evidence", text="It also proves the seller lied to you.", cites=[clue])
    draft = injected(unsupported)

    def answer(request: LLMRequest, output_type: type) -> LetterDraft | VerificationDraft:
        if isinstance(request.task, LetterVerifyTask):
            return VerificationDraft(decision="reject", untraceable_claims=[unsupported.text], feedback="unsupported")
        return draft(request, output_type)

    llm = ScriptedLLM(answer)
    letter = await write_letter(record(case), verdict, "buyer", llm, settings(pipeline="verifier"))
    assert llm.roles() == ["letter", "verify"]
    assert [(r.text, r.reason) for r in letter.check.removed] == [(unsupported.text, "untraceable")]
    assert letter.check.checked_by == "verifier" and "lied" not in letter.body
    assert letter.tokens.output_tokens == 20  # both calls' usage (the scripted backend bills 10 a call)


async def test_a_letter_the_check_empties_still_says_what_was_decided_and_what_comes_next():
    nothing = LetterDraft(subject="", statements=[LetterStatement(section="decision", text="You won.", cites=[])])
    case = factories.example_case("appl-001-kettle-crack")
    verdict = await decided(case)
    letter = await write_letter(record(case), verdict, "seller", ScriptedLLM(lambda r, t: nothing), settings())
    assert letter.check.added == ["decision", "next_steps"] and letter.check.removed[0].reason == "uncited"
    assert [s.section for s in letter.statements] == ["decision", "decision", "next_steps"]
    assert letter.subject  # the template's, when the model gave none


# --- languages ------------------------------------------------------------------------------------


def detected_case(buyer: str, **metadata: str) -> DisputeCase:
    return factories.case(buyer=buyer, metadata={**factories.METADATA, **metadata})


PORTUGUESE = "Olá, a camisa chegou com a costura rasgada e eu não a usei. Quero o meu dinheiro de volta, por favor."


@pytest.mark.parametrize(
    ("case", "requested", "where"),
    [
        (detected_case("The seam was torn when I opened it.", buyer_locale="ja-JP"), "ja-JP", "buyer_locale"),
        (detected_case("The seam was torn when I opened it.", locale="zh"), "zh", "the case's locale"),
        (detected_case(PORTUGUESE), "pt", "detected"),
    ],
    ids=["party", "case", "detected"],
)
async def test_a_language_letters_cannot_be_written_in_falls_back_to_the_default_with_a_note(case, requested, where):
    letter = await write_letter(record(case), await decided(case), "buyer", OfflineLLM(), settings())
    assert (letter.locale, letter.locale_source, letter.requested_locale) == ("en", "default", requested)
    assert any(requested in n and where in n and "default language (en)" in n for n in letter.notes), letter.notes
    assert JURY_WORD["en"] in letter.body


async def test_the_default_language_is_the_platforms_and_must_be_one_letters_are_written_in():
    case = detected_case(PORTUGUESE)
    letter = await write_letter(
        record(case), await decided(case), "buyer", OfflineLLM(), settings(letter_default_locale="de")
    )
    assert letter.locale == "de" and JURY_WORD["de"] in letter.body
    with pytest.raises(ValueError, match="letter_default_locale"):
        settings(letter_default_locale="pl")
    listed = await write_letter(
        record(case), await decided(case), "buyer", OfflineLLM(), settings(letter_locales=["en", "pt"])
    )
    # a language listed without a template: the stand-in writes its English sentences, the letter says pt
    assert (listed.locale, listed.locale_source) == ("pt", "detected")


async def test_the_party_and_case_fields_win_over_detection():
    case = detected_case(PORTUGUESE, locale="fr", buyer_locale="it")
    verdict = await decided(case)
    buyer, seller = await write_letters(record(case), verdict, OfflineLLM(), settings())
    assert (buyer.locale, buyer.locale_source, seller.locale, seller.locale_source) == ("it", "party", "fr", "case")


async def test_a_party_with_no_messages_still_gets_a_letter_noted():
    data = factories.case_data("quiet-1", metadata={**factories.METADATA, "locale": "de"})
    data["rounds"] = data["rounds"][:1]  # the seller never answered
    case = DisputeCase.model_validate(data)
    verdict = await decided(case)
    _, seller = await write_letters(record(case), verdict, OfflineLLM(), settings())
    assert (seller.locale, seller.locale_source) == ("de", "case")
    assert any("seller sent no messages" in n for n in seller.notes), seller.notes
    assert {"decision", "next_steps"} <= {s.section for s in seller.statements}

    data["metadata"] = factories.METADATA
    undetected = DisputeCase.model_validate(data)
    _, seller = await write_letters(record(undetected), verdict, OfflineLLM(), settings())
    assert (seller.locale, seller.locale_source) == ("en", "default")
    assert any("the seller sent no messages" in n and "default language" in n for n in seller.notes), seller.notes


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Hallo, der Wasserkocher ist heute angekommen und das Wasser läuft aus dem Boden.", "de"),
        ("Bonjour, la bouilloire est arrivée aujourd'hui et l'eau coule par le fond, je suis déçu.", "fr"),
        ("Hola, el hervidor llegó hoy y el agua sale por la base, no es lo que pedí.", "es"),
        ("Ciao, il bollitore è arrivato oggi e l'acqua esce dal fondo, non sono contento.", "it"),
        ("Hi, the kettle arrived today and water is leaking from the base, I have not used it.", "en"),
        ("Hallo, de waterkoker is vandaag aangekomen en er lekt water uit de bodem.", "nl"),
        ("OK", None),
        ("iPhone 14 Pro 128GB A2890", None),
    ],
)
def test_detection_names_a_language_only_when_the_words_tell(text, language):
    assert detect([text]) == language


# --- deadlines ------------------------------------------------------------------------------------


async def test_the_loser_may_appeal_until_the_window_closes_and_an_appeals_verdict_is_final():
    case = factories.example_case("appl-001-kettle-crack")
    verdict = await decided(case)
    loser = "buyer" if verdict.winner == "seller" else "seller"
    letters = {x.party: x for x in await write_letters(record(case), verdict, OfflineLLM(), settings())}
    deadline = verdict.decided_at + timedelta(days=30)
    assert letters[loser].appeal_until == deadline and not letters[loser].final
    assert f"until {deadline:%Y-%m-%d %H:%M} UTC" in letters[loser].body
    assert letters[verdict.winner].appeal_until == deadline  # told the other side may appeal
    second = verdict.model_copy(update={"instance": 2, "appeal_of": verdict.verdict_id})
    final = await write_letter(record(case), second, loser, OfflineLLM(), settings())
    assert final.final and final.appeal_until is None and "This decision is final." in final.body
    off = await write_letter(record(case), verdict, loser, OfflineLLM(), settings(appeal_window_s=0))
    assert off.final and off.appeal_until is None
    review = verdict.model_copy(update={"escalated": True, "escalation_reasons": ["narrow_margin"]})
    reviewed = await write_letter(record(case), review, loser, OfflineLLM(), settings())
    assert reviewed.under_review and "will review this decision" in reviewed.body


# --- private evidence -----------------------------------------------------------------------------

FOOD_003 = "food-003-coffee-roast-date-fr-de"


def seen_by(llm: ScriptedLLM) -> str:
    return "\n".join(r.system + "\n" + r.text() for r in llm.calls)


async def test_the_other_partys_private_evidence_reaches_neither_the_model_nor_the_letter():
    case = factories.example_case(FOOD_003)
    verdict = with_private_clue(await decided(case))
    cites_it = LetterStatement(section="other_side", text="The seller's batch record shows fresh beans.", cites=["s9"])
    llm = ScriptedLLM(injected(cites_it))
    letter = await write_letter(record(case), verdict, "buyer", llm, settings())
    assert not any(word in seen_by(llm) for word in PRIVATE_WORDS)
    assert not any(word in letter_text(letter) for word in PRIVATE_WORDS)
    assert letter.withheld_evidence == ["s2-2"]
    assert [(r.cites, r.reason) for r in letter.check.removed] == [(["s9"], "withheld")]
    assert "s9" not in {c for s in letter.statements for c in s.cites}
    assert any("submitted in confidence" in n for n in letter.notes)


async def test_a_party_is_told_of_their_own_private_evidence_and_the_policy_decides_the_other_sides():
    case = factories.example_case(FOOD_003)
    verdict = with_private_clue(await decided(case))
    own = await write_letter(record(case), verdict, "seller", OfflineLLM(), settings())
    assert own.withheld_evidence == [] and "0928-B" in own.body  # the seller's own item, quoted to the seller

    mentioned = await write_letter(
        record(case), verdict, "buyer", OfflineLLM(), settings(letter_private_evidence="mention")
    )
    assert "0928-B" not in letter_text(mentioned) and mentioned.withheld_evidence == ["s2-2"]
    [confidential] = [s for s in mentioned.statements if "confidential" in s.cites]
    assert "1" in confidential.text and confidential.section == "other_side"
    withheld = await write_letter(record(case), verdict, "buyer", OfflineLLM(), settings())
    assert not any("confidential" in s.cites for s in withheld.statements)  # withhold: not even its existence

    llm = ScriptedLLM(injected())
    disclosed = await write_letter(record(case), verdict, "buyer", llm, settings(letter_private_evidence="disclose"))
    assert disclosed.withheld_evidence == [] and "0928-B" in seen_by(llm)


async def test_the_preparation_holds_no_private_item_of_the_other_party():
    case = factories.example_case(FOOD_003)
    prepared = prepare(record(case), with_private_clue(await decided(case)), "buyer", settings())
    assert all(s.item is None or not s.item.private for s in prepared.task.sources)
    assert prepared.task.submitted == {"buyer": 4, "seller": 3}  # the private item not counted either
