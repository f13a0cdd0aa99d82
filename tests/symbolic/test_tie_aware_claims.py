"""The tie-aware checks (seed 003) and their helpers against independent references.

``test_claim_records.py`` pins each claim's record; these tests pin the helpers the checks use
(tie grouping, brute-force AP and DCG over tie-consistent orders, the harmonic gap) against
values worked out here by hand, by loops or with mpmath, not by the helpers' own code.
"""

import math
from fractions import Fraction

import pytest

from gradlab.symbolic.tie_aware_claims import (
    _ap_at,
    _brute_force,
    _dcg_at,
    _harmonic_gap,
    _ties,
)


def test_ties_group_indices_by_score_highest_score_first():
    assert _ties([1, 3, 1, 2, 3]) == [[1, 4], [3], [0, 2]]
    assert _ties([0.5]) == [[0]]


def test_ap_at_a_cutoff_counts_precision_at_relevant_ranks_up_to_it():
    # order 2, 0, 1, 3 with items 0 and 3 relevant: hits at ranks 2 (1/2) and 4 (2/4)
    relevant = [True, False, False, True]
    assert _ap_at((2, 0, 1, 3), relevant, 4) == pytest.approx((1 / 2 + 2 / 4) / 2, abs=1e-15)
    assert _ap_at((2, 0, 1, 3), relevant, 3) == pytest.approx((1 / 2) / 2, abs=1e-15)
    assert _ap_at((2, 0, 1, 3), relevant, 1) == 0.0


def test_dcg_at_a_cutoff_sums_gains_over_log2_of_rank_plus_one():
    gains = (3, 0, 1)
    # order 1, 2, 0: gains 0, 1, 3 at ranks 1, 2, 3
    assert _dcg_at((1, 2, 0), gains, 3) == pytest.approx(1 / math.log2(3) + 3 / 2, abs=1e-15)
    assert _dcg_at((1, 2, 0), gains, 2) == pytest.approx(1 / math.log2(3), abs=1e-15)


def test_brute_force_averages_over_exactly_the_tie_consistent_orders():
    # scores (2, 1, 1): item 0 first, then 1, 2 in either order -> two orders
    seen = []

    def metric(order, labels, cutoff):
        seen.append(order)
        return len(seen)

    assert _brute_force(metric, (2, 1, 1), None, 3) == 1.5
    assert sorted(seen) == [(0, 1, 2), (0, 2, 1)]


def test_brute_force_tie_aware_ap_matches_an_exact_rational_average():
    # scores (1, 1, 0), relevant items 0 and 2: orders (0, 1, 2) -> (1 + 2/3)/2 and
    # (1, 0, 2) -> (1/2 + 2/3)/2; the mean is 17/24
    truth = (Fraction(5, 3) / 2 + Fraction(7, 6) / 2) / 2
    value = _brute_force(_ap_at, (1, 1, 0), [True, False, True], 3)
    assert value == pytest.approx(float(truth), abs=1e-15)


@pytest.mark.parametrize(("before", "size"), [(0, 1), (0, 5), (3, 4), (100, 7)])
def test_harmonic_gap_is_the_partial_sum_of_reciprocals(before, size):
    truth = sum(Fraction(1, k) for k in range(before + 1, before + size + 1))
    assert _harmonic_gap(before, size) == pytest.approx(float(truth), rel=1e-15)
