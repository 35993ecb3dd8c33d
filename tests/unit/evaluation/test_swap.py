"""The party-swap twin: sides, words, votes and ids exchanged, nothing else."""

from __future__ import annotations

import pytest

from cyberjurors.evaluation.dataset import load_dataset
from cyberjurors.evaluation.swap import SWAP_SUFFIX, is_swapped, original_id, swap_parties, swap_words
from cyberjurors.schemas import DisputeCase, GroundTruthVotes

from ...conftest import EXAMPLES


def party_worded_case(**over) -> DisputeCase:
    return DisputeCase.model_validate(
        {
            "case_id": "c-1",
            "metadata": {
                "category": "clothing",
                "product": "Seller's own-brand buyer jacket",
                "order_amount": "59.00",
                "currency": "EUR",
                "ordered_at": "2026-01-01T00:00:00Z",
                "dispute_reason": "Buyer says the seller shipped a torn jacket",
                "requested_remedy": "Refund to the buyer; the seller's courier collects it",
            },
            "rounds": [
                {
                    "party": "buyer",
                    "round": 1,
                    "items": [
                        {"id": "b1-1", "kind": "text", "text": "As the buyer I expected the seller to check it."},
                        {
                            "id": "b1-2",
                            "kind": "image",
                            "text": "The sellers' label, torn; BUYER PROTECTION applies",
                            "media": {"media_type": "image/jpeg", "path": "media/jacket.jpg"},
                        },
                    ],
                },
                {
                    "party": "seller",
                    "round": 1,
                    "items": [
                        {
                            "id": "s1-1",
                            "kind": "text",
                            "text": "Buyers often tear it themselves. The buyer's photo is blurry.",
                        },
                        {"id": "note", "kind": "text", "text": "Seller-side note, no party prefix in this id."},
                    ],
                },
            ],
            "ground_truth": {"buyer": 12, "seller": 5},
        }
        | over
    )


def test_parties_words_and_votes_are_exchanged() -> None:
    original = party_worded_case()
    twin = swap_parties(original)
    assert twin.case_id == "c-1" + SWAP_SUFFIX == "c-1:swap"
    assert [r.party for r in twin.rounds] == ["seller", "buyer"]
    assert [i.id for i in twin.items()] == ["s1-1", "s1-2", "b1-1", "note"]
    assert twin.item("s1-1").text == "As the seller I expected the buyer to check it."
    assert twin.item("s1-2").text == "The buyers' label, torn; SELLER PROTECTION applies"
    assert twin.item("b1-1").text == "Sellers often tear it themselves. The seller's photo is blurry."
    assert twin.item("note").text == "Buyer-side note, no party prefix in this id."
    assert twin.metadata.dispute_reason == "Seller says the buyer shipped a torn jacket"
    assert twin.metadata.requested_remedy == "Refund to the seller; the buyer's courier collects it"
    assert twin.metadata.product == original.metadata.product  # not a party's words
    assert twin.item("s1-2").media == original.item("b1-2").media  # media kept as they are
    assert twin.ground_truth == GroundTruthVotes(buyer=5, seller=12)
    assert twin.ground_truth.winner == "seller" != original.ground_truth.winner
    # the same item, now submitted by the other party
    assert original.party_of("b1-2") == "buyer" and twin.party_of("s1-2") == "seller"


def test_only_whole_words_change() -> None:
    assert swap_words("buyership, bestseller, resellers, Sellerz") == "buyership, bestseller, resellers, Sellerz"
    assert swap_words("buyer/seller buyer-seller (Buyers)") == "seller/buyer seller-buyer (Sellers)"


def test_swapping_twice_gives_the_original_back() -> None:
    original = party_worded_case()
    assert swap_parties(swap_parties(original)) == original
    assert swap_parties(swap_parties(original)).digest() == original.digest()
    for example in load_dataset(EXAMPLES / "cases").cases:
        twin = swap_parties(example)
        assert twin.digest() != example.digest()
        assert swap_parties(twin) == example
        assert len({i.id for i in twin.items()}) == len(twin.items())
        assert [len(r.items) for r in twin.rounds] == [len(r.items) for r in example.rounds]


def test_case_without_ground_truth() -> None:
    twin = swap_parties(party_worded_case(ground_truth=None))
    assert twin.ground_truth is None and twin.rounds[0].party == "seller"


def test_ids() -> None:
    assert is_swapped("c-1:swap") and not is_swapped("c-1") and not is_swapped("swap")
    assert original_id("c-1:swap") == "c-1" and original_id("c-1") == "c-1"
    assert len(swap_parties(party_worded_case(case_id="x" * 123)).case_id) == 128
    with pytest.raises(ValueError, match="too long"):
        swap_parties(party_worded_case(case_id="x" * 124))
