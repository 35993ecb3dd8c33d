"""The party-swap test: a case's counterfactual twin with buyer and seller exchanged.

Every round changes sides, the words "buyer"/"seller" are exchanged in every text, and the real
votes are mirrored. Nothing else changes, so a jury without a bias for one side must give the
twin's verdict to the other party, with the mirrored vote split. The swap is an involution:
swapping a twin gives back the original case, id included.
"""

from __future__ import annotations

import re

from ..schemas import DisputeCase, EvidenceItem, GroundTruthVotes

SWAP_SUFFIX = ":swap"
MAX_CASE_ID = 128
# Word pairs exchanged in texts; plurals ("buyers") and possessives ("buyer's", "sellers'")
# follow because only the stem is replaced. Add pairs here (e.g. "customer": "merchant") to
# swap more role words; keep it symmetric.
WORD_PAIRS = {"buyer": "seller", "seller": "buyer"}
_WORDS = re.compile(r"\b(" + "|".join(map(re.escape, WORD_PAIRS)) + r")(?=s?\b)", re.IGNORECASE)
_PARTY_ID = re.compile(r"^([bsBS])(?=\d)")  # evidence ids like b1-2, s2-1 name their party


def is_swapped(case_id: str) -> bool:
    return case_id.endswith(SWAP_SUFFIX)


def original_id(case_id: str) -> str:
    return case_id[: -len(SWAP_SUFFIX)] if is_swapped(case_id) else case_id


def twin_id(case_id: str) -> str:
    if is_swapped(case_id):
        return original_id(case_id)
    twin = case_id + SWAP_SUFFIX
    if len(twin) > MAX_CASE_ID:
        raise ValueError(f"case id {case_id!r} is too long for a swapped twin ({len(twin)} > {MAX_CASE_ID})")
    return twin


def _same_case(model: str, like: str) -> str:
    if like.isupper():
        return model.upper()
    if like[0].isupper():
        return model.capitalize()
    return model


def swap_words(text: str) -> str:
    """Keeps the case of each word: Buyer -> Seller, BUYERS -> SELLERS, buyer's -> seller's."""
    return _WORDS.sub(lambda m: _same_case(WORD_PAIRS[m.group(1).lower()], m.group(1)), text)


def _swap_id(evidence_id: str) -> str:
    # b<->s on the leading letter is its own inverse, so distinct ids stay distinct
    return _PARTY_ID.sub(lambda m: {"b": "s", "s": "b", "B": "S", "S": "B"}[m.group(1)], evidence_id)


def _swap_item(item: EvidenceItem) -> EvidenceItem:
    text = swap_words(item.text) if item.text is not None else None
    return item.model_copy(update={"id": _swap_id(item.id), "text": text})


def swap_parties(case: DisputeCase) -> DisputeCase:
    metadata = case.metadata.model_copy(
        update={
            "dispute_reason": swap_words(case.metadata.dispute_reason),
            "requested_remedy": swap_words(case.metadata.requested_remedy),
        }
    )
    rounds = [
        r.model_copy(
            update={"party": "seller" if r.party == "buyer" else "buyer", "items": [_swap_item(i) for i in r.items]}
        )
        for r in case.rounds
    ]
    truth = case.ground_truth
    swapped_truth = GroundTruthVotes(buyer=truth.seller, seller=truth.buyer) if truth else None
    # validate again: ids must still be unique and texts must still fit the schema
    return DisputeCase.model_validate(
        {
            "case_id": twin_id(case.case_id),
            "metadata": metadata.model_dump(),
            "rounds": [r.model_dump() for r in rounds],
            "ground_truth": swapped_truth.model_dump() if swapped_truth else None,
        }
    )
