"""The tie-aware checks that hold an approximation of the harmonic gap to a bound (Eq. 11 on every
bin, Eq. 11 tightened by Eq. 17's 1/(2N) terms, footnote 1's linear discount) and the no-ties
remark, fed forms that are off at chosen bins by chosen amounts.

Expected details are worked out here with fractions, ``math`` and mpmath, not by the checks' code.
"""

import math
from fractions import Fraction

import mpmath
import pytest
import sympy as sp
from sympy.utilities.lambdify import implemented_function

from gradlab.symbolic.claims import Form
from gradlab.symbolic.tie_aware_claims import (
    N_d,
    N_d_index,
    N_prev,
    a,
    b,
    check_linear_discount,
    check_log_approximation,
    check_no_ties,
    check_tightened,
)

HARMONIC_GAP = sp.harmonic(N_d) - sp.harmonic(N_prev)
t = sp.Symbol("t", positive=True)

# the working precision of mpmath where a form is evaluated (the checks lambdify to mpmath)
_working_digits = implemented_function("digits", lambda x: mpmath.mp.dps)


def _at_bin(before, size):
    """The condition that (N_(d-1), N_d) is the bin (before, before + size); N_(d-1) is a positive
    symbol, so the first bin (0, 1) is told apart by N_d = 1, the grid's only bin ending there."""
    if before == 0:
        return sp.Eq(N_d, before + size)
    return sp.Eq(N_prev, before) & sp.Eq(N_d, before + size)


def _g(value):
    return f"{float(value):.3g}"


# --- Eq. 11 on every bin: which bin the failure names ------------------------------------------

LOG_RULE = (
    "tolerance per bin (1/N_(d-1) - 1/N_d)/2, the trapezoid bound of the logarithm's own error "
    "(1/t convex; Eq. 20's order), and 1/2 at the first bin N_(d-1) = 0"
)


def test_a_log_approximation_failure_names_the_bin_furthest_over_its_tolerance():
    # 3/5 too high at (0, 1) (tolerance 1/2: 1.2 times it) and at (1, 1) (tolerance 1/4: 2.4 times
    # it): the failure shows (1, 1), though (0, 1) comes first and has the larger tolerance
    off = sp.Piecewise((HARMONIC_GAP + sp.Rational(3, 5), _at_bin(0, 1) | _at_bin(1, 1)),
                       (HARMONIC_GAP, True))  # fmt: skip
    verdict = check_log_approximation(Form(off))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"|approximation - harmonic gap| exceeds the {LOG_RULE} on 2 of 35 bins: 0.6 at "
        "(N_(d-1), n_d) = (1, 1) (tolerance 0.25); 1 of them with N_(d-1) >= 1.",
    )


def test_a_log_approximation_that_is_nan_at_one_bin_fails_naming_that_bin():
    # a nan error is over its tolerance but never the largest ratio: the failure names the bin
    # that is over, not the largest ratio among the bins within their tolerance
    off = sp.Piecewise((sp.nan, _at_bin(1, 1)), (HARMONIC_GAP, True))
    verdict = check_log_approximation(Form(off))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"|approximation - harmonic gap| exceeds the {LOG_RULE} on 1 of 35 bins: nan at "
        "(N_(d-1), n_d) = (1, 1) (tolerance 0.25); 1 of them with N_(d-1) >= 1.",
    )


# --- Eq. 11 tightened by the 1/(2N) terms -----------------------------------------------------


def _eq11_error(before, size):
    gap = sum(Fraction(1, k) for k in range(before + 1, before + size + 1))
    return abs(math.log((before + size) / before) - float(gap))


def _next_term(before, size):
    low, high = Fraction(before), Fraction(before + size)
    return 1 / (12 * low**2) - 1 / (12 * high**2) + 1 / (120 * high**4)


def _tightening_problem(before, size, error):
    # which of the two conditions it misses, read off the numbers (a new user's mutants, all
    # closer than Eq. 11, were each called "not a tightening")
    missed = ("closer than Eq. 11 but above the next term"
              if float(error) < _eq11_error(before, size) else "not closer than Eq. 11")
    return (
        f"(N_(d-1), n_d) = ({before}, {size}): {missed} (error {error}, Eq. 11's "
        f"{_g(_eq11_error(before, size))}, next term {_g(_next_term(before, size))})"
    )


TIGHTENING = ("not Eq. 17's tightening (closer than Eq. 11 and within the next Euler-Maclaurin "
              "term) on")


def test_a_tightening_off_from_n_prev_2_on_names_its_first_two_bins_at_30_digits():
    # exact at N_(d-1) = 1, off by (N_(d-1) - 1) * digits / 100 elsewhere: 0.3 at N_(d-1) = 2
    # when mpmath works at 30 digits, more than Eq. 11's error and the next term there
    off = HARMONIC_GAP + (N_prev - 1) * _working_digits(N_d) / 100
    verdict = check_tightened(Form(off))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"{TIGHTENING} 20 of 25 bins, e.g. {_tightening_problem(2, 1, '0.3')}; "
        f"{_tightening_problem(2, 2, '0.3')}.",
    )


def test_a_tightening_that_is_complex_at_n_prev_1_fails_there_with_an_infinite_error():
    # sqrt(N_(d-1) - 2) / 10^20 is i / 10^20 at N_(d-1) = 1 and real (and negligible) elsewhere
    tightened = sp.log(N_d / N_prev) + 1 / (2 * N_d) - 1 / (2 * N_prev)  # Eq. 11 with Eq. 17
    verdict = check_tightened(Form(tightened + sp.sqrt(N_prev - 2) / 10**20))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"{TIGHTENING} 5 of 25 bins, e.g. {_tightening_problem(1, 1, 'inf')}; "
        f"{_tightening_problem(1, 2, 'inf')}.",
    )


TIGHTENED_HOLDS = (
    "closer to H(N_d) - H(N_(d-1)) than Eq. 11 and within the next term of Eq. 17 on all 25 bins "
    "with N_(d-1) >= 1 (n_d up to 10^4; mpmath, 30 digits)."
)
BIN_1_1_NEXT_TERM = _next_term(1, 1)  # 1/12 - 1/48 + 1/1920


@pytest.mark.parametrize(
    ("off_by", "shown"),
    [
        (BIN_1_1_NEXT_TERM - Fraction(1, 10**6), None),  # within the next term
        (BIN_1_1_NEXT_TERM + Fraction(1, 10**6), "0.063"),  # just beyond it
        (Fraction(1, 10), "0.1"),  # closer than Eq. 11 (0.193) but beyond the next term
    ],
    ids=["within_the_next_term", "just_beyond_it", "between_it_and_eq11s_error"],
)
def test_a_tightening_is_held_to_the_next_euler_maclaurin_term_at_one_bin(off_by, shown):
    # the harmonic gap itself except at (N_(d-1), n_d) = (1, 1), where it is 1/2 + off_by
    off = sp.Piecewise((sp.Rational(1, 2) + sp.Rational(off_by.numerator, off_by.denominator),
                        _at_bin(1, 1)), (HARMONIC_GAP, True))  # fmt: skip
    verdict = check_tightened(Form(off))
    if shown is None:
        assert (verdict.verdict, verdict.detail) == ("holds", TIGHTENED_HOLDS)
    else:
        assert (verdict.verdict, verdict.detail) == (
            "fails",
            f"{TIGHTENING} 1 of 25 bins, e.g. {_tightening_problem(1, 1, shown)}.",
        )


# --- footnote 1: the relaxation for another discount D(t) -------------------------------------

LINEAR_HOLDS = (
    "the relaxed sum is int_(N_(d-1))^(N_d) D(t) dt (derivatives D(N_d), -D(N_(d-1))) and relaxes "
    "sum_t D(t) within the trapezoid bound (D(N_(d-1)) - D(N_d))/2 on every bin after the first, "
    "as Eq. 14 does for the logarithmic discount."
)


def test_a_linear_discount_meets_the_trapezoid_bound_exactly_and_holds():
    # the trapezoid rule is exact for a linear D, so int_a^b D - sum_(t=a+1)^b D(t) is exactly
    # (D(a) - D(b))/2 on every bin (all numbers are integers or halves below 2^22)
    discount = 2001 - t
    relaxed = 2001 * (b - a) - (b**2 - a**2) / 2
    verdict = check_linear_discount(Form({"D(t)": discount, "relaxed sum": relaxed}))
    assert (verdict.verdict, verdict.detail) == ("holds", LINEAR_HOLDS)


def test_a_relaxed_sum_that_is_complex_at_n_prev_1_exceeds_the_bound_there():
    # D(t) = 1/(t - 3/2) and its integral ln((b - 3/2)/(a - 3/2)): ln(-1/2) is complex at
    # N_(d-1) = 1, so its 5 bins are over; the failure names the first three
    discount = 1 / (t - sp.Rational(3, 2))
    relaxed = sp.log(b - sp.Rational(3, 2)) - sp.log(a - sp.Rational(3, 2))
    verdict = check_linear_discount(Form({"D(t)": discount, "relaxed sum": relaxed}))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "|relaxed - sum_t D(t)| exceeds the trapezoid bound: inf at (N_(d-1), n_d) = (1, 1); "
        "inf at (N_(d-1), n_d) = (1, 2); inf at (N_(d-1), n_d) = (1, 5).",
    )


def test_a_relaxed_sum_with_shifted_limits_is_not_the_integral_though_within_the_bound():
    # ln((b + 1)/(a + 1)) relaxes sum 1/t within the bound, but its derivative in b is 1/(b + 1)
    relaxed = sp.log(b + 1) - sp.log(a + 1)
    verdict = check_linear_discount(Form({"D(t)": 1 / t, "relaxed sum": relaxed}))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "the relaxed sum is not int_(N_(d-1))^(N_d) D(t) dt.",
    )


def test_a_discount_undefined_at_a_ranked_position_fails_naming_the_math_error():
    # ln(t - 2) at t = 2 (the bin (1, 1)) is math.log(0): a domain error, not -inf
    with pytest.raises(ValueError) as raised:
        math.log(0)
    relaxed = (b - 2) * sp.log(b - 2) - b - ((a - 2) * sp.log(a - 2) - a)
    verdict = check_linear_discount(Form({"D(t)": sp.log(t - 2), "relaxed sum": relaxed}))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"the form does not evaluate on the check's cases (ValueError: {raised.value}).",
    )


# --- with no ties the sum is evaluated directly ------------------------------------------------

NO_TIES_HOLDS = (
    "sum_(t=N_(d-1)+1)^(N_d) 1/t is 0 for n_d = 0 and 1/N_d for n_d = 1, exactly, for "
    "N_(d-1) = 0..59 (the first bin included)."
)


def test_the_no_ties_sums_left_unevaluated_hold():
    # Sum(1/k, (k, N_d + 1, N_d)) and Sum(1/k, (k, N_d, N_d)) are not the numbers 0 and 1/N_d as
    # expressions, but their values are
    k = sp.Symbol("k", integer=True, positive=True)
    pieces = {"n_d = 0": sp.Sum(1 / k, (k, N_d_index + 1, N_d_index)),
              "n_d = 1": sp.Sum(1 / k, (k, N_d_index, N_d_index))}  # fmt: skip
    verdict = check_no_ties(Form(pieces))
    assert (verdict.verdict, verdict.detail) == ("holds", NO_TIES_HOLDS)


def test_a_no_ties_value_wrong_only_at_the_first_bin_is_named_there():
    # N_d < 2 only at N_d = 1, the one-item bin after N_(d-1) = 0
    pieces = {"n_d = 0": sp.Integer(0),
              "n_d = 1": sp.Piecewise((2, N_d_index < 2), (1 / N_d_index, True))}  # fmt: skip
    verdict = check_no_ties(Form(pieces))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "1 of 120 bins differ from the exact sum, e.g. n_d = 1, N_(d-1) = 0: printed 2, exact 1.",
    )


@pytest.mark.parametrize("last_right", [59, 60])
def test_the_no_ties_bins_end_at_n_prev_59(last_right):
    # 0 for the one-item bin beyond N_d = last_right: wrong at N_(d-1) = 59 only if last_right = 59
    beyond = sp.Piecewise((0, N_d_index > last_right), (1 / N_d_index, True))
    pieces = {"n_d = 0": sp.Integer(0), "n_d = 1": beyond}
    verdict = check_no_ties(Form(pieces))
    if last_right == 60:
        assert (verdict.verdict, verdict.detail) == ("holds", NO_TIES_HOLDS)
    else:
        assert (verdict.verdict, verdict.detail) == (
            "fails",
            "1 of 120 bins differ from the exact sum, e.g. n_d = 1, N_(d-1) = 59: printed 0, "
            "exact 1/60.",
        )


TOLERANCE = Fraction(1e-25)  # the double nearest 1e-25, 0x1.ef2d0f5da7dd9p-84 (odd)
BELOW = Fraction(math.nextafter(1e-25, 0))  # the (even) double below it


@pytest.mark.parametrize(
    ("difference", "verdict"),
    [
        (TOLERANCE, "fails"),  # 1e-25 is not below 1e-25
        (BELOW, "holds"),
        # halfway between the two doubles plus 2^-160: kept at 30 digits (103 bits, spaced 2^-186
        # here), so the nearest double is 1e-25 itself (15 digits would lose it)
        ((TOLERANCE + BELOW) / 2 + Fraction(1, 2**160), "fails"),
        # halfway plus 2^-188: 30 digits round it to the halfway point, which rounds to the even
        # double below 1e-25 (31 digits, 106 bits, would keep it above halfway: 1e-25)
        ((TOLERANCE + BELOW) / 2 + Fraction(1, 2**188), "holds"),
    ],
    ids=["exactly_1e-25", "the_double_below", "nearest_1e-25", "halfway_at_30_digits"],
)
def test_a_no_ties_difference_is_evaluated_to_30_digits_and_must_be_below_1e_25(
    difference, verdict
):
    off = sp.Rational(difference.numerator, difference.denominator)
    found = check_no_ties(Form({"n_d = 0": off, "n_d = 1": 1 / N_d_index}))
    if verdict == "holds":
        assert (found.verdict, found.detail) == ("holds", NO_TIES_HOLDS)
    else:
        assert (found.verdict, found.detail) == (
            "fails",
            f"60 of 120 bins differ from the exact sum, e.g. n_d = 0, N_(d-1) = 0: printed {off}, "
            "exact 0.",
        )


def test_a_relaxed_sum_that_is_neither_the_integral_nor_within_the_bound_names_both():
    # twice the integral of 1/t: its derivative in b is 2/b, and it is about twice the sum
    relaxed = 2 * (sp.log(b) - sp.log(a))
    verdict = check_linear_discount(Form({"D(t)": 1 / t, "relaxed sum": relaxed}))
    assert verdict.verdict == "fails"
    said, shown = verdict.detail.split(": ", 1)
    assert said == ("the relaxed sum is not int_(N_(d-1))^(N_d) D(t) dt; |relaxed - sum_t D(t)| "
                    "exceeds the trapezoid bound")
    assert shown.endswith(".") and len(shown.split("; ")) == 3  # the first three bins over
