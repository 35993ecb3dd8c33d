"""The fixed sentences of a letter in each language the stand-in writes: what was decided, the
remedy, the evidence by what a party submitted, what comes next. The offline stand-in's template
letter is made of them, and a model's letter whose check left it without its decision or next steps
gets them back from here (``letters.py``), so every letter says both.

Only what code knows goes into them (the winner, the votes, the requested remedy, dates, who
submitted what); party-authored text appears quoted, as the party wrote it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..schemas import Party

OTHER: dict[Party, Party] = {"buyer": "seller", "seller": "buyer"}
LANGUAGE_NAMES = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
    "pl": "Polish",
    "sv": "Swedish",
}


def _per_party(buyer: str, seller: str) -> dict[str, str]:
    return {"buyer": buyer, "seller": seller}


def _kinds(text: str, image: str, video: str) -> dict[str, str]:
    return {"text": text, "image": image, "video": video}


PHRASES: dict[str, dict[str, Any]] = {
    "en": {
        "subject": "Decision on your dispute about {product}",
        "won": "The jury has decided this dispute in your favour.",
        "lost": "The jury has decided this dispute against you.",
        "votes": "{n} of {total} jurors found for the {winner}.",
        "winner": _per_party("buyer", "seller"),
        "granted": "The buyer's request is granted: {remedy}",
        "refused": "The buyer's request is not granted: {remedy}",
        "evidence_none": "The jury's majority did not name a particular piece of evidence.",
        "own": _kinds("Your message", "Your photo", "Your video"),
        "theirs": {
            "buyer": _kinds("The buyer's message", "The buyer's photo", "The buyer's video"),
            "seller": _kinds("The seller's message", "The seller's photo", "The seller's video"),
        },
        "showed": _per_party("What the buyer showed: {items}.", "What the seller showed: {items}."),
        "other_none": _per_party(
            "The decision names no evidence from the buyer.", "The decision names no evidence from the seller."
        ),
        "confidential": _per_party(
            "The buyer also submitted {n} item(s) in confidence: the jury weighed them, and this letter cannot "
            "say what they show.",
            "The seller also submitted {n} item(s) in confidence: the jury weighed them, and this letter cannot "
            "say what they show.",
        ),
        "appeal_you": "You may appeal this decision until {deadline}.",
        "appeal_other": _per_party(
            "The buyer may appeal this decision until {deadline}; if they do, you will receive the new decision.",
            "The seller may appeal this decision until {deadline}; if they do, you will receive the new decision.",
        ),
        "final": "This decision is final.",
        "review": "People from the platform will review this decision before it takes effect.",
        "date": "%Y-%m-%d",
        "deadline": "%Y-%m-%d %H:%M UTC",
    },
    "de": {
        "subject": "Entscheidung zu Ihrem Streitfall: {product}",
        "won": "Die Jury hat diesen Streitfall zu Ihren Gunsten entschieden.",
        "lost": "Die Jury hat diesen Streitfall nicht zu Ihren Gunsten entschieden.",
        "votes": "{n} von {total} Geschworenen haben für {winner} gestimmt.",
        "winner": _per_party("den Käufer", "den Verkäufer"),
        "granted": "Der Antrag des Käufers wird angenommen: {remedy}",
        "refused": "Der Antrag des Käufers wird abgelehnt: {remedy}",
        "evidence_none": "Die Mehrheit der Jury hat kein bestimmtes Beweisstück genannt.",
        "own": _kinds("Ihre Nachricht", "Ihr Foto", "Ihr Video"),
        "theirs": {
            "buyer": _kinds("Die Nachricht des Käufers", "Das Foto des Käufers", "Das Video des Käufers"),
            "seller": _kinds("Die Nachricht des Verkäufers", "Das Foto des Verkäufers", "Das Video des Verkäufers"),
        },
        "showed": _per_party("Was der Käufer vorgelegt hat: {items}.", "Was der Verkäufer vorgelegt hat: {items}."),
        "other_none": _per_party(
            "Die Entscheidung nennt kein Beweisstück des Käufers.",
            "Die Entscheidung nennt kein Beweisstück des Verkäufers.",
        ),
        "confidential": _per_party(
            "Der Käufer hat außerdem {n} Beweisstück(e) vertraulich eingereicht: Die Jury hat sie gewürdigt, "
            "dieser Brief darf ihren Inhalt nicht wiedergeben.",
            "Der Verkäufer hat außerdem {n} Beweisstück(e) vertraulich eingereicht: Die Jury hat sie gewürdigt, "
            "dieser Brief darf ihren Inhalt nicht wiedergeben.",
        ),
        "appeal_you": "Sie können bis {deadline} Berufung gegen diese Entscheidung einlegen.",
        "appeal_other": _per_party(
            "Der Käufer kann bis {deadline} Berufung einlegen; in diesem Fall erhalten Sie die neue Entscheidung.",
            "Der Verkäufer kann bis {deadline} Berufung einlegen; in diesem Fall erhalten Sie die neue Entscheidung.",
        ),
        "final": "Diese Entscheidung ist endgültig.",
        "review": "Mitarbeiter der Plattform prüfen diese Entscheidung, bevor sie wirksam wird.",
        "date": "%d.%m.%Y",
        "deadline": "%d.%m.%Y, %H:%M UTC",
    },
    "fr": {
        "subject": "Décision sur votre litige : {product}",
        "won": "Le jury a tranché ce litige en votre faveur.",
        "lost": "Le jury a tranché ce litige en votre défaveur.",
        "votes": "{n} jurés sur {total} se sont prononcés en faveur {winner}.",
        "winner": _per_party("de l'acheteur", "du vendeur"),
        "granted": "La demande de l'acheteur est acceptée : {remedy}",
        "refused": "La demande de l'acheteur est rejetée : {remedy}",
        "evidence_none": "La majorité du jury n'a cité aucune pièce en particulier.",
        "own": _kinds("Votre message", "Votre photo", "Votre vidéo"),
        "theirs": {
            "buyer": _kinds("Le message de l'acheteur", "La photo de l'acheteur", "La vidéo de l'acheteur"),
            "seller": _kinds("Le message du vendeur", "La photo du vendeur", "La vidéo du vendeur"),
        },
        "showed": _per_party("Ce que l'acheteur a présenté : {items}.", "Ce que le vendeur a présenté : {items}."),
        "other_none": _per_party(
            "La décision ne cite aucune pièce de l'acheteur.", "La décision ne cite aucune pièce du vendeur."
        ),
        "confidential": _per_party(
            "L'acheteur a aussi remis {n} pièce(s) à titre confidentiel : le jury les a examinées, et cette "
            "lettre ne peut pas en dire le contenu.",
            "Le vendeur a aussi remis {n} pièce(s) à titre confidentiel : le jury les a examinées, et cette "
            "lettre ne peut pas en dire le contenu.",
        ),
        "appeal_you": "Vous pouvez faire appel de cette décision jusqu'au {deadline}.",
        "appeal_other": _per_party(
            "L'acheteur peut faire appel jusqu'au {deadline} ; dans ce cas, vous recevrez la nouvelle décision.",
            "Le vendeur peut faire appel jusqu'au {deadline} ; dans ce cas, vous recevrez la nouvelle décision.",
        ),
        "final": "Cette décision est définitive.",
        "review": "Des personnes de la plateforme vont examiner cette décision avant qu'elle ne prenne effet.",
        "date": "%d/%m/%Y",
        "deadline": "%d/%m/%Y à %H:%M UTC",
    },
    "es": {
        "subject": "Decisión sobre su disputa: {product}",
        "won": "El jurado ha resuelto esta disputa a su favor.",
        "lost": "El jurado ha resuelto esta disputa en su contra.",
        "votes": "{n} de {total} miembros del jurado votaron a favor {winner}.",
        "winner": _per_party("del comprador", "del vendedor"),
        "granted": "La solicitud del comprador se acepta: {remedy}",
        "refused": "La solicitud del comprador se rechaza: {remedy}",
        "evidence_none": "La mayoría del jurado no citó ninguna prueba concreta.",
        "own": _kinds("Su mensaje", "Su foto", "Su vídeo"),
        "theirs": {
            "buyer": _kinds("El mensaje del comprador", "La foto del comprador", "El vídeo del comprador"),
            "seller": _kinds("El mensaje del vendedor", "La foto del vendedor", "El vídeo del vendedor"),
        },
        "showed": _per_party("Lo que presentó el comprador: {items}.", "Lo que presentó el vendedor: {items}."),
        "other_none": _per_party(
            "La decisión no cita ninguna prueba del comprador.", "La decisión no cita ninguna prueba del vendedor."
        ),
        "confidential": _per_party(
            "El comprador también presentó {n} prueba(s) de forma confidencial: el jurado las tuvo en cuenta y "
            "esta carta no puede decir lo que muestran.",
            "El vendedor también presentó {n} prueba(s) de forma confidencial: el jurado las tuvo en cuenta y "
            "esta carta no puede decir lo que muestran.",
        ),
        "appeal_you": "Puede recurrir esta decisión hasta el {deadline}.",
        "appeal_other": _per_party(
            "El comprador puede recurrir hasta el {deadline}; si lo hace, usted recibirá la nueva decisión.",
            "El vendedor puede recurrir hasta el {deadline}; si lo hace, usted recibirá la nueva decisión.",
        ),
        "final": "Esta decisión es definitiva.",
        "review": "Personas de la plataforma revisarán esta decisión antes de que surta efecto.",
        "date": "%d/%m/%Y",
        "deadline": "%d/%m/%Y a las %H:%M UTC",
    },
    "it": {
        "subject": "Decisione sulla sua controversia: {product}",
        "won": "La giuria ha deciso questa controversia a suo favore.",
        "lost": "La giuria ha deciso questa controversia a suo sfavore.",
        "votes": "{n} giurati su {total} si sono espressi a favore {winner}.",
        "winner": _per_party("dell'acquirente", "del venditore"),
        "granted": "La richiesta dell'acquirente è accolta: {remedy}",
        "refused": "La richiesta dell'acquirente è respinta: {remedy}",
        "evidence_none": "La maggioranza della giuria non ha indicato una prova in particolare.",
        "own": _kinds("Il suo messaggio", "La sua foto", "Il suo video"),
        "theirs": {
            "buyer": _kinds("Il messaggio dell'acquirente", "La foto dell'acquirente", "Il video dell'acquirente"),
            "seller": _kinds("Il messaggio del venditore", "La foto del venditore", "Il video del venditore"),
        },
        "showed": _per_party(
            "Ciò che ha presentato l'acquirente: {items}.", "Ciò che ha presentato il venditore: {items}."
        ),
        "other_none": _per_party(
            "La decisione non indica alcuna prova dell'acquirente.",
            "La decisione non indica alcuna prova del venditore.",
        ),
        "confidential": _per_party(
            "L'acquirente ha inoltre presentato {n} elemento/i in via riservata: la giuria li ha valutati e "
            "questa lettera non può dirne il contenuto.",
            "Il venditore ha inoltre presentato {n} elemento/i in via riservata: la giuria li ha valutati e "
            "questa lettera non può dirne il contenuto.",
        ),
        "appeal_you": "Può presentare ricorso contro questa decisione fino al {deadline}.",
        "appeal_other": _per_party(
            "L'acquirente può presentare ricorso fino al {deadline}; in tal caso riceverà la nuova decisione.",
            "Il venditore può presentare ricorso fino al {deadline}; in tal caso riceverà la nuova decisione.",
        ),
        "final": "Questa decisione è definitiva.",
        "review": "Alcune persone della piattaforma esamineranno questa decisione prima che diventi effettiva.",
        "date": "%d/%m/%Y",
        "deadline": "%d/%m/%Y alle %H:%M UTC",
    },
}
TEMPLATE_LOCALES = tuple(PHRASES)


def phrases(locale: str) -> dict[str, Any]:
    """The sentences of ``locale``; English where there is no template for it (a platform on a real
    model may write in more languages than the stand-in has templates for)."""
    return PHRASES.get(locale, PHRASES["en"])


def language_name(locale: str) -> str:
    return LANGUAGE_NAMES.get(locale, locale)


def shown_date(at: datetime | None, locale: str, deadline: bool = False) -> str:
    """A date as the letter's language writes it (deadlines with their time, in UTC)."""
    if at is None:
        return ""
    return at.astimezone(UTC).strftime(phrases(locale)["deadline" if deadline else "date"])


def lower_first(text: str) -> str:
    """For a phrase that opens a sentence in the table, used inside one ("Your photo" -> "your photo")."""
    return text[:1].lower() + text[1:]
