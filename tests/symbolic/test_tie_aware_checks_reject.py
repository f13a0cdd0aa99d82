"""Where the tie-aware checks (He et al., 2018) draw their lines, and what a failing form gets.

``test_tie_aware_claims.py`` tests the checks against forms wrong by a little; these tests
give the checks forms that sit exactly on a bound, forms that only evaluate in the module a
check documents (float64 ``math`` or ``mpmath``), forms with an imaginary part, and forms that
fail in more than one place, and compare the verdict's whole detail. Expected values are worked
out here by hand, by brute force or by Euler-Maclaurin in mpmath, not by the checks' own code.
"""

import math
from fractions import Fraction

import mpmath
import pytest
import sympy as sp
from sympy.utilities.lambdify import implemented_function

from gradlab.symbolic.claims import Form
from gradlab.symbolic.tie_aware_claims import (
    C_d,
    C_pos_prev,
    C_prev,
    N_d,
    N_plus,
    N_prev,
    a,
    affinities,
    b,
    c,
    c_pos,
    check_dcg_at_k,
    check_distance_gradient,
    check_eq15,
    check_eq20,
    check_eq21,
    check_expansion,
    check_level_regrouping,
    check_li_first_bin,
    check_log_approximation,
    check_one_item_bin,
    check_quadrature_rule,
    check_table_d,
    claims,
    disc,
    gain,
    gain_sum,
    jj,
    k_cut,
    n,
    relaxation_check,
    t_next,
    t_tie,
    v_level,
)
from tests.reference.tie_aware_loops import ap_of_one_tie

UNEVALUABLE = "the form does not evaluate on the check's cases ({})."
"""The detail of a check whose form raises on the check's cases."""



def _raised(call) -> str:
    """``"Type: message"`` of the error ``call`` raises, as this Python words it."""
    try:
        call()
    except Exception as error:  # whichever this Python raises
        return f"{type(error).__name__}: {error}"
    raise AssertionError("no error raised")


SQRT_DOMAIN = UNEVALUABLE.format(_raised(lambda: math.sqrt(-1)))
ACOS_DOMAIN = UNEVALUABLE.format(_raised(lambda: math.acos(2)))


def _claim(label):
    return next(claim for claim in claims() if claim.label == label)


# --- the module each check evaluates a form in --------------------------------------------

DCG_PIECES = {"tie value": gain_sum / n * disc, "D(j)": 1 / sp.log(jj + 1, 2),
              "first rank": t_tie + 1, "last rank": sp.Min(t_next, k_cut)}  # fmt: skip


@pytest.mark.parametrize(
    "pieces",
    [
        {**DCG_PIECES, "first rank": t_tie + 1 + sp.sqrt(t_tie - 1)},  # sqrt(-1) at the first tie
        {**DCG_PIECES, "last rank": sp.Min(t_next, k_cut) + sp.sqrt(t_tie - 1)},
    ],
    ids=["first rank", "last rank"],
)
def test_the_dcg_rank_limits_are_evaluated_in_float64_math(pieces):
    # the math module raises where numpy would return nan (and int(nan) raise another error)
    verdict = check_dcg_at_k(Form(pieces))
    assert (verdict.verdict, verdict.detail) == ("fails", SQRT_DOMAIN)


def test_the_level_regrouping_summand_is_evaluated_in_float64_math():
    # sqrt(v - 3) at the levels 0, 1, 2: the math module raises where numpy returns nan
    eq6 = gain(v_level) * sum(sp.KroneckerDelta(v_level, x) for x in affinities)
    verdict = check_level_regrouping(Form(eq6 + sp.sqrt(v_level - 3)))
    assert (verdict.verdict, verdict.detail) == ("fails", SQRT_DOMAIN)


def test_the_rules_cell_width_is_evaluated_in_float64_math():
    # acos(2) is not real: the math module raises where numpy would return nan
    pieces = {"node offset from the cell's right edge": sp.Rational(1, 2), "cell width": sp.acos(2)}
    verdict = check_quadrature_rule(Form(pieces))
    assert (verdict.verdict, verdict.detail) == ("fails", ACOS_DOMAIN)


def test_eq15s_limits_are_evaluated_in_mpmath():
    # sqrt(C_(d-1) - 10) at C_(d-1) <= 8 is imaginary in mpmath (numpy would give nan): the
    # integral along the complex path is complex, not a relaxed DCG
    verdict = check_eq15(Form({"factor": sp.log(2), "lower": sp.sqrt(C_prev - 10),
                               "upper": C_d + 1}))  # fmt: skip
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        UNEVALUABLE.format(_raised(lambda: float(mpmath.mpc(1, 1)))),
    )


def test_a_gradient_written_in_both_codes_components_is_read_in_both():
    # (phi_j - phi_i phi_j) / (2 phi_j) - 1/2 is -phi_i/2: phi_j cancels only once both are read
    phi_i, phi_j = sp.Symbol("phi_i"), sp.Symbol("phi_j")
    printed = (phi_j - phi_i * phi_j) / (2 * phi_j) - sp.Rational(1, 2)
    assert phi_j in printed.free_symbols  # SymPy keeps the quotient as written
    verdict = check_distance_gradient(Form(printed))
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "d(phi_i, phi_j) = (b - phi_i . phi_j)/2, each component: sympy.simplify reduces printed "
        "minus true to 0.",
    )


_working_digits = implemented_function("digits", lambda x: mpmath.mp.dps)


def test_the_eq20_ratios_are_taken_at_30_digits():
    # Eq. 20's term times (digits - 29): the term itself at 30 digits, twice it at 31
    verdict = check_eq20(Form((1 / (2 * N_prev) - 1 / (2 * N_d)) * (_working_digits(N_prev) - 29)))
    assert verdict.verdict == "holds"


# --- forms with an imaginary part ----------------------------------------------------------


def test_an_eq20_term_with_an_imaginary_part_is_of_no_size_at_any_ratio():
    # its real part is Eq. 20's term; a complex term is no size of the real error
    verdict = check_eq20(Form(1 / (2 * N_prev) - 1 / (2 * N_d) + sp.I / N_d))
    shown = "; ".join(f"nan at n_d / N_(d-1) = {ratio}" for ratio in ("1/10", "1", "10", "1000"))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"(ln gap - harmonic gap) / printed term at N_(d-1) = 10^4 is {shown}: not the size of "
        "the error for every ratio n_d / N_(d-1).",
    )


def test_a_log_approximation_with_an_imaginary_part_is_infinitely_off_on_every_bin():
    # the exact harmonic gap plus 1e-9 i: within every tolerance in size, but not a real number
    verdict = check_log_approximation(Form(sp.harmonic(N_d) - sp.harmonic(N_prev) + sp.I / 10**9))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "|approximation - harmonic gap| exceeds the tolerance per bin (1/N_(d-1) - 1/N_d)/2, the "
        "trapezoid bound of the logarithm's own error (1/t convex; Eq. 20's order), and 1/2 at the "
        "first bin N_(d-1) = 0 on 35 of 35 bins: inf at (N_(d-1), n_d) = (0, 1) (tolerance 0.5); "
        "30 of them with N_(d-1) >= 1.",
    )


FIRST_BIN_LI = sp.li(b + sp.Rational(3, 2)) - sp.li(a + sp.Rational(3, 2))
"""The corrected first-bin relaxation of the discount sum (midpoint limits)."""


def test_a_discount_relaxation_with_an_imaginary_part_fails_on_the_bins_where_it_has_one():
    # sqrt(1 - C_(d-1)) / 10^12 is real at C_(d-1) = 0, 1 and imaginary from C_(d-1) = 2 on:
    # 5 of the 7 starts, 25 of the 35 bins, named in grid order (the first three shown)
    verdict = check_li_first_bin(Form(FIRST_BIN_LI + sp.sqrt(1 - a) / 10**12))
    shown = "; ".join(f"inf at (C_(d-1), c_d) = (2, {size})" for size in (1, 2, 5))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"|relaxation - sum_t 1/ln(t+1)| exceeds the trapezoid bound on 25 of 35 bins: {shown}.",
    )


def test_a_discount_relaxation_exactly_at_the_first_bins_bound_holds():
    # at (C_(d-1), c_d) = (0, 1) the sum is D(1) = 1/ln 2 and the bound D(1)/2: 1/(2 ln 2) is
    # off by exactly the bound (halving is exact in floating point); on the other bins (C_d >= 2)
    # the midpoint Li
    at_edge = 1 / (2 * sp.log(2))
    exact = 1 / math.log(2)
    assert abs(float(sp.N(at_edge)) - exact) == exact / 2
    edge = sp.Piecewise((at_edge, b < sp.Rational(3, 2)), (FIRST_BIN_LI, True))
    assert check_li_first_bin(Form(edge)).verdict == "holds"


def test_a_one_item_bin_term_undefined_at_c_1_plus_1e_12_does_not_evaluate():
    # the term is evaluated at c = 1 + 1e-6, 1 + 1e-12 and 1 + 1e-18; this one divides by zero at
    # the middle point (round(10^12 (c - 1)) = 1) and is finite at both ends
    term = 1 / (sp.floor(10**12 * (c - 1) + sp.Rational(1, 2)) - 1)
    verdict = check_one_item_bin(Form(term))
    divided = _raised(lambda: mpmath.mpf(1) / mpmath.mpf(0))  # mpmath's words
    assert (verdict.verdict, verdict.detail) == ("fails", UNEVALUABLE.format(divided))


# --- the relaxed AP_r against AP_T at integer counts ----------------------------------------

RELAXED_GRID = [(before, size, pos, pos_before) for before in (1, 4, 20) for size in (2, 5)
                for pos in (0, 1, 2) for pos_before in (0, 1)]  # fmt: skip
"""The documented bins (C_(d-1), c_d, c+_d, C+_(d-1)), N+ = C+_(d-1) + c+_d + 2, in grid order."""


def _allowance(before, size, pos, pos_before, plus):
    """|B| (1/C_(d-1) - 1/C_d)/2: Eq. 10's factor of the harmonic gap times Eq. 11's bound."""
    factor = Fraction(pos, size * plus) * (pos_before + 1 - Fraction(pos - 1, size - 1)
                                            * (before + 1))  # fmt: skip
    return abs(factor) * (Fraction(1, before) - Fraction(1, before + size)) / 2


EXACT_AP_R = _claim("claim-eq13-one-item-bin").correction.value
"""Eq. 13 with the exact harmonic gap: AP_T itself at integer counts."""


def test_an_ap_r_with_an_imaginary_part_fails_at_the_first_bin():
    # every bin is infinitely off; the first of them (in grid order) is named
    verdict = relaxation_check(Form(EXACT_AP_R + sp.I / 10**15))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "at integer counts it is not AP_T(R^(d)): 0 against Eq. 3's 0 at C_(d-1) = 1, c_d = 2, "
        "c+_d = 0, C+_(d-1) = 0, inf times Eq. 11's allowance.",
    )


def test_an_ap_r_off_by_one_and_a_half_allowances_fails_at_its_largest_allowance():
    # B (1/C_(d-1) - 1/C_d)/2 in the form's symbols: the form is off by (1 + C+_(d-1)/2) of it,
    # one allowance where C+_(d-1) = 0 (just within: the allowance adds 1e-12) and one and a
    # half where C+_(d-1) = 1; named is the bin of the largest allowance among those
    factor = c_pos / (c * N_plus) * (C_pos_prev + 1 - (c_pos - 1) / (c - 1) * (C_prev + 1))
    bound = (1 / C_prev - 1 / N_d) / 2
    verdict = relaxation_check(Form(EXACT_AP_R + (1 + C_pos_prev / 2) * factor * bound))
    off = [bin_ for bin_ in RELAXED_GRID if bin_[3] == 1]
    before, size, pos, pos_before = max(off, key=lambda bin_: _allowance(*bin_, bin_[2] + 3))
    assert (before, size, pos, pos_before) == (1, 2, 1, 1)  # allowance 1/4 * (1 - 1/3)/2 = 1/12
    plus = pos_before + pos + 2
    exact = ap_of_one_tie(before, size, pos, pos_before, plus)
    signed = Fraction(pos, size * plus) * (pos_before + 1 - Fraction(pos - 1, size - 1)
                                            * (before + 1))  # fmt: skip
    printed = (
        exact + Fraction(3, 2) * signed * (Fraction(1, before) - Fraction(1, before + size)) / 2
    )
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        f"at integer counts it is not AP_T(R^(d)): {float(printed):.6g} against Eq. 3's "
        f"{float(exact):.6g} at C_(d-1) = {before}, c_d = {size}, c+_d = {pos}, "
        f"C+_(d-1) = {pos_before}, 1.5 times Eq. 11's allowance.",
    )


def test_an_ap_r_off_by_exactly_its_allowance_holds():
    # at c+_d = 0 AP_T is 0 and B is 0, so the allowance is the 1e-12 of rounding alone; the
    # form adds exactly 1e-12 there (and 0 at c+_d = 1, 2)
    verdict = relaxation_check(Form(EXACT_AP_R + (1 - c_pos) * (2 - c_pos) / (2 * 10**12)))
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "At integer counts it is AP_T(R^(d)) (Eq. 3's sum) within Eq. 11's allowance on 36 bins.",
    )


def test_the_relaxation_check_counts_two_relevant_items_outside_the_bin():
    # the form with N+ written as C+_(d-1) + c+_d + 2 is AP_T only for that N+
    verdict = relaxation_check(Form(EXACT_AP_R.subs(N_plus, C_pos_prev + c_pos + 2)))
    assert verdict.verdict == "holds"


# --- the order terms of Eq. 17-21 -----------------------------------------------------------

N = sp.Symbol("N", positive=True)


@pytest.mark.parametrize(
    "order",
    [sp.Integer(1), 10 - (sp.log(N) / sp.log(10) - sp.Rational(21, 5)) ** 2],
    ids=["constant", "larger at 1e5 than at 1e3"],
)
def test_an_order_term_that_does_not_fall_from_1e3_to_1e5_is_not_a_vanishing_magnitude(order):
    # the expansion H(N) - order leaves exactly the order term: the ratio is 1 at every N, but
    # the term is 1 throughout, or 8.56, 9.96, 9.36 at N = 1e3, 1e4, 1e5 (10 - (log10 N - 4.2)^2)
    verdict = check_expansion(Form({"expansion": sp.harmonic(N) - order, "order": order}))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "(H(N) - expansion) / order term = [1.0, 1.0, 1.0] at N = 1e3, 1e4, 1e5, the order term "
        "not a positive vanishing magnitude: not of that order.",
    )


def _log_minus_harmonic(before, size):
    """ln(N_d / N_(d-1)) - (H(N_d) - H(N_(d-1))) to 30 digits, by Euler-Maclaurin for the gap."""
    with mpmath.workdps(30):

        def harmonic(m):  # H(m) = gamma + ln m + 1/(2m) - 1/(12m^2) + 1/(120m^4) - 1/(252m^6)
            m = mpmath.mpf(m)
            return (mpmath.euler + mpmath.log(m) + 1 / (2 * m) - 1 / (12 * m**2)
                    + 1 / (120 * m**4) - 1 / (252 * m**6))  # fmt: skip

        return mpmath.log(mpmath.mpf(before + size) / before) - (
            harmonic(before + size) - harmonic(before)
        )


def test_an_o_chain_wrong_in_two_places_names_both():
    # term 1, n/(2ab), equals Eq. 20's term only through b = a + n; term 2, 1/(2a), is n/b times
    # the error's size: within 10 % of it for n_d / N_(d-1) = 10 and 1000 only
    verdict = check_eq21(Form((n / (2 * a * b), 1 / (2 * a))))
    ratios = {}
    for ratio in ("1/10", "1", "10", "1000"):
        error = _log_minus_harmonic(10**4, int(10**4 * Fraction(ratio)))
        ratios[ratio] = float(error * 2 * 10**4)
    wrong = [f"{value:.4g} at n_d / N_(d-1) = {ratio}" for ratio, value in ratios.items()
             if abs(value - 1) > 0.1]  # fmt: skip
    assert [ratio for ratio in ratios if abs(ratios[ratio] - 1) > 0.1] == ["1/10", "1"]
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "not an equality of orders: term 1, O(n/(2*a*b)), is not Eq. 20's 1/(2 N_(d-1)) - "
        "1/(2 N_d) in N_(d-1) and N_d; term 2, O(1/(2*a)): error / term = "
        + ", ".join(wrong)
        + ".",
    )


# --- the table of Sec. D ----------------------------------------------------------------------

TABLE_D = {"alpha = 40": (0.732, 0.789, 0.800, 0.826), "alpha -> oo": (0.751, 0.804, 0.813, 0.830)}


def test_a_table_with_entries_0_and_1_holds_and_shows_its_margins_to_three_decimals():
    # 0 and 1 are AP_T values; the margins 0.7512, 0.0146, 0.0134 and 0.0201 print as 0.751,
    # 0.015, 0.013 and 0.02
    table = {"alpha = 40": (0.0, 0.7894, 0.8, 0.9799), "alpha -> oo": (0.7512, 0.804, 0.8134, 1.0)}
    verdict = check_table_d(Form(table))
    assert (verdict.verdict, verdict.detail) == (
        "holds",
        "every entry is an AP_T in [0, 1] and alpha -> oo is higher at 12, 24, 32 and 48 bits, by "
        "[0.751, 0.015, 0.013, 0.02] (the table's own numbers).",
    )


def test_a_table_with_its_rows_swapped_is_behind_at_every_bit_length():
    swapped = {"alpha = 40": TABLE_D["alpha -> oo"], "alpha -> oo": TABLE_D["alpha = 40"]}
    verdict = check_table_d(Form(swapped))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "alpha -> oo is not higher at 12 bits (0.732 vs 0.751), 24 bits (0.789 vs 0.804), "
        "32 bits (0.8 vs 0.813), 48 bits (0.826 vs 0.83).",
    )


def test_a_table_with_a_short_row_says_only_that():
    # three entries in the alpha = 40 row, each below the continuation: no column is behind
    verdict = check_table_d(Form({**TABLE_D, "alpha = 40": (0.732, 0.789, 0.800)}))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "the table's entries are not four AP_T values per row in [0, 1].",
    )


def test_a_table_out_of_range_and_behind_says_both_in_one_sentence():
    # 1.464 at 12 bits of the alpha = 40 row: no AP_T, and above the continuation's 0.751
    verdict = check_table_d(Form({**TABLE_D, "alpha = 40": (1.464, 0.789, 0.800, 0.826)}))
    assert (verdict.verdict, verdict.detail) == (
        "fails",
        "the table's entries are not four AP_T values per row in [0, 1]; alpha -> oo is not "
        "higher at 12 bits (0.751 vs 1.464).",
    )
