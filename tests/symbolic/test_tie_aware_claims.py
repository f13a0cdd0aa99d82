"""The tie-aware checks (seed 003) and their helpers against independent references.

``test_claim_records.py`` pins each claim's record; these tests pin the helpers the checks use
(tie grouping, brute-force AP and DCG over tie-consistent orders, the harmonic gap) against
values worked out here by hand, by loops or with mpmath, not by the helpers' own code.
"""

import itertools
import math
import re
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy as sp
from sympy.utilities.lambdify import implemented_function

from gradlab.symbolic.claims import Form
from gradlab.symbolic.tie_aware_claims import (
    C_pos_prev,
    C_prev,
    N_d,
    N_d_index,
    N_plus,
    N_pos_prev,
    N_prev,
    a,
    affinities,
    ap_at,
    b,
    brute_force_tie_average,
    c,
    c_pos,
    check_ap_at_k,
    check_ap_full,
    check_dcg_at_k,
    check_dcg_full,
    check_eq14,
    check_eq15,
    check_eq20,
    check_eq21,
    check_expansion,
    check_harmonic_closed_form,
    check_level_regrouping,
    check_li,
    check_li_first_bin,
    check_linear_discount,
    check_log_approximation,
    check_no_ties,
    check_quadrature_rule,
    check_table_d,
    check_tightened,
    claims,
    dcg_at,
    disc,
    discount_tolerance,
    empty_bin_value,
    first_bin_limit,
    gain,
    gain_sum,
    harmonic_partial_sum,
    j_,
    jj,
    k_cut,
    log_gap_tolerance,
    n,
    n_pos,
    one_item_bin_growth,
    relaxation_check,
    share,
    t_next,
    t_tie,
    tie_ap,
    tie_cases,
    tie_dcg,
    tie_groups,
    v_level,
)
from tests.reference.tie_aware_loops import ap_of_one_tie


@pytest.fixture(autouse=True)
def _fresh_tie_cases():
    """Each test draws the tie cases itself: ``tie_cases`` keeps its draws (lru_cache), and a
    mutation run forks its workers after a clean run, whose draws they would reuse."""
    tie_cases.cache_clear()


def test_ties_group_indices_by_score_highest_score_first():
    assert tie_groups([1, 3, 1, 2, 3]) == [[1, 4], [3], [0, 2]]
    assert tie_groups([0.5]) == [[0]]


def test_ap_at_a_cutoff_counts_precision_at_relevant_ranks_up_to_it():
    # order 2, 0, 1, 3 with items 0 and 3 relevant: hits at ranks 2 (1/2) and 4 (2/4)
    relevant = [True, False, False, True]
    assert ap_at((2, 0, 1, 3), relevant, 4) == pytest.approx((1 / 2 + 2 / 4) / 2, abs=1e-15)
    assert ap_at((2, 0, 1, 3), relevant, 3) == pytest.approx((1 / 2) / 2, abs=1e-15)
    assert ap_at((2, 0, 1, 3), relevant, 1) == 0.0


def test_dcg_at_a_cutoff_sums_gains_over_log2_of_rank_plus_one():
    gains = (3, 0, 1)
    # order 1, 2, 0: gains 0, 1, 3 at ranks 1, 2, 3
    assert dcg_at((1, 2, 0), gains, 3) == pytest.approx(1 / math.log2(3) + 3 / 2, abs=1e-15)
    assert dcg_at((1, 2, 0), gains, 2) == pytest.approx(1 / math.log2(3), abs=1e-15)


def test_brute_force_averages_over_exactly_the_tie_consistent_orders():
    # scores (2, 1, 1): item 0 first, then 1, 2 in either order -> two orders
    seen = []

    def metric(order, labels, cutoff):
        seen.append(order)
        return len(seen)

    assert brute_force_tie_average(metric, (2, 1, 1), None, 3) == 1.5
    assert sorted(seen) == [(0, 1, 2), (0, 2, 1)]


def test_brute_force_tie_aware_ap_matches_an_exact_rational_average():
    # scores (1, 1, 0), relevant items 0 and 2: orders (0, 1, 2) -> (1 + 2/3)/2 and
    # (1, 0, 2) -> (1/2 + 2/3)/2; the mean is 17/24
    truth = (Fraction(5, 3) / 2 + Fraction(7, 6) / 2) / 2
    value = brute_force_tie_average(ap_at, (1, 1, 0), [True, False, True], 3)
    assert value == pytest.approx(float(truth), abs=1e-15)


@pytest.mark.parametrize(("before", "size"), [(0, 1), (0, 5), (3, 4), (100, 7)])
def test_harmonic_gap_is_the_partial_sum_of_reciprocals(before, size):
    truth = sum(Fraction(1, k) for k in range(before + 1, before + size + 1))
    assert harmonic_partial_sum(before, size) == pytest.approx(float(truth), rel=1e-15)


# --- independent references ------------------------------------------------------------------


def _tie_consistent_orders(scores):
    """Every ranking by descending score, ties in every internal order (product of blocks)."""
    blocks = [
        [i for i, s in enumerate(scores) if s == level] for level in sorted(set(scores))[::-1]
    ]
    for parts in itertools.product(*(itertools.permutations(block) for block in blocks)):
        yield tuple(item for part in parts for item in part)


def _exact_tie_ap(scores, relevant, cutoff) -> Fraction:
    """Mean over tie-consistent orders of AP@k = (1/N+) sum of precision@rank at relevant
    ranks <= k, in exact rationals."""
    values = []
    for order in _tie_consistent_orders(scores):
        ranked = [relevant[i] for i in order]
        precisions = [Fraction(sum(ranked[:rank]), rank) for rank in range(1, cutoff + 1)
                      if ranked[rank - 1]]  # fmt: skip
        values.append(sum(precisions, Fraction(0)) / sum(relevant))
    return sum(values, Fraction(0)) / len(values)


def _mean_tie_dcg(scores, gains, cutoff) -> float:
    values = [math.fsum(gains[i] / math.log2(rank + 2) for rank, i in enumerate(order[:cutoff]))
              for order in _tie_consistent_orders(scores)]  # fmt: skip
    return math.fsum(values) / len(values)


def _documented_cases(seed, count=10, size=6):
    """The checks' cases: default_rng(seed), 10 x (6 scores in {0, 1, 2}, relevant where
    U(0, 1) < 0.5 and item 0 always, 6 gains in {0, 1, 2}, a cutoff in 1..6)."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        scores = tuple(int(s) for s in rng.integers(0, 3, size))
        relevant = [bool(u < 0.5) for u in rng.random(size)]
        relevant[0] = True
        gains = tuple(int(g) for g in rng.integers(0, 3, size))
        cases.append((scores, tuple(relevant), gains, int(rng.integers(1, size + 1))))
    return cases


def _simpson(function, low, high, intervals=4000):
    step = (high - low) / intervals
    inner = math.fsum((4 if k % 2 else 2) * function(low + k * step) for k in range(1, intervals))
    return step / 3 * (function(low) + inner + function(high))


def _failure(verdict):
    """(worst error, case index from 0, case count) of a failing numeric_agreement detail
    (which counts the cases from 1)."""
    found = re.fullmatch(
        r"max \|printed - true\| = (\S+) \(case (\d+) of (\d+)\)\.", verdict.detail
    )
    assert verdict.verdict == "fails" and found, verdict
    return float(found.group(1)), int(found.group(2)) - 1, int(found.group(3))


def _assert_worst_case(verdict, errors):
    worst, index, count = _failure(verdict)
    assert count == len(errors)
    assert worst == float(f"{max(errors):.3g}")
    assert errors[index] == pytest.approx(max(errors), rel=1e-9)


# --- tie cases, brute force, the tie-wise sums -----------------------------------------------

AP_SUMMAND = n_pos / n * (N_pos_prev + (j_ - N_prev - 1) * share + 1) / j_ / N_plus
DCG_PIECES = {
    "tie value": gain_sum / n * disc,
    "D(j)": 1 / sp.log(jj + 1, 2),
    "first rank": t_tie + 1,
    "last rank": sp.Min(t_next, k_cut),
}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_tie_cases_are_the_documented_draws_with_brute_force_truths(seed):
    cases = tie_cases(seed)
    documented = _documented_cases(seed)
    assert [case[:4] for case in cases] == documented
    for case, (scores, relevant, gains, cutoff) in zip(cases, documented, strict=True):
        assert case[4] == pytest.approx(float(_exact_tie_ap(scores, relevant, cutoff)), abs=1e-14)
        assert case[5] == pytest.approx(float(_exact_tie_ap(scores, relevant, 6)), abs=1e-14)
        assert case[6] == pytest.approx(_mean_tie_dcg(scores, gains, cutoff), abs=1e-13)
        assert case[7] == pytest.approx(_mean_tie_dcg(scores, gains, 6), abs=1e-13)


@pytest.mark.slow
def test_tie_cases_cover_ties_misses_and_every_cutoff():
    cases = [case for seed in range(4) for case in tie_cases(seed)]
    assert {s for case in cases for s in case[0]} == {0, 1, 2}
    assert {g for case in cases for g in case[2]} == {0, 1, 2}
    assert {case[3] for case in cases} == {1, 2, 3, 4, 5, 6}
    assert any(not all(case[1]) for case in cases) and all(case[1][0] for case in cases)
    assert tie_cases(5, count=3, size=4)[2][:4] == _documented_cases(5, count=3, size=4)[2]


HAND_CASES = [
    ((3, 2, 1, 0), (True, False, True, False)),  # no ties: every tie a single item
    ((1, 1, 1, 1), (True, False, True, False)),  # one tie of everything
    ((2, 1, 1, 0, 2), (False, True, True, False, True)),  # singletons and ties mixed
]


@pytest.mark.parametrize(("scores", "relevant"), HAND_CASES)
@pytest.mark.parametrize("cutoff", [1, 2, 3, 4])
def test_tie_ap_sums_the_printed_summand_to_the_exact_tie_aware_ap(scores, relevant, cutoff):
    truth = _exact_tie_ap(scores, relevant, cutoff)
    assert tie_ap(AP_SUMMAND, scores, list(relevant), cutoff) == pytest.approx(
        float(truth), abs=1e-13
    )


@pytest.mark.parametrize(("scores", "relevant"), HAND_CASES)
@pytest.mark.parametrize("cutoff", [1, 3, 5])
def test_tie_dcg_sums_the_printed_tie_values_to_the_mean_over_tie_orders(scores, relevant, cutoff):
    gains = tuple(range(len(scores)))
    truth = _mean_tie_dcg(scores, gains, cutoff)
    assert tie_dcg(Form(DCG_PIECES), scores, gains, cutoff) == pytest.approx(truth, abs=1e-13)


# --- the checks, given forms wrong by a little -----------------------------------------------


def _extra_ap_per_case(seed, full):
    """sum over ties and ranks j <= k inside the tie of n+_d / (1000 N+ j), per case."""
    errors = []
    for scores, relevant, _, cutoff in _documented_cases(seed):
        cutoff = len(scores) if full else cutoff
        total, position = Fraction(0), 0
        for level in sorted(set(scores))[::-1]:
            tie = [i for i, s in enumerate(scores) if s == level]
            positives = sum(relevant[i] for i in tie)
            for rank in range(position + 1, min(position + len(tie), cutoff) + 1):
                total += Fraction(positives, 1000 * sum(relevant) * rank)
            position += len(tie)
        errors.append(float(total))
    return errors


@pytest.mark.parametrize(
    ("check", "seed", "full"), [(check_ap_at_k, 0, False), (check_ap_full, 1, True)]
)
def test_an_ap_summand_with_a_small_extra_term_fails_at_the_documented_worst_case(
    check, seed, full
):
    verdict = check(Form(AP_SUMMAND + n_pos / (1000 * N_plus * j_)))
    _assert_worst_case(verdict, _extra_ap_per_case(seed, full))


@pytest.mark.parametrize("check", [check_ap_at_k, check_ap_full])
def test_an_ap_summand_off_by_one_part_in_a_billion_fails(check):
    # every case has AP >= 1/6 (item 0 is relevant), so the error is >= 1.6e-10 >> 1e-12
    worst, _, count = _failure(check(Form(AP_SUMMAND * (1 + sp.Rational(1, 10**9)))))
    assert 1.6e-10 < worst <= 1.0001e-9 and count == 10


@pytest.mark.parametrize(
    ("check", "seed", "full"), [(check_dcg_at_k, 2, False), (check_dcg_full, 3, True)]
)
def test_a_dcg_tie_value_one_per_mille_too_high_fails_at_the_documented_worst_case(
    check, seed, full
):
    pieces = {**DCG_PIECES, "tie value": DCG_PIECES["tie value"] * sp.Rational(1001, 1000)}
    errors = [_mean_tie_dcg(scores, gains, 6 if full else cutoff) / 1000
              for scores, _, gains, cutoff in _documented_cases(seed)]  # fmt: skip
    _assert_worst_case(check(Form(pieces)), errors)


@pytest.mark.parametrize("check", [check_dcg_at_k, check_dcg_full])
def test_a_dcg_discount_off_by_one_part_in_a_billion_fails(check):
    pieces = {**DCG_PIECES, "D(j)": DCG_PIECES["D(j)"] * (1 + sp.Rational(1, 10**9))}
    worst, _, _ = _failure(check(Form(pieces)))
    assert 1e-12 < worst < 1e-8  # DCG <= 2 * sum_j 1/log2(j + 1) < 10 here


@pytest.mark.parametrize("level", [0, 1, 2])
def test_a_regrouping_that_drops_one_affinity_level_fails_by_four_of_its_gains(level):
    # G(v) = v^2 + 1; the worst assignment puts all 4 items at the dropped level
    dropped = (
        gain(v_level)
        * sum(sp.KroneckerDelta(v_level, x) for x in affinities)
        * (1 - sp.KroneckerDelta(v_level, level))
    )
    verdict = check_level_regrouping(Form(dropped))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"differs by up to {4 * (level**2 + 1)} over the 81 assignments.",
    )


A_s, B_s = sp.symbols("A B")


@pytest.mark.parametrize("bin_end", [1, 7, 9, 21])  # N_d of the bins (0,1), (3,4), (7,2), (10,11)
def test_a_closed_form_wrong_at_one_documented_bin_fails(bin_end):
    right = A_s * n + B_s * (sp.harmonic(N_d) - sp.harmonic(N_prev))
    verdict = check_harmonic_closed_form(
        Form(right + B_s * sp.Piecewise((1, sp.Eq(N_d, bin_end)), (0, True)))
    )
    assert verdict.verdict == "fails"
    assert verdict.detail.startswith("sum_(t=N_(d-1)+1)^(N_d) (A + B/t) in exact rationals for ")
    assert check_harmonic_closed_form(Form(right)).verdict == "holds"


HARMONIC_GAP = sp.harmonic(N_d) - sp.harmonic(N_prev)


def _wrong_at(before, size, by):
    """``by`` at the bin (N_(d-1), n_d) only (N_(d-1) is a positive symbol: Eq(N_prev, 0) is False,
    but the bin (0, 1) is the grid's only one ending at N_d = 1)."""
    at_bin = (
        sp.Eq(N_d, 1)
        if (before, size) == (0, 1)
        else sp.Eq(N_prev, before) & sp.Eq(N_d, before + size)
    )
    return sp.Piecewise((by, at_bin), (0, True))


@pytest.mark.parametrize(
    ("before", "size"), [(0, 1), (1, 1), (2, 5), (20, 50), (100, 2), (1000, 1000)]
)
def test_a_log_approximation_off_at_one_grid_bin_is_caught_there(before, size):
    # 0.6 exceeds every bin's tolerance (at most 1/2); the exact gap elsewhere
    verdict = check_log_approximation(
        Form(HARMONIC_GAP + _wrong_at(before, size, sp.Rational(3, 5)))
    )
    tolerance = 0.5 if before == 0 else (1 / before - 1 / (before + size)) / 2
    assert verdict.verdict == "fails"
    assert (
        f"on 1 of 35 bins: 0.6 at (N_(d-1), n_d) = ({before}, {size}) (tolerance {tolerance:.3g})"
    ) in verdict.detail


def test_a_log_approximation_within_exactly_its_bins_tolerance_holds_and_beyond_fails():
    # at (1, 1) the gap is 1/2 and the tolerance (1 - 1/2)/2 = 1/4: 1/4 is exactly allowed
    def at_one_one(value):
        return Form(sp.Piecewise((value, sp.Eq(N_prev, 1) & sp.Eq(N_d, 2)), (HARMONIC_GAP, True)))

    assert check_log_approximation(at_one_one(sp.Rational(1, 4))).verdict == "holds"
    beyond = check_log_approximation(at_one_one(sp.Rational(1, 4) - sp.Rational(1, 10**9)))
    assert beyond.verdict == "fails" and "(N_(d-1), n_d) = (1, 1) (tolerance 0.25)" in beyond.detail


@pytest.mark.parametrize(("before", "size"), [(1, 1), (1, 10**4), (3, 7), (50, 50), (10**3, 1)])
def test_the_log_gap_tolerance_bounds_the_logarithms_error_and_is_nearly_tight(before, size):
    # the trapezoid bound, in exact rationals against 40-digit logarithms
    gap = sum(Fraction(1, t) for t in range(before + 1, before + size + 1))
    with mpmath.workdps(40):
        error = float(
            mpmath.log(mpmath.mpf(before + size) / before)
            - mpmath.mpf(gap.numerator) / gap.denominator
        )
    bound = float((Fraction(1, before) - Fraction(1, before + size)) / 2)
    assert log_gap_tolerance(before, size) == pytest.approx(bound, rel=1e-15)
    assert 0 < error <= bound
    if before >= 50:
        assert error > 0.98 * bound  # tight where 1/t is nearly linear on each cell


def test_the_first_bins_tolerance_is_the_supremum_over_later_bins():
    assert log_gap_tolerance(0, 1) == log_gap_tolerance(0, 1000) == 0.5
    assert log_gap_tolerance(1, 10**9) == pytest.approx(0.5, abs=1e-9)


def test_eq11_as_printed_fails_only_at_the_first_bin_and_the_midpoint_log_holds():
    claim = _claim("eq11")
    printed = check_log_approximation(claim.printed)
    assert printed.verdict == "fails"
    assert "only at the first bin" in printed.detail
    assert "every bin with N_(d-1) >= 1 is within its bound" in printed.detail
    assert check_log_approximation(claim.correction).verdict == "holds"


def _log2_discount_integral(low, high):
    return _simpson(lambda u: 1 / math.log2(u + 1), low, high)


EQ14_GRID = [(x, x + y) for x in (1.5, 3.0, 10.0) for y in (0.5, 2.0, 7.0)]
EQ14_PIECES = {"factor": sp.log(2), "lower": a + 1, "upper": b + 1}


def test_eq14_with_a_doubled_factor_fails_by_the_largest_discount_integral():
    errors = [_log2_discount_integral(low, high) for low, high in EQ14_GRID]
    _assert_worst_case(check_eq14(Form({**EQ14_PIECES, "factor": 2 * sp.log(2)})), errors)


def test_eq14_with_ln2_off_by_one_part_in_a_hundred_million_fails():
    worst, _, _ = _failure(
        check_eq14(Form({**EQ14_PIECES, "factor": sp.log(2) * (1 + sp.Rational(1, 10**8))}))
    )
    assert 1e-9 < worst < 1e-7


@pytest.mark.parametrize("low", [1.5, 3.0, 10.0])
def test_eq14_with_a_lower_limit_off_at_one_grid_start_fails_there(low):
    pieces = {
        **EQ14_PIECES,
        "lower": a + 1 + sp.Piecewise((sp.Rational(1, 100), sp.Eq(a, low)), (0, True)),
    }
    _, index, _ = _failure(check_eq14(Form(pieces)))
    assert EQ14_GRID[index][0] == low


@pytest.mark.parametrize("high", [10.5, 12.0, 17.0])  # 10 + (0.5, 2, 7): each end occurs once
def test_eq14_with_an_upper_limit_off_at_one_grid_end_fails_there(high):
    pieces = {
        **EQ14_PIECES,
        "upper": b + 1 + sp.Piecewise((sp.Rational(1, 100), sp.Eq(b, high)), (0, True)),
    }
    _, index, _ = _failure(check_eq14(Form(pieces)))
    assert EQ14_GRID[index] == (10.0, high)


def _eq15_cases():
    """default_rng(11): 8 x (c_(d,v) for v = 0, 1, 2 in 0..3, level 1 plus one; C_(d-1) in 1..8)."""
    rng = np.random.default_rng(11)
    cases = []
    for _ in range(8):
        counts = [int(k) for k in rng.integers(0, 4, 3)]
        counts[1] += 1
        cases.append((int(rng.integers(1, 9)), counts))
    return cases


def _eq15_form(factor, lower_shift=1, upper_shift=1):
    """Eq. 15's form: the factor and the integral's limits C_(d-1) + 1 and C_d + 1 (shifted)."""
    C_prev, C_d = sp.symbols("C_prev C_d", positive=True)
    return Form({"factor": factor, "lower": C_prev + lower_shift, "upper": C_d + upper_shift})


@pytest.mark.parametrize(("lower", "upper"), [(0, 0), (1, 0), (0, 1), (2, 1)])
def test_eq15_with_other_limits_than_printed_fails(lower, upper):
    # the limits were a string beside the checked factor: a misprinted limit could not fail
    verdict = check_eq15(_eq15_form(sp.log(2), lower, upper))
    assert verdict.verdict == "fails"


def test_eq15_with_a_doubled_factor_fails_by_the_largest_relaxed_dcg():
    errors = []
    for before, counts in _eq15_cases():
        total = sum(counts)
        level_mean = sum(v * k for v, k in enumerate(counts)) / total
        errors.append(level_mean * _log2_discount_integral(before, before + total))
    _assert_worst_case(check_eq15(_eq15_form(2 * sp.log(2))), errors)


@pytest.mark.slow
def test_eq15_with_ln2_off_by_one_part_in_a_hundred_million_fails():
    worst, _, count = _failure(
        check_eq15(_eq15_form(sp.log(2) * (1 + sp.Rational(1, 10**8))))
    )
    assert 1e-10 < worst < 1e-6 and count == 8


LI_GAP = sp.li(b + 1) - sp.li(a + 1)
LI_GRID = [(x, x + y) for x in (0.5, 1.0, 3.0, 10.0) for y in (0.5, 2.0, 7.0)]


def test_the_li_difference_doubled_fails_by_the_largest_integral_of_1_over_ln():
    errors = [_simpson(lambda u: 1 / math.log(u), low + 1, high + 1) for low, high in LI_GRID]
    _assert_worst_case(check_li(Form(2 * LI_GAP)), errors)


def test_the_li_difference_off_by_one_part_in_a_hundred_million_fails():
    worst, _, count = _failure(check_li(Form(LI_GAP * (1 + sp.Rational(1, 10**8)))))
    assert 1e-10 < worst < 1e-6 and count == 12


@pytest.mark.parametrize("low", [0.5, 1.0, 3.0, 10.0])
def test_the_li_difference_off_at_one_grid_start_fails_there(low):
    _, index, _ = _failure(
        check_li(Form(LI_GAP + sp.Piecewise((sp.Rational(1, 100), sp.Eq(a, low)), (0, True))))
    )
    assert LI_GRID[index][0] == low


@pytest.mark.parametrize("high", [10.5, 12.0, 17.0])
def test_the_li_difference_off_at_one_grid_end_fails_there(high):
    _, index, _ = _failure(
        check_li(Form(LI_GAP + sp.Piecewise((sp.Rational(1, 100), sp.Eq(b, high)), (0, True))))
    )
    assert LI_GRID[index] == (10.0, high)


N = sp.Symbol("N", positive=True)
EXPANSION = sp.EulerGamma + sp.log(N) + 1 / (2 * N)
ORDER = 1 / (12 * N**2)


def _ratios(detail):
    return [float(x) for x in re.search(r"= \[(.*)\] at N", detail).group(1).split(", ")]


def test_an_expansion_off_by_1_2_over_n_cubed_has_not_settled_between_1e4_and_1e5():
    # H(N) = gamma + ln N + 1/(2N) - 1/(12N^2) + 1/(120N^4) - ...: with 1.2/N^3 added to the
    # expansion the ratio is -1 - 14.4/N + 1/(10N^2); it moves by 1.3e-3 from 1e4 to 1e5
    verdict = check_expansion(
        Form({"expansion": EXPANSION + sp.Rational(6, 5) / N**3, "order": ORDER})
    )
    assert verdict.verdict == "fails"
    truth = [-1 - 14.4 / big + 1 / (10 * big**2) for big in (1e3, 1e4, 1e5)]
    assert _ratios(verdict.detail) == pytest.approx(truth, abs=1e-9)
    assert verdict.detail.startswith("(H(N) - expansion) / order term = [")
    assert verdict.detail.endswith("at N = 1e3, 1e4, 1e5: not of that order.")


def test_an_expansion_off_by_half_over_n_cubed_has_settled():
    # the ratio -1 - 6/N + ... moves by 5.4e-4 < 1e-3 from 1e4 to 1e5
    verdict = check_expansion(
        Form({"expansion": EXPANSION + sp.Rational(1, 2) / N**3, "order": ORDER})
    )
    assert verdict.verdict == "holds"


@pytest.mark.parametrize(
    ("order", "verdict"),
    [(ORDER, "holds"), (12 * ORDER, "fails"), (2 * ORDER, "fails"), (-ORDER, "fails"),
     (ORDER * sp.Rational(21, 20), "holds"), (ORDER * sp.Rational(23, 20), "fails")],
)  # fmt: skip
def test_the_order_term_is_held_to_the_remainders_size(order, verdict):
    # H(N) - gamma - ln N - 1/(2N) -> -1/(12 N^2): the ratio to the order term is -1/k for k ORDER
    assert check_expansion(Form({"expansion": EXPANSION, "order": order})).verdict == verdict


def test_an_order_term_that_does_not_vanish_is_not_a_remainder():
    # expansion and order swapped: (H(N) - 1/(12N^2)) / (gamma + ln N + 1/(2N)) -> 1, but the
    # "order term" grows
    verdict = check_expansion(Form({"expansion": ORDER, "order": EXPANSION}))
    assert verdict.verdict == "fails"
    assert "the order term not a positive vanishing magnitude" in verdict.detail


_working_digits = implemented_function("digits", lambda x: mpmath.mp.dps)


def test_the_expansion_is_checked_at_40_digits():
    # H(N) - (H(N) - digits/(480 N^2)) = digits/(480 N^2): the ratio to 1/(12 N^2) is digits/40
    pieces = {"expansion": sp.harmonic(N) - _working_digits(N) / (480 * N**2), "order": ORDER}
    assert check_expansion(Form(pieces)).detail == (
        "(H(N) - expansion) / order term -> 1.000000 (N = 1e3..1e5, mpmath 40 digits): the order "
        "term is the remainder's size."
    )


def test_the_one_item_bin_is_checked_at_40_digits():
    verdict = one_item_bin_growth(Form(_working_digits(c)))
    assert (verdict.verdict, verdict.detail) == ("holds", "|term| stays 40 as c -> 1 (growth 1).")


@pytest.mark.parametrize(
    ("power", "verdict"), [(sp.Rational(8, 100), "holds"), (sp.Rational(1, 12), "fails")]
)
def test_a_one_item_bin_term_may_grow_less_than_tenfold(power, verdict):
    # |c - 1|^(-p) grows by (1e12)^p from c = 1 + 1e-6 to 1 + 1e-18: 10^0.96 = 9.1, 10^1 = 10
    found = one_item_bin_growth(Form((c - 1) ** -power))
    assert found.verdict == verdict
    growth = float(10 ** (12 * power))
    if verdict == "fails":
        assert found.detail == (
            f"|term| grows by {growth:.3g} from c = 1 + 1e-6 to 1 + 1e-18: a pole at a bin of "
            "one item."
        )
    else:
        assert (
            found.detail
            == f"|term| stays {1e18 ** float(power):.4g} as c -> 1 (growth {growth:.3g})."
        )


rho = sp.Symbol("rho")


@pytest.mark.parametrize(
    "pole", [C_prev - 3, C_pos_prev - 1, N_plus - 2, rho - sp.Rational(1, 2), N_d - 3]
)
def test_an_empty_bin_is_checked_at_the_documented_point(pole):
    # the point: C_(d-1) = 3, C+_(d-1) = 1, N+ = 2, rho = 1/2, c = c+ = 0 (so N_d = 3)
    verdict = empty_bin_value(Form(1 / pole))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "substituting c_d = c+_d = 0 gives zoo: undefined as printed.",
    )


def test_an_empty_bins_0_over_0_is_called_removable_only_when_every_share_gives_one_limit():
    # He et al.'s Eq. 13 term at C_(d-1) = 3, C+_(d-1) = 1, N+ = 2: a c+/c factor times a
    # logarithm that vanishes with c. Evaluated in floats near the empty bin, for shares rho,
    # it goes to 0 whatever the share; c+/c alone goes to the share itself.
    printed = (c_pos * (c_pos - 1) / (N_plus * (c - 1)) + c_pos * (C_pos_prev - (C_prev + 1)
               * (c_pos - 1) / (c - 1) + 1) * sp.log(N_d / C_prev) / (N_plus * c))  # fmt: skip
    near = sp.lambdify((c, c_pos), printed.subs({C_prev: 3, C_pos_prev: 1, N_plus: 2, N_d: 3 + c}))
    assert all(abs(near(1e-9, share * 1e-9)) < 1e-8 for share in (0.0, 0.25, 1.0))
    assert "a removable 0/0: the term tends to 0 " in empty_bin_value(Form(printed)).detail
    # the share itself, and a pole: no one value, and no limit said for the pole (a zoo)
    assert "tends to rho as c_d -> 0+ with c+_d = rho c_d: no one value" in empty_bin_value(
        Form(c_pos / c)).detail
    assert "removable" not in empty_bin_value(Form(c_pos / c**2)).detail
    # one finite limit for every share above 0, another with no relevant item (c+ = 0): 1, 0
    assert "removable" not in empty_bin_value(Form(c_pos / (c_pos + c**2))).detail


@pytest.mark.parametrize("variable", [c, c_pos])
def test_an_empty_bin_sets_both_counts_to_zero(variable):
    verdict = empty_bin_value(Form(1 / variable))
    assert verdict.verdict == "fails"


def test_a_term_with_a_symbol_the_empty_bin_does_not_fix_is_undecided_not_wrong():
    # q is no count of the bin: the term at c_d = c+_d = 0 is q + 1/3, of unknown finiteness.
    # It read "fails" (a wrong value), though the check found no number at all.
    q = sp.Symbol("q")
    verdict = empty_bin_value(Form(q + c_pos / (c + 3)))
    assert (verdict.verdict, verdict.failure) == ("inconclusive", None)
    assert "q" in verdict.detail and verdict.detail.startswith("SymPy cannot tell whether")


@pytest.mark.parametrize("term", [sp.Function("f")(C_prev), sp.Symbol("q") * (C_prev + 1)])
def test_a_first_bin_limit_sympy_cannot_evaluate_is_undecided_not_wrong(term):
    # an unknown function of C_(d-1) (its limit stays unevaluated) or a symbol the bin does not
    # fix (the limit q): no number, so no wrong number
    verdict = first_bin_limit(Form(term))
    assert (verdict.verdict, verdict.failure) == ("inconclusive", None)
    assert verdict.detail.startswith("SymPy cannot tell whether the term's limit at the first bin")


EQ20 = 1 / (2 * N_prev) - 1 / (2 * N_d)


def _log_minus_harmonic(before, size):
    """ln(N_d / N_(d-1)) - (H(N_d) - H(N_(d-1))) to 30 digits, by Euler-Maclaurin for the gap."""
    with mpmath.workdps(30):

        def harmonic(m):  # H(m) = gamma + ln m + 1/(2m) - 1/(12m^2) + 1/(120m^4) - 1/(252m^6)
            m = mpmath.mpf(m)
            return (
                mpmath.euler
                + mpmath.log(m)
                + 1 / (2 * m)
                - 1 / (12 * m**2)
                + 1 / (120 * m**4)
                - 1 / (252 * m**6)
            )

        return mpmath.log(mpmath.mpf(before + size) / before) - (
            harmonic(before + size) - harmonic(before)
        )


@pytest.mark.parametrize(("factor", "verdict"), [(1.09, "holds"), (1.12, "fails"), (0.92, "holds"),
                                                 (0.89, "fails")])  # fmt: skip
def test_the_eq20_term_must_be_the_errors_size_within_ten_percent(factor, verdict):
    assert check_eq20(Form(EQ20 * sp.nsimplify(factor))).verdict == verdict


def test_eq20_with_n_d_over_2_n_prev_squared_is_rejected_where_the_ratio_grows():
    # n_d / (2 N_(d-1)^2) is the error times (N_(d-1) + n_d) / N_(d-1): at n_d / N_(d-1) = 1000
    # the error is 1/1001 of it. A grid that keeps n_d / N_(d-1) = 1/2 sees only a factor 2/3.
    verdict = check_eq20(Form((N_d - N_prev) / (2 * N_prev**2)))
    assert verdict.verdict == "fails"
    error = _log_minus_harmonic(10**4, 10**7)
    ratio = float(error / (mpmath.mpf(10**7) / (2 * mpmath.mpf(10**4) ** 2)))
    assert ratio == pytest.approx(1 / 1001, rel=1e-3)
    assert f"{ratio:.4g} at n_d / N_(d-1) = 1000" in verdict.detail


def test_eq20_as_printed_shows_the_ratio_at_every_bin_ratio():
    verdict = check_eq20(Form(EQ20))
    assert verdict.verdict == "holds"
    for ratio in ("1/10", "1", "10", "1000"):
        size = int(10**4 * sp.Rational(ratio))
        expected = float(
            _log_minus_harmonic(10**4, size)
            / (mpmath.mpf(1) / (2 * 10**4) - mpmath.mpf(1) / (2 * (10**4 + size)))
        )
        assert f"{expected:.6f} (n_d / N_(d-1) = {ratio})" in verdict.detail


def test_an_eq20_term_with_a_logarithm_is_evaluated_in_mpmath():
    # (1 + 2/ln N_(d-1)) EQ20: at N_(d-1) = 10^4 the ratio is about 1/(1 + 2/9.2) = 0.82
    verdict = check_eq20(Form(EQ20 * (1 + 2 / sp.log(N_prev))))
    assert verdict.verdict == "fails"
    assert f"{1 / (1 + 2 / math.log(10**4)):.4g} at n_d / N_(d-1) = 1/10" in verdict.detail


def test_an_approximation_that_divides_by_the_first_bins_zero_count_has_infinite_error():
    # mpmath raises ZeroDivisionError for 1/0: the check counts that bin's error as infinite
    verdict = check_log_approximation(Form(1 / N_prev))
    assert verdict.verdict == "fails"
    assert "inf at (N_(d-1), n_d) = (0, 1) (tolerance 0.5)" in verdict.detail


def test_an_empty_bin_ends_at_n_d_equal_to_c_prev_plus_c():
    # N_d = C_(d-1) + c_d, so (N_d - C_(d-1)) / c_d is c_d / c_d = 1 before c_d is set to 0
    verdict = empty_bin_value(Form((N_d - C_prev) / c))
    assert (verdict.verdict, verdict.detail) == ("holds", "the term is 1 at c_d = c+_d = 0.")


def test_a_first_bin_li_difference_reports_its_value_at_c_d_1():
    # ln(C_d - 1) at C_d = 1, 2, 5: -inf, 0, ln 4. Undefined at the first (Li(1) = -inf) and a
    # wrong number at the others: the wrong numbers outweigh, and the failure names them from
    # the first bin on
    verdict = check_li_first_bin(Form(sp.log(b - 1)))
    assert (verdict.verdict, verdict.failure) == ("fails", "wrong-value")
    assert verdict.detail.startswith("|relaxation - sum_t 1/ln(t+1)| exceeds the trapezoid bound")
    assert ": inf at (C_(d-1), c_d) = (0, 1); " in verdict.detail


def test_no_ties_as_the_paper_says_holds_exactly():
    verdict = check_no_ties(_claim("claim-no-ties").printed)
    assert verdict.verdict == "holds"
    assert "for N_(d-1) = 0..59 (the first bin included)" in verdict.detail


@pytest.mark.parametrize(("pieces", "wrong"), [
    ({"n_d = 0": sp.Integer(0), "n_d = 1": 1 / (N_d_index + 1)}, 120 // 2),
    ({"n_d = 0": sp.Integer(0), "n_d = 1": sp.log(N_d_index / (N_d_index - 1))}, 60),
    ({"n_d = 0": 1 / N_d_index, "n_d = 1": 1 / N_d_index}, 59),  # 1/N at N_(d-1) = 0 is zoo
])  # fmt: skip
def test_a_no_ties_value_off_at_any_bin_is_rejected(pieces, wrong):
    verdict = check_no_ties(Form(pieces))
    assert verdict.verdict == "fails"


def test_the_corrected_o_chain_holds_and_the_printed_last_step_is_rejected():
    claim = _claim("eq21")
    assert check_eq21(claim.correction).verdict == "holds"
    verdict = check_eq21(claim.printed)
    assert verdict.verdict == "fails"
    # n_d / (2 N_(d-1)^2) against the error at n_d / N_(d-1) = 1000: 1/1001 of it
    assert "term 4, O(n/(2*a**2)): error / term = " in verdict.detail
    assert "at n_d / N_(d-1) = 1000" in verdict.detail and "term 3" not in verdict.detail


def test_the_eq21_notes_two_readings_are_true():
    # the note: as one-way O-bounds the chain holds (each term at most the next, b = a + n),
    # and the error n_d/(2 N_(d-1) N_d) tends to 1/(2 N_(d-1)), not with n_d, as n_d grows
    A, N = sp.symbols("A N", positive=True)
    error, last = N / (2 * A * (A + N)), N / (2 * A**2)
    assert sp.simplify(last - error - N**2 / (2 * A**2 * (A + N))) == 0  # a positive gap
    assert sp.limit(error, N, sp.oo) == 1 / (2 * A)
    assert sp.limit(last, N, sp.oo) == sp.oo
    note = _claim("eq21").note
    assert "Read as one-way O-bounds the chain holds" in note
    assert "the error tends to 1/(2N_(d-1)) as n_d grows" in note


def test_an_o_chain_must_start_at_eq20s_term_in_n_prev_and_n_d():
    # n_d / (2 N_(d-1) N_d) equals Eq. 20's term only through N_d = N_(d-1) + n_d
    verdict = check_eq21(Form((n / (2 * a * b), 1 / (2 * a) - 1 / (2 * b))))
    assert verdict.verdict == "fails"
    assert "term 1, O(n/(2*a*b)), is not Eq. 20's" in verdict.detail


def test_an_o_chain_term_of_another_order_is_named():
    verdict = check_eq21(Form((1 / (2 * a) - 1 / (2 * b), n / (2 * a * b), 1 / (2 * a))))
    assert verdict.verdict == "fails"
    assert "term 3, O(1/(2*a))" in verdict.detail and "term 2" not in verdict.detail


NODE_OFFSET = "node offset from the cell's right edge"


def test_a_rule_with_nodes_100_past_the_cells_misses_by_the_documented_worst_case():
    # cells t = x+1..x+y for x in 1, 4, .., 37 and y in 1, 6, .., 36; nodes at t + 100
    errors = [
        float(abs(sum(Fraction(1, t + 100) - Fraction(1, t) for t in range(x + 1, x + y + 1))))
        for x in range(1, 40, 3)
        for y in range(1, 40, 5)
    ]
    _assert_worst_case(check_quadrature_rule(Form({NODE_OFFSET: -100, "cell width": 1})), errors)


def test_the_rules_node_offset_is_evaluated_in_float64_math():
    # acos(2) is not real: the math module raises where numpy would return nan
    verdict = check_quadrature_rule(Form({NODE_OFFSET: sp.acos(2), "cell width": 1}))
    assert verdict.verdict == "fails" and "ValueError: math domain error" in verdict.detail


def test_a_bin_of_one_item_is_approached_from_above():
    # 1 + 10^6 (c - 1) is 2 at c = 1 + 1e-6 and 1 + 1e-12 at c = 1 + 1e-18 (from below: 0, 1)
    verdict = one_item_bin_growth(Form(1 + 10**6 * (c - 1)))
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "|term| stays 1 as c -> 1 (growth 0.5).",
    )


# --- issue 15, second pass: evaluation modules, the cases drawn, the expansion's thresholds ---


def test_the_ap_summand_is_evaluated_in_float64_math():
    # sqrt(n+_d - 2) at a tie with one positive: the math module raises where numpy gives nan
    with pytest.raises(ValueError, match="math domain error"):
        tie_ap(sp.sqrt(n_pos - 2), (1, 0), [True, False], 2)


@pytest.mark.parametrize(
    "pieces",
    [
        {**DCG_PIECES, "D(j)": sp.sqrt(jj - 2)},  # sqrt(-1) at rank 1
        {**DCG_PIECES, "tie value": sp.sqrt(n - 2)},  # sqrt(-1) at a tie of one item
    ],
    ids=["discount", "tie value"],
)
def test_the_dcg_pieces_are_evaluated_in_float64_math(pieces):
    with pytest.raises(ValueError, match="math domain error"):
        tie_dcg(Form(pieces), (2, 1, 0), (1, 1, 1), 3)


@pytest.mark.parametrize(
    "pieces",
    [
        {**EQ14_PIECES, "lower": sp.sqrt(a - 2)},  # sqrt(-1/2) at the grid's first a = 1.5
        {**EQ14_PIECES, "upper": sp.sqrt(b - 3)},  # sqrt(-1) at the grid's first b = 2
    ],
    ids=["lower", "upper"],
)
def test_eq14s_limits_are_evaluated_in_float64_math(pieces):
    verdict = check_eq14(Form(pieces))
    assert verdict.verdict == "fails" and "ValueError: math domain error" in verdict.detail


def test_eq15_integrates_over_the_documented_bins(monkeypatch):
    # the printed side integrates dt/ln t over [C_(d-1) + 1, C_d + 1], the truth dt/log2(t + 1)
    # over [C_(d-1), C_d], for the documented draws (C_(d-1) in 1..8)
    quad, intervals = mpmath.quad, []

    def recording_quad(function, interval, **options):
        intervals.append(tuple(float(x) for x in interval))
        return quad(function, interval, **options)

    monkeypatch.setattr(mpmath, "quad", recording_quad)
    assert check_eq15(_eq15_form(sp.log(2))).verdict == "holds"
    expected = []
    for before, counts in _eq15_cases():
        expected += [(before + 1, before + sum(counts) + 1), (before, before + sum(counts))]
    assert sorted(intervals) == sorted(expected)  # which side is integrated first is free


def _expansion_with_ratios(ratios):
    """A form whose (H(N) - expansion) / order is ``ratios`` at N = 1e3, 1e4, 1e5: expansion
    H(N) - 1/N^2, order 1 / (R(N) N^2) with R the table (positive and vanishing)."""
    table = dict(zip((10**3, 10**4, 10**5), ratios, strict=True))
    ratio = implemented_function("R", lambda big: mpmath.mpf(table[int(big)]))
    return Form({"expansion": sp.harmonic(N) - 1 / N**2, "order": 1 / (ratio(N) * N**2)})


@pytest.mark.parametrize(
    ("last", "verdict"),
    [(0.9001, "holds"), (0.8999, "fails"), (1.0999, "holds"), (1.1001, "fails")],
)
def test_the_expansion_ratio_must_settle_within_ten_percent_of_one(last, verdict):
    found = check_expansion(_expansion_with_ratios((1000.0, last, last)))
    assert found.verdict == verdict
    if verdict == "fails":
        assert _ratios(found.detail) == pytest.approx([1000.0, last, last], rel=1e-12)


def test_only_the_last_expansion_ratio_must_be_within_ten_percent_of_one():
    # N = 1e4 gives 0.8996 (outside), N = 1e5 gives 0.9002: settled (6e-4 < 1e-3), sized
    found = check_expansion(_expansion_with_ratios((1000.0, 0.8996, 0.9002)))
    assert found.verdict == "holds"
    assert found.detail.startswith("(H(N) - expansion) / order term -> 0.900200 (")


@pytest.mark.parametrize(("last", "verdict"), [(1.0009, "holds"), (1.0011, "fails")])
def test_the_expansion_settles_by_1e_3(last, verdict):
    assert check_expansion(_expansion_with_ratios((1000.0, 1.0, last))).verdict == verdict


def _last_ratio_with_a_short_threshold():
    """A ratio r in [1, 2) whose float threshold 1e-3 * r is a multiple of r's spacing 2^-52, so
    that r - threshold is a float exactly threshold below r."""
    for step in range(1, 100_000):
        last = 1 + step * 2.0**-30
        if (1e-3 * last) % 2.0**-52 == 0:
            return last
    raise AssertionError("no such ratio")


@pytest.mark.parametrize(("spacings", "verdict"), [(0, "fails"), (1, "holds")])
def test_an_expansion_ratio_that_moves_by_exactly_1e_3_has_not_settled(spacings, verdict):
    last = _last_ratio_with_a_short_threshold()
    threshold = 1e-3 * last
    before = last - threshold + spacings * 2.0**-52
    assert abs(last - before) == threshold - spacings * 2.0**-52  # both differences exact
    found = check_expansion(_expansion_with_ratios((1000.0, before, last)))
    assert found.verdict == verdict


def test_an_order_with_a_logarithm_is_evaluated_in_mpmath():
    # H(N) - gamma - ln N - 1/(2N) = -1/(12N^2) + 1/(120N^4) - ...; over (1 + 1/ln N)/(12N^2)
    # the ratio is (-1 + 1/(10N^2)) / (1 + 1/ln N): -0.902 at 1e4, -0.920 at 1e5 (not settled)
    found = check_expansion(Form({"expansion": EXPANSION, "order": ORDER * (1 + 1 / sp.log(N))}))
    truth = [(-1 + 1 / (10 * big**2)) / (1 + 1 / math.log(big)) for big in (1e3, 1e4, 1e5)]
    assert found.verdict == "fails"
    assert _ratios(found.detail) == pytest.approx(truth, rel=1e-12)


_vanishing = implemented_function("vanishing", lambda u: 0)


def test_the_expansion_is_read_in_its_first_free_symbol_by_name():
    # expansion in N and x ("N" sorts before "x"): read in N, vanishing(x) adds 0
    x = sp.Symbol("x")
    found = check_expansion(Form({"expansion": EXPANSION + _vanishing(x), "order": ORDER}))
    assert (found.verdict, found.detail) == (
        "holds",
        "(H(N) - expansion) / order term -> -1.000000 (N = 1e3..1e5, mpmath 40 digits): the order "
        "term is the remainder's size.",
    )


# --- the claims' data beyond the texts test_claim_definitions.py compares --------------------


def _claim(label):
    return next(claim for claim in claims() if claim.label == label)


def test_printed_forms_are_named_printed_and_corrections_corrected():
    # Form.name's convention ("printed", "corrected" or a description of the mutation); the
    # texts test_claim_definitions.py compares do not show a correction's name
    defined = claims()
    assert sum(claim.correction is not None for claim in defined) == 8
    for claim in defined:
        assert claim.printed.name == "printed", claim.id
        if claim.correction is not None:
            assert claim.correction.name == "corrected", claim.id


@pytest.mark.parametrize("label", ["eq17", "eq18", "eq19"])
def test_the_harmonic_expansions_are_in_a_positive_count(label):
    # H(N) for a count N >= 1: a positive symbol (so that, e.g., log(N^2) expands to 2 log N)
    claim = _claim(label)
    for form in (claim.printed, *claim.mutants):
        (count,) = form.value["expansion"].free_symbols
        assert count.is_positive is True, (claim.id, form.name)
        assert sp.expand_log(sp.log(count**2)) == 2 * sp.log(count)


def test_eq34s_outer_index_differs_from_the_corrected_one_by_its_name_only():
    claim = _claim("eq34")
    ((outer, *outer_range),) = claim.printed.value.limits
    ((index, *index_range),) = claim.correction.value.limits
    assert (outer.name, index.name, outer_range, index_range) == ("l", "d", [0, 3], [0, 3])
    # both are summation indices 0..b: non-negative (not declared integer: the shift operator
    # moves a Sum's bounds, and would substitute d + 1 for an integer index)
    assert outer.is_nonnegative is True and outer.is_integer is None
    assert outer.assumptions0 == index.assumptions0
    assert claim.printed.value.xreplace({outer: index}) == claim.correction.value


# --- the second pass: cutoffs in the form, relaxations checked as AP_r ------------------------


@pytest.mark.parametrize("last", [sp.Min(t_next, k_cut + 1), sp.Min(t_next, k_cut - 1),
                                  sp.Min(t_next + 1, k_cut), t_next])  # fmt: skip
def test_eq4s_cutoff_is_part_of_the_form_and_a_shifted_cutoff_is_rejected(last):
    assert check_dcg_at_k(Form(DCG_PIECES)).verdict == "holds"
    assert check_dcg_at_k(Form({**DCG_PIECES, "last rank": last})).verdict == "fails"


@pytest.mark.slow
def test_eq4s_display_shows_the_cutoff_min_t_next_k():
    text = _claim("eq4").printed.text()
    assert "last rank = Min(k, t_(d+1))" in text and "first rank = t_d + 1" in text


def test_a_tie_cut_by_k_sums_its_discount_up_to_k_only():
    # one tie of 3 items with gains 3, 0, 0 at k = 2: (3/3) * (1 + 1/log2(3))
    value = tie_dcg(Form(DCG_PIECES), (1, 1, 1), (3, 0, 0), 2)
    assert value == pytest.approx(1 + 1 / math.log2(3), abs=1e-15)


def test_the_relaxation_check_uses_ap_t_of_the_tie_by_brute_force():
    # the exact harmonic gap makes Eq. 13 AP_T itself at integer counts
    exact = _claim("claim-eq13-one-item-bin").correction
    assert relaxation_check(exact).verdict == "holds"
    value = float(exact.value.subs({c: 5, c_pos: 2, C_prev: 4, C_pos_prev: 1, N_plus: 5, N_d: 9}))
    assert value == pytest.approx(float(ap_of_one_tie(4, 5, 2, 1, 5)), rel=1e-12)


@pytest.mark.parametrize("scale", [sp.Rational(101, 100), sp.Rational(99, 100)])
def test_an_ap_r_one_percent_off_is_not_a_relaxation(scale):
    exact = _claim("claim-eq13-one-item-bin").correction
    verdict = relaxation_check(Form(exact.value * scale))
    assert verdict.verdict == "fails" and "times Eq. 11's allowance" in verdict.detail


def test_the_printed_ln_ap_r_is_a_relaxation_after_the_first_bin():
    # ln(N_d / C_(d-1)) is within the trapezoid bound for C_(d-1) >= 1
    assert relaxation_check(_claim("claim-eq13-first-bin").printed).verdict == "holds"


@pytest.mark.parametrize("label", ["claim-eq13-first-bin", "claim-eq13-one-item-bin",
                                   "claim-eq13-empty-bin"])  # fmt: skip
def test_each_eq13_property_check_also_requires_an_ap_r(label):
    claim = _claim(label)
    assert claim.check(claim.correction).verdict == "holds"
    assert claim.check(Form(-claim.correction.value)).verdict == "fails"


def test_a_log_shifted_by_one_item_exceeds_eq11s_allowance():
    # ln((N_d + 1) / C_(d-1)) is off by ln(23/22) = 0.044 at (C_(d-1), c_d) = (20, 2), where the
    # allowance is (1/20 - 1/22)/2 = 0.0023 times the log's factor
    printed = _claim("claim-eq13-first-bin").printed
    verdict = relaxation_check(Form(printed.value.subs(N_d, N_d + 1)))
    assert verdict.verdict == "fails"


# --- the records added for Sec. C's remarks, footnote 1 and Sec. D's table -----------------


def test_eq11_with_the_half_over_n_terms_is_tighter_and_its_slips_are_not():
    claim = _claim("claim-eq11-tightened")
    assert check_tightened(claim.printed).verdict == "holds"
    for slip in (
        sp.log(N_d) - sp.log(N_prev) - 1 / (2 * N_d) + 1 / (2 * N_prev),  # signs of 1/(2N) flipped
        sp.log(N_d) - sp.log(N_prev) + 1 / N_d - 1 / N_prev,  # 1/N for 1/(2N)
        sp.log(N_d) - sp.log(N_prev),  # Eq. 11 itself is not tighter than itself
    ):
        assert check_tightened(Form(slip)).verdict == "fails", slip


def test_the_tightened_error_is_within_the_next_euler_maclaurin_term_by_hand():
    # at (1, 1): H(2) - H(1) = 1/2; ln 2 + 1/4 - 1/2 = 0.4431; next term 1/12 - 1/48 + 1/1920
    error = 0.5 - (math.log(2) + 1 / 4 - 1 / 2)
    assert 0 < error <= 1 / 12 - 1 / 48 + 1 / 1920
    assert error < math.log(2) - 0.5  # Eq. 11's error there


@pytest.mark.slow
def test_the_linear_discount_relaxation_is_its_integral_and_within_the_trapezoid_bound():
    claim = _claim("claim-footnote-linear-discount")
    assert check_linear_discount(claim.printed).verdict == "holds"
    t = sp.Symbol("t", positive=True)
    doubled = {"D(t)": 2 / t, "relaxed sum": sp.log(b) - sp.log(a)}  # not its integral
    assert check_linear_discount(Form(doubled)).verdict == "fails"
    shifted = {"D(t)": 1 / t, "relaxed sum": sp.log(b + 1) - sp.log(a + 1)}
    verdict = check_linear_discount(Form(shifted))
    assert verdict.verdict == "fails" and "not int_(N_(d-1))^(N_d) D(t) dt" in verdict.detail


def test_a_discount_tolerance_is_half_the_drop_of_the_discount_over_the_bin():
    def square(t):
        return 1 / t**2

    assert discount_tolerance(square, 2, 2) == pytest.approx((1 / 4 - 1 / 16) / 2, rel=1e-15)
    assert discount_tolerance(square, 0, 7) == 0.5


TABLE_D = {"alpha = 40": (0.732, 0.789, 0.800, 0.826), "alpha -> oo": (0.751, 0.804, 0.813, 0.830)}


def test_the_section_d_table_is_consistent_with_its_sentence():
    verdict = check_table_d(Form(TABLE_D))
    assert verdict.verdict == "holds"
    assert "by [0.019, 0.015, 0.013, 0.004]" in verdict.detail


@pytest.mark.parametrize(("row", "entries", "shown"), [
    ("alpha -> oo", (0.751, 0.804, 0.813, 0.820), "48 bits (0.82 vs 0.826)"),
    ("alpha -> oo", (0.751, 0.789, 0.813, 0.830), "24 bits (0.789 vs 0.789)"),
    ("alpha = 40", (1.464, 0.789, 0.800, 0.826), "not four AP_T values per row in [0, 1]"),
    ("alpha = 40", (0.732, 0.789, 0.800), "not four AP_T values per row in [0, 1]"),
])  # fmt: skip
def test_a_table_that_does_not_support_the_sentence_is_rejected(row, entries, shown):
    verdict = check_table_d(Form({**TABLE_D, row: entries}))
    assert verdict.verdict == "fails" and shown in verdict.detail


def test_the_first_bin_li_relaxation_must_also_relax_the_discount_sum():
    claim = _claim("claim-eq16-first-bin")
    assert check_li_first_bin(claim.correction).verdict == "holds"
    # finite at the first bin but twice the integral: not a relaxation of the discount sum
    verdict = check_li_first_bin(Form(2 * claim.correction.value))
    assert verdict.verdict == "fails" and "exceeds the trapezoid bound" in verdict.detail


def test_the_midpoint_rule_record_carries_the_cell_width():
    claim = _claim("claim-midpoint-rule")
    assert check_quadrature_rule(claim.correction).verdict == "holds"
    halved = Form({**claim.correction.value, "cell width": sp.Rational(1, 2)})
    assert check_quadrature_rule(halved).verdict == "fails"


@pytest.mark.parametrize("at", [4, 20])
def test_a_relaxation_undefined_on_some_bins_fails_and_says_where(at):
    """Eq. 13 plus 0 * log(C_(d-1) - at), unevaluated: NaN on the bins with C_(d-1) = at and
    exact elsewhere. NaN is no agreement, on a middle bin (where later bins agree) as on the
    last ones."""
    exact = _claim("claim-eq13-one-item-bin").correction.value  # AP_T at integer counts
    nothing = sp.Mul(0, sp.log(C_prev - at), evaluate=False)
    verdict = relaxation_check(Form(sp.Add(exact, nothing, evaluate=False)))
    assert verdict.verdict == "fails"
    assert verdict.detail.startswith("at integer counts it is not AP_T(R^(d)): nan against ")
    assert f"at C_(d-1) = {at}," in verdict.detail
