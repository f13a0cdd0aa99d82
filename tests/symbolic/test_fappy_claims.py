"""The FAPPY transcription of seed 004 (Eq. 1-7) against independent loops.

``test_claim_records.py`` pins each claim's record; the checks there pass their helpers' output
through tolerances. These tests pin the helpers themselves (the bin of a similarity, the
triangular weights, the negatives' histogram, the estimate of Eq. 7) against float64 loops
written here from the paper's definitions: boundaries b_u = -1 + u Delta, a triangle of
half-width Delta around each boundary.
"""

import math

import numpy as np
import pytest

from gradlab.symbolic.fappy_claims import _bin, _histogram, _probability, _weight

DELTAS = (2.0, 1.0, 0.5, 0.25, 0.125)


def _hat(x: float, u: int, delta: float) -> float:
    """Eq. 3 by hand: 1 at b_u, falling linearly to 0 at b_u -+ Delta."""
    return max(0.0, 1.0 - abs(x - (-1.0 + u * delta)) / delta)


def _boundaries(delta: float) -> list[float]:
    count = 0
    values = []
    while -1.0 + count * delta <= 1.0 + 1e-12:
        values.append(-1.0 + count * delta)
        count += 1
    return values


def _reference_bin(x: float, delta: float) -> int:
    """The last boundary at or below x, among those that have a boundary above them."""
    edges = _boundaries(delta)
    return max(u for u in range(len(edges) - 1) if edges[u] <= x + 1e-12)


@pytest.mark.parametrize("delta", DELTAS)
def test_the_weight_is_the_triangle_around_each_boundary(delta):
    for x in np.linspace(-1, 1, 41):
        for u in range(len(_boundaries(delta))):
            assert _weight(float(x), u, delta) == pytest.approx(_hat(float(x), u, delta), abs=1e-12)


@pytest.mark.parametrize("delta", DELTAS)
def test_the_bin_is_the_last_boundary_below_and_the_count_is_2_over_delta_plus_1(delta):
    for x in [*np.linspace(-1, 1, 53), 1.0, -1.0, 1 - 1e-9]:
        t, bins = _bin(float(x), delta)
        assert bins == len(_boundaries(delta))
        assert t == _reference_bin(float(x), delta), x


def test_a_similarity_on_a_boundary_opens_that_boundary_s_bin():
    # s = -0.5 lies exactly on b_2 at Delta = 1/4: its bin starts there, and s = 1 falls in the
    # last bin (t = n - 2), whose upper boundary is +1
    assert _bin(-0.5, 0.25) == (2, 9)
    assert _bin(1.0, 0.25) == (7, 9)
    assert _bin(-1.0, 0.5) == (0, 5)


@pytest.mark.parametrize("delta", [0.5, 0.25])
def test_the_histogram_is_the_mean_of_the_triangles(delta):
    rng = np.random.default_rng(15)
    for count in (1, 2, 5):
        negatives = rng.uniform(-1, 1, count).tolist()
        bins = len(_boundaries(delta))
        expected = [sum(_hat(x, u, delta) for x in negatives) / count for u in range(bins)]
        assert _histogram(negatives, delta) == pytest.approx(expected, abs=1e-12)


def test_the_histogram_uses_the_given_normaliser():
    # normaliser 1/(2|N|): half of each unit-mass triangle
    assert _histogram([-1.0, 0.0], 1.0, normalizer=lambda n: 1 / (2 * n)) == pytest.approx(
        [0.25, 0.25, 0.0]
    )


def _estimate(s_ij: float, negatives: list[float], delta: float) -> float:
    """Eq. 7 for one negative set, by a double loop: the pair's mass on b_t and b_(t+1) times
    the negatives' mass on every boundary at or above it."""
    t = _reference_bin(s_ij, delta)
    edges = _boundaries(delta)
    pair = {t: _hat(s_ij, t, delta), t + 1: _hat(s_ij, t + 1, delta)}
    total = 0.0
    for a, mass in pair.items():
        for u in range(a, len(edges)):
            total += mass * sum(_hat(x, u, delta) for x in negatives) / len(negatives)
    return total


@pytest.mark.parametrize("delta", [1.0, 0.5, 0.25])
def test_the_probability_is_the_sum_of_the_two_sets_double_loops(delta):
    rng = np.random.default_rng(7)
    for _ in range(12):
        s_ij = float(rng.uniform(-0.95, 0.95))
        neg_i = rng.uniform(-1, 1, int(rng.integers(1, 6))).tolist()
        neg_j = rng.uniform(-1, 1, int(rng.integers(1, 6))).tolist()
        got = _probability(s_ij, neg_i, neg_j, delta)
        assert got == pytest.approx(
            _estimate(s_ij, neg_i, delta) + _estimate(s_ij, neg_j, delta), abs=1e-12
        )


def test_negatives_far_above_and_far_below_the_pair():
    # all negatives at +1: each set contributes 1 (P(neg >= pair) = 1); all at -1 with the pair
    # in an upper bin: each contributes 0
    assert _probability(0.1, [1.0, 1.0], [1.0], 0.25) == pytest.approx(2.0, abs=1e-12)
    assert _probability(0.6, [-1.0], [-1.0, -1.0], 0.25) == pytest.approx(0.0, abs=1e-12)
    assert math.isfinite(_probability(1.0, [1.0], [-1.0], 0.25))
