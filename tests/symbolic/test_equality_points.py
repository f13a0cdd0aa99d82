"""What ``symbolic_equality``'s default points can tell apart: false identities that a trial
found accepted as ``holds``: identities true only for the quadratics that stood in for abstract
functions, a slip visible only where ``x / tau`` is of order one, and a threshold shifted
between two sample points. Each false form here fails, and its true form still holds."""

from __future__ import annotations

import re

import pytest
import sympy as sp

from gradlab.symbolic import symbolic_equality
from gradlab.symbolic.claims import THRESHOLD_OFFSETS
from tests.helpers.witness import witness

X = sp.Symbol("x", real=True)
F, G = sp.Function("f"), sp.Function("g")


def _verdict(printed, truth, symbols=(X,)):
    return symbolic_equality(printed, truth, list(symbols)).verdict


def _taylor(order):
    return sum(sp.diff(F(X), X, i).subs(X, 0) * X**i / sp.factorial(i)
               for i in range(order + 1))  # fmt: skip


@pytest.mark.parametrize(("printed", "truth"), [
    (_taylor(2), F(X)),  # a second-order expansion claimed exact
    (_taylor(5), F(X)),
    (sp.Integer(0), sp.diff(F(X), X, 3)),  # f''' = 0
    (sp.diff(F(X), X, 2) * sp.diff(G(X), X),  # d/dx (f'' g) with the f''' g term dropped
     sp.diff(sp.diff(F(X), X, 2) * G(X), X)),
    (3 * sp.diff(F(X), X, 2) * sp.diff(G(X), X) + 3 * sp.diff(F(X), X) * sp.diff(G(X), X, 2),
     sp.diff(F(X) * G(X), X, 3)),  # Leibniz's third derivative without its two end terms
])  # fmt: skip
def test_an_identity_true_only_for_low_degree_stand_ins_fails(printed, truth):
    # was: holds ("vanishes at 12 random points"): every abstract function stood for a quadratic
    assert _verdict(printed, truth) == "fails"


def test_the_true_forms_with_abstract_functions_still_hold():
    leibniz = sum(sp.binomial(3, i) * sp.diff(F(X), X, i) * sp.diff(G(X), X, 3 - i)
                  for i in range(4))  # fmt: skip
    assert _verdict(leibniz, sp.diff(F(X) * G(X), X, 3)) == "holds"
    y = sp.Symbol("y", real=True)
    mixed = sp.diff(F(X, y), X, y)  # a function of two arguments: its mixed partial is no 0
    assert _verdict(sp.Integer(0), mixed, (X, y)) == "fails"
    assert _verdict(sp.diff(F(X, y), y, X), mixed, (X, y)) == "holds"


@pytest.mark.parametrize("tau", [sp.Rational(1, 10), sp.Rational(1, 1000), sp.Rational(1, 10**4)])
def test_a_sigmoid_slope_slip_fails_at_every_temperature(tau):
    # was: holds at tau = 1/1000, where every default point lay in the sigmoid's tails
    sigmoid = 1 / (1 + sp.exp(-X / tau))
    true_slope = sp.diff(sigmoid, X)
    assert _verdict(sigmoid * (1 - sigmoid) ** 2 / tau, true_slope) == "fails"
    assert _verdict(sigmoid * (1 - sigmoid) / tau, true_slope) == "holds"


@pytest.mark.parametrize(("printed", "truth"), [
    (sp.Piecewise((-1, X < 2), (0, True)), sp.Piecewise((-1, X < 1), (0, True))),
    (sp.Piecewise((-1, X < 0), (0, True)), sp.Piecewise((-1, X < 1), (0, True))),
    (sp.Piecewise((-1, X <= 1), (0, True)), sp.Piecewise((-1, X < 1), (0, True))),
    (sp.Piecewise((X, X < 5), (0, True)), sp.Piecewise((X, X < 3), (0, True))),
    (X, sp.Min(X, 200)),
    (sp.Max(X, 1), sp.Max(X, 2)),
])  # fmt: skip
def test_a_shifted_threshold_fails(printed, truth):
    # was: holds: the thresholds lay between two of the 12 fixed points
    assert _verdict(printed, truth) == "fails"
    assert _verdict(truth, truth) == "holds"


POSITIVE = sp.Symbol("x", positive=True)
SMALLEST_DEFAULT = sp.Rational(1, 13)  # no default point of a positive symbol lies below it
R = sp.Rational


def _detail(printed, truth, symbol):
    return symbolic_equality(printed, truth, [symbol]).detail


def _threshold_witness(printed, truth, symbols):
    """The failing verdict's witness point (symbol -> rational), checked against SymPy: the
    difference it shows is printed minus truth there, computed anew."""
    verdict = symbolic_equality(printed, truth, list(symbols))
    assert verdict.verdict == "fails", verdict.detail
    shown, named = witness(verdict.detail)
    point = {symbol: sp.Rational(named[str(symbol)]) for symbol in symbols}
    difference = (sp.sympify(printed) - truth).subs(point)
    assert difference != 0 and float(shown) == pytest.approx(float(difference), rel=1e-7)
    return point


@pytest.mark.parametrize(("printed", "truth"), [
    (sp.Max(POSITIVE, R(1, 200)), sp.Max(POSITIVE, R(1, 100))),  # crossings of a Max
    (sp.Max(2 * POSITIVE, R(1, 25)), 2 * POSITIVE),  # a crossing with a slope of 2: at 1/50
    (sp.Abs(POSITIVE - R(1, 50)), POSITIVE - R(1, 50)),  # kinks of Abs, sign, Heaviside
    (sp.sign(POSITIVE - R(1, 50)), sp.Integer(1)),
    (sp.Heaviside(POSITIVE - R(1, 50)), sp.Integer(1)),
    # a condition of irrational slope with a rational root: sqrt(2) x < sqrt(2)/50 at 1/50
    (sp.Piecewise((1, sp.sqrt(2) * POSITIVE < sp.sqrt(2) / 50), (0, True)), sp.Integer(0)),
], ids=["max", "max-of-2x", "abs", "sign", "heaviside", "irrational-slope"])  # fmt: skip
def test_a_kink_below_every_default_point_is_found_at_its_threshold(printed, truth):
    # the two sides differ only below 1/50 (or 1/100), where no default point of a positive
    # symbol lies: the witness is a point at or beside the kink
    point = _threshold_witness(printed, truth, [POSITIVE])
    assert 0 < point[POSITIVE] < SMALLEST_DEFAULT


def test_each_crossing_of_a_max_of_four_arguments_is_a_threshold():
    # -x - 200 is the largest argument only below x = -100, beyond every default point, and
    # only its crossing with x (the first and the third argument) marks where that begins
    printed = sp.Max(X, 2 * X, -X - 200, 3 * X + 50)
    point = _threshold_witness(printed, sp.Max(X, 2 * X, 3 * X + 50), [X])
    assert point[X] < -100


@pytest.mark.parametrize("other", [
    sp.Abs(POSITIVE - sp.Symbol("y", positive=True)),  # in two symbols: no threshold
    sp.Abs(POSITIVE**2 - 2),  # not linear: no threshold
], ids=["two-symbols", "square"])  # fmt: skip
def test_a_threshold_is_found_after_a_kink_that_gives_none(other):
    # the kink of ``other`` comes first in SymPy's order and adds no points; the one in y
    # (below every default point) still does
    y = sp.Symbol("y", positive=True)
    inside = other.args[0]
    truth = sp.Max(inside, -inside) + y - R(1, 50)  # ``other`` written another way
    point = _threshold_witness(other + sp.Abs(y - R(1, 50)), truth, [POSITIVE, y])
    assert 0 < point[y] < SMALLEST_DEFAULT


def test_thresholds_in_two_symbols_each_add_points():
    y = sp.Symbol("y", positive=True)
    printed = sp.Abs(POSITIVE - R(1, 50)) + sp.Abs(y - R(1, 50))
    point = _threshold_witness(printed, POSITIVE + y - R(1, 25), [POSITIVE, y])
    assert min(point.values()) < SMALLEST_DEFAULT


def test_a_threshold_s_points_are_tried_in_the_order_of_threshold_offsets():
    # a bump of height 1/50 - |x - 1/20| around 1/20, negative below it and positive above:
    # the witness is the first point of THRESHOLD_OFFSETS at which the two sides differ
    root = R(1, 20)
    printed = sp.Max(0, R(1, 50) - sp.Abs(POSITIVE - root)) * sp.sign(POSITIVE - root)
    first = next(root + offset for offset in THRESHOLD_OFFSETS
                 if printed.subs(POSITIVE, root + offset) != 0)  # fmt: skip
    assert _threshold_witness(printed, sp.Integer(0), [POSITIVE]) == {POSITIVE: first}


def _kink_at_zero(s, sign):
    """``max(s, 1/97) + floor(1 / (s + 1))`` against ``max(s, 1/97)`` written with ``Abs``
    (for ``sign`` -1 their mirror images in ``min`` and ``-1/97``): equal wherever ``s`` has the
    sign, and 1 apart at ``s = 0``, which lies 1/97 below (above) the threshold."""
    edge = sign * R(1, 97)
    extreme = sp.Max(s, edge) if sign > 0 else sp.Min(s, edge)
    printed = extreme + sp.floor(1 / (1 + sign * s))
    return printed, (s + edge + sign * sp.Abs(s - edge)) / 2


@pytest.mark.parametrize(("declared", "sign"), [("positive", 1), ("negative", -1)])
def test_a_threshold_point_outside_the_declared_sign_is_left_out(declared, sign):
    # of the three points at and beside the threshold, the one at 0 is left out: two count
    s = sp.Symbol("s", **{declared: True})
    printed, truth = _kink_at_zero(s, sign)
    assert _detail(printed, truth, s) == (
        "printed minus true vanishes at 12 random points and 2 at and beside its thresholds "
        "(50 digits).")


@pytest.mark.parametrize("declared", ["nonnegative", "nonpositive"])
def test_a_zero_threshold_of_a_signed_symbol_adds_no_point_of_the_other_sign(declared):
    # s * sign(s) is |s|: s for s >= 0, -s for s <= 0; the kink at 0 would add -1/97 and 1/97
    s = sp.Symbol("s", **{declared: True})
    truth = s if declared == "nonnegative" else -s
    assert symbolic_equality(s * sp.sign(s), truth, [s]).verdict == "holds"


@pytest.mark.parametrize(("declared", "sign"), [("nonnegative", 1), ("nonpositive", -1)])
def test_zero_is_a_threshold_point_of_a_symbol_that_may_be_zero(declared, sign):
    # the same forms as for a strictly signed symbol, now wrong at s = 0, which s may take
    s = sp.Symbol("s", **{declared: True})
    assert _threshold_witness(*_kink_at_zero(s, sign), [s]) == {s: 0}


INTEGER = sp.Symbol("n", integer=True, positive=True)


def test_an_integer_symbol_takes_only_the_integer_threshold_points():
    # floor(n/2) + ceiling(n/2) = n for every integer n; at 3 + 1/97 it is 3, not n: the
    # threshold at 3 adds the integers 2, 3 and 4 alone
    n = INTEGER
    printed = sp.Piecewise((sp.floor(n / 2) + sp.ceiling(n / 2), n > 3), (n, True))
    assert _detail(printed, n, n) == (
        "printed minus true vanishes at 12 random points and 3 at and beside its thresholds "
        "(50 digits).")


@pytest.mark.parametrize(("printed", "wrong_at"), [
    (sp.Min(INTEGER, 98), 99),  # min(n, 98) is n up to 98 and 98 from 99 on
    (sp.Piecewise((INTEGER, INTEGER <= 100), (0, True)), 101),  # 0 from 101 on
    (sp.Piecewise((INTEGER, INTEGER < sp.Rational(197, 2)), (0, True)), 99),  # 98.5: from 99
], ids=["min", "closed-bound", "between-integers"])  # fmt: skip
def test_an_integer_threshold_above_every_random_point_is_found_at_the_next_integer(
        printed, wrong_at):
    # was: holds: the random integers lie in 1..97, and the points 1/97 beside the threshold
    # were left out as no integers, so nothing above it was tried
    assert _threshold_witness(printed, INTEGER, [INTEGER]) == {INTEGER: wrong_at}


def test_zero_beside_a_threshold_at_one_is_tried_for_a_nonnegative_integer():
    # 1 - min(k, 1) is 1 at k = 0 alone, which no random point of 1..97 is; a positive k never
    # takes 0, so the same forms hold for it
    k = sp.Symbol("k", integer=True, nonnegative=True)
    assert _threshold_witness(1 - sp.Min(k, 1), sp.Integer(0), [k]) == {k: 0}
    assert _verdict(1 - sp.Min(INTEGER, 1), sp.Integer(0), [INTEGER]) == "holds"


def test_a_true_integer_threshold_identity_still_holds_tried_once_per_integer():
    # min(n, 98) written as a Piecewise: both thresholds at 98 add 97, 98 and 99, once
    n = INTEGER
    truth = sp.Piecewise((n, n <= 98), (98, True))
    assert _detail(sp.Min(n, 98), truth, n) == (
        "printed minus true vanishes at 12 random points and 3 at and beside its thresholds "
        "(50 digits).")


def test_integers_that_two_thresholds_of_one_symbol_share_are_tried_once():
    # thresholds at 3 and 4 of an integer n: 2, 3, 4 and 3, 4, 5 are four integers, not six
    n = INTEGER
    printed = sp.Min(n, 3) + sp.Max(n, 3) + sp.Min(n, 4) + sp.Max(n, 4) - n - 4
    tried = {value for root in (3, 4) for value in (root - 1, root, root + 1)}
    assert _detail(printed, n + 3, n) == (
        f"printed minus true vanishes at 12 random points and {len(tried)} at and beside its "
        "thresholds (50 digits).")


def test_a_threshold_witness_is_the_same_point_at_every_call():
    # the other symbols of a threshold point lie at a default point drawn from a fixed seed:
    # a record made twice says the same
    y = sp.Symbol("y", positive=True)
    printed = sp.Piecewise((y, sp.Eq(X, 0)), (0, True))  # y at x = 0 alone
    details = {symbolic_equality(printed, sp.Integer(0), [X, y]).detail for _ in range(3)}
    assert len(details) == 1
    assert _threshold_witness(printed, sp.Integer(0), [X, y])[X] == 0


def test_one_threshold_found_twice_adds_its_three_points_once():
    # max(x, 2) + min(x, 2) = x + 2: both cross at x = 2
    assert _detail(sp.Max(X, 2) + sp.Min(X, 2), X + 2, X) == (
        "printed minus true vanishes at 12 random points and 3 at and beside its thresholds "
        "(50 digits).")


@pytest.mark.slow
def test_at_most_sixteen_thresholds_add_points():
    # seventeen thresholds, at 1, ..., 17: three points at and beside each of the first 16
    kinks = sum(sp.Max(X, k) + sp.Min(X, k) - X - k for k in range(1, 18))
    assert _detail(kinks, sp.Integer(0), X) == (
        "printed minus true vanishes at 12 random points and 48 at and beside its thresholds "
        "(50 digits).")


def test_a_difference_undefined_at_every_point_counts_the_threshold_points_too():
    # zoo * 0 at every point: nan at the 12 random points and at the 3 at and beside x = 2
    verdict = symbolic_equality(sp.zoo * (sp.Max(X, 2) + sp.Min(X, 2) - X - 2), sp.Integer(0), [X])
    assert verdict.verdict == "inconclusive"
    assert re.fullmatch(
        re.escape("printed minus true is nan (not a number) at 15 of 12 random points and 3 at "
                  "and beside its thresholds (the first: ") + r"x = [-\d/]+"
        + re.escape("); sympy.simplify does not reduce it to 0: the random points cannot decide "
                    "(pass a sampler that avoids the points where printed or true is "
                    "undefined)."), verdict.detail)  # fmt: skip


def test_the_mixed_partials_of_two_functions_of_two_arguments_are_no_multiples():
    # was: holds: every stand-in's mixed part was (k + 1) x y (1 + x + y), so the mixed
    # partial of g was twice that of f
    y = sp.Symbol("y", real=True)
    assert _verdict(2 * sp.diff(F(X, y), X, y), sp.diff(G(X, y), X, y), (X, y)) == "fails"
    assert _verdict(sp.diff(F(X, y), X, y) + sp.diff(G(X, y), X, y),
                    sp.diff(F(X, y) + G(X, y), X, y), (X, y)) == "holds"  # fmt: skip


@pytest.mark.slow
def test_a_default_coordinate_s_sign_is_drawn_apart_from_its_magnitude():
    # the signs' stream was random.Random(-seed), which is random.Random(seed) (an int seed's
    # sign is dropped): the first point's sign came from the bits of its own magnitude, so an
    # integer of either sign at most 32 in magnitude was never negative there
    k = sp.Symbol("k", integer=True)
    seen = []

    class Spy(sp.Function):  # records the integer it is evaluated at, and is that integer
        @classmethod
        def eval(cls, arg):
            if arg.is_Integer:
                seen.append(int(arg))
                return arg
            return None

    firsts = []
    for points in range(1, 80):  # each count of points draws from its own seed
        seen.clear()
        sp.core.cache.clear_cache()  # else Spy(30) is answered from the cache, unrecorded
        assert symbolic_equality(Spy(k), k, [k], points=points).verdict == "holds"
        firsts.append(seen[0])
    kinds = {(value > 0, abs(value) <= 32) for value in firsts}
    assert kinds == {(True, True), (True, False), (False, True), (False, False)}
