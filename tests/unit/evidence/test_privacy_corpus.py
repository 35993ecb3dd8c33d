"""The masking's recall and false positives on the Faker corpus (issue 39, "How it is checked"): each
kind in each of ten locales found in at least 99% of its probes, and order numbers, tracking numbers,
prices, dates and product codes masked in at most 1% of their sentences. Seeded and small (the
benchmark, bench/privacy_recall.py, runs the same rows larger and prints the table)."""

from __future__ import annotations

import pytest

from ... import privacy_corpus as corpus

PROBES = 100  # per row: a floor of 99% allows one miss
RECALL_FLOOR = 0.99
FALSE_POSITIVE_CEILING = 0.01


@pytest.mark.parametrize("locale", sorted(corpus.LOCALES))
def test_every_kind_is_found_in_at_least_99_percent_of_its_probes(locale):
    short = {}
    for kind in corpus.KINDS:
        probes = corpus.probes(locale, kind, PROBES, seed=0)
        assert len(probes) == PROBES  # Faker gave as many distinct values as asked
        missed = corpus.recall(locale, probes)
        if 1 - len(missed) / len(probes) < RECALL_FLOOR:
            short[kind] = [p.text for p in missed[:3]]
    assert short == {}


@pytest.mark.parametrize("locale", sorted(corpus.LOCALES))
def test_order_and_tracking_numbers_prices_dates_and_product_codes_are_rarely_masked(locale):
    over = {}
    for kind in corpus.DECOYS:
        decoys = corpus.decoys(locale, kind, PROBES, seed=0)
        wrong = corpus.false_positives(locale, decoys)
        if len(wrong) / len(decoys) > FALSE_POSITIVE_CEILING:
            over[kind] = [out for _, out in wrong[:3]]
    assert over == {}


def test_a_probe_counts_as_found_only_when_its_value_is_one_placeholder_of_its_kind():
    probe = corpus.Probe("en_GB", "phone", "Call me on 020 7946 0958 now.", 11, "020 7946 0958")
    assert corpus.found(probe, "Call me on [PHONE_1] now.")
    assert not corpus.found(probe, "Call me on [PHONE_1] 0958 now.")  # a part left
    assert not corpus.found(probe, "Call me on [CARD_1] now.")  # the wrong kind
    assert not corpus.found(probe, "Call me on 020 7946 0958 now.")
    assert corpus.found(probe, "Call me [PHONE_1] now.")  # more than the value: still found
