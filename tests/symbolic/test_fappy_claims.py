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
import sympy as sp

from gradlab.symbolic.claims import Form
from gradlab.symbolic.fappy_claims import (
    check_bin_count,
    check_caption,
    check_delta_l2,
    check_edges,
    check_empty_negative_set,
    check_eq7,
    check_fig2,
    check_fusion_weights,
    check_gradient_value,
    check_heights,
    check_kernel,
    check_negative_histogram,
    check_normalization,
    check_pair_gradient,
    check_probability_definition,
    check_stability,
    check_table1_comparison,
    check_table2,
    discrete_truth,
    edge_values,
    eq6_limit,
    kernel_weight,
    negative_gradient,
    negative_histogram,
    pair_bin,
    pair_probability,
    run_recurrence,
    support_mismatches,
)

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
            expected = _hat(float(x), u, delta)
            assert kernel_weight(float(x), u, delta) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("delta", DELTAS)
def test_the_bin_is_the_last_boundary_below_and_the_count_is_2_over_delta_plus_1(delta):
    for x in [*np.linspace(-1, 1, 53), 1.0, -1.0, 1 - 1e-9]:
        t, bins = pair_bin(float(x), delta)
        assert bins == len(_boundaries(delta))
        assert t == _reference_bin(float(x), delta), x


def test_a_similarity_on_a_boundary_opens_that_boundary_s_bin():
    # s = -0.5 lies exactly on b_2 at Delta = 1/4: its bin starts there, and s = 1 falls in the
    # last bin (t = n - 2), whose upper boundary is +1
    assert pair_bin(-0.5, 0.25) == (2, 9)
    assert pair_bin(1.0, 0.25) == (7, 9)
    assert pair_bin(-1.0, 0.5) == (0, 5)


@pytest.mark.parametrize("delta", [0.5, 0.25])
def test_the_histogram_is_the_mean_of_the_triangles(delta):
    rng = np.random.default_rng(15)
    for count in (1, 2, 5):
        negatives = rng.uniform(-1, 1, count).tolist()
        bins = len(_boundaries(delta))
        expected = [sum(_hat(x, u, delta) for x in negatives) / count for u in range(bins)]
        assert negative_histogram(negatives, delta) == pytest.approx(expected, abs=1e-12)


def test_the_histogram_uses_the_given_normaliser():
    # normaliser 1/(2|N|): half of each unit-mass triangle
    assert negative_histogram([-1.0, 0.0], 1.0, normalizer=lambda n: 1 / (2 * n)) == pytest.approx(
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
        got = pair_probability(s_ij, neg_i, neg_j, delta)
        assert got == pytest.approx(
            _estimate(s_ij, neg_i, delta) + _estimate(s_ij, neg_j, delta), abs=1e-12
        )


def test_negatives_far_above_and_far_below_the_pair():
    # all negatives at +1: each set contributes 1 (P(neg >= pair) = 1); all at -1 with the pair
    # in an upper bin: each contributes 0
    assert pair_probability(0.1, [1.0, 1.0], [1.0], 0.25) == pytest.approx(2.0, abs=1e-12)
    assert pair_probability(0.6, [-1.0], [-1.0, -1.0], 0.25) == pytest.approx(0.0, abs=1e-12)
    assert math.isfinite(pair_probability(1.0, [1.0], [-1.0], 0.25))


def _estimate_general(s_ij, negatives, delta, offsets=(0, 1), side=None, scale=None):
    """Eq. 7 for one negative set with the pair's heights on b_(t + offsets): the pair's mass
    on each of its two boundaries times the negatives' mass at or above it (``side`` swaps in
    another combination of h_left, h_right, S_t, S_(t+1); ``scale`` another normaliser)."""
    t = _reference_bin(s_ij, delta)
    edges = _boundaries(delta)
    norm = 1 / len(negatives) if scale is None else scale
    mass = [norm * sum(_hat(x, u, delta) for x in negatives) for u in range(len(edges))]
    left, right = _hat(s_ij, t + offsets[0], delta), _hat(s_ij, t + offsets[1], delta)
    above_t, above_t1 = sum(mass[t:]), sum(mass[t + 1 :])
    if side is None:
        return left * above_t + right * above_t1
    return side(left, right, above_t, above_t1)


@pytest.mark.parametrize("offsets", [(1, 2), (-1, 0), (0, 2)])
def test_the_probability_puts_the_pair_s_heights_on_the_bins_it_is_given(offsets):
    # the transcription's heights are w^(t + offset)(s_ij): other offsets move the pair's mass
    rng = np.random.default_rng(71)
    for _ in range(6):
        s_ij = float(rng.uniform(-0.7, 0.7))
        neg_i, neg_j = rng.uniform(-1, 1, 4).tolist(), rng.uniform(-1, 1, 3).tolist()
        got = pair_probability(s_ij, neg_i, neg_j, 0.25, heights=offsets)
        expected = _estimate_general(s_ij, neg_i, 0.25, offsets) + _estimate_general(
            s_ij, neg_j, 0.25, offsets
        )
        assert got == pytest.approx(expected, abs=1e-12)


def test_the_probability_combines_the_sums_with_the_side_and_normaliser_it_is_given():
    from gradlab.symbolic.fappy_claims import S_t, S_t1, h_left, h_right

    swapped = h_left * S_t1 + 3 * h_right * S_t
    rng = np.random.default_rng(72)
    for _ in range(6):
        s_ij = float(rng.uniform(-0.9, 0.9))
        neg_i, neg_j = rng.uniform(-1, 1, 5).tolist(), rng.uniform(-1, 1, 2).tolist()
        got = pair_probability(s_ij, neg_i, neg_j, 0.5, side=swapped, normalizer=lambda n: 0.5)

        def side(left, right, above_t, above_t1):
            return left * above_t1 + 3 * right * above_t

        expected = sum(
            _estimate_general(s_ij, negatives, 0.5, side=side, scale=0.5)
            for negatives in (neg_i, neg_j)
        )
        assert got == pytest.approx(expected, abs=1e-12)


def test_the_histogram_weighs_the_negatives_with_the_kernel_it_is_given():
    # a kernel reporting its own arguments: the histogram passes s, b_(u-1), b_u, b_(u+1), Delta
    seen = []

    def kernel(x, low, middle, high, delta):
        seen.append((x, low, middle, high, delta))
        return middle + 2 * x

    h = negative_histogram([0.25, -0.5], 0.5, kernel=kernel)
    assert h == pytest.approx([(2 * -1.0 + 2 * -0.25) / 2 + 0.5 * u for u in range(5)])
    assert seen[:2] == [(0.25, -1.5, -1.0, -0.5, 0.5), (-0.5, -1.5, -1.0, -0.5, 0.5)]


def _slope(s_ij, s_ik, delta, count):
    """dP_ij/ds_ik by a secant of 1e-4 inside s_ik's linear piece (the estimate is piecewise
    linear), with the other count - 1 negatives of i and all of j at -0.999."""
    step = 1e-4

    def p(x):
        others = [-0.999] * (count - 1)
        return _estimate(s_ij, [x, *others], delta) + _estimate(s_ij, [-0.999] * count, delta)

    return (p(s_ik + step) - p(s_ik - step)) / (2 * step)


@pytest.mark.parametrize(("delta", "count"), [(0.25, 3), (0.5, 5), (0.25, 1)])
def test_the_negative_gradient_is_the_slope_of_the_estimate(delta, count):
    s_ij = -1 + 4 * delta + 0.3 * delta if delta < 0.5 else 0.1
    for fraction in (-1.7, -1.2, -0.6, -0.1, 0.35, 0.8, 1.4):
        s_ik = s_ij + fraction * delta
        expected = _slope(s_ij, s_ik, delta, count)
        assert negative_gradient(s_ij, s_ik, delta, count) == pytest.approx(expected, abs=1e-6)


def test_the_negative_gradient_is_h_over_n_delta_on_the_two_bins():
    # s_ij = -0.675 at Delta = 1/4: t = 1, h_left = 0.7, h_right = 0.3; |N| = 4
    assert negative_gradient(-0.675, -0.6, 0.25, 4) == pytest.approx(0.3 / (4 * 0.25), abs=1e-6)
    assert negative_gradient(-0.675, -0.8, 0.25, 4) == pytest.approx(0.7 / (4 * 0.25), abs=1e-6)
    assert negative_gradient(-0.675, -0.3, 0.25, 4) == 0.0


@pytest.mark.parametrize("delta", [0.5, 0.25])
def test_the_discrete_truth_is_the_double_loop_over_the_pair_and_negative_masses(delta):
    rng = np.random.default_rng(73)
    for _ in range(8):
        s_ij = float(rng.uniform(-0.95, 0.95))
        negatives = rng.uniform(-1, 1, int(rng.integers(1, 6))).tolist()
        expected = _estimate(s_ij, negatives, delta)
        assert discrete_truth(s_ij, negatives, delta) == pytest.approx(expected, abs=1e-12)


def test_the_support_samples_offsets_minus_3_to_3_twice_per_bin():
    # the gradient is non-zero on offsets -1 and 0 only (s_ij inside bin 4 at Delta = 1/4):
    # a claimed support from -4 to 5 is wrong at every sampled offset but those two
    wrong = [(o, f, False) for o in (-3, -2, 1, 2, 3) for f in (0.2, 0.7)]
    assert support_mismatches(Form({"from bin": -4, "to bin": 5})) == wrong
    assert support_mismatches(Form({"from bin": -1, "to bin": 1})) == []
    halves = (0.2, 0.7)
    assert support_mismatches(Form({"from bin": 0, "to bin": 1})) == [(-1, f, True) for f in halves]
    assert support_mismatches(Form({"from bin": -1, "to bin": 0})) == [(0, f, True) for f in halves]


def test_the_edge_values_are_eq7_at_the_documented_corners():
    corners = [
        (s_ij, negative, delta)
        for s_ij in (-1.0, -0.99, 0.999, 1.0)
        for negative in (-1.0, 0.0, 1.0)
        for delta in (2.0, 0.25)
    ]
    expected = [2 * _estimate(s_ij, [negative], delta) for s_ij, negative, delta in corners]
    assert edge_values(lambda n: 1 / n) == pytest.approx(expected, abs=1e-12)
    halved = edge_values(lambda n: 0.5 / n)
    assert halved == pytest.approx([value / 2 for value in expected], abs=1e-12)


def test_an_edge_value_whose_division_fails_is_nan():
    values = edge_values(lambda n: 1 / (n - 1))
    assert len(values) == 24 and all(math.isnan(v) for v in values)


def test_the_recurrence_runs_line_10_11_once_per_scale_from_zero():
    from gradlab.symbolic.fappy_claims import L_run, L_scale, pairs_active, pairs_all

    halving = (L_run + L_scale / pairs_all) / 2
    # ((((0 + 1/4) / 2 + 2/4) / 2 + 3/4) / 2 + 4/4) / 2 = (0.53125 + 1) / 2 by hand
    assert run_recurrence(halving, [1.0, 2.0, 3.0, 4.0], [1, 1, 1, 1], 4) == pytest.approx(
        0.765625, abs=1e-15
    )
    official = (L_run + L_scale) / pairs_active - pairs_all
    # (0 + 6) / 3 - 7 = -5, then (-5 + 1) / 2 - 7 = -9
    assert run_recurrence(official, [6.0, 1.0], [3, 2], 7) == pytest.approx(-9.0, abs=1e-15)
    with pytest.raises(ValueError, match="zip"):
        run_recurrence(halving, [1.0, 2.0], [1], 4)


# --- the checks, given forms the seed does not print -------------------------------------------


def _kernel_form(factor_where):
    """EQ3 times 11/10 where ``factor_where`` holds (a SymPy condition), EQ3 elsewhere."""
    from gradlab.symbolic.fappy_claims import EQ3

    return Form(sp.Piecewise((EQ3 * sp.Rational(11, 10), factor_where), (EQ3, True)))


def test_a_kernel_a_thousandth_too_heavy_misses_unity_by_a_thousandth():
    from gradlab.symbolic.fappy_claims import EQ3

    # every weight 1.001 times the triangle: the weights of any s sum to 1.001
    verdict = check_kernel(Form(EQ3 * sp.Rational(1001, 1000)))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "the weights miss partition of unity or the mean by 0.001.",
    )


@pytest.mark.parametrize("delta", ["2", "1/2", "1/8"])
def test_the_kernel_check_covers_each_delta_it_names(delta):
    from gradlab.symbolic.fappy_claims import width

    # a kernel 10 % too heavy at that Delta only: the weights of every s there sum to 1.1
    verdict = check_kernel(_kernel_form(sp.Eq(width, sp.Rational(delta))))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "the weights miss partition of unity or the mean by 0.1.",
    )


def test_the_kernel_check_samples_s_0_on_its_grid_of_101_points():
    from gradlab.symbolic.fappy_claims import s

    # 10 % too heavy within 1e-3 of s = 0 only: the grid -1, -0.98, ..., 1 has s = 0
    verdict = check_kernel(_kernel_form(sp.Abs(s) < sp.Rational(1, 1000)))
    assert verdict.verdict == "fails"
    assert verdict.detail.endswith("by 0.1.")


def test_the_kernel_check_notices_a_wrong_mass_with_a_right_mean():
    from gradlab.symbolic.fappy_claims import EQ3, mid

    # 1/100 more on the boundary b_u = 0 for every s: the mean sum_u w_u b_u is unchanged
    # (b_u = 0), the mass is 1.01
    bump = sp.Piecewise((sp.Rational(1, 100), sp.Abs(mid) < sp.Rational(1, 10**9)), (0, True))
    verdict = check_kernel(Form(EQ3 + bump))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "the weights miss partition of unity or the mean by 0.01.",
    )


def _height_errors(offsets):
    """max over Delta = 1/2, 1/4 and 37 points of [-0.99, 0.99] of the heights' mass and mean
    errors, with the heights on b_(t + offsets) (the check's documented grid)."""
    worst = 0.0
    for delta in (0.5, 0.25):
        for x in np.linspace(-0.99, 0.99, 37):
            t = _reference_bin(float(x), delta)
            left, right = _hat(x, t + offsets[0], delta), _hat(x, t + offsets[1], delta)
            b_t, b_t1 = -1 + t * delta, -1 + (t + 1) * delta
            worst = max(worst, abs(left + right - 1), abs(left * b_t + right * b_t1 - x))
    return worst


@pytest.mark.parametrize("offsets", [(2, 3), (1, 2), (0, 0), (-1, 1), (1, 0), (-1, 0)])
def test_heights_on_other_bins_miss_mass_or_mean_by_the_loop_s_error(offsets):
    t = sp.Symbol("t")
    verdict = check_heights(Form({"h_left bin": t + offsets[0], "h_right bin": t + offsets[1]}))
    worst = _height_errors(offsets)
    assert worst >= 0.5
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"the heights miss s_ij's mass or mean by {worst:.3g}.",
    )


def test_a_normaliser_a_thousandth_too_large_misses_the_mass_by_a_thousandth():
    from gradlab.symbolic.fappy_claims import Nn

    verdict = check_negative_histogram(Form(sp.Rational(1001, 1000) / Nn))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "the histogram misses mass or mean by 0.001.",
    )


def _documented_negative_counts():
    # the check's draws (numpy default_rng(4)): 10 sets of 1..8 uniform negatives
    rng = np.random.default_rng(4)
    counts = []
    for _ in range(10):
        counts.append(len(rng.uniform(-1, 1, int(rng.integers(1, 9)))))
    return counts


@pytest.mark.parametrize("count", range(1, 10))
def test_the_histogram_check_sees_a_normaliser_wrong_at_one_drawn_set_size(count):
    from gradlab.symbolic.fappy_claims import Nn

    # twice the mass for sets of `count` negatives: the mass error is 1 when the check drew
    # such a set, and nothing otherwise (it draws 2, 3, 6 and 8 negatives)
    verdict = check_negative_histogram(
        Form(sp.Piecewise((2 / Nn, sp.Eq(Nn, count)), (1 / Nn, True)))
    )
    drawn = count in _documented_negative_counts()
    assert drawn == (count in (2, 3, 6, 8))
    assert verdict.verdict == ("fails" if drawn else "holds")
    if drawn:
        assert verdict.detail == "the histogram misses mass or mean by 1."


def test_fig2_s_rate_fails_when_the_printed_percent_is_a_tenth_off():
    verdict = check_fig2(Form({"closer": 5, "negatives": 7, "printed percent": 71.5}))
    assert (verdict.verdict, verdict.detail) == ("fails", "5/7 = 71.4286%, printed 71.5%.")
    verdict = check_fig2(Form({"closer": 5, "negatives": 6, "printed percent": 71.4}))
    assert (verdict.verdict, verdict.detail) == ("fails", "5/6 = 83.3333%, printed 71.4%.")


def test_fig2_s_rate_allows_less_than_1e_9_points_of_rounding():
    # 0 of 7 is 0 %: a printed 1e-9 % is off by exactly 1e-9, not less
    assert (
        check_fig2(Form({"closer": 0, "negatives": 7, "printed percent": 1e-9})).verdict == "fails"
    )
    assert (
        check_fig2(Form({"closer": 0, "negatives": 7, "printed percent": 5e-10})).verdict == "holds"
    )


def test_a_bin_count_without_the_plus_1_is_wrong_at_every_delta():
    from gradlab.symbolic.fappy_claims import width

    # -1, -1 + Delta, ..., 1 are 2/Delta + 1 boundaries: 2, 3, 5, 9 and 201
    expected = (
        "(Delta, boundaries, printed n) = [(2.0, 2, 1.0), (1.0, 3, 2.0), (0.5, 5, 4.0), "
        "(0.25, 9, 8.0), (0.01, 201, 200.0)]."
    )
    for form in (2 / width, sp.Piecewise((2 / width, width > 0), (0, True))):
        verdict = check_bin_count(Form(form))
        assert (verdict.verdict, verdict.detail) == ("fails", expected)


def test_a_probability_a_hundredth_above_the_mean_of_the_two_reaches_1_01():
    p_i, p_j = sp.symbols("P_i P_j")
    # some of the 200 configurations have every negative above s_ij: P_i = P_j = 1
    verdict = check_probability_definition(Form((p_i + p_j) / 2 * sp.Rational(101, 100)))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "reaches 1.010 > 1 on 200 random configurations: a sum of two probabilities, not a "
        "probability.",
    )


def _corrected_negative_gradient():
    from gradlab.symbolic.fappy_claims import Nn, h_left, h_right, mid, s, width

    return sp.Piecewise(
        (h_right / (Nn * width), (s >= mid) & (s < mid + width)),
        (h_left / (Nn * width), (s >= mid - width) & (s < mid)),
        (0, True),
    )


def test_a_negative_gradient_a_thousandth_off_fails_at_tolerance_1e_6():
    # the gradients are h/(|N| Delta) >= 0.2 / (5 / 4) on their support: off by >= 1.6e-4
    right = _corrected_negative_gradient()
    assert check_gradient_value(Form(right)).verdict == "holds"
    verdict = check_gradient_value(Form(right * sp.Rational(1001, 1000)))
    assert verdict.verdict == "fails"
    assert 1e-4 < float(verdict.detail.split("= ")[1].split(" ")[0]) < 1e-2


def test_a_pair_gradient_a_thousandth_off_fails_at_tolerance_1e_6():
    h_i, h_j, width = sp.symbols("h_i^t h_j^t Delta")
    right = -(h_i + h_j) / width
    assert check_pair_gradient(Form(right)).verdict == "holds"
    verdict = check_pair_gradient(Form(right * sp.Rational(1001, 1000)))
    assert verdict.verdict == "fails"
    assert 1e-5 < float(verdict.detail.split("= ")[1].split(" ")[0]) < 1e-1


def test_a_caption_ring_1e_6_too_narrow_misses_s_at_b_t_and_delta_l2():
    from gradlab.symbolic.fappy_claims import hi, mid

    # d_t = sqrt(2 - 2 b_t) - 1e-6: s = b_t maps to sqrt(2 - 2 b_t), 1e-6 outside the ring,
    # and d_t - d_(t+1) misses Delta^L2 by 1e-6 (the first three problems are printed)
    ring = {"d_t": sp.sqrt(2 - 2 * mid) - sp.Rational(1, 10**6), "d_(t+1)": sp.sqrt(2 - 2 * hi)}
    verdict = check_caption(Form(ring))
    root = math.sqrt
    first = (f"s = -0.750 -> d = {root(3.5):.3f} not in [d_(t+1), d_t] = [{root(3):.3f}, "
             f"{root(3.5) - 1e-6:.3f}]")
    gap = f"d_t - d_(t+1) = {root(3.5) - 1e-6 - root(3):.3f}, Delta^L2 = {root(3.5) - root(3):.3f}"
    third = (f"s = -0.250 -> d = {root(2.5):.3f} not in [d_(t+1), d_t] = [{root(2):.3f}, "
             f"{root(2.5) - 1e-6:.3f}]")
    assert (verdict.verdict, verdict.detail) == ("fails", f"{first}; {gap}; {third}.")


def test_a_caption_ring_with_its_ends_swapped_is_said_empty_once_per_bin():
    from gradlab.symbolic.fappy_claims import hi, mid

    # the caption's ring, d_t and d_(t+1) swapped: [d_(t+1), d_t] runs backwards, and a
    # distance "not in [1.871, 1.732]" at 1.871 read as a contradiction
    ring = {"d_t": sp.sqrt(2 - 2 * hi), "d_(t+1)": sp.sqrt(2 - 2 * mid)}
    verdict = check_caption(Form(ring))
    root = math.sqrt

    def empty(b_t):
        return (f"at b_t = {b_t:g} the printed [d_(t+1), d_t] = [{root(2 - 2 * b_t):.3f}, "
                f"{root(2 - 2 * (b_t + 0.25)):.3f}] is empty (its ends in reverse order): "
                f"s = {b_t:.3f} -> d = {root(2 - 2 * b_t):.3f} and s = {b_t + 0.25:.3f} -> "
                f"d = {root(2 - 2 * (b_t + 0.25)):.3f} lie outside it")

    gap = f"d_t - d_(t+1) = {root(3) - root(3.5):.3f}, Delta^L2 = {root(3.5) - root(3):.3f}"
    assert (verdict.verdict, verdict.detail) == (
        "fails", f"{empty(-0.75)}; {gap}; {empty(-0.25)}.")


def test_a_caption_ring_1e_6_too_wide_misses_only_delta_l2():
    from gradlab.symbolic.fappy_claims import hi, mid

    ring = {"d_t": sp.sqrt(2 - 2 * mid) + sp.Rational(1, 10**6), "d_(t+1)": sp.sqrt(2 - 2 * hi)}
    verdict = check_caption(Form(ring))
    assert (verdict.verdict, verdict.detail) == ("fails", _caption_gaps(1e-6))


def _caption_gaps(offset: float) -> str:
    """The caption check's failure detail, by hand: at b = -0.75, -0.25, 0.25 the printed gap
    ``d_t - d_(t+1)`` (``d_t`` moved by ``offset``) next to Delta^L2 = sqrt(2-2b) - sqrt(1.5-2b)."""
    root = math.sqrt
    gaps = [
        f"d_t - d_(t+1) = {root(2 - 2 * b) + offset - root(1.5 - 2 * b):.3f}, "
        f"Delta^L2 = {root(2 - 2 * b) - root(1.5 - 2 * b):.3f}"
        for b in (-0.75, -0.25, 0.25)
    ]
    return "; ".join(gaps) + "."


def _delta_l2_with_dip(centre):
    from gradlab.symbolic.fappy_claims import hi, mid, width

    # the appendix's Delta^L2 minus 10 Delta exp(-1000 (b_t - centre)^2): its Delta-derivative
    # drops by ~10 at b_t = centre only (the printed part's derivative is in [0.5, 2.3])
    dip = 10 * width * sp.exp(-1000 * (mid - centre) ** 2)
    return Form(sp.sqrt(2 - 2 * mid) - sp.sqrt(2 - 2 * hi) - dip)


@pytest.mark.parametrize(("centre", "b_t"), [("-1", -1.0), ("4/5", 0.8)])
def test_the_delta_l2_check_covers_both_ends_of_its_grid(centre, b_t):
    verdict = check_delta_l2(_delta_l2_with_dip(sp.Rational(centre)))
    # at b_t, Delta = 1/10: d/dDelta of -sqrt(2 - 2 (b_t + Delta)) is 1/sqrt(2 - 2 b_t - 0.2)
    minimum = 1 / math.sqrt(2 - 2 * b_t - 0.2) - 10
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"dDelta^L2/dDelta is not positive on the grid (min {minimum:.3g}).",
    )


def test_the_delta_l2_check_differentiates_at_delta_a_tenth():
    from gradlab.symbolic.fappy_claims import hi, mid, width

    # + 100 (Delta - 1/10)^2 adds 200 (Delta - 1/10) to the derivative: 0 at Delta = 1/10
    printed = sp.sqrt(2 - 2 * mid) - sp.sqrt(2 - 2 * hi)
    bowl = Form(printed + 100 * (width - sp.Rational(1, 10)) ** 2)
    assert check_delta_l2(bowl).verdict == "holds"
    shifted = Form(printed + 100 * (width - sp.Rational(1, 9)) ** 2)
    assert check_delta_l2(shifted).verdict == "fails"


def test_table1_signs_reversed_on_both_datasets_print_both_problems():
    # Table 1: best FAPPY row minus Histogram is > 0 at every K on CUB (e.g. 50.6 - 50.3) and
    # < 0 at every K on SOP (e.g. 63.5 - 63.9)
    reversed_signs = {
        "CUB-200-2011": -1,
        "CUB-200-2011 rival": "Histogram",
        "Stanford Online Products": 1,
        "Stanford Online Products rival": "Histogram",
    }
    verdict = check_table1_comparison(Form(reversed_signs))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "CUB-200-2011: signs of best FAPPY - Histogram per K are [1]; Stanford Online Products: "
        "signs of best FAPPY - Histogram per K are [-1].",
    )


def test_table2_s_smallest_gap_is_2_9_points_not_more():
    # Table 2, large top 1: worst FAPPY 42.4 - best other 39.5 = 2.9, the smallest column gap
    # the stated margin is that gap at the table's 0.1-point resolution: 2.9, not 2.8 or 3
    assert check_table2(Form({"margin (points)": sp.Rational(29, 10)})).verdict == "holds"
    for margin in (sp.Rational(28, 10), 3):
        verdict = check_table2(Form({"margin (points)": margin}))
        assert (verdict.verdict, verdict.detail) == (
            "fails",
            f"the smallest gap is 2.9 points, not the stated {float(margin):g} (at the table's "
            "0.1-point resolution).",
        )


def test_a_recurrence_a_millionth_heavy_is_not_the_mean_fused_loss():
    from gradlab.symbolic.fappy_claims import L_run, L_scale, pairs_all

    # the mean fused loss of the documented batch is about 0.8: off by about 8e-7 > 1e-12
    printed = (L_run + L_scale / pairs_all) / 2
    assert check_normalization(Form(printed)).verdict == "holds"
    verdict = check_normalization(Form(printed * (1 + sp.Rational(1, 10**6))))
    assert verdict.verdict == "fails"
    assert verdict.detail.startswith("the recurrence gives 0.80")


def test_eq7_at_the_edges_with_a_fifth_too_much_mass_leaves_0_2():
    import ast

    from gradlab.symbolic.fappy_claims import Nn

    # 1.2/|N|: one negative at +1 above s_ij = -1 puts 1.2 on each side, P = 2.4 > 2; every
    # value stays finite
    # (as a Piecewise, which math evaluates to floats)
    verdict = check_edges(Form(sp.Piecewise((sp.Rational(6, 5) / Nn, Nn > 0), (0, True))))
    assert verdict.verdict == "fails"
    head, _, listed = verdict.detail.partition(": ")
    assert head == "non-finite or out-of-range values at the edges"
    values = ast.literal_eval(listed.removesuffix("..."))
    corners = [(-1.0, n, d) for n in (-1.0, 0.0, 1.0) for d in (2.0, 0.25)]
    expected = [2 * 1.2 * _estimate(s_ij, [n], d) for s_ij, n, d in corners]
    assert values == pytest.approx(expected, abs=1e-12)
    assert max(values) == pytest.approx(2.4)


def test_fusion_weights_of_a_quartering_recurrence_are_printed_with_their_ratios():
    from gradlab.symbolic.fappy_claims import L_run, L_scale, pairs_active, pairs_all

    # (L + L_Delta / P) / 4 over four scales: a one-hot scale k of 4 is weighted 4^-(4 - k)
    verdict = check_fusion_weights(Form((L_run + L_scale / pairs_all) / 4))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "Delta = 2, 1, 1/2, 1/4 get the weights [0.00390625, 0.015625, 0.0625, 0.25] "
        "(ratios [4.0, 4.0, 4.0]).",
    )
    # one active pair per scale: dividing by the active count changes nothing
    verdict = check_fusion_weights(Form((L_run + L_scale / pairs_active) / 2))
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "Delta = 2, 1, 1/2, 1/4 get the weights [0.0625, 0.125, 0.25, 0.5]: each doubling of "
        "Delta halves it.",
    )


@pytest.mark.parametrize("key", ["h normaliser", "line 10"])
def test_the_empty_set_check_reads_undefined_arithmetic_as_nan(key):
    from gradlab.symbolic.fappy_claims import L_scale, Nn, pairs_all

    forms = {"h normaliser": 1 / sp.Max(Nn, 1), "line 10": L_scale / sp.Max(pairs_all, 1)}
    # log(0) is undefined where the set is empty, as a division by zero is: the form fails
    undefined = dict(forms)
    undefined[key] = sp.log(Nn) if key == "h normaliser" else L_scale + sp.log(pairs_all)
    verdict = check_empty_negative_set(Form(undefined))
    outcomes = [math.nan, 0.0] if key == "h normaliser" else [0.0, math.nan]
    assert (verdict.verdict, verdict.detail) == ("fails", (
        "with |N_ij| = 0 (one class) or no positive pairs (singletons) the printed divisions "
        f"give {outcomes}."))
    # the other part's symbols are read at values of their own: no error, a verdict
    mixed = dict(forms)
    mixed[key] = 1 / sp.Max(pairs_all, 1) if key == "h normaliser" else L_scale / sp.Max(Nn, 1)
    assert check_empty_negative_set(Form(mixed)).verdict == "holds"


def test_eq7_a_billionth_heavy_misses_the_double_loop_where_p_is_largest():
    from gradlab.symbolic.fappy_claims import EQ7_SIDE

    # the check's 15 documented cases (numpy default_rng(0)): s_ij ~ U(-0.9, 0.9) and two sets
    # of 5 negatives ~ U(-1, 1); a side 1e-9 heavy is off by 1e-9 P, largest where P is
    rng = np.random.default_rng(0)
    cases = [
        (rng.uniform(-0.9, 0.9), rng.uniform(-1, 1, 5).tolist(), rng.uniform(-1, 1, 5).tolist())
        for _ in range(15)
    ]
    sums = [
        _estimate(s_ij, neg_i, 0.25) + _estimate(s_ij, neg_j, 0.25) for s_ij, neg_i, neg_j in cases
    ]
    largest = int(np.argmax(sums))
    verdict = check_eq7(Form(EQ7_SIDE * (1 + sp.Rational(1, 10**9))))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "discrete P(s_neg >= s_pair) at Delta = 1/4, then Delta = 2^-8 against the empirical "
        f"Eq. 6: max |printed - true| = {1e-9 * sums[largest]:.3g} (case {largest + 1} of 15).",
    )


def test_table1_s_largest_change_is_0_4_points_not_less():
    # CUB R@16 of the three FAPPY rows: 90.5, 90.7, 90.3, a spread of 0.4 points
    assert check_stability(Form({"bound (points)": sp.Rational(41, 100)})).verdict == "holds"
    assert check_stability(Form({"bound (points)": sp.Rational(1, 2)})).verdict == "holds"
    verdict = check_stability(Form({"bound (points)": sp.Rational(2, 5)}))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "the largest change across Delta_min in Table 1 is 0.4 points, not in [-0.1, 0.4) (below "
        "the bound, and the bound the tightest at half-point resolution).",
    )
    # a bound of 1 point is true but not the paper's: 0.4 < 0.5, the tighter half-point step
    assert check_stability(Form({"bound (points)": 1})).verdict == "fails"


@pytest.mark.parametrize("key", ["d_t", "d_(t+1)"])
def test_a_ring_with_the_root_of_a_negative_number_raises(key):
    from gradlab.symbolic.fappy_claims import hi, mid

    # sqrt(b - 1) < 0 under the root for every b_t < 1: math refuses it (a numpy lambdify
    # would pass nan on)
    ring = {"d_t": sp.sqrt(2 - 2 * mid), "d_(t+1)": sp.sqrt(2 - 2 * hi)}
    ring[key] = sp.sqrt(mid - 1) if key == "d_t" else sp.sqrt(hi - 1)
    with pytest.raises(ValueError, match="math domain error"):
        check_caption(Form(ring))


def _documented_rates():
    # the Eq. 6 check's 200 configurations (numpy default_rng(6)): s_ij ~ U(-1, 1) and 7
    # negatives of i and of j ~ U(-1, 1); P_i, P_j are the shares of negatives at or above s_ij
    rng = np.random.default_rng(6)
    rates = []
    for _ in range(200):
        s_ij = rng.uniform(-1, 1)
        neg_i, neg_j = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)
        rates.append((sum(x >= s_ij for x in neg_i) / 7, sum(x >= s_ij for x in neg_j) / 7))
    return rates


@pytest.mark.parametrize("first", [True, False])
def test_the_eq6_check_reports_the_largest_value_over_its_200_configurations(first):
    p_i, p_j = sp.symbols("P_i P_j")
    # P_i (1 - P_j) is largest where many of i's negatives and few of j's are above s_ij
    form = p_i * (1 - p_j) if first else p_j * (1 - p_i)
    largest = max(a * (1 - b) if first else b * (1 - a) for a, b in _documented_rates())
    verdict = check_probability_definition(Form(form))
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        f"in [0, 1] on 200 random configurations (max {largest:.3f}).",
    )


def test_the_support_skips_offsets_beyond_plus_1_and_samples_no_offset_4():
    wide = Form({"from bin": -4, "to bin": 5})
    # Delta = 1/5: s_ij = -0.14 in bin 4; offsets -3..3 all fall inside (-1, 1) (offset 4
    # would too: -1 + 8.2 / 5 = 0.64, but it is not sampled)
    wrong = [(o, f, False) for o in (-3, -2, 1, 2, 3) for f in (0.2, 0.7)]
    assert support_mismatches(wide, delta=0.2) == wrong
    # Delta = 2/5: s_ij = 0.72 in the last bin; offsets 1..3 give s_ik >= 1.08, skipped
    expected = [(o, f, False) for o in (-3, -2) for f in (0.2, 0.7)]
    assert support_mismatches(wide, delta=0.4) == expected


def test_the_eq6_check_evaluates_a_piecewise_form_with_math():
    p_i, p_j = sp.symbols("P_i P_j")
    # max(P_i, P_j) as a Piecewise: a float per configuration, at most 1 (both rates reach 1)
    verdict = check_probability_definition(Form(sp.Piecewise((p_i, p_i > p_j), (p_j, True))))
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "in [0, 1] on 200 random configurations (max 1.000).",
    )


def test_a_caption_ring_whose_inner_radius_is_1e_6_too_large_misses_s_at_b_t_plus_1():
    from gradlab.symbolic.fappy_claims import hi, mid

    # d_(t+1) = sqrt(2 - 2 b_(t+1)) + 1e-6: s = b_(t+1) maps 1e-6 below the ring
    ring = {"d_t": sp.sqrt(2 - 2 * mid), "d_(t+1)": sp.sqrt(2 - 2 * hi) + sp.Rational(1, 10**6)}
    verdict = check_caption(Form(ring))
    root = math.sqrt
    first = (f"s = -0.500 -> d = {root(3):.3f} not in [d_(t+1), d_t] = [{root(3) + 1e-6:.3f}, "
             f"{root(3.5):.3f}]")
    gap = f"d_t - d_(t+1) = {root(3.5) - root(3) - 1e-6:.3f}, Delta^L2 = {root(3.5) - root(3):.3f}"
    third = (f"s = 0.000 -> d = {root(2):.3f} not in [d_(t+1), d_t] = [{root(2) + 1e-6:.3f}, "
             f"{root(2.5):.3f}]")
    assert (verdict.verdict, verdict.detail) == ("fails", f"{first}; {gap}; {third}.")


@pytest.mark.parametrize("key", ["d_t", "d_(t+1)"])
def test_a_caption_ring_moved_by_1e_12_keeps_every_s_and_misses_delta_l2_by_a_hair(key):
    from gradlab.symbolic.fappy_claims import hi, mid

    # the ring's edge moved 1e-12 inwards: s = b_t (or b_(t+1)) is still inside within the
    # check's 1e-12 allowance, but d_t - d_(t+1) misses Delta^L2 by 1e-12 and rounding, > 1e-12
    ring = {"d_t": sp.sqrt(2 - 2 * mid), "d_(t+1)": sp.sqrt(2 - 2 * hi)}
    ring[key] += -sp.Rational(1, 10**12) if key == "d_t" else sp.Rational(1, 10**12)
    verdict = check_caption(Form(ring))
    assert (verdict.verdict, verdict.detail) == ("fails", _caption_gaps(0.0))


def _limit_errors(factor):
    """|factor x Eq. 7 at Delta = 2^-8 - the empirical Eq. 6| on the limit check's documented
    cases: default_rng(0) after the 15 exact cases, then 5 of (s_ij, 30 + 30 negatives); also
    returns a generator positioned where the check starts drawing them."""
    rng = np.random.default_rng(0)
    for _ in range(15):
        rng.uniform(-0.9, 0.9), rng.uniform(-1, 1, 5), rng.uniform(-1, 1, 5)
    start = np.random.default_rng(0)
    start.bit_generator.state = rng.bit_generator.state
    errors = []
    for _ in range(5):
        s_ij = float(rng.uniform(-0.9, 0.9))
        neg_i, neg_j = rng.uniform(-1, 1, 30).tolist(), rng.uniform(-1, 1, 30).tolist()
        estimate = _estimate(s_ij, neg_i, 2 / 2**9) + _estimate(s_ij, neg_j, 2 / 2**9)
        empirical = sum(x >= s_ij for x in neg_i) / 30 + sum(x >= s_ij for x in neg_j) / 30
        errors.append(abs(factor * estimate - empirical))
    return errors, start


@pytest.mark.slow
def test_eq7_at_delta_2_to_minus_8_is_within_0_04_of_the_empirical_eq6():
    from gradlab.symbolic.fappy_claims import EQ7_SIDE

    errors, rng = _limit_errors(1)
    verdict = eq6_limit(EQ7_SIDE, rng)
    assert max(errors) <= 0.04
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        f"max |printed - true| = {max(errors):.2e} over 5 cases.",
    )


@pytest.mark.slow
def test_eq7_five_percent_heavy_at_delta_2_to_minus_8_is_off_by_more_than_0_04():
    from gradlab.symbolic.fappy_claims import EQ7_SIDE

    errors, rng = _limit_errors(1.05)
    verdict = eq6_limit(EQ7_SIDE * sp.Rational(105, 100), rng)
    worst = int(np.argmax(errors))
    assert errors[worst] > 0.04
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"max |printed - true| = {errors[worst]:.3g} (case {worst + 1} of 5).",
    )


def test_every_fappy_correction_is_named_corrected():
    # Form.name says what a form is: "printed", "corrected" or the mutation (claims.Form)
    from gradlab.symbolic.fappy_claims import claims

    corrected = [claim.label for claim in claims() if claim.correction is not None]
    assert len(corrected) == 9
    for claim in claims():
        assert claim.printed.name == "printed", claim.label
        if claim.correction is not None:
            assert claim.correction.name == "corrected", claim.label


def test_a_side_with_max_is_evaluated_with_math_to_a_python_float():
    from gradlab.symbolic.fappy_claims import S_t, S_t1, h_left, h_right

    # max(h_left S_t, h_right S_(t+1)) per negative set, against the loop
    side = sp.Max(h_left * S_t, h_right * S_t1)
    neg_i, neg_j = [-0.3, 0.4, 0.9], [0.2, -0.8]
    got = pair_probability(0.1, neg_i, neg_j, 0.25, side=side)

    def larger(left, right, above_t, above_t1):
        return max(left * above_t, right * above_t1)

    expected = sum(_estimate_general(0.1, n, 0.25, side=larger) for n in (neg_i, neg_j))
    assert got == pytest.approx(expected, abs=1e-12)
    assert type(got) is float


def test_fusion_weights_of_a_recurrence_with_max_print_as_plain_floats():
    from gradlab.symbolic.fappy_claims import L_run, L_scale, pairs_all

    verdict = check_fusion_weights(Form((L_run + L_scale / sp.Max(pairs_all, 1)) / 2))
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "Delta = 2, 1, 1/2, 1/4 get the weights [0.0625, 0.125, 0.25, 0.5]: each doubling of "
        "Delta halves it.",
    )


def test_the_gradient_checks_evaluate_their_forms_with_math():
    from gradlab.symbolic.fappy_claims import s, width

    # sqrt(s - 2) is the root of a negative number for every s_ik, sqrt(-Delta) for every Delta:
    # math refuses them (a numpy lambdify would pass nan on as a plain failure)
    with pytest.raises(ValueError, match="math domain error"):
        check_gradient_value(Form(sp.sqrt(s - 2)))
    with pytest.raises(ValueError, match="math domain error"):
        check_pair_gradient(Form(sp.sqrt(-width)))


def test_the_histogram_and_eq6_checks_evaluate_their_forms_with_math():
    from gradlab.symbolic.fappy_claims import Nn

    # roots of negative numbers for every drawn set size and every rate: math refuses them (a
    # numpy lambdify would pass nan on as a plain failure)
    with pytest.raises(ValueError, match="math domain error"):
        check_negative_histogram(Form(sp.sqrt(Nn - 10)))
    with pytest.raises(ValueError, match="math domain error"):
        check_probability_definition(Form(sp.sqrt(sp.Symbol("P_i") - 2)))


def test_a_constant_delta_l2_does_not_grow_with_delta():
    verdict = check_delta_l2(Form(sp.Integer(1)))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "dDelta^L2/dDelta is not positive on the grid (min 0).",
    )


def test_the_kernel_and_edge_checks_evaluate_their_forms_with_math():
    from gradlab.symbolic.fappy_claims import Nn, s

    # roots of negative numbers: math refuses them (a numpy lambdify would pass nan on)
    with pytest.raises(ValueError, match="math domain error"):
        check_kernel(Form(sp.sqrt(s - 2)))
    with pytest.raises(ValueError, match="math domain error"):
        check_edges(Form(sp.sqrt(Nn - 10)))


def test_the_kernel_check_sums_the_weights_of_the_boundaries_minus_1_to_1_only():
    from gradlab.symbolic.fappy_claims import EQ3, mid

    # 1/100 on every boundary past +1: no boundary of Eq. 1-7 lies there (n = 2/Delta + 1)
    beyond = sp.Piecewise((sp.Rational(1, 100), mid > 1 + sp.Rational(1, 10**6)), (0, True))
    assert check_kernel(Form(EQ3 + beyond)).verdict == "holds"


# --- issue 15: the checks at their edges (ties, exact tolerances, details, stubbed helpers) ----


class _TiedDraws:
    """A generator for ``eq6_limit`` whose every draw is 0.0: s_ij = 0 and all 30 + 30
    negatives tie with it, on the boundary b_256 of Delta = 2^-8."""

    def uniform(self, low, high, size=None):
        return 0.0 if size is None else np.zeros(size)


def test_eq6_counts_negatives_tied_with_the_pair_as_at_or_above_it():
    from gradlab.symbolic.fappy_claims import EQ7_SIDE

    # Eq. 6: P(s_ik >= s_ij) = 1 for every tied negative, on each side: 1 + 1 = 2. Eq. 7 puts
    # the pair and every negative wholly on b_256 (h_left = 1, S_t = 1): 2 as well
    assert pair_probability(0.0, [0.0] * 30, [0.0] * 30, 2.0 / 2**9) == 2.0
    verdict = eq6_limit(EQ7_SIDE, _TiedDraws())
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "max |printed - true| = 0.00e+00 over 5 cases.",
    )


def test_the_support_skips_a_negative_exactly_at_plus_1():
    # Delta = 2/7.2: offset 3, fraction 0.2 puts s_ik at -1 + 7.2 Delta = 1.0 exactly, the
    # end of the cosine range, which the support does not sample (only s_ik in (-1, 1))
    delta = 2 / 7.2
    assert -1 + (4 + 3 + 0.2) * delta == 1.0
    for claimed in ({"from bin": -4, "to bin": 5}, {"from bin": 0, "to bin": 0}):
        sampled = {(o, f) for o, f, _ in support_mismatches(Form(claimed), delta=delta)}
        assert (3, 0.2) not in sampled


def test_the_support_differentiates_with_three_negatives_as_its_detail_says():
    from gradlab.symbolic.fappy_claims import check_support, negative_gradient

    counts = []

    def recording(s_ij, s_ik, delta, count):
        counts.append(count)
        return negative_gradient(s_ij, s_ik, delta, count)

    verdict = check_support(Form({"from bin": -1, "to bin": 1}), gradient=recording)
    assert verdict.verdict == "holds" and "|N| = 3" in verdict.detail
    assert counts and set(counts) == {3}


def test_the_support_counts_a_gradient_of_1e_6_as_zero_and_just_above_as_non_zero():
    # finite-difference noise is far below 1e-6: the support calls |dP/ds_ik| > 1e-6 non-zero
    sampled = [(o, f) for o in range(-3, 4) for f in (0.2, 0.7)]
    everywhere, nowhere = Form({"from bin": -4, "to bin": 5}), Form({"from bin": 0, "to bin": 0})
    at_bound = lambda *args: 1e-6  # noqa: E731
    above = lambda *args: math.nextafter(1e-6, 1)  # noqa: E731
    assert support_mismatches(everywhere, gradient=at_bound) == [(o, f, False) for o, f in sampled]
    assert support_mismatches(nowhere, gradient=at_bound) == []
    assert support_mismatches(everywhere, gradient=above) == []
    assert support_mismatches(nowhere, gradient=above) == [(o, f, True) for o, f in sampled]


def _guard(**changes):
    from gradlab.symbolic.fappy_claims import s, width

    return Form({"guard": 1 - s >= width, "Delta_cur": 2, "only s_ij": -1, **changes})


def test_the_guard_admits_only_minus_1_at_delta_2_and_no_pair_of_the_batch():
    from gradlab.symbolic.fappy_claims import check_guard

    # 1 - s >= 2 on [-1, 1]: s = -1 only; 1 - s >= 1, 1/2, 1/4: s <= 0, 1/2, 3/4 (lengths 1, 3/2,
    # 7/4 by hand); the batch's cosines of random vectors are never exactly -1
    verdict = check_guard(_guard())
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "at Delta_cur = 2 line 5 admits only s_ij = -1, a null set (0 of the 5 positive pairs of "
        "a batch of 8 random unit vectors pass), so that scale adds 0 to L; the next scales admit "
        "s_ij in sets of length 1, 3/2, 7/4.",
    )


@pytest.mark.parametrize(
    ("changes", "admitted"),
    [
        ({"Delta_cur": 1}, "Interval(-1, 0)"),  # a whole interval passes
        ({"Delta_cur": 3}, "EmptySet"),  # nothing passes
        ({"only s_ij": 0}, "{-1}"),  # the wrong point
        ({"strict": True}, "EmptySet"),  # 1 - s > 2 on [-1, 1]: nothing
    ],
)
def test_the_guard_fails_unless_exactly_the_stated_point_passes(changes, admitted):
    from gradlab.symbolic.fappy_claims import check_guard, s, width

    if changes.pop("strict", False):
        changes["guard"] = 1 - s > width
    verdict = check_guard(_guard(**changes))
    assert verdict.verdict == "fails"
    assert verdict.detail.startswith(f"line 5 admits {admitted} at Delta_cur = ")


def test_the_guard_fails_when_a_later_scale_admits_no_pair():
    from gradlab.symbolic.fappy_claims import check_guard, s, width

    # 1 - s >= 2 whatever Delta_cur: s = -1 only at every scale, so the later scales admit
    # nothing either (lengths 0)
    verdict = check_guard(_guard(guard=(1 - s >= 2 + 0 * width)))
    assert verdict.verdict == "fails"
    assert "{'2': 0, '1': 0, '1/2': 0, '1/4': 0}" in verdict.detail


def test_a_kernel_whose_mean_misses_s_0_by_exactly_1e_12_fails():
    from gradlab.symbolic.fappy_claims import EQ3, mid, s, width

    # at Delta = 1/2 and s = 0 (on the check's grid), 2e-12 of b_0's weight moves to b_(1/2):
    # the mass stays 1 (to rounding), the mean becomes 0.5 * 2e-12 = 1e-12 exactly (doubles);
    # the check's tolerance is strict
    at = sp.Eq(width, sp.Rational(1, 2)) & sp.Eq(s, 0)
    moved = sp.Float(2e-12)
    bump = sp.Piecewise(
        (-moved, at & sp.Eq(mid, 0)), (moved, at & sp.Eq(mid, sp.Rational(1, 2))), (0, True)
    )
    assert 0.5 * 2e-12 == 1e-12 and 0.0 in np.linspace(-1, 1, 101)
    verdict = check_kernel(Form(EQ3 + bump))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "the weights miss partition of unity or the mean by 1e-12.",
    )


def test_the_histogram_check_compares_the_mean_as_well_as_the_mass():
    from gradlab.symbolic.fappy_claims import Nn, check_negative_histogram

    # a histogram of the negated similarities (a distance's orientation) has the right mass
    # and the mirrored mean: off by 2 |mean| for each of the check's 10 documented sets
    def mirrored(negatives, delta, normalizer):
        scale = normalizer(len(negatives))
        bins = len(_boundaries(delta))
        return [scale * sum(_hat(-x, u, delta) for x in negatives) for u in range(bins)]

    rng = np.random.default_rng(4)
    means = [np.mean(rng.uniform(-1, 1, int(rng.integers(1, 9)))) for _ in range(10)]
    verdict = check_negative_histogram(Form(1 / Nn), histogram=mirrored)
    assert verdict.verdict == "fails"
    head, _, worst = verdict.detail.partition(" by ")
    assert head == "the histogram misses mass or mean"
    assert float(worst.removesuffix(".")) == pytest.approx(2 * max(abs(m) for m in means), rel=1e-3)


def test_the_pair_gradient_check_samples_its_documented_pairs():
    from gradlab.symbolic.fappy_claims import check_pair_gradient, pair_probability, width

    # numpy default_rng(2): per Delta = 1/4, 1/2, four s_ij ~ U(-0.8, 0.8), each followed by
    # four negatives of i and four of j ~ U(-1, 1); the check differentiates at s_ij -+ 1e-7
    rng = np.random.default_rng(2)
    documented = []
    for delta in (0.25, 0.5):
        for _ in range(4):
            documented.append((float(rng.uniform(-0.8, 0.8)), delta))
            rng.uniform(-1, 1, 4), rng.uniform(-1, 1, 4)
    evaluated = []

    def recording(s_ij, negatives_i, negatives_j, delta, *args, **kwargs):
        evaluated.append((s_ij, delta))
        return pair_probability(s_ij, negatives_i, negatives_j, delta, *args, **kwargs)

    form = Form(-(sp.Symbol("h_i^t") + sp.Symbol("h_j^t")) / width)
    assert check_pair_gradient(form, probability=recording).verdict == "holds"
    centres = [
        ((a + b) / 2, d) for (a, d), (b, _) in zip(evaluated[::2], evaluated[1::2], strict=True)
    ]
    assert [c for c, _ in centres] == pytest.approx([c for c, _ in documented], abs=1e-12)
    assert [d for _, d in centres] == [d for _, d in documented]


def test_the_l2_check_names_its_witness_by_the_vectors_coordinates():

    from gradlab.symbolic.fappy_claims import check_l2, s

    # sqrt(2 - s)^2 - |x/|x| - y/|y||^2 = (2 - cos) - (2 - 2 cos) = cos(x, y): the witness is a
    # point (x1, x2, x3, y1, y2, y3) where the printed difference is that cosine
    verdict = check_l2(Form(sp.sqrt(2 - s)))
    assert verdict.verdict == "fails"
    text = verdict.detail.removeprefix("printed minus true is ")
    difference, _, rest = text.partition(" at ")
    point = dict(part.split(" = ") for part in rest.removesuffix(
        " (100 digits, the same to 30 of them at a higher working precision)."
    ).split(", "))
    assert list(point) == ["x1", "x2", "x3", "y1", "y2", "y3"]
    x = np.array([float(sp.Rational(point[f"x{k}"])) for k in (1, 2, 3)])
    y = np.array([float(sp.Rational(point[f"y{k}"])) for k in (1, 2, 3)])
    cosine = x @ y / (np.linalg.norm(x) * np.linalg.norm(y))
    assert float(difference) == pytest.approx(cosine, abs=1e-8)


@pytest.mark.slow
def test_the_l2_check_takes_the_vectors_as_real():
    from gradlab.symbolic.fappy_claims import check_l2, s

    # |s|^2 = s^2 for a real cosine: sqrt(2 - 2s + |s|^2 - s^2) is the printed distance, and
    # SymPy proves it only if the coordinates are real (for complex ones |s|^2 != s^2)
    squared_abs = sp.Pow(sp.Abs(s, evaluate=False), 2, evaluate=False)
    verdict = check_l2(Form(sp.sqrt(2 - 2 * s + squared_abs - s**2)))
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "sympy.simplify reduces printed minus true to 0.",
    )


# --- the strict condition, Table 2's spread, Section 4.1's arithmetic, Fig. 2 against Eq. 6 ---


def _moves_by_hand(s_ij, s_ik, t=10, delta=0.125, count=3):
    """Does Eq. 7 with the pair in bin t change with s_ik on either side? The pair's heights
    are the triangles on b_t and b_(t+1); the negative adds hat_t(s_ik) + hat_(t+1)(s_ik) + ...
    to S_t and hat_(t+1)(s_ik) + ... to S_(t+1), over all boundaries at or above them."""
    edges = _boundaries(delta)

    def p(x):
        left, right = _hat(s_ij, t, delta), _hat(s_ij, t + 1, delta)
        above_t = sum(_hat(x, u, delta) for u in range(t, len(edges))) / count
        above_t1 = sum(_hat(x, u, delta) for u in range(t + 1, len(edges))) / count
        return left * above_t + right * above_t1

    step = 1e-6
    return max(abs(p(s_ik + step) - p(s_ik)), abs(p(s_ik) - p(s_ik - step))) / step > 1e-4


def _strict_points():
    # the check's grid: b_t = 1/4 at Delta = 1/8 (t = 10), s_ij at 0, 0.3, 0.7, 1 of its bin
    return [(0.25 + 0.125 * f_ij, -1 + (10 + o + f_ik) * 0.125) for f_ij in (0.0, 0.3, 0.7, 1.0)
            for o in range(-3, 4) for f_ik in (0.0, 0.2, 0.7)]  # fmt: skip


def test_where_the_pair_moves_with_a_negative_matches_a_hand_derivation():
    from gradlab.symbolic.fappy_claims import moves_with_negative

    for s_ij, s_ik in _strict_points():
        expected = _moves_by_hand(s_ij, s_ik)
        assert moves_with_negative(s_ij, s_ik, 10, 0.125) == expected, (s_ij, s_ik)


def test_the_strict_condition_as_printed_misses_the_bin_below_and_s_ik_on_b_t():
    from gradlab.symbolic.fappy_claims import S_IJ, S_IK, check_strict_condition, hi, mid

    printed = sp.And(S_IK > mid, S_IK <= hi, S_IJ > mid, S_IJ <= hi)
    expected = []
    for s_ij, s_ik in _strict_points():
        claimed = 0.25 < s_ik <= 0.375 and 0.25 < s_ij <= 0.375  # b_t = 1/4, b_(t+1) = 3/8
        if claimed != _moves_by_hand(s_ij, s_ik):
            expected.append((round(s_ij, 6), round(s_ik, 6), not claimed))
    # the printed condition leaves out the bin below and s_ik = b_t: it disagrees somewhere
    assert any(s_ik < 0.25 for _, s_ik, _ in expected)
    verdict = check_strict_condition(Form(printed))
    assert verdict.verdict == "fails"
    assert verdict.detail.startswith(f"one-sided differences disagree at {len(expected)} of 84 ")
    assert str(expected[:4]) in verdict.detail


@pytest.mark.slow
def test_the_corrected_strict_condition_holds_and_each_flipped_end_fails():
    from gradlab.symbolic.fappy_claims import STRICT_CORRECTED, check_strict_condition

    assert check_strict_condition(Form(STRICT_CORRECTED)).verdict == "holds"
    flip = {sp.StrictGreaterThan: sp.GreaterThan, sp.GreaterThan: sp.StrictGreaterThan,
            sp.StrictLessThan: sp.LessThan, sp.LessThan: sp.StrictLessThan}  # fmt: skip
    relations = STRICT_CORRECTED.atoms(sp.Rel)
    assert len(relations) == 6
    for relation in relations:
        flipped = STRICT_CORRECTED.xreplace({relation: flip[type(relation)](*relation.args)})
        assert check_strict_condition(Form(flipped)).verdict == "fails", relation


def test_a_strict_condition_that_does_not_evaluate_fails_everywhere():
    from gradlab.symbolic.fappy_claims import S_IK, check_strict_condition

    verdict = check_strict_condition(Form(S_IK > sp.Symbol("c")))
    assert verdict.verdict == "fails" and " 84 of 84 " in verdict.detail


def test_table2_moves_by_0_7_points_across_delta_min_and_leads_by_2_9():
    from gradlab.symbolic.fappy_claims import check_table2_stability

    # by hand from the printed table: small top 5 78.6 - 77.9 and medium top 5 72.6 - 71.9 are
    # the largest spreads; large top 1 42.4 - 39.5 is the smallest lead
    right = {"largest spread (points)": sp.Rational(7, 10),
             "smallest lead (points)": sp.Rational(29, 10)}  # fmt: skip
    assert check_table2_stability(Form(right)).verdict == "holds"
    for key, wrong in (("largest spread (points)", sp.Rational(6, 10)),
                       ("smallest lead (points)", 3)):  # fmt: skip
        verdict = check_table2_stability(Form({**right, key: wrong}))
        assert verdict.verdict == "fails"
        assert verdict.detail.startswith(
            "Table 2 gives a largest spread of 0.7 and a smallest lead of 2.9"
        )


def _printed_datasets():
    # Section 4.1 retyped here, one (dataset, part, classes, images) per printed phrase
    printed = [
        ("CUB-200-2011", "all", 200, 11788), ("CUB-200-2011", "train", 100, 5864),
        ("CUB-200-2011", "test", 100, 5924),
        ("Stanford Online Products", "all", 22634, 120053),
        ("Stanford Online Products", "train", 11318, 59551),
        ("Stanford Online Products", "test", 11316, 60502),
        ("VehicleID", "all", 26267, 221763), ("VehicleID", "train", 13134, 110178),
        ("VehicleID", "test", 13133, 111585), ("VehicleID", "small test", 800, 7332),
        ("VehicleID", "medium test", 1600, 12995), ("VehicleID", "large test", 2400, 20038),
    ]  # fmt: skip
    value = {}
    for dataset, part, classes, images in printed:
        value[f"{dataset} {part} classes"], value[f"{dataset} {part} images"] = classes, images
    return value


def test_section_4_1_adds_up_and_a_wrong_count_is_named():
    from gradlab.symbolic.fappy_claims import check_datasets

    assert 5864 + 5924 == 11788 and 59551 + 60502 == 120053 and 110178 + 111585 == 221763
    assert check_datasets(Form(_printed_datasets())).verdict == "holds"
    wrong = {**_printed_datasets(), "Stanford Online Products train classes": 11316}
    verdict = check_datasets(Form(wrong))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "Stanford Online Products: 11316 + 11316 training and test classes != 22634.",
    )
    verdict = check_datasets(Form({**_printed_datasets(), "VehicleID large test classes": 1500}))
    assert verdict.verdict == "fails" and "not nested" in verdict.detail


def test_fig2_s_one_sided_rate_is_not_eq6_and_the_two_sided_one_is():
    from gradlab.symbolic.fappy_claims import check_fig2_eq6

    n_i, n_j, n = sp.symbols("n_i n_j N", positive=True)
    assert check_fig2_eq6(Form(n_i / n)).verdict == "fails"
    assert check_fig2_eq6(Form((n_i + n_j) / n)).verdict == "holds"
    assert check_fig2_eq6(Form((n_i + n_j) / (2 * n))).verdict == "fails"


# --- the second checks that reject slips of the accepted forms --------------------------------


def test_eq6_corrected_is_the_share_of_the_pooled_negatives_and_its_slips_are_not():
    from gradlab.symbolic.fappy_claims import check_pooled_rate

    p_i, p_j = sp.symbols("P_i P_j")
    # 7 + 7 negatives: (k_i + k_j) / 14 = (k_i / 7 + k_j / 7) / 2, by hand
    assert check_pooled_rate(Form((p_i + p_j) / 2)).verdict == "holds"
    for slip in (p_i + p_j, p_i / 2, (p_i - p_j) / 2, -(p_i + p_j) / 2):
        assert check_pooled_rate(Form(slip)).verdict == "fails", slip


def test_the_pooled_rate_check_fails_other_rates_by_their_documented_worst_cases():
    """P_i alone, P_i^2 and P_i / 2 + P_j / 3 are not the share of the 14 pooled negatives at
    or above s_ij: each check's largest error and its case, recomputed on the documented draws
    (three forms, so that another sample cannot match all three by chance)."""
    import re

    from gradlab.symbolic.fappy_claims import check_pooled_rate

    rng = np.random.default_rng(6)
    shares = []
    for _ in range(200):
        s_ij = rng.uniform(-1, 1)
        of_i, of_j = rng.uniform(-1, 1, 7), rng.uniform(-1, 1, 7)
        k_i, k_j = sum(x >= s_ij for x in of_i), sum(x >= s_ij for x in of_j)
        shares.append((k_i / 7, k_j / 7, (k_i + k_j) / 14))
    p_i, p_j = sp.symbols("P_i P_j")
    for form, rate in ((p_i, lambda a, b: a), (p_i**2, lambda a, b: a * a),
                       (p_i / 2 + p_j / 3, lambda a, b: a / 2 + b / 3)):  # fmt: skip
        errors = [abs(rate(a, b) - pooled) for a, b, pooled in shares]
        verdict = check_pooled_rate(Form(form))
        found = re.search(r"= ([-+.e0-9]+) \(case (\d+) of (\d+)\)", verdict.detail)
        assert verdict.verdict == "fails", form
        assert float(found.group(1)) == pytest.approx(max(errors), rel=5e-3), form  # 3 digits
        # the detail counts the cases from 1
        assert errors[int(found.group(2)) - 1] == pytest.approx(max(errors), rel=1e-12), form
        assert found.group(3) == "200", form


def test_a_negative_distance_and_wrong_delta_l2_are_rejected():
    from gradlab.symbolic.fappy_claims import (
        check_delta_l2_vectors,
        check_distance_sign,
        hi,
        mid,
        s,
    )

    holds = check_distance_sign(Form(sp.sqrt(2 - 2 * s)))  # 0 at s = 1
    assert (holds.verdict, holds.detail) == ("holds", "non-negative on [-1, 1] (min 0).")
    assert check_distance_sign(Form(-sp.sqrt(2 - 2 * s))).verdict == "fails"
    printed = sp.sqrt(2 - 2 * mid) - sp.sqrt(2 - 2 * hi)
    assert check_delta_l2_vectors(Form(printed)).verdict == "holds"
    for slip in (2 * printed, -printed, sp.sqrt(2 - mid) - sp.sqrt(2 - hi)):
        assert check_delta_l2_vectors(Form(slip)).verdict == "fails", slip


def test_the_fusion_weights_are_per_positive_pair_and_start_at_one_half():
    from gradlab.symbolic.fappy_claims import L_run, L_scale, check_fusion_average, pairs_all

    holds = check_fusion_average(Form((L_run + L_scale / pairs_all) / 2))
    assert (holds.verdict, holds.detail) == ("holds", "the finest scale weighs 1/2 and each "
                                             "coarser one half as much, per positive pair.")
    for slip in ((L_run + L_scale) / 2, L_run + L_scale / pairs_all,
                 (L_run - L_scale / pairs_all) / 2, (L_scale + L_run / pairs_all) / 2):  # fmt: skip
        assert check_fusion_average(Form(slip)).verdict == "fails", slip


def test_at_s_ij_minus_1_every_negative_counts_once_per_side():
    from gradlab.symbolic.fappy_claims import Nn, check_bottom_corner

    holds = check_bottom_corner(Form(1 / Nn))
    assert (holds.verdict, holds.detail) == (
        "holds", "P_ij = 2 at s_ij = -1 for 1, 2 and 3 negatives per side.")
    # 1/|N|^2 and log|N| / |N| agree with 1/|N| at one negative only
    for slip in (1 / Nn**2, sp.log(Nn) / Nn):
        assert check_bottom_corner(Form(slip)).verdict == "fails", slip


def test_the_guarded_divisions_average_where_there_is_something_to_average():
    from gradlab.symbolic.fappy_claims import L_scale, Nn, check_divisions_elsewhere, pairs_all

    right = {"h normaliser": 1 / sp.Max(Nn, 1), "line 10": L_scale / sp.Max(pairs_all, 1)}
    holds = check_divisions_elsewhere(Form(right))
    assert (holds.verdict, holds.detail) == (
        "holds", "the mean over |N| negatives and over the positive pairs, 0 for none.")
    # the last two are right for every count the check tries but one negative (one pair)
    one_off = Nn * (Nn - 2) * (Nn - 3) * (Nn - 4) * (Nn - 5)
    pair_off = pairs_all * (pairs_all - 2) * (pairs_all - 3) * (pairs_all - 4)
    for key, slip in (("h normaliser", 2 / sp.Max(Nn, 1)), ("h normaliser", -1 / sp.Max(Nn, 1)),
                      ("line 10", L_scale), ("line 10", 1 / sp.Max(pairs_all, 1)),
                      ("h normaliser", right["h normaliser"] + one_off),
                      ("line 10", right["line 10"] + pair_off)):  # fmt: skip
        assert check_divisions_elsewhere(Form({**right, key: slip})).verdict == "fails", slip


def test_a_record_rejects_a_form_its_check_cannot_evaluate():
    from gradlab.symbolic.fappy_claims import claims

    by_label = {claim.label: claim for claim in claims()}
    p_i, p_j = sp.symbols("P_i P_j")
    # log of a rate 0: math refuses; the record's check names the error instead of raising
    verdict = by_label["eq6"].check(Form((p_i + p_j) / 2 * sp.log(p_i)))
    assert verdict.verdict == "inconclusive"  # neither shown to hold nor to fail; rejected
    assert verdict.detail.startswith("the form cannot be evaluated where the check needs it (")
    assert "math domain error" in verdict.detail


def test_heights_on_a_bin_that_is_no_index_and_a_fractional_count_fail():
    t = sp.Symbol("t")
    verdict = check_heights(Form({"h_left bin": t * sp.log(t), "h_right bin": t + 1}))
    assert verdict.verdict == "fails" and "are not bin indices" in verdict.detail
    assert check_heights(Form({"h_left bin": -t, "h_right bin": t + 1})).verdict == "fails"
    # 5 of 71.4 negatives is 7.0 %: a printed 7 % would round right, but 71.4 is no count
    fig2 = {"closer": 5, "negatives": sp.Rational(357, 5), "printed percent": 7}
    verdict = check_fig2(Form(fig2))
    assert (verdict.verdict, verdict.detail) == (
        "fails", "5 of 357/5 negatives is not a count of negatives.")


@pytest.mark.slow
def test_records_with_one_root_cause_share_it_and_none_of_them_holds():
    from gradlab.symbolic.claims import evaluate
    from gradlab.symbolic.fappy_claims import claims

    groups = {}
    for claim in claims():
        if claim.cause:
            groups.setdefault(claim.cause, set()).add(claim.label)
            assert evaluate(claim).verdict != "holds", claim.label
    # the appendix's one derivative in s_ik; Eq. 6's sum of two sides (Fig. 2 counts one); the
    # other claims that do not hold, a cause each (what is wrong, in words)
    assert [group for group in groups.values() if len(group) > 1] == [
        {"eq6", "claim-fig2-eq6"},
        {"lemma1", "claim-lemma1-value", "claim-strict-condition"},
    ]
    assert {label for group in groups.values() if len(group) == 1 for label in group} == {
        "claim-pair-gradient", "claim-fig4-caption", "claim-empty-negative-set",
        "claim-fig5-caption"}  # fmt: skip


def test_fig5_s_far_ring_weighs_least_under_algorithm_1_s_weights():
    from gradlab.symbolic.fappy_claims import Delta_min, check_fig5, ring_weights, width

    # by hand: alpha = 1/16, 1/8, 1/4, 1/2 for Delta = 2, 1, 1/2, 1/4, each times the slope of
    # the double-loop estimate at s_ij = 0.3, 3 negatives per side
    alpha = {2.0: 1 / 16, 1.0: 1 / 8, 0.5: 1 / 4, 0.25: 1 / 2}
    expected = {ring: sum(a * abs(_slope(0.3, s_ik, d, 3)) for d, a in alpha.items())
                for ring, s_ik in (("near", 0.2), ("far", -0.6))}  # fmt: skip
    weights = ring_weights(Delta_min / (2 * width))
    assert weights == pytest.approx(expected, abs=1e-6)
    assert expected["near"] > expected["far"]
    printed = {"alpha": Delta_min / (2 * width), "farther ring heavier": 1}
    said = (f"with Algorithm 1's weights {list(alpha.values())} (Delta = 2 .. 1/4) a negative at "
            f"s_ik = 0.2 of a pair at s_ij = 0.3 gets the gradient weight {expected['near']:.3f}, "
            f"one at s_ik = -0.6 (reached only by Delta = 1, 2) {expected['far']:.3f}: the "
            f"nearest ring weighs most")  # fmt: skip
    verdict = check_fig5(Form(printed))
    assert (verdict.verdict, verdict.detail) == ("fails", said + ", not the farthest.")
    verdict = check_fig5(Form({**printed, "farther ring heavier": -1}))
    assert (verdict.verdict, verdict.detail) == ("holds", said + ".")
    # weights that grow with Delta are not Algorithm 1's, whichever ring they favour
    for heavier in (1, -1):
        slip = {"alpha": width / 4, "farther ring heavier": heavier}
        verdict = check_fig5(Form(slip))
        assert verdict.verdict == "fails" and "Algorithm 1 gives" in verdict.detail


def test_at_the_kinks_the_value_is_the_right_one_sided_slope():
    from gradlab.symbolic.fappy_claims import Nn, check_gradient_at_kinks, hi, mid, s, width

    del hi  # b_(t+1) is b_t + Delta in this form
    # by hand at s_ij = 0.1, Delta = 1/2 (t = 2, b_t = 0, h_right = 0.2), s_ik = b_t, |N| = 3:
    # just above b_t the negative moves S_(t+1) at 1/(|N| Delta), so the slope is 0.2 / 1.5
    step = 1e-6
    ahead = _estimate(0.1, [step, -0.999, -0.999], 0.5) - _estimate(0.1, [0.0, -0.999, -0.999], 0.5)
    assert ahead / step == pytest.approx(0.2 / 1.5, abs=1e-6)
    h_left, h_right = sp.symbols("h_left h_right", positive=True)
    corrected = sp.Piecewise((h_right / (Nn * width), (s >= mid) & (s < mid + width)),
                             (h_left / (Nn * width), (s >= mid - width) & (s < mid)), (0, True))
    assert check_gradient_at_kinks(Form(corrected)).verdict == "holds"
    flip = {sp.StrictLessThan: sp.LessThan, sp.GreaterThan: sp.StrictGreaterThan,
            sp.LessThan: sp.StrictLessThan, sp.StrictGreaterThan: sp.GreaterThan}  # fmt: skip
    relations = {str(r): r for r in corrected.atoms(sp.Rel)}
    # the pair's bin closed above, the bin below open below, the pair's bin open below
    for text in ("s < Delta + b_t", "s >= -Delta + b_t", "b_t <= s"):
        relation = relations[text]
        slip = corrected.xreplace({relation: flip[type(relation)](*relation.args)})
        assert check_gradient_at_kinks(Form(slip)).verdict == "fails", slip


# --- what each check samples, where its tolerance ends, what it rejects -------------------------


def test_the_probability_puts_the_heights_on_the_bin_it_is_given_at_the_bin_s_top():
    # s_ij = b_5 = 0.25 at Delta = 1/4 lies in [b_4, b_5] (t = 4, the lemma's closed bin) and in
    # [b_5, b_6] (pair_bin's t = 5). With heights on b_(t+1), b_(t+2) the two bins differ:
    # t = 4 puts the pair's whole mass (the triangle on b_5) on b_(t+1), t = 5 puts none anywhere
    neg_i, neg_j = [-0.3, 0.4, 0.9], [0.2, -0.8]
    edges = _boundaries(0.25)

    def by_hand(negatives, t):
        mass = [sum(_hat(x, u, 0.25) for x in negatives) / len(negatives)
                for u in range(len(edges))]  # fmt: skip
        left, right = _hat(0.25, t + 1, 0.25), _hat(0.25, t + 2, 0.25)
        return left * sum(mass[t:]) + right * sum(mass[t + 1 :])

    for t in (4, 5):
        got = pair_probability(0.25, neg_i, neg_j, 0.25, heights=(1, 2), t=t)
        assert got == pytest.approx(by_hand(neg_i, t) + by_hand(neg_j, t), abs=1e-12), t
    assert by_hand(neg_i, 4) > 0.1 and by_hand(neg_i, 5) == 0.0


@pytest.mark.parametrize("name", ["guard", "ring_weights", "fig5", "pooled_rate", "distance_sign",
                                  "bottom_corner", "normaliser", "line_10", "kinks"])  # fmt: skip
@pytest.mark.slow
def test_the_second_checks_evaluate_their_forms_with_math(name):
    from gradlab.symbolic import fappy_claims as fc

    # roots of negative numbers wherever the check evaluates: math refuses them (a NumPy
    # lambdify would pass nan on as a plain failure)
    p_i = sp.Symbol("P_i")
    right = {"h normaliser": 1 / sp.Max(fc.Nn, 1), "line 10": fc.L_scale / sp.Max(fc.pairs_all, 1)}
    calls = {
        "guard": lambda: fc.check_guard(Form({"guard": sp.sqrt(fc.s - 2) <= fc.width,
                                              "Delta_cur": 2, "only s_ij": -1})),
        "ring_weights": lambda: fc.ring_weights(sp.sqrt(-fc.width)),
        "fig5": lambda: fc.check_fig5(Form({"alpha": sp.sqrt(-fc.width),
                                            "farther ring heavier": -1})),
        "pooled_rate": lambda: fc.check_pooled_rate(Form(sp.sqrt(p_i - 2))),
        "distance_sign": lambda: fc.check_distance_sign(Form(sp.sqrt(fc.s - 2))),
        "bottom_corner": lambda: fc.check_bottom_corner(Form(sp.sqrt(fc.Nn - 10))),
        "normaliser": lambda: fc.check_divisions_elsewhere(
            Form({**right, "h normaliser": sp.sqrt(fc.Nn - 10)})),
        "line_10": lambda: fc.check_divisions_elsewhere(
            Form({**right, "line 10": sp.sqrt(fc.L_scale - 10)})),
        "kinks": lambda: fc.check_gradient_at_kinks(Form(sp.sqrt(fc.s - 2))),
    }  # fmt: skip
    with pytest.raises(ValueError, match="math domain error"):
        calls[name]()


def _kinks_corrected():
    from gradlab.symbolic.fappy_claims import Nn, mid, s, width

    h_left, h_right = sp.symbols("h_left h_right", positive=True)
    return sp.Piecewise((h_right / (Nn * width), (s >= mid) & (s < mid + width)),
                        (h_left / (Nn * width), (s >= mid - width) & (s < mid)),
                        (0, True))  # fmt: skip


def test_the_kink_check_samples_negatives_inside_minus_1_and_1_two_bins_either_side():
    from gradlab.symbolic.fappy_claims import check_gradient_at_kinks, mid, s, width

    corrected = _kinks_corrected()

    def bumped(where):
        return corrected + sp.Piecewise((1, where), (0, True))

    # no similarity lies at or below -1 inside the domain: a form wrong only there still holds
    assert check_gradient_at_kinks(Form(bumped(s <= -1))).verdict == "holds"
    # s_ik = b_(t-2) and b_(t+2) are sampled (s_ij = 0.62 at Delta = 1/2 puts b_(t-2) at -0.5,
    # s_ij = -0.4 puts b_(t+2) at 0.5), b_(t-3) and b_(t+3) are not
    for lo_, hi_, sampled in ((-2.5, -1.5, True), (1.5, 2.5, True), (2.5, 3.5, False)):
        where = (s > mid + lo_ * width) & (s < mid + hi_ * width)
        verdict = check_gradient_at_kinks(Form(bumped(where))).verdict
        assert verdict == ("fails" if sampled else "holds"), (lo_, hi_)


def test_section_4_1_splits_must_grow_strictly_and_may_fill_the_test_set():
    from gradlab.symbolic.fappy_claims import check_datasets

    printed = _printed_datasets()
    # VehicleID's test set has 13,133 vehicles and 111,585 images; small/medium/large splits
    # must be strictly nested (a split equal to the next larger one is not "smaller"), the
    # large one may be the whole test set; classes are bounded by classes, images by images
    cases = {
        "VehicleID small test classes": (1600, "fails"),  # = medium
        "VehicleID medium test classes": (2400, "fails"),  # = large
        "VehicleID large test classes": (13133, "holds"),  # = the test set
        "VehicleID small test images": (12995, "fails"),  # = medium
        "VehicleID medium test images": (20038, "fails"),  # = large
        "VehicleID large test images": (111585, "holds"),  # = the test set
    }
    for key, (count, expected) in cases.items():
        assert check_datasets(Form({**printed, key: count})).verdict == expected, key
    # more vehicles than the test set has, though fewer than its images
    verdict = check_datasets(Form({**printed, "VehicleID large test classes": 20000}))
    assert verdict.verdict == "fails" and "not nested" in verdict.detail
    # a split whose images shrink is caught even while its vehicles grow
    verdict = check_datasets(Form({**printed, "VehicleID small test images": 13000}))
    assert verdict.verdict == "fails" and "not nested" in verdict.detail
    two = {**printed, "CUB-200-2011 train images": 5865,
           "Stanford Online Products test classes": 11317}  # fmt: skip
    verdict = check_datasets(Form(two))
    assert verdict.detail == (
        "CUB-200-2011: 5865 + 5924 training and test images != 11788; "
        "Stanford Online Products: 11318 + 11317 training and test classes != 22634."
    )


def test_table2_s_stability_names_both_stated_numbers_when_wrong():
    from gradlab.symbolic.fappy_claims import check_table2_stability

    stated = {"largest spread (points)": sp.Rational(6, 10),
              "smallest lead (points)": sp.Rational(3)}  # fmt: skip
    verdict = check_table2_stability(Form(stated))
    assert verdict.detail == (
        f"Table 2 gives a largest spread of 0.7 and a smallest lead of 2.9 points; the form "
        f"states {0.6:g} and {3.0:g}."
    )


def test_a_stability_bound_half_a_point_above_the_largest_change_is_the_tightest():
    # the largest change is 0.4 points; bounds in [0.4 + 0, 0.4 + 0.5) are tight at the printed
    # half-point resolution, 0.9 is their upper end (0.9 - 0.5 = 0.4 in doubles as well)
    assert 0.9 - 0.5 == 0.4
    assert check_stability(Form({"bound (points)": sp.Rational(9, 10)})).verdict == "holds"
    assert check_stability(Form({"bound (points)": sp.Rational(91, 100)})).verdict == "fails"


def test_fig2_s_count_may_be_all_negatives_but_not_more():
    verdict = check_fig2(Form({"closer": 7, "negatives": 7, "printed percent": 100}))
    assert (verdict.verdict, verdict.detail) == ("holds", "7/7 = 100.0000% rounds to 100.0%.")
    more = {"closer": 8, "negatives": 7, "printed percent": sp.Rational(1143, 10)}  # 114.3 %
    verdict = check_fig2(Form(more))
    assert (verdict.verdict, verdict.detail) == (
        "fails", "8 of 7 negatives is not a count of negatives.")


def test_fig5_s_sign_must_be_plus_or_minus_1():
    from gradlab.symbolic.fappy_claims import Delta_min, check_fig5, width

    for sign in (0, 2, sp.Rational(1, 2)):
        verdict = check_fig5(Form({"alpha": Delta_min / (2 * width), "farther ring heavier": sign}))
        assert (verdict.verdict, verdict.detail) == (
            "fails",
            f"'farther ring heavier' is {sign}, not +1 (the farthest ring weighs most) or -1 "
            "(the nearest).",
        )
    # SymPy's integers are the same signs
    form = {"alpha": Delta_min / (2 * width), "farther ring heavier": sp.Integer(-1)}
    holds = check_fig5(Form(form))
    assert holds.verdict == "holds"


def test_the_distance_check_samples_nine_points_of_minus_1_to_1():
    from gradlab.symbolic.fappy_claims import check_distance_sign, s

    grid = [-1 + k / 4 for k in range(9)]
    # negative only between 0.1 and 0.2, where none of the nine points lies: the sample misses it
    dip = (s - sp.Rational(1, 10)) * (s - sp.Rational(1, 5))
    lowest = min((x - 0.1) * (x - 0.2) for x in grid)
    verdict = check_distance_sign(Form(dip))
    assert (verdict.verdict, verdict.detail) == (
        "holds", f"non-negative on [-1, 1] (min {lowest:.3g}).")
    # negative only below -1, outside the cosines' range
    assert check_distance_sign(Form(s + 1)).verdict == "holds"
    assert check_distance_sign(Form(s - sp.Rational(1, 2))).verdict == "fails"


def test_the_delta_l2_vector_check_compares_at_its_documented_bins():
    from gradlab.symbolic.fappy_claims import check_delta_l2_vectors, hi, mid

    printed = sp.sqrt(2 - 2 * mid) - sp.sqrt(2 - 2 * hi)
    # b_t = -0.9, -0.5, 0, 0.4 are sampled: a form wrong near one of them fails, near 0.5 holds
    for centre, sampled in ((-0.9, True), (-0.5, True), (0.0, True), (0.4, True), (0.5, False)):
        bump = sp.Piecewise((1, (mid > centre - 0.05) & (mid < centre + 0.05)), (0, True))
        verdict = check_delta_l2_vectors(Form(printed + bump)).verdict
        assert verdict == ("fails" if sampled else "holds"), centre


def test_the_fusion_average_runs_one_and_three_pairs_with_one_active_pair_per_scale():
    from gradlab.symbolic.fappy_claims import (
        L_run,
        L_scale,
        check_fusion_average,
        pairs_active,
        pairs_all,
    )

    right = (L_run + L_scale / pairs_all) / 2
    for count in (1, 3):  # wrong at one pair count only: each count the check runs is needed
        slip = right + sp.Piecewise((1, sp.Eq(pairs_all, count)), (0, True))
        assert check_fusion_average(Form(slip)).verdict == "fails", count
    # the active count is 1 at every scale, so a form that multiplies by it is not told apart
    assert check_fusion_average(Form(right * pairs_active)).verdict == "holds"


def test_the_bottom_corner_needs_the_normaliser_at_one_two_and_three_negatives():
    from gradlab.symbolic.fappy_claims import Nn, check_bottom_corner

    for count in (1, 2, 3):
        slip = sp.Piecewise((2 / Nn, sp.Eq(Nn, count)), (1 / Nn, True))
        verdict = check_bottom_corner(Form(slip))
        assert verdict.verdict == "fails" and verdict.detail.startswith("P_ij at s_ij = -1"), count


def test_the_divisions_check_tries_its_documented_counts_and_totals_only():
    from gradlab.symbolic.fappy_claims import L_scale, Nn, check_divisions_elsewhere, pairs_all

    right = {"h normaliser": 1 / sp.Max(Nn, 1), "line 10": L_scale / sp.Max(pairs_all, 1)}

    def off_where(key, where):
        return Form({**right, key: right[key] + sp.Piecewise((1, where), (0, True))})

    # |N| = 1..5, 1..4 positive pairs, totals 0.7 and 2.5
    assert check_divisions_elsewhere(off_where("h normaliser", sp.Eq(Nn, 6))).verdict == "holds"
    assert check_divisions_elsewhere(off_where("line 10", sp.Eq(pairs_all, 5))).verdict == "holds"
    for total in (0.7, 2.5):
        where = (L_scale > total - 0.05) & (L_scale < total + 0.05) & (pairs_all > 0)
        assert check_divisions_elsewhere(off_where("line 10", where)).verdict == "fails", total
    # an unguarded division is evaluated at zero, where math refuses it: undefined, it fails
    for key, bare, why in (("h normaliser", 1 / Nn, "division by zero"),  # 1 / 0
                           ("line 10", L_scale / pairs_all, "float division by zero")):  # 0.0 / 0
        verdict = check_divisions_elsewhere(Form({**right, key: bare}))
        assert (verdict.verdict, verdict.detail) == ("fails", (
            "the divisions are undefined for no negative or no positive pair "
            f"(ZeroDivisionError: {why})."))
    # 1e-12 for no pairs: the tolerance is strict
    leak = sp.Piecewise((sp.Float(1e-12), sp.Eq(pairs_all, 0)), (L_scale / pairs_all, True))
    verdict = check_divisions_elsewhere(Form({**right, "line 10": leak}))
    assert (verdict.verdict, verdict.detail) == (
        "fails", "the divisions give 1e-12, not 0, for none.")
    # a mean missed where there is something to average is said first; the other part's |N|
    # is read as 3
    verdict = check_divisions_elsewhere(Form({**right, "line 10": L_scale / sp.Max(Nn, 1)}))
    missed = max(abs(total / 3 * c - total) for total in (0.7, 2.5) for c in range(1, 5))
    assert (verdict.verdict, verdict.detail) == (
        "fails", f"the divisions miss the mean by {missed:.3g}.")


@pytest.mark.slow
def test_the_guard_counts_cosines_in_minus_1_to_1_only():
    from gradlab.symbolic.fappy_claims import check_guard, s, width

    # at Delta = 2: s <= -1 or s >= 3/2; at Delta = 1, 1/2, 1/4: s <= 0, 1/2, 3/4 (or >= 3/2)
    guard = (s - (1 - width)) * (s - sp.Rational(3, 2)) >= 0
    verdict = check_guard(Form({"guard": guard, "Delta_cur": 2, "only s_ij": -1}))
    assert verdict.verdict == "holds" and verdict.detail.endswith("sets of length 1, 3/2, 7/4.")


def test_a_record_names_a_leftover_symbol_of_the_guard():
    from gradlab.symbolic.fappy_claims import check_guard, claims, s, width

    by_label = {claim.label: claim for claim in claims()}
    form = Form({"guard": 1 - s >= width + sp.Symbol("c"), "Delta_cur": 2, "only s_ij": -1})
    with pytest.raises(ValueError, match=r"symbols other than s and Delta: \['c'\]"):
        check_guard(form)
    verdict = by_label["claim-algorithm1-guard"].check(form)
    assert (verdict.verdict, verdict.detail) == (
        "inconclusive",
        "the form cannot be evaluated where the check needs it (ValueError: the guard has "
        "symbols other than s and Delta: ['c']).",
    )


def test_a_record_with_a_second_check_is_named_after_both():
    from gradlab.symbolic import fappy_claims as fc

    for claim in fc.claims():
        if claim.label in fc.SECOND_CHECKS:
            first, second = claim.check.__name__.split("_and_")
            assert second == fc.SECOND_CHECKS[claim.label][0].__name__, claim.label
            assert callable(getattr(fc, first)) and first.startswith("check_"), claim.label


def test_the_strict_condition_samples_s_ij_at_0_3_and_0_7_of_its_bin():
    from gradlab.symbolic.fappy_claims import (
        S_IJ,
        STRICT_CORRECTED,
        check_strict_condition,
        hi,
        mid,
    )

    # false around 0.3 (or 0.7) of the pair's bin, where P moves with the negatives in the bin:
    # the check must visit those points to see it
    for centre in (0.3, 0.7):
        width = hi - mid
        gap = (S_IJ > mid + (centre - 0.05) * width) & (S_IJ < mid + (centre + 0.05) * width)
        verdict = check_strict_condition(Form(STRICT_CORRECTED & ~gap))
        assert verdict.verdict == "fails", centre


@pytest.mark.parametrize("above, moves", [(4.5e-7, True), (3e-7, False)])
def test_a_pair_just_above_b_t_moves_with_a_negative_in_its_bin_above_a_slope_of_1e_6(above, moves):
    from gradlab.symbolic.fappy_claims import moves_with_negative

    # by hand: with s_ik inside [b_t, b_(t+1)] only S_(t+1) moves, at 1/(|N| Delta), so dP/ds_ik
    # is h_right / (|N| Delta) with h_right = (s_ij - b_t)/Delta; |N| = 3, Delta = 1/8
    delta, b_t = 0.125, 0.25
    slope = above / (3 * delta)
    assert (slope > 1e-6) == moves and abs(slope - 1e-6) > 1e-7
    assert moves_with_negative(b_t + above * delta, b_t + 0.5 * delta, 10, delta) == moves


def test_fig5_s_weights_are_evaluated_with_math_branch_by_branch():
    from gradlab.symbolic.fappy_claims import Delta_min, check_fig5, width

    # the first branch divides by zero at Delta = 2 but is not taken there: math evaluates only
    # the branch taken (a NumPy lambdify evaluates every branch and raises ZeroDivisionError)
    alpha = sp.Piecewise((1 / (width - 2), width > 2), (Delta_min / (2 * width), True))
    verdict = check_fig5(Form({"alpha": alpha, "farther ring heavier": -1}))
    assert verdict.verdict == "holds"


def test_the_bottom_corner_fails_a_normaliser_a_tenth_heavy():
    from gradlab.symbolic.fappy_claims import Nn, check_bottom_corner

    # P_ij = 2 x 1.1 = 2.2 for every count: off by 0.2, far above the 1e-12 tolerance
    verdict = check_bottom_corner(Form(sp.Rational(11, 10) / Nn))
    assert verdict.verdict == "fails"
    values = [float(v) for v in verdict.detail.split("[")[1].split("]")[0].split(",")]
    assert values == pytest.approx([2.2] * 3, abs=1e-12)
