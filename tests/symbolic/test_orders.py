"""The order-of-growth check tells log factors apart, on counts worked out by hand.

Every count here is a closed form written in the test (exact ``M^2``, ``M log2 M``, the operation
count of Eq. 37 of He et al. 2018 by hand), never the output of a procedure under test.
"""

import math

import pytest
import sympy as sp

from gradlab.errors import GradlabError
from gradlab.symbolic.orders import ORDER_SPREAD, order_check

M, L, n, p = sp.symbols("M L n p", positive=True)
b, V = sp.symbols("b V", positive=True)


def _grid(counts, **axes):
    """``{((name, value), ...): count(**values)}`` over the product of the axes."""
    names = sorted(axes)
    points = [{}]
    for name in names:
        points = [{**point, name: value} for point in points for value in axes[name]]
    return {tuple((name, point[name]) for name in names): counts(**point) for point in points}


SQUARES = _grid(lambda M: M * M, M=(8, 32, 128, 512))
"""One sigmoid per entry of an M x M difference matrix (Smooth-AP per query, Table S2)."""


def test_the_true_order_of_an_exact_square_holds():
    verdict = order_check(M**2, SQUARES)
    assert verdict.verdict == "holds", verdict.detail
    assert "stays within a factor 1.00 over 4 grid points" in verdict.detail


@pytest.mark.parametrize("slip", [M**2 * sp.log(M), M**2 * sp.log(M, 2), M**2 / sp.log(M),
                                  M**2 * sp.log(M) ** 2, M, M**3])  # fmt: skip
def test_a_log_factor_or_a_power_too_many_or_too_few_is_rejected(slip):
    # O(M^2 log M) printed for O(M^2): count / (M^2 log M) spreads only by log(512)/log(8) = 3,
    # within the old allowance of 3; the last step 128 -> 512 shows a factor log(512)/log(128).
    verdict = order_check(slip, SQUARES)
    assert verdict.verdict == "fails", verdict.detail
    assert "from M = 128 to 512" in verdict.detail


def test_the_slip_names_the_order_that_fits_better():
    verdict = order_check(M**2 * sp.log(M), SQUARES)
    factor = math.log(128) / math.log(512)
    assert f"changes by a factor {factor:.3g}, which M**2 follows better" in verdict.detail


MERGE_SORT = _grid(lambda M: M * math.log2(M) / 2, M=(16, 256, 4096, 65536))
"""Comparisons of a top-down merge sort of M already-sorted items, M a power of 2: M/2 log2 M."""


def test_m_log_m_holds_and_m_log_squared_m_or_m_alone_are_rejected():
    assert order_check(M * sp.log(M), MERGE_SORT).verdict == "holds"
    assert order_check(M * sp.log(M, 2), MERGE_SORT).verdict == "holds"  # a constant factor
    for slip in (M * sp.log(M) ** 2, M, M**2 * sp.log(M)):
        assert order_check(slip, MERGE_SORT).verdict == "fails", slip


def _eq37_count(b, V, M):
    """Eq. 37's operations by hand: per (d, v) 5 M^2 (slopes, two scalings, two additions);
    then b M^2 for Phi @ total and b M for the division; d = 0..b."""
    return (b + 1) * V * 5 * M**2 + b * M**2 + b * M


EQ37 = _grid(_eq37_count, b=(4, 32), V=(2, 8), M=(8, 64))


def test_b_v_m_squared_holds_and_its_log_slip_is_rejected():
    assert order_check(b * V * M**2, EQ37).verdict == "holds"
    verdict = order_check(b * V * M**2 * sp.log(M), EQ37)  # O(b|V| M^2 log M)
    assert verdict.verdict == "fails"
    assert "from M = 8 to 64 (V = 2, b = 4)" in verdict.detail and "M**2*V*b follows better" in (
        verdict.detail
    )


@pytest.mark.parametrize("slip", [b * M**2, V * M**2, b * V * M, b * V * M**2 * sp.log(b),
                                  b * V * M**2 * sp.log(V)])  # fmt: skip
def test_every_variable_of_a_product_order_is_stepped(slip):
    assert order_check(slip, EQ37).verdict == "fails", slip


def test_a_lower_order_term_is_read_on_the_last_step_where_it_weighs_least():
    # count = M^2 + 4 M: on the last step 512 -> 4096, count / M^2 moves by 0.7 %, far less
    # than a log factor (log 4096 / log 512 = 4/3), so M^2 holds and M^2 log M does not.
    counts = _grid(lambda M: M * M + 4 * M, M=(8, 64, 512, 4096))
    assert order_check(M**2, counts).verdict == "holds"
    assert order_check(M**2 * sp.log(M), counts).verdict == "fails"
    # On a grid that stops at M = 8 the 4 M term dominates the step 2 -> 8 (count / M^2 halves,
    # log 8 / log 2 = 3): there M^2 / log M follows the counts better, so a short grid fails.
    verdict = order_check(M**2, _grid(lambda M: M * M + 4 * M, M=(2, 8)))
    assert verdict.verdict == "fails" and "M**2/log(M) follows better" in verdict.detail


def test_a_variable_that_never_moves_alone_is_stepped_with_the_fewest_others():
    # M = p + n beside p and n: ranking all M items costs M log2 M.
    points = {(("M", p_ + n_), ("n", n_), ("p", p_)): (p_ + n_) * math.log2(p_ + n_)
              for p_ in (4, 64, 1024) for n_ in (8, 128, 2048)}  # fmt: skip
    assert order_check(M * sp.log(M), points).verdict == "holds"
    verdict = order_check(n * sp.log(n), points)
    assert verdict.verdict == "fails"
    assert "from p = 64 to 1024 (M = 72 -> 1032, n = 8)" in verdict.detail


def test_a_spread_of_exactly_the_allowed_factor_holds_and_beyond_fails():
    # one step of six decades from M = 1 (log M = 0: powers only) with count / M = 1 then 3
    assert ORDER_SPREAD == 3.0
    assert order_check(M, {(("M", 1),): 1, (("M", 10**6),): 3 * 10**6}).verdict == "holds"
    verdict = order_check(M, {(("M", 1),): 1, (("M", 10**6),): 3.5 * 10**6})
    assert verdict.verdict == "fails"
    assert "varies by a factor 3.5 over 2 grid points" in verdict.detail


def test_a_single_log_factor_on_a_step_from_one_cannot_be_read_so_powers_decide():
    # log 1 = 0: the step from 1 to 2 has no log candidate; count / M triples, which M^2 follows
    # better (a factor 2) than M itself.
    assert order_check(M, {(("M", 1),): 1, (("M", 2),): 6}).verdict == "fails"


@pytest.mark.parametrize("order", [-(M**2), M**2 - 100, sp.log(M) - 3])
def test_an_order_that_is_not_a_positive_cost_fails(order):
    verdict = order_check(order, SQUARES)
    assert verdict.verdict == "fails"
    assert "not a cost (positive, finite) on the grid" in verdict.detail


@pytest.mark.parametrize(("measured", "message"), [
    ([((("M", 8),), 64)], "measured must map at least two grid points"),
    ({(("M", 8),): 64}, "measured must map at least two grid points"),
    ({(("M", 8),): 64, (("L", 8),): 64}, "every grid point of measured must name the variables"),
    ({(("M", 0.5),): 1, (("M", 8),): 64}, "grid values in measured must be numbers >= 1"),
    ({(("M", True),): 1, (("M", 8),): 64}, "grid values in measured must be numbers >= 1"),
    ({(("M", 2),): 0, (("M", 8),): 64}, "counts in measured must be positive finite numbers"),
    ({(("M", 2),): math.inf, (("M", 8),): 64}, "counts in measured must be positive finite"),
    ({(("M", 2),): "4", (("M", 8),): 64}, "counts in measured must be positive finite numbers"),
])  # fmt: skip
def test_a_measured_grid_that_is_not_a_grid_is_refused(measured, message):
    with pytest.raises(GradlabError, match=message):
        order_check(M**2, measured)


def test_an_order_must_be_an_expression_in_the_grids_variables():
    with pytest.raises(GradlabError, match="order must be a SymPy expression; got 'M'"):
        order_check("M", SQUARES)
    with pytest.raises(GradlabError, match=r"uses \['L'\], which the grid does not name"):
        order_check(L * M, SQUARES)


def test_an_o_term_is_read_as_its_magnitude_constants_absorbed():
    at_infinity = ((b, sp.oo), (V, sp.oo), (M, sp.oo))
    assert order_check(sp.O(b * V * M**2, *at_infinity), EQ37).verdict == "holds"
    assert 2 * sp.O(b * V * M**2, *at_infinity) == sp.O(b * V * M**2, *at_infinity)
    # SymPy writes O(b V M^2 log M) with log(1/M); it is still the slip O(b|V| M^2 log M)
    slip = sp.O(b * V * M**2 * sp.log(M), *at_infinity)
    verdict = order_check(slip, EQ37)
    assert verdict.verdict == "fails" and "M**2*V*b follows better" in verdict.detail


def test_a_grid_of_one_point_is_refused_with_an_example_of_a_grid():
    measured = {(("M", 8),): 64}
    with pytest.raises(GradlabError) as error:
        order_check(M**2, measured)
    assert str(error.value) == (
        "measured must map at least two grid points to counts, e.g. {(('M', 8),): 64, "
        f"(('M', 64),): 4096}}; got {measured!r}"
    )


def test_a_power_too_few_is_reported_in_full():
    # count = M^2 and the printed order M: count / M = M spreads by 512 / 8 = 64 over the grid,
    # and on the last step 128 -> 512 it grows by 512 / 128 = 4, exactly one more power of M
    # (residual 0), so M**2 follows better. A grid of one variable names no others.
    verdict = order_check(M, SQUARES)
    assert verdict.verdict == "fails"
    assert verdict.detail == (
        "counted operations / M varies by a factor 64 over 4 grid points; from M = 128 to 512 "
        "count / M changes by a factor 4, which M**2 follows better: not the order of the count."
    )


def test_a_product_order_that_holds_names_the_last_step_of_each_variable():
    # count = M^2 n + M: the lower-order M weighs 1 / (M n) against M^2 n, least on the last steps.
    def count(M, n):
        return M * M * n + M

    counts = _grid(count, M=(8, 32, 128), n=(2, 4, 16))
    ratios = [count(**dict(point)) / (dict(point)["M"] ** 2 * dict(point)["n"]) for point in counts]
    spread = max(ratios) / min(ratios)  # 1 + 1/16 at (8, 2) over 1 + 1/2048 at (128, 16)
    verdict = order_check(M**2 * n, counts)
    assert verdict.verdict == "holds", verdict.detail
    assert verdict.detail == (
        f"counted operations / M**2*n stays within a factor {spread:.2f} over 9 grid points, and "
        "on the last step of each variable (M 32 -> 128, n 4 -> 16) no order M**2*n * v^p "
        "(p in [-1, 1]) or M**2*n * log(v)^q (q in [-2, -1, 1, 2]) follows the counts better."
    )


def test_a_variable_held_at_one_value_is_skipped_and_the_others_are_still_stepped():
    # L is named by the grid but never moves; M moves from 128 to 512 with count M^2. The slip
    # M^2 log M spreads only by log(512) / log(128) = 9 / 7 (within the allowance), so only M's
    # step tells it apart: count / (M^2 log M) shrinks by 7 / 9, which M**2 follows exactly.
    counts = _grid(lambda L, M: M * M, L=(4,), M=(128, 512))
    verdict = order_check(M**2 * sp.log(M), counts)
    assert verdict.verdict == "fails"
    assert "from M = 128 to 512 (L = 4) count / M**2*log(M) changes by a factor 0.778" in (
        verdict.detail
    )
    holds = order_check(M**2, counts)
    assert holds.verdict == "holds" and "last step of each variable (M 128 -> 512)" in holds.detail


def test_a_step_is_read_with_the_other_variables_fixed_when_the_grid_has_such_pairs():
    # count = M^2 n read as M^2: count / M^2 = n, so n's step 8 -> 64 shows n (a factor 8 = 64 / 8),
    # while M's steps with n fixed show nothing; the diagonal pair (M, n) = (8, 8) -> (64, 64),
    # where n moves too, must not be read as M's step (it would blame M for n's factor).
    counts = _grid(lambda M, n: M * M * n, M=(8, 64), n=(8, 64))
    verdict = order_check(M**2, counts)
    assert verdict.detail == (
        "counted operations / M**2 varies by a factor 8 over 4 grid points; from n = 8 to 64 "
        "(M = 8) count / M**2 changes by a factor 8, which M**2*n follows better: not the order "
        "of the count."
    )


def test_an_o_term_of_a_symbol_without_assumptions_is_read_as_its_magnitude():
    # With a plain symbol SymPy keeps O(m^2 log m) as m**2*log(1/m); its magnitude is still
    # m^2 log m, which an exact count m^2 ln m follows (count / order = 1 everywhere).
    m = sp.Symbol("M")
    counts = _grid(lambda M: M * M * math.log(M), M=(8, 64, 512))
    order = sp.O(m**2 * sp.log(m), (m, sp.oo))
    assert order.expr != m**2 * sp.log(m)  # the 1/m form, not the plain one
    verdict = order_check(order, counts)
    assert verdict.verdict == "holds", verdict.detail


def test_a_slip_in_a_symbol_without_assumptions_names_the_simplified_better_order():
    # M**2*log(M) for exact squares: the log factor divides out in the better order M**2
    m = sp.Symbol("M")
    verdict = order_check(m**2 * sp.log(m), SQUARES)
    assert verdict.verdict == "fails"
    assert "which M**2 follows better" in verdict.detail


def test_exact_integer_grid_values_past_64_bits_are_evaluated():
    # a binary search over M = 2**64 .. 2**70 items makes log2 M comparisons: 64, 67, 70
    counts = {(("M", 2**k),): k for k in (64, 67, 70)}
    verdict = order_check(sp.log(M), counts)
    assert verdict.verdict == "holds", verdict.detail


def test_an_order_that_cannot_be_evaluated_at_a_grid_point_fails():
    # 1 / (M - 8) divides by zero at M = 8
    order = 1 / (M - 8)
    verdict = order_check(order, SQUARES)
    assert verdict.verdict == "fails"
    assert verdict.detail.startswith(f"{order} is ")
    assert verdict.detail.endswith(" at M = 8: not a cost (positive, finite) on the grid.")


def test_an_order_of_zero_at_a_grid_point_is_not_a_cost():
    verdict = order_check(M - 8, SQUARES)  # M - 8 = 0 at M = 8
    assert verdict.verdict == "fails"
    assert verdict.detail == "M - 8 is 0.0 at M = 8: not a cost (positive, finite) on the grid."


def test_an_order_that_overflows_to_infinity_is_not_a_cost():
    # 2 * 1e308 exceeds the largest float (about 1.8e308): the order is inf there
    counts = {(("M", 8),): 8, (("M", 1e308),): 1e308}
    verdict = order_check(2 * M, counts)
    assert verdict.verdict == "fails"
    assert verdict.detail == (
        "2*M is inf at M = 1e+308: not a cost (positive, finite) on the grid."
    )


def test_an_order_with_a_complex_value_shows_that_value():
    # (8 - 16)^(1/3): the principal cube root of -8 is 2 e^(i pi / 3) = 1 + i sqrt(3)
    order = (M - 16) ** sp.Rational(1, 3)
    verdict = order_check(order, SQUARES)
    assert verdict.verdict == "fails"
    shown = verdict.detail.removeprefix(f"{order} is ").split(" at M = 8")[0]
    assert complex(shown) == pytest.approx(complex(1, math.sqrt(3)))


def test_an_exact_tie_between_the_order_and_a_log_factor_goes_to_the_order():
    # On the step M = 2 -> h with count / M = 1 then r, the order M leaves the residual |ln r| and
    # M log M leaves |ln r - ln(ln h / ln 2)|: an exact tie when ln r is half of ln(ln h / ln 2)
    # (no other candidate comes close: a power of M moves ln(h / 2) >= ln 84). The simpler one,
    # M, wins the tie (module docstring); one float more and M log M is strictly better.
    for h in range(168, 512):  # ln h / ln 2 in [7.4, 9]: r in [e, 3], within the spread allowance
        half = math.log(math.log(h) / math.log(2)) / 2
        ties = [r for r in _floats_around(math.exp(half)) if math.log(r) == half and r * h / h == r]
        if ties:
            break
    assert ties, "no float r with ln r exactly on the tie"
    r = ties[0]
    assert order_check(M, {(("M", 2),): 2, (("M", h),): r * h}).verdict == "holds"
    above = next(s for s in _floats_around(r) if s > r and math.log(s) > half and s * h / h == s)
    verdict = order_check(M, {(("M", 2),): 2, (("M", h),): above * h})
    assert verdict.verdict == "fails" and "which M*log(M) follows better" in verdict.detail


def _floats_around(x, steps=16):
    """x and the ``steps`` floats on either side of it, nearest first."""
    down = up = x
    around = [x]
    for _ in range(steps):
        down, up = math.nextafter(down, 0), math.nextafter(up, math.inf)
        around += [down, up]
    return around


def test_an_order_math_cannot_evaluate_is_refused_naming_the_function():
    with pytest.raises(GradlabError) as error:
        order_check(M * sp.LambertW(M), SQUARES)
    assert str(error.value) == (
        "order M*LambertW(M) cannot be evaluated in floats at M = 8 (NameError: name "
        "'LambertW' is not defined)"
    )


def test_an_order_that_overflows_a_float_is_infinite_not_nan():
    # 200! and e^1000 exceed the largest float (about 1.8e308): math raises OverflowError
    # (e^200 is about 7e86, a float: exp first overflows at M = 1000)
    counts = {(("M", 200),): 5, (("M", 1000),): 6}
    for order, where in ((sp.factorial(M), 200), (sp.exp(M), 1000)):
        verdict = order_check(order, counts)
        assert (verdict.verdict, verdict.detail) == (
            "fails",
            f"{order} is inf at M = {where}: not a cost (positive, finite) on the grid.")


def test_counts_beyond_floats_or_too_small_for_the_ratio_are_refused():
    huge = {(("M", 8),): 10**400, (("M", 16),): 10**401}
    with pytest.raises(GradlabError, match=r"^counts in measured must be positive finite numbers"):
        order_check(M, huge)
    tiny = {(("M", 8),): 5e-324, (("M", 16),): 1e-323}  # 5e-324 / 8 rounds to 0
    with pytest.raises(GradlabError) as error:
        order_check(M, tiny)
    assert str(error.value) == (
        "count / order is 0.0 at M = 8 (count 5e-324, M = 8.0): too far apart for floats")


def test_a_ratio_that_overflows_a_float_is_refused():
    # M^-60 at M = 1e5 is 1e-300; a count of 1e10 over it is 1e310, past the largest float
    counts = {(("M", 10),): 1.0, (("M", 1e5),): 1e10}
    with pytest.raises(GradlabError, match=r"^count / order is inf at M = 100000.0 "):
        order_check(M**-60, counts)
